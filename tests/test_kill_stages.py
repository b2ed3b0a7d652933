"""kill -9 at every stage, one job taken through all of them (cheaper than a job per stage):
while the Task Manager plans, while the plan awaits approval, while the Data Engineer indexes,
while the Module Architect's check child runs, and while the training child trains. The CLI
(where there is one), the job's worker and its children are killed each time; then every
reader sees the job ``interrupted`` (without anyone writing it), the store passes
``integrity_check``, the dataset folder, its datacard and the other jobs are unchanged, no model
exists and nothing is half-written; and the next ``crew resume`` goes on from the stage that did
not finish (the finished ones kept, not run again), the last one from training's newest
complete checkpoint to a scored model.

The planning and indexing stages are over in tens of milliseconds, so the worker is told to stop
itself just before a given tool call (core/config/faults.py) and is killed from here while
stopped; the dataloader check (a child importing torch) and training last seconds and are
killed as they run.
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


def newest_complete_checkpoint(workspace: Path) -> Path | None:
    from core.jobs.lifecycle import checkpoints
    complete = checkpoints(JobWorkspace(workspace))[0]
    return complete[-1] if complete else None


def resume_and_kill(home: Path, job_id: str, ready, what: str, *extra: str,
                    pause: str | None = None) -> list[int]:
    """``crew resume`` until ``ready(row)`` says the stage to kill in is reached, then kill -9
    the CLI, the worker and its children; returns the killed pids."""
    env = env_for(home, **({PAUSE_ENV: pause} if pause else {}))
    proc = subprocess.Popen([sys.executable, "-m", "crew", "resume", job_id, "--json", *extra],
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        job = wait_for(lambda: (r := row(home, job_id)) and r["pid"] and ready(r) and r,
                       what, alive=proc)
        victims = [proc.pid, *family(job["pid"])]
        kill_all(victims)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    return victims  # (kill_all reaped the CLI itself, so its Popen cannot see the signal)


def test_kill_9_at_every_stage_then_resume(home, monkeypatch):
    from core.config.settings import get_settings
    from core.jobs.launcher import launch_worker
    from core.jobs.lifecycle import create_job
    from core.store.db import open_store
    before = outside_state(home)
    settings = get_settings(str(home))
    store = open_store(settings.store_path)

    # 1. planning (the app's way): the worker stops before write_plan and is killed
    monkeypatch.setenv(PAUSE_ENV, "write_plan")
    job_id = create_job(settings, store, REQUEST, "autopilot", auto_approve=False)
    pid = launch_worker(settings, store, job_id)
    monkeypatch.delenv(PAUSE_ENV)
    wait_for(lambda: stopped(pid), "the worker to stop before write_plan")
    assert row(home, job_id)["stage"] == "Task Manager"
    victims = family(pid)
    kill_all(victims)
    assert_interrupted(home, job_id, victims, before)
    ws = JobWorkspace(Path(row(home, job_id)["workspace"]))
    assert not ws.plan.exists()  # nothing half-written: the plan was never started

    # the plan was never approved: without a terminal and without --yes, resuming is refused
    recorded = row(home, job_id)
    refused = cli("resume", job_id, "--json", home=home)
    assert refused.returncode == 2
    error = json.loads(refused.stdout)
    assert error["kind"] == "needs_approval" and "--yes" in error["error"]
    assert row(home, job_id) == recorded  # refused before anything changed

    # 2. awaiting approval (the app's way: the Resume button's calls)
    from core.jobs.lifecycle import prepare_resume
    prepare_resume(store, job_id)
    pid = launch_worker(settings, store, job_id, resume=True)
    wait_for(lambda: row(home, job_id)["status"] == "awaiting_approval", "the plan")
    victims = family(pid)
    kill_all(victims)
    assert_interrupted(home, job_id, victims, before)
    assert ws.plan.exists() and row(home, job_id)["approval"] == "pending"

    # 3. indexing: `crew resume --yes` approves the kept plan; the worker stops before build_index
    victims = resume_and_kill(home, job_id, lambda r: stopped(r["pid"]),
                              "the worker to stop before build_index", "--yes",
                              pause="build_index")
    assert row(home, job_id)["stage"] == "Data Engineer"
    assert_interrupted(home, job_id, victims, before)
    assert not any(ws.datapath.glob("*.json*"))
    assert row(home, job_id)["approval"] == "approved"

    # 4. the dataloader check child runs (seconds: it imports torch)
    victims = resume_and_kill(home, job_id, lambda r: r["stage"] == "Module Architect"
                              and len(family(r["pid"])) > 1, "the dataloader check child")
    assert_interrupted(home, job_id, victims, before)
    assert any(ws.datapath.glob("*.json")) and not ws.train_config.exists()

    # 5. training: killed once an epoch's checkpoint is complete
    victims = resume_and_kill(home, job_id, lambda r: r["stage"] == "Model Trainer" and
                              newest_complete_checkpoint(ws.root) is not None,
                              "a complete checkpoint")
    assert_interrupted(home, job_id, victims, before)
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        status = conn.execute("select status from jobs where id = ?", [job_id]).fetchone()
    assert status == ("running",)  # readers saw 'interrupted' without writing anything
    state = json.loads((newest_complete_checkpoint(ws.root) / "trainer_state.json").read_text())

    # 6. the last resume continues training from its newest complete checkpoint
    resumed = cli("resume", job_id, "--json", home=home)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["status"] == "succeeded" and "auc" in result["metrics"], result
    summary = json.loads((ws.logout / "train_summary.json").read_text())
    assert summary["global_step"] >= state["global_step"]
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*) from models where job_id = ?",
                            [job_id]).fetchone() == (1,)
        notes = [r[0] for r in conn.execute(
            "select result from job_events where job_id = ? and tool = 'resume'", [job_id])]
    assert len(notes) == 4 and all("by autopilot" in n for n in notes)  # steps 2 to 5
    # each stage ran again only after the kill that interrupted it: finished ones were kept
    assert starts(home, job_id) == {"Task Manager": 2, "Data Engineer": 2,
                                    "Module Architect": 2, "Model Trainer": 2}
