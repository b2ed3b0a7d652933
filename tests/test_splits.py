"""Leakage-free splits: patients never on both sides, caps from the datacard description
applied by whole patients (balanced when asked), seeded determinism, the index gate catching a
planted leak, and the Data Engineer's previews bounded whatever the dataset's size."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.jobs.gates import check_diagnosis_index, check_list_index
from core.datasets.indexing import write_diagnosis_index, write_list_index
from core.datasets.split_caps import parse_caps
from core.datasets.splitting import IndexBuildError, make_split
from core.datasets.layouts.types import Sample, ScanResult, group_of
from core.datasets.layouts.dispatch import scan_folder
from core.jobs.workspace import JobWorkspace


def png(path: Path, value: int = 0, size: int = 8) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size), value, np.uint8)).save(path)


def class_folders(root: Path, patients: dict[str, int], views: int = 3) -> Path:
    """CLASS/patientNNNN_V.png: ``patients[class]`` patients, ``views`` images each."""
    pid = 0
    for label, n in patients.items():
        for _ in range(n):
            for v in range(views):
                png(root / label / f"patient{pid:04d}_{v}.png", (pid * 7 + v) % 256)
            pid += 1
    return root


def groups_by_side(datapath: Path) -> tuple[set[str], set[str]]:
    """Patients of each side, read from the index files themselves (file-name prefixes)."""
    sides = []
    for name in ("train", "test"):
        index = json.loads((datapath / f"{name}.json").read_text())
        paths = index if isinstance(index, dict) else [e["image_path"] for e in index]
        sides.append({group_of(Path(p))[0] for p in paths})
    return sides[0], sides[1]


def synthetic_scan(per_class: dict[str, int], sizes=(1, 2, 3)) -> ScanResult:
    """An in-memory scan (no files): patients of 1-3 images each, imbalanced classes."""
    samples, pid = [], 0
    for label, n_patients in per_class.items():
        for i in range(n_patients):
            for v in range(sizes[i % len(sizes)]):
                samples.append(Sample(f"/data/{label}/patient{pid}_{v}.png", label,
                                      f"patient{pid}"))
            pid += 1
    counts = Counter(s.label for s in samples)
    return ScanResult("/data", "class_folders", "diagnosis", "2D", "png", sorted(counts),
                      dict(counts), samples, "filename prefix", False)


# ----------------------------------------------------------------------------- leakage

def test_diagnosis_split_keeps_each_patients_images_together(tmp_path):
    data = class_folders(tmp_path / "data", {"normal": 12, "pneumonia": 9}, views=3)
    ws = JobWorkspace(tmp_path / "job").ensure()
    out = write_diagnosis_index(scan_folder(data), ws.datapath, 0.3, seed=5)
    train, test = groups_by_side(ws.datapath)
    assert train and test and not train & test
    assert out["num_train"] + out["num_test"] == 63  # nothing lost without caps
    split = json.loads((ws.datapath / "split.json").read_text())
    assert split["grouping_key"] == "filename prefix" and split["seed"] == 5
    assert set(split["train_groups"]) == train and set(split["test_groups"]) == test
    assert split["counts"]["test"] == {"normal": 12, "pneumonia": 9}  # 4 + 3 patients x 3
    assert check_diagnosis_index(ws).ok


def test_segmentation_list_index_keeps_patients_together(tmp_path):
    data = tmp_path / "seg"
    for pid in range(8):
        for visit in range(3):  # three studies of each patient
            name = f"patient{pid:02d}_visit{visit}.png"
            png(data / "images" / name, 40 + pid)
            mask = np.zeros((8, 8), np.uint8)
            mask[2:5, 2:5] = 1
            (data / "masks").mkdir(parents=True, exist_ok=True)
            Image.fromarray(mask).save(data / "masks" / name)
    (data / "labels.json").write_text(json.dumps(["lesion"]))
    scan = scan_folder(data)
    assert scan.task == "segmentation" and len(scan.samples) == 24
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_list_index(scan, ws.datapath, "segmentation", 0.25, seed=1)
    train, test = groups_by_side(ws.datapath)
    assert len(train) == 6 and len(test) == 2 and not train & test
    assert check_list_index(ws, "segmentation").ok


# ----------------------------------------------------------------------------- caps

@pytest.mark.parametrize("sentence,expected", [
    ("Use at most 1000 samples for training and 200 for testing, keep classes balanced.",
     {"train": 1000, "test": 200, "total": None, "per_class": None, "balanced": True}),
    ("Chest X-rays from 300 patients. At most 500 images.",
     {"train": None, "test": None, "total": 500, "per_class": None, "balanced": False}),
    ("Three classes; max 50 per class.",
     {"train": None, "test": None, "total": None, "per_class": 50, "balanced": False}),
    ("Balanced classes.",
     {"train": None, "test": None, "total": None, "per_class": None, "balanced": True}),
    ("5,000 images from 1,200 patients in 3 classes; the classes are imbalanced.",
     {"train": None, "test": None, "total": None, "per_class": None, "balanced": False}),
    ("Sample the classes in a balanced way or use class weights.",
     {"train": None, "test": None, "total": None, "per_class": None, "balanced": False}),
])
def test_caps_parsed_from_datacard_sentences(sentence, expected):
    caps = parse_caps(sentence)
    assert {k: v for k, v in caps.to_json().items() if k != "from"} == expected
    for source in caps.sources:  # each cap remembers the sentence it came from
        assert source["sentence"] in sentence


def test_train_and_test_caps_with_balance_pick_whole_patients(tmp_path):
    scan = synthetic_scan({"a": 60, "b": 25, "c": 12})  # 120 / 50 / 24 images
    sentence = "Use at most 60 samples for training and 15 for testing, keep classes balanced."
    out = write_diagnosis_index(scan, tmp_path, caps=sentence)
    split = json.loads((tmp_path / "split.json").read_text())
    train_counts, test_counts = split["counts"]["train"], split["counts"]["test"]
    assert out["num_train"] <= 60 and out["num_test"] <= 15
    assert set(train_counts) == set(test_counts) == {"a", "b", "c"}
    assert max(train_counts.values()) <= 20 and max(test_counts.values()) <= 5  # 60/3, 15/3
    for counts in (train_counts, test_counts):  # balanced, up to one patient's images
        assert max(counts.values()) - min(counts.values()) <= 2 and min(counts.values()) >= 1
    assert min(train_counts.values()) >= 18  # the training cap binds: ~60 / 3 per class
    assert not set(split["train_groups"]) & set(split["test_groups"])
    for group in split["train_groups"] + split["test_groups"]:  # whole patients only
        members = [s for s in scan.samples if s.group == group]
        assert all(split["groups"].get(s.image) == group for s in members)
    caps = split["caps"]
    assert caps["train"] == 60 and caps["test"] == 15 and caps["balanced"]
    assert {c["sentence"] for c in caps["from"]} == {sentence.rstrip(".")}
    assert caps["images_left_out"] == len(scan.samples) - out["num_train"] - out["num_test"]
    assert split["num_images"] == {"train": out["num_train"], "test": out["num_test"]}


@pytest.mark.parametrize("sentence,check", [
    ("At most 60 images.", lambda tr, te: sum(tr.values()) + sum(te.values()) <= 60),
    ("Max 10 per class.",
     lambda tr, te: all(tr.get(c, 0) + te.get(c, 0) <= 10 for c in "abc")),
    ("Balanced classes.", lambda tr, te: max(tr.values()) - min(tr.values()) <= 2 and
     max(te.values()) - min(te.values()) <= 2),
])
def test_total_per_class_and_balance_caps(tmp_path, sentence, check):
    scan = synthetic_scan({"a": 60, "b": 25, "c": 12})
    write_diagnosis_index(scan, tmp_path, caps=sentence)
    split = json.loads((tmp_path / "split.json").read_text())
    train, test = split["counts"]["train"], split["counts"]["test"]
    assert check(train, test), (train, test)
    assert set(train) == {"a", "b", "c"} and set(test) == {"a", "b", "c"}
    assert sum(train.values()) + sum(test.values()) < len(scan.samples)  # caps did bind


def test_caps_that_leave_a_side_empty_are_refused(tmp_path):
    with pytest.raises(IndexBuildError, match="each side needs at least one"):
        write_diagnosis_index(synthetic_scan({"a": 4, "b": 4}, sizes=(3,)), tmp_path,
                              caps="use at most 2 images for testing")


def test_multi_label_split_stratifies_by_rarest_label(tmp_path):
    samples = []
    for pid in range(40):
        labels = ["Effusion"] if pid % 2 else []
        if pid % 10 == 0:
            labels = ["Effusion", "Hernia"]  # the rare label: 4 patients
        for v in range(2):
            samples.append(Sample(f"/d/{pid}_{v}.png", labels[0] if labels else "(none)",
                                  f"p{pid}", "", list(labels)))
    scan = ScanResult("/d", "label_table", "diagnosis", "2D", "png", ["Effusion", "Hernia"],
                      {"Effusion": 48, "Hernia": 8}, samples, "table column 'Patient ID'", False)
    split = make_split(scan, 0.25, seed=3)
    hernia_test = {s.group for s in split.test if "Hernia" in s.label_list()}
    hernia_train = {s.group for s in split.train if "Hernia" in s.label_list()}
    assert hernia_test and hernia_train  # the rare label reaches both sides
    assert not {s.group for s in split.train} & {s.group for s in split.test}


# ----------------------------------------------------------------------------- determinism

def test_same_seed_same_split_other_seed_other_split(tmp_path):
    scan = synthetic_scan({"a": 30, "b": 30})
    caps = "use at most 40 samples for training and 12 for testing, keep classes balanced"
    texts = []
    for run, seed in enumerate((7, 7, 8)):
        write_diagnosis_index(scan, tmp_path / str(run), seed=seed, caps=caps)
        texts.append({name: (tmp_path / str(run) / name).read_text()
                      for name in ("train.json", "test.json", "split.json")})
    assert texts[0] == texts[1]
    assert texts[0]["test.json"] != texts[2]["test.json"]


def test_existing_split_kept_val_merged_and_dataset_leak_removed(tmp_path):
    data = tmp_path / "data"
    for base, split in ((0, "train"), (10, "val"), (20, "test")):
        for offset, label in ((0, "a"), (5, "b")):
            for pid in range(3):
                png(data / split / label / f"patient{base + offset + pid}_0.png", pid)
    png(data / "train" / "a" / "patient20_5.png", 99)  # patient20 is also in test/: a leak
    scan = scan_folder(data)
    assert scan.existing_split
    ws = JobWorkspace(tmp_path / "job").ensure()
    out = write_diagnosis_index(scan, ws.datapath)
    split = json.loads((ws.datapath / "split.json").read_text())
    assert split["method"] == "kept_from_dataset" and split["val_merged_into_train"] == 6
    assert "val/ images were merged into training" in split["note"]
    assert split["left_out_for_leakage"]["groups"] == ["patient20"]
    assert out["num_train"] == 12 and out["num_test"] == 6
    assert check_diagnosis_index(ws).ok


# ----------------------------------------------------------------------------- gate

def test_gate_catches_a_planted_leak_in_a_diagnosis_index(tmp_path):
    data = class_folders(tmp_path / "data", {"normal": 6, "covid": 6}, views=2)
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_diagnosis_index(scan_folder(data), ws.datapath)
    assert check_diagnosis_index(ws).ok
    train = json.loads((ws.datapath / "train.json").read_text())
    test = json.loads((ws.datapath / "test.json").read_text())
    moved = sorted(test)[0]  # one image of a test patient goes to training
    train[moved] = test.pop(moved)
    (ws.datapath / "train.json").write_text(json.dumps(train))
    (ws.datapath / "test.json").write_text(json.dumps(test))
    gate = check_diagnosis_index(ws)  # split.json's group lists still look clean
    patient = group_of(Path(moved))[0]
    assert not gate.ok and "patients/groups are in both train and test" in gate.message()
    assert f"e.g. {patient}:" in gate.message() and moved in gate.message()
    split = json.loads((ws.datapath / "split.json").read_text())
    del split["groups"]  # without the recorded groups the file-name prefix still tells
    (ws.datapath / "split.json").write_text(json.dumps(split))
    assert f"e.g. {patient}:" in check_diagnosis_index(ws).message()


def test_gate_catches_a_planted_leak_in_a_list_index(tmp_path):
    data = tmp_path / "reports"
    rows = ["image,findings,impression"]
    for pid in range(6):
        for v in range(2):
            name = f"patient{pid}_{v}.png"
            png(data / "images" / name, pid * 10 + v)
            rows.append(f"images/{name},finding {pid} {v},impression {pid}")
    (data / "reports.csv").write_text("\n".join(rows) + "\n")
    scan = scan_folder(data)
    assert scan.task == "report_generation"
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_list_index(scan, ws.datapath, "report_generation", 0.34, seed=2)
    assert check_list_index(ws, "report_generation").ok
    train = json.loads((ws.datapath / "train.json").read_text())
    test = json.loads((ws.datapath / "test.json").read_text())
    train.append(test.pop(0))
    (ws.datapath / "train.json").write_text(json.dumps(train))
    (ws.datapath / "test.json").write_text(json.dumps(test))
    message = check_list_index(ws, "report_generation").message()
    assert "patients/groups are in both train and test" in message
    assert Path(train[-1]["image_path"]).name in message


# ----------------------------------------------------------------------------- bounds

def test_inspect_preview_is_at_most_8_kb_for_a_huge_scan():
    from tools.data_engineer import MAX_PREVIEW_BYTES, bounded
    classes = [f"finding_{i:04d}_" + "x" * 40 for i in range(3000)]
    samples = [Sample(f"/data/images/{i:08d}_" + "y" * 120 + ".png", classes[i % 3000],
                      f"p{i // 3}", extra={"findings": "z" * 5000}) for i in range(100_000)]
    scan = ScanResult("/data", "label_table", "diagnosis", "2D", "png", classes,
                      {c: 33 for c in classes}, samples, "table column 'Patient ID'", False,
                      skipped=[f"/data/junk/{i}_" + "q" * 300 for i in range(50_000)],
                      num_files=150_000, details={"columns": classes, "note": "n" * 20_000})
    raw = scan.summary()
    assert len(json.dumps(raw)) > 100_000
    preview = bounded(raw)
    text = json.dumps({"ok": True, "scan": preview})
    assert len(text) <= MAX_PREVIEW_BYTES + 100  # the tool's own wrapper adds a few bytes
    assert preview["truncated"] and preview["num_samples"] == 100_000
    assert preview["layout"] == "label_table" and preview["num_skipped"] == 50_000
    assert any("more" in str(v) for v in preview["classes"])  # says what was left out
