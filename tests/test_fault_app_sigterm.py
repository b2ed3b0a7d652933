"""SIGTERM of the app during a job (issue 14, fault suite): a job's worker runs in its own
session, so an app that is stopped (a restart, a container's SIGTERM) leaves the job running to
its normal end; the store stays consistent and the next app start sees the finished job."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

APP = """
import sys, time
from core.config.bootstrap import apply
apply()
from core.config.settings import get_settings
from core.jobs.launcher import launch_worker
from core.jobs.lifecycle import create_job
from core.store.db import open_store
settings = get_settings()
store = open_store(settings.store_path)
job_id = create_job(settings, store, "classify pneumonia versus normal chest X-rays",
                    "autopilot", auto_approve=True)
launch_worker(settings, store, job_id)
print(job_id, flush=True)
time.sleep(600)                      # the app serving pages, until it is stopped
"""


@pytest.mark.slow
def test_app_sigterm_leaves_its_running_job_to_finish(tmp_path_factory):
    from core.demo.chest_xray import make_chest_xray_demo
    home = tmp_path_factory.mktemp("term-home")
    data = make_chest_xray_demo(tmp_path_factory.mktemp("term-data") / "cxr",
                                patients_per_class=14, size=48)
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT)}
    reg = subprocess.run([sys.executable, "-m", "crew", "register", str(data), "--name",
                          "Small CXR", "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert reg.returncode == 0, reg.stderr
    app = subprocess.Popen([sys.executable, "-c", APP], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    job_id = app.stdout.readline().strip()
    assert job_id, "the app did not start a job"

    def status() -> str:
        with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
            return conn.execute("select status from jobs where id = ?", [job_id]).fetchone()[0]

    deadline = time.time() + 300
    while status() in ("queued", "awaiting_approval"):
        assert time.time() < deadline
        time.sleep(0.5)
    assert status() == "running"
    app.send_signal(signal.SIGTERM)                   # the app stops mid-job
    assert app.wait(timeout=30) == -signal.SIGTERM
    while status() in ("queued", "running", "awaiting_approval"):
        assert time.time() < deadline + 300, status()
        time.sleep(1)
    assert status() == "succeeded"                    # the worker finished on its own
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    show = subprocess.run([sys.executable, "-m", "crew", "show", job_id, "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert '"status": "succeeded"' in show.stdout
