"""Datasets stored as arrays: MedMNIST-style .npz files (one sample per element, referenced as
``file.npz::key[i]``), ADNI-like .pt volumes + CSV, KneeMRI-like pickled .pck volumes + CSV
(flagged: registration needs the datacard's allow_pickle). Tiny synthetic files."""
from __future__ import annotations

import csv
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from core.datasets.datacards import load_datacard
from core.jobs.gates import check_diagnosis_index
from core.datasets.indexing import write_diagnosis_index
from core.datasets.layouts.array_headers import array_shape, dimension_of_shape
from core.datasets.layouts.arrays import element_ref_ok, pickle_check
from core.datasets.registration import register_dataset
from core.datasets.layouts.dispatch import scan_folder
from core.jobs.workspace import JobWorkspace
from tests.conftest import tree_digest

CARDS = Path(__file__).resolve().parent.parent / "datacards"
REF = re.compile(r"^(?P<file>/.+\.npz)::(?P<key>\w+)\[(?P<index>\d+)\]$")


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def medmnist(path: Path, sizes=(("train", 10), ("val", 4), ("test", 6)), shape=(28, 28),
             multi: int = 0, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in sizes:
        arrays[f"{split}_images"] = rng.integers(0, 255, (n, *shape), dtype=np.uint8)
        arrays[f"{split}_labels"] = (rng.integers(0, 2, (n, multi)) if multi else
                                     (np.arange(n) % 2).reshape(n, 1)).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def index_ok(scan, tmp_path: Path) -> tuple[dict, Path]:
    ws = JobWorkspace(tmp_path / "job").ensure()
    summary = write_diagnosis_index(scan, ws.datapath)
    gate = check_diagnosis_index(ws)
    assert gate.ok, gate.message()
    return summary, ws.datapath


def check_refs(scan) -> None:
    """Every reference is well formed and names an existing array and an index inside it."""
    opened: dict[str, np.lib.npyio.NpzFile] = {}
    for sample in scan.samples:
        match = REF.match(sample.image)
        assert match, sample.image
        data = opened.setdefault(match["file"], np.load(match["file"]))
        assert match["key"] in data.files
        assert int(match["index"]) < data[match["key"]].shape[0]
        assert element_ref_ok(sample.image)
    for data in opened.values():
        data.close()


# --------------------------------------------------------------------------- .npz
def test_medmnist_npz_keeps_its_split_and_names_codes(tmp_path):
    data = tmp_path / "pneumoniamnist"
    npz = medmnist(data / "pneumoniamnist.npz")
    before = tree_digest(data)
    scan = scan_folder(data, "PneumoniaMNIST chest X-rays. Labels: 0: normal, 1: pneumonia.")
    assert scan.layout == "array_npz" and scan.file_format == "npz" and scan.dimension == "2D"
    assert scan.classes == ["normal", "pneumonia"] and len(scan.samples) == 20
    assert scan.existing_split and scan.class_counts == {"normal": 10, "pneumonia": 10}
    assert scan.samples[0].image == f"{npz}::train_images[0]"
    assert {s.split for s in scan.samples} == {"train", "val", "test"}
    check_refs(scan)
    with np.load(npz) as arrays:  # each sample's label is its element's label
        for sample in scan.samples:
            match = REF.match(sample.image)
            key = match["key"].replace("_images", "_labels")
            code = int(arrays[key][int(match["index"])][0])
            assert sample.label == ["normal", "pneumonia"][code]
    summary, datapath = index_ok(scan, tmp_path)
    assert summary["split_method"] == "kept_from_dataset"
    assert (summary["num_train"], summary["num_test"]) == (14, 6)
    test = json.loads((datapath / "test.json").read_text())
    assert all("::test_images[" in key for key in test)
    assert tree_digest(data) == before
    assert not element_ref_ok(f"{npz}::test_images[6]")   # out of bounds
    assert not element_ref_ok(f"{npz}::nope[0]")


def test_npz_without_a_mapping_keeps_codes_and_3d_and_multi_label(tmp_path):
    plain = scan_folder(medmnist(tmp_path / "a" / "x.npz").parent)
    assert plain.classes == ["0", "1"]
    volumes = scan_folder(medmnist(tmp_path / "b" / "organmnist3d.npz", shape=(8, 8, 8)).parent)
    assert volumes.dimension == "3D"
    rgb = scan_folder(medmnist(tmp_path / "c" / "derma.npz", shape=(28, 28, 3)).parent)
    assert rgb.dimension == "2D"
    multi = scan_folder(medmnist(tmp_path / "d" / "chestmnist.npz", multi=3).parent,
                        "0: atelectasis, 1: cardiomegaly, 2: effusion")
    assert multi.details["multi_label"] and multi.classes == ["atelectasis", "cardiomegaly",
                                                             "effusion"]
    with np.load(tmp_path / "d" / "chestmnist.npz") as arrays:
        row = arrays["train_labels"][3]
    expected = [n for n, v in zip(multi.classes, row) if v]
    assert multi.samples[3].labels == expected
    check_refs(multi)
    index_ok(multi, tmp_path / "multi")


def test_split_npz_files_and_x_y_keys(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 8), ("test", 4)):
        np.savez(data / f"scans_{split}.npz", x=rng.random((n, 16, 16)),
                 y=np.arange(n) % 2)
    scan = scan_folder(data)
    assert scan.existing_split and len(scan.samples) == 12
    assert all(s.split == ("test" if "scans_test" in s.image else "train") for s in scan.samples)
    check_refs(scan)


# --------------------------------------------------------------------------- volumes + table
def test_adni_like_pt_volumes_with_a_table(tmp_path):
    data = tmp_path / "ADNI"
    rows = []
    for i in range(9):
        (data / "tensors").mkdir(parents=True, exist_ok=True)
        torch.save(torch.rand(6, 7, 5), data / "tensors" / f"I{1000 + i}.pt")
        rows.append({"Image Data ID": f"I{1000 + i}", "Subject": f"S{i // 2}",
                     "Group": ["AD", "MCI", "CN"][i % 3], "Sex": "F" if i % 2 else "M",
                     "Age": 70 + i})
    rows.append({"Image Data ID": "I5555", "Subject": "S9", "Group": "AD", "Sex": "F",
                 "Age": 80})
    write_csv(data / "ADNI1_Screening.csv", rows)
    description = json.loads((CARDS / "ADNI.json").read_text())["dataset description"]
    scan = scan_folder(data, description)
    assert scan.layout == "label_table" and scan.file_format == "pt" and scan.dimension == "3D"
    assert scan.details["element_shape"] == [6, 7, 5] and not scan.details["needs_pickle"]
    assert scan.details["label_column"] == "Group"
    assert sorted(scan.classes) == ["AD", "CN", "MCI"]
    assert scan.group_source == "table column 'Subject'"
    assert any("'I5555' names no image file" in s for s in scan.skipped)
    assert all(Path(s.image).suffix == ".pt" and Path(s.image).is_file() for s in scan.samples)
    index_ok(scan, tmp_path)


def knee_folder(root: Path) -> Path:
    rows = []
    for i in range(9):
        volume = np.random.default_rng(i).random((5, 12, 12)).astype(np.float32)
        path = root / "volumes" / f"{100 + i}-{i}.pck"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(volume, protocol=2))
        rows.append({"examId": 100 + i, "seriesNo": i, "aclDiagnosis": i % 3, "kneeLR": i % 2,
                     "roiX": 10 + i, "volumeFilename": f"{100 + i}-{i}.pck"})
    write_csv(root / "metadata.csv", rows)
    return root


def test_kneemri_like_pickles_are_recognised_but_flagged(tmp_path):
    data = knee_folder(tmp_path / "KneeMRI")
    description = json.loads((CARDS / "KneeMRI.json").read_text())["dataset description"]
    scan = scan_folder(data, description)
    assert scan.layout == "label_table" and scan.file_format == "pck" and scan.dimension == "3D"
    assert scan.details["needs_pickle"] is True and "runs code" in scan.details["warning"]
    assert scan.details["label_column"] == "aclDiagnosis"
    assert scan.classes == ["healthy ligament", "partial tear", "complete rupture"]
    assert scan.class_counts == {"healthy ligament": 3, "partial tear": 3, "complete rupture": 3}
    errors, _ = pickle_check(scan, allow_pickle=False)
    assert errors and "allow_pickle" in errors[0]
    assert pickle_check(scan, allow_pickle=True) == ([], [scan.details["warning"]])
    index_ok(scan, tmp_path)


def test_registration_of_pickles_needs_allow_pickle(tmp_path, settings, store):
    data = knee_folder(tmp_path / "KneeMRI")
    refused = register_dataset(settings, store, str(data), "Knee test", "knee MRI, ACL")
    assert refused["status"] == "invalid"
    assert any("allow_pickle" in e for e in refused["errors"])
    allowed = register_dataset(settings, store, str(data), "Knee test", "knee MRI, ACL",
                               allow_pickle=True)
    assert allowed["status"] == "registered", allowed
    assert any("runs code" in w for w in allowed["warnings"])
    card = load_datacard(allowed["datacard_path"])
    assert card.allow_pickle and card.file_format == "pck" and card.dimension == "3D"


def test_shapes_are_read_without_running_pickled_code(tmp_path):
    class Payload:
        def __reduce__(self):
            return (print, ("this must never run",))
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"volume": Payload()}))
    assert array_shape(evil) == (None, True)
    npy = tmp_path / "v.npy"
    np.save(npy, np.zeros((1, 9, 10, 11), np.float32))
    assert array_shape(npy) == ((1, 9, 10, 11), False)
    assert [dimension_of_shape(s) for s in [(28, 28), (3, 64, 64), (64, 64, 1), (32, 64, 64),
                                            (1, 9, 10, 11)]] == ["2D", "2D", "2D", "3D", "3D"]


@pytest.mark.parametrize("suffix", [".npy", ".pt"])
def test_per_sample_arrays_named_by_stem(tmp_path, suffix):
    data = tmp_path / "data"
    (data / "arrays").mkdir(parents=True)
    rows = []
    for i in range(6):
        path = data / "arrays" / f"case{i}{suffix}"
        array = np.zeros((32, 32), np.float32) + i
        np.save(path, array) if suffix == ".npy" else torch.save(torch.from_numpy(array), path)
        rows.append({"case": f"case{i}", "label": "tumour" if i % 2 else "normal"})
    write_csv(data / "labels.csv", rows)
    scan = scan_folder(data)
    assert scan.dimension == "2D" and scan.file_format == suffix[1:]
    assert scan.classes == ["normal", "tumour"] and len(scan.samples) == 6
    index_ok(scan, tmp_path)


def test_allow_pickle_reaches_the_dataloader_config(tmp_path, settings, store):
    """Registered with allow_pickle, the KneeMRI-like set is indexed by the Data Engineer's tool
    and the Module Architect writes ALLOW_PICKLE = True into the dataloader's CONFIG."""
    from tools.context import JobContext
    from tools.data_engineer import BuildIndex
    from tools.module_architect import WriteDataloader
    data = knee_folder(tmp_path / "KneeMRI")
    description = json.loads((CARDS / "KneeMRI.json").read_text())["dataset description"]
    result = register_dataset(settings, store, str(data), "Knee pickles", description,
                              allow_pickle=True)
    assert result["status"] == "registered", result
    ctx = JobContext(settings, store, "job-knee", "classify ACL tears in knee MRI")
    ws = ctx.workspace.ensure()
    ws.plan.write_text(json.dumps({
        "status": "ready", "dataset": "Knee pickles", "dataset_path": str(data),
        "task": "diagnosis", "template": "diagnosis", "model": "densenet_small",
        "device": "cpu", "dimension": "3D", "file_format": "pck", "modality": "MRI",
        "anatomy": "knee", "time_budget_s": 600}))
    built = BuildIndex(ctx=ctx, role="Data Engineer").call()
    assert built["ok"], built
    train = json.loads((ws.datapath / "train.json").read_text())
    assert all(key.endswith(".pck") for key in train)
    written = WriteDataloader(ctx=ctx, role="Module Architect").call(image_size=[8, 16, 16])
    assert written["ok"], written
    assert "ALLOW_PICKLE = True" in ws.dataloader.read_text()
