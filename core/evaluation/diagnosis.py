"""Diagnosis evaluator: AUC (macro), accuracy, F1 (macro), per-class sensitivity/specificity,
confusion matrix, calibration and the decision's operating point, with 95% bootstrap CIs. Ground
truth is read from the index, never taken from the template.

Single-label (every image has exactly one label): probabilities sum to one; two classes are
decided at a threshold on the positive class, more classes by argmax; AUC is one-vs-rest macro.
Multi-label (any image with zero or several labels): one independent probability per label,
decided at a threshold per label; AUC is the macro mean over labels that have positives and
negatives in the test set, accuracy is the per-decision (Hamming) accuracy.

The temperature and thresholds come from the validation predictions the template wrote
(core.evaluation.decisions); every test metric is of the calibrated probabilities and those
decisions, which are what the model gives a user.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import confusion_matrix, roc_auc_score

from core.evaluation.calibration import (BINS, calibration_report, ece_uncertainty,
                                         expected_calibration_error, reliability)
from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256
from core.evaluation.decisions import (VAL_PREDICTIONS, Decision, fit_thresholds,
                                       read_val_predictions)
from core.evaluation.operating_point import (OperatingPointError, Rule, decision_rates,
                                             parse_rule)


def is_multi_label(*indexes: dict) -> bool:
    return any(len(labels) != 1 for index in indexes for labels in index.values())


def binary_auc(y_true: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney statistic (ties count one half): the same number as
    scikit-learn's ``roc_auc_score``, fast enough for a thousand bootstrap resamples."""
    positive = np.asarray(y_true).astype(bool)
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Macro F1 from per-class counts (a class never true nor predicted scores 0)."""
    denominator = 2 * tp + fp + fn
    return float(np.mean(np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)))


def diagnosis_metrics(y_true: np.ndarray, probs: np.ndarray, n_classes: int,
                      y_pred: np.ndarray | None = None) -> dict:
    """Accuracy and macro F1 of the decisions ``y_pred`` (default: argmax), AUC of ``probs``
    (one-vs-rest macro; NaN when a class is absent)."""
    y_true = np.asarray(y_true).astype(int)
    y_pred = probs.argmax(axis=1) if y_pred is None else np.asarray(y_pred).astype(int)
    cm = np.bincount(y_true * n_classes + y_pred,
                     minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    tp = np.diag(cm)
    if n_classes == 2:
        auc = binary_auc(y_true == 1, probs[:, 1])
    else:
        auc = float(np.mean([binary_auc(y_true == c, probs[:, c]) for c in range(n_classes)]))
    return {"accuracy": float(tp.sum() / max(len(y_true), 1)),
            "f1_macro": _f1(tp, cm.sum(axis=0) - tp, cm.sum(axis=1) - tp), "auc": auc}


def multi_label_metrics(y_true: np.ndarray, probs: np.ndarray,
                        y_pred: np.ndarray | None = None) -> dict:
    y_true = np.asarray(y_true).astype(bool)
    y_pred = (probs >= 0.5) if y_pred is None else np.asarray(y_pred).astype(bool)
    aucs = [binary_auc(y_true[:, c], probs[:, c]) for c in range(y_true.shape[1])
            if 0 < y_true[:, c].sum() < len(y_true)]
    tp = (y_true & y_pred).sum(axis=0)
    return {"accuracy": float((y_pred == y_true).mean()),
            "f1_macro": _f1(tp, (~y_true & y_pred).sum(axis=0), (y_true & ~y_pred).sum(axis=0)),
            "auc": float(np.mean(aucs)) if aucs else float("nan")}


def _rates(tp: int, fn: int, fp: int, tn: int, support: int) -> dict:
    return {"sensitivity": tp / (tp + fn) if tp + fn else float("nan"),
            "specificity": tn / (tn + fp) if tn + fp else float("nan"), "support": support}


def _load(datapath: Path, predictions_path: Path) -> tuple[dict, dict, dict, dict]:
    test = json.loads((datapath / "test.json").read_text())
    train_path = datapath / "train.json"
    train = json.loads(train_path.read_text()) if train_path.exists() else {}
    label_dict = json.loads((datapath / "label_dict.json").read_text())
    try:
        predictions = json.loads(Path(predictions_path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read predictions {predictions_path}: {exc}") from exc
    missing = [p for p in test if p not in predictions]
    if missing:
        raise EvaluationError(f"{len(missing)} of {len(test)} test images have no prediction, "
                              f"e.g. {missing[0]}")
    return test, train, label_dict, predictions


def _truth(index: dict, paths: list[str], label_dict: dict, multi: bool) -> np.ndarray:
    if not multi:
        return np.array([label_dict[index[p][0]] for p in paths])
    y_true = np.zeros((len(paths), len(label_dict)), dtype=int)
    for row, p in enumerate(paths):
        for name in index[p]:
            y_true[row, label_dict[name]] = 1
    return y_true


def _decide(val, probs, y_true, names, multi, rule, stored) -> tuple[Decision, dict]:
    """The decision (temperature, thresholds) and the calibration block of the report."""
    if val is not None:
        val_probs, val_true = val
        calibration = calibration_report(val_probs, val_true, probs, y_true, multi)
        decision = Decision(temperature=calibration["temperature"], source="validation")
        decision = fit_thresholds(decision, decision.calibrated(val_probs, multi), val_true,
                                  names, multi, rule)
        calibration["num_val"] = len(val_true)
        return decision, calibration
    decision = Decision.from_json(stored) if stored else Decision(
        notes=["the run wrote no validation predictions: no calibration, argmax / 0.5"])
    if stored:
        decision.source = "stored"
    after = decision.calibrated(probs, multi)
    return decision, {"method": "stored temperature" if stored else "none",
                      "temperature": decision.temperature, "fitted": False,
                      "ece_before": expected_calibration_error(probs, y_true, multi),
                      "ece_after": expected_calibration_error(after, y_true, multi),
                      "ece_after_uncertainty": ece_uncertainty(after, y_true, multi),
                      "reliability_before": reliability(probs, y_true, multi),
                      "reliability_after": reliability(after, y_true, multi),
                      "bins": BINS, "note": "; ".join(decision.notes)}


def _binary_point(decision: Decision, val, names: list[str], cal: np.ndarray,
                  y_true: np.ndarray, rule: Rule) -> dict:
    """Sensitivity, specificity, PPV, NPV and accuracy at the threshold (their CIs come from
    the evaluator's one bootstrap, see ``_with_rates``)."""
    pos = names.index(decision.positive_class)
    test_pos, test_scores = (y_true == pos).astype(int), cal[:, pos]
    point = {"rule": decision.rule,
             "target": rule.target if decision.source == "validation" else None,
             "rule_text": rule.text() if decision.source == "validation" else
             f"threshold stored with the model ({decision.source})",
             "positive_class": decision.positive_class, "threshold": decision.threshold,
             "source": decision.source, "test": decision_rates(test_pos, test_scores,
                                                               decision.threshold)}
    if val is not None:
        val_cal = decision.calibrated(val[0], False)
        point["validation"] = decision_rates((val[1] == pos).astype(int), val_cal[:, pos],
                                             decision.threshold)
        point["num_val"] = len(val[1])
    return point


def evaluate_diagnosis(datapath: str | Path, predictions_path: str | Path,
                       val_predictions_path: str | Path | None = None,
                       operating_rule: str | None = None, decision: dict | None = None) -> dict:
    """Score predictions ``{image_path: [p_label0, p_label1, ...]}`` against ``test.json``.

    Validation predictions (default: ``val_predictions.json`` beside the predictions) give the
    temperature and the threshold(s) by ``operating_rule`` (Youden's J unless it names a target
    sensitivity or specificity); without them a stored ``decision`` (a model scored on another
    dataset) is applied as it is, else argmax / 0.5."""
    datapath, predictions_path = Path(datapath), Path(predictions_path)
    test, train, label_dict, predictions = _load(datapath, predictions_path)
    n_classes = len(label_dict)
    names = sorted(label_dict, key=label_dict.get)
    paths = sorted(test)
    probs = np.array([predictions[p] for p in paths], dtype=np.float64)
    if probs.shape != (len(paths), n_classes) or not np.all(np.isfinite(probs)):
        raise EvaluationError(f"predictions must be {n_classes} finite probabilities per image; "
                              f"got shape {probs.shape}")
    multi = is_multi_label(test, train)
    try:
        rule = parse_rule(operating_rule)
    except OperatingPointError as exc:
        raise EvaluationError(str(exc)) from exc
    val_path = Path(val_predictions_path) if val_predictions_path else \
        predictions_path.with_name(VAL_PREDICTIONS)
    val = read_val_predictions(val_path, train, test, label_dict, multi)
    y_true = _truth(test, paths, label_dict, multi)
    chosen, calibration = _decide(val, probs, y_true, names, multi, rule, decision)
    cal = chosen.calibrated(probs, multi)
    y_pred = chosen.predict(cal, names, multi)
    point = None
    if multi:
        metrics = multi_label_metrics(y_true, cal, y_pred)
        per_class = {}
        for c, name in enumerate(names):
            t, d = y_true[:, c].astype(bool), y_pred[:, c].astype(bool)
            per_class[name] = _rates(int((t & d).sum()), int((t & ~d).sum()),
                                     int((~t & d).sum()), int((~t & ~d).sum()), int(t.sum()))
            per_class[name]["threshold"] = chosen.thresholds.get(name, 0.5)
            if 0 < t.sum() < len(t):
                per_class[name]["auc"] = float(roc_auc_score(t, cal[:, c]))
        ci = bootstrap_ci(len(paths), lambda idx: multi_label_metrics(y_true[idx], cal[idx],
                                                                      y_pred[idx]))
        confusion = None
    else:
        metrics = diagnosis_metrics(y_true, cal, n_classes, y_pred)
        cm = confusion_matrix(y_true, y_pred, labels=list(range(n_classes)))
        per_class = {}
        for i, name in enumerate(names):
            tp = int(cm[i, i]); fn = int(cm[i].sum() - tp); fp = int(cm[:, i].sum() - tp)
            per_class[name] = _rates(tp, fn, fp, int(cm.sum() - tp - fn - fp), int(cm[i].sum()))
        if chosen.threshold is not None and chosen.positive_class:
            point = _binary_point(chosen, val, names, cal, y_true, rule)
            metrics.update(sensitivity=point["test"]["sensitivity"],
                           specificity=point["test"]["specificity"])
        ci = bootstrap_ci(len(paths), lambda idx: _with_rates(diagnosis_metrics(
            y_true[idx], cal[idx], n_classes, y_pred[idx]), point, y_true[idx], y_pred[idx],
            names) if len(np.unique(y_true[idx])) == n_classes else None)
        confusion = {"labels": names, "matrix": cm.tolist()}
        if point is not None:
            point["ci95"] = {k: ci[k] for k in point["test"] if k in ci}
    metrics["ece"] = calibration["ece_after"]
    return {
        "task": "diagnosis", "multi_label": multi, "metrics": metrics, "ci95": ci,
        "per_class": per_class, "confusion_matrix": confusion, "num_test": len(paths),
        "operating_point": point, "calibration": calibration, "decision": chosen.to_json(),
        "evaluator": "core.evaluation.diagnosis",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }


def _with_rates(metrics: dict, point: dict | None, y_true: np.ndarray, y_pred: np.ndarray,
                names: list[str]) -> dict:
    """A bootstrap resample's metrics plus, for a binary decision, the sensitivity,
    specificity, PPV and NPV of its positive class."""
    if point is not None:
        pos = names.index(point["positive_class"])
        t, d = y_true == pos, y_pred == pos
        tp, fn, fp, tn = (int(x.sum()) for x in (t & d, t & ~d, ~t & d, ~t & ~d))
        for key, (a, b) in (("sensitivity", (tp, tp + fn)), ("specificity", (tn, tn + fp)),
                            ("ppv", (tp, tp + fp)), ("npv", (tn, tn + fn))):
            metrics[key] = a / b if b else float("nan")
    return metrics
