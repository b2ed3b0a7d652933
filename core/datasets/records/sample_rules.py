"""Rules a recipe's samples follow once read: a multi-label target leaves out the labels only
one patient has, and records without a split field take the split folders their images sit in.

May import: core.datasets.layouts (common, types).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.datasets.layouts.common import SPLITS
from core.datasets.layouts.types import Sample

MIN_LABEL_GROUPS = 2   # a label of a multi-label target needs positives in this many groups


def without_rare_labels(samples: list[Sample]) -> tuple[list[Sample], list[str]]:
    """A multi-label target without the labels only one patient has (RSNA mammography's
    ``implant`` on 4 images of one woman): a patient-grouped split cannot test them. Kept when
    fewer than two labels would remain."""
    groups: dict[str, set] = {}
    for s in samples:
        for label in s.labels or []:
            groups.setdefault(label, set()).add(s.group or s.image)
    rare = {l for l, g in groups.items() if len(g) < MIN_LABEL_GROUPS}
    if not rare or len(groups) - len(rare) < 2:
        return samples, []
    out = []
    for s in samples:
        kept = [l for l in s.labels or [] if l not in rare]
        out.append(replace(s, labels=kept, label=kept[0] if kept else "(none)"))
    return out, [f"label {l!r} left out of the target: its positives come from one patient "
                 "only, so a patient-grouped split cannot test it" for l in sorted(rare)]


def split_from_folders(entries: list[dict], root: Path) -> None:
    """Each entry's split from a split folder in its path (``MURA-v1.1/valid/...``) when
    every image sits under one and more than one split occurs; else left as it is."""
    found = []
    for e in entries:
        try:
            parts = e["path"].relative_to(root).parent.parts
        except ValueError:
            return
        found.append(next((SPLITS[p.lower()] for p in parts if p.lower() in SPLITS), ""))
    if all(found) and len(set(found)) > 1 and set(found) & {"test", "val"}:
        for e, split in zip(entries, found):
            e["split"] = split
