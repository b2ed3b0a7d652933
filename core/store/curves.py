"""Training curves from the store's ``metrics`` table: read incrementally, grouped for drawing,
downsampled so a long run stays fast to draw, and turned into progress and an ETA.

No UI here: the Training page draws what these functions return.
"""
from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_POINTS = 2000          # at most this many points per drawn series
MIN_ETA_POINTS = 3         # progress points of the current run needed before an ETA is given
MIN_ETA_SPAN_S = 2.0       # ... spread over at least this many seconds

# values the templates log that are not curves (planning numbers, timings, throughput)
BOOKKEEPING = {"max_steps", "num_train", "epoch", "total_flos", "epoch_seconds"}
LEARNING_RATE = {"learning_rate", "lr"}
GRADIENT_NORM = {"grad_norm"}
VALIDATION_PREFIXES = ("eval_", "val_", "test_")


# ------------------------------------------------------------------------------ downsampling
def downsample_indices(y: np.ndarray, limit: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ``limit`` points that keep a curve's shape: the first and last point
    and, in each of ``(limit - 2) // 2`` equal-count buckets in between, the bucket's minimum and
    maximum (min/max bucketing), so every spike and the global extremes survive."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if limit < 4:
        raise ValueError("limit must be at least 4 (first, last, one min and one max), "
                         f"got {limit}")
    if n <= limit:
        return np.arange(n)
    inner = y[1:-1]
    buckets = (limit - 2) // 2
    size = math.ceil(len(inner) / buckets)
    buckets = math.ceil(len(inner) / size)  # the last bucket may be short; none is empty
    pad = buckets * size - len(inner)
    lows = np.concatenate([inner, np.full(pad, np.inf)]).reshape(buckets, size)
    highs = np.concatenate([inner, np.full(pad, -np.inf)]).reshape(buckets, size)
    starts = np.arange(buckets) * size + 1  # +1: inner starts at index 1 of y
    keep = np.concatenate([[0, n - 1], starts + lows.argmin(axis=1),
                           starts + highs.argmax(axis=1)])
    return np.unique(keep)  # sorted, duplicates (a bucket's min == max) removed


def downsample(x: np.ndarray, y: np.ndarray, limit: int = MAX_POINTS) -> tuple[np.ndarray,
                                                                                np.ndarray]:
    """``x`` and ``y`` reduced to at most ``limit`` points with :func:`downsample_indices`;
    points whose value is not finite are dropped first."""
    x, y = np.asarray(x), np.asarray(y, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} points but y has {len(y)}")
    finite = np.isfinite(y)
    if not finite.all():
        x, y = x[finite], y[finite]
    keep = downsample_indices(y, limit)
    return x[keep], y[keep]


def latest_run_only(steps: np.ndarray) -> np.ndarray:
    """Mask over points in logging order that drops points a later run logged again: after a
    resume, training restarts at its checkpoint's step, so an earlier point whose step is not
    below every later point's step was superseded. Within one run steps only grow, so nothing
    is dropped."""
    steps = np.asarray(steps)
    if len(steps) < 2:
        return np.ones(len(steps), dtype=bool)
    later_min = np.minimum.accumulate(steps[::-1])[::-1]  # min over i..end
    keep = np.ones(len(steps), dtype=bool)
    keep[:-1] = steps[:-1] < later_min[1:]
    return keep


# ------------------------------------------------------------------------------ reading
@dataclass
class Series:
    """One logged name, in logging order."""
    step: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    epoch: np.ndarray = field(default_factory=lambda: np.zeros(0))
    value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.value)

    def extend(self, rows: list[tuple]) -> None:
        """rows: (step, epoch, value, ts) tuples; a missing epoch becomes NaN."""
        if not rows:
            return
        arr = np.array(rows, dtype=float).reshape(-1, 4)  # None (no epoch) becomes NaN
        self.step = np.concatenate([self.step, arr[:, 0].astype(np.int64)])
        self.epoch = np.concatenate([self.epoch, arr[:, 1]])
        self.value = np.concatenate([self.value, arr[:, 2]])
        self.ts = np.concatenate([self.ts, arr[:, 3]])

    def for_drawing(self, limit: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the latest run at each step, at most ``limit`` points."""
        keep = latest_run_only(self.step)
        steps, values = self.step[keep], self.value[keep]
        order = np.argsort(steps, kind="stable")
        return downsample(steps[order], values[order], limit)


@dataclass
class JobCurves:
    """Every metric a job logged, read incrementally: :meth:`refresh` fetches only rows newer
    than the last one it saw, so a page that redraws every few seconds stays cheap however long
    the run is."""
    job_id: str
    series: dict[str, Series] = field(default_factory=dict)
    last_id: int = 0

    def refresh(self, store_path: str | Path) -> int:
        """Read new rows from the store (its own read-only connection); returns how many."""
        path = Path(store_path)
        if not path.exists():
            return 0
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            if self.last_id == 0:  # first read: one indexed query per name
                names = [r[0] for r in conn.execute(
                    "select distinct name from metrics where job_id = ?", [self.job_id])]
                top = conn.execute("select max(id) from metrics where job_id = ?",
                                   [self.job_id]).fetchone()[0] or 0
                count = 0
                for name in names:
                    rows = conn.execute(
                        "select step, epoch, value, ts from metrics where job_id = ? and "
                        "name = ? and id <= ? order by id", [self.job_id, name, top]).fetchall()
                    self.series.setdefault(name, Series()).extend(rows)
                    count += len(rows)
                self.last_id = top
                return count
            # later reads: a rowid range scan from the last row seen (+job_id: not the index)
            rows = conn.execute("select id, name, step, epoch, value, ts from metrics where "
                                "id > ? and +job_id = ? order by id",
                                [self.last_id, self.job_id]).fetchall()
        except sqlite3.OperationalError:  # the table does not exist yet
            return 0
        finally:
            conn.close()
        grouped: dict[str, list[tuple]] = {}
        for _id, name, step, epoch, value, ts in rows:
            grouped.setdefault(name, []).append((step, epoch, value, ts))
        for name, part in grouped.items():
            self.series.setdefault(name, Series()).extend(part)
        if rows:
            self.last_id = rows[-1][0]
        return len(rows)

    @property
    def empty(self) -> bool:
        return not any(len(s) for s in self.series.values())


# ------------------------------------------------------------------------------ grouping
def chart_groups(names: list[str] | set[str]) -> dict[str, list[str]]:
    """Which chart draws each logged name: ``loss`` (anything ending in loss), ``validation``
    (eval_/val_/test_ scores and nnU-Net's Dice), ``learning_rate``, ``gradient_norm``, and
    ``other`` for any further curve. Timings, throughput and planning numbers are not drawn."""
    groups: dict[str, list[str]] = {"loss": [], "validation": [], "learning_rate": [],
                                    "gradient_norm": [], "other": []}
    # training curves before validation ones, then by name
    for name in sorted(names, key=lambda n: (n.startswith(VALIDATION_PREFIXES), n)):
        if (name in BOOKKEEPING or name.endswith(("_runtime", "_per_second"))
                or name.startswith("train_") and not name.endswith("loss")):
            continue
        if name in LEARNING_RATE:
            groups["learning_rate"].append(name)
        elif name in GRADIENT_NORM:
            groups["gradient_norm"].append(name)
        elif name.endswith("loss"):
            groups["loss"].append(name)
        elif name.startswith(VALIDATION_PREFIXES) or "dice" in name:
            groups["validation"].append(name)
        else:
            groups["other"].append(name)
    return groups


# ------------------------------------------------------------------------------ progress
@dataclass(frozen=True)
class Progress:
    fraction: float                 # 0..1 of the planned steps (or epochs)
    step: int
    max_steps: int | None
    epoch: float
    epochs: float | None
    eta_s: float | None             # None: not enough points yet ("estimating…")
    eta_limited_by_budget: bool     # the time budget ends training before the planned steps
    run_started_ts: float | None    # when the current (possibly resumed) training run began


def training_progress(curves: JobCurves, planned_epochs: float | None = None,
                      time_budget_s: float | None = None, now: float | None = None) -> Progress:
    """How far training is and how long it still needs, from the logged steps and epochs of the
    current run against the planned ``max_steps`` (logged at the start of each run) or planned
    epochs, and the rate the run has made so far. The ETA is an upper bound: early stopping can
    end training sooner, and the time budget caps it. Cost: a binary search and a few reductions
    per series, so it stays cheap on runs with millions of points."""
    now = time.time() if now is None else now
    max_steps, run_start = None, None
    planned = curves.series.get("max_steps")
    if planned is not None and len(planned):
        max_steps = int(planned.value[-1]) if planned.value[-1] > 0 else None
        run_start = float(planned.ts[-1])

    def fraction(step: float, epoch: float) -> float:
        done = 0.0
        if max_steps:
            done = max(done, step / max_steps)
        if planned_epochs:
            done = max(done, epoch / float(planned_epochs))
        return min(max(done, 0.0), 1.0)

    points, first, last = 0, None, None     # (ts, step, epoch) of the run's first/last point
    top_step, top_epoch = 0, 0.0
    for name, series in curves.series.items():
        if name in BOOKKEEPING or not len(series):
            continue
        # rows of one name are in logging order, so their times only grow: the current run is
        # a suffix (a resume logs max_steps again when it begins)
        start = 0 if run_start is None else int(np.searchsorted(series.ts, run_start, "left"))
        if start >= len(series):
            continue
        ts, steps, epochs = series.ts[start:], series.step[start:], series.epoch[start:]
        points += len(ts)
        top_step = max(top_step, int(steps.max()))
        if np.isfinite(epochs).any():
            top_epoch = max(top_epoch, float(np.nanmax(epochs)))
        head = (float(ts[0]), float(steps[0]), float(np.nan_to_num(epochs[0])))
        tail = (float(ts[-1]), float(steps[-1]), float(np.nan_to_num(epochs[-1])))
        first = head if first is None or head[0] < first[0] else first
        last = tail if last is None or tail[0] >= last[0] else last
    if last is None:
        return Progress(0.0, 0, max_steps, 0.0, planned_epochs, None, False, run_start)
    current = fraction(top_step, top_epoch)
    eta = None
    span = last[0] - first[0]
    gained = fraction(last[1], last[2]) - fraction(first[1], first[2])
    if points >= MIN_ETA_POINTS and span >= MIN_ETA_SPAN_S and gained > 0:
        rate = gained / span
        eta = max(0.0, (1.0 - current) / rate - max(0.0, now - last[0]))
    limited = False
    if time_budget_s and eta is not None:
        started = run_start if run_start is not None else first[0]
        budget_left = max(0.0, float(time_budget_s) - (now - started))
        if budget_left < eta:
            eta, limited = budget_left, True
    return Progress(current, top_step, max_steps, top_epoch, planned_epochs, eta, limited,
                    run_start)
