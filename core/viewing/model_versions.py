"""Which model is which, as the Models page lists them: each model's status (complete, stopped
early, failed gate) from its job and training summary, its task's primary metric on the test
set and, where training recorded it, on validation at the kept epoch; the best model of each
dataset and task; and the model a page opens first (the best of the newest model's dataset and
task, not simply the newest, which may be a run stopped early).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from core.jobs.workspace import JobWorkspace
from core.viewing.model_views import headline, model_result, template_of, workspace_of

COMPLETE, STOPPED, FAILED_GATE = "complete", "stopped early", "failed gate"
STATUS_LABELS = {COMPLETE: "Complete", STOPPED: "Stopped early", FAILED_GATE: "Failed gate"}
LOWER_IS_BETTER = {"hd95", "ece"}


@dataclass
class ModelEntry:
    """One stored model with what the page says about it."""
    model: dict
    job: dict
    workspace: Path
    template: str
    report: dict
    summary: dict
    status: str
    status_detail: str
    test: dict                      # headline(): key, name, value, ci
    validation: float | None = None
    best: str = ""                  # "validation" or "test" when it is its group's best
    rivals: int = 0                 # candidates for the best in its group (itself included)

    @property
    def id(self) -> str:
        return self.model["id"]

    @property
    def name(self) -> str:
        return self.model["name"]

    @property
    def group(self) -> tuple[str, str]:
        return (self.model.get("dataset") or "", self.model.get("task") or "")

    @property
    def archived(self) -> bool:
        return bool(self.model.get("archived_at"))


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _finite(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _epochs(summary: dict, planned) -> str:
    run = _finite(summary.get("epochs_run"))
    if run is None:
        return ""
    planned = _finite(summary.get("epochs_planned")) or _finite(planned)
    return f" after {run:g} of {planned:g} epochs" if planned else f" after {run:g} epochs"


def model_status(job: dict | None, summary: dict, planned_epochs=None) -> tuple[str, str]:
    """(status, what happened): failed gate when the job failed after the model was scored;
    stopped early when the user stopped training or its time budget ran out; else complete
    (an early stop because validation stopped improving is how training is meant to end)."""
    job = job or {}
    reason = str(summary.get("stop_reason") or "")
    if job.get("status") == "failed":
        error = str(job.get("error") or "").strip().splitlines()
        return FAILED_GATE, ("the job failed after this model was scored"
                             + (f": {error[0][:300]}" if error else ""))
    epochs = _epochs(summary, planned_epochs)
    if reason.startswith("stopped by the user") or job.get("status") == "stopped":
        return STOPPED, f"training was stopped at your request{epochs}"
    if reason.startswith("time budget"):
        return STOPPED, f"the training {reason}{epochs}"
    if reason.startswith("early_stopped"):
        why = reason.partition(": ")[2] or "validation stopped improving"
        return COMPLETE, f"training ended early as planned{epochs}: {why}"
    if not summary:
        return COMPLETE, "its training summary is not kept, so how training ended is not known"
    return COMPLETE, f"training ran to its end{epochs}"


def validation_value(store, job_id: str, summary: dict, key: str) -> float | None:
    """The primary metric on the validation set at the epoch training kept: the summary's own
    (``val_<key>``, or the selection value when selection used that metric), else the streamed
    ``eval_<key>`` of the kept epoch (the last evaluation when no epoch was kept)."""
    if not key:
        return None
    direct = _finite(summary.get(f"val_{key}"))
    if direct is not None:
        return direct
    if summary.get("selection_metric") == key:
        value = _finite(summary.get("selection_value"))
        if value is not None:
            return value
    rows = [r for r in store.metric_values(job_id, f"eval_{key}") if _finite(r["value"])
            is not None]
    kept = _finite(summary.get("epoch_kept"))
    if kept is not None:
        rows = [r for r in rows if r["epoch"] is not None and abs(r["epoch"] - kept) < 0.01]
    elif summary.get("selection_metric"):
        return None  # selection ran but kept no epoch: the last evaluation is not the model
    return float(rows[-1]["value"]) if rows else None


def model_entry(store, model: dict) -> ModelEntry:
    job = store.job(model["job_id"]) or {}
    ws = workspace_of(model, job)
    template = template_of(model, ws)
    report = model_result(model, ws)
    summary = report.get("training") if isinstance(report.get("training"), dict) else None
    if summary is None:
        summary = _json(JobWorkspace(ws).train_summary) or {}
    config = _json(JobWorkspace(ws).train_config) or {}
    status, detail = model_status(job, summary, config.get("epochs"))
    test = headline(report, template)
    return ModelEntry(model, job, ws, template, report, summary, status, detail, test,
                      validation_value(store, model["job_id"], summary, test["key"]))


def mark_best(entries: list[ModelEntry]) -> dict[tuple[str, str], ModelEntry]:
    """Mark the best model of each dataset and task by the primary metric: on validation when
    every candidate recorded it, else on the test set (like is compared with like). Archived
    models and models whose job failed its gate are not candidates. Returns {group: best}."""
    groups: dict[tuple[str, str], list[ModelEntry]] = {}
    for entry in entries:
        entry.best, entry.rivals = "", 0
        if not entry.archived and entry.status != FAILED_GATE and entry.test["value"] is not None:
            groups.setdefault(entry.group, []).append(entry)
    best = {}
    for group, members in groups.items():
        basis = "validation" if all(m.validation is not None for m in members) else "test"
        sign = -1.0 if members[0].test["key"] in LOWER_IS_BETTER else 1.0

        def score(m: ModelEntry) -> tuple[float, float]:
            value = m.validation if basis == "validation" else m.test["value"]
            return sign * value, m.model.get("created_at") or 0.0  # ties: the newer
        winner = max(members, key=score)
        winner.best = basis
        for member in members:
            member.rivals = len(members)
        best[group] = winner
    return best


def marked_best(entry: ModelEntry) -> bool:
    """Whether the page marks it as the best: the best of two or more candidates."""
    return bool(entry.best) and entry.rivals > 1


def best_text(entry: ModelEntry) -> str:
    """``Best AUC on validation (0.912) of the 3 ADNI diagnosis models``; '' when it is not
    marked as the best."""
    if not marked_best(entry):
        return ""
    value = entry.validation if entry.best == "validation" else entry.test["value"]
    return (f"Best {entry.test['name']} on {entry.best} ({value:.3f}) of the {entry.rivals} "
            f"{entry.group[0]} {entry.group[1].replace('_', ' ')} models")


def default_model(entries: list[ModelEntry], best: dict) -> ModelEntry | None:
    """The model to open first: the best of the newest model's dataset and task (entries are
    newest first), else the newest."""
    if not entries:
        return None
    return best.get(entries[0].group) or entries[0]


def catalog(store, archived: bool = False) -> tuple[list[ModelEntry], dict]:
    """(entries newest first, {group: best}); archived models only when ``archived``."""
    entries = [model_entry(store, m) for m in store.models(archived=archived)]
    return entries, mark_best(entries)
