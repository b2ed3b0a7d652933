"""The evaluation step of a job: score exactly the predictions the training template wrote
(checked against the digest recorded when training ended) with the system's evaluator for the
task, write report.json, the model card and the run manifest, and return the model's row for
the store. The caller records the report's digest and the model (one writer of the store)."""
from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from core.datasets.datacards import write_json_atomic
from core.evaluation.common import EvaluationError
from core.jobs.manifest import build_manifest
from core.jobs.model_card import render_model_card
from core.jobs.provenance import predictions_digest
from core.jobs.workspace import JobWorkspace


def evaluate(template: str, datapath: Path, predictions: Path, **options) -> dict:
    """The system's evaluator of ``template`` on a predictions file. ``options``: the
    diagnosis evaluator's ``operating_rule`` (the plan's) or ``decision`` (a stored one)."""
    module = importlib.import_module(f"core.evaluation.{template}")
    return getattr(module, f"evaluate_{template}")(datapath, predictions, **options)


def check_temperature(report: dict, summary: dict) -> None:
    """The temperature the evaluator refitted on the validation predictions is the one the
    template saved in the model (same function, same numbers): otherwise the exported model
    and the report would disagree about the probabilities."""
    fitted = (report.get("calibration") or {}).get("temperature")
    saved = summary.get("temperature")
    if fitted is None or saved is None or (report.get("decision") or {}).get("source") \
            != "validation":
        return
    if abs(float(fitted) - float(saved)) > 1e-4 * max(1.0, abs(float(saved))):
        raise EvaluationError(f"the model's saved temperature {float(saved):.4f} differs from "
                              f"the one fitted on its validation predictions ({fitted:.4f}): "
                              "the predictions and the model do not belong together; call "
                              "run_training again")


def evaluate_job(ws: JobWorkspace, job_id: str, recorded_predictions: str | None) -> dict:
    """Score the job's test predictions and write report.json. ``recorded_predictions`` is the
    digest of Logout/predictions recorded when training finished. Raises EvaluationError."""
    plan = ws.read_plan()
    if not recorded_predictions:
        raise EvaluationError("no finished training run in this job: call run_training first "
                              "(only the template's own predictions are scored)")
    if predictions_digest(ws.logout) != recorded_predictions:
        raise EvaluationError("Logout/predictions changed after training finished; only the "
                              "template's own predictions are scored: call run_training again")
    options = {"operating_rule": plan.get("operating_point")} \
        if plan["template"] == "diagnosis" else {}
    try:
        report = evaluate(plan["template"], ws.datapath, ws.predictions, **options)
    except (OSError, ValueError) as exc:
        raise EvaluationError(str(exc)) from exc
    summary = json.loads(ws.train_summary.read_text())
    check_temperature(report, summary)
    report.update(job_id=job_id, dataset=plan["dataset"], request=plan["request"],
                  training=summary)
    write_json_atomic(ws.report, report)
    return report


def write_model_files(ws: JobWorkspace, job_id: str, report: dict,
                      name: str | None = None) -> dict:
    """Model card and run manifest beside a passed report; returns the model's store row.
    ``name``: the model's versioned name (the store's ``next_model_name``), for the card; the
    store gives the row its name when it records it."""
    plan = ws.read_plan()
    summary = report["training"]
    split = json.loads(ws.split.read_text())
    split.pop("groups", None)
    ws.model_card.write_text(render_model_card(plan, report, summary, split, name))
    write_json_atomic(ws.manifest, build_manifest(ws.datapath, ws.train_config))
    return {"id": job_id, "job_id": job_id, "name": name or f"{plan['dataset']} {plan['task']}",
            "task": plan["task"], "dataset": plan["dataset"], "path": str(ws.model_dir),
            "metrics": json.dumps(report["metrics"]), "card_path": str(ws.model_card),
            "created_at": time.time()}
