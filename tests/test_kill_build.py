"""Whether a job's recorded worker is gone: a pid that now belongs to another process (pid
reuse) and a zombie are not taken for the worker. kill -9 of the CLI, the worker and the
training child at every stage, then ``crew resume``: tests/test_kill_stages.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from core.store.liveness import effective_status, process_identity



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
