"""Diagnosis evaluator: AUC (macro), accuracy, F1 (macro), per-class sensitivity/specificity,
confusion matrix, 95% bootstrap CIs. Ground truth is read from the index, never taken from the
template.

Single-label (every image has exactly one label): probabilities sum to one, the decision is the
argmax, AUC is one-vs-rest macro. Multi-label (any image with zero or several labels): one
independent probability per label, decision at 0.5; AUC is the macro mean over labels that have
positives and negatives in the test set, accuracy is the per-decision (Hamming) accuracy.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, roc_auc_score

from core.evaluation.common import EvaluationError, bootstrap_ci, file_sha256


def is_multi_label(*indexes: dict) -> bool:
    return any(len(labels) != 1 for index in indexes for labels in index.values())


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


def multi_label_metrics(y_true: np.ndarray, probs: np.ndarray) -> dict:
    y_pred = (probs >= 0.5).astype(int)
    aucs = [roc_auc_score(y_true[:, c], probs[:, c]) for c in range(y_true.shape[1])
            if 0 < y_true[:, c].sum() < len(y_true)]
    return {"accuracy": float((y_pred == y_true).mean()),
            "f1_macro": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
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


def evaluate_diagnosis(datapath: str | Path, predictions_path: str | Path) -> dict:
    """Score predictions ``{image_path: [p_label0, p_label1, ...]}`` against ``test.json``."""
    datapath = Path(datapath)
    test, train, label_dict, predictions = _load(datapath, Path(predictions_path))
    n_classes = len(label_dict)
    names = sorted(label_dict, key=label_dict.get)
    paths = sorted(test)
    probs = np.array([predictions[p] for p in paths], dtype=np.float64)
    if probs.shape != (len(paths), n_classes) or not np.all(np.isfinite(probs)):
        raise EvaluationError(f"predictions must be {n_classes} finite probabilities per image; "
                              f"got shape {probs.shape}")
    multi = is_multi_label(test, train)
    if multi:
        y_true = np.zeros((len(paths), n_classes), dtype=int)
        for row, p in enumerate(paths):
            for name in test[p]:
                y_true[row, label_dict[name]] = 1
        metrics = multi_label_metrics(y_true, probs)
        y_pred = (probs >= 0.5).astype(int)
        per_class = {}
        for c, name in enumerate(names):
            t, d = y_true[:, c], y_pred[:, c]
            per_class[name] = _rates(int((t & d).sum()), int((t & ~d.astype(bool)).sum()),
                                     int((~t.astype(bool) & d.astype(bool)).sum()),
                                     int(((1 - t) & (1 - d)).sum()), int(t.sum()))
            if 0 < t.sum() < len(t):
                per_class[name]["auc"] = float(roc_auc_score(t, probs[:, c]))
        ci = bootstrap_ci(len(paths), lambda idx: multi_label_metrics(y_true[idx], probs[idx]))
        confusion = None
    else:
        y_true = np.array([label_dict[test[p][0]] for p in paths])
        metrics = diagnosis_metrics(y_true, probs, n_classes)
        cm = confusion_matrix(y_true, probs.argmax(axis=1), labels=list(range(n_classes)))
        per_class = {}
        for i, name in enumerate(names):
            tp = int(cm[i, i]); fn = int(cm[i].sum() - tp); fp = int(cm[:, i].sum() - tp)
            per_class[name] = _rates(tp, fn, fp, int(cm.sum() - tp - fn - fp), int(cm[i].sum()))
        ci = bootstrap_ci(len(paths), lambda idx: diagnosis_metrics(
            y_true[idx], probs[idx], n_classes) if len(np.unique(y_true[idx])) == n_classes
            else None)
        confusion = {"labels": names, "matrix": cm.tolist()}
    return {
        "task": "diagnosis", "multi_label": multi, "metrics": metrics, "ci95": ci,
        "per_class": per_class, "confusion_matrix": confusion, "num_test": len(paths),
        "evaluator": "core.evaluation.diagnosis",
        "test_index_sha256": file_sha256(datapath / "test.json"),
    }
