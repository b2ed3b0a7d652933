"""Operating points: the threshold that turns a score into a decision, chosen on validation
data, and the decision's quality on test data (issue 13, "decisions, not only rankings").

* ``parse_rule`` reads the rule a plan or a request states: Youden's J by default, or a target
  sensitivity or specificity ("at 95 % sensitivity", "specificity 0.9").
* ``choose_threshold`` picks the threshold on validation scores (sklearn's ROC curve): the one
  maximising sensitivity + specificity - 1, or the highest threshold reaching the target
  sensitivity (the lowest reaching the target specificity). Ties keep the threshold nearest the
  middle of the two scores around it, so a decision does not sit on a validation score.
* ``decision_rates`` gives sensitivity, specificity, PPV, NPV and accuracy at a threshold, and
  ``operating_point`` adds 95 % bootstrap CIs over the test cases.

Nothing here knows about jobs or files: the evaluators call it with arrays.

May import: core.evaluation.common, NumPy, scikit-learn.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_curve

from core.evaluation.common import bootstrap_ci

NEGATIVE_WORDS = re.compile(r"^(?:no\b|not\b|non[- ]|normal|healthy|negative|benign|control|"
                            r"absent|none|clear|cn$|hc$)", re.I)


@dataclass(frozen=True)
class Rule:
    kind: str = "youden"          # "youden", "sensitivity" or "specificity"
    target: float | None = None   # the target rate for "sensitivity" / "specificity"

    def text(self) -> str:
        if self.kind == "youden":
            return "Youden's J (sensitivity + specificity - 1) on validation"
        return f"{self.kind} >= {self.target:.0%} on validation"

    def short(self) -> str:
        """What a plan stores and a form shows: ``youden`` or ``95% sensitivity``."""
        return "youden" if self.kind == "youden" else f"{self.target * 100:g}% {self.kind}"


class OperatingPointError(ValueError):
    """The rule cannot be met or the data cannot give a threshold; the message says why."""


def parse_rule(text: str | None) -> Rule:
    """``"at 95% sensitivity"``, ``"specificity 0.9"``, ``"youden"`` or nothing (Youden)."""
    if not text or not str(text).strip():
        return Rule()
    low = str(text).lower()
    match = re.search(r"(sensitivity|specificity|recall|tpr|tnr)\D{0,20}?(\d+(?:\.\d+)?)\s*(%?)",
                      low) or re.search(r"(\d+(?:\.\d+)?)\s*(%?)\s*(?:of\s+)?"
                                        r"(sensitivity|specificity|recall|tpr|tnr)", low)
    if not match:
        if "youden" in low or "balanced" in low:
            return Rule()
        raise OperatingPointError(f"cannot read an operating point from {text!r}; say e.g. "
                                  "'at 95% sensitivity', 'at 90% specificity' or 'youden'")
    groups = match.groups()
    word, number, percent = ((groups[0], groups[1], groups[2]) if groups[0][0].isalpha()
                             else (groups[2], groups[0], groups[1]))
    value = float(number) / (100.0 if percent or float(number) > 1 else 1.0)
    if not 0.0 < value <= 1.0:
        raise OperatingPointError(f"target {number}{percent} is not a rate between 0 and 100 %")
    kind = "specificity" if word in ("specificity", "tnr") else "sensitivity"
    return Rule(kind, value)


def rule_in_request(request: str) -> Rule | None:
    """The operating point a request asks for ("... at 95% sensitivity"), or None when it names
    none (or names one that cannot be read: the plan then shows Youden and the user can edit)."""
    if not re.search(r"sensitivity|specificity|recall|\btpr\b|\btnr\b", request or "", re.I):
        return None
    try:
        rule = parse_rule(request)
    except OperatingPointError:
        return None
    return rule if rule.kind != "youden" else None


def positive_index(names: list[str]) -> int:
    """Of two class names, the one a decision detects: the one that is not normal, healthy,
    negative, benign, control or "no …" (``NORMAL`` / ``PNEUMONIA`` -> 1); the second when
    neither or both are."""
    if len(names) != 2:
        raise OperatingPointError(f"a threshold decides between two classes, not {len(names)}")
    negative = [bool(NEGATIVE_WORDS.search(n.strip())) for n in names]
    return 0 if negative == [False, True] else 1


def choose_threshold(y_true: np.ndarray, scores: np.ndarray, rule: Rule = Rule()) -> float:
    """The decision threshold (decide positive when score >= threshold) on validation data."""
    y_true, scores = np.asarray(y_true).astype(int), np.asarray(scores, dtype=np.float64)
    if y_true.shape != scores.shape or y_true.ndim != 1:
        raise OperatingPointError(f"labels {y_true.shape} and scores {scores.shape} differ")
    if len(np.unique(y_true)) < 2:
        raise OperatingPointError("the validation cases hold one class only: no threshold can "
                                  "be chosen (more validation patients of each class are needed)")
    fpr, tpr, thresholds = roc_curve(y_true, scores, drop_intermediate=False)
    finite = np.isfinite(thresholds)
    fpr, tpr, thresholds = fpr[finite], tpr[finite], thresholds[finite]
    if rule.kind == "youden":
        best = int(np.argmax(tpr - fpr))          # first (highest threshold) of ties
    elif rule.kind == "sensitivity":
        reaching = np.nonzero(tpr >= rule.target - 1e-12)[0]
        best = int(reaching[0])                   # highest threshold reaching the target
    elif rule.kind == "specificity":
        reaching = np.nonzero(1.0 - fpr >= rule.target - 1e-12)[0]
        best = int(reaching[-1])                  # lowest threshold keeping the target
    else:
        raise OperatingPointError(f"unknown rule {rule.kind!r}")
    threshold = float(thresholds[best])
    below = scores[scores < threshold]            # the midpoint to the next lower score
    return float((threshold + below.max()) / 2) if below.size else threshold


def decision_rates(y_true: np.ndarray, scores: np.ndarray, threshold: float) -> dict:
    """Sensitivity, specificity, PPV, NPV and accuracy of ``score >= threshold``."""
    y_true = np.asarray(y_true).astype(bool)
    decided = np.asarray(scores, dtype=np.float64) >= threshold
    tp, fn = int((decided & y_true).sum()), int((~decided & y_true).sum())
    fp, tn = int((decided & ~y_true).sum()), int((~decided & ~y_true).sum())

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")
    return {"sensitivity": ratio(tp, tp + fn), "specificity": ratio(tn, tn + fp),
            "ppv": ratio(tp, tp + fp), "npv": ratio(tn, tn + fn),
            "accuracy": ratio(tp + tn, len(y_true))}


def operating_point(val_true: np.ndarray, val_scores: np.ndarray, test_true: np.ndarray,
                    test_scores: np.ndarray, rule: Rule = Rule()) -> dict:
    """The threshold chosen on validation and its rates on test, with 95 % bootstrap CIs."""
    threshold = choose_threshold(val_true, val_scores, rule)
    test_true = np.asarray(test_true).astype(int)
    test_scores = np.asarray(test_scores, dtype=np.float64)
    return {"rule": rule.kind, "target": rule.target, "rule_text": rule.text(),
            "threshold": threshold,
            "validation": decision_rates(val_true, val_scores, threshold),
            "test": decision_rates(test_true, test_scores, threshold),
            "ci95": bootstrap_ci(len(test_true), lambda idx: decision_rates(
                test_true[idx], test_scores[idx], threshold))}
