"""The models table's versions, archive and delete, as SQL run inside one store transaction
(``Store._transaction`` hands each function its connection; nothing here opens the store).

A model is named ``<dataset> <task> v<N>``: N counts the models of that dataset and task, and
a number once given is never given again, not even after that model is deleted (the
``model_versions`` table keeps the last number of each dataset and task). Recording a model
again (a resumed job scores it anew) keeps its version, name and archive state. A store made
before versions existed gets them when it is opened (oldest first), its old names kept as
``former_name`` so they still find the model. Archive, restore and delete are audited.
"""
from __future__ import annotations

import json
import sqlite3
import time

from core.config.secrets import scrub_text

# kept from the first recording of a model whatever a later recording says
KEPT = ("version", "name", "former_name", "archived_at")


def task_words(task: str | None) -> str:
    return (task or "model").replace("_", " ").strip() or "model"


def versioned_name(dataset: str | None, task: str | None, version: int) -> str:
    """``Chest X-ray pneumonia diagnosis v3``."""
    return f"{(dataset or 'unknown dataset').strip()} {task_words(task)} v{int(version)}"


def _key(dataset: str | None, task: str | None) -> str:
    return json.dumps([dataset or "", task or ""])


def _dicts(cursor: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def model_row(conn: sqlite3.Connection, model_id: str) -> dict | None:
    found = _dicts(conn.execute("select * from models where id = ?", [model_id]))
    return found[0] if found else None


def next_version(conn: sqlite3.Connection, dataset: str | None, task: str | None) -> int:
    """Take the next version of ``dataset`` and ``task`` (recorded as taken)."""
    key = _key(dataset, task)
    counted = conn.execute("select last_version from model_versions where key = ?",
                           [key]).fetchone()
    used = conn.execute("select max(version) from models where coalesce(dataset, '') = ? and "
                        "coalesce(task, '') = ?", [dataset or "", task or ""]).fetchone()[0]
    version = max(int(counted[0] or 0) if counted else 0, int(used or 0)) + 1
    conn.execute("insert into model_versions (key, dataset, task, last_version) "
                 "values (?, ?, ?, ?) on conflict(key) do update set "
                 "last_version = excluded.last_version", [key, dataset, task, version])
    return version


def peek_version(conn: sqlite3.Connection, model_id: str, dataset: str | None,
                 task: str | None) -> str:
    """The name ``record_model`` would give this model now (nothing is written)."""
    existing = model_row(conn, model_id)
    if existing and existing.get("version"):
        return existing["name"]
    counted = conn.execute("select last_version from model_versions where key = ?",
                           [_key(dataset, task)]).fetchone()
    used = conn.execute("select max(version) from models where coalesce(dataset, '') = ? and "
                        "coalesce(task, '') = ?", [dataset or "", task or ""]).fetchone()[0]
    return versioned_name(dataset, task,
                          max(int(counted[0] or 0) if counted else 0, int(used or 0)) + 1)


def record_model(conn: sqlite3.Connection, row: dict) -> dict:
    """Insert or update the model ``row`` (by its id); returns it as stored."""
    row = {k: v for k, v in row.items() if k not in KEPT}
    existing = model_row(conn, row["id"])
    if existing and existing.get("version"):
        kept = {k: existing[k] for k in KEPT}
    else:
        version = next_version(conn, row.get("dataset"), row.get("task"))
        kept = {"version": version, "name": versioned_name(row.get("dataset"), row.get("task"),
                                                           version),
                "former_name": (existing or {}).get("former_name") or "", "archived_at": None}
    full = {**row, **kept}
    columns = list(full)
    updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c != "id")
    conn.execute(f"insert into models ({', '.join(f'[{c}]' for c in columns)}) values "
                 f"({', '.join('?' for _ in columns)}) on conflict(id) do update set {updates}",
                 [full[c] for c in columns])
    return model_row(conn, row["id"])


def unversioned(conn: sqlite3.Connection) -> bool:
    return conn.execute("select exists(select 1 from models where version is null)").fetchone()[0]


def backfill_versions(conn: sqlite3.Connection) -> int:
    """Version the models of an older store, oldest first; their names become versioned ones
    and the old name is kept as ``former_name``. Returns how many were versioned."""
    rows = _dicts(conn.execute("select id, name, dataset, task from models where version is "
                               "null order by created_at, id"))
    for row in rows:
        version = next_version(conn, row["dataset"], row["task"])
        conn.execute("update models set version = ?, name = ?, former_name = ? where id = ?",
                     [version, versioned_name(row["dataset"], row["task"], version),
                      row["name"] or "", row["id"]])
    return len(rows)


def audit(conn: sqlite3.Connection, actor: str, action: str, target: str, detail: str) -> None:
    conn.execute("insert into audit (ts, actor, action, target, detail) values (?, ?, ?, ?, ?)",
                 [time.time(), actor, action, target, scrub_text(detail)[:2000]])


def set_archived(conn: sqlite3.Connection, model_id: str, archived: bool, actor: str) -> bool:
    """Archive (hide from the default list) or restore a model; False when there is none."""
    model = model_row(conn, model_id)
    if model is None:
        return False
    conn.execute("update models set archived_at = ? where id = ?",
                 [time.time() if archived else None, model_id])
    audit(conn, actor, "archive_model" if archived else "restore_model", model_id,
          json.dumps({"name": model["name"]}))
    return True


def delete(conn: sqlite3.Connection, model_id: str, actor: str, detail: dict) -> dict | None:
    """Remove the model's row (its version stays taken) and audit it; returns the row that was
    removed, None when there was none."""
    model = model_row(conn, model_id)
    if model is None:
        return None
    conn.execute("delete from models where id = ?", [model_id])
    audit(conn, actor, "delete_model", model_id,
          json.dumps({"name": model["name"], "dataset": model["dataset"], "task": model["task"],
                      **detail}))
    return model
