"""Operating points: the threshold that turns a score into a decision, chosen on validation
data, and the decision's quality on test data (issue 13, "decisions, not only rankings").

* ``parse_rule`` (core.planning.operating_rule, re-exported) reads the rule a plan or a request
  states: Youden's J by default, or a target sensitivity or specificity ("at 95 % sensitivity").
* ``choose_threshold`` picks the threshold on validation scores (sklearn's ROC curve): the one
  maximising sensitivity + specificity - 1, or the highest threshold reaching the target
  sensitivity (the lowest reaching the target specificity). Ties keep the threshold nearest the
  middle of the two scores around it, so a decision does not sit on a validation score.
* ``decision_rates`` gives sensitivity, specificity, PPV, NPV and accuracy at a threshold, and
  ``operating_point`` adds 95 % bootstrap CIs over the test cases.

Nothing here knows about jobs or files: the evaluators call it with arrays.

May import: core.evaluation.common, core.planning.operating_rule, NumPy, scikit-learn.
"""
from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_curve

from core.evaluation.common import bootstrap_ci
from core.planning.operating_rule import (NEGATIVE_WORDS, OperatingPointError, Rule, parse_rule,
                                          positive_index, rule_in_request)

__all__ = ["NEGATIVE_WORDS", "OperatingPointError", "Rule", "parse_rule", "positive_index",
           "rule_in_request", "choose_threshold", "decision_rates", "operating_point"]


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
