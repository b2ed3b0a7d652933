"""A model's test cases for the viewer, from the report the system's evaluator wrote and the
job's test index:

* segmentation: each case's image, its ground-truth mask and the model's predicted mask on the
  same grid, with the case's Dice (``per_case``), worst first;
* detection: each test image with its true boxes and the model's boxes at the score threshold
  the evaluator used, with what was found, missed and falsely boxed there (``per_image``),
  most mistakes first.

May import: core.imaging, core.jobs.workspace, core.viewing (its viewer payload types).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.imaging.arrays import map_label_values
from core.imaging.image_io import read_image
from core.jobs.workspace import JobWorkspace
from core.viewing.viewer_data import PREDICTION_COLOURS, BoxSet


@dataclass(frozen=True)
class TestCase:
    image: np.ndarray              # (X, Y) or (X, Y, Z), MONAI's axis order
    truth: np.ndarray              # labels 0..N on the image's grid
    prediction: np.ndarray         # labels 0..N on the image's grid
    affine: np.ndarray | None      # voxel -> RAS mm (volumes)
    spacing: list[float]


def case_choices(report: dict) -> list[dict]:
    """The report's test cases, worst mean Dice first (where a reviewer looks first), each
    with a label for a picker."""
    cases = [c for c in report.get("per_case") or [] if c.get("prediction_path")]
    cases.sort(key=lambda c: (np.nan_to_num(c.get("mean_dice"), nan=-1.0),
                              str(c.get("image_path"))))
    return [{**c, "label": _label(c)} for c in cases]


def _label(case: dict) -> str:
    ref = case["image_path"]
    name = Path(str(ref[0] if isinstance(ref, list) else ref)).name
    dice = case.get("mean_dice")
    return f"{name} — Dice {dice:.3f}" if dice is not None and np.isfinite(dice) else name


def _label_values(workspace: Path, image_path) -> list[int] | None:
    ws = JobWorkspace(Path(workspace))
    try:
        rows = _rows(ws.read_json(ws.test_index))
    except (OSError, ValueError):
        return None
    for row in rows:
        if row.get("image_path") == image_path:
            return row.get("label_values")
    return None


def load_case(workspace: Path, case: dict) -> TestCase:
    """Read one test case's image, ground truth and prediction (first channel of the image).
    Raises FileNotFoundError / ImageReadError, or ValueError when the three grids differ."""
    image, meta = read_image(case["image_path"])
    truth, _ = read_image(case["label_path"])
    prediction, _ = read_image(case["prediction_path"])
    truth = map_label_values(np.rint(truth[0]).astype(np.int32),
                             _label_values(workspace, case["image_path"]))
    prediction = np.rint(prediction[0]).astype(np.int32)
    if not (image.shape[1:] == truth.shape == prediction.shape):
        raise ValueError(f"{_label(case)}: the image {list(image.shape[1:])}, "
                         f"its mask {list(truth.shape)} and the prediction "
                         f"{list(prediction.shape)} are not on one grid")
    affine = meta.get("affine")
    return TestCase(image=image[0], truth=truth, prediction=prediction,
                    affine=None if affine is None else np.asarray(affine, dtype=float),
                    spacing=[float(s) for s in case.get("spacing") or []])


# ----------------------------------------------------------------------------- detection

def detection_case_choices(report: dict) -> list[dict]:
    """The report's test images, most mistakes (missed + false boxes) at its score threshold
    first, each with a label for a picker."""
    rows = [r for r in report.get("per_image") or [] if isinstance(r, dict)
            and r.get("image_path")]
    rows.sort(key=lambda r: (-(int(r.get("missed", 0)) + int(r.get("false_boxes", 0))),
                             -int(r.get("true_boxes", 0)), _image_name(r["image_path"])))
    return [{**r, "label": _detection_label(r)} for r in rows]


def _image_name(ref) -> str:
    return Path(str(ref[0] if isinstance(ref, list) else ref)).name


def _detection_label(row: dict) -> str:
    true, found, false = (int(row.get(k, 0)) for k in ("true_boxes", "found", "false_boxes"))
    parts = [f"{found} of {true} true boxes found" if true else "no true box"]
    if false:
        parts.append(f"{false} false box{'es' if false > 1 else ''}")
    return f"{_image_name(row['image_path'])} — {', '.join(parts)}"


def detection_box_sets(workspace: Path, case: dict, threshold: float | None) -> list[BoxSet]:
    """The true boxes (test index) and the model's boxes scoring at least ``threshold``
    (predictions.json; every box when None) of one test image, as two viewer layers. Raises
    OSError or ValueError when the files cannot be read."""
    ws = JobWorkspace(Path(workspace))
    key = case["image_path"]
    truth = next((r for r in _rows(ws.read_json(ws.test_index)) if r.get("image_path") == key),
                 {})
    predicted = next((r for r in _rows(ws.read_json(ws.predictions))
                      if r.get("image_path") == key), {})
    scores = list(predicted.get("scores") or [])
    kept = [i for i, score in enumerate(scores) if threshold is None or score >= threshold]
    boxes, labels = list(predicted.get("boxes") or []), list(predicted.get("labels") or [])
    return [BoxSet("truth", "Ground truth", list(truth.get("boxes") or []),
                   [str(x) for x in truth.get("labels") or []], "true"),
            BoxSet("prediction", "Prediction", [boxes[i] for i in kept if i < len(boxes)],
                   [str(labels[i]) if i < len(labels) else "box" for i in kept],
                   "predicted", PREDICTION_COLOURS)]


def _rows(data) -> list[dict]:
    rows = data if isinstance(data, list) else (data or {}).get("samples", [])
    return [r for r in rows if isinstance(r, dict)]
