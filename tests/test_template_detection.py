"""The detection template end to end (2D and 3D) and its evaluator.

Fast: the evaluator (perfect boxes, shifted boxes, missing images, bad input), and the
dataloader (boxes follow every spatial transform; predictions map back to the stored image).
Slow: demo data -> index -> instantiated dataloader -> check_dataloader and train as
subprocesses -> evaluator; the stop flag and resuming from a checkpoint.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.demo.detection import make_nodule_detection_demo_2d, make_nodule_detection_demo_3d
from core.evaluation.common import EvaluationError
from core.evaluation.detection import evaluate_detection
from conftest import channel_metrics, channel_paths
from core.training.instantiate import instantiate

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "ml_templates" / "detection" / "dataloader_template.py"


# ----------------------------------------------------------------------------- helpers
def write_index(demo: Path, datapath: Path, dims: int, test_fraction: float = 0.2) -> dict:
    """boxes.csv (corner + size per row) -> train.json / test.json / label_dict.json /
    split.json, split by patient (the file name's prefix)."""
    folder = demo / ("images" if dims == 2 else "volumes")
    corner, size = ("xy", "wh") if dims == 2 else ("xyz", "whd")
    entries: dict[str, dict] = {}
    with open(demo / "boxes.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            entry = entries.setdefault(row["image"], {"image_path": str(folder / row["image"]),
                                                      "boxes": [], "labels": []})
            if row[corner[0]]:
                start = [float(row[k]) for k in corner]
                entry["boxes"].append(start + [s + float(row[k]) for s, k in zip(start, size)])
                entry["labels"].append(row["label"])
    groups = {e["image_path"]: name.split("_")[0].split(".")[0] for name, e in entries.items()}
    patients = sorted(set(groups.values()))
    test_patients = set(patients[-max(1, round(len(patients) * test_fraction)):])
    split = {"train": [], "test": []}
    for name in sorted(entries):
        side = "test" if groups[entries[name]["image_path"]] in test_patients else "train"
        split[side].append(entries[name])
    datapath.mkdir(parents=True, exist_ok=True)
    for side, items in split.items():
        (datapath / f"{side}.json").write_text(json.dumps(items))
    labels = sorted({lbl for e in entries.values() for lbl in e["labels"]})
    (datapath / "label_dict.json").write_text(json.dumps({n: i for i, n in enumerate(labels)}))
    (datapath / "split.json").write_text(json.dumps({"groups": groups, "seed": 0}))
    return split


def make_dataloader(datapath: Path, dims: int, size: list[int], intensity: dict):
    path = instantiate(TEMPLATE, datapath / "dataloader.py",
                       {"DATAPATH": str(datapath), "SPATIAL_DIMS": dims, "IMAGE_SIZE": size,
                        "IN_CHANNELS": 1, "INTENSITY": intensity})
    spec = importlib.util.spec_from_file_location(f"dl_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_module(module: str, args: list[str], home: Path, timeout: int = 600):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "M3B_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "core.config.launch", module, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def train(tmp: Path, datapath: Path, job_id: str, stop: bool = False, **overrides):
    (tmp / "Logout").mkdir(parents=True, exist_ok=True)
    stop_file = tmp / "Logout" / "stop.request"
    stop_file.touch() if stop else stop_file.unlink(missing_ok=True)
    cfg = {"job_id": job_id, **channel_paths(tmp / "Logout"), "datapath": str(datapath),
           "dataloader": str(datapath / "dataloader.py"), "output_dir": str(tmp / "Logout"),
           "network": "retinanet_small", "epochs": 12, "batch_size": 4, "learning_rate": 2e-3,
           "seed": 0, "time_budget_s": 240, "early_stopping_patience": 5, "device": "cpu",
           "resume": False, "val_fraction": 0.15, "threads": 1, **overrides}
    config = tmp / "train_config.json"
    config.write_text(json.dumps(cfg))
    started = time.time()
    run = run_module("ml_templates.detection.train", ["--config", str(config)], tmp)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((tmp / "Logout" / "train_summary.json").read_text())
    return summary, channel_metrics(tmp / "Logout"), time.time() - started


def check_and_train(tmp: Path, datapath: Path, job_id: str, **overrides) -> dict:
    check = run_module("ml_templates.detection.check_dataloader", ["--datapath", str(datapath)],
                       tmp)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    report = json.loads((datapath / "dataloader_check.json").read_text())
    assert report["loaded"] == report["expected"] and not report["failed"]
    assert len(report["shapes"]) == 1
    assert report["boxes_inside_image"] == {"index": True, "transformed": True}
    summary, metrics, seconds = train(tmp, datapath, job_id, **overrides)
    for key in ("model_path", "network", "epochs_run", "best_val_metric", "stop_reason",
                "seconds", "device", "seed"):
        assert key in summary
    assert Path(summary["model_path"]).exists()
    assert (tmp / "Logout" / "model" / "config.json").exists()
    names = {row["name"] for row in metrics}
    assert {"loss", "loss_cls", "loss_box", "learning_rate", "eval_map50"} <= names
    predictions = json.loads((tmp / "Logout" / "predictions.json").read_text())
    test = json.loads((datapath / "test.json").read_text())
    assert sorted(p["image_path"] for p in predictions) == sorted(t["image_path"] for t in test)
    report = evaluate_detection(datapath, tmp / "Logout" / "predictions.json")
    print(f"\n{job_id}: map50 {report['metrics']['map50']:.3f} (CI {report['ci95'].get('map50')}),"
          f" image AUC {report['metrics']['image_auc']}, training {seconds:.0f} s, "
          f"{summary['epochs_run']} epochs, stop: {summary['stop_reason']}")
    return report


# ----------------------------------------------------------------------------- evaluator
def _eval_datapath(tmp: Path, dims: int) -> tuple[Path, list]:
    b = [[10, 12, 30, 28], [50, 50, 70, 66]] if dims == 2 else [[4, 5, 6, 14, 15, 12]]
    test = [{"image_path": "a.png", "boxes": b, "labels": ["nodule"] * len(b)},
            {"image_path": "b.png", "boxes": [], "labels": []},
            {"image_path": ["c_t1.nii", "c_t2.nii"], "boxes": b[:1], "labels": ["mass"]}]
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "test.json").write_text(json.dumps(test))
    (tmp / "label_dict.json").write_text(json.dumps({"nodule": 0, "mass": 1}))
    return tmp, test


def _predict(tmp: Path, entries: list) -> Path:
    path = tmp / "predictions.json"
    path.write_text(json.dumps(entries))
    return path


@pytest.mark.parametrize("dims", [2, 3])
def test_evaluator_perfect_boxes_score_one(tmp_path, dims):
    datapath, test = _eval_datapath(tmp_path, dims)
    preds = [{"image_path": t["image_path"], "boxes": t["boxes"], "labels": t["labels"],
              "scores": [0.9] * len(t["boxes"])} for t in test]
    report = evaluate_detection(datapath, _predict(tmp_path, preds), n_boot=50)
    assert report["metrics"]["map50"] == pytest.approx(1.0)
    assert report["metrics"]["image_auc"] == pytest.approx(1.0)
    assert report["per_class"]["mass"]["ap50"] == pytest.approx(1.0)
    assert report["task"] == "detection" and report["evaluator"] == "core.evaluation.detection"
    assert report["num_test"] == 3 and report["spatial_dims"] == dims
    assert report["pr_curve"]["nodule"]["precision"][-1] == pytest.approx(1.0)
    assert set(report["ci95"]) == {"map50", "image_auc"}


def test_evaluator_shifted_boxes_score_zero(tmp_path):
    datapath, test = _eval_datapath(tmp_path, 2)
    preds = []
    for t in test:  # shift by 60% of the width: IoU = 0.4 / 1.6 = 0.25
        boxes = [[x0 + 0.6 * (x1 - x0), y0, x1 + 0.6 * (x1 - x0), y1]
                 for x0, y0, x1, y1 in t["boxes"]]
        preds.append({"image_path": t["image_path"], "boxes": boxes, "labels": t["labels"],
                      "scores": [0.9] * len(boxes)})
    report = evaluate_detection(datapath, _predict(tmp_path, preds), n_boot=50)
    assert report["metrics"]["map50"] == pytest.approx(0.0)


def test_evaluator_false_positive_on_normal_image_lowers_ap(tmp_path):
    datapath, test = _eval_datapath(tmp_path, 2)
    preds = [{"image_path": t["image_path"], "boxes": t["boxes"], "labels": t["labels"],
              "scores": [0.5] * len(t["boxes"])} for t in test]
    preds[1] = {"image_path": "b.png", "boxes": [[5, 5, 15, 15]], "labels": [0], "scores": [0.95]}
    report = evaluate_detection(datapath, _predict(tmp_path, preds), n_boot=50)
    assert 0.4 < report["per_class"]["nodule"]["ap50"] < 1.0  # labels as indices accepted
    assert report["metrics"]["image_auc"] == pytest.approx(0.0)


def test_evaluator_rejects_missing_and_malformed_predictions(tmp_path):
    datapath, test = _eval_datapath(tmp_path, 2)
    preds = [{"image_path": t["image_path"], "boxes": [], "labels": [], "scores": []}
             for t in test]
    with pytest.raises(EvaluationError, match="no prediction"):
        evaluate_detection(datapath, _predict(tmp_path, preds[:2]))
    bad = [dict(p) for p in preds]
    bad[0].update(boxes=[[10, 10, 5, 20]], labels=["nodule"], scores=[0.3])
    with pytest.raises(EvaluationError, match="ends before it starts"):
        evaluate_detection(datapath, _predict(tmp_path, bad))
    bad[0].update(boxes=[[1, 1, 5, 5]], labels=["tumour"])
    with pytest.raises(EvaluationError, match="unknown label"):
        evaluate_detection(datapath, _predict(tmp_path, bad))
    bad[0].update(labels=["nodule"], scores=[])
    with pytest.raises(EvaluationError, match="same length"):
        evaluate_detection(datapath, _predict(tmp_path, bad))


# ----------------------------------------------------------------------------- dataloader
def test_boxes_follow_transforms_and_map_back(tmp_path):
    """A bright square on black, stored 120 x 80 (x, y), resized to 64 x 64 and augmented:
    the box must keep covering the square; unaugmented boxes map back to the index exactly."""
    pixels = np.zeros((80, 120), np.uint8)  # rows = y, columns = x
    pixels[20:40, 30:60] = 255
    Image.fromarray(pixels).save(tmp_path / "square.png")
    Image.fromarray(np.zeros((80, 120), np.uint8)).save(tmp_path / "empty.png")
    items = [{"image_path": str(tmp_path / "square.png"), "boxes": [[30, 20, 60, 40]],
              "labels": ["nodule"]},
             {"image_path": str(tmp_path / "empty.png"), "boxes": [], "labels": []}]
    for split in ("train", "test"):
        (tmp_path / f"{split}.json").write_text(json.dumps(items))
    (tmp_path / "label_dict.json").write_text(json.dumps({"nodule": 0}))
    dl = make_dataloader(tmp_path, 2, [64, 64], {"kind": "minmax"})
    plain = dl.DetectionDataset("test", datapath=str(tmp_path))
    item = plain[0]
    assert item["image"].shape == (1, 64, 64) and item["original_size"] == [120, 80]
    np.testing.assert_allclose(item["boxes"].numpy(), [[16, 16, 32, 32]], atol=1e-4)
    back = dl.to_original(item["boxes"], item["original_size"], item["image_size"])
    np.testing.assert_allclose(np.asarray(back), [[30, 20, 60, 40]], atol=1e-3)
    empty = plain[1]
    assert empty["boxes"].shape == (0, 4) and empty["labels"].shape == (0,)
    augmented = dl.DetectionDataset("train", datapath=str(tmp_path))
    augmented.transforms.set_random_state(seed=0)
    for _ in range(12):
        item = augmented[0]
        assert item["boxes"].shape == (1, 4)
        x0, y0, x1, y1 = item["boxes"][0].round().int().tolist()
        image = item["image"][0]
        inside = image[x0 + 1:x1 - 1, y0 + 1:y1 - 1]
        assert inside.numel() and float(inside.mean()) > 0.8
        assert float(image.sum() - image[x0:x1, y0:y1].sum()) < 0.1 * float(image.sum())


# ----------------------------------------------------------------------------- training
@pytest.mark.slow
def test_detection_2d_trains_and_scores(tmp_path):
    demo = make_nodule_detection_demo_2d(tmp_path / "demo", n=160, seed=0, size=96)
    datapath = tmp_path / "Datapath"
    write_index(demo, datapath, dims=2)
    dl = make_dataloader(datapath, 2, [96, 96], {"kind": "minmax"})
    item = dl.DetectionDataset("train", datapath=str(datapath))[0]
    assert item["image"].shape == (1, 96, 96) and item["boxes"].shape[1] == 4
    report = check_and_train(tmp_path, datapath, "det2d")
    assert report["metrics"]["map50"] >= 0.5
    assert report["metrics"]["image_auc"] >= 0.8
    # the saved model reloads and reproduces the written predictions
    from ml_templates.detection.model import load_detection_model
    model = load_detection_model(tmp_path / "Logout" / "model")
    test = dl.DetectionDataset("test", datapath=str(datapath))
    written = {p["image_path"]: p for p in
               json.loads((tmp_path / "Logout" / "predictions.json").read_text())}
    item = test[0]
    det = model.predict([item["image"]])[0]
    boxes = np.asarray(dl.to_original(det["boxes"], item["original_size"], item["image_size"]))
    np.testing.assert_allclose(boxes[:5], written[item["image_path"]]["boxes"][:5], atol=0.02)


@pytest.mark.slow
def test_detection_3d_trains_and_scores(tmp_path):
    demo = make_nodule_detection_demo_3d(tmp_path / "demo", n=72, seed=0, size=48, depth=32)
    datapath = tmp_path / "Datapath"
    write_index(demo, datapath, dims=3)
    make_dataloader(datapath, 3, [48, 48, 32], {"kind": "ct", "window": [-1000, 400]})
    report = check_and_train(tmp_path, datapath, "det3d", epochs=15, early_stopping_patience=0)
    assert report["spatial_dims"] == 3
    assert report["metrics"]["map50"] >= 0.5


@pytest.mark.slow
def test_stop_flag_then_resume(tmp_path):
    demo = make_nodule_detection_demo_2d(tmp_path / "demo", n=40, seed=1, size=64)
    datapath = tmp_path / "Datapath"
    write_index(demo, datapath, dims=2)
    make_dataloader(datapath, 2, [64, 64], {"kind": "minmax"})
    stopped, _, _ = train(tmp_path, datapath, "det-stop", stop=True, epochs=2)
    assert stopped["stop_reason"] == "stopped by the user"
    assert stopped["epochs_run"] < 2
    assert (tmp_path / "Logout" / "predictions.json").exists()
    assert list((tmp_path / "Logout" / "checkpoints").glob("checkpoint-*"))
    resumed, _, _ = train(tmp_path, datapath, "det-stop", stop=False, epochs=2, resume=True)
    assert resumed["stop_reason"] == "completed" and resumed["epochs_run"] == 2
    assert resumed["global_step"] > stopped["global_step"]
