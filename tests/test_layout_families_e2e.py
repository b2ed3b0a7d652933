"""Every layout family end to end, as a user gets a model from it: the folder registered with
the description a clinician wrote, the family's request through the crew in autopilot (the Task
Manager choosing among all twelve cards), the plan approved with the epochs edited down (a
binding user edit: this test checks plumbing, the bench checks quality), and the job
``succeeded`` on the right dataset with the system evaluator's metric, computed on test
patients none of whom has an image in training (by the generator's own patient of each image).

The families are generated small; the quality floors are ``python -m crew bench --suite
m3bench-lite`` (bench/README.md), not this test."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import approve_with_epochs, crew_home, run_until_approval, tree_digest
from core.demo.layout_families import FAMILIES

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:NvImgCodecPydicomReader")]
SCALE = 0.25
EPOCHS = 1
METRIC = {"diagnosis": "auc", "segmentation": "dice", "detection": "map50",
          "report_generation": "rouge_l"}


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """All twelve families generated small and registered in one home (what the user's
    catalogue holds); the settings, store and each family's folder and digest."""
    from core.datasets.registration import register_dataset

    data = tmp_path_factory.mktemp("families-data")
    with pytest.MonkeyPatch.context() as mp:
        _home, settings, store = crew_home(tmp_path_factory, mp, "families-home")
        folders = {}
        for family in FAMILIES:
            root = family.generate(data / family.folder, scale=SCALE)
            result = register_dataset(settings, store, str(root), family.name,
                                      family.description)
            assert result["status"] == "registered", (family.key, result)
            folders[family.key] = (root, tree_digest(root))
        yield settings, store, folders, mp


def _image_ref(key_or_entry) -> str:
    if isinstance(key_or_entry, dict):
        key_or_entry = key_or_entry["image_path"]
    return key_or_entry[0] if isinstance(key_or_entry, list) else key_or_entry


def _refs(path: Path) -> list[str]:
    index = json.loads(path.read_text())
    return [_image_ref(e) for e in index]   # list entries, or the keys of a diagnosis index


def _patients(family, root: Path, refs: list[str]) -> set:
    out = set()
    for ref in refs:
        file, sep, element = ref.partition("::")
        rel = Path(file).resolve().relative_to(root.resolve()).as_posix() + sep + element
        out.add(family.patient_of(root, rel))
    return out - {None}


@pytest.mark.parametrize("family", FAMILIES, ids=[f.key for f in FAMILIES])
def test_family_builds_a_model_end_to_end(registered, family):
    from core.jobs.lifecycle import create_job
    from core.jobs.workspace import JobWorkspace

    settings, store, folders, _ = registered
    root, before = folders[family.key]
    job_id = create_job(settings, store, family.request, "autopilot", auto_approve=False)
    worker, outcome = run_until_approval(settings, store, job_id)
    plan = json.loads(JobWorkspace(settings.jobs_dir / job_id).plan.read_text())
    assert plan["dataset"] == family.name, plan.get("reasons")
    assert plan["template"] == family.reading.template
    approve_with_epochs(settings, store, job_id, worker, EPOCHS, timeout=600)
    assert outcome["status"] == "succeeded", (outcome.get("error"), outcome.get("reasons"))
    assert outcome["dataset"] == family.name
    metric = outcome["metrics"].get(METRIC[family.reading.template])
    assert isinstance(metric, float) and math.isfinite(metric), outcome["metrics"]
    ws = JobWorkspace(settings.jobs_dir / job_id)
    train, test = _refs(ws.train_index), _refs(ws.test_index)
    assert train and test
    report = json.loads(ws.report.read_text())
    assert report["num_test"] == len(test)            # every held-out image was evaluated
    train_patients, test_patients = (_patients(family, root, train),
                                     _patients(family, root, test))
    assert not train_patients & test_patients, sorted(train_patients & test_patients)[:5]
    assert tree_digest(root) == before                 # nothing written in the user's folder
