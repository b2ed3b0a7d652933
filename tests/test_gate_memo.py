"""Each gate runs once per state of the workspace: the tool that produced a stage's output and
the stage's end share one run; any change to the files a gate reads runs it again."""
from __future__ import annotations

import time

from core.jobs.gates import GateMemo, GateResult
from core.jobs.workspace import JobWorkspace


def test_a_gate_runs_once_per_workspace_state(tmp_path):
    ws = JobWorkspace(tmp_path / "job").ensure()
    ws.plan.write_text("{}")
    runs = []

    def check() -> GateResult:
        runs.append(1)
        return GateResult("index", ws.train_index.exists())

    memo = GateMemo()
    first = memo.run("index", ws, check)
    assert memo.run("index", ws, check) is first and len(runs) == 1 and not first.ok
    ws.train_index.write_text("{}")  # the stage's output changed: judge it again
    assert memo.run("index", ws, check).ok and len(runs) == 2
    time.sleep(0.01)
    ws.train_index.write_text('{"a": 1}')
    memo.run("index", ws, check)
    assert len(runs) == 3
    memo.run("dataloader", ws, check)  # another gate is its own entry
    assert len(runs) == 4
