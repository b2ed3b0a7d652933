"""A job's scores come from the system's own steps: the evaluator scores only the predictions
the training template wrote in this job, and a job ends "succeeded" only with the report the
evaluator wrote (an agent's script can write files in its workspace; these checks catch it)."""
from __future__ import annotations

import json

from core.jobs.lifecycle import create_job
from core.jobs.provenance import file_digest, predictions_digest
from crew.stages import check_evaluated
from tools.context import JobContext
from tools.model_trainer import EvaluateModel
from tools.task_manager import WritePlan

DEMO = "Demo chest X-ray (synthetic)"


def planned_ctx(settings, store):
    job_id = create_job(settings, store, "classify pneumonia", llm="scripted/x")
    ctx = JobContext(settings, store, job_id, "classify pneumonia")
    assert WritePlan(ctx=ctx, role="Task Manager").call(dataset=DEMO, reasons="demo")["ok"]
    ctx.workspace.ensure()
    return ctx


def test_evaluator_refuses_predictions_without_a_training_run(settings, store, registered_demo):
    ctx = planned_ctx(settings, store)
    (ctx.workspace.logout / "predictions.json").write_text(json.dumps({"a.png": [0.9, 0.1]}))
    result = EvaluateModel(ctx=ctx, role="Model Trainer").call()
    assert not result["ok"] and "call run_training first" in result["error"]
    assert not ctx.workspace.report.exists()


def test_evaluator_refuses_predictions_changed_after_training(settings, store, registered_demo):
    ctx = planned_ctx(settings, store)
    predictions = ctx.workspace.logout / "predictions.json"
    predictions.write_text(json.dumps({"a.png": [0.9, 0.1]}))
    (ctx.workspace.logout / "predictions").mkdir()
    (ctx.workspace.logout / "predictions" / "case1.npy").write_bytes(b"mask")
    ctx.event("Model Trainer", "provenance", tool="predictions",
              result=predictions_digest(ctx.workspace.logout))
    (ctx.workspace.logout / "predictions" / "case1.npy").write_bytes(b"better mask")
    result = EvaluateModel(ctx=ctx, role="Model Trainer").call()
    assert not result["ok"] and "changed after training" in result["error"]


def test_success_needs_the_evaluators_own_report(settings, store, registered_demo):
    ctx = planned_ctx(settings, store)
    assert not check_evaluated(ctx).ok  # nothing scored yet
    report = ctx.workspace.report
    report.write_text(json.dumps({"evaluator": "core.evaluation.diagnosis",
                                  "metrics": {"auc": 0.71}}))
    assert "has not scored" in check_evaluated(ctx).message()  # written, but not by it
    ctx.event("Model Trainer", "provenance", tool="report", result=file_digest(report))
    assert check_evaluated(ctx).ok
    report.write_text(json.dumps({"evaluator": "core.evaluation.diagnosis",
                                  "metrics": {"auc": 0.99}}))
    verdict = check_evaluated(ctx)
    assert not verdict.ok and "changed after" in verdict.message()
