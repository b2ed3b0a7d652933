"""The Data Engineer's stage: scan the planned dataset (read-only, helped by its datacard's
description) and write the index the plan's template needs, split by patient, within the
description's sample caps. What the user set when approving the plan (test share, seed) binds.

May import: core.config, core.datasets.
"""
from __future__ import annotations

from pathlib import Path

from core.config.settings import Settings
from core.config.training_defaults import DEFAULT_SEED, TEST_FRACTION
from core.datasets.catalog import find_entry
from core.datasets.indexing import write_index
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanResult



class NoPlannedDataset(ValueError):
    """The plan names no dataset, so there is nothing to scan or index."""


def planned_dataset(plan: dict) -> Path:
    if plan.get("status") != "ready":
        raise NoPlannedDataset("the plan has no dataset; nothing to index")
    return Path(plan["dataset_path"])


def planned_description(settings: Settings, plan: dict) -> str:
    """The planned dataset's datacard description (columns, codes, sample caps)."""
    entry = find_entry(settings, plan.get("dataset") or "")
    return entry.card.description if entry else ""


def planned_interpretation(settings: Settings, plan: dict) -> str | None:
    """The reading of the folder the plan uses: its target (bound to the request), else the
    one chosen when the planned dataset was registered."""
    if plan.get("target"):
        return str(plan["target"])
    entry = find_entry(settings, plan.get("dataset") or "")
    return (entry.card.interpretation or None) if entry else None


def planned_recipe(settings: Settings, plan: dict) -> dict | None:
    """The recipe of the plan's target as the datacard keeps it (the user may have edited it),
    or None when the target is read by a reader of its own."""
    entry = find_entry(settings, plan.get("dataset") or "")
    wanted = planned_interpretation(settings, plan)
    if entry is None or not wanted:
        return None
    for target in entry.card.targets:
        if isinstance(target, dict) and target.get("id") == wanted:
            return target.get("recipe") or None
    return None


def scan_planned(settings: Settings, plan: dict) -> ScanResult:
    """Scan the planned dataset, helped by its datacard's description and read the way the
    plan's target (else its registration) says. Raises ScanError."""
    return scan_folder(planned_dataset(plan), planned_description(settings, plan),
                       planned_interpretation(settings, plan),
                       recipe=planned_recipe(settings, plan))


def build_index(settings: Settings, plan: dict, datapath: Path,
                test_fraction: float | None = None, seed: int | None = None,
                keep_existing_split: bool = True) -> dict:
    """Write the index for the plan into ``datapath``; returns its summary. Raises ScanError,
    IndexBuildError or NoPlannedDataset, each saying what to change."""
    split = plan.get("split") or {}
    fixed = plan.get("user_edits") if isinstance(plan.get("user_edits"), dict) else {}
    if "test_fraction" in fixed:  # the user chose the share: re-split to it
        test_fraction, keep_existing_split = fixed["test_fraction"], False
    seed = fixed.get("seed", seed)
    if test_fraction is None:
        test_fraction = split.get("test_fraction", TEST_FRACTION)
    seed = split.get("seed", DEFAULT_SEED) if seed is None else seed
    description = planned_description(settings, plan)
    scan = scan_planned(settings, plan)
    return write_index(scan, datapath, plan.get("template", ""), test_fraction, seed,
                       keep_existing_split, caps=description)
