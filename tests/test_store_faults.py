"""Faults of the home folder and the store, each ending in a clear message and a sound store:
a damaged store.db (refused, restored from the rolling backup), backups that rotate and are
never taken of a damaged store, a home that is a file or lies under one, a read-only home, and
a store locked by another writer for longer than the busy timeout."""
from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.store import backup as backups
from core.store.db import forget_store, open_store
from core.store.errors import StoreDamaged, StoreUnwritable
from core.store.home import open_home
from tests.conftest import ROOT

N_JOBS = 300


def cli(*args: str, home: Path, env_extra: dict | None = None, timeout: int = 120,
        prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([*prefix, sys.executable, "-m", "crew", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def json_error(proc: subprocess.CompletedProcess) -> dict:
    """The JSON error a --json command printed; it must have failed."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out, dict) and out["error"], out
    return out


def filled_store(home: Path) -> Path:
    """A store with N_JOBS jobs and their events, closed and checkpointed into store.db."""
    path = home / "store.db"
    store = open_store(path)
    for i in range(N_JOBS):
        store.insert_job({"id": f"job-{i:04d}", "request": f"classify case {i} " * 20,
                          "status": "succeeded", "created_at": float(i)})
        store.add_event(f"job-{i:04d}", "Task Manager", "tool", tool="write_plan",
                        result="x" * 300)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    forget_store(path)
    return path


def corrupt_middle(path: Path, seed: int = 14) -> None:
    """Random bytes over one whole page in the middle of the file (seeded)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    start = (len(data) // 2 // page) * page
    data[start:start + page] = random.Random(seed).randbytes(page)
    path.write_bytes(bytes(data))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_damaged_store_is_refused_and_restored_from_the_backup(tmp_path):
    home = tmp_path / "home"
    path = filled_store(home)
    backup = backups.make_backup(path)
    assert backups.check_file(backup) == "" and backup.parent == home / "backups"
    corrupt_middle(path)
    before = digest(path)

    with pytest.raises(StoreDamaged) as caught:
        open_store(path)
    message = str(caught.value)
    assert str(path) in message and str(backup) in message
    assert "python -m crew store restore" in message

    jobs = cli("jobs", "--json", home=home)
    error = json_error(jobs)
    assert error["kind"] == "store_damaged" and str(backup) in error["error"]
    build = cli("build", "classify pneumonia versus normal chest X-rays", "--yes", "--json",
                home=home)
    assert json_error(build)["kind"] == "store_damaged"
    assert digest(path) == before  # nothing was written to the damaged store
    assert backups.list_backups(path) == [backup]  # and it was not backed up over a good one

    check = cli("store", "check", "--json", home=home)
    assert check.returncode == 3
    report = json.loads(check.stdout)
    assert report["ok"] is False and report["problem"] and "store restore" in report["restore"]

    restore = cli("store", "restore", "--json", home=home)
    assert restore.returncode == 0, restore.stderr
    done = json.loads(restore.stdout)
    assert done["restored_from"] == str(backup)
    assert Path(done["previous_store_kept_as"]).name.startswith("store.db.damaged-")
    assert digest(Path(done["previous_store_kept_as"])) == before
    listed = json.loads(cli("jobs", "--json", "--limit", "1000", home=home).stdout)
    assert len(listed) == N_JOBS and listed[0]["id"] == f"job-{N_JOBS - 1:04d}"
    assert backups.check_file(path, full=True) == ""
    assert cli("store", "check", "--json", home=home).returncode == 0


def test_damage_found_while_working_stops_every_later_write(tmp_path):
    path = filled_store(tmp_path / "home")
    store = open_store(path)
    corrupt_middle(path, seed=3)
    store.db.execute("PRAGMA shrink_memory")  # read the pages again, from the damaged file
    with pytest.raises(StoreDamaged) as caught:
        store.rows("select sum(length(request)) as n from jobs")
        store.rows("select sum(length(result)) as n from job_events")
        store.rows("select count(*) from job_events indexed by idx_job_events_job_id_id "
                   "where job_id > ''")
    assert str(path) in str(caught.value)
    made_at_open = backups.list_backups(path)
    assert len(made_at_open) == 1  # the open, before the damage, backed the store up
    with pytest.raises(StoreDamaged) as refused:
        store.audit("test", "write", "after damage")
    assert str(made_at_open[0]) in str(refused.value)
    assert store.backup_if_due(0) is None and backups.list_backups(path) == made_at_open
    forget_store(path)


def test_backups_rotate_and_are_taken_only_when_due(tmp_path):
    path = filled_store(tmp_path / "home")
    made = []
    for _ in range(7):
        made.append(backups.make_backup(path, keep=5))
        time.sleep(0.002)
    kept = backups.list_backups(path)
    assert kept == sorted(made[-5:], reverse=True)  # the newest five, newest first
    assert all(not p.exists() for p in made[:2])
    assert all(backups.check_file(p) == "" for p in kept)
    # at most once per interval: none is due right after one was made
    assert backups.maybe_backup(path, min_age_s=3600) is None
    os.utime(kept[0], (time.time() - 7200, time.time() - 7200))
    for p in kept[1:]:
        os.utime(p, (time.time() - 9000, time.time() - 9000))
    fresh = backups.maybe_backup(path, min_age_s=3600)
    assert fresh is not None and backups.list_backups(path)[0] == fresh
    assert len(backups.list_backups(path)) == 5
    # a damaged store is never backed up: the good backups stay as they were
    corrupt_middle(path)
    before = backups.list_backups(path)
    os.utime(before[0], (time.time() - 7200, time.time() - 7200))
    assert backups.maybe_backup(path, min_age_s=60) is None
    with pytest.raises(StoreDamaged):
        backups.make_backup(path)
    assert backups.list_backups(path) == before


def test_opening_a_store_with_rows_backs_it_up_once(tmp_path):
    path = filled_store(tmp_path / "home")
    assert backups.list_backups(path) == []  # the new, empty store was not backed up
    open_store(path)
    first = backups.list_backups(path)
    assert len(first) == 1
    forget_store(path)
    open_store(path)  # the newest backup is younger than an hour: none more
    assert backups.list_backups(path) == first
    forget_store(path)


def test_home_that_is_a_file_or_under_a_file(tmp_path):
    afile = tmp_path / "not-a-folder"
    afile.write_text("x")
    for home, words in ((afile, "is a file, not a folder"),
                        (afile / "home", f"{afile} is a file")):
        with pytest.raises(StoreUnwritable, match=words):
            open_home(home)  # what the app's start-up and the pages call
        for args in (("jobs",), ("show", "x"), ("store", "check"),
                     ("build", "classify pneumonia versus normal chest X-rays", "--yes")):
            if args[0] != "jobs" and home != afile:
                continue  # every command meets the same check: a few of them suffice here
            error = json_error(cli(*args, "--json", home=home))
            assert error["kind"] == "home_unusable" and words in error["error"], error
        text = cli("register", str(tmp_path), "--name", "X", home=home)
        assert text.returncode != 0 and "Traceback" not in text.stderr
        assert text.stderr.startswith("error: ") and words in text.stderr
    assert afile.read_text() == "x"


def _read_only_prefix(home: Path) -> tuple[str, ...]:
    """A command prefix that runs the CLI with ``home`` bind-mounted read-only (root in a
    private mount namespace); skips when the kernel or container does not allow it."""
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
    prefix = ("unshare", "-m", "--propagation", "private", "sh", "-c", script, str(home))
    try:
        probe = subprocess.run([*prefix, "sh", "-c", f'touch "{home}/probe"'],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("unshare is not available")
    if "Read-only file system" not in probe.stderr:
        pytest.skip(f"no read-only bind mount here: {probe.stderr.strip()[:200]}")
    return prefix


def test_read_only_home_says_so(tmp_path):
    top = tmp_path / "top"
    home, empty = top / "home", top / "empty"
    empty.mkdir(parents=True)
    filled_store(home)
    prefix = _read_only_prefix(top)
    for where, args in ((home, ("jobs",)),
                        (home, ("build", "classify pneumonia versus normal chest X-rays",
                                "--yes")),
                        (home, ("register", str(tmp_path), "--name", "X")),
                        (empty, ("jobs",))):
        error = json_error(cli(*args, "--json", home=where, prefix=prefix))
        assert error["kind"] == "home_unusable", error
        assert "read-only" in error["error"] and str(where) in error["error"], error
    text = cli("jobs", home=home, prefix=prefix)
    assert text.returncode != 0 and "Traceback" not in text.stderr
    assert "read-only" in text.stderr
    assert backups.check_file(home / "store.db", full=True) == ""
    assert not (empty / "store.db").exists()


def test_store_locked_longer_than_the_busy_timeout(tmp_path):
    home = tmp_path / "home"
    path = filled_store(home)
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("insert into audit (ts, actor, action, target) values (1, 't', 'hold', 'x')")
    try:
        started = time.time()
        proc = cli("build", "classify pneumonia versus normal chest X-rays", "--yes", "--json",
                   home=home, env_extra={"M3B_STORE_BUSY_TIMEOUT_S": "0.3"})
        seconds = time.time() - started
        error = json_error(proc)
        assert error["kind"] == "store_busy", error
        assert "locked by another process" in error["error"] and "0.3 s" in error["error"]
        assert seconds < 60
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert backups.check_file(path, full=True) == ""
    store = open_store(path)
    assert len(store.jobs(limit=1000)) == N_JOBS  # the refused build left no job row
    assert store.rows("select count(*) as n from audit where action = 'hold'")[0]["n"] == 1
    forget_store(path)


def test_a_store_file_that_cannot_be_written_is_named(tmp_path, monkeypatch, capsys):
    """SQLite's 'attempt to write a readonly database' (a read-only store.db: as root only a
    read-only open shows it) ends in a message naming the file, never a traceback."""
    from crew.cli import main
    home = tmp_path / "home"
    filled_store(home)
    real_connect = sqlite3.connect

    def read_only(database, *args, **kwargs):
        if str(database) == str(home / "store.db"):
            kwargs["uri"] = True
            database = f"file:{database}?mode=ro"
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only)
    code = main(["build", "classify pneumonia versus normal chest X-rays", "--yes", "--json",
                 "--home", str(home)])
    error = json.loads(capsys.readouterr().out)
    assert code != 0 and error["kind"] == "home_unusable", error
    assert str(home / "store.db") in error["error"] and "writable" in error["error"]
    forget_store(home / "store.db")
