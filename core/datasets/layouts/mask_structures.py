"""Segmentation stored as one binary mask file per structure instead of one label map (layout
``image_mask_folders``, ``details["structure_masks"]``), two variants:

* ``structure_files``: a case folder holds its image and a mask subfolder of files named for
  structures (TotalSegmentator: ``s0001/ct.nii.gz`` + ``s0001/segmentations/liver.nii.gz``, one
  file per structure, empty when it is out of view); the file stems are the structures.
* ``structure_folders``: several mask folders, one per structure, each hold a file named like
  the image (Montgomery ``ManualMask/leftMask/`` + ``rightMask/``, JSRT/SCR ``masks/heart/`` +
  ``masks/left lung/``, COVID-QU-Ex ``lung masks/`` + ``infection masks/`` beside ``images/``);
  the folder names, without their mask word, are the structures.

Structures found in at least half of the cases are kept (the others are listed as skipped); a
case without a kept structure's file has that structure absent (all zero). ``labels[i]`` is
value i + 1 of the label map the index merges the files into (core.datasets.label_maps): in
the order ``labels.json``/``dataset.json`` or the description lists the structures, else sorted.
Each sample's ``extra``: ``label_path`` the case's structure mask files, ``label_structures``
the structure of each, ``case`` the case's name. GIF masks (JSRT/SCR) are read too.

May import: core.datasets.layouts.common, .inventory, .mask_files, .mask_labels,
.mask_pairing, .types, .links.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from core.datasets.layouts import links
from core.datasets.layouts.common import (build_result, common_parent, group_for, group_source,
                                          held_out_splits, split_of_path)
from core.datasets.layouts.inventory import is_mask_folder
from core.datasets.layouts.mask_files import geometry_problem
from core.datasets.layouts.mask_labels import labels_from_description, labels_from_files, \
    listed_names
from core.datasets.layouts.mask_pairing import LONE_MASK, mask_base, stem_of
from core.datasets.layouts.types import IMAGE_SUFFIXES, Sample, group_of, image_suffix

MASK_SUFFIXES = tuple(s for s in IMAGE_SUFFIXES if s not in (".dcm", ".dicom", ".npz", ".pt")) \
    + (".gif",)
MIN_SHARE = 0.25           # a structure kept must be in this share of the cases (a lesion
                           # type absent from most images: IDRiD soft exudates)
MAX_CASE_CHANNELS = 8
MAX_GEOMETRY_CHECKS = 5000
WORDS = re.compile(r"[_\-\s.]+|(?<=[a-z])(?=[A-Z])")
MASK_WORD = re.compile(r"^(?:masks?|manual)$", re.I)
SHORT_CODE = re.compile(r"^(?P<base>.+)[_\-](?P<code>[a-z]{1,4})$", re.I)   # IDRiD_01_MA


class StructureCase:
    """One case: its image channels (name -> file), its structure files, where it lies."""

    def __init__(self, key: str, channels: dict[str, Path], structures: dict[str, Path],
                 split: str):
        self.key, self.channels, self.structures, self.split = key, channels, structures, split


ENUMERATOR = re.compile(r"^(?:\d{1,2}|[A-Za-z])[.)]\s+")   # IDRiD's "1. Microaneurysms"


def structure_name(folder: str) -> str:
    """``leftMask`` -> ``left``, ``lung masks`` -> ``lung``, ``left lung`` -> ``left lung``,
    ``1. Microaneurysms`` -> ``Microaneurysms``."""
    folder = ENUMERATOR.sub("", folder)
    words = [w for w in WORDS.split(folder) if w]
    kept = [w for w in words if not MASK_WORD.match(w)]
    if not kept or len(kept) == len(words):
        return folder
    return ("_" if "_" in folder else " ").join(kept)


def _norm(name: str) -> str:
    return re.sub(r"[_\-\s]+", " ", str(name)).strip().lower()


def _mask_files(folder: Path) -> list[Path]:
    try:
        with links.scandir(folder) as it:
            names = sorted(e.name for e in it if not e.name.startswith(".") and e.is_file())
    except OSError:
        return []
    return [folder / n for n in names if image_suffix(n) in MASK_SUFFIXES]


def _subdirs(folder: Path) -> list[Path]:
    try:
        with links.scandir(folder) as it:
            return sorted(Path(e.path) for e in it
                          if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return []


def _in_mask_folder(path: Path, root: Path) -> bool:
    return any(is_mask_folder(p) for p in path.relative_to(root).parent.parts)


def _image_folders(root: Path, images: list[Path]) -> dict[Path, list[Path]]:
    """Images outside mask folders, by folder."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in images:
        if not _in_mask_folder(path, root):
            by_folder[path.parent].append(path)
    return by_folder


def _case_folder_cases(root: Path, folders: dict[Path, list[Path]]) -> list[StructureCase]:
    """``structure_files``: a case folder's image(s) and the files of its one mask subfolder."""
    cases = []
    for folder, files in sorted(folders.items()):
        if folder == root or len(files) > MAX_CASE_CHANNELS:
            continue
        subs = [d for d in _subdirs(folder) if is_mask_folder(d.name)]
        masks = _mask_files(subs[0]) if len(subs) == 1 else []
        if not masks:
            continue
        channels = {stem_of(p).lower() if len(files) > 1 else "": p for p in sorted(files)}
        cases.append(StructureCase(folder.name, channels, {stem_of(m): m for m in masks},
                                   split_of_path(files[0], root)))
    return cases


def _structure_folders(base: Path, image_dir: Path, seen: dict, root: Path) -> list[Path]:
    """Mask folders beside ``image_dir`` and the folders inside them (``masks/heart/``);
    ``seen`` keeps each base's answer (1,000 case folders share one base)."""
    if base not in seen:
        found = []
        for sub in _subdirs(base):
            if is_mask_folder(sub.name):
                found.append(sub)
                found.extend(_subdirs(sub))
        seen[base] = found
    found = list(seen[base])
    # a mask tree mirroring the image tree one level up (IDRiD: ``1. Original Images/
    # a. Training Set/`` beside ``2. All Segmentation Groundtruths/a. Training Set/
    # 1. Microaneurysms/``)
    if base != root and root in base.parents and image_dir.parent == base:   # never above
        if ("up", base) not in seen:
            seen[("up", base)] = [sub for sub in _subdirs(base.parent)
                                  if sub != base and is_mask_folder(sub.name)]
        for sub in seen[("up", base)]:
            mirror = sub / image_dir.name
            if mirror.is_dir():
                found.append(mirror)
                found.extend(_subdirs(mirror))
    return [d for d in found if d != image_dir and image_dir not in d.parents]


def _folder_cases(root: Path, folders: dict[Path, list[Path]]) -> list[StructureCase]:
    """``structure_folders``: each image's file in each of several structure mask folders."""
    cases, seen = [], {}
    for image_dir, files in sorted(folders.items()):
        stems = {stem_of(p).lower(): p for p in files}
        base = image_dir if image_dir == root else image_dir.parent
        matched: dict[str, dict[str, Path]] = {}
        for folder in _structure_folders(base, image_dir, seen, root):
            found: dict[str, Path] = {}
            for mask in _mask_files(folder):
                stem = stem_of(mask).lower()
                key = stem if stem in stems else (mask_base(stem) or "").lower()
                if key not in stems:   # the image's name and a short structure code: _MA
                    short = SHORT_CODE.match(stem)
                    key = short.group("base") if short else key
                if key in stems:
                    found.setdefault(key, mask)
            name = structure_name(folder.name)
            if len(found) >= MIN_SHARE * len(files) and \
                    len(found) > len(matched.get(name, {})):
                matched[name] = found
        if len(matched) < 2:
            continue
        for stem, path in sorted(stems.items()):
            structures = {name: found[stem] for name, found in matched.items() if stem in found}
            cases.append(StructureCase(stem_of(path), {"": path}, structures,
                                       split_of_path(path, root)))
    return cases


def _kept_structures(cases: list[StructureCase], skipped: list[str]) -> list[str]:
    counts = Counter(name for c in cases for name in c.structures)
    kept = [n for n, k in counts.items() if k >= max(2, MIN_SHARE * len(cases))]
    for name, k in sorted(counts.items()):
        if name not in kept:
            skipped.append(f"structure {name!r}: a mask in only {k} of {len(cases)} cases; "
                           "not used")
    return kept


def _consistent(cases: list[StructureCase], skipped: list[str]) -> tuple[list, list[str]]:
    """Cases holding the channel set most cases have; the others skipped with the reason."""
    sets = Counter(frozenset(c.channels) for c in cases)
    reference = sorted(sets.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[0][0]
    order = sorted(reference)
    kept = []
    for case in cases:
        if set(case.channels) != reference:
            skipped.append(f"case {case.key}: images {', '.join(sorted(case.channels))} where "
                           f"the other cases have {', '.join(order)}; not used")
            continue
        case.channels = {c: case.channels[c] for c in order}
        kept.append(case)
    return kept, order


def ordered_labels(root: Path, description: str, names: list[str]) -> tuple[list[str], str]:
    """The structures in the order labels.json/dataset.json or the description lists them
    (every structure must be listed), else sorted; and where the order came from."""
    found = labels_from_files(root)
    options = [(found[0], found[1]) if found else (None, ""),
               (labels_from_description(description), "description"),
               (listed_names(description, len(names)), "description")]
    by_norm = {_norm(n): n for n in names}
    for listed, source in options:
        order = list(dict.fromkeys(by_norm[_norm(x)] for x in listed or []
                                   if _norm(x) in by_norm))
        if len(order) == len(names):
            return order, f"{source} (order of the structures)"
    return sorted(names), "structure mask names (sorted)"


def _check_geometry(cases: list[StructureCase], skipped: list[str]) -> list[StructureCase]:
    kept = []
    for i, case in enumerate(cases):
        first = next(iter(case.structures.values()), None)
        if first is not None and i < MAX_GEOMETRY_CHECKS and \
                (problem := geometry_problem(list(case.channels.values()), first)):
            skipped.append(f"{first}: case skipped, {problem}")
            continue
        kept.append(case)
    return kept


def scan_structure_masks(root: Path, images: list[Path], description: str = ""):
    """ScanResult for one binary mask file per structure (see the module doc), or None."""
    folders = _image_folders(root, images)
    by_files, by_folders = _case_folder_cases(root, folders), _folder_cases(root, folders)
    variant, cases = max((("structure_files", by_files), ("structure_folders", by_folders)),
                         key=lambda v: sum(bool(c.structures) for c in v[1]))
    skipped: list[str] = []
    unlabeled = [c for c in cases if not c.structures]
    skipped.extend(f"{next(iter(c.channels.values()))}: no structure mask; unlabeled, not used"
                   for c in unlabeled)
    cases = [c for c in cases if c.structures]
    if len(cases) < 2 or len(cases) < len(unlabeled):
        return None
    kept = _kept_structures(cases, skipped)
    generic = [n for n in kept if LONE_MASK.match(n)]
    if not kept or (variant == "structure_files" and len(kept) == 1 and generic):
        return None  # one mask named mask/seg/label per case: a label map, not a structure
    labels, source = ordered_labels(root, description, kept)
    for case in cases:
        case.structures = {n: case.structures[n] for n in labels if n in case.structures}
    cases = _check_geometry([c for c in cases if c.structures], skipped)
    if not cases:
        return None
    cases, order = _consistent(cases, skipped)
    mapping = held_out_splits([c.split for c in cases])
    firsts = [next(iter(c.channels.values())) for c in cases]
    base = common_parent(firsts, root)
    samples, sources, missing = [], [], 0
    for case, first in zip(cases, firsts):
        if variant == "structure_files":   # the case folder, unless the name has a patient
            group, how = group_for(first, base)
        else:  # images side by side in a folder (of a class, a split): never one patient
            group, prefixed = group_of(first)
            how = "filename prefix" if prefixed else "none (one group per image)"
        sources.append(how)
        files = [str(p) for p in case.channels.values()]
        extra = {"label_path": [str(p) for p in case.structures.values()],
                 "label_structures": list(case.structures), "case": case.key}
        absent = [n for n in labels if n not in case.structures]
        if absent:
            extra["structures_without_file"] = absent  # absent: all zero in the label map
            missing += 1
        samples.append(Sample(files if len(files) > 1 else files[0], "case", group,
                              mapping.get(case.split, case.split), extra=extra))
    folders_used = sorted({p.parent.name for c in cases for p in c.structures.values()})
    where = (f"{folders_used[0]}/ of each case folder" if variant == "structure_files" else
             ", ".join(f"{f}/" for f in folders_used[:6]))
    details = {"variant": variant, "structure_masks": True, "structures": labels,
               "label_source": source, "source": f"one mask file per structure ({where})",
               "channels": len(order), "channel_names": order if order != [""] else [],
               "cases_missing_a_structure_file": missing, "unlabeled": len(unlabeled),
               "label_map": "merged into one label map per case when indexed (value i + 1 = "
                            "labels[i]; a smaller structure is drawn over a larger one)"}
    return build_result(root, "image_mask_folders", "segmentation", samples, len(images),
                        details, labels, skipped, group_source(sources))
