"""Dataset folders whose labels are records beside the images (issue 24's failures, written
from the public layouts of CheXpert, an image/mask pairs table, COCO, MIMIC-CXR-style JSON
Lines, a labels.json beside NumPy volumes, IU X-ray-style per-study reports and the LGG
kaggle_3m slices with their clinical table) end to end: registered with a clinician's
description, the request through the crew in autopilot (the Task Manager choosing among all
seven cards and binding the target the request names), the plan approved with one epoch (a
binding user edit: this checks plumbing, not quality), the job ``succeeded`` on the right
dataset and target with the system evaluator's metric, on test patients none of whom has an
image in training (by the generator's own patient of each image), and nothing written in the
user's folder. Two folders carry two targets each: both are built, by two requests.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import approve_with_epochs, crew_home, run_until_approval, tree_digest
from core.demo.record_families import RECORD_FAMILIES, SECOND_TARGETS

pytestmark = [pytest.mark.slow]
SCALE = 0.25
METRIC = {"diagnosis": "auc", "segmentation": "dice", "detection": "map50",
          "report_generation": "rouge_l"}
CASES = [(f, f.request, f.reading) for f in RECORD_FAMILIES] + \
    [(next(f for f in RECORD_FAMILIES if f.key == k), req, reading)
     for k, (req, reading) in SECOND_TARGETS.items()]


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    from core.datasets.registration import register_dataset

    data = tmp_path_factory.mktemp("records-data")
    with pytest.MonkeyPatch.context() as mp:
        _home, settings, store = crew_home(tmp_path_factory, mp, "records-home")
        folders = {}
        for family in RECORD_FAMILIES:
            root = family.generate(data / family.folder, scale=SCALE)
            result = register_dataset(settings, store, str(root), family.name,
                                      family.description)
            assert result["status"] == "registered", (family.key, result["errors"])
            folders[family.key] = (root, tree_digest(root))
        yield settings, store, folders


def _refs(path: Path) -> list[str]:
    index = json.loads(path.read_text())
    out = []
    for e in index:
        ref = e["image_path"] if isinstance(e, dict) else e
        out.append(ref[0] if isinstance(ref, list) else ref)
    return out


def _patients(family, root: Path, refs: list[str]) -> set:
    return {family.patient_of(root, Path(r).resolve().relative_to(root.resolve()).as_posix())
            for r in refs} - {None}


def _norm(names) -> set[str]:
    return {str(n).lower() for n in names}


def test_every_record_family_registers_with_its_targets(registered):
    """The card lists the expected target (task and classes) among its targets, and the
    second target where the folder has two."""
    from core.datasets.catalog import find_entry

    settings, _store, _folders = registered
    for family, _request, reading in CASES:
        card = find_entry(settings, family.name).card
        want_task = "diagnosis" if reading.template == "diagnosis" else reading.template
        found = [t for t in card.targets
                 if (t["template"] == reading.template or t["task"] == want_task)
                 and (not reading.classes or reading.template == "segmentation"
                      or _norm(t["classes"]) == _norm(reading.classes))]
        assert found, (family.key, [(t["id"], t["classes"]) for t in card.targets])


@pytest.mark.parametrize("family,request_text,reading", CASES,
                         ids=[f"{f.key}:{r[:28]}" for f, r, _ in CASES])
def test_record_family_builds_the_requested_target(registered, family, request_text, reading):
    from core.jobs.lifecycle import create_job
    from core.jobs.workspace import JobWorkspace

    settings, store, folders = registered
    root, before = folders[family.key]
    job_id = create_job(settings, store, request_text, "autopilot", auto_approve=False)
    worker, outcome = run_until_approval(settings, store, job_id)
    ws = JobWorkspace(settings.jobs_dir / job_id)
    plan = json.loads(ws.plan.read_text())
    edits = {"epochs": 1}
    if plan["dataset"] != family.name:
        # two cards fit the request almost equally (two chest X-ray report sets): the plan
        # names the runner-up, and the user picks it at approval (a binding edit)
        assert f"Close behind: {family.name}" in plan["reasons"], plan.get("reasons")
        edits["dataset"] = family.name
    else:
        assert plan["dataset"] == family.name, plan.get("reasons")
    assert plan["template"] == reading.template, plan
    if reading.template == "diagnosis":
        assert _norm(plan["classes"]) == _norm(reading.classes), plan.get("target")
    if "dataset" in edits:
        from core.planning.plan_edits import edit_plan
        edit_plan(settings, store, job_id, edits)
        worker.join(timeout=600)
        plan = json.loads(ws.plan.read_text())
        assert plan["dataset"] == family.name and plan["template"] == reading.template
    else:
        approve_with_epochs(settings, store, job_id, worker, 1, timeout=600)
    assert outcome["status"] == "succeeded", (outcome.get("error"), outcome.get("reasons"))
    metric = outcome["metrics"].get(METRIC[reading.template])
    assert isinstance(metric, float) and math.isfinite(metric), outcome["metrics"]
    train, test = _refs(ws.train_index), _refs(ws.test_index)
    assert train and test
    report = json.loads(ws.report.read_text())
    assert report["num_test"] == len(test)
    train_p, test_p = _patients(family, root, train), _patients(family, root, test)
    assert not train_p & test_p, sorted(train_p & test_p)[:5]
    assert tree_digest(root) == before
