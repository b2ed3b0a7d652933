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

from core.config.settings import REPO_ROOT, Settings
from core.datasets.catalog import find_entry
from core.store.db import Store

# folders a dataset folder may neither be nor contain
SYSTEM_FOLDERS = ("/", "/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/usr", "/bin",
                  "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var", "/var/lib", "/run",
                  "/home", "/tmp", "/srv", "/opt", "/snap")
# folders a dataset folder may not be inside either (kernel views, configuration, sockets)
SYSTEM_TREES = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run")


class DatasetRootError(ValueError):
    """The job's dataset folder cannot be fixed; the message says why and what to do."""


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_dataset_folder(settings: Settings, folder: str | os.PathLike, name: str = "") -> Path:
    """The real path of ``folder`` when a job may read it as its dataset; DatasetRootError
    saying what is wrong otherwise."""
    real = os.path.realpath(os.fspath(folder))
    what = f"the dataset {name!r} folder {real}" if name else f"the dataset folder {real}"
    fix = ("register the folder that holds only the dataset's files (Datasets page or "
           "`python -m crew register PATH --name NAME`) and plan again")
    for system in SYSTEM_FOLDERS:
        if _within(os.path.realpath(system), real) and os.path.exists(system):
            raise DatasetRootError(f"{what} is or contains the system folder {system}; {fix}")
    for system in SYSTEM_TREES:
        if _within(real, os.path.realpath(system)):
            raise DatasetRootError(f"{what} is inside the system folder {system}; {fix}")
    owns = [(Path.home(), "the user's home folder"), (settings.home, "the app's home folder"),
            (REPO_ROOT, "the app's repository")]
    for own, words in owns:
        own_real = os.path.realpath(own)
        if _within(own_real, real):
            raise DatasetRootError(f"{what} is or contains {words} ({own_real}); {fix}")
    workspaces = os.path.realpath(settings.jobs_dir.parent)
    if _within(real, workspaces) or _within(workspaces, real):
        raise DatasetRootError(f"{what} overlaps the job workspaces ({workspaces}), which "
                               f"agents write; {fix}")
    if not os.path.isdir(real):
        raise DatasetRootError(f"{what} does not exist (or is not a folder); put the data back "
                               "there or register its new place, then plan again")
    return Path(real)


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
