"""A segmentation model's test cases for the viewer: each case's image, its ground-truth mask
and the model's predicted mask on the same grid, with the case's Dice, from the report the
system's evaluator wrote (``per_case``) and the job's test index (how the mask stores its
labels).

May import: core.imaging, core.jobs.workspace.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.imaging.arrays import map_label_values
from core.imaging.image_io import read_image
from core.jobs.workspace import JobWorkspace


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
    index = JobWorkspace(Path(workspace)).test_index
    try:
        rows = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rows = rows if isinstance(rows, list) else rows.get("samples", [])
    for row in rows:
        if isinstance(row, dict) and row.get("image_path") == image_path:
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
