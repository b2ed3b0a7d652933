"""One writer of the store: a training child reports through its run channel (a JSON-lines file
the parent tails and validates) and is stopped by a stop file; it never opens store.db."""
from __future__ import annotations

import json
import os

from core.jobs.workspace import JobWorkspace
from core.training.channel import MetricsTail, parse_line
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


def test_the_stop_file_asks_the_child_to_stop(tmp_path):
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

        def dataset_root(self):   # no plan approved: no dataset folder fixed
            return None

    policy = template_policy(Jail(Ctx()))
    granted = [p for key in ("read_write", "write_files", "read_only") for p in policy[key]]
    assert not any(str(settings.store_path) in p or p.startswith(str(settings.home) + "/store")
                   for p in granted), granted


def test_the_store_guard_refuses_a_child_that_opens_the_store(tmp_path, settings, store):
    """The control for test_pipeline_cli's one-writer check: a child started through the
    launcher that tries to open store.db is refused and logged."""
    import subprocess
    import sys

    from tests.conftest import store_guard
    env, refused, guarded = store_guard(settings.home, tmp_path / "guard")
    (tmp_path / "guard" / "opener.py").write_text(
        "import sqlite3, sys\ntry:\n    sqlite3.connect(sys.argv[1])\nexcept PermissionError:\n"
        "    sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "core.config.launch", "opener",
                           str(settings.store_path)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert str(settings.store_path) in refused.read_text() and guarded.read_text().strip()
