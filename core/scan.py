"""Read-only scan of a dataset folder: which files, which layout, which labels, which patients.

This is the Data Engineer's eyes and the registration form's first draft. It never writes and
never decodes more than a few images (``probe_images``). Layouts recognised so far:

* ``label_table``: a CSV/TSV beside the images names each image's label(s) and, when it has one,
  its patient (core.scan_tables);
* ``class_folders``: one folder per class holding image files (2D), or holding one sub-folder per
  scan with its slices (3D, one sample per sub-folder); optional ``train/ val/ test/`` parents,
  whose split is kept.
"""
from __future__ import annotations

import os
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.scan_layouts import (IMAGE_DIRS, classification_only, recognise_list_layouts,
                               scan_boxes, scan_masks, scan_reports)
from core.scan_tables import TABLE_SUFFIXES, recognise_label_table, scan_label_table
from core.layout_arrays import recognise_array_files  # it imports core.scan lazily
from core.layout_filenames import recognise_filename_labels  # it imports core.scan lazily
from core.layout_dicom import recognise_dicom_series  # it imports core.scan lazily

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".dcm", ".dicom",
                  ".nii", ".nii.gz", ".nrrd", ".mha", ".mhd", ".npy", ".npz", ".pt")
FORMAT_OF_SUFFIX = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg", ".bmp": "bmp", ".tif": "tiff",
                    ".tiff": "tiff", ".dcm": "dicom", ".dicom": "dicom", ".nii": "nifti",
                    ".nii.gz": "nifti", ".nrrd": "nrrd", ".mha": "mha", ".mhd": "mha",
                    ".npy": "npy", ".npz": "npz", ".pt": "pt"}
SPLIT_NAMES = {"train": "train", "training": "train", "val": "val", "valid": "val",
               "validation": "val", "test": "test", "testing": "test"}
# patient/subject prefixes of names: patient0012_..., sub-03..., case7..., and BIDS subject
# labels that are not only digits (sub-verse004_ct)
GROUP_RE = re.compile(r"^(?P<key>(?:patient|person|subject|sub|pat|case|pt|id)[-_ ]?\d+|"
                      r"sub-[a-z0-9]+(?=[_.]|$))", re.IGNORECASE)
MAX_FILES = 2_000_000


class ScanError(ValueError):
    """The folder cannot be used as it is; the message says why and what to do."""


@dataclass
class Sample:
    image: str | list[str]  # absolute path: a file, a folder of slices (3D), or channel files
    label: str            # the label (single-label) or the stratum used for splitting
    group: str            # patient / subject key used for leakage-free splits
    split: str = ""       # "train" / "val" / "test" when the dataset already has a split
    labels: list[str] | None = None   # multi-label: every label of the image ([] = negative)
    extra: dict = field(default_factory=dict)  # label_path / boxes / findings, by layout

    def label_list(self) -> list[str]:
        return self.labels if self.labels is not None else [self.label]


@dataclass
class ScanResult:
    root: str
    layout: str
    task: str
    dimension: str
    file_format: str
    classes: list[str]
    class_counts: dict[str, int]
    samples: list[Sample]
    group_source: str                  # "filename prefix" or "none (one group per image)"
    existing_split: bool
    skipped: list[str] = field(default_factory=list)   # files ignored, with reasons
    num_files: int = 0
    details: dict = field(default_factory=dict)         # layout-specific facts (table columns)

    def summary(self, max_examples: int = 3) -> dict:
        """Metadata only (no pixels), small enough for a prompt or the UI."""
        data = asdict(self)
        data.pop("samples")
        data["num_samples"] = len(self.samples)
        data["num_groups"] = len({s.group for s in self.samples})
        data["examples"] = [asdict(s) for s in self.samples[:max_examples]]
        data["skipped"] = self.skipped[:10]
        data["num_skipped"] = len(self.skipped)
        return data


def image_suffix(name: str) -> str:
    lower = name.lower()
    if lower.endswith(".nii.gz"):
        return ".nii.gz"
    return os.path.splitext(lower)[1]


def is_image(name: str) -> bool:
    return not name.startswith(".") and image_suffix(name) in IMAGE_SUFFIXES


def group_of(path: Path | str) -> tuple[str, bool]:
    """Patient key from a file or folder name (``patient0012_2.png`` -> ``patient0012``)."""
    name = os.path.basename(path) if isinstance(path, str) else path.name
    suffix = image_suffix(name)
    stem = name[: -len(suffix)] if suffix else name
    match = GROUP_RE.match(stem)
    if match:
        return re.sub(r"[-_ ]", "", match.group("key")).lower(), True
    return stem, False


def _entries(folder: Path) -> tuple[list[Path], list[Path]]:
    dirs, files = [], []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(Path(entry.path))
                elif entry.is_file():
                    files.append(Path(entry.path))
    except PermissionError as exc:
        raise ScanError(f"cannot read folder {folder}: permission denied. "
                        "Give the app read access to it.") from exc
    return sorted(dirs), sorted(files)


def _entry_names(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Like _entries, but files as sorted (name, path) strings: no Path per file, which is
    most of a 100,000-file class folder's scan time."""
    dirs, files = [], []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.is_file():
                    files.append((entry.name, entry.path))
    except PermissionError as exc:
        raise ScanError(f"cannot read folder {folder}: permission denied. "
                        "Give the app read access to it.") from exc
    return [folder / d for d in sorted(dirs)], sorted(files)


def _class_folder_samples(class_dir: Path, label: str, split: str,
                          skipped: list[str]) -> tuple[list[Sample], str, int]:
    """Samples of one class folder: its image files (2D), its sub-folders of slices (one 3D
    sample each), or patient folders holding one sub-folder of slices per scan
    (``CLASS/<patient>/<scan>/``, CC-CCII), whose scans share the patient's group. Returns
    (samples, dimension, how many samples a patient folder grouped)."""
    sub_dirs, files = _entry_names(class_dir)
    skipped.extend(f"{path}: not an image file" for name, path in files if not is_image(name))
    samples: list[Sample] = []
    for name, path in files:
        if is_image(name):
            samples.append(Sample(path, label, group_of(name)[0], split))
    dimension, by_patient_folder = "2D", 0
    for scan_dir in sub_dirs:  # one sub-folder per scan holding its slices -> one 3D sample
        scan_dirs, slice_files = _entries(scan_dir)
        if any(is_image(f.name) for f in slice_files):
            group, _ = group_of(scan_dir)
            samples.append(Sample(str(scan_dir), label, group, split))
            dimension = "3D"
            continue
        scans = [d for d in scan_dirs if any(is_image(f.name) for f in _entries(d)[1])]
        for scan in scans:  # a patient folder: every scan in it belongs to that patient
            samples.append(Sample(str(scan), label, f"{label}/{scan_dir.name}"
                                  if not group_of(scan_dir)[1] else group_of(scan_dir)[0], split))
            dimension, by_patient_folder = "3D", by_patient_folder + 1
        skipped.extend(f"{d}: folder without image files" for d in scan_dirs if d not in scans)
        if not scans:
            skipped.append(f"{scan_dir}: folder without image files")
    return samples, dimension, by_patient_folder


_WALKS = threading.local()  # the folder walks of the scan running in this thread


def _all_images(root: Path, limit: int = MAX_FILES) -> list[Path]:
    """Every image file under root, sorted. Walked once per scan_folder call: the recognisers
    that need the list share it (a copy each)."""
    cache = getattr(_WALKS, "cache", None)
    key = (str(root), limit)
    if cache is not None and key in cache:
        return list(cache[key])
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(folder)
        found.extend(base / f for f in sorted(files) if is_image(f))
        if len(found) > limit:
            raise ScanError(f"more than {limit} image files under {root}; register a smaller "
                            "folder")
    if cache is not None:
        cache[key] = found
        return list(found)
    return found


def _scan_label_table(root: Path, description: str = "") -> ScanResult | None:
    """A label table (CSV/TSV/XLSX/JSON/JSONL) beside or above the images; core.scan_tables."""
    return scan_label_table(root, _all_images(root), description)


def _scan_other_layouts(root: Path, description: str = "") -> ScanResult | None:
    # report files, then box annotations, then masks paired with images, then a label table
    # (core.scan_layouts); a description asking for classification only puts the table first
    images = _all_images(root)
    found = scan_reports(root, images, description) or scan_boxes(root, images, description)
    if found is not None:
        return found
    table_first = classification_only(description)
    masks = None if table_first else scan_masks(root, images, description)
    if masks is not None:
        return masks
    if any(f.suffix.lower() in TABLE_SUFFIXES for f in root.iterdir()):
        table_scan = _scan_label_table(root, description)
        if table_scan is not None:
            return table_scan
    return scan_masks(root, images, description) if table_first else None


def _recognise_tables_and_pairs(root: Path, top_dirs: list[Path], top_files: list[Path],
                                description: str) -> ScanResult | None:
    if any(f.suffix.lower() in TABLE_SUFFIXES + (".json",) for f in top_files) or \
            any(d.name.lower() in IMAGE_DIRS for d in top_dirs):
        return _scan_other_layouts(root, description)
    return None


# Layout recognisers, tried in order before the class-folder fallback. Each takes
# (root, top_dirs, top_files, description) and returns a ScanResult, or None when the folder is
# not its layout. ``description`` is the datacard's text: a recogniser uses the columns, classes,
# code mappings or file names it names.
RECOGNISERS: list = [
    recognise_dicom_series,  # DICOM series (core.layout_dicom), before the others
    recognise_array_files,  # .npz arrays; .npy/.pt/.pck volumes + a table (core.layout_arrays)
    _recognise_tables_and_pairs,
    recognise_list_layouts,  # reports, boxes, masks anywhere in the folder (core.scan_layouts)
    recognise_label_table,  # a label table one folder down (core.scan_tables)
    recognise_filename_labels,  # labels in file names (core.layout_filenames)
]


def scan_folder(root: str | os.PathLike, description: str = "") -> ScanResult:
    """Recognise the layout of ``root`` (helped by the datacard's ``description``) and list its
    samples. Read-only. Raises ScanError with advice."""
    outer = getattr(_WALKS, "cache", None)
    _WALKS.cache = {} if outer is None else outer
    try:
        return _scan_folder(root, description)
    finally:
        _WALKS.cache = outer


def _scan_folder(root: str | os.PathLike, description: str = "") -> ScanResult:
    root_path = Path(root).expanduser()
    if not root_path.exists():
        raise ScanError(f"dataset folder {root_path} does not exist. Check the path.")
    if not root_path.is_dir():
        raise ScanError(f"{root_path} is a file, not a folder. Give the folder that holds "
                        "the dataset.")
    root_path = root_path.resolve()
    top_dirs, top_files = _entries(root_path)
    for recognise in RECOGNISERS:
        found = recognise(root_path, top_dirs, top_files, description)
        if found is not None:
            return found
    split_dirs = [d for d in top_dirs if d.name.lower() in SPLIT_NAMES]
    parents = [(d, SPLIT_NAMES[d.name.lower()]) for d in split_dirs] if split_dirs else [(root_path, "")]

    skipped: list[str] = []
    samples: list[Sample] = []
    dims: set[str] = set()
    by_patient_folder = 0
    for parent, split in parents:
        class_dirs, loose = _entries(parent)
        skipped.extend(f"{f}: file outside a class folder" for f in loose
                       if is_image(f.name) and parent == root_path and split_dirs == [])
        for class_dir in class_dirs:
            found, dim, grouped_here = _class_folder_samples(class_dir, class_dir.name, split,
                                                             skipped)
            by_patient_folder += grouped_here
            if found:
                samples.extend(found)
                dims.add(dim)
    if not samples:
        images_at_top = [f for f in top_files if is_image(f.name)]
        hint = ("the images sit directly in the folder with no class sub-folders; put each "
                "class's images in a folder named after the class"
                if images_at_top else "no image files were found")
        raise ScanError(f"no class folders with images under {root_path}: {hint}. Supported "
                        "so far: one folder per class (optionally under train/ and test/).")
    counts = Counter(s.label for s in samples)
    classes = sorted(counts)
    suffixes = Counter(image_suffix(os.path.basename(s.image)) for s in samples
                       if "3D" not in dims or os.path.isfile(s.image))  # 2D: all are files
    fmt = FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], "") if suffixes else "slices"
    grouped = sum(group_of(s.image)[1] for s in samples)
    return ScanResult(
        root=str(root_path), layout="class_folders", task="diagnosis",
        dimension="3D" if "3D" in dims else "2D", file_format=fmt, classes=classes,
        class_counts={c: counts[c] for c in classes}, samples=samples,
        group_source="patient folder" if by_patient_folder >= len(samples) / 2 else
        "filename prefix" if grouped >= len(samples) / 2 else "none (one group per image)",
        existing_split=bool(split_dirs) and any(s.split == "test" for s in samples),
        skipped=skipped, num_files=len(samples) + len(skipped))
