"""Datasets stored as arrays rather than image files.

* ``array_npz``: MedMNIST-style ``.npz`` files holding ``train_images`` / ``train_labels`` (and
  ``val_*`` / ``test_*``; also ``images``/``labels`` and ``x_train``/``y_train``), and the same
  in HDF5 files (``train/images`` groups too), or one array per file in ``<base>_x.h5`` +
  ``<base>_y.h5`` pairs (PCam). Every element is one sample whose image reference is
  ``<file>::<key>[<index>]`` (HDF5 elements are read one by one, never the whole file); the
  file's split is kept; labels come from the ``*_labels`` arrays — codes named from the
  datacard description ("0: normal, 1: pneumonia"), else kept as code strings; an (N, K) 0/1
  label array is multi-label. Only array headers and label arrays are read, never the images.
* per-sample volumes (``.npy``, ``.pt``, pickled ``.pck`` / ``.pkl``) with a label table (ADNI:
  ``.pt`` + a CSV with ``Image Data ID`` and ``Group``; KneeMRI: ``.pck`` + a CSV with
  ``volumeFilename`` and ``aclDiagnosis``): the table is read by the records engine
  (core.datasets.records, which takes these volumes as the samples when they are the folder's
  files: ``per_sample_arrays``); ``add_array_facts`` gives the reading its format and the
  dimension one file's shape gives. Pickles are flagged (``details["needs_pickle"]``):
  unpickling runs code from the file, so registration asks for the datacard's ``allow_pickle``.

Shapes are read without running pickled code: ``.npy`` headers, ``torch.load(weights_only=True)``
for ``.pt``, and for pickles an unpickler that only rebuilds NumPy arrays.
"""
from __future__ import annotations

import re
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

from core.datasets.layouts.tables import code_mapping
from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.layouts.array_headers import (ARRAY_SUFFIXES, PICKLE_SUFFIXES, PICKLE_WARNING,
                                                 array_shape, container_headers,
                                                 dimension_of_shape)

SPLIT_KEYS = {"train": "train", "training": "train", "val": "val", "valid": "val",
              "validation": "val", "test": "test"}
# (images key, labels key) patterns; {s} is a split name
KEY_PAIRS = [("{s}_images", "{s}_labels"), ("x_{s}", "y_{s}"), ("{s}_x", "{s}_y"),
             ("images_{s}", "labels_{s}"), ("{s}/images", "{s}/labels"), ("{s}/x", "{s}/y"),
             ("images", "labels"), ("x", "y"), ("imgs", "labels")]
CONTAINER_SUFFIXES = (".npz", ".h5", ".hdf5")
# one array per file, the images and the labels in two files (PCam:
# camelyonpatch_level_2_split_train_x.h5 + ..._train_y.h5)
PART_STEM = re.compile(r"^(?P<base>.+?)[_\-](?P<part>x|y|images?|imgs|labels?|targets?)$", re.I)


def _split_of_stem(stem: str) -> str:
    found = {SPLIT_KEYS[t] for t in re.split(r"[^a-z]+", stem.lower()) if t in SPLIT_KEYS}
    return found.pop() if len(found) == 1 else ""


def _npz_pairs(headers: dict) -> list[tuple[str, str, str]]:
    """(images key, labels key, split) pairs whose lengths agree."""
    lower = {k.lower(): k for k in headers}
    pairs = []
    for image_pattern, label_pattern in KEY_PAIRS:
        for split in (["train", "training", "val", "valid", "validation", "test"]
                      if "{s}" in image_pattern else [""]):
            image_key = lower.get(image_pattern.format(s=split))
            label_key = lower.get(label_pattern.format(s=split))
            if not image_key or not label_key or any(image_key == p[0] for p in pairs):
                continue
            image_shape, label_shape = headers[image_key][0], headers[label_key][0]
            if len(image_shape) >= 3 and label_shape and label_shape[0] == image_shape[0]:
                pairs.append((image_key, label_key, SPLIT_KEYS.get(split, "")))
    return pairs


def _label_rows(labels: np.ndarray) -> tuple[list[list[str]], bool]:
    """Each element's label codes, and whether the array is multi-label ((N, K) of 0/1)."""
    if labels.ndim > 2 and all(n == 1 for n in labels.shape[1:]):
        labels = labels.reshape(len(labels))   # PCam's y: (N, 1, 1, 1)
    if labels.ndim == 1 or (labels.ndim == 2 and labels.shape[1] == 1):
        flat = labels.reshape(-1)
        as_text = [str(int(v)) if np.issubdtype(flat.dtype, np.number) and float(v).is_integer()
                   else str(v) for v in flat.tolist()]
        return [[v] for v in as_text], False
    if labels.ndim == 2 and set(np.unique(labels).tolist()) <= {0, 1}:
        return [[str(k) for k in np.flatnonzero(row)] for row in labels], True
    raise ValueError(f"label array of shape {labels.shape} is neither codes nor 0/1 columns")


def _read_array(path: Path, key: str) -> np.ndarray:
    """One whole array of an ``.npz`` or HDF5 file (the label arrays only: small)."""
    if path.name.lower().endswith((".h5", ".hdf5")):
        import h5py
        with h5py.File(path, "r") as handle:
            return np.asarray(handle[key][()])
    with np.load(path, allow_pickle=False) as data:
        return data[key]


def _containers(files: list[Path], skipped: list[str]) -> list[tuple[Path, dict, dict]]:
    """(name, {key: (shape, dtype)}, {key: (file, key in the file)}) per array container: each
    ``.npz``/HDF5 file, and a pair of one-array files named ``<base>_x`` / ``<base>_y``
    (images / labels) as one container whose keys are ``x`` and ``y``."""
    out, parts = [], {}
    for path in files:
        try:
            headers = container_headers(path)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            skipped.append(f"{path}: not a readable array container ({type(exc).__name__})")
            continue
        stem = path.name.rsplit(".", 1)[0]
        part = PART_STEM.match(stem)
        if part and len(headers) == 1:
            role = "x" if part["part"].lower()[0] in "xi" else "y"
            parts.setdefault((path.parent, part["base"]), {})[role] = (path, headers)
            continue
        out.append((path, headers, {k: (path, k) for k in headers}))
    for (_, base), found in parts.items():
        if set(found) != {"x", "y"}:
            for path, headers in found.values():
                out.append((path, headers, {k: (path, k) for k in headers}))
            continue
        headers, where = {}, {}
        for role, (path, inner) in found.items():
            key = next(iter(inner))
            headers[role], where[role] = inner[key], (path, key)
        out.append((found["x"][0], headers, where))
    return out


def scan_npz(root: Path, files: list[Path], description: str = ""):
    """An ``array_npz`` ScanResult for the labelled arrays in ``files`` (``.npz`` and HDF5),
    or None."""
    samples, skipped, shapes, multi_any, used, width = [], [], [], False, [], 0
    code_rows: list[tuple[Path, str, str, int, list[str]]] = []
    for path, headers, where in _containers(files, skipped):
        pairs = _npz_pairs(headers)
        if not pairs:
            skipped.append(f"{path}: no images/labels array pair (e.g. train_images + "
                           "train_labels)")
            continue
        file_split = _split_of_stem(path.stem)
        for image_key, label_key, split in pairs:
            try:
                rows, multi = _label_rows(_read_array(*where[label_key]))
            except (ValueError, OSError, KeyError) as exc:
                skipped.append(f"{path}::{label_key}: {exc}")
                continue
            multi_any = multi_any or multi
            width = max(width, headers[label_key][0][-1] if multi else 0)
            shapes.append(headers[image_key][0][1:])
            image_file, image_name = where[image_key]
            code_rows += [(image_file, image_name, split or file_split, i, codes)
                          for i, codes in enumerate(rows)]
        used.append(str(path))
        paired = {k for p in pairs for k in p[:2]}
        skipped += [f"{path}::{k}: array not used" for k in headers if k not in paired]
    if not code_rows:
        return None
    codes = sorted({c for *_, cs in code_rows for c in cs},
                   key=lambda c: (not c.lstrip("-").isdigit(), int(c) if c.lstrip("-").isdigit()
                                  else 0, c))
    if multi_any:  # a multi-label array names every column, set or not
        codes = sorted(set(codes) | {str(k) for k in range(width)}, key=int)
    names = code_mapping(description, codes) if all(c.lstrip("-").isdigit() for c in codes) \
        else {}
    for path, image_key, split, i, cs in code_rows:
        labels = [names.get(c, c) for c in cs]
        samples.append(Sample(f"{path}::{image_key}[{i}]", labels[0] if labels else "(none)",
                              f"{path.stem}/{image_key}/{i}", split,
                              labels if multi_any else None))
    counts = Counter(lbl for s in samples for lbl in s.label_list())
    classes = [names.get(c, c) for c in codes if names.get(c, c) in counts]
    splits = {s.split for s in samples}
    dimension = Counter(dimension_of_shape(s) for s in shapes).most_common(1)[0][0]
    return ScanResult(
        root=str(root), layout="array_npz", task="diagnosis", dimension=dimension,
        file_format=Path(used[0]).suffix.lstrip(".").lower() if used else "npz",
        classes=classes, class_counts={c: counts[c] for c in classes},
        samples=samples, group_source="none (one group per image)",
        existing_split="test" in splits and bool(splits & {"train", "val"}) and "" not in splits,
        skipped=skipped, num_files=len(samples),
        details={"files": used, "code_names": names, "multi_label": multi_any,
                 "element_shape": list(shapes[0]) if shapes else None})


# --------------------------------------------------------------------------- volume files
def per_sample_arrays(array_files: list[Path], images: int) -> list[Path]:
    """The per-sample array volumes among ``array_files`` (``.npy``, ``.pt``, pickles; not
    ``.npz``) when they are the folder's samples: at least two, and no fewer than its ordinary
    image files. A label table names them as it names images (core.datasets.records)."""
    arrays = [p for p in array_files if p.name.lower().endswith(ARRAY_SUFFIXES)]
    return arrays if len(arrays) >= 2 and len(arrays) >= images else []


def add_array_facts(result: ScanResult, description: str = "") -> ScanResult:
    """``result`` (a reading of per-sample array volumes) with the file format its suffix
    gives, the dimension one file's shape gives, and the pickle flag (registration then asks
    for the datacard's ``allow_pickle``); unchanged when its samples are not such arrays."""
    files = [Path(s.image) for s in result.samples[:50] if isinstance(s.image, str)]
    suffix = Counter(p.suffix.lower() for p in files).most_common(1)[0][0] if files else ""
    if suffix not in ARRAY_SUFFIXES:   # (the first samples tell: 100,000 Paths cost seconds)
        return result
    shape, needs_pickle = array_shape(files[0])
    needs_pickle = needs_pickle or suffix in PICKLE_SUFFIXES
    result.file_format = suffix.lstrip(".")
    result.dimension = dimension_of_shape(shape) or \
        ("3D" if re.search(r"\b3-?d\b|volume", description, re.I) else "2D")
    result.details.update(element_shape=list(shape) if shape else None,
                          needs_pickle=needs_pickle)
    if needs_pickle:
        result.details["warning"] = PICKLE_WARNING
    return result


def recognise_array_files(root: Path, top_dirs: list[Path], top_files: list[Path],
                          description: str):
    """Scan recogniser: labelled .npz arrays (per-sample volumes with a label table are the
    records engine's: core.datasets.records.reading)."""
    npz = [f for f in top_files if f.name.lower().endswith(CONTAINER_SUFFIXES)]
    return scan_npz(root, npz, description) if npz else None


def pickle_check(scan, allow_pickle: bool) -> tuple[list[str], list[str]]:
    """(errors, warnings) for registering a scan whose volumes need unpickling: an error unless
    the datacard allows pickles, a warning when it does."""
    if not scan.details.get("needs_pickle"):
        return [], []
    if allow_pickle:
        return [], [PICKLE_WARNING]
    return [f"{PICKLE_WARNING}. Register the dataset with allow_pickle (datacard field "
            "\"allow_pickle\": true) only if you trust the source, or convert the volumes to "
            ".npy or NIfTI"], []


def element_ref_ok(ref: str) -> bool:
    """True when ``<file.npz>::<key>[<index>]`` names an existing array and an index inside it
    (headers only)."""
    match = re.fullmatch(r"(?P<file>.+\.(?:npz|h5|hdf5))::(?P<key>[^\[\]]+)\[(?P<index>\d+)\]",
                         ref)
    if not match or not Path(match["file"]).is_file():
        return False
    try:
        headers = container_headers(Path(match["file"]))
    except (OSError, ValueError, zipfile.BadZipFile):
        return False
    shape = headers.get(match["key"], ((),))[0]
    return bool(shape) and int(match["index"]) < shape[0]
