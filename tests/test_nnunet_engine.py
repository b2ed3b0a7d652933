"""nnU-Net v2 engine end to end on synthetic CT (the suite's one nnU-Net model, built through the
crew: tests/conftest.py nnunet_crew_job): convert with the real geometry, plan, train, predict
on the mask's grid, report through the run channel, evaluate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.slow
def test_nnunet_engine_end_to_end(nnunet_crew_job):
    import nibabel as nib
    import numpy as np
    import SimpleITK as sitk

    from conftest import channel_metrics
    from core.evaluation.segmentation import evaluate_segmentation

    assert nnunet_crew_job["result"]["status"] == "succeeded", nnunet_crew_job["result"]
    ws = nnunet_crew_job["workspace"]
    out, datapath = ws / "Logout", ws / "Datapath"
    train = json.loads((datapath / "train.json").read_text())
    names = train[0]["labels"]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["engine"] == "nnunet" and summary["network"] == "nnunet_3d_fullres"
    assert Path(summary["model_path"]).name == "checkpoint_final.pth"
    assert Path(summary["model_path"]).exists()
    assert summary["epochs_run"] >= 1 and summary["device"] == "cpu"

    # the raw dataset kept each image's real geometry
    raw = out / "nnunet" / "raw" / "Dataset501_M3B"
    ds_json = json.loads((raw / "dataset.json").read_text())
    assert ds_json["labels"] == {"background": 0, **{n: i + 1 for i, n in enumerate(names)}}
    assert ds_json["numTraining"] == len(train) and ds_json["file_ending"] == ".nii.gz"
    lps_seen = False
    for i, item in enumerate(train):
        src, conv = sitk.ReadImage(item["image_path"]), sitk.ReadImage(
            str(raw / "imagesTr" / f"m3b_{i:04d}_0000.nii.gz"))
        assert np.allclose(src.GetSpacing(), conv.GetSpacing(), atol=1e-4)
        assert np.allclose(src.GetOrigin(), conv.GetOrigin(), atol=1e-4)
        assert np.allclose(src.GetDirection(), conv.GetDirection(), atol=1e-6)
        assert src.GetSpacing()[2] > 2.0  # anisotropic demo spacing, not 1 mm
        lps_seen |= src.GetDirection()[0] < 0  # the demo stores some cases LPS
    assert lps_seen, "no LPS case among the training images: the geometry check is weaker"

    rows = json.loads((out / "predictions.json").read_text())
    test = json.loads((datapath / "test.json").read_text())
    assert len(rows) == len(test)
    for row in rows:
        pred, truth = nib.load(row["prediction_path"]), nib.load(row["label_path"])
        assert pred.shape == truth.shape
        assert np.allclose(pred.affine, truth.affine, atol=1e-4)

    report = evaluate_segmentation(datapath, out / "predictions.json")
    assert report["metrics"]["dice"] >= 0.5, report["metrics"]

    seen = {m["name"] for m in channel_metrics(out)}
    assert {"train_loss", "val_loss", "mean_fg_dice", "lr"} <= seen, seen
    stored = {m["name"] for m in nnunet_crew_job["store"].metrics(nnunet_crew_job["job_id"])}
    assert seen <= stored  # everything the child reported reached the store
