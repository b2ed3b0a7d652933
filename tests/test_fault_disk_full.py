"""Disk full while training writes its checkpoints (issue 14, fault suite): the job workspaces
sit on a small tmpfs (root only) while the store and the datacards stay on a normal disk. The
build must end ``failed`` with a reason that says the disk is full, the store stays consistent,
the datacard and the dataset are untouched, and no half-written model is left behind as if it
were one (no model row, no report)."""
from __future__ import annotations

import ctypes
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, tree_digest

REQUEST = "classify pneumonia versus normal chest X-rays"


def _mount_tmpfs(target: Path, size: str) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", ctypes.c_ulong(0),
                      f"size={size}".encode()) == 0


def _umount(target: Path) -> None:
    ctypes.CDLL(None, use_errno=True).umount2(str(target).encode(), 2)   # MNT_DETACH


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_disk_full_during_training_fails_the_job_cleanly(tmp_path_factory):
    from core.demo.chest_xray import make_chest_xray_demo
    home = tmp_path_factory.mktemp("full-home")
    data = make_chest_xray_demo(tmp_path_factory.mktemp("full-data") / "cxr",
                                patients_per_class=14, size=48)
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "crew", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)

    assert cli("register", str(data), "--name", "Small CXR", "--json").returncode == 0
    cards = {p.name: p.read_bytes() for p in (home / "datacards").iterdir()}
    data_before = tree_digest(data)
    workspace = home / "workspace"
    workspace.mkdir(exist_ok=True)
    if not _mount_tmpfs(workspace, "3m"):
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        build = cli("build", REQUEST, "--yes", "--json", "--epochs", "3")
        free = os.statvfs(workspace)
        full = free.f_bavail * free.f_frsize < 512 * 1024
        reports = list(workspace.rglob("report.json"))
        trained = list(workspace.rglob("checkpoints"))
    finally:
        _umount(workspace)
    assert build.returncode != 0, build.stdout[-2000:]
    result = json.loads(build.stdout)                 # the JSON contract holds on failure too
    assert result["status"] == "failed", result
    text = (result.get("error") or "") + json.dumps(result.get("roles") or [])
    assert full, "the tmpfs never filled: the test did not exercise a full disk"
    assert "is full or nearly full" in text and "crew resume" in text, text[-2000:]
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("select count(*) from models").fetchone()[0] == 0
        status = conn.execute("select status from jobs").fetchall()
    assert status == [("failed",)]
    assert trained, "the job never reached training"
    assert not reports                                # nothing scored a broken model
    assert {p.name: p.read_bytes() for p in (home / "datacards").iterdir()} == cards
    assert tree_digest(data) == data_before
