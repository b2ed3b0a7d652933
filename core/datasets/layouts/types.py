"""The bottom of the layout recognisers: what a scan returns (Sample, ScanResult), how it
refuses (ScanError), the image suffix tables, patient keys from names (group_of), and the one
walk of a folder that the recognisers of a scan share (all_images).

May import: the standard library and core.datasets.layouts.links (which links a walk skips).
"""
from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.datasets.layouts import links

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".dcm", ".dicom",
                  ".nii", ".nii.gz", ".nrrd", ".mha", ".mhd", ".hdr", ".npy", ".npz", ".pt")
FORMAT_OF_SUFFIX = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg", ".bmp": "bmp", ".tif": "tiff",
                    ".tiff": "tiff", ".dcm": "dicom", ".dicom": "dicom", ".nii": "nifti",
                    ".nii.gz": "nifti", ".nrrd": "nrrd", ".mha": "mha", ".mhd": "mha",
                    ".hdr": "analyze",
                    ".npy": "npy", ".npz": "npz", ".pt": "pt"}
SPLIT_NAMES = {"train": "train", "training": "train", "val": "val", "valid": "val",
               "validation": "val", "test": "test", "testing": "test"}
# patient/subject prefixes of names: patient0012_..., sub-03..., case7..., and BIDS subject
# labels that are not only digits (sub-verse004_ct). The number must end the word: the image id
# ``ID_12cadc6af`` (hex) is no patient ``id12``
GROUP_RE = re.compile(r"^(?P<key>(?:patient|person|subject|sub|pat|case|pt|id)[-_ ]?\d+"
                      r"(?![a-z0-9])|sub-[a-z0-9]+(?=[_.]|$))", re.IGNORECASE)
MAX_FILES = 2_000_000
# the training template that serves a dataset of each layout
TEMPLATE_OF_LAYOUT = {"class_folders": "diagnosis", "label_table": "diagnosis",
                      "filename_labels": "diagnosis", "array_npz": "diagnosis",
                      "dicom_series": "diagnosis",
                      "image_mask_folders": "segmentation", "box_table": "detection",
                      "report_table": "report_generation"}


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
    if suffix not in IMAGE_SUFFIXES:
        suffix = ""   # a folder named by a UID (1.2.826.0.1.3680043.1663) keeps its last part
    stem = name[: -len(suffix)] if suffix else name
    match = GROUP_RE.match(stem)
    if match:
        return re.sub(r"[-_ ]", "", match.group("key")).lower(), True
    return stem, False


def entries(folder: Path) -> tuple[list[Path], list[Path]]:
    dirs, files = [], []
    try:
        with links.scandir(folder) as it:  # loops, dangling and outside links skipped
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


def entry_names(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Like _entries, but files as sorted (name, path) strings: no Path per file, which is
    most of a 100,000-file class folder's scan time."""
    dirs, files = [], []
    try:
        with links.scandir(folder) as it:
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


_WALKS = threading.local()  # the folder walks of the scan running in this thread


def all_images(root: Path, limit: int = MAX_FILES) -> list[Path]:
    """Every image file under root, sorted. Walked once per scan_folder call: the recognisers
    that need the list share it (a copy each)."""
    cache = getattr(_WALKS, "cache", None)
    key = (str(root), limit)
    if cache is not None and key in cache:
        return list(cache[key])
    found: list[Path] = []
    for folder, dirs, files in links.walk(root):
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


def described_mask_affixes() -> tuple[str, ...]:
    """File-name endings the datacard description gives the masks (``_les``, ``-outline``),
    confirmed on the folder, for the scan running in this thread (see ``shared_walks``)."""
    return getattr(_WALKS, "mask_affixes", ())


@contextmanager
def shared_walks():
    """Within it, all_images walks each folder once in this thread (one scan's recognisers)."""
    outer = getattr(_WALKS, "cache", None)
    outer_affixes = described_mask_affixes()
    _WALKS.cache = {} if outer is None else outer
    try:
        yield
    finally:
        _WALKS.cache = outer
        _WALKS.mask_affixes = outer_affixes


def use_mask_affixes(affixes: tuple[str, ...]) -> None:
    """Within ``shared_walks``: file stems ending in one of ``affixes`` are masks for this
    scan. Set before the scan's first walk (the walks are cached)."""
    _WALKS.mask_affixes = tuple(a.lower() for a in affixes)


SPLIT_VALUES = {"train": "train", "training": "train", "val": "val", "valid": "val",
                "validation": "val", "dev": "val", "test": "test", "testing": "test"}
