"""Detection evaluator: mean average precision at IoU 0.5 (mAP50) over classes, per-class AP and
precision-recall curves, image-level AUC (abnormal vs normal from each image's highest box
score), 95% bootstrap CIs over test images, and the boxes' score threshold chosen on validation
with its precision, recall and F1 on test (core.evaluation.detection_threshold). Ground truth is read from ``test.json``; every test
image needs a prediction entry (an empty ``boxes`` list for "nothing found").

Matching and AP are MONAI's (``monai.apps.detection.metrics``: ``matching_batch`` with
``box_iou``, then ``COCOMetric``: greedy score-ordered matching, 101-point interpolated AP, at
most 100 detections per image). mAP50 averages the classes that have ground-truth boxes in the
test set. Boxes are corner boxes ``[x0, y0, x1, y1]`` / ``[x0, y0, z0, x1, y1, z1]``.
"""
from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import numpy as np
from monai.apps.detection.metrics.coco import COCOMetric
from monai.apps.detection.metrics.matching import matching_batch
from monai.data.box_utils import box_iou
from sklearn.metrics import roc_auc_score

from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256
from core.evaluation.detection_threshold import (box_hits, choose_score_threshold,
                                                 per_image_counts, score_operating_point)

VAL_PREDICTIONS = "val_predictions.json"

IOU, MAX_DET = 0.5, 100


@contextlib.contextmanager
def _quiet():
    """COCOMetric warns on the root logger for every class absent from a (resampled) set."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def _coco(class_names: list[str]) -> COCOMetric:
    return COCOMetric(classes=class_names, iou_list=[IOU], iou_range=[IOU, IOU, 0.05],
                      max_detection=[MAX_DET], per_class=True, verbose=False)


def match(gt: list[dict], preds: list[dict], coco: COCOMetric) -> list[dict]:
    """Per image and class: which detections hit which ground-truth box at IoU >= 0.5."""
    return matching_batch(
        iou_fn=box_iou, iou_thresholds=coco.iou_thresholds, max_detections=MAX_DET,
        pred_boxes=[p["boxes"] for p in preds], pred_classes=[p["labels"] for p in preds],
        pred_scores=[p["scores"] for p in preds], gt_boxes=[g["boxes"] for g in gt],
        gt_classes=[g["labels"] for g in gt])


def _ap(coco: COCOMetric, matches: list[dict], present: list[int]) -> tuple[float, dict]:
    with _quiet():
        values, _ = coco(matches)
    per_class = {c: values[f"{coco.classes[c]}_AP_IoU_{IOU:.2f}_MaxDet_{MAX_DET}"]
                 for c in present}
    per_class = {c: v for c, v in per_class.items() if v >= 0}  # -1: no ground truth here
    return (float(np.mean(list(per_class.values()))) if per_class else float("nan")), per_class


def _image_auc(abnormal: np.ndarray, top_score: np.ndarray) -> float:
    if abnormal.all() or not abnormal.any():
        return float("nan")
    return float(roc_auc_score(abnormal, top_score))


def _pr_curve(matches: list[dict], cls: int, num_gt: int, max_points: int = 200) -> dict:
    found = [m[cls] for m in matches if cls in m]
    scores = np.concatenate([f["dtScores"] for f in found]) if found else np.zeros(0)
    if not num_gt or not len(scores):
        return {"recall": [], "precision": [], "score": []}
    hits = np.concatenate([f["dtMatches"][0] for f in found]).astype(bool)
    order = np.argsort(-scores, kind="mergesort")
    tp = np.cumsum(hits[order])
    recall, precision = tp / num_gt, tp / np.arange(1, len(tp) + 1)
    keep = np.unique(np.linspace(0, len(tp) - 1, min(len(tp), max_points)).astype(int))
    return {"recall": recall[keep].round(4).tolist(),
            "precision": precision[keep].round(4).tolist(),
            "score": scores[order][keep].round(4).tolist()}


def detection_metrics(gt: list[dict], preds: list[dict], class_names: list[str]) -> dict:
    """``gt[i] = {"boxes": (G, 2d), "labels": (G,) int}``, ``preds[i]`` adds ``"scores"``
    (numpy). Returns {"map50", "image_auc"} (NaN where undefined)."""
    coco = _coco(class_names)
    present = sorted({int(c) for g in gt for c in g["labels"]})
    map50, _ = _ap(coco, match(gt, preds, coco), present)
    abnormal = np.array([len(g["labels"]) > 0 for g in gt])
    top = np.array([float(p["scores"].max()) if len(p["scores"]) else 0.0 for p in preds])
    return {"map50": map50, "image_auc": _image_auc(abnormal, top)}


def _array(value, width: int, what: str, dtype=np.float64) -> np.ndarray:
    try:
        arr = np.asarray(value if value is not None else [], dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise EvaluationError(f"{what}: not numeric ({exc})") from exc
    arr = arr.reshape(-1, width) if width and arr.size == 0 else arr
    if width and (arr.ndim != 2 or arr.shape[1] != width):
        raise EvaluationError(f"{what}: boxes must have {width} coordinates, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise EvaluationError(f"{what}: non-finite values")
    if width and np.any(arr[:, width // 2:] < arr[:, :width // 2]):
        raise EvaluationError(f"{what}: a box ends before it starts (use [x0, y0, x1, y1] corners)")
    return arr


def _key(image_path) -> str:
    return image_path if isinstance(image_path, str) else json.dumps(image_path)


def _labels(names: list, label_dict: dict, what: str) -> np.ndarray:
    out = []
    for name in names:
        if isinstance(name, (int, np.integer)) and 0 <= int(name) < len(label_dict):
            out.append(int(name))
        elif name in label_dict:
            out.append(int(label_dict[name]))
        else:
            raise EvaluationError(f"{what}: unknown label {name!r}; known: {sorted(label_dict)}")
    return np.asarray(out, dtype=np.int64)


def _read_predictions(path: Path, what: str = "predictions") -> list:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read {what} {path}: {exc}") from exc
    if not isinstance(raw, list) or not all(isinstance(p, dict) and "image_path" in p for p in raw):
        raise EvaluationError(f"{what} must be a list of {{image_path, boxes, scores, labels}}")
    return raw


def _pairs(index: list, raw: list, label_dict: dict, split: str = "test"):
    """Ground truth and predictions of every image of ``index``, as arrays; the box width."""
    by_key = {_key(p["image_path"]): p for p in raw}
    missing = [t["image_path"] for t in index if _key(t["image_path"]) not in by_key]
    if missing:
        raise EvaluationError(f"{len(missing)} of {len(index)} {split} images have no "
                              f"prediction, e.g. {missing[0]}")
    widths = {len(b) for entry in list(index) + raw for b in entry.get("boxes") or []}
    if len(widths) > 1 or widths - {4, 6}:
        raise EvaluationError(f"boxes must all have 4 (2D) or 6 (3D) coordinates, got {widths}")
    width = widths.pop() if widths else 4
    gt, preds = [], []
    for t in index:
        p, what = by_key[_key(t["image_path"])], f"{split} image {t['image_path']}"
        gt.append({"boxes": _array(t.get("boxes"), width, what),
                   "labels": _labels(t.get("labels") or [], label_dict, what)})
        pred = {"boxes": _array(p.get("boxes"), width, f"prediction for {t['image_path']}"),
                "scores": _array(p.get("scores"), 0, f"scores for {t['image_path']}"),
                "labels": _labels(p.get("labels") or [], label_dict, f"prediction {what}")}
        if not len(pred["boxes"]) == len(pred["scores"]) == len(pred["labels"]):
            raise EvaluationError(f"prediction for {t['image_path']}: boxes, scores and labels "
                                  "must have the same length")
        if len(gt[-1]["boxes"]) != len(gt[-1]["labels"]):
            raise EvaluationError(f"{what}: boxes and labels differ in length in the index")
        preds.append(pred)
    return gt, preds, width


def _load(datapath: Path, predictions_path: Path):
    test = json.loads((datapath / "test.json").read_text())
    label_dict = json.loads((datapath / "label_dict.json").read_text())
    gt, preds, width = _pairs(test, _read_predictions(predictions_path), label_dict)
    return test, label_dict, gt, preds, width // 2


def _validation_hits(datapath: Path, path: Path, test: list, label_dict: dict, coco):
    """Box hits of the validation predictions the template wrote (None when it wrote none);
    they must name training images only."""
    if not path.is_file():
        return None
    raw = _read_predictions(path, "validation predictions")
    train_path = datapath / "train.json"
    train = {_key(t["image_path"]): t for t in json.loads(train_path.read_text())} \
        if train_path.exists() else {}
    keys = {_key(p["image_path"]) for p in raw}
    leaked = keys & {_key(t["image_path"]) for t in test}
    if leaked:
        raise EvaluationError(f"{len(leaked)} validation prediction(s) are test images (e.g. "
                              f"{sorted(leaked)[0]}): the score threshold must not see test data")
    unknown = keys - set(train)
    if unknown:
        raise EvaluationError(f"{len(unknown)} validation prediction(s) are not training images "
                              f"of this index, e.g. {sorted(unknown)[0]}")
    gt, preds, _ = _pairs([train[k] for k in sorted(keys)], raw, label_dict, "validation")
    return box_hits(match(gt, preds, coco), [len(g["labels"]) for g in gt])


def evaluate_detection(datapath: str | Path, predictions_path: str | Path,
                       n_boot: int = 1000, val_predictions_path: str | Path | None = None,
                       decision: dict | None = None) -> dict:
    """Score ``[{"image_path", "boxes", "scores", "labels"}]`` against ``test.json``. The
    boxes' score threshold comes from the validation predictions (default:
    ``val_predictions.json`` beside the predictions), else from a stored ``decision``."""
    datapath, predictions_path = Path(datapath), Path(predictions_path)
    test, label_dict, gt, preds, dims = _load(datapath, predictions_path)
    names = sorted(label_dict, key=label_dict.get)
    coco = _coco(names)
    matches = match(gt, preds, coco)
    present = sorted({int(c) for g in gt for c in g["labels"]})
    map50, per_class_ap = _ap(coco, matches, present)
    abnormal = np.array([len(g["labels"]) > 0 for g in gt])
    top = np.array([float(p["scores"].max()) if len(p["scores"]) else 0.0 for p in preds])
    image_auc = _image_auc(abnormal, top)

    def resample(idx: np.ndarray) -> dict:
        sub = [matches[i] for i in idx]
        return {"map50": _ap(coco, sub, present)[0],
                "image_auc": _image_auc(abnormal[idx], top[idx])}

    ci = bootstrap_ci(len(gt), resample, n_boot=n_boot) if gt else {}
    per_class, curves = {}, {}
    for c, name in enumerate(names):
        num_gt = int(sum((g["labels"] == c).sum() for g in gt))
        per_class[name] = {"ap50": per_class_ap.get(c), "num_gt": num_gt,
                           "num_pred": int(sum((p["labels"] == c).sum() for p in preds))}
        curves[name] = _pr_curve(matches, c, num_gt)
    metrics = {"map50": None if map50 != map50 else map50,
               "image_auc": None if image_auc != image_auc else image_auc}
    val_hits = _validation_hits(datapath, Path(val_predictions_path) if val_predictions_path
                                else predictions_path.with_name(VAL_PREDICTIONS), test,
                                label_dict, coco)
    threshold, source = (choose_score_threshold(val_hits), "validation") if val_hits else \
        ((decision or {}).get("score_threshold"), "stored")
    point, per_image = None, []
    if threshold is not None:
        test_hits = box_hits(matches, [len(g["labels"]) for g in gt])
        point = score_operating_point(float(threshold), test_hits, val_hits, source, n_boot)
        per_image = per_image_counts([t["image_path"] for t in test], test_hits,
                                     float(threshold))
    return {
        "task": "detection", "metrics": metrics, "ci95": ci, "per_class": per_class,
        "operating_point": point,
        "decision": {"score_threshold": point["threshold"], "source": source} if point else {},
        "per_image": per_image, "pr_curve": curves, "iou_threshold": IOU, "spatial_dims": dims,
        "num_test": len(gt),
        "num_test_abnormal": int(abnormal.sum()),
        "num_gt_boxes": int(sum(len(g["labels"]) for g in gt)),
        "evaluator": "core.evaluation.detection",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }
