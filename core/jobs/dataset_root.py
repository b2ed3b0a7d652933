"""The dataset folder a job may read, fixed by the parent process when the plan is approved.

Children of a job (agent scripts, the dataloader check, training) may write much of the job's
workspace, ``plan.json`` included where they run LLM-edited code. So the folder the path jail
and the Landlock policies grant as ``dataset/`` never comes from ``plan.json`` after approval:
the job runner (the parent) fixes it once, when the plan is approved, into the job's row of the
store (column ``dataset_root``), which no child can write; every later reader uses that record.

A folder is accepted only when it is the folder of a *registered* dataset (a datacard in the
catalogue: a registered card or a built-in one whose folder exists), the plan's folder is that
same folder, it exists, and it is not and does not contain a system folder, the user's home,
the app's home or the repository, and is not inside the job workspaces.

May import: core.config, core.datasets (catalog), core.store.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from core.config.settings import Settings
from core.datasets.catalog import find_entry
from core.datasets.folder_safety import (SYSTEM_FOLDERS, SYSTEM_TREES,  # noqa: F401
                                         DatasetRootError, check_dataset_folder)
from core.store.db import Store


def dataset_root_of_plan(settings: Settings, plan: dict) -> tuple[str, Path] | None:
    """(name, real folder) the approved ``plan`` may read, checked against the registry; None
    when the plan has no dataset. Raises DatasetRootError."""
    if plan.get("status") != "ready":
        return None
    name = str(plan.get("dataset") or "").strip()
    entry = find_entry(settings, name) if name else None
    if entry is None:
        raise DatasetRootError(f"the plan's dataset {name!r} is not a registered dataset, so "
                               "the job may not read it; register it (Datasets page or "
                               "`python -m crew register`) and plan again")
    root = check_dataset_folder(settings, entry.dataset_path, entry.card.name)
    planned = plan.get("dataset_path")
    if planned and os.path.realpath(str(planned)) != str(root):
        raise DatasetRootError(f"plan.json names the folder {planned} for the dataset "
                               f"{entry.card.name!r}, but that dataset is registered at {root}; "
                               "plan again so the plan uses the registered folder")
    return entry.card.name, root


def fix_dataset_root(settings: Settings, store: Store, job_id: str, plan: dict,
                     actor: str = "system") -> Path | None:
    """Check the approved plan's dataset and record its folder in the job's row (the record
    every later reader uses). None when the plan has no dataset. Raises DatasetRootError."""
    fixed = dataset_root_of_plan(settings, plan)
    if fixed is None:
        return None
    name, root = fixed
    store.update_job(job_id, dataset=name, dataset_root=str(root), dataset_fixed_at=time.time())
    store.audit(actor, "fix_dataset_root", job_id, f"{name}: {root}")
    return root


def stored_dataset_root(store: Store, job_id: str) -> tuple[str, Path] | None:
    """(name, folder) recorded for the job, or None when none was fixed yet."""
    job = store.job(job_id) or {}
    if not job.get("dataset_root"):
        return None
    return str(job.get("dataset") or ""), Path(job["dataset_root"])
