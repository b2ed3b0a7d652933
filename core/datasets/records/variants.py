"""Several processed versions of one scan named by one record: one of them is the sample.

OASIS-1's session id ``OAS1_0013_MR1`` names the raw MPRAGE runs (``RAW/..._mpr-1_anon.img``,
``mpr-2``), the bias-corrected scan in subject space (``PROCESSED/MPRAGE/SUBJ_111/...``), the
atlas-registered brain with and without its skull (``T88_111/..._t88_masked_gfc.img``) and the
FSL tissue segmentation (``FSL_SEG/..._fseg.img``). An ML engineer trains on one version per
session, the same one for every session — not on six copies that share a label. Versions are
told apart by their *signature*: the path under the record's folder with the record's id taken
out and numbers as ``#``, so ``mpr-1`` and ``mpr-2`` are one signature (two runs: the first is
kept) while ``T88_111/*_t88_masked_gfc`` is another.

Only volumes are versions, and never the sequences of one exam (``_t2w``/``_adc`` beside each
other: its channels): 2D images a record names (a study's frontal and lateral views, a
patient's slices) all stay samples. The version kept is the one most records have, preferring
a processed, registered, skull-stripped scan over a raw one, and never a segmentation or a
preview; the recipe records it (``variant``) so that the user can pick another. One image
stored in several formats (a DICOM and its JPEG copy, the same name) is read once, from the
original format.

May import: core.datasets.layouts.types, core.datasets.records.channels.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts.types import image_suffix
from core.datasets.records.channels import VOLUME_SUFFIXES, channel_units

MIN_SHARE = 0.5     # records naming several versions, for versions to be chosen among
COMMON = 0.8        # a version kept must be in this share of those records
PREFERENCES = [(re.compile(r"seg|mask(?!ed)|label|prob", re.I), -10),   # a segmentation
               (re.compile(r"preview|thumb|snapshot|\.gif$", re.I), -8),
               (re.compile(r"(?:^|/)raw(?:/|$)|_raw\b|orig", re.I), -2),
               (re.compile(r"masked|brain|skull_?strip|bet\b|ss\b", re.I), 2),
               (re.compile(r"t88|mni|atlas|reg(?:istered)?\b|warp|norm", re.I), 2),
               (re.compile(r"n4|gfc|bias|proc(?:essed)?|preproc|clean", re.I), 1)]


def signature(path: Path, base: Path, ref: str) -> str:
    """The path under ``base`` with the record's id removed and digit runs as ``#``."""
    try:
        rel = path.relative_to(base).as_posix()
    except ValueError:
        rel = path.name
    if ref:
        rel = re.sub(re.escape(ref), "*", rel, flags=re.I)
    return re.sub(r"\d+", "#", rel)


def _score(sig: str) -> int:
    return sum(points for pattern, points in PREFERENCES if pattern.search(sig))


def _volumes(hits: list[Path]) -> list[Path]:
    """The volume files among ``hits``; none when they are the sequences of one exam (its
    channels, records.channels), which are not versions of one scan."""
    volumes = [h for h in hits if image_suffix(h.name) in VOLUME_SUFFIXES]
    if len(volumes) < 2:   # (no stat for the one file most records name)
        return volumes
    volumes = [h for h in volumes if h.is_file()]
    if any(isinstance(unit, dict) for unit in channel_units(volumes)):
        return []
    return volumes


def _base(hits: list[Path]) -> Path:
    return Path(os.path.commonpath([str(h.parent) for h in hits]))


def choose_variant(named: list[tuple[str, list[Path]]]) -> tuple[str, list[str]]:
    """(the signature to keep, every signature seen) over ``named`` — (the record's id, the
    files it names) per record — or ("", []) when the records do not name versions."""
    several, counts = 0, Counter()
    for ref, hits in named:
        volumes = _volumes(hits)
        if len(volumes) < 2:
            continue
        base = _base(volumes)
        sigs = {signature(v, base, ref) for v in volumes}
        if len(sigs) >= 2:
            several += 1
            counts.update(sigs)
    if not several or several < MIN_SHARE * sum(1 for _, h in named if h):
        return "", []
    common = [s for s, n in counts.items() if n >= COMMON * several]
    if not common:
        return "", sorted(counts)
    best = max(common, key=lambda s: (_score(s), counts[s], -len(s)))
    return best, sorted(counts)


def keep_variant(hits: list[Path], ref: str, variant: str) -> list[Path]:
    """The record's files of the kept version (its first run); all of them when the record
    has none of that version or names no versions."""
    volumes = _volumes(hits)
    if not variant or len(volumes) < 2:
        return hits
    base = _base(volumes)
    kept = sorted(v for v in volumes if signature(v, base, ref) == variant)
    return kept[:1] or hits


# the copy kept when one image is stored in several formats: the original first
FORMAT_RANK = {".dcm": 0, ".dicom": 0, ".nii.gz": 1, ".nii": 1, ".nrrd": 1, ".mha": 1,
               ".png": 2, ".tif": 2, ".tiff": 2, ".bmp": 3, ".jpg": 4, ".jpeg": 4}


def one_format(hits: list[Path]) -> list[Path]:
    """``hits`` with one copy of each image stored in several formats (SIIM-ISIC 2020's
    ``train/ISIC_x.dcm`` and ``jpeg/train/ISIC_x.jpg``): files of one stem with different
    suffixes keep the original format's (DICOM, then lossless, then JPEG)."""
    if len(hits) < 2:
        return hits
    by_stem: dict[str, list[Path]] = {}
    for hit in hits:
        suffix = image_suffix(hit.name)
        by_stem.setdefault(hit.name[: len(hit.name) - len(suffix)].lower(), []).append(hit)
    kept = []
    for copies in by_stem.values():
        suffixes = {image_suffix(c.name) for c in copies}
        if len(copies) > 1 and len(suffixes) == len(copies):
            copies = [min(copies, key=lambda c: FORMAT_RANK.get(image_suffix(c.name), 5))]
        kept += copies
    return kept if len(kept) < len(hits) else hits
