"""Shared pieces of the system's evaluators: errors, hashes, bootstrap confidence intervals."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np


class EvaluationError(ValueError):
    """Predictions that cannot be scored; the message says what is missing or malformed."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def bootstrap_ci(n: int, metrics_of: Callable[[np.ndarray], dict[str, float] | None],
                 n_boot: int = 1000, seed: int = 0) -> dict[str, list[float]]:
    """Percentile 95% CIs: resample the n test cases with replacement and recompute.

    ``metrics_of(indices)`` returns the metrics of that resample, or None to skip it (e.g. when
    a class is missing from it)."""
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {}
    for _ in range(n_boot):
        result = metrics_of(rng.integers(0, n, n))
        for key, value in (result or {}).items():
            if value == value:  # drop NaN
                values.setdefault(key, []).append(value)
    return {k: [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]
            for k, v in values.items() if v}
