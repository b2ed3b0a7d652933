"""Inventory of a dataset folder: every file classified by what it is, and the tree summarised.

Kinds: ``image`` (2D raster: PNG, JPEG, BMP), ``tiff`` (TIFF: a slice or a multi-page stack),
``volume`` (NIfTI, NRRD, MHA), ``segmentation`` (a file named or stored like a mask: ``*_mask``,
``*_seg``, ``*.seg.nrrd``, files inside ``masks/`` or ``labels/`` folders), ``dicom``, ``array``
(npy, npz, pt, pickles), ``table`` (CSV, TSV, XLSX), ``annotation`` (JSON, XML, YAML),
``text`` (txt, md: a report or YOLO boxes), ``other``. Names only: nothing is opened, so the
inventory of a 100,000-file folder costs one walk.

The interpretation step (core.datasets.layouts.interpret) reads it to score readings (how many
files each reading explains) and to describe the folder to the user; the joiners use it to find
sidecars (``x.png`` + ``x.json``), annotation files and per-image texts without walking again.

May import: core.datasets.layouts.types, core.imaging.refs.
"""
from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.layouts import links
from core.datasets.layouts.types import (MAX_FILES, ScanError, _WALKS, described_mask_affixes,
                                         image_suffix, is_image)
from core.imaging.refs import DICOM_SUFFIXES

KIND_OF_SUFFIX = {".png": "image", ".jpg": "image", ".jpeg": "image", ".bmp": "image",
                  ".tif": "tiff", ".tiff": "tiff", ".nii": "volume", ".nii.gz": "volume",
                  ".nrrd": "volume", ".nhdr": "volume", ".mha": "volume", ".mhd": "volume",
                  ".hdr": "volume",
                  ".npy": "array", ".npz": "array", ".pt": "array", ".pth": "array",
                  ".pck": "array", ".pkl": "array", ".pickle": "array", ".h5": "array",
                  ".hdf5": "array",
                  ".csv": "table", ".tsv": "table", ".xlsx": "table", ".xlsm": "table",
                  ".xls": "table", ".json": "annotation", ".jsonl": "table", ".xml": "annotation",
                  ".yaml": "annotation", ".yml": "annotation", ".txt": "text", ".md": "text"}
for _suffix in DICOM_SUFFIXES:
    KIND_OF_SUFFIX[_suffix] = "dicom"
MASK_NAME = re.compile(r"(?:[_\-.](?:seg|segmentation|mask|masks|msk|dseg|label|labels|gt|"
                       r"annotation)"
                       r"(?:[_\-.][a-z0-9]+)?$|^segmentation$|^mask$|^label$|"
                       # the mask word first, a case id after it (LiTS segmentation-12)
                       r"^(?:seg|segmentation|mask|gt|msk)[_\-.][a-z]*\d[\w\-]*$)", re.I)
MASK_FOLDER = re.compile(r"^(?:masks?|labels?(?:tr|ts)?|seg(?:mentations?)?|gt|ground[_\s-]?truth|"
                         r"structures|"   # PDDCA: <case>/structures/<organ>.nrrd
                         r"segmentation_masks|annotations?_masks?)$", re.I)


MASK_WORD = re.compile(r"^(?:masks?|groundtruths?|segmentations?|manual|manuals|"
                       r"annotations?_?masks?|delineations?|contours?)$", re.I)


def is_mask_folder(name: str) -> bool:
    """``masks``, ``labelsTr``, ``gt`` — or a name one of whose words is mask(s), ground
    truth(s), segmentation(s) or manual (``ManualMask``, ``leftMask``, ``lung_masks``, ``Mask
    images``, IDRiD's ``2. All Segmentation Groundtruths``, DRIVE's ``1st_manual``)."""
    if MASK_FOLDER.match(name):
        return True
    words = [w for w in re.split(r"[_\-\s.]+|(?<=[a-z])(?=[A-Z])", name) if w]
    joined = " ".join(words).lower()
    return any(MASK_WORD.match(w) for w in words) or "ground truth" in joined


def stem_of_name(name: str) -> str:
    """``x.nii.gz`` -> ``x``; ``Segmentation.seg.nrrd`` -> ``Segmentation.seg``."""
    suffix = image_suffix(name)
    if suffix in KIND_OF_SUFFIX or is_image(name):
        return name[: -len(suffix)] if suffix else name
    return os.path.splitext(name)[0]


def is_mask_stem(stem: str) -> bool:
    """A file stem named like a mask: a mask word at its end (``_mask``, ``_seg``) or
    an ending the datacard description gives the masks (types.described_mask_affixes)."""
    return bool(MASK_NAME.search(stem)) or \
        stem.lower().endswith(described_mask_affixes() or ("\0",))


def kind_of(name: str, folder_parts: tuple[str, ...] = ()) -> str:
    suffix = image_suffix(name)
    kind = KIND_OF_SUFFIX.get(suffix, "other")
    if kind in ("image", "tiff", "volume") and (
            is_mask_stem(stem_of_name(name)) or
            any(MASK_FOLDER.match(p) for p in folder_parts[-2:]) or
            bool(folder_parts) and is_mask_folder(folder_parts[-1])):
        return "segmentation"
    return kind


def is_mask_path(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` is named or filed as a mask (see kind_of)."""
    path = Path(path)
    return kind_of(path.name, tuple(path.parent.parts)) == "segmentation"


@dataclass
class Inventory:
    root: Path
    by_kind: dict[str, list[Path]] = field(default_factory=lambda: defaultdict(list))
    folders: dict[str, Counter] = field(default_factory=dict)  # relative folder -> kinds

    def files(self, *kinds: str) -> list[Path]:
        return [p for k in kinds for p in self.by_kind.get(k, [])]

    def count(self, *kinds: str) -> int:
        return sum(len(self.by_kind.get(k, [])) for k in kinds)

    def summary(self, max_folders: int = 12) -> dict:
        """Counts per kind and the busiest folders (names and counts only; no content)."""
        busiest = sorted(self.folders.items(), key=lambda kv: -sum(kv[1].values()))
        return {"files": {k: len(v) for k, v in sorted(self.by_kind.items()) if v},
                "folders": len(self.folders),
                "tree": [{"folder": f or ".", "files": dict(c)}
                         for f, c in busiest[:max_folders]]}


def take_inventory(root: Path, limit: int = MAX_FILES) -> Inventory:
    """One walk of ``root`` (hidden files skipped); shared by one scan's readers."""
    cache = getattr(_WALKS, "cache", None)
    key = ("inventory", str(root))
    if cache is not None and key in cache:
        return cache[key]
    inv = Inventory(root)
    total = 0
    for folder, dirs, files in links.walk(root):  # bad links skipped
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(folder, root)
        parts = () if rel == "." else tuple(Path(rel).parts)
        counts: Counter = Counter()
        base = Path(folder)
        for name in sorted(files):
            if name.startswith("."):
                continue
            kind = kind_of(name, parts)
            inv.by_kind[kind].append(base / name)
            counts[kind] += 1
        if counts:
            inv.folders["/".join(parts)] = counts
        total += sum(counts.values())
        if total > limit:
            raise ScanError(f"more than {limit} files under {root}; register a smaller folder")
    if cache is not None:
        cache[key] = inv
    return inv
