"""Segmentation layouts: images and masks paired by name (layout ``image_mask_folders``).

Variants (``details["variant"]``):

* ``sibling_folders``: ``images/`` + ``masks/`` (or img/label(s), image/segmentation_masks, ...),
  at the top, under split folders (``Training/{img,label}`` + ``Testing/img``, ``train/`` +
  ``test/``), or one folder down; nnU-Net/Decathlon ``imagesTr/labelsTr`` (+ ``imagesTs``
  [``labelsTs``]) is variant ``nnunet``. Images are paired with masks by stem, by stem without a
  mask suffix (``case1_mask``), or by the case number when the names differ only by a word
  (BTCV ``img0001`` / ``label0001``). Images with no mask folder (BTCV ``Testing/img``,
  nnU-Net ``imagesTs``) are reported as unlabeled and not used.
* ``suffix_masks``: masks beside their images, named ``<image>_seg`` / ``_mask`` / ``_label``.
* ``case_folders``: one folder per case with its sequences and one mask (BraTS:
  ``case001/case001_t1.nii.gz, _t1ce, _t2, _flair, _seg.nii.gz``).

Several files per case (``case_t1``/``case_t2``, nnU-Net ``case_0000``/``case_0001``) are the
channels of one image, listed in one fixed order (sorted channel names) for every case; a case
missing a channel the others have is skipped with the reason. Masks whose grid (shape, read from
the file header only) differs from their image's are skipped too.

Label names (``labels[i]`` is mask value i + 1) come from ``labels.json`` (a list, {value: name}
or {name: value}), a Decathlon/nnU-Net ``dataset.json`` (or any top-level JSON with such a
``labels`` entry), the datacard description ("labels: 1 liver, 2 spleen"), else from the values
found in a few masks (``label_1``, ``label_2``, ...).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.datasets.layouts.common import (SPLITS, build_result, common_parent, group_for, group_source,
                                held_out_splits, load_json, split_of_path)
from core.datasets.layouts.types import Sample, ScanError

IMAGE_DIRS = ("images", "imagestr", "img", "image", "imgs", "volumes")
MASK_DIRS = ("masks", "labelstr", "label", "labels", "mask", "segmentation_masks",
             "segmentations", "segmentation", "seg", "gt", "ground_truth", "groundtruth")
CHANNEL_SUFFIX = re.compile(r"[_-](?P<ch>\d{4}|t1c?e?|t1gd|t1n|t2w?|t2f|flair|adc|dwi|pd|ct|pet|"
                            r"ch\d+)$", re.I)
IMAGE_WORD = re.compile(r"[_-](?:img|image)$", re.I)
MASK_SUFFIX = re.compile(r"^(?P<base>.+?)[_-](?:seg|segmentation|mask|masks|label|labels|gt|"
                         r"annotation)$", re.I)
ID_NOISE = re.compile(r"images|image|imgs|img|labels|label|masks|mask|segmentation|seg|gt|"
                      r"volume|vol|[_\-\s.]", re.I)
# BIDS names (VerSe: sub-verse004_ct.nii.gz + sub-verse004_seg-vert_msk.nii.gz): the subject
# (and session) entities identify the case whatever the rest of the name says
BIDS_KEY = re.compile(r"^(sub-[a-z0-9]+(?:_ses-[a-z0-9]+)?)(?=[_.]|$)", re.I)
SEGMENT_WORDS = re.compile(r"segment|mask|delineat|contour", re.I)
CLASSIFY_WORDS = re.compile(r"classif|diagnos|grading|\bgrade\b", re.I)
MAX_GEOMETRY_CHECKS = 5000
RASTER = {"png", "jpg", "jpeg", "bmp", "tif", "tiff"}


def _stem(path: Path) -> str:
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


# ---------------------------------------------------------------- label names

def _names_from_mapping(data) -> list[str] | None:
    """labels from a list (position i -> value i + 1; a leading "background" dropped), a
    {value: name} or a {name: value} mapping (value 0 = background dropped)."""
    if isinstance(data, list) and data and all(isinstance(x, (str, int)) for x in data):
        names = [str(x) for x in data]
        return names[1:] if names[0].strip().lower() == "background" else names
    if not isinstance(data, dict) or not data:
        return None
    if all(str(k).strip().isdigit() for k in data):
        values = {int(k): str(v) for k, v in data.items()}
    elif all(isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit())
             for v in data.values()):
        values = {int(v): str(k) for k, v in data.items()}
    elif all(isinstance(v, list) and v and all(isinstance(x, int) for x in v)
             for v in data.values()):  # nnU-Net region labels {"whole": [1, 2, 3]}: not values
        return None
    else:
        return None
    values = {v: n for v, n in values.items() if v > 0}
    if not values:
        return None
    return [values.get(v, f"label_{v}") for v in range(1, max(values) + 1)]


def _label_files(root: Path) -> list[Path]:
    files = [root / "labels.json", *sorted(root.glob("*/labels.json")), root / "dataset.json",
             *sorted(root.glob("*/dataset.json"))]
    files += sorted(p for p in root.glob("*.json") if p not in files)
    return [p for p in files if p.is_file() and p.stat().st_size < 5_000_000]


def labels_from_files(root: Path) -> tuple[list[str], str] | None:
    for path in _label_files(root):
        data = load_json(path)
        if isinstance(data, dict) and ("labels" in data or path.name != "labels.json"):
            data = data.get("labels")
        names = _names_from_mapping(data)
        if names:
            return names, path.name
    return None


LABEL_TRIGGER = re.compile(r"\b(?:label(?:s| names| values)?|mask values|classes|class names|"
                           r"segmentation labels)\s*(?:are\b|:|=|\()", re.I)
VALUE_NAME = re.compile(r"(?<![\w.])(\d{1,3})\s*(?:[:=]|->|→|-)?\s*([A-Za-z][\w\- ]*?)\s*"
                        r"(?=[,;)/]|\band\b|$)", re.I)
NAME_VALUE = re.compile(r"([A-Za-z][\w\- ]*?)\s*(?:[:=]|\(|->)\s*(\d{1,3})\)?\s*"
                        r"(?=[,;)]|\band\b|$)", re.I)


def labels_from_description(description: str) -> list[str] | None:
    """Label names a datacard description states: "labels: 1 liver, 2 spleen", "mask values:
    0 = background, 1 = kidney", "label values: liver=1, spleen=2" or "labels: liver, spleen"
    (in mask-value order)."""
    for match in LABEL_TRIGGER.finditer(description or ""):
        rest = description[match.end():]
        segment = re.split(r"\.(?:\s|$)|\n", rest, maxsplit=1)[0].strip()
        pairs = {int(v): n.strip() for v, n in VALUE_NAME.findall(segment)}
        if not pairs:
            pairs = {int(v): n.strip() for n, v in NAME_VALUE.findall(segment)}
        pairs = {v: n for v, n in pairs.items() if v > 0 and n.lower() != "background"}
        if pairs:
            return [pairs.get(v, f"label_{v}") for v in range(1, max(pairs) + 1)]
        words = [w.strip() for w in re.split(r",|;|\band\b|/", segment) if w.strip()]
        if words and all(re.fullmatch(r"[A-Za-z][A-Za-z\- ]{0,40}", w) for w in words):
            names = [w for w in words if w.lower() != "background"]
            if names:
                return names
    return None


def read_mask(path: Path) -> np.ndarray:
    """Mask voxels (for the values of a few masks only)."""
    name = path.name.lower()
    if name.endswith((".nii", ".nii.gz")):
        import nibabel as nib
        return np.asanyarray(nib.load(str(path)).dataobj)
    if name.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    if name.split(".")[-1] in RASTER:
        from PIL import Image
        with Image.open(path) as img:
            return np.asarray(img)
    import SimpleITK as sitk
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def mask_values(masks: list[Path], count: int = 3) -> list[int]:
    """Nonzero values found in the ``count`` smallest masks."""
    chosen = sorted(masks, key=lambda p: (p.stat().st_size, str(p)))[:count]
    values: set[int] = set()
    for path in chosen:
        try:
            values.update(int(v) for v in np.unique(read_mask(path)) if v > 0)
        except Exception:  # noqa: BLE001 - an unreadable mask is reported at registration
            continue
    return sorted(values)


def label_names(root: Path, description: str, masks: list[Path]) -> tuple[list[str], dict]:
    """(labels, facts): names from files, the description, or mask values (see module doc)."""
    found = labels_from_files(root)
    if found:
        return found[0], {"label_source": found[1]}
    named = labels_from_description(description)
    if named:
        return named, {"label_source": "description"}
    values = mask_values(masks)
    facts = {"label_source": "mask values", "mask_values": values}
    if not values:
        return ["label_1"], facts
    if max(values) <= 32:
        return [f"label_{v}" for v in range(1, max(values) + 1)], facts
    facts["note"] = (f"mask values {values[:10]} are not 1..N; give labels.json or remap the "
                     "masks so that labels[i] is value i + 1")
    return [f"label_{v}" for v in values], facts


# ---------------------------------------------------------------- geometry

def header_shape(path: Path) -> tuple[str, tuple[int, ...]] | None:
    """(kind, spatial shape) from the file header only; None when not cheaply readable."""
    name = path.name.lower()
    try:
        if name.endswith((".nii", ".nii.gz")):
            import nibabel as nib
            return "nifti", tuple(int(s) for s in nib.load(str(path)).shape)
        if name.split(".")[-1] in RASTER:
            from PIL import Image
            with Image.open(path) as img:
                return "raster", (img.size[1], img.size[0])
        if name.endswith((".nrrd", ".mha", ".mhd")):
            import SimpleITK as sitk
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            return "nifti", tuple(int(s) for s in reader.GetSize())  # x, y, z like NIfTI
        if name.endswith(".npy"):
            return "npy", tuple(np.load(path, mmap_mode="r", allow_pickle=False).shape)
    except Exception:  # noqa: BLE001 - unreadable headers are reported at registration
        return None
    return None


def _spatial(shape: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(shape)
    while len(shape) > 2 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def geometry_problem(images: list[Path], mask: Path) -> str:
    """Why the mask cannot go with the image (shapes differ), or ""."""
    got = header_shape(mask)
    if got is None:
        return ""
    kind, mask_shape = got[0], _spatial(got[1])
    for image in images:
        seen = header_shape(image)
        if seen is None or seen[0] != kind:
            continue
        shape = _spatial(seen[1])
        if len(shape) == len(mask_shape) + 1:  # a 4D image holding its channels (Decathlon)
            shape = shape[:-1]
        if shape != mask_shape:
            return (f"mask shape {mask_shape} differs from image shape {shape} ({image.name}); "
                    "the mask must be on the image's grid")
    return ""


# ---------------------------------------------------------------- pairing

def _subdirs(folder: Path) -> dict[str, Path]:
    import os  # scandir: no Path and no stat per file, which matters in 100,000-file folders
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir())
    return {name.lower(): folder / name for name in names}


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
    mask_dir = next((sub[n] for n in MASK_DIRS if n in sub and sub[n] != image_dir), None)
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


def _pair_folder(image_dir: Path, mask_dir: Path, split: str, images: list[Path],
                 root: Path) -> tuple[dict, list[Path], list[Path]]:
    """Cases of one image/mask folder pair, images without a mask, masks without an image."""
    masks = [p for p in images if mask_dir in p.parents]
    by_key: dict[tuple[str, str], Path] = {}
    ids: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for mask in masks:
        rel, stem = _rel_parent(mask, mask_dir), _stem(mask).lower()
        by_key.setdefault((rel, stem), mask)
        base = MASK_SUFFIX.match(stem)
        if base:
            by_key.setdefault((rel, base.group("base")), mask)
        ids[(rel, _norm_id(stem))].append(mask)
    unique_ids = {k: v[0] for k, v in ids.items() if len(v) == 1 and k[1]}
    bids: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for mask in masks:
        key = BIDS_KEY.match(_stem(mask).lower())
        if key:
            bids[(_rel_parent(mask, mask_dir), key.group(1))].append(mask)
    unique_bids = {k: v[0] for k, v in bids.items() if len(v) == 1}
    cases: dict[tuple[str, str, str], Case] = {}
    unpaired: list[Path] = []
    used: set[Path] = set()
    for path in sorted(p for p in images if image_dir in p.parents):
        rel, stem = _rel_parent(path, image_dir), _stem(path).lower()
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
                                Case(_stem(mask), mask, split_here))
        case.channels.setdefault(channel, path)
        used.add(mask)
    return cases, unpaired, [m for m in masks if m not in used]


def _consistent_channels(cases: list[Case], skipped: list[str]) -> tuple[list[Case], list[str]]:
    """Cases holding the channel set most cases have (in sorted order); others are skipped."""
    sets = Counter(frozenset(c.channels) for c in cases)
    reference = sorted(sets.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[0][0]
    order = sorted(reference)
    kept = []
    for case in cases:
        missing = sorted(reference - set(case.channels))
        if missing:
            where = next(iter(case.channels.values())).parent
            skipped.append(f"{where}: case {case.key} skipped, missing sequence(s) "
                           f"{', '.join(missing) or 'image'} (the other cases have "
                           f"{', '.join(order) or 'one image'})")
            continue
        case.channels = {c: case.channels[c] for c in order}
        kept.append(case)
    return kept, order


def _check_geometry(cases: list[Case], skipped: list[str]) -> tuple[list[Case], int]:
    kept, checked = [], 0
    for case in cases:
        if checked < MAX_GEOMETRY_CHECKS:
            checked += 1
            problem = geometry_problem(list(case.channels.values()), case.mask)
            if problem:
                skipped.append(f"{case.mask}: case skipped, {problem}")
                continue
        kept.append(case)
    return kept, checked


def _dataset_channels(root: Path) -> dict[str, str]:
    """{"0": "T2", "1": "ADC"} from a Decathlon (``modality``) / nnU-Net (``channel_names``)
    dataset.json, else {}."""
    data = load_json(root / "dataset.json") if (root / "dataset.json").is_file() else None
    names = (data or {}).get("channel_names") or (data or {}).get("modality") if \
        isinstance(data, dict) else None
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


def _channels(root: Path, order: list[str], first: Case) -> tuple[int, list[str]]:
    """(number of channels, their names): channel files (nnU-Net ``0000`` indices named from
    dataset.json), or the last axis of a single 4D file (Decathlon) one axis longer than the
    mask."""
    if order != [""]:
        names = _dataset_channels(root) if all(c.isdigit() for c in order) else {}
        return len(order), [names.get(str(int(c)), c) if names else c for c in order]
    image, mask = header_shape(next(iter(first.channels.values()))), header_shape(first.mask)
    if image and mask and len(_spatial(image[1])) == len(_spatial(mask[1])) + 1:
        count = _spatial(image[1])[-1]
        names = _dataset_channels(root)
        return count, [names.get(str(i), str(i)) for i in range(count)]
    return 1, []


def _result(root: Path, cases: list[Case], images: list[Path], skipped: list[str],
            description: str, details: dict):
    cases, order = _consistent_channels(cases, skipped)
    cases, checked = _check_geometry(cases, skipped)
    if not cases:
        return None
    mapping = held_out_splits([c.split for c in cases])
    labels, facts = label_names(root, description, [c.mask for c in cases])
    samples, sources = [], []
    base = common_parent([next(iter(c.channels.values())) for c in cases], root)
    for case in cases:
        files = [str(p) for p in case.channels.values()]
        first = next(iter(case.channels.values()))
        group, source = group_for(first, base)
        sources.append(source)
        samples.append(Sample(files if len(files) > 1 else files[0], "case", group,
                              mapping.get(case.split, case.split),
                              extra={"label_path": str(case.mask)}))
    count, names = _channels(root, order, cases[0])
    details.update(facts, channels=count, channel_names=names, geometry_checked=checked)
    return build_result(root, "image_mask_folders", "segmentation", samples, len(images),
                        details, labels, skipped, group_source(sources))


def scan_sibling_folders(root: Path, images: list[Path], description: str = ""):
    """ScanResult for image and mask sibling folders, or None."""
    sets = find_folder_sets(root)
    if not any(mask for _, mask, _ in sets):
        return None
    cases: dict = {}
    skipped: list[str] = []
    unlabeled = 0
    for image_dir, mask_dir, split in sets:
        if mask_dir is None:
            extra = [p for p in images if image_dir in p.parents]
            unlabeled += len(extra)
            skipped.extend(f"{p}: unlabeled ({image_dir.name}/ has no mask folder beside it); "
                           "not used, the test set is split from the labelled cases"
                           for p in extra)
            continue
        found, unpaired, orphans = _pair_folder(image_dir, mask_dir, split, images, root)
        cases.update(found)
        skipped.extend(f"{p}: no mask with a matching name in {mask_dir.name}/" for p in unpaired)
        skipped.extend(f"{p}: mask without an image in {image_dir.name}/" for p in orphans)
    if not cases:
        if any(s[1] is not None and any(s[1] in p.parents for p in images) for s in sets):
            pair = next(s for s in sets if s[1] is not None)
            raise ScanError(f"found {pair[0].name}/ and {pair[1].name}/ under {root} but no mask "
                            "file name matches an image file name; name each mask like its "
                            "image (images/case_001.nii.gz with masks/case_001.nii.gz)")
        return None
    labelled = [s for s in sets if s[1] is not None]
    details = {"variant": "nnunet" if labelled[0][0].name.lower() == "imagestr"
               else "sibling_folders",
               "image_dir": str(labelled[0][0]), "mask_dir": str(labelled[0][1]),
               "image_dirs": [str(s[0]) for s in labelled], "unlabeled": unlabeled}
    ordered = [cases[k] for k in sorted(cases, key=lambda k: (k[1], cases[k].key, k[0]))]
    return _result(root, ordered, images, skipped, description, details)


def _suffix_cases(images: list[Path], root: Path) -> tuple[list[Case], list[Path]]:
    """Cases whose masks sit beside their images (``<case>_seg``), and images left over."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in images:
        by_folder[path.parent].append(path)
    cases: list[Case] = []
    leftover: list[Path] = []
    for folder, files in sorted(by_folder.items()):
        masks: dict[str, Path] = {}
        for path in files:
            match = MASK_SUFFIX.match(_stem(path))
            if match:
                masks.setdefault(match.group("base").lower(), path)
        if not masks:
            leftover.extend(files)
            continue
        here: dict[str, Case] = {}
        mask_files = set(masks.values())
        for path in sorted(files):
            if path in mask_files:
                continue
            stem = _stem(path).lower()
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
            case = here.setdefault(base, Case(_stem(masks[base])[:len(base)], masks[base],
                                              split_of_path(path, root)))
            case.channels.setdefault(channel, path)
        cases.extend(here[b] for b in sorted(here))
    return cases, leftover


def scan_suffix_masks(root: Path, images: list[Path], description: str = ""):
    """ScanResult for masks named ``<image>_seg/_mask/_label`` beside their images (one folder
    per case, BraTS style, or many cases per folder), or None."""
    cases, leftover = _suffix_cases(images, root)
    if len(cases) < 2:
        return None
    used = sum(len(c.channels) for c in cases)
    if used < 0.5 * (used + len(leftover)):
        return None
    folders = Counter(c.mask.parent for c in cases)
    non_split = {f for f in folders if f.name.lower() not in SPLITS and f != root}
    if len(non_split) >= 2 and all(n > 1 for n in folders.values()) and \
            not SEGMENT_WORDS.search(description or ""):
        return None  # class folders that also hold masks: a diagnosis set unless said otherwise
    case_folders = len(folders) >= 2 and all(n == 1 for n in folders.values())
    skipped = [f"{p}: no mask ({_stem(p)}_seg/_mask/_label) beside it; unlabeled, "
               "not used" for p in leftover]
    details = {"variant": "case_folders" if case_folders else "suffix_masks",
               "unlabeled": len(leftover)}
    return _result(root, cases, images, skipped, description, details)


def classification_only(description: str) -> bool:
    """The description asks for classification and never mentions segmentation or masks, so a
    label table beside mask folders wins over the masks."""
    return bool(CLASSIFY_WORDS.search(description or "")) and \
        not SEGMENT_WORDS.search(description or "")


def scan_masks(root: Path, images: list[Path], description: str = ""):
    """The first segmentation variant that fits (sibling folders, then masks beside images)."""
    return scan_sibling_folders(root, images, description) or \
        scan_suffix_masks(root, images, description)
