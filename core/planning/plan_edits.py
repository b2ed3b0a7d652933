"""The user's edits to the Task Manager's plan before approving it.

The page offers the fields the later stages honour — dataset, network, segmentation engine,
epochs, time budget, test fraction, seed — and :func:`edit_plan` checks them (types, ranges,
known names), rewrites ``plan.json`` atomically, re-runs the plan gate, records who changed what
(a job event and an audit row) and approves the plan. An invalid edit raises
:class:`PlanEditError` with every problem named and leaves the plan as it was.

What the user set is kept in ``plan["user_edits"]`` and is binding: the Data Engineer's
``build_index`` and the Model Trainer's ``configure_training`` use those values whatever an
agent passes (:func:`user_edits`).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from core.datasets.catalog import CatalogEntry, load_catalog
from core.datasets.datacards import write_json_atomic
from core.planning.operating_rule import OperatingPointError, parse_rule
from core.jobs.gates import check_plan
from core.jobs.lifecycle import set_approval
from core.config.settings import Settings
from core.config.training_defaults import (DEFAULT_SEED, DEFAULT_TIME_BUDGET_S, TEST_FRACTION,
                                           default_epochs)
from core.store.db import Store
from core.planning.tasks import (ENGINES, NNUNET_NETWORKS, default_network, template_for,
                                 template_networks)
from core.jobs.workspace import JobWorkspace

# field -> (lowest, highest) for the numbers a user may set
LIMITS = {"epochs": (1, 1000), "time_budget_min": (1, 7 * 24 * 60),
          "test_fraction": (0.05, 0.5), "seed": (0, 2**31 - 1)}
EDITABLE = ("dataset", "engine", "model", "epochs", "time_budget_min", "test_fraction", "seed",
            "operating_point")
LABELS = {"dataset": "dataset", "engine": "engine", "model": "network", "epochs": "epochs",
          "time_budget_min": "time budget (minutes)", "test_fraction": "test fraction",
          "seed": "seed", "operating_point": "operating point"}


class PlanEditError(ValueError):
    """Edits that cannot be applied; ``errors`` names each problem and its fix."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


@dataclass
class EditResult:
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field: (old, new)
    plan: dict = field(default_factory=dict)

    def summary(self) -> str:
        if not self.changes:
            return "no changes"
        return "; ".join(f"{LABELS[k]} {_show(k, old)} → {_show(k, new)}"
                         for k, (old, new) in self.changes.items())


def _show(key: str, value: Any) -> str:
    if key == "test_fraction" and isinstance(value, (int, float)):
        return f"{value:.0%}"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "—" if value in (None, "") else str(value)


# ------------------------------------------------------------------ reading a plan
def user_edits(plan: dict) -> dict:
    """The values the user set when approving the plan (plan keys: ``model``, ``epochs``,
    ``seed``, ``test_fraction``, ...); empty when the plan was approved as proposed."""
    edits = plan.get("user_edits")
    return edits if isinstance(edits, dict) else {}


def planned_epochs(plan: dict) -> int:
    """The epochs training will run at most: the user's, else the template's default (nnU-Net:
    its own schedule on a GPU, a short one on CPU), as the Model Trainer picks them."""
    if plan.get("epochs"):
        return int(plan["epochs"])
    return default_epochs(plan.get("template") or "diagnosis", plan.get("engine") or "",
                          plan.get("device") or "cpu")


def current_values(plan: dict) -> dict:
    """The editable fields as the plan has them now."""
    split = plan.get("split") or {}
    return {"dataset": plan.get("dataset") or "", "engine": plan.get("engine") or "",
            "model": plan.get("model") or "", "epochs": planned_epochs(plan),
            "time_budget_min": round(int(plan.get("time_budget_s") or DEFAULT_TIME_BUDGET_S)
                                     / 60, 2),
            "test_fraction": float(split.get("test_fraction", TEST_FRACTION)),
            "seed": int(split.get("seed", DEFAULT_SEED)),
            "operating_point": plan.get("operating_point") or ""}


def _fits(entry: CatalogEntry, task: str, template: str) -> bool:
    return (entry.available and task in entry.card.tasks
            and template_for(task, entry.card.label_source) == template)


def dataset_choices(settings: Settings, plan: dict) -> list[str]:
    """Available registered datasets that serve the plan's task with the same template (so the
    network choices stay valid); the planned one first, always (so a form left as it is never
    switches datasets, even when the planned one has gone since: the gate then says so)."""
    task, template = plan.get("task") or "", plan.get("template") or ""
    names = [e.card.name for e in load_catalog(settings) if _fits(e, task, template)]
    current = plan.get("dataset")
    return ([current] if current else []) + [n for n in names if n != current]


def network_choices(plan: dict, engine: str | None = None) -> list[str]:
    """Networks of the plan's template, for ``engine`` (default: every engine the template has,
    e.g. MONAI's and nnU-Net's for segmentation)."""
    template = plan.get("template") or ""
    if engine is not None:
        return template_networks(template, engine)
    engines = ENGINES.get(template, ("",))
    return [n for e in engines for n in template_networks(template, e)]


def engine_choices(plan: dict) -> list[str]:
    return list(ENGINES.get(plan.get("template") or "", ()))


# ------------------------------------------------------------------ validation
def _number(key: str, value: Any, integer: bool, errors: list[str]) -> float | int | None:
    lo, hi = LIMITS[key]
    what = f"a whole number from {lo} to {hi}" if integer else f"a number from {lo} to {hi}"
    if isinstance(value, bool) or value is None:
        errors.append(f"{LABELS[key]} must be {what}, got {value!r}")
        return None
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        errors.append(f"{LABELS[key]} must be {what}, got {value!r}")
        return None
    if not math.isfinite(number) or (integer and not number.is_integer()) \
            or not lo <= number <= hi:
        errors.append(f"{LABELS[key]} must be {what}, got {value!r}")
        return None
    return int(number) if integer else number


def validate_edits(settings: Settings, plan: dict, values: dict) -> EditResult:
    """The plan with ``values`` applied (only fields that differ from the plan count as edits).
    Raises PlanEditError naming every problem."""
    if plan.get("status") != "ready":
        raise PlanEditError(["this plan has no dataset to edit; register a dataset that fits "
                             "and ask again"])
    errors: list[str] = []
    unknown = sorted(set(values) - set(EDITABLE))
    if unknown:
        errors.append(f"unknown field(s) {', '.join(unknown)}; editable: {', '.join(EDITABLE)}")
    old = current_values(plan)
    new = dict(old)
    template, task = plan.get("template") or "", plan.get("task") or ""

    for key, integer in (("epochs", True), ("time_budget_min", False), ("test_fraction", False),
                         ("seed", True)):
        if key in values:
            number = _number(key, values[key], integer, errors)
            if number is not None:
                new[key] = number

    if "operating_point" in values and values["operating_point"] != old["operating_point"]:
        if template != "diagnosis":
            errors.append("an operating point (the threshold rule) applies to diagnosis only")
        else:
            try:
                new["operating_point"] = parse_rule(values["operating_point"]).short()
            except OperatingPointError as exc:
                errors.append(f"operating point: {exc}")

    entry = None
    if "dataset" in values and values["dataset"] != old["dataset"]:
        name = str(values["dataset"] or "").strip()
        choices = dataset_choices(settings, plan)
        entry = next((e for e in load_catalog(settings) if e.card.name == name), None)
        if entry is None:
            errors.append(f"dataset {name!r} is not a registered datacard; choose one of "
                          f"{choices} or register it on the Datasets page")
        elif not entry.available:
            errors.append(f"dataset {name!r} is registered but its folder {entry.dataset_path} "
                          "does not exist; choose another or restore the folder")
        elif not _fits(entry, task, template):
            errors.append(f"dataset {name!r} does not serve {task} with the {template} template "
                          f"(it offers {', '.join(entry.card.tasks) or 'no task'}); choose one "
                          f"of {choices}")
        else:
            new["dataset"] = name

    engines = engine_choices(plan)
    engine_changed = "engine" in values and values["engine"] != old["engine"]
    if engine_changed:
        if not engines:
            errors.append(f"the {template} template has one engine; the engine can only be "
                          "chosen for segmentation")
        elif values["engine"] not in engines:
            errors.append(f"unknown engine {values['engine']!r}; choose one of {engines}")
        else:
            new["engine"] = values["engine"]

    model_changed = "model" in values and values["model"] != old["model"]
    if model_changed:
        allowed = network_choices(plan)
        if values["model"] not in allowed:
            errors.append(f"unknown network {values['model']!r} for the {template} template; "
                          f"choose one of {allowed}")
        else:
            new["model"] = values["model"]

    dataset_changed = new["dataset"] != old["dataset"]
    dimension = entry.card.dimension if dataset_changed else plan.get("dimension", "")
    engine_reason = ""
    if engines and not errors and (old["engine"] or engine_changed or model_changed):
        device = plan.get("device", "cpu")
        network_engine = "nnunet" if new["model"] in NNUNET_NETWORKS else "monai"
        if engine_changed and model_changed and network_engine != new["engine"]:
            errors.append(f"network {new['model']!r} is not trained by the {new['engine']} "
                          f"engine; choose one of {template_networks(template, new['engine'])} "
                          "or the other engine")
        elif engine_changed and network_engine != new["engine"]:  # the network follows
            new["model"] = default_network(template, new["engine"], device, dimension)
        elif network_engine != new["engine"]:  # the engine follows the network asked for
            new["engine"], engine_reason = network_engine, f"the user chose {new['model']}"
        elif dataset_changed and not model_changed and new["engine"] == "nnunet":
            new["model"] = default_network(template, "nnunet", device, dimension)
        if new["model"] == "nnunet_3d_fullres" and dimension == "2D":
            errors.append("nnunet_3d_fullres needs 3D images and this dataset is 2D; choose "
                          "nnunet_2d")
    if errors:
        raise PlanEditError(errors)

    changes = {k: (old[k], new[k]) for k in EDITABLE if new[k] != old[k]}
    edited = json.loads(json.dumps(plan))  # a deep copy
    if not changes:
        return EditResult({}, edited)
    fixed = dict(user_edits(plan))
    if "dataset" in changes:
        card = entry.card
        edited.update(dataset=card.name, dataset_path=str(entry.dataset_path),
                      modality=card.modality, anatomy=card.anatomy, dimension=card.dimension,
                      file_format=card.file_format, classes=card.classes)
        edited.pop("target", None)
        edited.pop("target_name", None)
        from core.planning.plan import planned_target
        from core.planning.targets import target_card
        bound = planned_target(card, plan.get("request", ""), "", plan.get("task", ""))
        if bound:   # the new card's target the request binds, of the plan's task
            view = target_card(card, bound)
            edited.update(target=bound["id"], target_name=bound.get("name", ""),
                          classes=view.classes, dimension=view.dimension)
        edited["reasons"] = (f"{plan.get('reasons', '')} The user chose {card.name} instead of "
                             f"{old['dataset']}.").strip()
        fixed["dataset"] = card.name
    if "engine" in changes:
        edited.update(engine=new["engine"],
                      engine_reason=engine_reason or "the user chose this engine")
        fixed["engine"] = new["engine"]
    if "model" in changes:
        edited["model"] = fixed["model"] = new["model"]
    if "epochs" in changes:
        edited["epochs"] = fixed["epochs"] = new["epochs"]
    if "time_budget_min" in changes:
        edited["time_budget_s"] = fixed["time_budget_s"] = int(round(new["time_budget_min"] * 60))
    split = edited.setdefault("split", {})
    if "test_fraction" in changes:
        split["test_fraction"] = fixed["test_fraction"] = new["test_fraction"]
        split["method"] = "grouped by patient, stratified by class (test fraction set by the user)"
    if "seed" in changes:
        split["seed"] = fixed["seed"] = new["seed"]
    if "operating_point" in changes:
        edited["operating_point"] = fixed["operating_point"] = new["operating_point"]
    edited["user_edits"] = fixed
    return EditResult(changes, edited)


# ------------------------------------------------------------------ applying
def _known_datasets(settings: Settings) -> dict[str, bool]:
    return {e.card.name: e.available for e in load_catalog(settings)}


def edit_plan(settings: Settings, store: Store, job_id: str, values: dict,
              actor: str = "user", approve: bool = True) -> EditResult:
    """Apply the user's edits to a job's plan awaiting approval, re-check it with the plan gate,
    record the change and (by default) approve the plan. Nothing changes when it raises."""
    job = store.job(job_id)
    if job is None:
        raise PlanEditError([f"no job {job_id}"])
    if job["status"] != "awaiting_approval" or job.get("approval") != "pending":
        raise PlanEditError([f"the plan of job {job_id} is no longer waiting for approval "
                             f"(status {job['status']}, approval {job.get('approval')}); it can "
                             "only be edited before it is approved"])
    ws = JobWorkspace(settings.jobs_dir / job_id)
    try:
        original = ws.plan.read_bytes()
        plan = json.loads(original)
    except (OSError, ValueError) as exc:
        raise PlanEditError([f"plan.json of job {job_id} cannot be read ({exc})"]) from exc
    result = validate_edits(settings, plan, values)
    if result.changes:
        write_json_atomic(ws.plan, result.plan)
        gate = check_plan(ws, _known_datasets(settings))
        if not gate.ok:
            _restore(ws, original)
            raise PlanEditError(gate.errors)
        detail = result.summary()
        store.add_event(job_id, "User", "edit", tool="edit_plan",
                        args=json.dumps({"actor": actor, "set": {k: v[1] for k, v in
                                                                 result.changes.items()}}),
                        result=detail)
        store.add_event(job_id, "Task Manager", "gate", tool=gate.gate,
                        result=f"{gate.message()} (after the user's edit)", ok=True)
        store.audit(actor, "plan_edited", job_id, detail)
        if "dataset" in result.changes:
            store.update_job(job_id, dataset=result.plan["dataset"])
    if approve:
        set_approval(store, job_id, "approved", actor=actor)
    return result


def _restore(ws: JobWorkspace, original: bytes) -> None:
    tmp = ws.plan.with_name(f".plan.json.{time.time_ns()}.restore")
    tmp.write_bytes(original)
    tmp.replace(ws.plan)
