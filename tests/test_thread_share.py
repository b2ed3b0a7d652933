"""Each template child gets its share of the cores (runtime.process.compute_threads): two
trainings that each take every core spin against each other (measured on 2 cores: 89 s each
instead of 15 s), so a child started beside running ones gets fewer threads. A value the user
set in the environment is passed on as it is."""
from __future__ import annotations

import subprocess
import sys

from core.config.launch import LAUNCHER
from runtime import process
from runtime.process import compute_threads, run_module, template_pids


def _no_user_threads(monkeypatch):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # make test sets both to 1
        monkeypatch.delenv(name, raising=False)


def test_the_share_counts_the_running_template_children(monkeypatch):
    _no_user_threads(monkeypatch)
    monkeypatch.setattr(process.os, "cpu_count", lambda: 2)
    shares = []
    for running in range(4):
        monkeypatch.setattr(process, "template_pids", lambda n=running: list(range(n)))
        shares.append(compute_threads("ml_templates.diagnosis.train", ["--config", "c.json"]))
    assert [s["OMP_NUM_THREADS"] for s in shares] == ["2", "1", "1", "1"]
    monkeypatch.setattr(process.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(process, "template_pids", lambda: [101])
    assert compute_threads("ml_templates.diagnosis.train") == {"OMP_NUM_THREADS": "8"}
    torchrun = ["--nproc_per_node", "3", "--master_port", "1234", "-m", LAUNCHER, "x"]
    assert compute_threads("torch.distributed.run", torchrun) == {"OMP_NUM_THREADS": "4"}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's choice wins
    assert compute_threads("ml_templates.diagnosis.train") == {}
    _no_user_threads(monkeypatch)
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    assert compute_threads("ml_templates.diagnosis.train") == {}


def test_template_children_are_known_by_their_command_line():
    sleep = [sys.executable, "-c", "import time; time.sleep(60)", LAUNCHER]
    template = subprocess.Popen(sleep + ["ml_templates.diagnosis.train"])
    other = subprocess.Popen(sleep + ["tests.daemon_child"])
    try:
        pids = template_pids()
        assert template.pid in pids and other.pid not in pids
    finally:
        for proc in (template, other):
            proc.kill()
            proc.wait()
    assert template.pid not in template_pids()


def test_the_child_trains_with_the_share_it_was_given(tmp_path, monkeypatch):
    _no_user_threads(monkeypatch)
    monkeypatch.setattr(process.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(process, "template_pids", lambda: [7])  # one already running
    log = tmp_path / "child.log"
    run = run_module("tests.print_threads", [], log, timeout_s=120, poll_s=0.1)
    assert run["returncode"] == 0, run
    assert "OMP_NUM_THREADS=2 torch=2" in log.read_text()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    log.unlink()
    run_module("tests.print_threads", [], log, timeout_s=120, poll_s=0.1)
    assert "OMP_NUM_THREADS=1 torch=1" in log.read_text()
