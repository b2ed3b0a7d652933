"""kill -9 during a build: the CLI, its job's worker and the training child are killed while
training runs. Every reader then sees the job ``interrupted`` (its recorded process is gone),
without anyone having written that, and ``crew resume`` trains it on from its checkpoint.
Reading a pid that now belongs to another process (pid reuse) is covered too."""
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

from core.jobs.workspace import JobWorkspace
from core.store.liveness import effective_status, process_identity
from tests.conftest import ROOT

REQUEST = "classify pneumonia versus normal chest X-rays"


def cli(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "crew", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def jobs_json(home: Path) -> list[dict]:
    proc = cli("jobs", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def newest_checkpoint(workspace: Path) -> Path | None:
    found = [p for p in JobWorkspace(workspace).checkpoints.glob("checkpoint-*")
             if (p / "trainer_state.json").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[1])) if found else None


def test_a_reused_pid_is_not_taken_for_the_worker(store):
    me = os.getpid()
    store.insert_job({"id": "mine", "status": "running", "created_at": 0.0, "pid": me})
    assert store.job("mine", raw=True)["pid_start"] == process_identity(me)  # recorded with it
    assert store.job("mine")["status"] == "running"
    store.update_job("mine", pid_start="another-boot:12345")  # as if the pid was reused since
    job = store.job("mine")
    assert job["status"] == "interrupted" and job["recorded_status"] == "running"
    assert "python -m crew resume mine" in job["error"]
    store.insert_job({"id": "waiting", "status": "queued", "created_at": 0.0})
    assert store.job("waiting")["status"] == "queued"  # no process was ever given to it


def test_a_zombie_worker_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.time() < deadline
        time.sleep(0.05)
    assert process_identity(child.pid) is None
    job = {"id": "z", "status": "awaiting_approval", "pid": child.pid, "pid_start": ""}
    assert effective_status(job)["status"] == "interrupted"
    child.wait()


@pytest.mark.slow
def test_kill_9_of_build_leaves_an_interrupted_job_that_resumes(tmp_path_factory):
    from core.demo.chest_xray import make_chest_xray_demo
    home = tmp_path_factory.mktemp("kill-home")
    data = make_chest_xray_demo(tmp_path_factory.mktemp("kill-data") / "cxr",
                                patients_per_class=14, size=48)
    reg = cli("register", str(data), "--name", "Small CXR", "--json", home=home)
    assert reg.returncode == 0, reg.stderr
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT)}
    build = subprocess.Popen([sys.executable, "-m", "crew", "build", REQUEST, "--yes", "--json",
                              "--epochs", "40"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.time() + 300
        while True:  # the job runs
            jobs = jobs_json(home)
            if jobs and jobs[0]["status"] == "running":
                break
            assert build.poll() is None and time.time() < deadline, jobs
            time.sleep(0.5)
        job_id = jobs[0]["id"]
        workspace = Path(jobs[0]["workspace"])
        while newest_checkpoint(workspace) is None:  # and has trained an epoch
            assert build.poll() is None and time.time() < deadline, "no checkpoint"
            time.sleep(0.2)
        worker = psutil.Process(jobs[0]["pid"])
        victims = [build.pid, worker.pid, *(c.pid for c in worker.children(recursive=True))]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        build.wait(timeout=30)
        psutil.wait_procs([p for p in map(_process, victims) if p], timeout=30)
    finally:
        if build.poll() is None:
            build.kill()
    assert build.returncode == -signal.SIGKILL
    assert all(process_identity(pid) is None for pid in victims)

    listed = next(j for j in jobs_json(home) if j["id"] == job_id)
    assert listed["status"] == "interrupted", listed
    show = cli("show", job_id, "--json", home=home)
    detail = json.loads(show.stdout)
    assert show.returncode == 1 and detail["status"] == "interrupted"
    assert detail["recorded_status"] == "running" and "crew resume" in detail["error"]
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        row = conn.execute("select status from jobs where id = ?", [job_id]).fetchone()
    assert row == ("running",)  # readers saw 'interrupted' without writing anything

    # one more epoch than the checkpoint keeps the resumed run short
    state = json.loads((newest_checkpoint(workspace) / "trainer_state.json").read_text())
    config_path = JobWorkspace(workspace).train_config
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "epochs": int(round(state["epoch"])) + 1}))
    resumed = cli("resume", job_id, "--json", home=home)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["status"] == "succeeded" and "auc" in result["metrics"], result
    final = json.loads(cli("show", job_id, "--json", home=home).stdout)
    assert final["status"] == "succeeded" and final["error"] in ("", None)
    summary = json.loads((JobWorkspace(workspace).logout / "train_summary.json").read_text())
    assert summary["global_step"] > state["global_step"]


def _process(pid: int):
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
