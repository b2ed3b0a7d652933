"""Every task end to end through the crew (autopilot) on its demo dataset: the right template is
chosen from the request and the dataset layout, indexes and dataloaders pass their gates, the
user's epochs edited at approval bind training, and the system evaluator's metric clears the
bar. The epochs are cut to about where each demo's validation curve flattens, measured with the
default plans (best epoch: CT 26 of 40; findings 39 of 40, and AUC 0.84-0.85 after 12 or
20, so it keeps its 40; organs 28 of 30 but Dice 0.89 at 12; nodules 8 of 18; reports 20 of
20). Default plans as a user gets them are trained by the browser test and `make bench-ui`
(the chest X-ray demo) and by `make m3bench` (its datasets)."""
from __future__ import annotations

import json

import pytest

from core.jobs.lifecycle import create_job
from tests.conftest import (NNUNET_DEMO, NNUNET_EPOCHS, approve_with_epochs,
                            registered_demo_dataset, run_until_approval, tree_digest)

CASES = [  # (dataset, request, template, epochs set at approval, the bar)
    ("Demo chest CT scans (synthetic)",
     "classify COVID-19 versus common pneumonia versus normal on chest CT",
     "diagnosis", 14, lambda m: m["auc"] >= 0.85),
    ("Demo chest X-ray findings (synthetic)",
     "classify chest X-ray findings: effusion, nodule and cardiomegaly",
     "diagnosis", 40, lambda m: m["auc"] >= 0.85),
    ("Demo abdominal CT organs (synthetic)", "segment the liver and spleen on abdominal CT",
     "segmentation", 12, lambda m: m["dice"] >= 0.70),
    ("Demo chest X-ray nodules (synthetic)",
     "detect lung nodules on chest X-rays with bounding boxes",
     "detection", 6, lambda m: m["map50"] >= 0.5),
    ("Demo chest X-ray reports (synthetic)", "write radiology reports for chest X-rays",
     "report_generation", 8, lambda m: m["rouge_l"] > m["baseline_rouge_l"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,request_text,template,epochs,passes", CASES,
                         ids=[c[2] + "-" + c[0].split()[2] for c in CASES])
def test_task_end_to_end(settings, store, name, request_text, template, epochs, passes):
    folder, before = registered_demo_dataset(settings, name)
    job_id = create_job(settings, store, request_text, "autopilot", auto_approve=False)
    worker, result = run_until_approval(settings, store, job_id)
    approve_with_epochs(settings, store, job_id, worker, epochs)
    assert result["status"] == "succeeded", result["error"]
    assert result["dataset"] == name
    plan = (settings.jobs_dir / job_id / "plan.json").read_text()
    config = json.loads((settings.jobs_dir / job_id / "train_config.json").read_text())
    assert config["epochs"] == epochs
    assert f'"template": "{template}"' in plan
    assert ('"engine": "monai"' in plan) == (template == "segmentation")
    assert passes(result["metrics"]), result["metrics"]
    assert tree_digest(folder) == before
    card = (settings.jobs_dir / job_id / "model_card.md").read_text()
    assert "research" in card.lower() and "95% CI" in card


@pytest.mark.slow
def test_nnunet_end_to_end_with_the_epochs_the_user_set(nnunet_crew_job):
    """The nnU-Net engine through the crew: the request names it, the plan chooses it, the user
    edits the epochs at approval and training honours them, the evaluator scores the masks."""
    job = nnunet_crew_job
    result = job["result"]
    assert result["status"] == "succeeded", result["error"]
    assert result["dataset"] == NNUNET_DEMO
    ws = job["workspace"]
    plan = (ws / "plan.json").read_text()
    assert '"template": "segmentation"' in plan and '"engine": "nnunet"' in plan
    config = json.loads((ws / "train_config.json").read_text())
    assert config["engine"] == "nnunet" and config["epochs"] == NNUNET_EPOCHS
    assert result["metrics"]["dice"] >= 0.50, result["metrics"]
    assert tree_digest(job["folder"]) == job["before"]
    card = (ws / "model_card.md").read_text()
    assert "research" in card.lower() and "95% CI" in card
