"""Diagnosis evaluator: AUC (macro), accuracy, F1, per-class sensitivity/specificity, confusion
matrix, 95% bootstrap CIs. Ground truth is read from the index, never taken from the template.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, roc_auc_score

from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256


def _auc(y_true: np.ndarray, probs: np.ndarray, n_classes: int) -> float:
    if n_classes == 2:
        return float(roc_auc_score(y_true, probs[:, 1]))
    return float(roc_auc_score(y_true, probs, multi_class="ovr", average="macro",
                               labels=list(range(n_classes))))


def diagnosis_metrics(y_true: np.ndarray, probs: np.ndarray, n_classes: int) -> dict:
    y_pred = probs.argmax(axis=1)
    out = {"accuracy": float(accuracy_score(y_true, y_pred)),
           "f1_macro": float(f1_score(y_true, y_pred, average="macro",
                                      labels=list(range(n_classes)), zero_division=0))}
    try:
        out["auc"] = _auc(y_true, probs, n_classes)
    except ValueError:  # a class absent from the test set
        out["auc"] = float("nan")
    return out


def evaluate_diagnosis(datapath: str | Path, predictions_path: str | Path) -> dict:
    """Score predictions ``{image_path: [p_class0, p_class1, ...]}`` against ``test.json``."""
    datapath = Path(datapath)
    test = json.loads((datapath / "test.json").read_text())
    label_dict = json.loads((datapath / "label_dict.json").read_text())
    try:
        predictions = json.loads(Path(predictions_path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"cannot read predictions {predictions_path}: {exc}") from exc
    n_classes = len(label_dict)
    missing = [p for p in test if p not in predictions]
    if missing:
        raise EvaluationError(f"{len(missing)} of {len(test)} test images have no prediction, "
                              f"e.g. {missing[0]}")
    paths = sorted(test)
    y_true = np.array([label_dict[test[p][0]] for p in paths])
    probs = np.array([predictions[p] for p in paths], dtype=np.float64)
    if probs.shape != (len(paths), n_classes) or not np.all(np.isfinite(probs)):
        raise EvaluationError(f"predictions must be {n_classes} finite probabilities per image; "
                              f"got shape {probs.shape}")
    metrics = diagnosis_metrics(y_true, probs, n_classes)
    names = sorted(label_dict, key=label_dict.get)
    y_pred = probs.argmax(axis=1)
    cm = confusion_matrix(y_true, y_pred, labels=list(range(n_classes)))
    per_class = {}
    for i, name in enumerate(names):
        tp = int(cm[i, i]); fn = int(cm[i].sum() - tp); fp = int(cm[:, i].sum() - tp)
        tn = int(cm.sum() - tp - fn - fp)
        per_class[name] = {"sensitivity": tp / (tp + fn) if tp + fn else float("nan"),
                           "specificity": tn / (tn + fp) if tn + fp else float("nan"),
                           "support": int(cm[i].sum())}
    return {
        "task": "diagnosis", "metrics": metrics,
        "ci95": bootstrap_ci(len(paths), lambda idx: diagnosis_metrics(
            y_true[idx], probs[idx], n_classes) if len(np.unique(y_true[idx])) == n_classes
            else None), "per_class": per_class,
        "confusion_matrix": {"labels": names, "matrix": cm.tolist()},
        "num_test": len(paths), "evaluator": "core.evaluation.diagnosis",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }
