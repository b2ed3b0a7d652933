"""The decision layer of a diagnosis model: the temperature that calibrates its probabilities and
the threshold(s) that turn them into decisions, fitted on the validation predictions the training
template wrote (never on test data), or taken as stored when a model is scored on another
dataset.

* Single-label, two classes: one threshold on the positive class's calibrated probability (the
  class that is not "normal", "healthy", …: ``operating_point.positive_index``), chosen by the
  plan's rule (Youden's J unless it asks for a sensitivity or a specificity).
* Single-label, more classes: argmax (a temperature does not change it).
* Multi-label: one threshold per label, by the same rule, where validation has both outcomes of
  the label; 0.5 otherwise.

``Decision`` is what a model keeps (report.json ``decision``; the inference page and exports
read it). May import: core.evaluation (calibration, operating_point, common), NumPy.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from core.evaluation.calibration import apply_temperature
from core.evaluation.common import EvaluationError
from core.evaluation.operating_point import (OperatingPointError, Rule, choose_threshold,
                                             positive_index)

VAL_PREDICTIONS = "val_predictions.json"


@dataclass
class Decision:
    temperature: float = 1.0
    positive_class: str | None = None       # binary: the class a threshold detects
    threshold: float | None = None          # binary: on the positive class's probability
    thresholds: dict[str, float] = field(default_factory=dict)  # multi-label: per label
    rule: str = "argmax"                    # how the thresholds were chosen
    source: str = "default"                 # "validation", "stored" or "default"
    notes: list[str] = field(default_factory=list)

    def calibrated(self, probs: np.ndarray, multi_label: bool) -> np.ndarray:
        return apply_temperature(probs, self.temperature, multi_label) \
            if self.temperature != 1.0 else np.asarray(probs, dtype=np.float64)

    def predict(self, calibrated: np.ndarray, names: list[str], multi_label: bool) -> np.ndarray:
        """Class indices (single-label) or a 0/1 matrix (multi-label)."""
        if multi_label:
            cut = np.array([self.thresholds.get(n, 0.5) for n in names])
            return (calibrated >= cut).astype(int)
        if self.threshold is not None and len(names) == 2 and self.positive_class in names:
            pos = names.index(self.positive_class)
            return np.where(calibrated[:, pos] >= self.threshold, pos, 1 - pos)
        return calibrated.argmax(axis=1)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> "Decision":
        data = dict(data or {})
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        decision = cls(**known)
        decision.temperature = float(decision.temperature or 1.0)
        if decision.temperature <= 0:
            raise EvaluationError(f"a stored temperature must be positive, got "
                                  f"{decision.temperature}")
        return decision


def fit_thresholds(decision: Decision, val_cal: np.ndarray, val_true: np.ndarray,
                   names: list[str], multi_label: bool, rule: Rule) -> Decision:
    """Set the decision's threshold(s) from calibrated validation probabilities."""
    if multi_label:
        for c, name in enumerate(names):
            try:
                decision.thresholds[name] = choose_threshold(val_true[:, c], val_cal[:, c], rule)
            except OperatingPointError as exc:
                decision.thresholds[name] = 0.5
                decision.notes.append(f"{name}: threshold 0.5 ({exc})")
        decision.rule = rule.kind
        return decision
    if len(names) != 2:
        return decision  # argmax
    pos = positive_index(names)
    decision.positive_class = names[pos]
    try:
        decision.threshold = choose_threshold((val_true == pos).astype(int), val_cal[:, pos], rule)
        decision.rule = rule.kind
    except OperatingPointError as exc:
        decision.threshold = 0.5
        decision.notes.append(f"threshold 0.5 (the argmax): {exc}")
    return decision


def read_val_predictions(path: Path, train: dict, test: dict, label_dict: dict,
                         multi_label: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Validation probabilities and their ground truth (from train.json), or None when the run
    wrote none (a model trained before decisions were fitted). Raises EvaluationError when the
    file names test images or images outside the training index."""
    if not path.is_file():
        return None
    try:
        predictions = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read validation predictions {path}: {exc}") from exc
    leaked = sorted(set(predictions) & set(test))
    if leaked:
        raise EvaluationError(f"{len(leaked)} validation prediction(s) are test images (e.g. "
                              f"{leaked[0]}): thresholds and calibration must not see test data")
    unknown = sorted(set(predictions) - set(train))
    if unknown:
        raise EvaluationError(f"{len(unknown)} validation prediction(s) are not training images "
                              f"of this index, e.g. {unknown[0]}")
    paths = sorted(predictions)
    n = len(label_dict)
    probs = np.array([predictions[p] for p in paths], dtype=np.float64).reshape(len(paths), -1)
    if probs.shape[1:] != (n,) or not np.all(np.isfinite(probs)):
        raise EvaluationError(f"validation predictions must be {n} finite probabilities per "
                              f"image; got shape {probs.shape}")
    if multi_label:
        truth = np.zeros((len(paths), n), dtype=int)
        for row, p in enumerate(paths):
            for name in train[p]:
                truth[row, label_dict[name]] = 1
    else:
        truth = np.array([label_dict[train[p][0]] for p in paths])
    return probs, truth
