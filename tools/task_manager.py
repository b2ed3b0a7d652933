"""Task Manager tools: read the datacards, rank them against the request, write plan.json
(core.planning.plan). A job whose request named a dataset's folder is bound to that dataset
(core.planning.request_folder): the tools show, rank and plan with it alone."""
from __future__ import annotations

from pydantic import BaseModel, Field

from core.datasets.catalog import find_entry, load_catalog
from core.jobs.lifecycle import bound_dataset
from core.planning.matching import rank_datacards
from core.planning.plan import NO_DATASET, PlanError, write_plan
from core.planning.request_folder import rank_bound
from tools.base import M3Tool, NoArgs
from tools.context import ToolError


def job_binding(ctx) -> str:
    """The dataset the job's request named by its folder ('' when none)."""
    return bound_dataset(ctx.store.job(ctx.job_id))


class ListDatacards(M3Tool):
    name: str = "list_datacards"
    description: str = ("List every registered dataset's datacard (name, task, modality, anatomy, "
                        "dimension, classes, availability, description). Metadata only.")
    args_schema: type[BaseModel] = NoArgs

    def execute(self) -> dict:
        bound = job_binding(self.ctx)
        cards = [{"name": e.card.name, "tasks": e.card.tasks, "modality": e.card.modality,
                  "anatomy": e.card.anatomy, "dimension": e.card.dimension,
                  "classes": e.card.classes[:20], "available": e.available,
                  "targets": [{k: t.get(k) for k in ("id", "task", "name", "classes",
                                                     "num_samples", "coverage")}
                              for t in e.card.targets[:12] if isinstance(t, dict)],
                  "description": e.card.description[:400]}
                 for e in load_catalog(self.ctx.settings)
                 if not bound or e.card.name.lower() == bound.lower()]
        if bound:
            return {"datacards": cards, "count": len(cards), "bound": bound,
                    "note": f"the request names the folder of {bound!r}: plan with it (or "
                            "'none' when it cannot serve the request)"}
        return {"datacards": cards, "count": len(cards)}

    def summarise(self, result: dict) -> str:
        available = sum(c["available"] for c in result["datacards"])
        return f"{result['count']} datacards, {available} available"


class RankArgs(BaseModel):
    request: str = Field(description="the user's request, word for word")


class RankDatasets(M3Tool):
    name: str = "rank_datasets"
    description: str = ("Score every datacard against the request (task, modality, anatomy, "
                        "classes, description) and explain each score. Returns the best "
                        "eligible dataset or none.")
    args_schema: type[BaseModel] = RankArgs

    def execute(self, request: str) -> dict:
        bound = job_binding(self.ctx)
        if bound:
            entry = find_entry(self.ctx.settings, bound)
            if entry is None:
                raise ToolError(f"the dataset {bound!r} the request named by its folder is no "
                                "longer registered; plan 'none' and say so")
            return rank_bound(request, entry.card, entry.available,
                              self.ctx.settings.datasets_dir)
        entries = load_catalog(self.ctx.settings)
        ranking = rank_datacards(request, [(e.card, e.available) for e in entries])
        ranking["candidates"] = ranking["candidates"][:6]
        return ranking

    def summarise(self, result: dict) -> str:
        return f"chosen: {result['chosen']}; {result['explanation'][:200]}"


class PlanArgs(BaseModel):
    dataset: str = Field(description="name of the chosen dataset, or 'none' when nothing fits")
    reasons: str = Field(description="why this dataset (or why none fits), in plain words")
    task: str = Field(default="", description="task; defaults to the dataset's task")
    model: str = Field(default="", description="network name; defaults to the device's default")
    time_budget_s: int = Field(default=600, ge=30, le=7 * 24 * 3600,
                               description="wall-clock budget for training, seconds")
    target: str = Field(default="", description="the dataset's target to learn (an id from "
                        "rank_datasets' 'target' or the datacard's targets); default: the one "
                        "the request names")


class WritePlan(M3Tool):
    name: str = "write_plan"
    description: str = ("Write plan.json: the dataset to use (or 'none'), task, model, metric, "
                        "split and time budget, with the reasons. The plan is shown to the user "
                        "for approval before any training.")
    args_schema: type[BaseModel] = PlanArgs

    def execute(self, dataset: str, reasons: str, task: str = "", model: str = "",
                time_budget_s: int = 600, target: str = "") -> dict:
        bound = job_binding(self.ctx)
        if bound and dataset.strip().lower() not in NO_DATASET + (bound.lower(),):
            raise ToolError(f"the request names the folder of the dataset {bound!r}: plan with "
                            f"{bound!r}, or 'none' when it cannot serve the request")
        try:
            plan = write_plan(self.ctx.settings, self.ctx.workspace, self.ctx.request, dataset,
                              reasons, task, model, time_budget_s, target)
        except PlanError as exc:
            raise ToolError(str(exc)) from exc
        return {"plan": plan, "path": str(self.ctx.workspace.plan)}

    def summarise(self, result: dict) -> str:
        plan = result["plan"]
        if plan["status"] == "no_dataset":
            return "no dataset fits"
        return f"{plan['dataset']} / {plan['task']} / {plan['model']} / {plan['metric']}"


def task_manager_tools(ctx) -> list[M3Tool]:
    role = "Task Manager"
    return [ListDatacards(ctx=ctx, role=role), RankDatasets(ctx=ctx, role=role),
            WritePlan(ctx=ctx, role=role)]
