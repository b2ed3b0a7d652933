"""The four stages, in order: which role owns each, which YAML task describes it, and the gate
that must pass before the next stage starts."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from core.jobs.gates import GateResult
from core.jobs.provenance import file_digest
from tools.context import JobContext
from tools.gates import dataloader_gate, index_gate, plan_gate, trainer_gate


def check_evaluated(ctx: JobContext) -> GateResult:
    """The last word before "succeeded": report.json is the one the system's evaluator wrote in
    this job (same bytes), not one an agent wrote or edited afterwards."""
    recorded = [e["result"] for e in ctx.store.events(ctx.job_id)
                if e["kind"] == "provenance" and e["tool"] == "report"]
    report = ctx.workspace.report
    if not recorded or not report.exists():
        return GateResult("evaluated", False, ["the system's evaluator has not scored the test "
                                               "set in this job"])
    if file_digest(report) != recorded[-1]:
        return GateResult("evaluated", False, ["report.json changed after the system's "
                                               "evaluator wrote it"])
    return GateResult("evaluated", True)


@dataclass(frozen=True)
class Stage:
    role_key: str
    role: str
    task_key: str
    gate: Callable[[JobContext], GateResult]


STAGES = [
    Stage("task_manager", "Task Manager", "plan_task", plan_gate),
    Stage("data_engineer", "Data Engineer", "index_task", index_gate),
    Stage("module_architect", "Module Architect", "dataloader_task", dataloader_gate),
    Stage("model_trainer", "Model Trainer", "training_task", trainer_gate),
]
ROLE_NAMES = {s.role_key: s.role for s in STAGES}
