"""The MONAI segmentation template end to end on the synthetic demos (3D CT organs, 2D X-ray
organs, two-channel MRI lesions): dataloader, check, training as its own process, predictions on
the label's grid, and the system's evaluator (also unit-tested on hand-made masks)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
from PIL import Image

from conftest import channel_metrics, channel_paths
from core.demo.segmentation import (make_ct_organ_demo_3d, make_mri_multichannel_demo_3d,
                                    make_xray_organ_demo_2d)
from core.evaluation.common import EvaluationError
from core.evaluation.segmentation import evaluate_segmentation
from core.training.instantiate import instantiate
from ml_templates.common.entry import load_dataloader

pytestmark = pytest.mark.filterwarnings("ignore:NvImgCodecPydicomReader")
ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "ml_templates" / "segmentation" / "dataloader_template.py"

# CPU-sized settings: CT resampled to 3 mm, 8 patches per case and epoch
CT = {"SPATIAL_DIMS": 3, "PIXDIM": [3.0, 3.0, 3.0], "ROI_SIZE": [32, 32, 16], "IN_CHANNELS": 1,
      "NUM_CLASSES": 3, "INTENSITY": {"kind": "ct", "window": [-160, 240]},
      "SAMPLES_PER_CASE": 12}
XRAY = {"SPATIAL_DIMS": 2, "PIXDIM": None, "ROI_SIZE": [64, 64], "IN_CHANNELS": 1,
        "NUM_CLASSES": 3, "INTENSITY": {"kind": "minmax"}}
MRI = {"SPATIAL_DIMS": 3, "PIXDIM": None, "ROI_SIZE": [32, 32, 16], "IN_CHANNELS": 2,
       "NUM_CLASSES": 2, "INTENSITY": {"kind": "mri"}, "SAMPLES_PER_CASE": 8}


def index_cases(folder: Path, channels: tuple[str, ...] = ()) -> list[dict]:
    """Index entries for a demo folder (masks/<name>; images/<name> or one file per channel)."""
    labels = json.loads((folder / "labels.json").read_text())
    cases = []
    for mask in sorted((folder / "masks").iterdir()):
        if channels:
            stem = mask.name.removesuffix(".nii.gz")
            image = [str(folder / "images" / f"{stem}_{c}.nii.gz") for c in channels]
        else:
            image = str(folder / "images" / mask.name)
        cases.append({"image_path": image, "label_path": str(mask), "labels": labels})
    return cases


def make_datapath(tmp_path: Path, cases: list[dict], n_test: int, config: dict) -> Path:
    datapath = tmp_path / "job" / "Datapath"
    datapath.mkdir(parents=True)
    (datapath / "train.json").write_text(json.dumps(cases[:-n_test]))
    (datapath / "test.json").write_text(json.dumps(cases[-n_test:]))
    instantiate(TEMPLATE, datapath / "dataloader.py", {"DATAPATH": str(datapath), **config})
    return datapath


def run_module(module: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # M3B_HOME: the test's own (conftest)
    run = subprocess.run([sys.executable, "-m", "core.config.launch", module, *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def train_and_evaluate(settings, store, datapath: Path, job_id: str, **overrides) -> dict:
    run_module("ml_templates.segmentation.check_dataloader", "--datapath", str(datapath))
    check = json.loads((datapath / "dataloader_check.json").read_text())
    assert check["failed"] == [] and check["labels_in_range"] and len(check["shapes"]) == 1
    logout = datapath.parent / "Logout"
    config = {"job_id": job_id, **channel_paths(logout),
              "datapath": str(datapath), "dataloader": str(datapath / "dataloader.py"),
              "output_dir": str(logout), "network": "unet_small", "epochs": 10,
              "batch_size": 4, "learning_rate": 1e-2, "seed": 0, "time_budget_s": 100,
              "early_stopping_patience": 0, "device": "cpu", "val_fraction": 0.2,
              "export": False, "logging_steps": 5, **overrides}
    (datapath.parent / "train_config.json").write_text(json.dumps(config))
    started = time.time()
    run_module("ml_templates.segmentation.train", "--config",
               str(datapath.parent / "train_config.json"))
    seconds = time.time() - started
    summary = json.loads((logout / "train_summary.json").read_text())
    assert Path(summary["model_path"]).exists()
    names = {row["name"] for row in channel_metrics(logout)}
    assert {"loss", "learning_rate", "eval_dice", "eval_loss", "eval_selection"} <= names, names
    # the kept epoch is the one with the best Dice (loss as tie-break), and the summary says so
    kept = max(summary["val_history"], key=lambda row: row[1])
    assert summary["epoch_kept"] == kept[0] and f"kept epoch {kept[0]:g}" in summary["selection"]
    report = evaluate_segmentation(datapath, logout / "predictions.json")
    print(f"\n{job_id}: {seconds:.0f} s wall, {summary['global_step']} steps, "
          f"epochs {summary['epochs_run']:.1f}, stop: {summary['stop_reason']}, "
          f"val dice {summary['best_val_metric']}, test {report['metrics']}, "
          f"per class {report['per_class']}")
    return {"report": report, "summary": summary, "logout": logout, "seconds": seconds}


def assert_label_geometry(predictions_path: Path) -> None:
    rows = json.loads(predictions_path.read_text())
    assert rows
    for row in rows:
        pred, label = row["prediction_path"], row["label_path"]
        if label.endswith(".png"):
            assert Image.open(pred).size == Image.open(label).size
            continue
        p, g = nib.load(pred), nib.load(label)
        assert p.shape == g.shape
        np.testing.assert_allclose(p.affine, g.affine, atol=1e-4)


# ----------------------------------------------------------------------------- fast checks
def test_dataloader_patches_and_inversion(tmp_path):
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=3)
    datapath = make_datapath(tmp_path, index_cases(folder), 1, CT)
    dl = load_dataloader(datapath / "dataloader.py")
    patch = dl.SegmentationDataset("train", datapath=str(datapath))[0]
    assert patch["pixel_values"].shape == (1, 32, 32, 16)
    assert patch["labels"].shape == (1, 32, 32, 16) and patch["labels"].dtype == torch.long
    test = dl.SegmentationDataset("test", datapath=str(datapath))
    item = test[0]  # case_002: RAS, resampled from ~1.5 x 1.5 x 2.8 mm to 3 mm
    onehot = torch.nn.functional.one_hot(item["labels"][0].long(), 3).movedim(-1, 0).float()
    back = test.invert(onehot, item["pixel_values"]).argmax(0).numpy()
    truth = np.asarray(nib.load(item["label_path"]).dataobj)
    assert back.shape == truth.shape
    for k in (1, 2):  # resampled to 3 mm and back: only boundary voxels may change
        dice = 2 * ((back == k) & (truth == k)).sum() / ((back == k).sum() + (truth == k).sum())
        assert dice > 0.8, (k, dice)


def test_check_dataloader_reports_config_and_file_errors(tmp_path):
    from ml_templates.segmentation.check_dataloader import check
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=3)
    cases = index_cases(folder)
    cases[1]["image_path"] = str(tmp_path / "missing.nii.gz")
    datapath = make_datapath(tmp_path, cases, 1, {**CT, "NUM_CLASSES": 2})
    report = check(datapath)
    assert report["expected"] == {"train": 2, "test": 1} and report["loaded"]["train"] == 1
    assert report["shapes"] == [[1, 32, 32, 16]] and report["label_values"] == [0, 1, 2]
    assert not report["labels_in_range"]
    failed = "\n".join(report["failed"])
    assert "missing.nii.gz" in failed and "FileNotFoundError" in failed
    assert "outside 0..1" in failed and "NUM_CLASSES = 2" in failed


def _nifti(path: Path, array: np.ndarray, spacing=(1.5, 1.5, 3.0)) -> str:
    nib.save(nib.Nifti1Image(array.astype(np.uint8), np.diag([*spacing, 1.0])), str(path))
    return str(path)


@pytest.fixture
def eval_case(tmp_path):
    truth = np.zeros((20, 20, 8), np.uint8)
    truth[5:15, 5:15, 2:6] = 1
    label = _nifti(tmp_path / "gt.nii.gz", truth)
    (tmp_path / "test.json").write_text(json.dumps(
        [{"image_path": "img.nii.gz", "label_path": label, "labels": ["organ"]}]))

    def predict(array: np.ndarray) -> Path:
        pred = _nifti(tmp_path / "pred.nii.gz", array)
        rows = [{"image_path": "img.nii.gz", "label_path": label, "prediction_path": pred}]
        (tmp_path / "predictions.json").write_text(json.dumps(rows))
        return tmp_path / "predictions.json"
    return truth, predict


def test_evaluator_perfect_and_shifted(tmp_path, eval_case):
    truth, predict = eval_case
    report = evaluate_segmentation(tmp_path, predict(truth))
    assert report["metrics"] == {"dice": 1.0, "hd95": 0.0}
    assert report["task"] == "segmentation"
    assert report["evaluator"] == "core.evaluation.segmentation"
    assert report["num_test"] == 1 and report["per_class"]["organ"]["dice"] == 1.0
    shifted = np.roll(truth, 2, axis=0)  # 2 voxels of 1.5 mm
    report = evaluate_segmentation(tmp_path, predict(shifted))
    assert report["metrics"]["dice"] == pytest.approx(0.8)
    assert report["metrics"]["hd95"] == pytest.approx(3.0)
    shifted_z = np.roll(truth, 1, axis=2)  # 1 slice of 3 mm
    assert evaluate_segmentation(tmp_path, predict(shifted_z))["metrics"]["hd95"] == \
        pytest.approx(3.0)


def test_evaluator_empty_masks_and_errors(tmp_path, eval_case):
    truth, predict = eval_case
    report = evaluate_segmentation(tmp_path, predict(np.zeros_like(truth)))
    assert report["metrics"]["dice"] == 0.0 and report["metrics"]["hd95"] > 30  # diagonal, mm
    with pytest.raises(EvaluationError, match="shape"):
        evaluate_segmentation(tmp_path, predict(np.zeros((20, 20, 7))))
    with pytest.raises(EvaluationError, match="labels 0..1"):
        evaluate_segmentation(tmp_path, predict(truth * 2))
    (tmp_path / "predictions.json").write_text("[]")
    with pytest.raises(EvaluationError, match="no predicted mask"):
        evaluate_segmentation(tmp_path, tmp_path / "predictions.json")
    empty = _nifti(tmp_path / "empty.nii.gz", np.zeros_like(truth))
    (tmp_path / "test.json").write_text(json.dumps(
        [{"image_path": "img.nii.gz", "label_path": empty, "labels": ["organ"]}]))
    rows = [{"image_path": "img.nii.gz", "label_path": empty, "prediction_path": empty}]
    (tmp_path / "predictions.json").write_text(json.dumps(rows))
    report = evaluate_segmentation(tmp_path, tmp_path / "predictions.json")
    assert report["metrics"]["dice"] == 1.0 and np.isnan(report["metrics"]["hd95"])


# ----------------------------------------------------------------------------- training
@pytest.mark.slow
def test_ct_organs_3d(tmp_path, settings, store):
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=16)
    datapath = make_datapath(tmp_path, index_cases(folder), 4, CT)
    result = train_and_evaluate(settings, store, datapath, "seg-ct", epochs=7)
    assert result["report"]["metrics"]["dice"] >= 0.70
    assert result["report"]["num_test"] == 4
    assert_label_geometry(result["logout"] / "predictions.json")


@pytest.mark.slow
def test_xray_organs_2d(tmp_path, settings, store):
    folder = make_xray_organ_demo_2d(tmp_path / "xray", n_cases=30)
    datapath = make_datapath(tmp_path, index_cases(folder), 6, XRAY)
    result = train_and_evaluate(settings, store, datapath, "seg-xray", batch_size=8,
                                export=True)
    assert result["report"]["metrics"]["dice"] >= 0.70
    assert_label_geometry(result["logout"] / "predictions.json")
    assert result["summary"]["exports"]["onnx"].get("verified") is not False
    first = result["summary"]["global_step"]
    config_path = datapath.parent / "train_config.json"  # resume for one more epoch
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "resume": True, "export": False,
                                       "epochs": config["epochs"] + 1}))
    newest = max(int(p.name.split("-")[1])
                 for p in (result["logout"] / "checkpoints").glob("checkpoint-*"))
    resumed_at = time.time()
    run_module("ml_templates.segmentation.train", "--config", str(config_path))
    resumed = json.loads((result["logout"] / "train_summary.json").read_text())
    assert resumed["global_step"] > first
    steps = [row["step"] for row in channel_metrics(result["logout"])
             if row["name"] == "loss" and row["ts"] >= resumed_at]
    assert steps and min(steps) > newest  # continued from the newest checkpoint


@pytest.mark.slow
def test_mri_two_channels_3d(tmp_path, settings, store):
    folder = make_mri_multichannel_demo_3d(tmp_path / "mri", n_cases=16)
    datapath = make_datapath(tmp_path, index_cases(folder, ("t1", "t2")), 4, MRI)
    result = train_and_evaluate(settings, store, datapath, "seg-mri", epochs=6)
    assert result["summary"]["in_channels"] == 2
    assert result["report"]["metrics"]["dice"] >= 0.5
    assert_label_geometry(result["logout"] / "predictions.json")


def test_each_case_maps_its_own_stored_label_values(tmp_path):
    """A case whose mask stores the labels as other values (a 3D Slicer file numbering its
    segments itself: 'spleen' as 1, 'liver' as 2 in this one) is mapped by its index entry's
    ``label_values``; the other cases are read as stored."""
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=3)
    cases = index_cases(folder)
    original = nib.load(cases[0]["label_path"])
    stored = np.asarray(original.dataobj).astype(np.uint8)
    swapped = np.where(stored == 1, 2, np.where(stored == 2, 1, stored)).astype(np.uint8)
    path = tmp_path / "swapped.nii.gz"
    nib.save(nib.Nifti1Image(swapped, original.affine), path)
    cases[0] = {**cases[0], "label_path": str(path), "label_values": [2, 1]}
    datapath = make_datapath(tmp_path, cases, 1, {**CT, "PIXDIM": None})
    dl = load_dataloader(datapath / "dataloader.py")
    data = dl.SegmentationDataset("train", augment=False, datapath=str(datapath))
    for k in range(2):
        labels = data[k]["labels"][0].numpy()
        truth = np.asarray(nib.load(index_cases(folder)[k]["label_path"]).dataobj)
        assert [(labels == v).sum() for v in (1, 2)] == [(truth == v).sum() for v in (1, 2)]
