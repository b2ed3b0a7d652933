"""The Models page's test-case viewer data (core/viewing/case_review.py): a segmentation test
case's image, ground truth (its stored label values mapped to 1..N) and prediction on one grid,
worst Dice first."""
from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest

from core.viewing.case_review import case_choices, load_case


def nifti(path, array, affine):
    nib.save(nib.Nifti1Image(array, affine), str(path))
    return str(path)


def test_cases_are_read_on_one_grid_with_labels_mapped(tmp_path):
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    image = np.random.default_rng(0).normal(40, 10, (12, 10, 6)).astype(np.float32)
    truth = np.zeros((12, 10, 6), np.uint8)
    truth[2:6, 2:5, 1:4] = 255           # stored as 0/255, label_values [255]
    prediction = (truth > 0).astype(np.uint8)
    prediction[2, 2, 1] = 0
    ws = tmp_path / "job"
    (ws / "Datapath").mkdir(parents=True)
    img = nifti(tmp_path / "ct.nii.gz", image, affine)
    lab = nifti(tmp_path / "ct_mask.nii.gz", truth, affine)
    pred = nifti(tmp_path / "ct_pred.nii.gz", prediction, affine)
    (ws / "Datapath" / "test.json").write_text(json.dumps(
        [{"image_path": img, "label_path": lab, "labels": ["liver"], "label_values": [255]}]))
    report = {"per_case": [
        {"image_path": img, "label_path": lab, "prediction_path": pred, "mean_dice": 0.97,
         "spacing": [0.8, 0.8, 2.5]},
        {"image_path": "/x/other.nii.gz", "label_path": "/x/o.nii.gz",
         "prediction_path": "/x/op.nii.gz", "mean_dice": 0.41}]}
    choices = case_choices(report)
    assert [c["label"] for c in choices] == ["other.nii.gz — Dice 0.410",
                                             "ct.nii.gz — Dice 0.970"]  # worst first
    case = load_case(ws, choices[1])
    assert case.image.shape == case.truth.shape == case.prediction.shape == (12, 10, 6)
    assert set(np.unique(case.truth)) == {0, 1}  # 255 became label 1
    assert (case.truth != case.prediction).sum() == 1
    assert np.allclose(case.affine, affine) and case.spacing == [0.8, 0.8, 2.5]
    with pytest.raises(FileNotFoundError):
        load_case(ws, choices[0])

    nifti(tmp_path / "ct_pred.nii.gz", prediction[:, :, :5], affine)
    with pytest.raises(ValueError, match="not on one grid"):
        load_case(ws, choices[1])
