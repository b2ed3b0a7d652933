"""kill -9 at every stage before training (training itself: tests/test_kill_build.py): while the
Task Manager plans, while the plan awaits approval, while the Data Engineer indexes, and while
the Module Architect's check child runs. The CLI (where there is one), the job's worker and its
children are killed; then every reader sees the job ``interrupted``, the store passes
``integrity_check``, the dataset folder, its datacard and the other jobs are unchanged, no model
exists, and ``crew resume`` goes on from the stage that did not finish (the finished ones are
kept, not run again) to a scored model.

The planning and indexing stages are over in tens of milliseconds, so the worker is told to stop
itself just before a given tool call (core/config/faults.py) and is killed from here while
stopped; the dataloader check (a child importing torch) lasts seconds and is killed as it runs.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.fuzz_registration import digest
from core.config.faults import PAUSE_ENV
from core.jobs.workspace import JobWorkspace
from core.store.liveness import process_identity
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
REQUEST = "classify pneumonia versus normal chest X-rays"


def env_for(home: Path, **extra: str) -> dict:
    return {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def cli(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crew", *args], cwd=ROOT, env=env_for(home),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def row(home: Path, job_id: str | None = None) -> dict | None:
    """The newest (or the given) job's row as recorded, read-only."""
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=30) as conn:
        conn.row_factory = sqlite3.Row
        query = ("select * from jobs where id = ?" if job_id
                 else "select * from jobs order by created_at desc limit 1")
        found = conn.execute(query, [job_id] if job_id else []).fetchone()
    return dict(found) if found else None


def wait_for(condition, what: str, timeout: float = 180.0, alive=None):
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert alive is None or alive.poll() is None, f"the build ended before {what}"
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def stopped(pid: int | None) -> bool:
    try:
        return bool(pid) and psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=30)


def family(pid: int) -> list[int]:
    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return []


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    from core.demo.chest_xray import make_chest_xray_demo
    home = tmp_path_factory.mktemp("kill-stages-home")
    data = make_chest_xray_demo(tmp_path_factory.mktemp("kill-stages-data") / "cxr",
                                patients_per_class=14, size=48)
    reg = cli("register", str(data), "--name", "Small CXR", "--json", home=home)
    assert reg.returncode == 0, reg.stderr
    return home


def outside_state(home: Path) -> tuple:
    """What a killed job must leave as it was: the dataset folder, the registered datacards,
    and the other jobs' rows."""
    card = json.loads((home / "datacards" / "Small_CXR.json").read_text())
    data = Path(card["dataset path"])
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        jobs = conn.execute("select id, status, result from jobs order by id").fetchall()
    return digest(data), digest(home / "datacards"), jobs


def assert_interrupted(home: Path, job_id: str, victims: list[int], before: tuple) -> dict:
    assert all(process_identity(pid) is None for pid in victims)
    listed = next(j for j in json.loads(cli("jobs", "--json", home=home).stdout)
                  if j["id"] == job_id)
    assert listed["status"] == "interrupted", listed
    show = cli("show", job_id, "--json", home=home)
    detail = json.loads(show.stdout)
    assert show.returncode == 1 and detail["status"] == "interrupted"
    assert f"crew resume {job_id}" in detail["error"]
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("pragma integrity_check").fetchone() == ("ok",)
        assert conn.execute("select count(*) from models where job_id = ?",
                            [job_id]).fetchone() == (0,)
    data, cards, jobs = outside_state(home)
    assert (data, cards) == before[:2]
    assert [j for j in jobs if j[0] != job_id] == [j for j in before[2] if j[0] != job_id]
    return detail


def starts(home: Path, job_id: str) -> dict[str, int]:
    """How many times each role's stage started, over all runs of the job."""
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        found = conn.execute("select role, count(*) from job_events where job_id = ? and "
                             "kind = 'stage' and tool = 'start' group by role", [job_id])
        return dict(found.fetchall())


def assert_resumes(home: Path, job_id: str, *extra: str) -> dict:
    resumed = cli("resume", job_id, "--json", *extra, home=home)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["status"] == "succeeded" and "auc" in result["metrics"], result
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*) from models where job_id = ?",
                            [job_id]).fetchone() == (1,)
        notes = [r[0] for r in conn.execute(
            "select result from job_events where job_id = ? and tool = 'resume'", [job_id])]
    assert notes and "by autopilot" in notes[-1]
    return starts(home, job_id)


@pytest.mark.parametrize("tool, killed_in", [("write_plan", "Task Manager"),
                                             ("build_index", "Data Engineer")])
def test_kill_9_mid_stage_then_resume(home, tool, killed_in):
    """The worker stops itself before the stage's last tool; CLI and worker are killed."""
    before = outside_state(home)
    build = subprocess.Popen([sys.executable, "-m", "crew", "build", REQUEST, "--yes", "--json"],
                             cwd=ROOT, env=env_for(home, **{PAUSE_ENV: tool}),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        job = wait_for(lambda: (r := row(home)) and r["created_at"] and stopped(r["pid"]) and r,
                       f"the worker to stop before {tool}", alive=build)
        assert job["stage"] == killed_in
        victims = [build.pid, *family(job["pid"])]
        kill_all(victims)
    finally:
        if build.poll() is None:
            build.kill()
        build.wait(timeout=30)
    job_id = job["id"]
    ws = JobWorkspace(Path(job["workspace"]))
    assert_interrupted(home, job_id, victims, before)
    if killed_in == "Task Manager":
        assert not ws.plan.exists()  # nothing half-written: the plan was never started
    else:
        assert ws.plan.exists() and not any(ws.datapath.glob("*.json*"))
    counts = assert_resumes(home, job_id)
    kept = ["Task Manager"] if killed_in == "Data Engineer" else []
    assert all(counts[role] == 1 for role in kept), counts
    assert counts[killed_in] == 2 and counts["Model Trainer"] == 1, counts


def test_kill_9_while_awaiting_approval_asks_again(home):
    """The app's way: a worker waits for approval and is killed; resuming without a terminal
    and without --yes is refused, changing nothing; with --yes the kept plan is approved."""
    from core.config.settings import get_settings
    from core.jobs.launcher import launch_worker
    from core.jobs.lifecycle import create_job
    from core.store.db import open_store
    before = outside_state(home)
    settings = get_settings(str(home))
    store = open_store(settings.store_path)
    job_id = create_job(settings, store, REQUEST, "autopilot", auto_approve=False)
    pid = launch_worker(settings, store, job_id)
    wait_for(lambda: row(home, job_id)["status"] == "awaiting_approval", "the plan")
    victims = family(pid)
    kill_all(victims)
    assert_interrupted(home, job_id, victims, before)
    recorded = row(home, job_id)

    refused = cli("resume", job_id, "--json", home=home)
    assert refused.returncode == 2
    error = json.loads(refused.stdout)
    assert error["kind"] == "needs_approval" and "--yes" in error["error"]
    assert row(home, job_id) == recorded  # refused before anything changed

    counts = assert_resumes(home, job_id, "--yes")
    assert counts["Task Manager"] == 1 and counts["Data Engineer"] == 1, counts
    audit = [r["action"] for r in store.rows("select action from audit where target = ?",
                                             [job_id])]
    assert "plan_approved" in audit


def test_kill_9_during_the_dataloader_check_then_resume(home):
    """The check child runs (seconds: it imports torch); CLI, worker and child are killed."""
    before = outside_state(home)
    build = subprocess.Popen([sys.executable, "-m", "crew", "build", REQUEST, "--yes", "--json"],
                             cwd=ROOT, env=env_for(home), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def checking():
            r = row(home)
            if r and r["stage"] == "Module Architect" and r["pid"] and len(family(r["pid"])) > 1:
                return r
            return None
        job = wait_for(checking, "the dataloader check child", alive=build)
        victims = [build.pid, *family(job["pid"])]
        kill_all(victims)
    finally:
        if build.poll() is None:
            build.kill()
        build.wait(timeout=30)
    job_id = job["id"]
    ws = JobWorkspace(Path(job["workspace"]))
    assert_interrupted(home, job_id, victims, before)
    assert not ws.train_config.exists()
    counts = assert_resumes(home, job_id)
    assert counts["Task Manager"] == 1 and counts["Data Engineer"] == 1, counts
    assert counts["Module Architect"] == 2 and counts["Model Trainer"] == 1, counts
