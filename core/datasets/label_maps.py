"""One label map per case from a dataset's per-structure binary masks
(core.datasets.layouts.mask_structures: TotalSegmentator ``segmentations/<structure>.nii.gz``,
Montgomery ``leftMask/`` + ``rightMask/``), written into the job's Datapath, never into the
dataset folder.

``write_label_maps`` turns each sample whose ``extra["label_path"]`` is a list of structure
mask files into ``<Datapath>/labelmaps/<case>.nii.gz`` (3D: on the image's grid, with its
affine) or ``<case>.png`` (2D), where structure ``labels[i]`` is value i + 1 and 0 is
background; a structure without a file in that case is absent. Where structures overlap, the
smaller one is drawn over the larger one (a lesion inside its organ stays visible); the voxels
claimed twice are counted in ``labelmaps/manifest.json``. A map whose sources are unchanged
since it was written is reused. Any nonzero voxel of a structure file is that structure
(JPEG masks: above half their maximum).

Samples whose masks are drawn annotations (``extra["drawing"]``: runs in a table, outlines in
XML or JSON) are drawn the same way into ``<case>.png`` by core.datasets.drawn_label_maps, and
listed in the same manifest with the file and encoding they were drawn from.

``check_structures`` is registration's check of such a sample (core.datasets.validation): a few
of its structure files decoded, each with one foreground value at most and its image's geometry.

May import: core.datasets.image_geometry, core.datasets.datacards, core.datasets.layouts.types,
core.datasets.drawn_label_maps.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from core.datasets.datacards import write_json_atomic
from core.datasets.drawn_label_maps import (DrawnMaskError, draw_label_map, drawn_signature,
                                            is_drawn_sample, manifest_facts)
from core.datasets.image_geometry import Geometry, geometry_error
from core.datasets.layouts.types import Sample, image_suffix

FOLDER = "labelmaps"
NIFTI = (".nii", ".nii.gz")
ITK = (".nrrd", ".nhdr", ".mha", ".mhd", ".hdr")
RASTER = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif")
MAX_CHECKED_STRUCTURES = 3   # structure files decoded per validated case


class LabelMapError(ValueError):
    """A case's structure masks cannot be merged (unreadable, or not on the image's grid)."""


def is_structure_sample(sample: Sample) -> bool:
    return isinstance(sample.extra.get("label_path"), list)


def label_files(sample: Sample) -> list[str]:
    """The mask files of a sample: its label map, or its structure mask files."""
    found = sample.extra.get("label_path")
    return [str(f) for f in found] if isinstance(found, list) else [str(found)] if found else []


# ----------------------------------------------------------------------------- reading

def _library(path: str) -> str:
    suffix = image_suffix(os.path.basename(path))
    return ("nibabel" if suffix in NIFTI else "itk" if suffix in ITK else
            "pil" if suffix in RASTER else "numpy" if suffix == ".npy" else "")


def read_structure(path: str, library: str = "") -> tuple[np.ndarray, Geometry, object]:
    """(voxels, geometry, the library's image object for writing) of one mask file; NIfTI and
    NumPy arrays keep their stored axis order (x first), SimpleITK's are (z, y, x), PIL's
    (rows, columns). Raises LabelMapError."""
    library = library or _library(path)
    try:
        if library == "nibabel":
            import nibabel as nib
            img = nib.load(path)
            array = np.asanyarray(img.dataobj)
            while array.ndim > 3 and array.shape[-1] == 1:
                array = array[..., 0]
            return array, Geometry(tuple(int(s) for s in array.shape),
                                   tuple(float(z) for z in img.header.get_zooms()[:3])), img
        if library == "itk":
            import SimpleITK as sitk
            img = sitk.ReadImage(path)
            return sitk.GetArrayFromImage(img), Geometry(tuple(img.GetSize()),
                                                         tuple(img.GetSpacing())), img
        if library == "pil":
            from PIL import Image
            with Image.open(path) as img:
                img.load()
                if img.mode not in ("L", "I", "I;16", "F"):
                    img = img.convert("L")   # palette (GIF), RGB(A), 1-bit: by luminance
                array = np.asarray(img)
                return array, Geometry((array.shape[1], array.shape[0]), None), None
        if library == "numpy":
            array = np.load(path, allow_pickle=False)
            return array, Geometry(tuple(int(s) for s in array.shape), None), None
    except Exception as exc:  # noqa: BLE001 - any decoder error: the file is unusable
        raise LabelMapError(f"{path}: cannot be read ({type(exc).__name__}: "
                            f"{str(exc)[:120]})") from exc
    raise LabelMapError(f"{path}: not a mask format the label maps read")


def foreground(path: str, array: np.ndarray) -> np.ndarray:
    if image_suffix(os.path.basename(path)) in (".jpg", ".jpeg") and array.size:
        return array > array.max() / 2   # lossy: near-black is background
    return array > 0


# ----------------------------------------------------------------------------- merging

def _merge(files: list[str], values: list[int], image: str, out_base: Path) -> tuple[Path, dict]:
    """Write one case's label map; (its path, facts)."""
    libraries = {_library(f) for f in files}
    library = libraries.pop() if len(libraries) == 1 else "itk"
    if library == "nibabel" and _library(image) != "nibabel":
        library = "itk" if _library(image) == "itk" else library
    merged, reference, masks = None, None, []
    for file, value in zip(files, values):
        array, _, img = read_structure(file, library)
        mask = foreground(file, array)
        if merged is None:
            merged = np.zeros(mask.shape, np.uint8 if max(values) < 256 else np.uint16)
            reference = img
        elif mask.shape != merged.shape:
            raise LabelMapError(f"{file}: shape {list(mask.shape)} differs from the case's "
                                f"other structure masks {list(merged.shape)}")
        masks.append((int(mask.sum()), value, file, mask))
    overlap = np.zeros(merged.shape, bool)
    for _, value, _, mask in sorted(masks, key=lambda m: -m[0]):  # larger first, smaller on top
        overlap |= mask & (merged > 0)
        merged[mask] = value
    facts = {"overlap_voxels": int(np.count_nonzero(overlap))}
    if library == "pil" or (library == "numpy" and merged.ndim == 2):
        from PIL import Image
        if _library(image) == "pil":
            with Image.open(image) as img:
                if (img.size[1], img.size[0]) != merged.shape:
                    raise LabelMapError(f"{files[0]}: size {[merged.shape[1], merged.shape[0]]}"
                                        f" but its image is {list(img.size)}; a mask must be "
                                        "on its image's grid")
        path = out_base.parent / (out_base.name + ".png")
        Image.fromarray(merged).save(path)
        return path, facts
    if library == "numpy":
        path = out_base.parent / (out_base.name + ".npy")
        np.save(path, merged)
        return path, facts
    path = out_base.parent / (out_base.name + ".nii.gz")
    if library == "nibabel":
        import nibabel as nib
        ref = nib.load(image) if _library(image) == "nibabel" else reference
        if _spatial(ref.shape) != _spatial(merged.shape):
            raise LabelMapError(f"{files[0]}: shape {list(merged.shape)} but its image is "
                                f"{list(ref.shape)}; a mask must be on its image's grid")
        out = nib.Nifti1Image(merged, ref.affine)
        out.set_data_dtype(merged.dtype)
        nib.save(out, str(path))
        return path, facts
    import SimpleITK as sitk
    out = sitk.GetImageFromArray(merged)
    info = reference
    if _library(image) == "itk" or _library(image) == "nibabel":
        reader = sitk.ImageFileReader()
        reader.SetFileName(image)
        reader.ReadImageInformation()
        if tuple(reader.GetSize()[:merged.ndim]) != tuple(out.GetSize()):
            raise LabelMapError(f"{files[0]}: size {list(out.GetSize())} but its image is "
                                f"{list(reader.GetSize())}; a mask must be on its image's grid")
        info = reader
    if info is not None:
        out.SetOrigin(info.GetOrigin()[:merged.ndim])
        out.SetSpacing(info.GetSpacing()[:merged.ndim])
        direction = np.array(info.GetDirection()).reshape(info.GetDimension(), -1)
        out.SetDirection(tuple(direction[:merged.ndim, :merged.ndim].ravel()))
    sitk.WriteImage(out, str(path), True)
    return path, facts


def _spatial(shape) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)[:3]
    while len(shape) > 2 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _signature(files: list[str], values: list[int]) -> str:
    parts = []
    for file in files:
        st = os.stat(file)
        parts.append(f"{file}|{st.st_size}|{st.st_mtime_ns}")
    return hashlib.sha1(json.dumps([parts, values]).encode()).hexdigest()


def _case_name(sample: Sample, used: set[str]) -> str:
    image = sample.image[0] if isinstance(sample.image, list) else sample.image
    raw = str(sample.extra.get("case") or Path(str(image)).name.split(".")[0])
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("._") or "case"
    if name.lower() in used:
        name += "-" + hashlib.sha1(str(image).encode()).hexdigest()[:8]
    used.add(name.lower())
    return name


def write_label_maps(samples: list[Sample], labels: list[str], datapath: str | os.PathLike,
                     workers: int | None = None) -> tuple[list[Sample], dict]:
    """Samples whose structure masks are merged into one label map each (see the module doc),
    the others unchanged, and a summary (also written as ``labelmaps/manifest.json``). Raises
    LabelMapError naming the file that cannot be merged."""
    todo = [s for s in samples if is_structure_sample(s) or is_drawn_sample(s)]
    if not todo:
        return samples, {}
    folder = Path(datapath) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / "manifest.json"
    try:
        old = json.loads(manifest_path.read_text()).get("cases", {})
    except (OSError, ValueError, AttributeError):
        old = {}
    value_of = {name: i + 1 for i, name in enumerate(labels)}
    used: set[str] = set()
    jobs = []
    for sample in todo:
        if is_drawn_sample(sample):
            jobs.append((sample, _case_name(sample, used), None))
            continue
        names = list(sample.extra.get("label_structures") or [])
        if len(names) != len(sample.extra["label_path"]) or any(n not in value_of for n in names):
            raise LabelMapError(f"the structure masks of {sample.image} do not name the "
                                f"dataset's labels ({', '.join(labels[:6])})")
        jobs.append((sample, _case_name(sample, used), [value_of[n] for n in names]))

    def one(job):
        sample, name, values = job
        image = str(sample.image[0] if isinstance(sample.image, list) else sample.image)
        if values is None:
            return name, _drawn(sample, image, name)
        files = [str(f) for f in sample.extra["label_path"]]
        signature = _signature(files, values)
        entry = old.get(name) or {}
        if entry.get("signature") == signature and Path(entry.get("label_map", "")).is_file():
            return name, entry
        path, facts = _merge(files, values, image, folder / name)
        return name, {"image": image, "label_map": str(path.resolve()), "files": files,
                      "values": values, "signature": signature, **facts,
                      "absent": list(sample.extra.get("structures_without_file") or [])}

    def _drawn(sample, image, name):
        signature = drawn_signature(sample, value_of)
        entry = old.get(name) or {}
        if entry.get("signature") == signature and Path(entry.get("label_map", "")).is_file():
            return entry
        try:
            path, facts = draw_label_map(sample, value_of, folder / name)
        except DrawnMaskError as exc:
            raise LabelMapError(str(exc)) from None
        return {"image": image, "label_map": str(path.resolve()), **manifest_facts(sample),
                "values": sorted(value_of[n] for n, k in facts["pixels"].items() if k),
                "signature": signature, **facts}

    workers = workers or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        done = dict(pool.map(one, jobs))
    out, by_id = [], {id(s): done[n] for s, n, _ in jobs}
    for sample in samples:
        entry = by_id.get(id(sample))
        if entry is None:
            out.append(sample)
            continue
        extra = {**sample.extra, "label_path": entry["label_map"],
                 "structure_files": entry["files"]}
        extra.pop("label_values", None)
        extra.pop("drawing", None)   # drawn: now a label map like any other
        out.append(dataclasses.replace(sample, extra=extra))
    overlapping = sorted(n for n, e in done.items() if e.get("overlap_voxels"))
    summary = {"folder": str(folder.resolve()), "label_maps": len(done), "labels": labels,
               "cases_with_overlap": len(overlapping),
               "cases_missing_a_structure_file": sum(bool(e.get("absent"))
                                                     for e in done.values())}
    drawn = [e for e in done.values() if e.get("drawn_from")]
    if drawn:
        summary["drawn_from_annotations"] = len(drawn)
        summary["cases_without_finding"] = sum(bool(e.get("empty")) for e in drawn)
    if overlapping:
        summary["note"] = (f"structures overlap in {len(overlapping)} cases (e.g. "
                           f"{', '.join(overlapping[:3])}); there the smaller structure is "
                           "drawn over the larger one")
    write_json_atomic(manifest_path, {**summary, "cases": done})
    return out, summary


# ----------------------------------------------------------------------------- validation

def check_structures(sample: Sample, labels: list[str], image: Geometry | None
                     ) -> tuple[list[tuple[str, str]], set[int], int]:
    """(problems as (kind, where), label values seen, files decoded) of a structure-mask sample:
    up to ``MAX_CHECKED_STRUCTURES`` of its files (first, middle, last) decoded, each holding
    one foreground value at most and on its image's grid. A structure counts as seen when its
    file exists (an empty file is a structure out of view, not a wrong label)."""
    files = label_files(sample)
    names = list(sample.extra.get("label_structures") or [])
    seen = {labels.index(n) + 1 for n in names if n in labels}
    picks = sorted({0, len(files) // 2, len(files) - 1}) if files else []
    problems, decoded = [], 0
    for i in picks[:MAX_CHECKED_STRUCTURES]:
        try:
            array, geometry, _ = read_structure(files[i])
        except LabelMapError as exc:
            problems.append(("decode", str(exc)))
            continue
        decoded += 1
        values = np.unique(array)
        nonzero = [v for v in values.tolist() if v]
        lossy = image_suffix(os.path.basename(files[i])) in (".jpg", ".jpeg")
        if not lossy and (len(nonzero) > 1 or any(float(v) % 1 for v in nonzero)):
            problems.append(("structure_values", f"{files[i]} holds {nonzero[:5]}"))
        if image is not None and (why := geometry_error(image, geometry)):
            problems.append(("geometry", f"{files[i]}: {why}"))
    return problems, seen, decoded
