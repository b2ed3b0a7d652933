"""Read-only scan of a dataset folder: which files, which layout, which labels, which patients.

This is the Data Engineer's eyes and the registration form's first draft. It never writes and
never decodes more than a few images (``probe_images``). Layouts recognised so far:

* ``label_table``: a CSV/TSV beside the images names each image's label(s) and, when it has one,
  its patient (core.datasets.layouts.label_table);
* ``class_folders``: one folder per class holding image files (2D), or holding one sub-folder per
  scan with its slices (3D, one sample per sub-folder); optional ``train/ val/ test/`` parents,
  whose split is kept.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from core.datasets.layouts.lists import (IMAGE_DIRS, classification_only, recognise_list_layouts,
                                         scan_boxes, scan_masks, scan_reports)
from core.datasets.layouts.tables import TABLE_SUFFIXES
from core.datasets.layouts.label_table import recognise_label_table, scan_label_table
from core.datasets.layouts.arrays import recognise_array_files
from core.datasets.layouts.filenames import recognise_filename_labels
from core.datasets.layouts.dicom import recognise_dicom_series
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, SPLIT_NAMES, Sample, ScanError,
                                         ScanResult, all_images, entries, entry_names, group_of,
                                         image_suffix, is_image, shared_walks)


def _class_folder_samples(class_dir: Path, label: str, split: str,
                          skipped: list[str]) -> tuple[list[Sample], str, int]:
    """Samples of one class folder: its image files (2D), its sub-folders of slices (one 3D
    sample each), or patient folders holding one sub-folder of slices per scan
    (``CLASS/<patient>/<scan>/``, CC-CCII), whose scans share the patient's group. Returns
    (samples, dimension, how many samples a patient folder grouped)."""
    sub_dirs, files = entry_names(class_dir)
    skipped.extend(f"{path}: not an image file" for name, path in files if not is_image(name))
    samples: list[Sample] = []
    for name, path in files:
        if is_image(name):
            samples.append(Sample(path, label, group_of(name)[0], split))
    dimension, by_patient_folder = "2D", 0
    for scan_dir in sub_dirs:  # one sub-folder per scan holding its slices -> one 3D sample
        scan_dirs, slice_files = entries(scan_dir)
        if any(is_image(f.name) for f in slice_files):
            group, _ = group_of(scan_dir)
            samples.append(Sample(str(scan_dir), label, group, split))
            dimension = "3D"
            continue
        scans = [d for d in scan_dirs if any(is_image(f.name) for f in entries(d)[1])]
        for scan in scans:  # a patient folder: every scan in it belongs to that patient
            samples.append(Sample(str(scan), label, f"{label}/{scan_dir.name}"
                                  if not group_of(scan_dir)[1] else group_of(scan_dir)[0], split))
            dimension, by_patient_folder = "3D", by_patient_folder + 1
        skipped.extend(f"{d}: folder without image files" for d in scan_dirs if d not in scans)
        if not scans:
            skipped.append(f"{scan_dir}: folder without image files")
    return samples, dimension, by_patient_folder


def _scan_label_table(root: Path, description: str = "") -> ScanResult | None:
    """A label table (CSV/TSV/XLSX/JSON/JSONL) beside or above the images;
    core.datasets.layouts.label_table."""
    return scan_label_table(root, all_images(root), description)


def _scan_other_layouts(root: Path, description: str = "") -> ScanResult | None:
    # report files, then box annotations, then masks paired with images, then a label table
    # (core.datasets.layouts.lists); a description asking for classification only puts the table
    # first
    images = all_images(root)
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
    recognise_dicom_series,  # DICOM series (core.datasets.layouts.dicom), before the others
    # .npz arrays; .npy/.pt/.pck volumes + a table (core.datasets.layouts.arrays)
    recognise_array_files,
    _recognise_tables_and_pairs,
    # reports, boxes, masks anywhere in the folder (core.datasets.layouts.lists)
    recognise_list_layouts,
    recognise_label_table,  # a label table one folder down (core.datasets.layouts.label_table)
    recognise_filename_labels,  # labels in file names (core.datasets.layouts.filenames)
]


def scan_folder(root: str | os.PathLike, description: str = "") -> ScanResult:
    """Recognise the layout of ``root`` (helped by the datacard's ``description``) and list its
    samples. Read-only. Raises ScanError with advice."""
    with shared_walks():
        return _scan_folder(root, description)


def _scan_folder(root: str | os.PathLike, description: str = "") -> ScanResult:
    root_path = Path(root).expanduser()
    if not root_path.exists():
        raise ScanError(f"dataset folder {root_path} does not exist. Check the path.")
    if not root_path.is_dir():
        raise ScanError(f"{root_path} is a file, not a folder. Give the folder that holds "
                        "the dataset.")
    root_path = root_path.resolve()
    top_dirs, top_files = entries(root_path)
    for recognise in RECOGNISERS:
        found = recognise(root_path, top_dirs, top_files, description)
        if found is not None:
            return found
    split_dirs = [d for d in top_dirs if d.name.lower() in SPLIT_NAMES]
    parents = ([(d, SPLIT_NAMES[d.name.lower()]) for d in split_dirs] if split_dirs
               else [(root_path, "")])

    skipped: list[str] = []
    samples: list[Sample] = []
    dims: set[str] = set()
    by_patient_folder = 0
    for parent, split in parents:
        class_dirs, loose = entries(parent)
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
