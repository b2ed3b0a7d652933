from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.jobs.gates import check_diagnosis_index, check_plan
from core.datasets.indexing import write_diagnosis_index
from core.datasets.splitting import grouped_stratified_split
from core.datasets.layouts.types import Sample, ScanError
from core.datasets.layouts.dispatch import scan_folder
from core.jobs.workspace import JobWorkspace


def png(path: Path, value: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8), value, np.uint8)).save(path)


def test_class_folders_with_patient_prefixes(demo_folder):
    scan = scan_folder(demo_folder)
    assert scan.layout == "class_folders" and scan.classes == ["NORMAL", "PNEUMONIA"]
    assert scan.dimension == "2D" and scan.file_format == "png"
    assert scan.group_source == "filename prefix"
    assert len({s.group for s in scan.samples}) < len(scan.samples)  # some patients have 2 views


def test_existing_train_test_split_is_kept(tmp_path):
    for split in ("train", "test"):
        for label in ("a", "b"):
            for i in range(3):
                png(tmp_path / split / label / f"{split}{label}{i}.png")
    scan = scan_folder(tmp_path)
    assert scan.existing_split
    out = write_diagnosis_index(scan, tmp_path.parent / "dp")
    assert out["split_method"] == "kept_from_dataset"
    assert out["num_train"] == 6 and out["num_test"] == 6


def test_scan_of_3d_scan_folders(tmp_path):
    for label in ("covid", "normal"):
        for case in range(2):
            for z in range(3):
                png(tmp_path / label / f"case{case}{label}" / f"slice{z}.png")
    scan = scan_folder(tmp_path)
    assert scan.dimension == "3D" and len(scan.samples) == 4
    assert all(Path(s.image).is_dir() for s in scan.samples)


def test_patient_folders_holding_scan_folders_group_by_patient(tmp_path):
    # CC-CCII: CLASS/<patient id>/<scan id>/<slices>; ids restart per class, two scans a patient
    for label in ("NCP", "Normal"):
        for patient in range(4):
            for scan_id in range(2):
                for z in range(3):
                    png(tmp_path / label / str(patient) / f"{patient}{scan_id}" / f"{z:04d}.png")
    (tmp_path / "Normal" / "9" / "empty").mkdir(parents=True)
    scan = scan_folder(tmp_path)
    assert (scan.dimension, scan.group_source, len(scan.samples)) == ("3D", "patient folder", 16)
    assert all(Path(s.image).is_dir() and Path(s.image).parent.name in s.group
               for s in scan.samples)
    assert len({s.group for s in scan.samples}) == 8  # NCP/1 and Normal/1 are not one patient
    assert any("empty" in r for r in scan.skipped)
    split = grouped_stratified_split(scan.samples, 0.25, seed=0)
    assert split.test and not {s.group for s in split.train} & {s.group for s in split.test}


@pytest.mark.parametrize("make,message", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text("x"), "is a file"),
    (lambda p: (p.mkdir(), png(p / "loose.png")), "directly in the folder"),
])
def test_scan_errors_say_what_to_do(tmp_path, make, message):
    target = tmp_path / "data"
    make(target)
    with pytest.raises(ScanError, match=message):
        scan_folder(target)


def test_grouped_split_never_splits_a_patient():
    samples = [Sample(f"/x/p{p}_{v}.png", "A" if p % 2 else "B", f"p{p}")
               for p in range(40) for v in range(3)]
    for seed in range(5):
        split = grouped_stratified_split(samples, 0.25, seed)
        train_groups = {s.group for s in split.train}
        assert not train_groups & {s.group for s in split.test}
        assert {s.label for s in split.test} == {"A", "B"}
        assert abs(len(split.test) / len(samples) - 0.25) < 0.06
    again = grouped_stratified_split(samples, 0.25, 3)
    assert [s.image for s in again.test] == [s.image for s in
                                            grouped_stratified_split(samples, 0.25, 3).test]


def test_index_gate_catches_leakage_and_missing_class(tmp_path, demo_folder):
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_diagnosis_index(scan_folder(demo_folder), ws.datapath)
    assert check_diagnosis_index(ws).ok
    split = json.loads((ws.datapath / "split.json").read_text())
    split["test_groups"].append(split["train_groups"][0])
    (ws.datapath / "split.json").write_text(json.dumps(split))
    gate = check_diagnosis_index(ws)
    assert not gate.ok and "patients/groups are in both train and test" in gate.message()
    train = json.loads((ws.datapath / "train.json").read_text())
    only_normal = {k: v for k, v in train.items() if v == ["NORMAL"]}
    (ws.datapath / "train.json").write_text(json.dumps(only_normal))
    assert "classes with no training image: PNEUMONIA" in check_diagnosis_index(ws).message()
    (ws.datapath / "test.json").write_text("{not json")
    assert "test.json is not valid JSON" in check_diagnosis_index(ws).message()


def test_plan_gate(tmp_path):
    ws = JobWorkspace(tmp_path / "job").ensure()
    assert "plan.json is missing" in check_plan(ws, {}).message()
    ws.plan.write_text(json.dumps({"status": "ready", "dataset": "X", "task": "registration"}))
    message = check_plan(ws, {"X": False}).message()
    assert "folder does not exist" in message and "not supported yet" in message
    ws.plan.write_text(json.dumps({"status": "no_dataset", "reasons": "nothing fits"}))
    assert check_plan(ws, {}).ok


def test_index_gate_reports_deleted_images(tmp_path, demo_folder):
    data = tmp_path / "copy"
    shutil.copytree(demo_folder, data)
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_diagnosis_index(scan_folder(data), ws.datapath)
    next((data / "NORMAL").glob("*.png")).unlink()
    assert "images do not exist" in check_diagnosis_index(ws).message()
