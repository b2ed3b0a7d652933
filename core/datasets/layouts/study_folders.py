"""What a record that names a folder means: one 3D scan made of the folder's 2D slices, or a
study whose images are separate samples that share the record's label.

MURA's ``train_labeled_studies.csv`` names ``.../patient00255/study1_positive/`` with one
label for the 1-3 radiographs inside; a CT exported as PNG slices names ``scans/s7`` for one
volume. An ML engineer tells them apart by what the images are:

* DICOM files (or files without a suffix) in the folder: a series, so a scan;
* file names that say ``slice``: a scan; folder names that say study, exam, visit, views: a
  study;
* images of different sizes in one folder: separate images (slices share one grid);
* a description that names a projection modality (radiographs, X-ray, fundus, dermoscopy,
  mammography, histology, endoscopy) and no cross-sectional one (CT, MRI, volume, slices):
  separate images.

Otherwise a folder stays a scan, as before. The answer is kept in the recipe (``folders``:
``scan`` or ``images``) so that the user can correct it.

May import: core.imaging.refs.
"""
from __future__ import annotations

import re
from pathlib import Path

from core.imaging.refs import DICOM_SUFFIXES

SCAN, IMAGES = "scan", "images"
PROJECTION = re.compile(r"\b(?:x-?rays?|radiograph\w*|cxr|fundus|fundi|retinal? photo\w*|"
                        r"dermoscop\w*|dermatoscop\w*|mammogra\w*|histolog\w*|patholog\w* slides?|"
                        r"endoscop\w*|colonoscop\w*|photograph\w*|whole[- ]slide)\b", re.I)
CROSS_SECTIONAL = re.compile(r"\b(?:ct|mri?|cbct|pet|volumes?|volumetric|3d|slices?|"
                             r"tomograph\w*|scans? of slices)\b", re.I)
STUDY_NAME = re.compile(r"(?:^|[_\-\s])(?:study|studies|exam|visit|views?|session)\d*"
                        r"(?:$|[_\-\s])|^(?:study|exam|visit)\d", re.I)
SLICE_NAME = re.compile(r"slice|(?:^|[_\-])(?:sl|z)\d+", re.I)
SERIES_SUFFIX = ("",) + DICOM_SUFFIXES   # DICOM files, named with or without a suffix
PROBED = 5   # folders whose image sizes are read


def _size(path: Path) -> tuple[int, int] | None:
    try:
        from PIL import Image
        with Image.open(path) as img:
            return img.size
    except Exception:   # noqa: BLE001 - an unreadable file tells nothing here
        return None


def folder_reading(folders: list[Path], members: dict[Path, list[Path]],
                   description: str = "") -> str:
    """``scan`` or ``images`` for the folders a source's records name (see the module doc)."""
    folders = [f for f in folders if members.get(f)]
    if not folders:
        return SCAN
    files = [p for f in folders[:50] for p in members[f]]
    if any(p.suffix.lower() in SERIES_SUFFIX for p in files):
        return SCAN
    if any(SLICE_NAME.search(p.stem) for p in files[:200]):
        return SCAN
    if sum(bool(STUDY_NAME.search(f.name)) for f in folders) >= 0.8 * len(folders):
        return IMAGES
    for folder in folders[:PROBED]:
        sizes = {_size(p) for p in sorted(members[folder])[:6]} - {None}
        if len(sizes) > 1:
            return IMAGES
    if description and PROJECTION.search(description) and \
            not CROSS_SECTIONAL.search(description):
        return IMAGES
    return SCAN


def folder_images(folder: Path, members: dict[Path, list[Path]]) -> list[Path]:
    """The images of a study folder, in name order."""
    return sorted(members.get(folder) or [])
