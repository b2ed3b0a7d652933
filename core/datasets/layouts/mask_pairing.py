"""Pairing segmentation images with their masks: image/mask sibling folders (at the top, under
split folders or one folder down; nnU-Net ``imagesTr/labelsTr``) paired by stem, by stem
without a mask suffix, by case number or by BIDS subject; and masks named ``<image>_seg`` beside
their images. Each pairing yields ``Case``s: one mask and its image channels.

May import: core.datasets.layouts.common."""
from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.layouts.common import SPLITS, split_of_path
from core.datasets.layouts import links
from core.datasets.layouts.inventory import is_mask_folder
from core.datasets.layouts.types import described_mask_affixes

IMAGE_DIRS = ("images", "imagestr", "img", "image", "imgs", "volumes")
MASK_DIRS = ("masks", "labelstr", "label", "labels", "mask", "segmentation_masks",
             "segmentations", "segmentation", "seg", "gt", "ground_truth", "groundtruth")
CHANNEL_SUFFIX = re.compile(r"[_-](?P<ch>\d{4}|t1c?e?|t1gd|t1n|t2w?|t2f|flair|adc|dwi|pd|ct|pet|"
                            r"ch\d+)$", re.I)
IMAGE_WORD = re.compile(r"[_-](?:img|image)$", re.I)
MASK_SUFFIX = re.compile(r"^(?P<base>.+?)[_\-.](?:seg|segmentation|mask|masks|msk|dseg|label|"
                         r"labels|gt|annotation)$", re.I)


def mask_base(stem: str) -> str | None:
    """The image stem a mask's stem names (``case7_seg`` -> ``case7``), or None: a mask word at
    the end, or an ending the datacard description gives the masks (``_les``)."""
    match = MASK_SUFFIX.match(stem)
    if match:
        return match.group("base")
    low = stem.lower()
    for affix in described_mask_affixes():
        if low.endswith(affix) and len(low) > len(affix):
            return stem[: -len(affix)]
    return None


# a mask named only for what it is (3D Slicer's Segmentation.seg.nrrd, mask.nii.gz, label.png):
# the mask of the case folder it sits in
LONE_MASK = re.compile(r"^(?:segmentation(?:\.seg)?|seg|mask|label|labels|gt|"
                       r"[\w-]*\.seg)$", re.I)
MAX_CASE_CHANNELS = 8
LEAD_NUMBER = re.compile(r"^(\d+)[_\-\s.]+[A-Za-z]")   # 21_training, 21_manual1
ID_NOISE = re.compile(r"images|image|imgs|img|labels|label|masks|mask|segmentation|seg|gt|"
                      r"volume|vol|[_\-\s.]", re.I)
# BIDS names (VerSe: sub-verse004_ct.nii.gz + sub-verse004_seg-vert_msk.nii.gz): the subject
# (and session) entities identify the case whatever the rest of the name says
BIDS_KEY = re.compile(r"^(sub-[a-z0-9]+(?:_ses-[a-z0-9]+)?)(?=[_.]|$)", re.I)


def stem_of(path: Path) -> str:
    """The name without its image suffix (``.nii.gz`` whole; dots inside UIDs are kept)."""
    name = path.name
    if name.lower().endswith(".nii.gz"):
        return name[:-7]
    return name.rsplit(".", 1)[0] if "." in name else name


@dataclass
class Case:
    key: str
    mask: Path
    split: str
    channels: dict[str, Path] = field(default_factory=dict)


def _subdirs(folder: Path) -> dict[str, Path]:
    # scandir: no Path and no stat per file, which matters in 100,000-file folders; links
    # that loop, dangle or leave the dataset are skipped before is_dir follows them
    with links.scandir(folder) as it:
        names = sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir())
    return {name.lower(): folder / name for name in names}


# a folder name that says a person drew it: the labels, where a plain ``mask/`` beside it may
# be a field of view
ANNOTATION_DIR = re.compile(r"manual|annotat|ground[\s_-]?truth|groundtruth|\bgt\b|label|"
                            r"delineat|contour|segmentation", re.I)


def _folder_sets(parent: Path, split: str) -> list[tuple[Path, Path | None, str]]:
    """(image folder, mask folder or None, split) found directly in ``parent``."""
    sub = _subdirs(parent)
    if "imagestr" in sub:
        labelled_test = "imagests" in sub and "labelsts" in sub
        sets = [(sub["imagestr"], sub.get("labelstr"), "train" if labelled_test else split)]
        if "imagests" in sub:
            sets.append((sub["imagests"], sub.get("labelsts"), "test" if labelled_test else split))
        return sets
    image_dir = next((sub[n] for n in IMAGE_DIRS if n in sub), None)
    mask_dir = next((sub[n] for n in MASK_DIRS if n in sub and sub[n] != image_dir), None) or \
        next((d for n, d in sorted(sub.items()) if d != image_dir and is_mask_folder(d.name)),
             None)
    drawn = [d for n, d in sorted(sub.items()) if d not in (image_dir, mask_dir) and
             is_mask_folder(d.name) and ANNOTATION_DIR.search(n)]
    if mask_dir is not None and drawn and not ANNOTATION_DIR.search(mask_dir.name):
        # DRIVE: ``mask/`` is the field of view; ``1st_manual/`` holds the annotation
        mask_dir = drawn[0]
    others = [d for d in sub.values() if d not in (image_dir, mask_dir)]
    if image_dir is None and mask_dir is not None and len(others) == 1:
        image_dir = others[0]   # ``Original/`` beside ``Ground Truth/``: the images
    return [(image_dir, mask_dir, split)] if image_dir else []


def find_folder_sets(root: Path, depth: int = 1) -> list[tuple[Path, Path | None, str]]:
    """Image/mask folder sets at the top, under split folders, or one folder down."""
    sets = _folder_sets(root, "")
    if any(mask for _, mask, _ in sets):
        return sets
    subs = _subdirs(root)
    split_sets = [s for name, d in subs.items() if name in SPLITS
                  for s in _folder_sets(d, SPLITS[name])]
    if any(mask for _, mask, _ in split_sets):
        return split_sets
    if depth > 0:
        for name, d in subs.items():
            if name not in SPLITS:
                inner = find_folder_sets(d, depth - 1)
                if inner:
                    return inner
    return []


def _norm_id(stem: str) -> str:
    return ID_NOISE.sub("", stem).lower()


def _rel_parent(path: Path, folder: Path) -> str:
    return path.relative_to(folder).parent.as_posix().lower()


def _gif_masks(mask_dir: Path) -> list[Path]:
    """GIF masks (DRIVE's ``1st_manual/*.gif``): a mask format, though not an image one."""
    out = []
    for dirpath, _dirs, files in os.walk(mask_dir):
        out += [Path(dirpath) / f for f in sorted(files) if f.lower().endswith(".gif")]
    return out


def pair_folder(image_dir: Path, mask_dir: Path, split: str, images: list[Path],
                root: Path) -> tuple[dict, list[Path], list[Path]]:
    """Cases of one image/mask folder pair, images without a mask, masks without an image."""
    masks = [p for p in images if mask_dir in p.parents] + _gif_masks(mask_dir)
    by_key: dict[tuple[str, str], Path] = {}
    ids: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for mask in masks:
        rel, stem = _rel_parent(mask, mask_dir), stem_of(mask).lower()
        by_key.setdefault((rel, stem), mask)
        base = mask_base(stem)
        if base:
            by_key.setdefault((rel, base), mask)
        ids[(rel, _norm_id(stem))].append(mask)
    unique_ids = {k: v[0] for k, v in ids.items() if len(v) == 1 and k[1]}
    numbers: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for mask in masks:   # DRIVE: 21_training.tif with 21_manual1.gif, the case number first
        lead = LEAD_NUMBER.match(stem_of(mask))
        if lead:
            numbers[(_rel_parent(mask, mask_dir), lead.group(1).lstrip("0"))].append(mask)
    unique_numbers = {k: v[0] for k, v in numbers.items() if len(v) == 1}
    bids: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for mask in masks:
        key = BIDS_KEY.match(stem_of(mask).lower())
        if key:
            bids[(_rel_parent(mask, mask_dir), key.group(1))].append(mask)
    unique_bids = {k: v[0] for k, v in bids.items() if len(v) == 1}
    cases: dict[tuple[str, str, str], Case] = {}
    unpaired: list[Path] = []
    used: set[Path] = set()
    for path in sorted(p for p in images if image_dir in p.parents):
        rel, stem = _rel_parent(path, image_dir), stem_of(path).lower()
        found = None
        for key, channel in ((stem, ""), (IMAGE_WORD.sub("", stem), "")):
            if (rel, key) in by_key:
                found = (by_key[(rel, key)], channel)
                break
        match = CHANNEL_SUFFIX.search(stem)
        if found is None and match and (rel, stem[:match.start()]) in by_key:
            found = (by_key[(rel, stem[:match.start()])], match.group("ch").lower())
        if found is None and (rel, _norm_id(stem)) in unique_ids:
            found = (unique_ids[(rel, _norm_id(stem))], "")
        lead = LEAD_NUMBER.match(stem)
        if found is None and lead and (rel, lead.group(1).lstrip("0")) in unique_numbers:
            found = (unique_numbers[(rel, lead.group(1).lstrip("0"))], "")
        bids_key = BIDS_KEY.match(stem)
        if found is None and bids_key and (rel, bids_key.group(1)) in unique_bids:
            # the rest of the image name (ct, t1w, ...) names its channel
            found = (unique_bids[(rel, bids_key.group(1))], stem[bids_key.end():].lstrip("_-"))
        if found is None:
            unpaired.append(path)
            continue
        mask, channel = found
        split_here = split or split_of_path(path, root)
        case = cases.setdefault((split_here, rel, str(mask)),
                                Case(stem_of(mask), mask, split_here))
        case.channels.setdefault(channel, path)
        used.add(mask)
    return cases, unpaired, [m for m in masks if m not in used]


def _lone_mask_case(folder: Path, files: list[Path], root: Path) -> Case | None:
    """A case folder holding one mask named only for what it is (``Segmentation.seg.nrrd``,
    ``mask.nii.gz``) and a few images whose names do not pair with it: they are its channels."""
    lone = [p for p in files if LONE_MASK.match(stem_of(p))]
    others = [p for p in files if p not in lone]
    if len(lone) != 1 or not 1 <= len(others) <= MAX_CASE_CHANNELS or folder == root:
        return None
    base = mask_base(stem_of(lone[0]))
    if base and any(stem_of(p).lower().startswith(base.lower()) for p in others):
        return None  # <case>.nii.gz + <case>.seg.nrrd: the stem pairing below reads it
    case = Case(folder.name, lone[0], split_of_path(lone[0], root))
    for path in sorted(others):
        case.channels[stem_of(path).lower() if len(others) > 1 else ""] = path
    return case


def derivative_cases(root: Path, images: list[Path]) -> tuple[list[Case], list[Path]]:
    """Cases of a BIDS dataset whose masks sit in ``derivatives/`` (ISLES 2022:
    ``derivatives/sub-X/ses-1/sub-X_ses-1_msk.nii.gz`` for ``sub-X/ses-1/dwi/sub-X_ses-1_dwi``,
    ``_adc`` and ``anat/..._FLAIR``): paired by the subject and session entities, the rest of
    each image name its channel; and the images left over."""
    derived = next((d for n, d in _subdirs(root).items() if n == "derivatives"), None)
    if derived is None:
        return [], []
    masks: dict[str, list[Path]] = defaultdict(list)
    for path in images:
        key = BIDS_KEY.match(stem_of(path).lower())
        if key and derived in path.parents and mask_base(stem_of(path)):
            masks[key.group(1)].append(path)
    cases: dict[str, Case] = {}
    leftover: list[Path] = []
    for path in sorted(images):
        if derived in path.parents:
            continue
        stem = stem_of(path)
        key = BIDS_KEY.match(stem.lower())
        if not key or len(masks.get(key.group(1), [])) != 1:
            leftover.append(path)
            continue
        channel = stem[key.end():].lstrip("_-").lower() or "image"
        case = cases.setdefault(key.group(1), Case(key.group(1), masks[key.group(1)][0],
                                                   split_of_path(path, root)))
        case.channels.setdefault(channel, path)
    return [cases[k] for k in sorted(cases)], leftover


# the mask word first and the image's word first, one case id after them (LiTS:
# ``volume-12.nii`` + ``segmentation-12.nii`` in one folder)
MASK_PREFIX = re.compile(r"^(?:seg|segmentation|mask|gt|msk)[_\-.](?P<id>[A-Za-z]*\d[\w\-]*)$",
                         re.I)
IMAGE_PREFIX = re.compile(r"^(?:volume|vol|image|img|scan|ct|mr|mri|data)[_\-.](?P<id>.+)$",
                          re.I)


def _prefix_cases(files: list[Path], root: Path) -> tuple[list[Case], list[Path]]:
    """Cases of one folder whose masks and images are named ``<word>-<id>``; (cases, rest)."""
    masks = {}
    for path in files:
        match = MASK_PREFIX.match(stem_of(path))
        if match:
            masks.setdefault(match.group("id").lower(), path)
    if not masks:
        return [], files
    cases, rest = [], []
    for path in sorted(files):
        if path in masks.values():
            continue
        match = IMAGE_PREFIX.match(stem_of(path))
        mask = masks.get(match.group("id").lower()) if match else None
        if mask is None:
            rest.append(path)
            continue
        cases.append(Case(stem_of(path), mask, split_of_path(path, root), {"": path}))
    return cases, rest


def suffix_cases(images: list[Path], root: Path) -> tuple[list[Case], list[Path]]:
    """Cases whose masks sit beside their images (``<case>_seg``), and images left over."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in images:
        by_folder[path.parent].append(path)
    cases: list[Case] = []
    leftover: list[Path] = []
    for folder, files in sorted(by_folder.items()):
        masks: dict[str, Path] = {}
        for path in files:
            base = mask_base(stem_of(path))
            if base:
                masks.setdefault(base.lower(), path)
        lone = _lone_mask_case(folder, files, root)
        if lone is not None:
            cases.append(lone)
            continue
        if not masks:
            found, rest = _prefix_cases(files, root)
            cases.extend(found)
            leftover.extend(rest)
            continue
        here: dict[str, Case] = {}
        mask_files = set(masks.values())
        for path in sorted(files):
            if path in mask_files:
                continue
            stem = stem_of(path).lower()
            if stem in masks:
                base, channel = stem, ""
            else:
                bases = [b for b in masks if stem.startswith(b) and len(stem) > len(b) + 1
                         and stem[len(b)] in "_-"]
                if not bases:
                    leftover.append(path)
                    continue
                base = max(bases, key=len)
                channel = stem[len(base) + 1:]
            case = here.setdefault(base, Case(stem_of(masks[base])[:len(base)], masks[base],
                                              split_of_path(path, root)))
            case.channels.setdefault(channel, path)
        cases.extend(here[b] for b in sorted(here))
    return cases, leftover
