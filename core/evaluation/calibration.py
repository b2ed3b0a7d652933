"""Calibration: how far a model's probabilities are from the frequencies they claim, and the one-
parameter fix (issue 13, "calibration").

* ``fit_temperature`` fits temperature scaling (Guo et al., 2017, "On calibration of modern
  neural networks") on validation probabilities: one scalar T that divides the logits, chosen to
  minimise the validation negative log-likelihood against Platt's (1999) prior-corrected
  targets — a class seen N times in validation is aimed at (N + 1) / (N + 2), not 1 — so a small
  validation set that the model happens to separate perfectly cannot drive T towards 0 and make
  every probability 0 or 1. Probabilities are enough to refit it: for a
  softmax ``log p`` differs from the logits by a constant per case, for a sigmoid ``logit(p)`` is
  the logit. T never changes a softmax argmax and never reorders a sigmoid's scores, so AUC and
  the argmax decision stay; only the confidence moves.
* ``apply_temperature`` rescales probabilities with a fitted T (the exported model applies the
  same T to its logits).
* ``expected_calibration_error`` and ``reliability`` give ECE (15 equal-width bins) and the bins
  of a reliability diagram: top-label confidence vs accuracy for single-label models, every
  label's probability vs its frequency for multi-label ones; ``ece_uncertainty`` says how much
  of a measured ECE a test set of that size can tell from chance.

Nothing here knows about jobs or files. May import: NumPy, SciPy.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

BINS = 15
T_RANGE = (0.2, 10.0)   # a saturated validation set must not sharpen a model without bound
MIN_CASES = 10          # fewer validation cases than this: no fit, T = 1
EPS = 1e-7


def _log_probs(probs: np.ndarray, multi_label: bool) -> np.ndarray:
    """Logits up to a per-case constant (softmax) or exactly (sigmoid)."""
    p = np.clip(np.asarray(probs, dtype=np.float64), EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p) if multi_label else np.log(p)


def apply_temperature(probs: np.ndarray, temperature: float, multi_label: bool) -> np.ndarray:
    """Probabilities of the logits divided by ``temperature``."""
    z = _log_probs(probs, multi_label) / float(temperature)
    if multi_label:
        return 1.0 / (1.0 + np.exp(-z))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _nll(probs: np.ndarray, targets: np.ndarray, multi_label: bool) -> float:
    """Cross-entropy against soft targets: (N, K) class distributions (single-label) or (N, K)
    probabilities of each label (multi-label)."""
    p = np.clip(probs, EPS, 1 - EPS)
    if multi_label:
        return float(-(targets * np.log(p) + (1 - targets) * np.log(1 - p)).mean())
    return float(-(targets * np.log(p)).sum(axis=1).mean())


def platt_targets(targets: np.ndarray, n_classes: int, multi_label: bool) -> np.ndarray:
    """Prior-corrected targets (Platt, 1999): a case of a class seen N times is aimed at
    (N + 1) / (N + 2) for its class, the rest shared by the others; a label's positives at
    (N+ + 1) / (N+ + 2) and its negatives at 1 / (N- + 2)."""
    targets = np.asarray(targets).astype(int)
    if multi_label:
        pos = targets.sum(axis=0)
        neg = len(targets) - pos
        return np.where(targets == 1, (pos + 1) / (pos + 2), 1 / (neg + 2))
    counts = np.bincount(targets, minlength=n_classes)
    hit = (counts[targets] + 1) / (counts[targets] + 2)
    soft = np.repeat(((1 - hit) / max(n_classes - 1, 1))[:, None], n_classes, axis=1)
    soft[np.arange(len(targets)), targets] = hit
    return soft


def fit_temperature(probs: np.ndarray, targets: np.ndarray, multi_label: bool = False) -> dict:
    """``{"temperature", "nll_before", "nll_after", "fitted", "note"}`` from validation
    ``probs`` (N, K) and ``targets`` (N,) class indices or (N, K) 0/1 labels."""
    probs = np.asarray(probs, dtype=np.float64)
    targets = np.asarray(targets).astype(int)
    if len(probs) < MIN_CASES or (not multi_label and len(np.unique(targets)) < 2):
        return {"temperature": 1.0, "fitted": False, "nll_before": None, "nll_after": None,
                "note": f"not calibrated: {len(probs)} validation case(s) of "
                        f"{len(np.unique(targets)) if not multi_label else 'some'} class(es); "
                        f"temperature scaling needs at least {MIN_CASES} of two classes"}
    soft = platt_targets(targets, probs.shape[1], multi_label)
    before = _nll(probs, soft, multi_label)
    result = minimize_scalar(
        lambda log_t: _nll(apply_temperature(probs, math.exp(log_t), multi_label), soft,
                           multi_label),
        bounds=(math.log(T_RANGE[0]), math.log(T_RANGE[1])), method="bounded",
        options={"xatol": 1e-4})
    temperature = float(math.exp(result.x))
    after = _nll(apply_temperature(probs, temperature, multi_label), soft, multi_label)
    if after > before:  # the bounded search can end above T = 1's likelihood: keep T = 1
        temperature, after = 1.0, before
    at_bound = min(abs(temperature - b) / b for b in T_RANGE) < 1e-2
    return {"temperature": temperature, "fitted": True, "nll_before": before, "nll_after": after,
            "note": f"the fit reached the bound T = {temperature:.2f}" if at_bound else ""}


def _confidences(probs: np.ndarray, targets: np.ndarray,
                 multi_label: bool) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) pairs the bins are filled with."""
    probs = np.asarray(probs, dtype=np.float64)
    targets = np.asarray(targets).astype(int)
    if multi_label:
        return probs.ravel(), targets.ravel().astype(np.float64)
    return probs.max(axis=1), (probs.argmax(axis=1) == targets).astype(np.float64)


def _bins(conf: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The bin edges and each confidence's bin (equal width on [0, 1])."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    return edges, np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)


def reliability(probs: np.ndarray, targets: np.ndarray, multi_label: bool = False,
                bins: int = BINS) -> list[dict]:
    """Non-empty bins: ``{"lower", "upper", "confidence", "accuracy", "count"}``."""
    conf, correct = _confidences(probs, targets, multi_label)
    edges, which = _bins(conf, bins)
    rows = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append({"lower": float(edges[b]), "upper": float(edges[b + 1]),
                         "confidence": float(conf[inside].mean()),
                         "accuracy": float(correct[inside].mean()), "count": int(inside.sum())})
    return rows


def expected_calibration_error(probs: np.ndarray, targets: np.ndarray,
                               multi_label: bool = False, bins: int = BINS) -> float:
    """Sum over bins of (cases in bin / all) x |accuracy - confidence|."""
    rows = reliability(probs, targets, multi_label, bins)
    total = sum(r["count"] for r in rows)
    return float(sum(r["count"] / total * abs(r["accuracy"] - r["confidence"]) for r in rows)) \
        if total else float("nan")


def _ece_binned(conf: np.ndarray, correct: np.ndarray, which: np.ndarray, bins: int) -> float:
    n = np.bincount(which, minlength=bins)
    gap = np.abs(np.bincount(which, correct, bins) - np.bincount(which, conf, bins))
    return float(gap.sum() / max(n.sum(), 1))


def ece_uncertainty(probs: np.ndarray, targets: np.ndarray, multi_label: bool = False,
                    bins: int = BINS, draws: int = 500, seed: int = 0) -> dict:
    """How far an ECE measured on these cases can be trusted.

    * ``ci``: 95% percentile bootstrap interval of the ECE (cases resampled);
    * ``noise_floor``: the 95th percentile of the ECE a *perfectly calibrated* model with the
      same confidences would show on this many cases (outcomes drawn from the confidences:
      Broecker and Smith's consistency resampling, 2007). An ECE below it cannot be told from
      chance; on a few dozen cases it is often above 0.1."""
    conf, correct = _confidences(probs, targets, multi_label)
    if not len(conf):
        return {"ci": None, "noise_floor": None, "draws": 0}
    _, which = _bins(conf, bins)
    rng = np.random.default_rng(seed)
    boot, floor = [], []
    for _ in range(draws):
        pick = rng.integers(0, len(conf), len(conf))
        boot.append(_ece_binned(conf[pick], correct[pick], which[pick], bins))
        floor.append(_ece_binned(conf, (rng.random(len(conf)) < conf).astype(float), which, bins))
    return {"ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "noise_floor": float(np.percentile(floor, 95)), "draws": draws}


def calibration_report(val_probs: np.ndarray, val_targets: np.ndarray, test_probs: np.ndarray,
                       test_targets: np.ndarray, multi_label: bool = False) -> dict:
    """Temperature fitted on validation; ECE and reliability bins on test before and after."""
    fit = fit_temperature(val_probs, val_targets, multi_label)
    after = apply_temperature(test_probs, fit["temperature"], multi_label)
    return {"method": "temperature scaling fitted on validation (NLL)", **fit, "bins": BINS,
            "ece_before": expected_calibration_error(test_probs, test_targets, multi_label),
            "ece_after": expected_calibration_error(after, test_targets, multi_label),
            "ece_after_uncertainty": ece_uncertainty(after, test_targets, multi_label),
            "reliability_before": reliability(test_probs, test_targets, multi_label),
            "reliability_after": reliability(after, test_targets, multi_label)}
