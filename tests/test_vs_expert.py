"""The system-versus-expert bench without training: the generators are deterministic, the expert
baselines follow the system job's split (no test case in train or validation, validation by
whole patients), the targets mark misses, and the runner reads the system's files right."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.expert.common import ExpertError, check_split, hold_out_validation, load_job
from bench.expert.datasets import make_ct_3d, make_msd_liver, make_xray_2d
from bench.expert.nnunet import case_ids
from bench.expert.targets import check_task, format_task
from bench.vs_expert import decision_of, find_ece, find_ece_floor, system_samples_per_s


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("make", [make_xray_2d, make_ct_3d, make_msd_liver])
def test_generators_are_deterministic_and_seeded(tmp_path, make):
    a = digest(make(tmp_path / "a", scale=0.02, seed=3))
    b = digest(make(tmp_path / "b", scale=0.02, seed=3))
    c = digest(make(tmp_path / "c", scale=0.02, seed=4))
    assert a == b and len(a) > 10
    assert a != c


def test_xray_patients_span_several_images_in_one_class(tmp_path):
    root = make_xray_2d(tmp_path / "x", scale=0.02)
    by_patient: dict[str, set[str]] = {}
    for png in root.rglob("*.png"):
        by_patient.setdefault(png.stem.split("_")[0], set()).add(png.parent.name)
    assert all(len(classes) == 1 for classes in by_patient.values())
    assert sum(1 for png in root.rglob("*.png")) > 1.5 * len(by_patient)
    assert {c for cs in by_patient.values() for c in cs} == {"NORMAL", "PNEUMONIA"}


def test_msd_layout_lists_its_pairs(tmp_path):
    root = make_msd_liver(tmp_path / "m", scale=0.02)
    meta = json.loads((root / "dataset.json").read_text())
    assert meta["labels"] == {"0": "background", "1": "liver", "2": "tumour"}
    assert len(meta["training"]) == meta["numTraining"] == len(list(root.glob("imagesTr/*")))
    assert all((root / pair["label"]).is_file() for pair in meta["training"])


def fake_job(tmp_path: Path, n_patients: int = 40) -> Path:
    """A diagnosis job workspace: patients with 1-3 images, 20 % of patients in test."""
    ws = tmp_path / "job"
    (ws / "Datapath").mkdir(parents=True)
    train, test, groups = {}, {}, {}
    for p in range(n_patients):
        label = "PNEUMONIA" if p % 3 == 0 else "NORMAL"
        for k in range(1 + p % 3):
            path = f"/data/{label}/patient{p:03d}_{k}.png"
            (test if p % 5 == 0 else train)[path] = [label]
            groups[path] = f"patient{p:03d}"
    files = {"train.json": train, "test.json": test,
             "label_dict.json": {"NORMAL": 0, "PNEUMONIA": 1},
             "split.json": {"grouping_key": "filename prefix", "groups": groups}}
    for name, data in files.items():
        (ws / "Datapath" / name).write_text(json.dumps(data))
    (ws / "train_config.json").write_text(json.dumps({"template": "diagnosis", "seed": 7,
                                                      "network": "densenet_small"}))
    return ws


def test_expert_validation_holds_out_whole_patients_of_train_only(tmp_path):
    job = load_job(fake_job(tmp_path))
    keys = sorted(job.train)
    labels = [job.label_dict[job.train[k][0]] for k in keys]
    tr, va = hold_out_validation(keys, job.groups, labels, seed=job.seed)
    train_keys, val_keys = [keys[i] for i in tr], [keys[i] for i in va]
    assert sorted(train_keys + val_keys) == keys                     # all of train, nothing else
    assert not set(train_keys + val_keys) & set(job.test)            # no test image
    train_patients = {job.groups[k] for k in train_keys}
    val_patients = {job.groups[k] for k in val_keys}
    assert not train_patients & val_patients                         # whole patients
    assert 0.08 <= len(val_patients) / (len(val_patients) + len(train_patients)) <= 0.25
    assert {job.train[k][0] for k in val_keys} == {"NORMAL", "PNEUMONIA"}   # stratified
    check_split(train_keys, val_keys, sorted(job.test), job.groups)  # passes
    assert (tr, va) == hold_out_validation(keys, job.groups, labels, seed=job.seed)


def test_check_split_refuses_leaks(tmp_path):
    job = load_job(fake_job(tmp_path))
    keys, test = sorted(job.train), sorted(job.test)
    with pytest.raises(ExpertError, match="case .* in both train and test"):
        check_split(keys, [], test + [keys[0]], job.groups)
    same = [k for k in keys if job.groups[k] == "patient002"]      # three images, in train
    other = [k for k in keys if job.groups[k] != "patient002"]
    assert len(same) == 3
    with pytest.raises(ExpertError, match="patient patient002 is in both train and validation"):
        check_split(other + same[:1], same[1:], test, job.groups)


def test_load_job_says_what_is_missing(tmp_path):
    ws = fake_job(tmp_path)
    (ws / "Datapath" / "split.json").unlink()
    with pytest.raises(ExpertError, match="split.json is missing"):
        load_job(ws)


def test_nnunet_case_ids_stay_unique():
    items = [{"image_path": "/a/imagesTr/liver_001.nii.gz"},
             {"image_path": "/b/imagesTr/liver_002.nii.gz"}]
    assert case_ids(items) == ["liver_001", "liver_002"]
    clash = items + [{"image_path": "/c/liver_001.nii.gz"}]
    assert len(set(case_ids(clash))) == 3


def run(wall, metric, acc=None, rate=100.0, thr=0.5, error=None, ece=0.05,
        floor=0.07) -> dict:
    return {"wall_s": wall, "metric": metric, "accuracy_at_threshold": acc, "threshold": thr,
            "samples_per_s": rate, "ece": ece, "ece_floor": floor, "error": error}


def verdicts(task: dict) -> dict[str, bool | None]:
    return {c.name: c.passed for c in check_task(task)}


def test_targets_pass_when_the_system_keeps_up():
    task = {"key": "diagnosis_2d", "metric": "auc",
            "pipelines": {"system": run(110, 0.90, 0.84, 95), "expert": run(100, 0.91, 0.85)}}
    assert verdicts(task) == {"wall_ratio": True, "metric_vs_expert": True,
                              "decision_system": True, "decision_expert": True,
                              "throughput": True, "ece": True}
    assert "MISS" not in format_task(task, check_task(task))


def test_targets_mark_each_miss():
    task = {"key": "diagnosis_2d", "metric": "auc",
            "pipelines": {"system": run(120, 0.96, 0.80, 85), "expert": run(100, 0.99, 0.97)}}
    got = verdicts(task)
    assert got == {"wall_ratio": False, "metric_vs_expert": False, "decision_system": False,
                   "decision_expert": True, "throughput": False, "ece": True}
    table = format_task(task, check_task(task))
    assert table.count("MISS") == 4
    assert "targets missed: wall_ratio, metric_vs_expert, decision_system, throughput" in table


def test_ece_target_prints_what_chance_allows():
    task = {"key": "diagnosis_3d", "metric": "auc",
            "pipelines": {"system": run(100, 0.97, 0.9, ece=0.19, floor=0.24),
                          "expert": run(100, 0.98, 0.9, ece=0.10, floor=0.22)}}
    check = next(c for c in check_task(task) if c.name == "ece")
    assert check.passed is False and check.value == 0.19
    assert "a calibrated model shows up to 0.240 on this test set" in check.note
    table = format_task(task, check_task(task))
    assert "chance ECE" in table and "0.240" in table and "0.220" in table
    task["pipelines"]["system"].update(ece=0.04)
    assert verdicts(task)["ece"] is True
    task["pipelines"]["system"].update(ece=None, floor=None)
    assert verdicts(task)["ece"] is None                 # diagnosis without calibration: n/a


def test_dice_target_against_nnunet_and_failed_pipelines():
    task = {"key": "segmentation_3d", "metric": "dice",
            "pipelines": {"system": run(100, 0.80), "expert": run(100, 0.81),
                          "nnunet": run(300, 0.84)}}
    assert verdicts(task)["dice_vs_nnunet"] is False
    task["pipelines"]["nnunet"]["metric"] = 0.83
    assert verdicts(task)["dice_vs_nnunet"] is True
    task["pipelines"]["nnunet"] = {"error": "nnUNetv2_train failed (exit 1)"}
    assert verdicts(task)["dice_vs_nnunet"] is None
    table = format_task(task, check_task(task))
    assert "failed" in table and "nnUNetv2_train failed" in table
    assert "decision_system" not in verdicts(task)     # no threshold for segmentation


def test_runner_reads_the_systems_reports():
    report = {"metrics": {"auc": 0.9, "ece": 0.2},
              "calibration": {"ece_before": 0.1, "ece_after": 0.03,
                              "ece_after_uncertainty": {"noise_floor": 0.08}},
              "operating_point": {"threshold": 0.4, "test": {"accuracy": 0.81}}}
    assert find_ece(report) == 0.03 and find_ece_floor(report) == 0.08
    assert find_ece_floor({"metrics": {"ece": 0.2}}) is None
    assert find_ece({"metrics": {"ece": 0.2}}) == 0.2
    own = {"threshold": 0.6, "test": {"accuracy": 0.7}}
    assert decision_of(report, own) == (0.81, 0.4)
    assert decision_of({"metrics": {}}, own) == (0.7, 0.6)
    assert system_samples_per_s({"train_samples_per_second": 12.5}, "diagnosis") == 12.5
    summary = {"num_train": 10, "epochs_run": 3.0, "train_seconds": 6.0}
    assert system_samples_per_s(summary, "diagnosis") == 5.0
    assert system_samples_per_s(summary, "segmentation") == 20.0    # 4 patches a case
