"""The four stages, in order: which role owns each, which YAML task describes it, and the gate
that must pass before the next stage starts."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from core.catalog import load_catalog
from core.gates import GateResult, check_dataloader, check_plan, check_report, check_training
from core.provenance import file_digest
from core.tasks import check_index
from tools.context import JobContext


def _plan_gate(ctx: JobContext) -> GateResult:
    known = {e.card.name: e.available for e in load_catalog(ctx.settings)}
    return check_plan(ctx.workspace, known)


def _training_gate(ctx: JobContext) -> GateResult:
    training = check_training(ctx.workspace, len(ctx.store.metrics(ctx.job_id)))
    if not training.ok:
        return training
    return check_report(ctx.workspace)


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
    Stage("task_manager", "Task Manager", "plan_task", _plan_gate),
    Stage("data_engineer", "Data Engineer", "index_task",
          lambda ctx: check_index(ctx.workspace, ctx.plan().get("template", ""))),
    Stage("module_architect", "Module Architect", "dataloader_task",
          lambda ctx: check_dataloader(ctx.workspace,
                                       one_shape=ctx.plan().get("template") == "diagnosis")),
    Stage("model_trainer", "Model Trainer", "training_task", _training_gate),
]
ROLE_NAMES = {s.role_key: s.role for s in STAGES}
