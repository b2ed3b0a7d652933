"""The store's health check, its rolling backups, and restoring one.

* Check: ``PRAGMA quick_check`` when a process first opens the store (fast), ``integrity_check``
  on demand (``python -m crew store check``).
* Backups: SQLite's online backup API copies a store that passed its check into
  ``<home>/backups/store-<time>.db`` (written under a temporary name, checked, then renamed), when
  the newest backup is older than an hour at open and older than ten minutes at a job's end;
  the newest ``KEEP`` are kept. A damaged store is never backed up, so a good backup is never
  pushed out by a bad one.
* Restore: ``python -m crew store restore [BACKUP]`` moves the current file (and its -wal/-shm)
  aside as ``store.db.damaged-<time>`` (or ``.replaced-<time>`` when it was healthy) and puts the
  newest good backup, or the one named, in its place.

Only parent processes (the app, the CLI, a job's worker) call these; children never see the
store.
"""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from core.store.errors import RESTORE_COMMAND, StoreDamaged, StoreError

BACKUP_DIR = "backups"
KEEP = 5
OPEN_MIN_AGE_S = 3600.0  # at open: a backup when the newest is older than an hour
JOB_END_MIN_AGE_S = 600.0  # at a job's end: when the newest is older than ten minutes


def backups_dir(store_path: str | os.PathLike) -> Path:
    return Path(store_path).parent / BACKUP_DIR


def list_backups(store_path: str | os.PathLike) -> list[Path]:
    """The backups of the store at ``store_path``, newest first."""
    folder = backups_dir(store_path)
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("store-*.db") if p.is_file()), reverse=True)


def newest_backup(store_path: str | os.PathLike) -> Path | None:
    found = list_backups(store_path)
    return found[0] if found else None


def check_connection(conn: sqlite3.Connection, full: bool = False) -> str:
    """'' when the database passes ``quick_check`` (``integrity_check`` when full), else what
    SQLite found (its first lines)."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}(20)").fetchall()]
    except sqlite3.DatabaseError as exc:
        return f"{type(exc).__name__}: {exc}"
    if rows == ["ok"]:
        return ""
    return f"{pragma}: " + "; ".join(str(r) for r in rows[:5])


def check_file(path: str | os.PathLike, full: bool = False) -> str:
    """'' when the database file at ``path`` is sound, else the problem (never raises)."""
    path = Path(path)
    if not path.is_file():
        return f"{path} does not exist"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        return check_connection(conn, full)
    finally:
        conn.close()


def _stamp() -> str:
    now = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1e6) % 10**6:06d}"


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into ``target`` (a new file), then check it."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        problem = check_connection(src)
        if problem:
            raise StoreDamaged(f"the store {source} is damaged ({problem}); it was not copied")
        dst = sqlite3.connect(str(target))
        try:
            src.backup(dst)
            problem = check_connection(dst)
        finally:
            dst.close()
    finally:
        src.close()
    if problem:
        target.unlink(missing_ok=True)
        raise StoreError(f"the copy of {source} in {target} did not pass its check ({problem})")


def make_backup(store_path: str | os.PathLike, keep: int = KEEP) -> Path:
    """Back the store up now (it must pass quick_check); keep the newest ``keep`` backups."""
    store_path = Path(store_path)
    folder = backups_dir(store_path)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"store-{_stamp()}.db"
    partial = folder / f".{final.name}.partial"
    try:
        _copy(store_path, partial)
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    for old in list_backups(store_path)[max(1, keep):]:
        old.unlink(missing_ok=True)
    return final


def maybe_backup(store_path: str | os.PathLike, min_age_s: float = OPEN_MIN_AGE_S,
                 keep: int = KEEP) -> Path | None:
    """A backup when the newest one is older than ``min_age_s`` (or there is none); None when
    none was due or it could not be made (a failed backup never stops the work at hand)."""
    newest = newest_backup(store_path)
    try:
        if newest is not None and time.time() - newest.stat().st_mtime < min_age_s:
            return None
        return make_backup(store_path, keep)
    except (OSError, sqlite3.Error):
        return None


def check_store(store_path: str | os.PathLike, full: bool = True) -> dict:
    """The store's health and its backups, for ``python -m crew store check``."""
    store_path = Path(store_path)
    problem = check_file(store_path, full=full) if store_path.exists() else ""
    backups = list_backups(store_path)
    return {"store": str(store_path), "exists": store_path.exists(), "ok": not problem,
            "problem": problem or None, "check": "integrity_check" if full else "quick_check",
            "backups": [{"path": str(p), "bytes": p.stat().st_size,
                         "modified": p.stat().st_mtime} for p in backups],
            "restore": None if not problem else
            f"{RESTORE_COMMAND} --home {store_path.parent}" if backups else
            f"no backup: move {store_path} away to start an empty store"}


def restore_backup(store_path: str | os.PathLike, backup: str | os.PathLike | None = None) -> dict:
    """Put a good backup in place of the store (the newest good one unless ``backup`` names
    one); the current file and its -wal/-shm are kept beside it. Stop the app and any running
    job first: a process that still has the old file open would go on using it."""
    store_path = Path(store_path)
    if backup is not None:
        chosen = Path(backup).expanduser().resolve()
        problem = check_file(chosen)
        if problem:
            raise StoreError(f"the backup {chosen} cannot be restored: {problem}; pick another "
                             f"from {backups_dir(store_path)}")
    else:
        good = [p for p in list_backups(store_path) if not check_file(p)]
        if not good:
            raise StoreError(f"there is no good backup in {backups_dir(store_path)}; move "
                             f"{store_path} away to start an empty store (the datacards are "
                             "read again from the datacards folder)")
        chosen = good[0]
    stamp = _stamp()
    kept = None
    if store_path.exists():
        state = "damaged" if check_file(store_path) else "replaced"
        kept = store_path.with_name(f"{store_path.name}.{state}-{stamp}")
        os.replace(store_path, kept)
    for suffix in ("-wal", "-shm"):  # the old file's log must never be applied to the new one
        side = store_path.with_name(store_path.name + suffix)
        if side.exists():
            if kept is not None:
                os.replace(side, kept.with_name(kept.name + suffix))
            else:
                side.unlink()
    partial = store_path.with_name(f".{store_path.name}.restoring")
    try:
        _copy(chosen, partial)
        os.replace(partial, store_path)
    finally:
        partial.unlink(missing_ok=True)
    return {"status": "restored", "store": str(store_path), "restored_from": str(chosen),
            "previous_store_kept_as": str(kept) if kept else None}
