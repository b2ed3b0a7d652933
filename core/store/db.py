"""The store: one SQLite file (WAL) through sqlite-utils, written only by parent processes (the
app, the CLI, a job's worker). Every write is a short transaction; every connection tolerates
other processes writing at the same time (the busy timeout, 30 s unless
``M3B_STORE_BUSY_TIMEOUT_S`` says otherwise).

Opening checks the file (``PRAGMA quick_check``, once per process and path): a damaged store is
refused with a message naming the newest good backup and the command that restores it, so
nothing is ever written to it. A store that passed is backed up now and then
(core/store/backup.py). Every problem reaches the caller as a ``core.store.errors.StoreError``
that says what is wrong and what to do. Job rows are read through
``core.store.liveness.effective_status``: a job whose process is gone reads as ``interrupted``.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

from core.config.secrets import scrub_text
from core.store import backup as backups
from core.store import model_registry as registry
from core.store.errors import StoreDamaged, StoreError, damaged_message, translate
from core.store.liveness import INTERRUPTED, effective_status, process_identity

SCHEMA: dict[str, dict[str, Any]] = {
    "datacards": {
        "columns": {"name": str, "path": str, "task": str, "modality": str, "anatomy": str,
                    "dimension": str, "source": str, "card_path": str, "card": str,
                    "available": int, "registered_at": float, "updated_at": float},
        "pk": "name",
    },
    "jobs": {
        "columns": {"id": str, "request": str, "llm": str, "status": str, "stage": str,
                    "dataset": str, "task": str, "workspace": str, "created_at": float,
                    "started_at": float, "finished_at": float, "pid": int, "pid_start": str,
                    "auto_approve": int, "bound_dataset": str,
                    "approval": str, "stop_requested": int, "error": str, "result": str},
        "pk": "id",
    },
    "job_events": {
        "columns": {"id": int, "job_id": str, "ts": float, "role": str, "kind": str, "tool": str,
                    "args": str, "result": str, "seconds": float, "tokens": int, "ok": int,
                    "cost": float},
        "pk": "id",
        "index": [["job_id", "id"]],
    },
    "metrics": {
        "columns": {"id": int, "job_id": str, "ts": float, "step": int, "epoch": float,
                    "name": str, "value": float},
        "pk": "id",
        "index": [["job_id", "name", "step"]],
    },
    "models": {
        "columns": {"id": str, "job_id": str, "name": str, "task": str, "dataset": str,
                    "path": str, "metrics": str, "card_path": str, "created_at": float,
                    "version": int, "former_name": str, "archived_at": float},
        "pk": "id",
    },
    # the last version given to each dataset and task's models (core/store/model_registry.py)
    "model_versions": {
        "columns": {"key": str, "dataset": str, "task": str, "last_version": int},
        "pk": "key",
    },
    "audit": {
        "columns": {"id": int, "ts": float, "actor": str, "action": str, "target": str,
                    "detail": str},
        "pk": "id",
    },
}

TERMINAL_STATUSES = {"succeeded", "failed", "no_dataset", "cancelled", "stopped", INTERRUPTED}
BUSY_TIMEOUT_ENV = "M3B_STORE_BUSY_TIMEOUT_S"
# text columns shown to the user (core.config.secrets.scrub_text takes secret values out)
SCRUBBED_JOB_FIELDS = ("error", "result")
_init_lock = threading.Lock()


def busy_timeout_s() -> float:
    """How long a write waits for another process's lock (``M3B_STORE_BUSY_TIMEOUT_S``)."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    try:
        return max(0.05, float(raw)) if raw else 30.0
    except ValueError:
        raise StoreError(f"{BUSY_TIMEOUT_ENV}={raw!r} is not a number of seconds; unset it or "
                         "give e.g. 30") from None


class Store:
    """Thin, typed access to the tables. Safe to share between threads of one process."""

    def __init__(self, path: str | Path, backup: bool = True):
        self.path = Path(path)
        self.timeout_s = busy_timeout_s()
        self.damaged = ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise translate(self.path, exc) from None
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"the store {self.path} is not a file; move it away or point "
                             "--home (or M3B_HOME) at another folder")
        had_data = self.path.is_file() and self.path.stat().st_size > 0
        try:
            conn = sqlite3.connect(str(self.path), timeout=self.timeout_s,
                                   check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._problem(exc) from None
        try:
            if had_data:  # before anything could write to it
                problem = backups.check_connection(conn)
                if problem:
                    raise StoreDamaged(damaged_message(self.path, problem, self._good_backup()))
            self.db = sqlite_utils.Database(conn)
            self._lock = threading.RLock()
            with _init_lock:
                self.db.enable_wal()
                self.db.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
                self._create_tables()
                if registry.unversioned(self.db.conn):  # a store from before versions
                    self._transaction(registry.backfill_versions)
        except (sqlite3.Error, OSError) as exc:
            conn.close()
            raise self._problem(exc) from None
        if backup and had_data and self._holds_rows():
            backups.maybe_backup(self.path)

    def _holds_rows(self) -> bool:
        """Whether there is anything worth a backup (a new, empty store is not)."""
        query = " or ".join(f"exists(select 1 from [{name}])" for name in
                            ("jobs", "datacards", "models", "audit"))
        return bool(self.db.execute(f"select {query}").fetchone()[0])

    def _good_backup(self) -> Path | None:
        return next((p for p in backups.list_backups(self.path) if not backups.check_file(p)),
                    None)

    def _problem(self, exc: BaseException) -> StoreError:
        """The StoreError for a SQLite or OS error met on this store."""
        error = translate(self.path, exc, self.timeout_s)
        if isinstance(error, StoreDamaged):
            if not isinstance(exc, StoreDamaged):  # found while working, not at open
                error = StoreDamaged(damaged_message(self.path, str(exc), self._good_backup()))
            self.damaged = str(error)
        return error

    def close(self) -> None:
        self.db.conn.close()

    def _create_tables(self) -> None:
        for name, spec in SCHEMA.items():
            table = self.db[name]
            if not table.exists():
                table.create(spec["columns"], pk=spec["pk"], if_not_exists=True)
                for cols in spec.get("index", []):
                    table.create_index(cols, if_not_exists=True)
            else:  # a store made by an older version: add the columns it lacks
                have = table.columns_dict
                for column, kind in spec["columns"].items():
                    if column not in have:
                        table.add_column(column, kind)

    # ---------------------------------------------------------------- generic helpers
    def _write(self, fn) -> Any:
        if self.damaged:
            raise StoreDamaged(self.damaged)
        with self._lock:
            for attempt in range(5):
                try:
                    with self.db.conn:  # one transaction
                        return fn()
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 4:
                        raise self._problem(exc) from None
                    time.sleep(0.2 * (attempt + 1))
                except sqlite3.DatabaseError as exc:
                    raise self._problem(exc) from None

    def _transaction(self, fn) -> Any:
        """``fn(connection)`` inside one write transaction, taken at once (BEGIN IMMEDIATE) so
        that what it reads cannot change before it writes; fn uses plain SQL only."""
        if self.damaged:
            raise StoreDamaged(self.damaged)
        conn = self.db.conn
        with self._lock:
            for attempt in range(5):
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 4:
                        raise self._problem(exc) from None
                    time.sleep(0.2 * (attempt + 1))
                    continue
                try:
                    out = fn(conn)
                    conn.execute("COMMIT")
                    return out
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc,
                                                                                 StoreError):
                        raise self._problem(exc) from None
                    raise

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self._lock:
            try:
                return [dict(r) for r in self.db.query(sql, list(params))]
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, StoreError):
                    raise
                raise self._problem(exc) from None

    def backup_if_due(self, min_age_s: float = backups.JOB_END_MIN_AGE_S) -> Path | None:
        """A rolling backup (core/store/backup.py) when the newest is older than min_age_s."""
        if self.damaged:
            return None
        return backups.maybe_backup(self.path, min_age_s)

    # ---------------------------------------------------------------- datacards
    def upsert_datacard(self, row: dict) -> None:
        self._write(lambda: self.db["datacards"].upsert(row, pk="name", alter=True))

    def delete_datacard(self, name: str) -> None:
        self._write(lambda: self.db["datacards"].delete_where("name = ?", [name]))

    def datacards(self) -> list[dict]:
        return self.rows("select * from datacards order by source desc, name")

    # ---------------------------------------------------------------- jobs
    @staticmethod
    def _with_identity(fields: dict) -> dict:
        """Recording a job's pid records that process's identity with it (pid reuse)."""
        if fields.get("pid") and "pid_start" not in fields:
            return {**fields, "pid_start": process_identity(fields["pid"]) or ""}
        return fields

    def insert_job(self, row: dict) -> None:
        row = self._with_identity(row)
        self._write(lambda: self.db["jobs"].insert(row, pk="id", alter=True))

    def update_job(self, job_id: str, **fields: Any) -> None:
        fields = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                  for k, v in self._with_identity(fields).items()}
        for key in SCRUBBED_JOB_FIELDS:  # shown to the user: never a secret value
            if isinstance(fields.get(key), str):
                fields[key] = scrub_text(fields[key])
        self._write(lambda: self.db["jobs"].update(job_id, fields, alter=True))

    def job(self, job_id: str, raw: bool = False) -> dict | None:
        """The job's row; unless ``raw``, as readers see it (``interrupted`` when its process is
        gone: core/store/liveness.py)."""
        found = self.rows("select * from jobs where id = ?", [job_id])
        row = found[0] if found else None
        return row if raw else effective_status(row)

    def jobs(self, limit: int = 50, raw: bool = False) -> list[dict]:
        rows = self.rows("select * from jobs order by created_at desc limit ?", [limit])
        return rows if raw else [effective_status(r) for r in rows]

    # ---------------------------------------------------------------- events and metrics
    def add_event(self, job_id: str, role: str, kind: str, tool: str = "", args: str = "",
                  result: str = "", seconds: float = 0.0, tokens: int = 0, ok: bool = True,
                  cost: float = 0.0) -> None:
        row = {"job_id": job_id, "ts": time.time(), "role": role, "kind": kind, "tool": tool,
               "args": scrub_text(args)[:2000], "result": scrub_text(result)[:4000],
               "seconds": round(seconds, 3),
               "tokens": int(tokens), "ok": int(bool(ok)), "cost": float(cost)}
        self._write(lambda: self.db["job_events"].insert(row))

    def events(self, job_id: str, after_id: int = 0) -> list[dict]:
        return self.rows("select * from job_events where job_id = ? and id > ? order by id",
                         [job_id, after_id])

    def add_metrics(self, job_id: str, step: int, epoch: float | None,
                    values: dict[str, float]) -> None:
        now = time.time()
        rows = [{"job_id": job_id, "ts": now, "step": int(step), "epoch": epoch, "name": k,
                 "value": float(v)} for k, v in values.items()]
        if rows:
            self._write(lambda: self.db["metrics"].insert_all(rows))

    def metrics(self, job_id: str) -> list[dict]:
        return self.rows("select step, epoch, name, value, ts from metrics where job_id = ? "
                         "order by id", [job_id])

    def metric_values(self, job_id: str, name: str) -> list[dict]:
        """One streamed metric of a job: its rows (step, epoch, value) in order."""
        return self.rows("select step, epoch, value from metrics where job_id = ? and name = ? "
                         "order by id", [job_id, name])

    # ---------------------------------------------------------------- models and audit
    def add_model(self, row: dict) -> dict:
        """Record a model (by its id, the job's) and return its row as stored: a new one gets
        the next version of its dataset and task and the name that says it
        (core/store/model_registry.py); recording it again keeps its version and name."""
        have = self.db["models"].columns_dict
        for column, value in row.items():  # a field this store has no column for yet
            if column not in have:
                self._write(lambda c=column, v=value: self.db["models"].add_column(
                    c, type(v) if isinstance(v, (int, float)) else str))
        return self._transaction(lambda conn: registry.record_model(conn, row))

    def next_model_name(self, model_id: str, dataset: str, task: str) -> str:
        """The name add_model would give this model now (for files written before it)."""
        with self._lock:
            return registry.peek_version(self.db.conn, model_id, dataset, task)

    def models(self, archived: bool = True) -> list[dict]:
        """Every model, newest first; without the archived ones unless ``archived``."""
        where = "" if archived else "where archived_at is null "
        return self.rows(f"select * from models {where}order by created_at desc")

    def model(self, model_id: str) -> dict | None:
        found = self.rows("select * from models where id = ?", [model_id])
        return found[0] if found else None

    def set_model_archived(self, model_id: str, archived: bool, actor: str = "user") -> bool:
        """Archive (hidden from the default list) or restore a model, audited."""
        return self._transaction(
            lambda conn: registry.set_archived(conn, model_id, archived, actor))

    def delete_model(self, model_id: str, actor: str = "user",
                     detail: dict | None = None) -> dict | None:
        """Remove a model's row, audited with ``detail`` (e.g. the files removed); its version
        is never given again. Returns the removed row (None: there was none)."""
        return self._transaction(
            lambda conn: registry.delete(conn, model_id, actor, detail or {}))

    def audit(self, actor: str, action: str, target: str, detail: str = "") -> None:
        row = {"ts": time.time(), "actor": actor, "action": action, "target": target,
               "detail": scrub_text(detail)[:2000]}
        self._write(lambda: self.db["audit"].insert(row))


_stores: dict[Path, Store] = {}
_stores_lock = threading.Lock()


def open_store(path: str | Path) -> Store:
    """One Store per database file per process (checked once, when first opened). Raises
    ``core.store.errors.StoreError`` with what to do when the store cannot be used."""
    key = Path(path).expanduser().resolve()
    with _stores_lock:
        if key not in _stores:
            _stores[key] = Store(key)
        return _stores[key]


def forget_store(path: str | Path) -> None:
    """Close and drop this process's Store of ``path`` (after a restore; in tests)."""
    with _stores_lock:
        store = _stores.pop(Path(path).expanduser().resolve(), None)
    if store is not None:
        store.close()
