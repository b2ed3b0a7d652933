"""What can go wrong with the home folder and its store, said so a user can act on it.

Every problem the store meets at open or on a write becomes a :class:`StoreError` whose message
names the file, what is wrong and what to do; the CLI prints it (as ``{"error": ...}`` with
``--json``) and exits non-zero, the app shows it. They subclass ``sqlite3.DatabaseError`` so code
that already handles SQLite errors keeps working.
"""
from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

RESTORE_COMMAND = "python -m crew store restore"
CHECK_COMMAND = "python -m crew store check"


class StoreError(sqlite3.DatabaseError):
    """A store or home-folder problem with a message meant for the user."""


class StoreDamaged(StoreError):
    """The store failed its integrity check: nothing is written to it."""


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than the busy timeout."""


class StoreUnwritable(StoreError):
    """The home folder or the store file cannot be written (read-only, not a folder, full)."""


def _home_flag(home: Path) -> str:
    return f"--home (or M3B_HOME, now {home})"


def home_problem(home: str | os.PathLike, exc: BaseException | None = None) -> str:
    """Why ``home`` cannot serve as the M3Builder home folder ('' when it can), and what to do:
    a file where the folder should be, a file above it, a folder that cannot be written."""
    home = Path(home).expanduser()
    for parent in [home, *home.parents]:
        if parent.exists() and not parent.is_dir():
            if parent == home:
                return (f"the home folder {home} is a file, not a folder: point "
                        f"{_home_flag(home)} at a folder (it is created when missing), or move "
                        "that file away")
            return (f"the home folder {home} cannot be created: {parent} is a file, not a "
                    f"folder; point {_home_flag(home)} at a folder elsewhere")
        if parent.exists():
            break
    if home.is_dir() and not _writable(home):
        return (f"the home folder {home} is read-only: M3Builder writes its store, datacards and "
                f"jobs there; make it writable (remount it read-write or fix its owner and "
                f"permissions) or point {_home_flag(home)} at a writable folder")
    if exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return (f"the disk holding the home folder {home} is full: free some space and try "
                    "again")
        if isinstance(exc, OSError):
            where = exc.filename or home
            return (f"the home folder {home} cannot be used: {exc.strerror or exc} ({where}); "
                    f"fix its permissions or point {_home_flag(home)} at a writable folder")
    return ""


def _writable(folder: Path) -> bool:
    """Whether files can be made in ``folder`` (the kernel answers for read-only mounts too)."""
    return os.access(folder, os.W_OK | os.X_OK)


def damaged_message(path: Path, detail: str, backup: Path | None) -> str:
    where = (f"the newest good backup is {backup}; restore it with `{RESTORE_COMMAND} --home "
             f"{path.parent}` (it keeps the damaged file beside it as store.db.damaged-<time>)"
             if backup is not None else
             f"there is no backup in {path.parent / 'backups'}; move {path} away to start an "
             f"empty store (the datacards are read again from {path.parent / 'datacards'}, the "
             f"jobs' folders stay in {path.parent / 'jobs'})")
    return (f"the store {path} is damaged ({detail[:300]}); nothing was written to it. Stop the "
            f"app and any running job, then: {where}. `{CHECK_COMMAND}` checks it again.")


def translate(path: str | os.PathLike, exc: BaseException, busy_timeout_s: float = 30.0,
              newest_backup: Path | None = None) -> StoreError:
    """The StoreError a SQLite or OS error at ``path`` (the store file) means for the user."""
    if isinstance(exc, StoreError):
        return exc
    path = Path(path)
    text = str(exc).lower()
    if isinstance(exc, OSError) or "readonly" in text or "read-only" in text or \
            "unable to open" in text:
        problem = home_problem(path.parent, exc if isinstance(exc, OSError) else None)
        if not problem and path.exists() and not os.access(path, os.W_OK):
            problem = (f"the store {path} is read-only; make it writable or point "
                       f"{_home_flag(path.parent)} at a writable folder")
        return StoreUnwritable(problem or
                               f"the store {path} cannot be written ({exc}): make {path} and "
                               f"the folder {path.parent} writable for this user (fix their "
                               "owner and permissions, or remount read-write), or point "
                               f"{_home_flag(path.parent)} at a writable folder")
    if "locked" in text or "busy" in text:
        return StoreBusy(f"the store {path} is locked by another process and stayed locked for "
                         f"longer than {busy_timeout_s:g} s, so nothing was written: wait for the "
                         "other M3Builder process (the app, a running job, a bench) to finish "
                         "its write and try again; if none should be running, look for a hung "
                         "one (`ps aux | grep -e crew -e streamlit`) and stop it")
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return StoreDamaged(damaged_message(path, str(exc), newest_backup))
    if "full" in text or "disk i/o" in text:
        return StoreUnwritable(f"the store {path} could not be written ({exc}): the disk is full "
                               "or failing; free some space and try again")
    return StoreError(f"the store {path} could not be used ({type(exc).__name__}: {exc})")
