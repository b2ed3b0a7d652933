"""Several volumes of one exam as the channels of one sample.

A record that names an exam (PI-CAI's ``patient_id`` + ``study_id``; a BraTS-like case id) finds
every volume of it: ``10000_1000000_t2w.mha``, ``…_adc.mha``, ``…_hbv.mha``. An ML engineer
reads those as one sample with one channel per sequence, not as five samples with the same
label. Volumes are channels of one exam when they sit in one folder, share the name up to a last
token, and that token is a word (a sequence or modality name), not a number (a slice, a
follow-up, a time point) — and only for volumes (NIfTI, MetaImage, NRRD, DICOM folders): two
views of a radiograph (frontal, lateral) stay separate images.

The channels used are the set most exams have; sequences named for another orientation
(``cor``, ``sag``) are left out when axial ones remain, since they do not share the axial grid.
Exams that lack one of the channels are left out with a reason.

May import: core.datasets.layouts.types.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts.types import image_suffix

VOLUME_SUFFIXES = (".nii", ".nii.gz", ".mha", ".mhd", ".nrrd", ".nhdr", ".hdr", ".mnc")
OTHER_ORIENTATION = frozenset({"cor", "sag", "coronal", "sagittal", "t2cor", "t2sag",
                               "localizer", "loc", "scout"})
TOKEN = re.compile(r"^(?P<base>.+?)[_\-.](?P<ch>[A-Za-z][A-Za-z0-9]*)$")


def _stem(path: Path) -> str:
    return path.name[: -len(image_suffix(path.name))] if image_suffix(path.name) else path.stem


def channel_units(hits: list[Path]) -> list[Path | dict[str, Path]]:
    """``hits`` (the images one record names) as units: a path, or {channel: path} for the
    volumes of one exam."""
    if len(hits) < 2:
        return list(hits)
    if all(h.is_dir() for h in hits) and len({h.parent for h in hits}) == 1:
        # the series folders of one case (FLAIR/, T1w/, T1wCE/, T2w/): its channels
        return [{h.name.lower(): h for h in hits}]
    groups: dict[tuple, dict[str, Path]] = {}
    units: list[Path | dict[str, Path]] = []
    for path in hits:
        match = TOKEN.match(_stem(path))
        if image_suffix(path.name) not in VOLUME_SUFFIXES or not match:
            units.append(path)
            continue
        groups.setdefault((path.parent, match.group("base").lower()), {})[
            match.group("ch").lower()] = path
    for members in groups.values():
        if len(members) >= 2:
            units.append(members)
        else:
            units.extend(members.values())
    return units


def choose_channels(units: list[dict[str, Path]], keep_order: list[str] | None = None
                    ) -> tuple[list[str], list[str]]:
    """(the channels every sample uses, in a fixed order; why some were left out). Views a
    record's fields name (``keep_order``) stay in the fields' order."""
    if not units:
        return [], []
    if keep_order and all(set(u) <= set(keep_order) for u in units):
        common = [f for f in keep_order if sum(f in u for u in units) >= 0.9 * len(units)]
        return common, []
    counts = Counter(ch for u in units for ch in u)
    common = [ch for ch, n in counts.items() if n >= 0.9 * len(units)]
    notes = []
    axial = [ch for ch in common if ch not in OTHER_ORIENTATION]
    if axial and len(axial) < len(common):
        notes.append(f"sequences {', '.join(sorted(set(common) - set(axial)))} are another "
                     "orientation than the others; left out of the channels")
        common = axial
    rare = sorted(set(counts) - set(common) - OTHER_ORIENTATION)
    if rare:
        notes.append(f"sequences {', '.join(rare)} are in fewer than 90% of the exams; left "
                     "out of the channels")
    return sorted(common), notes
