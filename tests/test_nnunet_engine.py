"""nnU-Net v2 engine end to end on tiny synthetic CT: convert, plan, train, predict, evaluate."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_nnunet_engine_end_to_end(tmp_path):
    import nibabel as nib
    import numpy as np
    import SimpleITK as sitk

    from core.demo.segmentation import make_ct_organ_demo_3d
    from core.evaluation.segmentation import evaluate_segmentation
    from conftest import channel_metrics, channel_paths

    demo = make_ct_organ_demo_3d(tmp_path / "demo", n_cases=8)
    labels = json.loads((demo / "labels.json").read_text())
    names = labels if isinstance(labels, list) else list(labels.get("labels", labels))
    cases = sorted((demo / "images").glob("*.nii.gz"))
    items = [{"image_path": str(p), "label_path": str(demo / "masks" / p.name),
              "labels": [str(n) for n in names]} for p in cases]
    datapath = tmp_path / "Datapath"
    datapath.mkdir()
    (datapath / "train.json").write_text(json.dumps(items[:6]))
    (datapath / "test.json").write_text(json.dumps(items[6:]))

    job_id = "nnunet-test"
    out = tmp_path / "job" / "Logout"
    config = {"job_id": job_id, **channel_paths(out), "datapath": str(datapath),
              "output_dir": str(out), "epochs": 5, "iterations_per_epoch": 8,
              "val_iterations_per_epoch": 2, "time_budget_s": 600, "seed": 0, "device": "cpu",
              "use_mirroring": False}
    cfg_path = tmp_path / "job" / "train_config.json"
    cfg_path.parent.mkdir(parents=True)
    cfg_path.write_text(json.dumps(config))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "core.config.launch", "ml_templates.segmentation.nnunet_train",
                           "--config", str(cfg_path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=420)
    wall = time.time() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["engine"] == "nnunet" and summary["network"] == "nnunet_3d_fullres"
    assert Path(summary["model_path"]).name == "checkpoint_final.pth"
    assert Path(summary["model_path"]).exists()
    assert summary["epochs_run"] >= 1 and summary["device"] == "cpu"

    # the raw dataset kept each image's real geometry
    raw = out / "nnunet" / "raw" / "Dataset501_M3B"
    ds_json = json.loads((raw / "dataset.json").read_text())
    assert ds_json["labels"] == {"background": 0, **{n: i + 1 for i, n in enumerate(names)}}
    assert ds_json["numTraining"] == 6 and ds_json["file_ending"] == ".nii.gz"
    for i in (0, 1):  # case 1 is stored LPS in the demo
        src, conv = sitk.ReadImage(items[i]["image_path"]), sitk.ReadImage(
            str(raw / "imagesTr" / f"m3b_{i:04d}_0000.nii.gz"))
        assert np.allclose(src.GetSpacing(), conv.GetSpacing(), atol=1e-4)
        assert np.allclose(src.GetOrigin(), conv.GetOrigin(), atol=1e-4)
        assert np.allclose(src.GetDirection(), conv.GetDirection(), atol=1e-6)
        assert src.GetSpacing()[2] > 2.0  # anisotropic demo spacing, not 1 mm

    rows = json.loads((out / "predictions.json").read_text())
    assert len(rows) == 2
    for row in rows:
        pred, truth = nib.load(row["prediction_path"]), nib.load(row["label_path"])
        assert pred.shape == truth.shape
        assert np.allclose(pred.affine, truth.affine, atol=1e-4)

    report = evaluate_segmentation(datapath, out / "predictions.json")
    dice = report["metrics"]["dice"]
    print(f"nnU-Net dice {dice:.3f}, wall {wall:.0f} s, {summary['epochs_run']} epochs")
    assert dice >= 0.5, report["metrics"]

    metrics = channel_metrics(out)
    seen = {m["name"] for m in metrics}
    assert {"train_loss", "val_loss", "mean_fg_dice", "lr"} <= seen, seen
