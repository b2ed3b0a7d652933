"""Class folders: one folder per class holding image files (2D), or holding one sub-folder per
scan with its slices (3D, one sample per sub-folder), or patient folders holding one sub-folder of
slices per scan; optional ``train/ val/ test/`` parents, whose split is kept.

A folder is a class only when its siblings are classes too: a lone folder (``scans/``,
``images/``) is a container, not a class, and a reading with fewer than two classes is refused
by the interpretation step.

May import: core.datasets.layouts.types, .inventory, .common, .study_folders.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from core.datasets.layouts.common import GENERIC_DIRS
from core.datasets.layouts.inventory import is_mask_folder, is_mask_stem, stem_of_name
from core.datasets.layouts.study_folders import IMAGES, folder_reading
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, SPLIT_NAMES, Sample, ScanError,
                                         ScanResult, entries, entry_names, group_of,
                                         image_suffix, is_image)


def _flat_images(scan_dir: Path, slice_files: list, description: str) -> bool:
    """Whether a sub-folder's images are 2D images of the class, not the slices of one scan:
    an ``images/`` folder (``COVID/images/`` beside ``COVID/masks/``), or a study of separate
    radiographs (layouts.study_folders' reading: names, sizes, the description's modality)."""
    if scan_dir.name.lower() in GENERIC_DIRS:
        return True
    members = {scan_dir: [f for f in slice_files if is_image(f.name)]}
    return folder_reading([scan_dir], members, description) == IMAGES


def _class_folder_samples(class_dir: Path, label: str, split: str, skipped: list[str],
                          description: str = "") -> tuple[list[Sample], str, int]:
    """Samples of one class folder: its image files (2D), its sub-folders of slices (one 3D
    sample each), or patient folders holding one sub-folder of slices per scan
    (``CLASS/<patient>/<scan>/``, CC-CCII), whose scans share the patient's group. Returns
    (samples, dimension, how many samples a patient folder grouped)."""
    sub_dirs, files = entry_names(class_dir)
    skipped.extend(f"{path}: not an image file" for name, path in files if not is_image(name))
    masks = {name for name, _ in files if is_image(name) and is_mask_stem(stem_of_name(name))}
    skipped.extend(f"{path}: a mask, not an image of class {label}" for name, path in files
                   if name in masks)
    samples: list[Sample] = []
    for name, path in files:
        if is_image(name) and name not in masks:
            samples.append(Sample(path, label, group_of(name)[0], split))
    dimension, by_patient_folder = "2D", 0
    for scan_dir in sub_dirs:  # one sub-folder per scan holding its slices -> one 3D sample
        scan_dirs, slice_files = entries(scan_dir)
        if is_mask_folder(scan_dir.name):
            skipped.append(f"{scan_dir}: masks, not images of class {label}")
            continue
        if any(is_image(f.name) for f in slice_files) and \
                _flat_images(scan_dir, slice_files, description):
            samples.extend(Sample(str(f), label, group_of(f.name)[0]
                                  if scan_dir.name.lower() in GENERIC_DIRS else
                                  f"{label}/{scan_dir.name}", split)
                           for f in slice_files if is_image(f.name) and
                           not is_mask_stem(stem_of_name(f.name)))
            continue
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


def _holds_images(folder: Path, limit: int = 2000) -> bool:
    """Whether an image file sits anywhere below ``folder`` (at most ``limit`` entries read)."""
    seen = 0
    for _dirpath, _dirs, files in os.walk(folder):
        if any(is_image(f) for f in files):
            return True
        seen += len(files) + 1
        if seen > limit:
            return False
    return False


def scan_class_folders(root_path: Path, top_dirs: list[Path], top_files: list[Path],
                       description: str = "") -> ScanResult:
    """The class-folder reading of ``root_path``. Raises ScanError when no folder holds
    images."""
    base = root_path  # wrapper folders (``chest_xray/`` holding train/ test/) are descended
    while not any(is_image(f.name) for f in top_files):
        with_images = [d for d in top_dirs if _holds_images(d)]
        if len(with_images) != 1 or with_images[0].name.lower() in SPLIT_NAMES:
            break   # one folder holds every image (``images/`` beside ``Annotations/``): descend
        top_dirs = with_images
        inner_dirs, inner_files = entries(top_dirs[0])
        if not inner_dirs or any(is_image(f.name) for f in inner_files):
            break  # a lone folder of images: one class (refused), not a wrapper
        base, top_dirs, top_files = top_dirs[0], inner_dirs, inner_files
    split_dirs = [d for d in top_dirs if d.name.lower() in SPLIT_NAMES]
    parents = ([(d, SPLIT_NAMES[d.name.lower()]) for d in split_dirs] if split_dirs
               else [(base, "")])

    skipped: list[str] = []
    samples: list[Sample] = []
    dims: set[str] = set()
    by_patient_folder = 0
    for parent, split in parents:
        class_dirs, loose = entries(parent)
        skipped.extend(f"{f}: file outside a class folder" for f in loose
                       if is_image(f.name) and parent == base and split_dirs == [])
        for class_dir in class_dirs:
            found, dim, grouped_here = _class_folder_samples(class_dir, class_dir.name, split,
                                                             skipped, description)
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
        dimension="3D" if "3D" in dims or fmt in ("nifti", "nrrd", "mha", "analyze") else "2D",
        file_format=fmt, classes=classes,
        class_counts={c: counts[c] for c in classes}, samples=samples,
        group_source="patient folder" if by_patient_folder >= len(samples) / 2 else
        "filename prefix" if grouped >= len(samples) / 2 else "none (one group per image)",
        existing_split=bool(split_dirs) and any(s.split == "test" for s in samples),
        skipped=skipped, num_files=len(samples) + len(skipped))
