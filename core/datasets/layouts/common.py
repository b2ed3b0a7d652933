"""Helpers shared by the segmentation, detection and report layout recognisers.

* ``FileMatcher`` finds the image file a table or JSON cell names: a path relative to the dataset
  (or to one of its sub-folders), an absolute path from the machine the dataset was made on, a
  file name or a stem — and refuses a name that several files share (``0.png`` in every study
  folder) unless enough of its path is given to tell them apart.
* split names (``Training``, ``valid``, ``reports_test.json``, a ``split`` column) and the rule
  that a dataset with only train + validation sets uses its validation set as the held-out set;
* grouping keys: a patient prefix in the file name, else the case folder the file sits in (the
  first folder below those all images share, split and generic names skipped);
* ``build_result``: the ScanResult for a list of samples (format, dimension, class counts and
  the existing-split flag filled in).
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts import links
from core.datasets.layouts.array_headers import header_dimension
from core.datasets.layouts.types import FORMAT_OF_SUFFIX, ScanResult, group_of, image_suffix

SPLITS = {"train": "train", "training": "train", "tr": "train", "val": "val", "valid": "val",
          "validation": "val", "dev": "val", "evaluation": "val", "test": "test",
          "testing": "test", "ts": "test"}
SPLIT_WORD = re.compile(r"(?:^|[^a-z])(train(?:ing)?|val(?:id(?:ation)?)?|dev|evaluation|"
                        r"test(?:ing)?)(?:[^a-z]|$)", re.I)
GENERIC_DIRS = {"images", "image", "imgs", "img", "data", "dataset", "datasets", "volumes",
                "volume", "scans", "files", "nifti", "nii", "dicom", "png", "jpg", "raw",
                "imagestr", "imagests", "images_normalized"}
SPLIT_COLUMNS = ("split", "subset", "set", "partition", "fold_split")
MAX_JSON_BYTES = 200_000_000


def split_of_name(name: str) -> str:
    """``Training`` -> train, ``reports_test.json`` -> test, ``valid`` -> val, else ""."""
    lower = name.lower()
    if lower in SPLITS:
        return SPLITS[lower]
    stem = lower.split(".")[0]
    found = {SPLITS.get(m.lower(), "val" if m.lower().startswith("val") else "")
             for m in SPLIT_WORD.findall(stem)}
    found.discard("")
    return found.pop() if len(found) == 1 else ""


SPLIT_FOLDER = re.compile(r"^(?:[a-z\d]{1,2}[.)]\s*)?(train|training|val|valid|validation|test|"
                          r"testing)[\s_-]*(?:set|data|images?|split)?$", re.I)


def split_of_path(path: Path, root: Path) -> str:
    """The split named by a folder between ``root`` and ``path`` (``train/``, ``Testing/``)."""
    for part in path.relative_to(root).parent.parts:
        if part.lower() in SPLITS:
            return SPLITS[part.lower()]
        named = SPLIT_FOLDER.match(part)   # IDRiD's "a. Training Set", "Test data"
        if named:
            return SPLITS[named.group(1).lower()]
    return ""


def held_out_splits(splits: list[str]) -> dict[str, str]:
    """How the dataset's own split names map onto train/test. A dataset with train and
    validation sets but no test set (CT-RATE) holds out its validation set."""
    present = set(splits) - {""}
    if "test" not in present and {"train", "val"} <= present:
        return {"train": "train", "val": "test", "": ""}
    return {s: s for s in present | {""}}


def split_cell(value: object) -> str:
    return SPLITS.get(str(value).strip().lower(), "")


def folder_group(path: Path, root: Path, shared: frozenset = frozenset()) -> str:
    """The case folder an image sits in (``train_1`` for ``train/train_1/train_1_a/x.nii.gz``),
    skipping split and generic folder names and the ``shared`` ones every image sits in
    (``radiology`` of ``data/<split>/radiology/images/``); "" when there is none."""
    try:
        parts = path.relative_to(root).parent.parts
    except ValueError:
        return ""
    named = [p for p in parts if group_of(p)[1]]   # MURA's patient00255, BIDS sub-01
    if named:   # a level named for the patient wins over a body-part or site folder above it
        return named[0]
    for part in parts:
        if part.lower() not in SPLITS and part.lower() not in GENERIC_DIRS and \
                part not in shared:
            return part
    return ""


def shared_folders(paths: list[Path], root: Path) -> frozenset:
    """Folder names every one of ``paths`` has between ``root`` and itself: never a case
    folder, whatever split folder sits above them."""
    common = None
    for path in paths:
        try:
            parts = set(path.relative_to(root).parent.parts)
        except ValueError:
            continue
        common = parts if common is None else common & parts
    return frozenset(common or ()) if len(paths) > 1 else frozenset()


def group_for(path: Path, root: Path, shared: frozenset = frozenset()) -> tuple[str, str]:
    """(group, source): a patient prefix of the file name, else its case folder, else the
    file itself."""
    key, matched = group_of(path)
    if matched:
        return key, "filename prefix"
    folder = folder_group(path, root, shared)
    if folder:
        prefixed, matched = group_of(Path(folder))
        return (prefixed if matched else folder), "case folder"
    return key, "none (one group per image)"


def common_parent(paths: list[Path], root: Path) -> Path:
    """The deepest folder holding every one of ``paths`` (``root`` when there are none), so
    that a case folder is found below folders all images share (``BraTS2021_TrainingData/``)."""
    if not paths:
        return root
    return Path(os.path.commonpath([str(p.parent) for p in paths]))


def group_source(sources: list[str]) -> str:
    """The grouping key most samples use (what split.json and the UI report)."""
    if not sources:
        return "none (one group per image)"
    counts = Counter(sources)
    best = counts.most_common(1)[0][0]
    return best if counts[best] >= len(sources) / 2 else "none (one group per image)"


class FileMatcher:
    """Resolve the file a table or JSON cell names (see the module docstring)."""

    def __init__(self, images: list[Path], root: Path):
        self.root = root
        self._images: list[Path] | None = images  # indexed on the first find(): a table
        self._rel: dict[str, Path] = {}            # without the right columns never needs it
        self._suffix: dict[str, list[Path]] = {}

    def _build(self) -> None:
        images, root, self._images = self._images or [], self.root, None
        prefix = os.path.join(str(root), "")  # string slicing: relative_to is slow at 100k files
        for path in images:
            text = str(path)
            rel = (text[len(prefix):].replace(os.sep, "/") if text.startswith(prefix) else
                   path.relative_to(root).as_posix()).lower()
            self._rel[rel] = path
            parts = rel.split("/")
            for k in range(1, len(parts) + 1):  # trailing components: "study/0.png", "0.png"
                self._suffix.setdefault("/".join(parts[-k:]), []).append(path)
            stem = parts[-1].split(".")[0]
            self._suffix.setdefault("#stem#" + stem, []).append(path)
            if len(parts) > 1:
                self._suffix.setdefault("#stem#" + "/".join(parts[:-1] + [stem]), []).append(path)

    def find(self, value: object) -> Path | None:
        if self._images is not None:
            self._build()
        text = str(value or "").strip().replace("\\", "/")
        if not text or len(text) > 1000:
            return None
        text = re.sub(r"^(?:\./)+", "", text).lower()
        if text in self._rel:
            return self._rel[text]
        parts = [p for p in text.split("/") if p and p != "."]
        for k in range(len(parts), 0, -1):  # longest trailing path that names one file
            hits = self._suffix.get("/".join(parts[-k:]))
            if hits and len(hits) == 1:
                return hits[0]
            if hits:
                return None  # ambiguous: more of the path would be needed
        if parts:
            stem_key = "/".join(parts[:-1] + [parts[-1].split(".")[0]])
            for key in (stem_key, parts[-1].split(".")[0]):
                hits = self._suffix.get("#stem#" + key)
                if hits and len(hits) == 1:
                    return hits[0]
        return None


def named_files(description: str, root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files the datacard description names (``annotations/train.json``), existing under root."""
    found = []
    for token in re.findall(r"[\w./-]+", description or ""):
        token = token.strip("./")
        if token.lower().endswith(suffixes):
            path = (root / token)
            if path.is_file() and root in path.resolve().parents and path not in found:
                found.append(path)
    return found


ANNOTATION_DIRS = ("annotations", "annotation", "reports", "labels", "metadata", "splits", "meta")


def candidate_files(root: Path, suffixes: tuple[str, ...], description: str = "",
                    sub_dirs: tuple[str, ...] = ANNOTATION_DIRS) -> list[Path]:
    """Table/JSON files to try: those the description names first, then the top level, then
    annotation-like sub-folders."""
    files = named_files(description, root, suffixes)
    files += sorted(p for p in links.iterdir(root) if p.is_file()
                    and not p.name.startswith(".") and p.name.lower().endswith(suffixes))
    for sub in sorted(p for p in links.iterdir(root) if p.is_dir()
                      and p.name.lower() in sub_dirs):
        files += sorted(p for p in links.iterdir(sub) if p.is_file()
                        and not p.name.startswith(".")
                        and p.name.lower().endswith(suffixes))
    unique: list[Path] = []
    for path in files:
        if path not in unique:
            unique.append(path)
    return unique


def load_json(path: Path):
    """Parsed JSON, or None for an unreadable, invalid or huge file."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None


def ungroup_shared_folders(scan: ScanResult) -> None:
    """A "case folder" grouping whose folder every image shares, or that coincides with the
    classes or the splits (``train_images/``, ``benign/``), is no grouping: one group per
    image, said so."""
    if scan.group_source == "case folder" and _not_case_folders(scan.samples):
        for s in scan.samples:
            s.group = stem_of_ref(s.image)
        scan.group_source = "none (one group per image)"


def _not_case_folders(samples: list) -> bool:
    """Folders every sample shares, or that coincide with the classes or the splits, are not
    cases (``stage_2_train_images/``, ``benign/``)."""
    groups = {s.group for s in samples}
    if len(samples) < 8:
        return False
    if len(groups) == 1 or (len(groups) <= 3 and len(samples) >= 20):
        return True   # two or three "cases" for 20 images: class or split folders
    for key in ("label", "split"):
        pairs = {(s.group, getattr(s, key)) for s in samples}
        if len(pairs) == len(groups) == len({getattr(s, key) for s in samples}):
            return True
    return False


def stem_of_ref(image) -> str:
    first = image[0] if isinstance(image, list) else image
    name = Path(str(first).split("::")[0]).name
    suffix = image_suffix(name)
    return name[: -len(suffix)] if suffix else name


def build_result(root: Path, layout: str, task: str, samples: list, num_files: int,
                 details: dict, classes: list[str], skipped: list[str], grouping: str,
                 three_d: bool | None = None):
    """A ScanResult with format, dimension, counts and existing-split flag filled in."""
    first = [Path(s.image[0] if isinstance(s.image, list) else s.image) for s in samples]
    suffixes = Counter(image_suffix(p.name) for p in first)
    fmt = FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], "") if suffixes else ""
    if three_d is None:
        three_d = fmt in ("nifti", "nrrd", "mha", "analyze")
        if three_d and first and first[0].is_file():   # the header says, not the suffix
            three_d = header_dimension(first[0]) != "2D"
    counts = Counter(s.label for s in samples)
    splits = {s.split for s in samples}
    return ScanResult(
        root=str(root), layout=layout, task=task, dimension="3D" if three_d else "2D",
        file_format=fmt, classes=classes, class_counts=dict(sorted(counts.items())),
        samples=samples, group_source=grouping,
        existing_split="test" in splits and bool(splits & {"train", "val"}) and "" not in splits,
        skipped=skipped, num_files=num_files, details=details)
