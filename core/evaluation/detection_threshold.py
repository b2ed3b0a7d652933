"""The score threshold of a detector's boxes, chosen on validation and reported on test the way
a diagnosis threshold is (issue 13): mAP ranks boxes over every score, but a user sees the boxes
above one threshold, so that threshold is chosen on the validation images (the F1 of boxes at IoU
0.5 is highest there) and its precision, recall and F1 on the test images are reported with 95 %
bootstrap CIs over images.

Matching is the evaluator's (MONAI's greedy score-ordered matching): removing the boxes under a
threshold never changes which of the remaining boxes hit, so one matching serves every threshold.

May import: core.evaluation (common), NumPy.
"""
from __future__ import annotations

import numpy as np

from core.evaluation.common import bootstrap_ci

RULE_TEXT = "highest F1 of boxes (IoU >= 0.5) on the validation images"


def box_hits(matches: list[dict], num_gt: list[int]) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Per image: (scores of its boxes, whether each hit a true box, number of true boxes)."""
    out = []
    for image, n_gt in zip(matches, num_gt):
        scores, hits = [], []
        for found in image.values():
            scores.append(np.asarray(found["dtScores"], dtype=np.float64).ravel())
            hits.append(np.asarray(found["dtMatches"][0]).astype(bool).ravel())
        out.append((np.concatenate(scores) if scores else np.zeros(0),
                    np.concatenate(hits) if hits else np.zeros(0, dtype=bool), int(n_gt)))
    return out


def _counts(per_image, threshold: float) -> np.ndarray:
    """(images, 3) true positives, false positives, false negatives at ``threshold``."""
    rows = []
    for scores, hits, n_gt in per_image:
        kept = scores >= threshold
        tp = int((hits & kept).sum())
        rows.append((tp, int(kept.sum()) - tp, n_gt - tp))
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def per_image_counts(image_paths: list, per_image, threshold: float) -> list[dict]:
    """Per test image at ``threshold``: its true boxes, those found, those missed and the false
    boxes (the Models page shows the images with the most mistakes first)."""
    counts = _counts(per_image, threshold)
    return [{"image_path": path, "true_boxes": int(tp + fn), "found": int(tp),
             "missed": int(fn), "false_boxes": int(fp)}
            for path, (tp, fp, fn) in zip(image_paths, counts.tolist())]


def box_rates(counts: np.ndarray) -> dict:
    tp, fp, fn = (int(x) for x in counts.sum(axis=0)) if len(counts) else (0, 0, 0)
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    return {"precision": precision, "recall": recall, "f1": f1,
            "boxes_per_image": (tp + fp) / len(counts) if len(counts) else float("nan")}


def choose_score_threshold(per_image) -> float | None:
    """The score threshold with the highest F1 on validation (the highest such threshold, moved
    halfway to the next lower score); None when validation has no true box or no box."""
    if not per_image or sum(n for _, _, n in per_image) == 0:
        return None
    scores = np.concatenate([s for s, _, _ in per_image])
    if not len(scores):
        return None
    candidates = np.unique(scores)[::-1]
    f1 = [box_rates(_counts(per_image, t))["f1"] for t in candidates]
    best = int(np.nanargmax(f1))
    lower = candidates[best + 1] if best + 1 < len(candidates) else None
    return float((candidates[best] + lower) / 2) if lower is not None else float(candidates[best])


def score_operating_point(threshold: float, test_hits, val_hits=None, source: str = "validation",
                          n_boot: int = 1000) -> dict:
    """Precision, recall and F1 of the boxes at ``threshold`` on test (with CIs) and
    validation."""
    counts = _counts(test_hits, threshold)
    point = {"rule_text": RULE_TEXT if source == "validation" else
             f"score threshold stored with the model ({source})",
             "threshold": threshold, "source": source, "test": box_rates(counts),
             "ci95": bootstrap_ci(len(counts), lambda idx: box_rates(counts[idx]),
                                  n_boot=n_boot) if len(counts) else {}}
    if val_hits is not None:
        point["validation"] = box_rates(_counts(val_hits, threshold))
        point["num_val"] = len(val_hits)
    return point
