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

Where the parts live: mask_pairing pairs images with masks, mask_labels names the labels,
mask_files reads mask values and header shapes.

May import: core.datasets.layouts.mask_pairing, .mask_labels, .mask_files, .common, .types.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts.common import (build_result, common_parent, group_for,
                                          group_source, held_out_splits, load_json)
from core.datasets.layouts.mask_files import geometry_problem, header_shape, spatial_shape
from core.datasets.layouts.mask_labels import label_names, segment_values
from core.datasets.layouts.mask_pairing import (Case, derivative_cases, find_folder_sets,
                                                pair_folder, stem_of, suffix_cases)
from core.datasets.layouts.types import Sample, ScanError

SEGMENT_WORDS = re.compile(r"segment|mask|delineat|contour", re.I)
CLASSIFY_WORDS = re.compile(r"classif|diagnos|grading|\bgrade\b", re.I)
MAX_GEOMETRY_CHECKS = 5000


def _consistent_channels(cases: list[Case], skipped: list[str]) -> tuple[list[Case], list[str]]:
    """Cases holding the channel set most cases have (in sorted order); others are skipped."""
    sets = Counter(frozenset(c.channels) for c in cases)
    reference = sorted(sets.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[0][0]
    order = _on_mask_grid_first(sorted(reference), cases)
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


def _on_mask_grid_first(order: list[str], cases: list[Case]) -> list[str]:
    """Channels on the mask's grid first: the others (a finer FLAIR beside DWI and ADC) are
    resampled onto the first channel's grid when read (core.imaging.image_io)."""
    first = next((c for c in cases if set(order) <= set(c.channels)), None)
    mask = header_shape(first.mask) if first is not None and len(order) > 1 else None
    if mask is None:
        return order
    shape = spatial_shape(mask[1])
    on_grid = [ch for ch in order
               if (seen := header_shape(first.channels[ch])) and spatial_shape(seen[1]) == shape]
    return on_grid + [ch for ch in order if ch not in on_grid] if on_grid else order


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
    if image and mask and len(spatial_shape(image[1])) == len(spatial_shape(mask[1])) + 1:
        count = spatial_shape(image[1])[-1]
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
        extra = {"label_path": str(case.mask)}
        if (values := segment_values(case.mask, labels)) is not None:
            extra["label_values"] = values   # this file's values of the labels, in order
        samples.append(Sample(files if len(files) > 1 else files[0], "case", group,
                              mapping.get(case.split, case.split), extra=extra))
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
        found, unpaired, orphans = pair_folder(image_dir, mask_dir, split, images, root)
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


def scan_derivative_masks(root: Path, images: list[Path], description: str = ""):
    """ScanResult for a BIDS dataset with its masks in ``derivatives/``, or None."""
    cases, leftover = derivative_cases(root, images)
    if len(cases) < 2:
        return None
    skipped = [f"{p}: no mask of its subject and session in derivatives/; unlabeled, not used"
               for p in leftover]
    return _result(root, cases, images, skipped, description,
                   {"variant": "bids_derivatives", "unlabeled": len(leftover)})


def scan_suffix_masks(root: Path, images: list[Path], description: str = ""):
    """ScanResult for masks named ``<image>_seg/_mask/_label`` beside their images (one folder
    per case, BraTS style, or many cases per folder), or None."""
    cases, leftover = suffix_cases(images, root)
    if len(cases) < 2:
        return None
    used = sum(len(c.channels) for c in cases)
    if used < 0.5 * (used + len(leftover)):
        return None
    folders = Counter(c.mask.parent for c in cases)
    case_folders = len(folders) >= 2 and all(n == 1 for n in folders.values())
    skipped = [f"{p}: no mask ({stem_of(p)}_seg/_mask/_label) beside it; unlabeled, "
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
        scan_derivative_masks(root, images, description) or \
        scan_suffix_masks(root, images, description)
