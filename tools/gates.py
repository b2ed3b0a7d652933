"""Each stage's gate on a job, run through the job's GateMemo: the tool that produced a stage's
output and the stage's end share one run of the gate on the same workspace state."""
from __future__ import annotations

from core.datasets.catalog import load_catalog
from core.jobs.gates import (GateResult, check_dataloader, check_plan, check_report,
                             check_training)
from core.jobs.lifecycle import bound_dataset
from core.planning.tasks import check_index
from tools.context import JobContext


def plan_gate(ctx: JobContext) -> GateResult:
    def check() -> GateResult:
        known = {e.card.name: e.available for e in load_catalog(ctx.settings)}
        verdict = check_plan(ctx.workspace, known)
        bound = bound_dataset(ctx.store.job(ctx.job_id))
        if verdict.ok and bound:  # the request named this dataset's folder
            plan = ctx.raw_plan()
            if plan.get("status") == "ready" and \
                    str(plan.get("dataset") or "").lower() != bound.lower() and \
                    "dataset" not in (plan.get("user_edits") or {}):  # the user's own change
                return GateResult("plan", False, [
                    f"the request names the folder of the dataset {bound!r}, but the plan "
                    f"uses {plan.get('dataset')!r}; plan with {bound!r} (or 'none')"],
                    verdict.facts)
        return verdict
    return ctx.gate("plan", check)


def index_gate(ctx: JobContext) -> GateResult:
    return ctx.gate("index", lambda: check_index(ctx.workspace, ctx.plan().get("template", "")))


def dataloader_gate(ctx: JobContext) -> GateResult:
    return ctx.gate("dataloader", lambda: check_dataloader(
        ctx.workspace, one_shape=ctx.plan().get("template") == "diagnosis"))


def training_gate(ctx: JobContext) -> GateResult:
    return ctx.gate("training", lambda: check_training(ctx.workspace,
                                                       len(ctx.store.metrics(ctx.job_id))))


def report_gate(ctx: JobContext) -> GateResult:
    return ctx.gate("report", lambda: check_report(ctx.workspace))


def trainer_gate(ctx: JobContext) -> GateResult:
    """The Model Trainer's stage: training wrote what it must, and the evaluator reported."""
    training = training_gate(ctx)
    return report_gate(ctx) if training.ok else training
