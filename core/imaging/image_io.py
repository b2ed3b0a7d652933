"""One image reader for every template: an index image reference -> a channel-first array.

An index ``image_path`` (and a ``label_path``) may be any of these references:

* an image file: NIfTI (``.nii``/``.nii.gz``, nibabel through MONAI), NRRD/MHA/MHD (SimpleITK),
  PNG/JPEG/BMP/TIFF (PIL through MONAI), a DICOM file (pydicom; any suffix or none);
* a folder of 2D slices forming one 3D image: DICOM slices are ordered by their position along
  the slice normal (``ImagePositionPatient`` projected on the normal of
  ``ImageOrientationPatient``), never by file name; PNG/JPEG/... slices in natural-number order
  of their names (``slice_2`` before ``slice_10``);
* a series manifest ``<SeriesInstanceUID>.series.json``: ``{"series_instance_uid": ...,
  "files": [DICOM paths ordered by position]}`` (relative paths are relative to the manifest);
* an array file ``.npy``/``.npz``/``.pt``, or an element of one: ``file.npz::key[i]``,
  ``file.npz::key``, ``file.npy::[i]``, ``file.pt::[i]``;
* a pickled array ``.pck``/``.pkl``/``.pickle`` (and its elements), read ONLY when the caller
  passes ``allow_pickle=True``: unpickling runs code from the file;
* a list of any of these (or its JSON text, as a dict-keyed index must store it): channels in
  that fixed order (e.g. MRI sequences), stacked along the channel axis.

``read_image`` returns ``(array, meta)``: a float32 array ``(C, *spatial)`` in MONAI's axis order
(the first spatial axis is the image column, x; a stacked volume's slices are the last axis)
and a small dict with ``format``, ``spatial_shape``, and where the format has them ``affine``
(RAS, like MONAI's readers) and ``spacing`` (mm per spatial axis). ``ImageRefReader`` is the same
reader as a MONAI ``ImageReader``, so templates keep ``LoadImage``/``LoadImaged(reader=...)``.

Arrays without a channel axis get one. A stored array's layout is read this way: ``(H, W)`` one
channel; ``(H, W, 3|4)`` colour channels last; ``(1, H, W)`` one channel first; any other 3D
array a one-channel volume (``(4, H, W)`` is 4 slices); 4D: channels first when the first axis
has at most 4 entries, else channels last when the last has. Arrays keep their stored axis
order (no transpose).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from core.imaging.arrays import read_array_ref
from core.imaging.dicom import read_dicom_file, read_dicom_series
from core.imaging.refs import (ARRAY_SUFFIXES, DICOM_SUFFIXES, ELEMENT_RE, ITK_SUFFIXES,
                               ImageReadError, MANIFEST_SUFFIX, NIFTI_SUFFIXES, PICKLE_REFUSED,
                               PICKLE_SUFFIXES, RASTER_SUFFIXES, folder_slices, is_dicom_file,
                               parse_ref, read_manifest, suffix_of)


# ----------------------------------------------------------------------------- array layout


# ----------------------------------------------------------------------------- DICOM


# ----------------------------------------------------------------------------- other formats

_MONAI_READERS: dict = {}


def _monai_reader(name: str):
    if name not in _MONAI_READERS:
        from monai.data import NibabelReader, PILReader
        _MONAI_READERS[name] = {"nibabel": NibabelReader, "pil": PILReader}[name]()
    return _MONAI_READERS[name]


def _via_monai(name: str, path: Path, fmt: str) -> tuple[np.ndarray, dict]:
    """NIfTI and raster files through MONAI's own readers (their axis order and affine)."""
    reader = _monai_reader(name)
    try:
        arr, meta = reader.get_data(reader.read(str(path)))
    except Exception as exc:
        raise ImageReadError(f"{path}: cannot be read as {fmt} ({type(exc).__name__}: "
                             f"{str(exc)[:160]})") from exc
    channel = meta.get("original_channel_dim")
    arr = np.asarray(arr)
    arr = arr[None] if channel is None or (isinstance(channel, float) and np.isnan(channel)) \
        else np.moveaxis(arr, int(channel), 0)
    out = {"format": fmt}
    if meta.get("affine") is not None:
        from monai.data.utils import affine_to_spacing
        affine = np.asarray(meta["affine"], dtype=np.float64)
        out["affine"] = affine
        out["spacing"] = [float(s) for s in affine_to_spacing(affine, r=arr.ndim - 1)]
    return arr, out


def _read_itk(path: Path) -> tuple[np.ndarray, dict]:
    """NRRD / MHA / MHD with SimpleITK: array (C, x, y[, z]) and the RAS affine."""
    import SimpleITK as sitk
    try:
        image = sitk.ReadImage(str(path))
    except RuntimeError as exc:
        raise ImageReadError(f"{path}: SimpleITK cannot read it ({str(exc).strip()[:200]})") \
            from exc
    arr = sitk.GetArrayFromImage(image)  # (z, y, x[, components])
    dims = image.GetDimension()
    if image.GetNumberOfComponentsPerPixel() > 1:
        arr = np.moveaxis(arr, -1, 0)
        arr = np.transpose(arr, (0, *range(dims, 0, -1)))
    else:
        arr = np.transpose(arr, tuple(range(dims - 1, -1, -1)))[None]
    direction = np.asarray(image.GetDirection()).reshape(dims, dims)
    lps = np.eye(dims + 1)
    lps[:dims, :dims] = direction * np.asarray(image.GetSpacing())[None, :]
    lps[:dims, dims] = image.GetOrigin()
    flip = np.eye(dims + 1)
    flip[0, 0] = flip[1, 1] = -1.0
    return arr, {"format": suffix_of(path).lstrip("."), "affine": flip @ lps,
                 "spacing": [float(s) for s in image.GetSpacing()]}


def _read_file(path: Path) -> tuple[np.ndarray, dict]:
    suffix = suffix_of(path)
    if suffix in NIFTI_SUFFIXES:
        return _via_monai("nibabel", path, "nifti")
    if suffix in RASTER_SUFFIXES:
        return _via_monai("pil", path, suffix.lstrip(".").replace("jpeg", "jpg"))
    if suffix in ITK_SUFFIXES:
        return _read_itk(path)
    if is_dicom_file(path):
        return read_dicom_file(path)
    raise ImageReadError(f"{path}: unsupported image format {suffix or '(no suffix)'}; "
                         "supported: NIfTI, NRRD/MHA, PNG/JPEG/BMP/TIFF/GIF, DICOM, .npy/.npz/.pt, "
                         "a folder of slices, a *.series.json manifest")


def _read_folder(folder: Path) -> tuple[np.ndarray, dict]:
    slices = folder_slices(folder)  # raster slices in name order, else the DICOM files
    if suffix_of(slices[0]) not in RASTER_SUFFIXES:
        return read_dicom_series(slices, str(folder), images_only=True)
    arrays = [_via_monai("pil", p, "slice")[0] for p in slices]
    if len({s.shape[0] for s in arrays}) > 1:  # gray and colour slices mixed: all gray
        arrays = [s[:3].mean(0, keepdims=True) for s in arrays]
    shapes = {s.shape for s in arrays}
    if len(shapes) > 1:
        raise ImageReadError(f"{folder}: slices have different sizes {sorted(shapes)[:3]}")
    return np.stack(arrays, axis=-1), {"format": "slices", "num_slices": len(arrays),
                                       "stacked_slices": True}


def _read_one(ref: str, allow_pickle: bool) -> tuple[np.ndarray, dict]:
    if ELEMENT_RE.match(ref):
        return read_array_ref(ref, allow_pickle)
    path = Path(ref).expanduser()
    suffix = suffix_of(path)
    if suffix in PICKLE_SUFFIXES and not allow_pickle:
        raise ImageReadError(PICKLE_REFUSED.format(ref=ref))
    if not path.exists():
        raise FileNotFoundError(f"image {ref} does not exist")
    if path.is_dir():
        return _read_folder(path)
    if suffix == MANIFEST_SUFFIX:
        files, uid = read_manifest(path)
        return read_dicom_series(files, ref, uid)
    if suffix in ARRAY_SUFFIXES:
        return read_array_ref(ref, allow_pickle)
    return _read_file(path)


def _affine(meta: dict) -> np.ndarray | None:
    affine = meta.get("affine")
    if affine is None:
        return None
    affine = np.asarray(affine, dtype=np.float64)
    return affine if affine.shape == (4, 4) and np.isfinite(affine).all() and \
        abs(np.linalg.det(affine[:3, :3])) > 1e-9 else None


def _on_grid(parts: list[tuple[np.ndarray, dict]]) -> list[np.ndarray] | None:
    """Volumes of one exam on different grids (ADC and high b-value coarser and wider than
    T2), each resampled (trilinear, in world coordinates from its affine) onto the first one's
    grid; outside a volume's field of view, 0. None when a volume has no usable affine, or
    has the first one's affine but another shape (cut short: not another grid); series in
    other orientations or slabs (RSNA-MICCAI's sagittal T1w beside an axial FLAIR) are
    resampled."""
    first, meta0 = parts[0]
    a0 = _affine(meta0)
    if a0 is None or first.ndim != 4:
        return None
    from scipy.ndimage import map_coordinates

    grid = np.indices(first.shape[1:], dtype=np.float64).reshape(3, -1)
    world = a0 @ np.vstack([grid, np.ones((1, grid.shape[1]))])
    out = [first]
    for arr, meta in parts[1:]:
        affine = _affine(meta)
        if affine is None or arr.ndim != 4:
            return None
        if arr.shape == first.shape and np.allclose(affine, a0, atol=1e-4):
            out.append(arr)
            continue
        if np.allclose(affine, a0, rtol=1e-3, atol=1e-3):
            return None   # the same grid origin and voxels, another shape: a cut-short file
        coords = (np.linalg.inv(affine) @ world)[:3]
        out.append(np.stack([map_coordinates(c.astype(np.float32), coords, order=1,
                                             mode="constant", cval=0.0).reshape(first.shape[1:])
                             for c in arr]))
    return out


def _resized(arr: np.ndarray, shape: tuple) -> np.ndarray:
    """A (C, H, W) array resized (bilinear) to ``shape`` (H, W)."""
    if tuple(arr.shape[1:]) == tuple(shape):
        return arr
    from scipy.ndimage import zoom
    factors = [1.0] + [t / s for t, s in zip(shape, arr.shape[1:])]
    out = zoom(arr.astype(np.float32), factors, order=1)
    return out[:, :shape[0], :shape[1]]


def read_image(ref: Any, allow_pickle: bool = False) -> tuple[np.ndarray, dict]:
    """Read an index image reference (see the module docstring) -> (float32 array (C,
    *spatial), meta). Channel lists are stacked on the channel axis; their spatial shapes must
    agree. Raises FileNotFoundError for a missing file and ImageReadError for anything else."""
    parsed = parse_ref(ref)
    if isinstance(parsed, list):
        parts = [_read_one(r, allow_pickle) for r in parsed]
        shapes = [a.shape[1:] for a, _ in parts]
        resampled = []
        affines = [_affine(m) for _, m in parts]
        moved = any(a is not None and affines[0] is not None and
                    not np.allclose(a, affines[0], atol=1e-3) for a in affines[1:])
        if len(set(shapes)) > 1 and all(len(s) == 2 for s in shapes) and not moved:
            # 2D views of one record (left and right fundus, CC and MLO): each resized onto
            # the first one's size, as the loader resizes every image anyway
            parts = [(_resized(a, shapes[0]), m) for a, m in parts]
            resampled = [Path(r).name for r, s in zip(parsed, shapes) if s != shapes[0]]
        elif len(set(shapes)) > 1 or moved:
            # sequences of one exam on other grids (ADC, high b-value beside T2): resampled
            # onto the first channel's grid in world coordinates, as MRI pipelines do
            arrays = _on_grid(parts)
            if arrays is None:
                raise ImageReadError("channel files have different sizes: "
                                     + ", ".join(f"{Path(r).name} {tuple(s)}"
                                                 for r, s in zip(parsed, shapes))
                                     + " and no geometry (affine) to resample them by")
            resampled = [Path(r).name for r, s, a in zip(parsed, shapes, affines)
                         if s != shapes[0] or a is None or not np.allclose(a, affines[0],
                                                                           atol=1e-3)]
            parts = [(a, m) for a, (_, m) in zip(arrays, parts)]
        arr = np.concatenate([a for a, _ in parts], axis=0)
        meta = dict(parts[0][1])
        meta["channels_from"] = len(parsed)
        meta["channel_counts"] = [int(a.shape[0]) for a, _ in parts]
        if resampled:
            meta["resampled_channels"] = resampled
    else:
        arr, meta = _read_one(parsed, allow_pickle)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    meta["spatial_shape"] = list(arr.shape[1:])
    meta["ref"] = parsed if isinstance(parsed, str) else json.dumps(parsed)
    return arr, meta


# ----------------------------------------------------------------------------- MONAI reader

try:
    from monai.data import ImageReader as _MonaiImageReader
except ImportError:  # pragma: no cover - every template environment has MONAI
    _MonaiImageReader = object  # type: ignore[assignment,misc]


class ImageRefReader(_MonaiImageReader):  # type: ignore[misc,valid-type]
    """``read_image`` as a MONAI reader: ``LoadImage(reader=ImageRefReader(allow_pickle))``.
    A sequence of names is one image whose channels are those files (MONAI's convention);
    the array comes channel-first with ``original_channel_dim`` 0 and the RAS affine."""

    def __init__(self, allow_pickle: bool = False):
        super().__init__()
        self.allow_pickle = allow_pickle

    def verify_suffix(self, filename) -> bool:
        names = [filename] if isinstance(filename, (str, os.PathLike)) else list(filename)
        for name in names:
            text = str(name)
            if ELEMENT_RE.match(text) or Path(text).is_dir():
                continue
            suffix = suffix_of(text)
            if suffix not in (RASTER_SUFFIXES + NIFTI_SUFFIXES + ITK_SUFFIXES + DICOM_SUFFIXES
                              + ARRAY_SUFFIXES + (MANIFEST_SUFFIX,)) and \
                    not is_dicom_file(Path(text)):
                return False
        return True

    def read(self, data, **kwargs):
        names = [data] if isinstance(data, (str, os.PathLike)) else list(data)
        return [str(n) for n in names]

    def get_data(self, img) -> tuple[np.ndarray, dict]:
        arr, meta = read_image(img, allow_pickle=self.allow_pickle)
        out = {k: v for k, v in meta.items() if k not in ("affine", "spacing", "ref")}
        out.update({"original_channel_dim": 0, "spatial_shape": np.asarray(arr.shape[1:]),
                    "image_ref": meta["ref"]})
        if "affine" in meta:
            out["affine"] = np.asarray(meta["affine"], dtype=np.float64)
            out["original_affine"] = out["affine"].copy()
            out["space"] = "RAS"
        if "spacing" in meta:
            out["spacing"] = np.asarray(meta["spacing"], dtype=np.float64)
        return arr, out
