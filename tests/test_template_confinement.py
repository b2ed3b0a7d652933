"""In LLM mode the dataloader is code an LLM may have written, and validate_dataloader and
run_training execute it: those child processes run under the same Landlock confinement as
run_script (no other process's /proc, nothing outside the workspace written, no TCP). In
autopilot the code is the template's own and runs as before."""
from __future__ import annotations

import os

import pytest

from core.jobs.lifecycle import create_job
from tests.conftest import SMALL_DEMO, tree_digest
from runtime import landlock
from tools.context import JobContext
from tools.registry import tools_for

pytestmark = pytest.mark.skipif(landlock.abi_version() < 1, reason="kernel without Landlock")

PROBE = '''
import os as _os, socket as _socket
_report = []
for _what, _act in (
        ("environ", lambda: open(f"/proc/{_os.getppid()}/environ", "rb").read()),
        ("dataset", lambda: open(_os.path.join(DATASET_DIR, "planted.txt"), "w").write("x")),
        ("tmp", lambda: open("/tmp/m3b_planted.txt", "w").write("x")),
        ("tcp", lambda: _socket.create_connection(("127.0.0.1", 9), timeout=1))):
    try:
        _act()
        _report.append(f"{_what}:open")
    except Exception as _exc:
        _report.append(f"{_what}:refused")
print("PROBE " + " ".join(_report), flush=True)
'''


def prepared(settings, store, llm):
    job_id = create_job(settings, store, "classify pneumonia on chest X-rays", llm=llm)
    ctx = JobContext(settings, store, job_id, "classify pneumonia on chest X-rays")
    tools = {t.name: t for role in ("task_manager", "data_engineer", "module_architect")
             for t in tools_for(role, ctx)}
    assert tools["write_plan"].call(dataset=SMALL_DEMO, reasons="test")["ok"]
    assert tools["build_index"].call()["ok"]
    assert tools["write_dataloader"].call(image_size=[32, 32])["ok"]
    return ctx, tools


def test_dataloader_code_runs_confined_in_llm_mode(settings, store, small, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-confinement-0123456789")
    before = tree_digest(small)
    ctx, tools = prepared(settings, store, "scripted/llm")
    loader = ctx.workspace.dataloader
    loader.write_text(loader.read_text().replace(
        "import json\n", f"import json\nDATASET_DIR = {str(small)!r}\n{PROBE}\n", 1))
    result = tools["validate_dataloader"].call()
    assert result["ok"], result  # confined, the check still loads every sample
    log = (ctx.workspace.logout / "dataloader_check.log").read_text()
    probe = next(line for line in log.splitlines() if line.startswith("PROBE"))
    assert probe == "PROBE environ:refused dataset:refused tmp:refused tcp:refused"
    assert "sk-test-confinement" not in log
    assert tree_digest(small) == before and not os.path.exists("/tmp/m3b_planted.txt")


def test_autopilot_runs_the_templates_own_code_unconfined(settings, store, small):
    from tools.confinement import confinement_for
    job_id = create_job(settings, store, "classify pneumonia", llm="autopilot")
    assert confinement_for(JobContext(settings, store, job_id, "x")) is None
    job_id = create_job(settings, store, "classify pneumonia", llm="openai/gpt-4o")
    policy = confinement_for(JobContext(settings, store, job_id, "x"))
    granted = policy["write_files"] + policy["read_write"] + policy["read_only"]
    assert not any(str(settings.store_path) in p for p in granted)  # the parent writes metrics
    assert not any(p.startswith("/proc/") and p != "/proc/cpuinfo" for p in policy["read_only"])
