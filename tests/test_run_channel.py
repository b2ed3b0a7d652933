"""One writer of the store: a training child reports through its run channel (a JSON-lines file
the parent tails and validates) and is stopped by a stop file; it never opens store.db."""
from __future__ import annotations

import json
import os
import stat

import pytest

from core.config.training_defaults import DEFAULT_TRAINING
from core.jobs.lifecycle import create_job
from core.jobs.workspace import JobWorkspace
from core.training.channel import MetricsTail, parse_line
from crew.runner import run_job
from ml_templates.common.channel import RunChannel


def test_parent_reads_only_whole_valid_lines(tmp_path, store):
    path = tmp_path / "metrics.jsonl"
    store.insert_job({"id": "mine", "status": "running", "created_at": 0.0})
    store.insert_job({"id": "other", "status": "succeeded", "created_at": 0.0})
    channel = RunChannel(path, tmp_path / "stop.request")
    channel.metrics(0, 0.0, {"max_steps": 10})
    channel.metrics(5, 0.5, {"loss": 0.7, "nan": float("nan"), "flag": True, "note": "x"})
    with open(path, "a") as handle:
        handle.write("not json\n")
        handle.write(json.dumps({"kind": "metrics", "step": -1, "epoch": 0, "values": {"a": 1}}))
        handle.write("\n")
        handle.write(json.dumps({"kind": "metrics", "step": 1, "epoch": 0,
                                 "values": {"a; drop table jobs": 1, "ok_name": 2}}) + "\n")
        # a job id or SQL in a line changes nothing: the parent decides which job it is
        handle.write(json.dumps({"kind": "metrics", "job_id": "other", "step": 2,
                                 "epoch": 0.2, "values": {"eval_auc": 0.99}}) + "\n")
        handle.write('{"kind": "metrics", "step": 3, "ep')  # a line still being written
    tail = MetricsTail(path)
    assert tail.ingest(store, "mine") == 4
    rows = store.metrics("mine")
    assert [(r["step"], r["name"], r["value"]) for r in rows] == [
        (0, "max_steps", 10.0), (5, "loss", 0.7), (1, "ok_name", 2.0), (2, "eval_auc", 0.99)]
    assert tail.rejected == 2 and store.metrics("other") == []
    with open(path, "a") as handle:  # the rest of the partial line arrives
        handle.write('och": 0.3, "values": {"loss": 0.5}}\n')
    assert tail.ingest(store, "mine") == 1 and store.metrics("mine")[-1]["step"] == 3
    assert tail.ingest(store, "mine") == 0  # nothing new


def test_parse_line_bounds():
    ok = {"kind": "metrics", "step": 1, "epoch": None, "values": {"loss": 1}}
    assert parse_line(json.dumps(ok)) == (1, None, {"loss": 1.0})
    for bad in ({**ok, "kind": "event"}, {**ok, "step": "1"}, {**ok, "step": True},
                {**ok, "epoch": float("inf")}, {**ok, "values": {}},
                {**ok, "values": {f"m{i}": 1 for i in range(201)}}, {**ok, "values": [1]}):
        assert parse_line(json.dumps(bad)) is None, bad


def test_stop_file_and_sigterm_ask_the_child_to_stop(tmp_path):
    channel = RunChannel(tmp_path / "m.jsonl", tmp_path / "stop.request")
    assert not channel.stop_requested()
    (tmp_path / "stop.request").touch()
    assert channel.stop_requested()
    quiet = RunChannel(None, None)
    quiet.metrics(1, 1.0, {"loss": 1.0})  # no channel configured: nothing written, no error
    assert not quiet.stop_requested()


def test_no_child_is_given_the_store(settings, tmp_path):
    from tools.confinement import template_policy
    from tools.sandbox import Jail

    class Ctx:  # the least a Jail needs
        def __init__(self):
            self.settings, self.job_id = settings, "j"
            self.workspace = JobWorkspace(settings.jobs_dir / "j").ensure()

        def plan(self):
            return {}

    policy = template_policy(Jail(Ctx()))
    granted = [p for key in ("read_write", "write_files", "read_only") for p in policy[key]]
    assert not any(str(settings.store_path) in p or p.startswith(str(settings.home) + "/store")
                   for p in granted), granted


GUARD = '''
import os, sys
_spec = os.environ.get("M3B_TEST_STORE_GUARD")
if _spec:
    _store, _log, _seen = _spec.split("|")
    with open(_seen, "a") as _f:
        _f.write(f"{os.getpid()}\\n")
    _names = {os.path.realpath(_store + s) for s in ("", "-wal", "-shm", "-journal")}

    def _guard(event, args):
        if event in ("open", "sqlite3.connect", "os.open") and args:
            target = args[0]
            if isinstance(target, (str, bytes, os.PathLike)) and not isinstance(target, int):
                path = os.path.realpath(os.fsdecode(target))
                if path in _names:
                    with open(_log, "a") as f:
                        f.write(f"{os.getpid()} {event} {path}\\n")
                    raise PermissionError(f"store.db is the parent's: {path}")
    sys.addaudithook(_guard)
'''


@pytest.mark.slow
def test_training_child_succeeds_without_store_access(settings, store, small, tmp_path,
                                                      monkeypatch):
    """Every child of the job (the dataloader check, training) runs with store.db made
    unreadable to it (an audit hook refuses any open of it, and its mode is 000); the job still
    succeeds, and its metrics reached the store while training ran."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(GUARD)
    log, seen = tmp_path / "store_access.log", tmp_path / "hooked_pids"
    monkeypatch.setenv("PYTHONPATH", str(hook))
    monkeypatch.setenv("M3B_TEST_STORE_GUARD", f"{settings.store_path}|{log}|{seen}")
    monkeypatch.setitem(DEFAULT_TRAINING["diagnosis"], "epochs", 3)
    job_id = create_job(settings, store, "classify pneumonia versus normal chest X-rays",
                        "autopilot", auto_approve=True)
    modes = {}
    for path in settings.home.glob("store.db*"):
        modes[path] = path.stat().st_mode
        os.chmod(path, 0)  # the parent's connection is already open
    try:
        result = run_job(settings, job_id)
    finally:
        for path, mode in modes.items():
            os.chmod(path, stat.S_IMODE(mode))
    assert result["status"] == "succeeded", result["error"]
    assert len(seen.read_text().split()) >= 2, "the guard did not run in the children"
    assert not log.exists(), log.read_text()
    ws = JobWorkspace(settings.jobs_dir / job_id)
    config = json.loads(ws.train_config.read_text())
    assert "store_path" not in config and config["metrics_path"] == str(ws.metrics_channel)
    rows = store.metrics(job_id)
    assert {"loss", "eval_auc"} <= {r["name"] for r in rows}
    trained_until = ws.train_summary.stat().st_mtime
    assert min(r["ts"] for r in rows) < trained_until - 1.0  # live: ingested during training
