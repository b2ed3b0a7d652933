"""M3Bench-lite: the 14 generated datasets follow the real collections' layouts, decode, are
seeded, and carry datacards the catalogue accepts and the Task Manager can tell apart; (slow)
every one registers and indexes as the dataset it is; (slow) ``python -m crew bench`` runs one
dataset end to end through the crew and reports it paper-style."""
from __future__ import annotations

import csv
import hashlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image

from bench.m3bench_lite import DATASETS, FAMILIES, Floor, generate, select
from core.datasets.datacards import parse_datacard
from core.planning.matching import parse_request, rank_datacards

ROOT = Path(__file__).resolve().parent.parent
TINY = 0.05          # the smallest size every generator allows (keeps each layout complete)
BY_FOLDER = {d.folder: d for d in DATASETS}


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("m3bench-tiny")
    generate(data, scale=TINY, suite="paper")
    return data


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _nifti(path: Path) -> nib.Nifti1Image:
    img = nib.load(path)
    assert np.isfinite(img.get_fdata()).all(), path
    return img


def _check_pairs(images: list[Path], mask_of, labels: list[str]) -> None:
    assert images
    with_foreground = 0
    for image in images:
        mask_path = mask_of(image)
        if image.suffix == ".png":
            pixels, mask = np.asarray(Image.open(image)), np.asarray(Image.open(mask_path))
            assert pixels.shape == mask.shape
        else:
            img, seg = _nifti(image), _nifti(mask_path)
            assert img.shape == seg.shape and np.allclose(img.affine, seg.affine)
            mask = np.asarray(seg.dataobj)
        assert set(np.unique(mask)) <= set(range(len(labels) + 1)), mask_path
        with_foreground += bool(mask.any())
    assert with_foreground >= len(images) / 2


def test_all_14_layouts_are_written_as_the_real_collections_lay_them_out(tiny):
    assert sorted(p.name for p in tiny.iterdir()) == sorted(BY_FOLDER)
    # ADNI: .pt tensors named by 'Image Data ID' + one collection CSV; several visits a subject
    import torch
    rows = _rows(tiny / "ADNI" / "ADNI1_Complete_1Yr_1.5T.csv")
    assert {"Image Data ID", "Subject", "Group"} <= set(rows[0])
    assert {r["Group"] for r in rows} == {"AD", "MCI", "CN"}
    assert len({r["Subject"] for r in rows}) < len(rows)
    for r in rows:
        tensor = torch.load(tiny / "ADNI" / "tensors" / f"{r['Image Data ID']}.pt",
                            weights_only=True)
        assert tensor.ndim == 3 and tensor.dtype == torch.float32
    # KneeMRI: pickled uint16 volumes + metadata.csv with integer ACL codes
    rows = _rows(tiny / "KneeMRI" / "metadata.csv")
    assert {r["aclDiagnosis"] for r in rows} == {"0", "1", "2"}
    for r in rows:
        with open(tiny / "KneeMRI" / "volumes" / r["volumeFilename"], "rb") as handle:
            volume = pickle.load(handle)
        assert volume.dtype == np.uint16 and volume.ndim == 3
    # CC-CCII: class / patient / scan / slices
    scans = sorted(tiny.glob("CC-CCII/*/*/*"))
    assert {p.parts[-3] for p in scans} == {"NCP", "CP", "Normal"}
    assert all(len(list(s.glob("*.png"))) == 16 for s in scans)
    assert Image.open(next(scans[0].glob("*.png"))).mode == "L"
    # CT-Kidney: four class folders of RGB JPEGs named "<Class>- (k).jpg"
    for kind in ("Cyst", "Normal", "Stone", "Tumor"):
        with Image.open(tiny / "CT-Kidney" / kind / f"{kind}- (1).jpg") as img:
            assert img.format == "JPEG" and img.mode == "RGB"
    # image + mask folders with labels.json
    for folder, image_dir, mask_dir, rename in [
            ("COVID19", "images", "segmentation_masks", lambda n: n),
            ("INSTANCE2022", "images", "masks", lambda n: n),
            ("MSD_Pancreas", "images", "masks", lambda n: n),
            ("ChestX-Det10", "images", "masks", lambda n: n),
            ("VerSe", "images", "masks", lambda n: n.replace("_ct.", "_seg-vert_msk.")),
            ("L2R-OASIS", "images", "masks", lambda n: n),
            ("BTCV", "Training/img", "Training/label", lambda n: n.replace("img", "label"))]:
        labels = json.loads((tiny / folder / "labels.json").read_text())
        assert labels == list(BY_FOLDER[folder].classes)
        images = sorted((tiny / folder / image_dir).iterdir())
        _check_pairs(images, lambda p: tiny / folder / mask_dir / rename(p.name), labels)
    assert len(json.loads((tiny / "MSD_Pancreas" / "labels.json").read_text())) == 2
    assert list((tiny / "BTCV" / "Testing" / "img").glob("img*.nii.gz"))
    assert not (tiny / "BTCV" / "Testing" / "label").exists()
    # CT-RATE: nested patient / scan / reconstruction folders + train/test JSON lists
    for name in ("train.json", "test.json"):
        entries = json.loads((tiny / "CT-RATE" / name).read_text())
        assert entries and set(entries[0]) == {"image_path", "finding", "impression"}
        for e in entries:
            assert len(Path(e["image_path"]).parts) == 5
            _nifti(tiny / "CT-RATE" / e["image_path"])
    # RadGenome-Brain: images/ + reports_train.json / reports_test.json
    for name in ("reports_train.json", "reports_test.json"):
        for e in json.loads((tiny / "RadGenome-Brain" / name).read_text()):
            _nifti(tiny / "RadGenome-Brain" / "images" / e["image"])
            assert e["finding"] and e["impression"]
    # IU-Xray: one CSV, two views per study sharing the report
    rows = _rows(tiny / "IU-Xray" / "indiana_reports.csv")
    assert {"uid", "filename", "findings", "impression"} <= set(rows[0])
    assert {r["projection"] for r in rows} == {"Frontal", "Lateral"}
    for r in rows:
        with Image.open(tiny / "IU-Xray" / "images" / "images_normalized" / r["filename"]) as img:
            img.load()


def test_generation_is_seeded_and_idempotent(tiny, tmp_path):
    again = tmp_path / "again"
    generate(again, only="ADNI,KneeMRI,COVID19,VerSe,BTCV,CT-RATE,IU-Xray", scale=TINY)
    for folder in ("ADNI", "KneeMRI", "COVID19", "VerSe", "BTCV", "CT-RATE", "IU-Xray"):
        assert _digest(again / folder) == _digest(tiny / folder), folder
    before = {p: p.stat().st_mtime_ns for p in (again / "VerSe").rglob("*")}
    generate(again, only="VerSe", scale=TINY)                    # complete: left alone
    assert {p: p.stat().st_mtime_ns for p in (again / "VerSe").rglob("*")} == before
    other = tmp_path / "user_data" / "VerSe"
    other.mkdir(parents=True)
    (other / "mine.txt").write_text("not generated")
    with pytest.raises(RuntimeError, match="not written by the M3Bench-lite generator"):
        generate(tmp_path / "user_data", only="VerSe", scale=TINY)
    assert (other / "mine.txt").read_text() == "not generated"


def test_datacards_validate_and_the_task_manager_tells_the_26_apart(tiny, tmp_path):
    cards = []
    for d in DATASETS:
        card = d.datacard(tiny / d.folder)
        assert card.tasks == [d.task] and card.available()
        assert parse_datacard(card.to_json_dict()).name == d.name
        # registration drafts modality and anatomy from the name and description
        intent = parse_request(f"{d.name} {d.description}")
        assert (intent.modality, intent.anatomy) == (d.modality, d.anatomy), d.name
        cards.append((card, True))
    # the layout families are registered beside them (an Alzheimer MRI set beside ADNI, a
    # chest X-ray report set beside IU-Xray): every request still finds its own dataset
    cards += [(d.datacard(tmp_path / d.folder), True) for d in FAMILIES]
    for d in DATASETS + FAMILIES:
        ranking = rank_datacards(d.request, cards)
        assert ranking["chosen"] == d.name, (d.request, ranking["explanation"])
    knee = next(d for d in DATASETS if d.paper_name == "KneeMRI").description
    assert "0 = healthy, 1 = partial tear, 2 = complete rupture" in knee
    assert "at most" in knee


def test_floors_and_selection():
    assert Floor("auc", ">=", 0.75).passed({"auc": 0.75})
    assert not Floor("auc", ">=", 0.75).passed({"auc": 0.7499})
    assert not Floor("dice", ">=", 0.5).passed({"dice": float("nan")})
    assert not Floor("dice", ">=", 0.5).passed({})
    rouge = Floor("rouge_l", ">", reference="baseline_rouge_l")
    assert rouge.passed({"rouge_l": 0.5, "baseline_rouge_l": 0.4})
    assert not rouge.passed({"rouge_l": 0.4, "baseline_rouge_l": 0.4})
    assert [d.paper_name for d in select("adni, BTCV-lite,msd_pancreas")] == \
        ["ADNI", "MSD Pancreas", "BTCV"]
    with pytest.raises(ValueError, match="no M3Bench-lite dataset"):
        select("LIDC")


# --------------------------------------------------------------------------------- slow
def _true_patient(folder: str, image: str, data: Path) -> str | None:
    """The patient each generated image belongs to, from the generator's own layout."""
    rel = Path(image).relative_to(data / folder)
    if folder == "ADNI":
        rows = _rows(data / "ADNI" / "ADNI1_Complete_1Yr_1.5T.csv")
        return {r["Image Data ID"]: r["Subject"] for r in rows}[rel.name.split(".")[0]]
    if folder == "CC-CCII":
        return rel.parts[1]
    if folder == "CT-RATE":
        return rel.parts[2]
    if folder == "IU-Xray":
        return rel.name.split("_")[0]
    return None


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("m3bench-small")
    generate(data, scale=0.3, suite="paper")
    return data


@pytest.mark.slow
@pytest.mark.parametrize("dataset", DATASETS, ids=[d.folder for d in DATASETS])
def test_registers_and_indexes_as_the_dataset_it_is(dataset, small, settings, store, tmp_path):
    from core.datasets.registration import register_dataset
    from core.datasets.layouts.dispatch import scan_folder
    from core.datasets.indexing import write_index
    from core.planning.tasks import check_index, template_for
    from core.jobs.workspace import JobWorkspace

    folder = small / dataset.folder
    before = _digest(folder)
    trust = {"allow_pickle": True} if dataset.allow_pickle else {}
    result = register_dataset(settings, store, str(folder), dataset.name, dataset.description,
                              **trust)
    assert result["status"] == "registered", result["errors"]
    accepted = {"segmentation", "anomaly_detection"} if dataset.template == "segmentation" \
        else {dataset.task}
    assert result["task"] in accepted, f"registered as {result['task']}"
    scan = scan_folder(folder, dataset.description)
    template = template_for(dataset.task, scan.layout)
    assert template == dataset.template, f"layout {scan.layout} -> template {template}"
    if dataset.classes:
        assert sorted(scan.classes) == sorted(dataset.classes)
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_index(scan, ws.datapath, template, 0.2, 42, True, caps=dataset.description)
    gate = check_index(ws, template)
    assert gate.ok, gate.message()
    sides = []
    for name in ("train.json", "test.json"):
        index = json.loads((ws.datapath / name).read_text())
        images = list(index) if isinstance(index, dict) else [e["image_path"] for e in index]
        sides.append({_true_patient(dataset.folder, str(i), small) for i in images
                      if isinstance(i, str)} - {None})
    assert not sides[0] & sides[1], f"patients on both sides: {sorted(sides[0] & sides[1])[:5]}"
    assert _digest(folder) == before


@pytest.mark.slow
def test_bench_command_runs_one_dataset_through_the_crew(tmp_path):
    """The bench command: its suite generated and registered (the 12 layout families, the
    quickest part), one dataset run through the crew to its floor, the table and JSON."""
    home, out = tmp_path / "home", tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "crew", "bench", "--suite", "layout-families", "--only",
         "medmnist_npz", "--runs", "1", "--home", str(home), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["llm"] == "autopilot" and results["suite"] == "layout-families"
    [entry] = results["datasets"]
    assert entry["name"] == "BreastMNIST ultrasound" and entry["error"] is None
    [record] = entry["runs"]
    assert record["status"] == "succeeded", record["error"]
    assert record["dataset_chosen"] == "BreastMNIST ultrasound"
    assert record["template"] == "diagnosis"
    assert record["success"] == Floor("auc", ">=", 0.75).passed(record["metrics"])
    assert record["success"], record
    roles = record["roles"]
    assert [roles[r]["actions"] for r in ("Task Manager", "Data Engineer", "Module Architect",
                                          "Model Trainer")] == [3, 2, 2, 3]
    assert all(r["tokens"] == 0 for r in roles.values())      # autopilot: no LLM
    assert roles["Model Trainer"]["seconds"] > roles["Task Manager"]["seconds"]
    assert results["overall"]["success_rate"] == 1.0
    assert "BreastMNIST ultrasound  diagnosis" in run.stdout   # the name column fits the name
    assert "overall success 1/1" in run.stdout
    assert (home / "demo" / "layout_families" / "BreastMNIST" / "breastmnist.npz").exists()
    registered = [line for line in run.stderr.splitlines() if line.startswith("registered ")]
    assert len(registered) == 12, run.stderr[-3000:]     # every family registers


def test_llm_columns_tokens_cost_and_fallback_per_role(settings, store):
    """With an LLM the table gains the paper's cost columns: tokens and (priced models) USD per
    role, and how often a role fell back to autopilot."""
    from core.jobs.lifecycle import create_job
    from crew.bench import format_table, role_stats, summarise

    job_id = create_job(settings, store, "segment the pancreas", llm="openai/gpt-4o")
    for role, tokens, cost in (("Task Manager", 1200, 0.004), ("Data Engineer", 5400, 0.02)):
        store.add_event(job_id, role, "stage", tool="end", seconds=3.0)
        store.add_event(job_id, role, "tool", tool="list_files")
        store.add_event(job_id, role, "llm", tool="llm_call", tokens=tokens, cost=cost)
    store.add_event(job_id, "Data Engineer", "fallback", tool="autopilot", ok=False)
    stats = role_stats(store, job_id)
    assert stats["Task Manager"] == {"actions": 1, "seconds": 3.0, "tokens": 1200,
                                     "cost_usd": 0.004, "fallback": 0}
    assert stats["Data Engineer"]["fallback"] == 1 and stats["Model Trainer"]["tokens"] == 0
    entry = summarise({"name": "MSD-Pancreas", "task": "segmentation", "metric": "dice",
                       "floor": "dice >= 0.5", "runs_planned": 2, "error": None,
                       "runs": [{"run": 1, "success": True, "value": 0.8, "seconds": 60.0,
                                 "roles": stats, "error": None},
                                {"run": 2, "success": False, "value": None, "seconds": 50.0,
                                 "roles": stats, "error": "gate failed"}]})
    assert entry["success_rate"] == 0.5 and entry["roles"]["Data Engineer"]["fallback"] == 1
    table = format_table({"datasets": [entry], "llm": "openai/gpt-4o",
                          "overall": {"successes": 1, "runs": 2, "success_rate": 0.5,
                                      "wall_seconds": 110}})
    assert "5400t $0.020 fb100%" in table and "1200t $0.004" in table
    assert "overall success 1/2 = 50.00% (openai/gpt-4o)" in table
