"""Run a job's training: start the template as a child (through a ``run_child`` the caller
gives, so the caller decides confinement), tail the run channel into the store while it runs,
turn a stop request into the child's stop file. The caller gates what the child wrote."""
from __future__ import annotations

import json
import os
from collections.abc import Callable

from core.config.training_defaults import STOP_GRACE_S
from core.jobs.gates import GateResult
from core.jobs.workspace import JobWorkspace
from core.store.db import Store
from core.training.channel import MetricsTail
from core.training.launch import training_command

SUMMARY_KEYS = ("network", "epochs_run", "best_val_metric", "val_metric", "epoch_kept",
                "selection", "stop_reason", "seconds", "device")


class TrainingError(RuntimeError):
    """Training did not produce what the next steps need; the message says what and why."""


def run_training(ws: JobWorkspace, store: Store, job_id: str,
                 run_child: Callable[..., dict]) -> dict:
    """``run_child(module, args, log_path, timeout_s=, should_stop=, on_tick=, grace_s=)`` runs
    ``python -m core.config.launch module args`` and returns its ``returncode``, ``ended`` and
    ``log_tail``. Returns that; raises TrainingError when the child failed. The caller gates what
    it wrote (core.jobs.gates.check_training), once."""
    if not ws.train_config.exists():
        raise TrainingError("train_config.json is missing: call configure_training first")
    config = json.loads(ws.train_config.read_text())
    module, args = training_command(config, str(ws.train_config))
    ws.stop_request.unlink(missing_ok=True)
    ws.metrics_channel.unlink(missing_ok=True)  # a resumed run's earlier rows are in the store
    tail = MetricsTail(ws.metrics_channel)

    def should_stop() -> bool:
        if (store.job(job_id) or {}).get("stop_requested"):
            ws.stop_request.touch()  # the child stops at its next check, keeping its best model
            return True
        return False

    run = run_child(module, args, ws.train_log, timeout_s=float(config["time_budget_s"]) + 300,
                    should_stop=should_stop, on_tick=lambda: tail.ingest(store, job_id),
                    grace_s=STOP_GRACE_S)
    tail.ingest(store, job_id)  # what the child wrote after the last tick
    if run["returncode"] != 0:
        full = disk_full(ws, run.get("log_tail") or "")
        raise TrainingError((full + "\n\n" if full else "") +
                            f"training {run['ended']} with exit code {run['returncode']}:\n"
                            f"{run['log_tail']}")
    return run


LOW_SPACE_BYTES = 64 << 20
FULL_SIGNS = ("No space left on device", "Disk quota exceeded", "File too large",
              "unexpected pos")   # the last: PyTorch's zip writer when a write came up short


def disk_full(ws: JobWorkspace, log_tail: str) -> str:
    """A plain sentence when training most likely failed because the disk holding the job's
    workspace is full (libraries often hide ENOSPC behind their own errors); "" otherwise."""
    try:
        stat = os.statvfs(ws.root)
        free = stat.f_bavail * stat.f_frsize
    except OSError:
        return ""
    if free >= LOW_SPACE_BYTES and not any(sign in log_tail for sign in FULL_SIGNS):
        return ""
    return (f"The disk holding the job's workspace ({ws.root}) is full or nearly full "
            f"({free / 2**20:.1f} MB free), so training could not write its checkpoints. Free "
            "some space there (or point M3B_HOME at a larger disk), then resume the job "
            f"(python -m crew resume {ws.root.name}).")


def training_summary(gate: GateResult) -> dict:
    """The part of the training gate's facts (train_summary.json) an agent and a user read."""
    return {k: gate.facts.get(k) for k in SUMMARY_KEYS}
