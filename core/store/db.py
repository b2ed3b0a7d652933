"""The store: one SQLite file (WAL) through sqlite-utils, shared by the app, the crew and the
training processes. Every write is a short transaction; every connection tolerates other
processes writing at the same time (``timeout=30``).
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

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
                    "started_at": float, "finished_at": float, "pid": int, "auto_approve": int,
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
                    "path": str, "metrics": str, "card_path": str, "created_at": float},
        "pk": "id",
    },
    "audit": {
        "columns": {"id": int, "ts": float, "actor": str, "action": str, "target": str,
                    "detail": str},
        "pk": "id",
    },
}

TERMINAL_STATUSES = {"succeeded", "failed", "no_dataset", "cancelled", "stopped"}
_init_lock = threading.Lock()


class Store:
    """Thin, typed access to the tables. Safe to share between threads of one process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False,
                               isolation_level=None)
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.RLock()
        with _init_lock:
            self.db.enable_wal()
            self.db.execute("PRAGMA busy_timeout = 30000")
            self._create_tables()

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
        with self._lock:
            for attempt in range(5):
                try:
                    with self.db.conn:  # one transaction
                        return fn()
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 4:
                        raise
                    time.sleep(0.2 * (attempt + 1))

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self.db.query(sql, list(params))]

    # ---------------------------------------------------------------- datacards
    def upsert_datacard(self, row: dict) -> None:
        self._write(lambda: self.db["datacards"].upsert(row, pk="name", alter=True))

    def delete_datacard(self, name: str) -> None:
        self._write(lambda: self.db["datacards"].delete_where("name = ?", [name]))

    def datacards(self) -> list[dict]:
        return self.rows("select * from datacards order by source desc, name")

    # ---------------------------------------------------------------- jobs
    def insert_job(self, row: dict) -> None:
        self._write(lambda: self.db["jobs"].insert(row, pk="id", alter=True))

    def update_job(self, job_id: str, **fields: Any) -> None:
        fields = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v)
                  for k, v in fields.items()}
        self._write(lambda: self.db["jobs"].update(job_id, fields, alter=True))

    def job(self, job_id: str) -> dict | None:
        found = self.rows("select * from jobs where id = ?", [job_id])
        return found[0] if found else None

    def jobs(self, limit: int = 50) -> list[dict]:
        return self.rows("select * from jobs order by created_at desc limit ?", [limit])

    # ---------------------------------------------------------------- events and metrics
    def add_event(self, job_id: str, role: str, kind: str, tool: str = "", args: str = "",
                  result: str = "", seconds: float = 0.0, tokens: int = 0, ok: bool = True,
                  cost: float = 0.0) -> None:
        row = {"job_id": job_id, "ts": time.time(), "role": role, "kind": kind, "tool": tool,
               "args": args[:2000], "result": result[:4000], "seconds": round(seconds, 3),
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

    # ---------------------------------------------------------------- models and audit
    def add_model(self, row: dict) -> None:
        self._write(lambda: self.db["models"].upsert(row, pk="id", alter=True))

    def models(self) -> list[dict]:
        return self.rows("select * from models order by created_at desc")

    def audit(self, actor: str, action: str, target: str, detail: str = "") -> None:
        row = {"ts": time.time(), "actor": actor, "action": action, "target": target,
               "detail": detail[:2000]}
        self._write(lambda: self.db["audit"].insert(row))


_stores: dict[Path, Store] = {}


def open_store(path: str | Path) -> Store:
    """One Store per database file per process."""
    key = Path(path).resolve()
    if key not in _stores:
        _stores[key] = Store(key)
    return _stores[key]
