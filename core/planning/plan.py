"""The Task Manager's plan: the dataset chosen for a request (or none), its task, template,
engine and network for this device, the metric, the split and the time budget, with the reasons.
Written to ``plan.json``; the user approves or edits it (plan_edits) before any training."""
from __future__ import annotations

from core.config.settings import Settings
from core.config.training_defaults import DEFAULT_SEED, DEFAULT_TIME_BUDGET_S, TEST_FRACTION
from core.datasets.catalog import find_entry, load_catalog
from core.datasets.datacards import write_json_atomic
from core.jobs.workspace import JobWorkspace
from core.planning.operating_rule import rule_in_request
from core.planning.targets import target_card
from core.planning.tasks import PRIMARY_METRIC, choose_engine, default_network, template_for

NO_DATASET = ("", "none", "no_dataset", "null")


class PlanError(ValueError):
    """The plan asked for cannot be made; the message says why and what is available."""


def device_name() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def write_plan(settings: Settings, ws: JobWorkspace, request: str, dataset: str, reasons: str,
               task: str = "", model: str = "",
               time_budget_s: int = DEFAULT_TIME_BUDGET_S, target: str = "") -> dict:
    """Write plan.json and return it. ``dataset`` 'none' writes a no-dataset plan. ``target``
    is the dataset's target to learn (core.planning.targets): by default the one the request
    binds, else the card's first."""
    ws = ws.ensure()
    if dataset.strip().lower() in NO_DATASET:
        plan = {"status": "no_dataset", "request": request, "dataset": None,
                "reasons": reasons}
        write_json_atomic(ws.plan, plan)
        return plan
    entry = find_entry(settings, dataset)
    if entry is None:
        names = [e.card.name for e in load_catalog(settings) if e.available]
        raise PlanError(f"no datacard named {dataset!r}; available: {names}")
    if not entry.available:
        raise PlanError(f"dataset {dataset!r} is not available: its folder "
                        f"{entry.dataset_path} does not exist")
    bound = planned_target(entry.card, request, target, task)
    card = target_card(entry.card, bound) if bound else entry.card
    task = task or (card.tasks[0] if card.tasks else "")
    if task not in entry.card.tasks:
        raise PlanError(f"dataset {entry.card.name!r} offers {entry.card.tasks}, not {task!r}")
    template = template_for(task, card.label_source)
    if template not in PRIMARY_METRIC:
        raise PlanError(f"task {task!r} has no training template")
    device = device_name()
    engine, engine_reason = choose_engine(template, request, entry.card.engine,
                                          device, int(time_budget_s))
    if model.startswith("nnunet"):
        engine, engine_reason = "nnunet", "the model asked for is nnU-Net"
    model = model or default_network(template, engine, device, card.dimension)
    plan = {"status": "ready", "request": request, "dataset": entry.card.name,
            "dataset_path": str(entry.dataset_path), "task": task, "template": template,
            "modality": entry.card.modality, "anatomy": entry.card.anatomy,
            "dimension": card.dimension, "file_format": entry.card.file_format,
            "classes": card.classes, "model": model,
            **({"target": bound["id"], "target_name": bound.get("name", "")} if bound else {}),
            "metric": PRIMARY_METRIC[template], "device": device,
            **({"engine": engine, "engine_reason": engine_reason} if engine else {}),
            "split": {"method": "grouped by patient, stratified by class",
                      "test_fraction": TEST_FRACTION, "seed": DEFAULT_SEED},
            "time_budget_s": int(time_budget_s), "reasons": reasons}
    if template == "diagnosis":
        plan["operating_point"] = operating_point_of(request)
    write_json_atomic(ws.plan, plan)
    return plan


def planned_target(card, request: str, target: str = "", task: str = "") -> dict | None:
    """The card's target the plan uses: the one named (PlanError when the card has no such
    target), else the one the request binds, else the first of the task asked for."""
    targets = [t for t in card.targets if isinstance(t, dict) and t.get("id")]
    if not targets:
        return None
    if target:
        found = [t for t in targets if t["id"] == target or t.get("name") == target]
        if not found:
            names = "; ".join(f"{t['id']}" for t in targets[:10])
            raise PlanError(f"dataset {card.name!r} has no target {target!r}; its targets: "
                            f"{names}")
        return found[0]
    from core.planning.matching import score_card
    from core.planning.targets import best_target
    from core.datasets.vocabulary import parse_request
    view = card.model_copy(update={"targets": [t for t in targets if not task or
                                               t.get("task") == task] or targets})
    _candidate, chosen = best_target(parse_request(request), view, True, score_card, request)
    return next((t for t in targets if t["id"] == chosen), targets[0])


def operating_point_of(request: str) -> str:
    """The rule that picks a diagnosis model's decision threshold on validation: what the
    request asks for ("at 95% sensitivity"), else Youden's J. Editable at approval."""
    rule = rule_in_request(request)
    return rule.short() if rule else "youden"
