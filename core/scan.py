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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.scan_layouts import IMAGE_DIRS, scan_box_table, scan_image_masks, scan_reports
from core.scan_tables import TABLE_SUFFIXES, label_counts, read_label_table

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".dcm", ".dicom",
                  ".nii", ".nii.gz", ".nrrd", ".mha", ".mhd", ".npy", ".npz", ".pt")
FORMAT_OF_SUFFIX = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg", ".bmp": "bmp", ".tif": "tiff",
                    ".tiff": "tiff", ".dcm": "dicom", ".dicom": "dicom", ".nii": "nifti",
                    ".nii.gz": "nifti", ".nrrd": "nrrd", ".mha": "mha", ".mhd": "mha",
                    ".npy": "npy", ".npz": "npz", ".pt": "pt"}
SPLIT_NAMES = {"train": "train", "training": "train", "val": "val", "valid": "val",
               "validation": "val", "test": "test", "testing": "test"}
GROUP_RE = re.compile(r"^(?P<key>(?:patient|person|subject|sub|pat|case|pt|id)[-_ ]?\d+)",
                      re.IGNORECASE)
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


def group_of(path: Path) -> tuple[str, bool]:
    """Patient key from a file or folder name (``patient0012_2.png`` -> ``patient0012``)."""
    stem = path.name[: -len(image_suffix(path.name))] if image_suffix(path.name) else path.name
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


def _class_folder_samples(class_dir: Path, label: str, split: str,
                          skipped: list[str]) -> tuple[list[Sample], str]:
    sub_dirs, files = _entries(class_dir)
    images = [f for f in files if is_image(f.name)]
    skipped.extend(f"{f}: not an image file" for f in files if not is_image(f.name))
    samples: list[Sample] = []
    for image in images:
        group, _ = group_of(image)
        samples.append(Sample(str(image), label, group, split))
    dimension = "2D"
    for scan_dir in sub_dirs:  # one sub-folder per scan holding its slices -> one 3D sample
        _, slice_files = _entries(scan_dir)
        if any(is_image(f.name) for f in slice_files):
            group, _ = group_of(scan_dir)
            samples.append(Sample(str(scan_dir), label, group, split))
            dimension = "3D"
        else:
            skipped.append(f"{scan_dir}: folder without image files")
    return samples, dimension


def _all_images(root: Path, limit: int = MAX_FILES) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(Path(folder) / f for f in sorted(files) if is_image(f))
        if len(found) > limit:
            raise ScanError(f"more than {limit} image files under {root}; register a smaller "
                            "folder")
    return found


def _scan_label_table(root: Path) -> ScanResult | None:
    images = _all_images(root)
    table = read_label_table(root, images)
    if table is None:
        return None
    samples = []
    for path, labels, group in table["rows"]:
        key = group or group_of(path)[0]
        stratum = labels[0] if labels else "(none)"
        samples.append(Sample(str(path), stratum, key, "",
                              labels if table["multi_label"] else None))
    counts = label_counts(table["rows"])
    classes = sorted(counts)
    listed = {Path(s.image) for s in samples}
    skipped = [f"{p}: not listed in {Path(table['table']).name}" for p in images
               if p not in listed][:1000]
    if table["unmatched"]:
        skipped.append(f"{table['unmatched']} rows of {Path(table['table']).name} name no "
                       "existing image")
    suffixes = Counter(image_suffix(p.name) for p in listed)
    grouped = table["patient_column"] or sum(group_of(Path(s.image))[1] for s in samples) >= \
        len(samples) / 2
    source = (f"table column {table['patient_column']!r}" if table["patient_column"] else
              "filename prefix" if grouped else "none (one group per image)")
    return ScanResult(
        root=str(root), layout="label_table", task="diagnosis", dimension="2D",
        file_format=FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], ""), classes=classes,
        class_counts={c: counts[c] for c in classes}, samples=samples, group_source=source,
        existing_split=False, skipped=skipped, num_files=len(images),
        details={k: table[k] for k in ("table", "image_column", "label_column",
                                       "patient_column", "multi_label")})


def _result(root: Path, layout: str, task: str, samples: list[Sample], images: list[Path],
            details: dict, classes: list[str] | None = None, skipped: list[str] | None = None,
            existing: bool = False) -> ScanResult:
    first = [Path(s.image[0] if isinstance(s.image, list) else s.image) for s in samples]
    suffixes = Counter(image_suffix(p.name) for p in first)
    suffix = suffixes.most_common(1)[0][0] if suffixes else ""
    fmt = FORMAT_OF_SUFFIX.get(suffix, "")
    counts = Counter(s.label for s in samples)
    grouped = sum(group_of(p)[1] for p in first) >= len(samples) / 2
    return ScanResult(
        root=str(root), layout=layout, task=task,
        dimension="3D" if fmt in ("nifti", "nrrd", "mha") else "2D", file_format=fmt,
        classes=classes if classes is not None else sorted(counts),
        class_counts=dict(sorted(counts.items())), samples=samples,
        group_source="filename prefix" if grouped else "none (one group per image)",
        existing_split=existing, skipped=skipped or [], num_files=len(images), details=details)


def _scan_other_layouts(root: Path) -> ScanResult | None:
    images = _all_images(root)
    reports = scan_reports(root, images)
    if reports:
        samples = [Sample(str(p), "report", group_of(p)[0], split,
                          extra={"findings": f, "impression": i})
                   for p, f, i, split in reports["entries"]]
        return _result(root, "report_table", "report_generation", samples, images, {},
                       classes=[], existing=any(s.split == "test" for s in samples))
    boxes = scan_box_table(root, images)
    if boxes:
        samples = [Sample(str(p), "positive" if e["boxes"] else "negative", group_of(p)[0],
                          extra=e) for p, e in sorted(boxes["images"].items())]
        names = sorted({lbl for e in boxes["images"].values() for lbl in e["labels"]})
        details = {k: boxes[k] for k in ("table", "image_column", "three_d")}
        result = _result(root, "box_table", "anomaly_detection", samples, images, details, names)
        result.dimension = "3D" if boxes["three_d"] else result.dimension
        return result
    if any(f.suffix.lower() in TABLE_SUFFIXES for f in root.iterdir()):
        table_scan = _scan_label_table(root)
        if table_scan is not None:
            return table_scan
    pairs = scan_image_masks(root, images)
    if pairs:
        samples = [Sample([str(f) for f in files] if len(files) > 1 else str(files[0]), "case",
                          group_of(Path(key))[0], extra={"label_path": str(mask)})
                   for key, files, mask in pairs["cases"]]
        details = {"image_dir": pairs["image_dir"], "mask_dir": pairs["mask_dir"],
                   "channels": max(len(f) for _, f, _ in pairs["cases"])}
        skipped = [f"{p}: no mask with a matching name" for p in pairs["unpaired"]]
        return _result(root, "image_mask_folders", "segmentation", samples, images, details,
                       pairs["labels"], skipped)
    return None


def _recognise_tables_and_pairs(root: Path, top_dirs: list[Path], top_files: list[Path],
                                description: str) -> ScanResult | None:
    if any(f.suffix.lower() in TABLE_SUFFIXES + (".json",) for f in top_files) or \
            any(d.name.lower() in IMAGE_DIRS for d in top_dirs):
        return _scan_other_layouts(root)
    return None


# Layout recognisers, tried in order before the class-folder fallback. Each takes
# (root, top_dirs, top_files, description) and returns a ScanResult, or None when the folder is
# not its layout. ``description`` is the datacard's text: a recogniser uses the columns, classes,
# code mappings or file names it names.
RECOGNISERS: list = [
    _recognise_tables_and_pairs,
]


def scan_folder(root: str | os.PathLike, description: str = "") -> ScanResult:
    """Recognise the layout of ``root`` (helped by the datacard's ``description``) and list its
    samples. Read-only. Raises ScanError with advice."""
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
    for parent, split in parents:
        class_dirs, loose = _entries(parent)
        skipped.extend(f"{f}: file outside a class folder" for f in loose
                       if is_image(f.name) and parent == root_path and split_dirs == [])
        for class_dir in class_dirs:
            found, dim = _class_folder_samples(class_dir, class_dir.name, split, skipped)
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
    suffixes = Counter(image_suffix(Path(s.image).name) for s in samples if Path(s.image).is_file())
    fmt = FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], "") if suffixes else "slices"
    grouped = sum(group_of(Path(s.image))[1] for s in samples)
    return ScanResult(
        root=str(root_path), layout="class_folders", task="diagnosis",
        dimension="3D" if "3D" in dims else "2D", file_format=fmt, classes=classes,
        class_counts={c: counts[c] for c in classes}, samples=samples,
        group_source="filename prefix" if grouped >= len(samples) / 2 else
        "none (one group per image)",
        existing_split=bool(split_dirs) and any(s.split == "test" for s in samples),
        skipped=skipped, num_files=len(samples) + len(skipped))
