"""Segmentation evaluator: Dice and HD95 (mm) per foreground class, per case and overall, with
95% bootstrap CIs over cases. Ground truth (mask files, label names) is read from test.json;
the template's ``predictions.json`` only says where each predicted mask is.

Conventions, per case and class (MONAI ``DiceMetric`` / ``compute_hausdorff_distance``):

* Dice: 2|P∩G| / (|P| + |G|); 1.0 when both prediction and ground truth are empty, 0.0 when
  exactly one of them is.
* HD95: 95th percentile of the symmetric surface distances, in mm from the mask header's voxel
  spacing (pixels for PNG). Undefined (NaN, left out of every mean) when both are empty; the
  image diagonal in mm (the worst possible value) when exactly one is empty.
* ``metrics["dice"]`` / ``metrics["hd95"]``: the mean over all cases and foreground classes
  (NaN left out); ``per_class`` averages over cases; ``per_case`` lists every case.

A prediction must exist for every test case, be an integer mask in 0..num_classes-1 and have the
ground truth's shape (and, for NIfTI, its affine); otherwise ``EvaluationError``.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import torch
from monai.metrics import DiceMetric, compute_hausdorff_distance
from monai.transforms import AsDiscrete, LoadImage

from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256
from core.imaging.arrays import map_label_values
from core.imaging.image_io import ImageRefReader
from core.imaging.refs import MissingImageFile, ref_exists, ref_files

AFFINE_TOLERANCE_MM = 1e-3


def _key(path) -> str:
    return json.dumps(path) if isinstance(path, (list, tuple)) else str(path)


def _read(ref):
    """A mask (ground truth or prediction) as a MetaTensor (1, *spatial), read by the
    templates' reader: any index reference (a file, ``file.npz::key[i]``, a folder of slices,
    a series manifest). A missing file is named as such."""
    try:
        ref_files(ref)
        return LoadImage(reader=ImageRefReader(), image_only=True,
                         ensure_channel_first=True)(ref)
    except MissingImageFile as exc:
        raise EvaluationError(f"mask {_key(ref)}: {exc}") from exc
    except Exception as exc:
        raise EvaluationError(f"cannot read mask {_key(ref)}: {type(exc).__name__}: "
                              f"{exc}") from exc


def _as_labels(mask, path: str, num_classes: int) -> torch.Tensor:
    values = torch.as_tensor(mask).float()
    if not torch.equal(values, values.round()) or values.min() < 0 or values.max() >= num_classes:
        raise EvaluationError(f"{path} must hold integer labels 0..{num_classes - 1}, found "
                              f"values in [{float(values.min())}, {float(values.max())}]")
    return values.long()


def case_metrics(pred: torch.Tensor, truth: torch.Tensor, num_classes: int,
                 spacing) -> tuple[np.ndarray, np.ndarray]:
    """Label maps (1, *spatial) -> Dice and HD95 (mm) per foreground class (the conventions
    above)."""
    onehot = AsDiscrete(to_onehot=num_classes)
    p, g = onehot(pred)[None], onehot(truth)[None]
    dice = DiceMetric(include_background=False, reduction="none", ignore_empty=False)(p, g)
    spacing = [float(s) for s in spacing]
    with warnings.catch_warnings():  # MONAI warns about empty masks; handled below
        warnings.simplefilter("ignore")
        hd95 = compute_hausdorff_distance(p, g, include_background=False, percentile=95,
                                          spacing=spacing)
    hd95 = hd95[0].double().numpy().copy()
    diagonal = math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape[1:], spacing)))
    for k in range(num_classes - 1):
        has_p, has_g = bool(p[0, k + 1].any()), bool(g[0, k + 1].any())
        if not has_p and not has_g:
            hd95[k] = np.nan
        elif has_p != has_g:
            hd95[k] = diagonal
    return dice[0].double().numpy(), hd95


def _prediction_index(predictions_path: Path) -> dict:
    try:
        rows = json.loads(Path(predictions_path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read predictions {predictions_path}: {exc}") from exc
    if not isinstance(rows, list) or not all(isinstance(r, dict) and r.get("prediction_path")
                                             for r in rows):
        raise EvaluationError("predictions.json must be a list of {image_path, label_path, "
                              "prediction_path}")
    index = {}
    for row in rows:
        for field in ("label_path", "image_path"):
            if row.get(field):
                index[(field, _key(row[field]))] = row["prediction_path"]
    return index


def _nanmean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def evaluate_segmentation(datapath: str | Path, predictions_path: str | Path) -> dict:
    """Score predicted masks against the ground truth listed in ``datapath/test.json``."""
    datapath = Path(datapath)
    test = json.loads((datapath / "test.json").read_text())
    if not test:
        raise EvaluationError("test.json lists no case")
    names = max((list(case.get("labels", [])) for case in test), key=len)
    num_classes = len(names) + 1
    found = _prediction_index(Path(predictions_path))
    pairs, missing = [], []
    for case in test:
        pred = (found.get(("label_path", _key(case["label_path"])))
                or found.get(("image_path", _key(case["image_path"]))))
        (pairs.append((case, pred)) if pred and ref_exists(pred) else missing.append(case))
    if missing:
        raise EvaluationError(f"{len(missing)} of {len(test)} test cases have no predicted mask "
                              f"file, e.g. {missing[0]['label_path']}")
    dice_rows, hd_rows, per_case = [], [], []
    for case, pred_path in pairs:
        truth_img, pred_img = _read(case["label_path"]), _read(pred_path)
        if tuple(pred_img.shape) != tuple(truth_img.shape):
            raise EvaluationError(f"{pred_path} has shape {tuple(pred_img.shape[1:])}, the ground "
                                  f"truth {case['label_path']} {tuple(truth_img.shape[1:])}")
        if str(case["label_path"]).endswith((".nii", ".nii.gz")) and not np.allclose(
                np.asarray(pred_img.affine), np.asarray(truth_img.affine),
                atol=AFFINE_TOLERANCE_MM):
            raise EvaluationError(f"{pred_path} is not on the ground truth's grid (affine "
                                  f"differs from {case['label_path']})")
        truth = _as_labels(map_label_values(truth_img, case.get("label_values")),
                           case["label_path"], num_classes)
        pred = _as_labels(pred_img, pred_path, num_classes)
        spacing = [float(s) for s in truth_img.pixdim][:truth.ndim - 1]
        dice, hd95 = case_metrics(pred, truth, num_classes, spacing)
        dice_rows.append(dice)
        hd_rows.append(hd95)
        per_case.append({"image_path": case["image_path"], "label_path": case["label_path"],
                         "prediction_path": pred_path, "spacing": spacing,
                         "dice": dict(zip(names, map(float, dice))),
                         "hd95": dict(zip(names, map(float, hd95))),
                         "mean_dice": _nanmean(dice), "mean_hd95": _nanmean(hd95)})
    dice_all, hd_all = np.stack(dice_rows), np.stack(hd_rows)

    def summary(rows: np.ndarray) -> dict:
        return {"dice": _nanmean(dice_all[rows]), "hd95": _nanmean(hd_all[rows])}

    per_class = {name: {"dice": _nanmean(dice_all[:, k]), "hd95": _nanmean(hd_all[:, k])}
                 for k, name in enumerate(names)}
    return {
        "task": "segmentation", "evaluator": "core.evaluation.segmentation",
        "metrics": summary(np.arange(len(pairs))), "ci95": bootstrap_ci(len(pairs), summary),
        "per_class": per_class, "per_case": per_case, "num_test": len(pairs),
        "labels": names, "hd95_unit": "mm (pixels for images without spacing)",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }
