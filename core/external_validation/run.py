"""The external validation stage: a trained model scored on another registered dataset.

``evaluate_external`` is the one function the CLI, the chat and the Models page call:

1. the model and the dataset are checked against each other (compat) before anything is
   written: a refusal leaves no folder, no store row and the dataset untouched;
2. the dataset is read by the Data Engineer's scan (with its datacard's description and the
   reading chosen at registration) and indexed unsplit — every case a test case — into a new
   folder of the model's job, ``<job>/external/<dataset>-<time>/Datapath/``, with the model's
   label dictionary (segmentation masks renumbered to the model's label order);
3. the job's own ``dataloader.py`` with its own configuration, only pointed at that folder, is
   written beside the index, and the model runs over it in a child process
   (``core.viewing.index_inference``, started through the caller's ``run_child``: the caller
   decides confinement); the child never opens the store;
4. the system's evaluator scores the predictions, with the model's stored threshold(s) for
   diagnosis (the child's probabilities are already calibrated by the model's temperature); ``external_report.json`` holds the internal and the external
   results; the calling process — the only writer — records an event on the model's job and an
   audit row.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core import RESEARCH_ONLY
from core.datasets.catalog import find_entry, load_catalog
from core.datasets.datacards import write_json_atomic
from core.datasets.index_stage import scan_planned
from core.datasets.indexing import write_test_index
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT, ScanError
from core.datasets.splitting import IndexBuildError
from core.evaluation.common import EvaluationError
from core.evaluation.step import evaluate
from core.external_validation.compat import (ExternalValidationError, ModelFacts, check_dataset,
                                             check_labels, find_model, model_facts)
from core.external_validation.views import summary_line
from core.jobs.workspace import JobWorkspace
from core.store.db import Store
from core.training.instantiate import fill_config_block
from core.viewing.model_views import job_report

CHILD = "core.viewing.index_inference"
ROLE = "External validation"
AUDIT_ACTION = "external_evaluation"
REPORT_NAME = "external_report.json"


@dataclass(frozen=True)
class ExternalRun:
    """One external evaluation's folder inside the model's job."""
    root: Path

    @property
    def datapath(self) -> Path:
        return self.root / "Datapath"

    @property
    def predictions(self) -> Path:
        return self.root / "predictions.json"

    @property
    def log(self) -> Path:
        return self.root / "predict.log"

    @property
    def report(self) -> Path:
        return self.root / REPORT_NAME


def _new_run(ws: JobWorkspace, dataset: str) -> ExternalRun:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("_") or "dataset"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root, k = ws.external / f"{slug}-{stamp}", 1
    while root.exists():
        root, k = ws.external / f"{slug}-{stamp}-{k}", k + 1
    root.mkdir(parents=True)
    return ExternalRun(root)


# ----------------------------------------------------------------------------- the index

def _model_index(facts: ModelFacts, run: ExternalRun, template: str,
                 mapping: dict[str, str]) -> None:
    """The external test index in the model's names: diagnosis labels renamed to the model's
    classes and the model's label_dict.json; segmentation entries given the model's label order
    with each structure's stored mask value (``label_values``)."""
    path = run.datapath / "test.json"
    test = json.loads(path.read_text(encoding="utf-8"))
    if template == "diagnosis":
        test = {image: [mapping[lbl] for lbl in labels] for image, labels in test.items()}
        write_json_atomic(run.datapath / "label_dict.json",
                          {name: i for i, name in enumerate(facts.classes)})
    else:
        for entry in test:
            values = entry.get("label_values") or list(range(1, len(entry["labels"]) + 1))
            stored = {mapping[name]: value for name, value in zip(entry["labels"], values)}
            entry["labels"] = list(facts.classes)
            entry["label_values"] = [stored[name] for name in facts.classes]
    write_json_atomic(path, test)


def _dataloader(facts: ModelFacts, run: ExternalRun, allow_pickle: bool) -> None:
    """The job's own dataloader.py and configuration, with DATAPATH pointed at the run and
    pickled volumes read only when the external set's own datacard allows it."""
    ws = JobWorkspace(facts.workspace)
    if not ws.dataloader.is_file() or not ws.dataloader_config.is_file():
        raise ExternalValidationError(f"the model's job folder {ws.root} has no "
                                      "Datapath/dataloader.py or dataloader_config.json; "
                                      "retrain the model")
    config = {**json.loads(ws.dataloader_config.read_text(encoding="utf-8")),
              "DATAPATH": str(run.datapath)}
    if "ALLOW_PICKLE" in config or allow_pickle:  # unpickling runs code: the data's card decides
        config["ALLOW_PICKLE"] = bool(allow_pickle)
    source = ws.dataloader.read_text(encoding="utf-8")
    try:
        (run.datapath / "dataloader.py").write_text(fill_config_block(source, config),
                                                    encoding="utf-8")
    except ValueError as exc:
        raise ExternalValidationError(f"the model's dataloader cannot be pointed at the external "
                                      f"set: {exc}") from exc
    write_json_atomic(run.datapath / "dataloader_config.json", config)


# --------------------------------------------------------------- the model's stored decision
# Issue 13: a diagnosis model gives a user calibrated probabilities and decisions at the
# threshold chosen on its validation set, so an external set is scored with those, never refitted
# on it. The child's probabilities are the model's own output, which already divides the logits
# by the saved temperature (ml_templates.diagnosis.model.Probabilities): the evaluator gets the
# stored threshold(s) with temperature 1, or the temperature would count twice.

def stored_decision(internal: dict) -> dict | None:
    """The report's ``decision`` as the evaluator takes it for already calibrated
    probabilities; None for a model evaluated before decisions were stored (argmax)."""
    decision = internal.get("decision")
    if not isinstance(decision, dict):
        return None
    return {**decision, "temperature": 1.0, "source": "stored",
            "model_temperature": float(decision.get("temperature") or 1.0)}


# ----------------------------------------------------------------------------- the stage

def _internal(facts: ModelFacts) -> dict:
    report = job_report(facts.workspace)
    if not report.get("metrics"):
        raise ExternalValidationError(f"model {facts.name!r} has no internal test report "
                                      f"(report.json in {facts.workspace}); retrain it")
    return report


def prepare(settings, store: Store, model_ref: str, dataset: str):
    """Everything checked, nothing written: (model facts, catalogue entry, template, scan,
    label mapping, internal report). Raises ExternalValidationError."""
    model = find_model(store, model_ref)
    facts = model_facts(model, store.job(model["job_id"]))
    entry = find_entry(settings, dataset or "")
    names = [e.card.name for e in load_catalog(settings) if e.available]
    template = check_dataset(facts, entry, dataset, names)
    internal = _internal(facts)
    plan = {"status": "ready", "dataset": entry.card.name, "template": template,
            "dataset_path": str(entry.dataset_path)}
    try:
        scan = scan_planned(settings, plan)  # the Data Engineer's reading of the folder
    except ScanError as exc:
        raise ExternalValidationError(f"{entry.card.name!r} cannot be read: {exc}") from exc
    read_as = TEMPLATE_OF_LAYOUT.get(scan.layout)
    if read_as and read_as != template:
        raise ExternalValidationError(f"{entry.card.name!r} reads as a {read_as} dataset "
                                      f"({scan.layout}), this model is a {template} model")
    multi = any(s.labels is not None for s in scan.samples)
    mapping = check_labels(facts, entry.card.name, scan.classes,
                           scan.dimension or entry.card.dimension, multi)
    return facts, entry, template, scan, mapping, internal


def evaluate_external(settings, store: Store, model_ref: str, dataset: str,
                      run_child: Callable[..., dict], request: str = "",
                      actor: str = "user") -> dict:
    """Score the model ``model_ref`` names (id, name or "latest") on the registered ``dataset``;
    returns the external report (internal and external results). ``run_child(module, args,
    log_path, timeout_s=)`` runs ``python -m core.config.launch module args`` and returns its
    ``returncode`` and ``log_tail`` (runtime.process.run_module). Raises
    ExternalValidationError; a refusal before the child writes nothing anywhere."""
    facts, entry, template, scan, mapping, internal = prepare(settings, store, model_ref,
                                                              dataset)
    started = time.time()
    run = _new_run(JobWorkspace(facts.workspace), entry.card.name)
    try:
        index = write_test_index(scan, run.datapath, template)
        _model_index(facts, run, template, mapping)
        _dataloader(facts, run, entry.card.allow_pickle)
        child = run_child(CHILD, ["--job", str(facts.workspace), "--datapath", str(run.datapath),
                                  "--out", str(run.predictions)], run.log,
                          timeout_s=min(4 * 3600, 300 + 5 * index["num_test"]))
        if child["returncode"] != 0:
            raise ExternalValidationError(
                f"the model could not be run on {entry.card.name!r} ({child.get('ended', '')}, "
                f"exit code {child['returncode']}):\n{child.get('log_tail', '')}")
        decision = stored_decision(internal) if template == "diagnosis" else None
        options = {"decision": decision} if decision else {}
        try:
            external = evaluate(template, run.datapath, run.predictions, **options)
        except (OSError, ValueError) as exc:  # EvaluationError is a ValueError
            raise ExternalValidationError(f"the evaluator could not score the predictions: "
                                          f"{exc}") from exc
    except (ExternalValidationError, IndexBuildError, EvaluationError) as exc:
        store.add_event(facts.job_id, ROLE, "external", tool="evaluate_external",
                        args=entry.card.name, result=f"failed: {exc}",
                        seconds=time.time() - started, ok=False)
        if isinstance(exc, ExternalValidationError):
            raise
        raise ExternalValidationError(str(exc)) from exc
    report = {
        "model": {"id": facts.id, "name": facts.name, "job_id": facts.job_id,
                  "template": template, "task": facts.task, "classes": facts.classes},
        "internal": {"dataset": facts.dataset, "num_test": internal.get("num_test"),
                     "metrics": internal.get("metrics", {}), "ci95": internal.get("ci95", {}),
                     "evaluator": internal.get("evaluator")},
        "external": {**external, "dataset": entry.card.name,
                     "dataset_path": str(entry.dataset_path), "classes_present": scan.classes,
                     "counts": index["counts"]},
        "decision": ({"applied": "stored", **decision} if options else
                     {"applied": "argmax" if template == "diagnosis" else "argmax per voxel"}),
        "request": request, "created_at": time.time(),
        "seconds": round(time.time() - started, 2), "folder": str(run.root),
        "research_only": RESEARCH_ONLY,
    }
    write_json_atomic(run.report, report)
    record(store, report, actor)
    return report


def record(store: Store, report: dict, actor: str) -> None:
    """The parent's record of a finished external evaluation: an event on the model's job and
    an audit row naming the report (what the chat's history reads)."""
    model = report["model"]
    store.add_event(model["job_id"], ROLE, "external", tool="evaluate_external",
                    args=report["external"]["dataset"], result=summary_line(report),
                    seconds=float(report.get("seconds") or 0.0))
    store.audit(actor, AUDIT_ACTION, model["id"], json.dumps(
        {"dataset": report["external"]["dataset"], "report": str(Path(report["folder"]) /
                                                                  REPORT_NAME)}))


def past_evaluations(workspace: str | Path) -> list[dict]:
    """The model's finished external evaluations, newest first (each report as written)."""
    reports = []
    for path in JobWorkspace(Path(workspace)).external.glob(f"*/{REPORT_NAME}"):
        try:
            reports.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(reports, key=lambda r: -float(r.get("created_at") or 0))


def recorded_evaluations(store: Store, actor: str, since: float = 0.0,
                         limit: int = 50) -> list[dict]:
    """The external evaluations ``actor`` asked for, from the audit log (oldest first), each
    with its report; those whose report is gone are left out."""
    rows = store.rows("select ts, actor, target, detail from audit where action = ? and "
                      "actor = ? and ts >= ? order by ts desc limit ?",
                      [AUDIT_ACTION, actor, since, limit])
    out = []
    for row in reversed(rows):
        try:
            path = json.loads(row["detail"] or "{}").get("report") or ""
            report = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out.append({**report, "recorded_at": row["ts"]})
    return out
