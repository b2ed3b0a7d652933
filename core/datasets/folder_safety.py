"""Which folders may be a dataset's: never a system folder, the user's or the app's home, the
repository or the job workspaces (issue 14). Registration refuses such a folder up front, and
the job runner checks the registered folder again when it fixes a job's dataset root
(core.jobs.dataset_root), since a card's folder may have been replaced by a link since.

May import: core.config.
"""
from __future__ import annotations

import os
from pathlib import Path

from core.config.settings import REPO_ROOT, Settings

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
