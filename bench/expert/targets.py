"""The system-versus-expert targets, checked on one task's measurements, and the table that shows
them.

A task's measurements are one record per pipeline (``system``, ``expert``, and ``nnunet`` for
segmentation): ``wall_s``, ``metric`` (AUC or Dice, from the system's evaluator),
``accuracy_at_threshold`` and ``threshold`` (binary diagnosis), ``samples_per_s`` (training),
``ece`` and ``ece_floor`` (the ECE a perfectly calibrated model could show on that many test
cases, 95th percentile); ``error`` when the pipeline failed. A check passes, misses, or cannot
be measured (``passed`` None: a pipeline failed or a number is missing, which the table says).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

WALL_RATIO_MAX = 1.15        # system wall time / expert wall time
METRIC_MARGIN = 0.02         # system metric >= expert metric - this
NNUNET_DICE_MARGIN = 0.03    # system Dice >= nnU-Net Dice - this (equal epochs)
HIGH_AUC, MIN_ACCURACY = 0.95, 0.85   # an AUC this high must decide at least this well
THROUGHPUT_MIN = 0.9         # system samples/s >= this x expert samples/s
ECE_MAX = 0.05               # system ECE after calibration <= this on the bench sets
PIPELINES = ("system", "expert", "nnunet")
LABELS = {"system": "system", "expert": "expert", "nnunet": "nnU-Net"}


@dataclass
class Check:
    name: str
    target: str
    value: float | None
    passed: bool | None
    note: str = ""

    def verdict(self) -> str:
        return "n/a" if self.passed is None else "ok" if self.passed else "MISS"


def _num(record: dict | None, key: str) -> float | None:
    value = (record or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _failed(record: dict | None) -> str:
    if not record:
        return "not run"
    return f"failed: {record['error']}" if record.get("error") else ""


def check_task(task: dict) -> list[Check]:
    """The targets of one task: ``{"metric": "auc" | "dice", "pipelines": {...}}``."""
    runs = task["pipelines"]
    system, expert, nnunet = (runs.get(p) for p in PIPELINES)
    metric = task["metric"]
    checks = []

    def missing(*records) -> str:
        return "; ".join(f"{LABELS[p]} {_failed(r)}" for p, r in zip(PIPELINES, (system, expert,
                                                                                   nnunet))
                         if r in records and _failed(r))

    s_wall, e_wall = _num(system, "wall_s"), _num(expert, "wall_s")
    ratio = s_wall / e_wall if s_wall is not None and e_wall else None
    checks.append(Check("wall_ratio", f"system/expert wall <= {WALL_RATIO_MAX:.2f}", ratio,
                        None if ratio is None else ratio <= WALL_RATIO_MAX,
                        missing(system, expert)))
    s_metric, e_metric = _num(system, "metric"), _num(expert, "metric")
    diff = s_metric - e_metric if s_metric is not None and e_metric is not None else None
    checks.append(Check("metric_vs_expert", f"system {metric} >= expert - {METRIC_MARGIN:.2f}",
                        diff, None if diff is None else diff >= -METRIC_MARGIN - 1e-12,
                        missing(system, expert)))
    if "nnunet" in runs:
        n_metric = _num(nnunet, "metric")
        gap = s_metric - n_metric if s_metric is not None and n_metric is not None else None
        checks.append(Check("dice_vs_nnunet",
                            f"system dice >= nnU-Net - {NNUNET_DICE_MARGIN:.2f} (equal epochs)",
                            gap, None if gap is None else gap >= -NNUNET_DICE_MARGIN - 1e-12,
                            missing(system, nnunet)))
    if metric == "auc":
        for name in ("system", "expert"):
            auc, acc = _num(runs.get(name), "metric"), _num(runs.get(name), "accuracy_at_threshold")
            if auc is None or acc is None:
                passed, note = None, missing(runs.get(name)) or "no operating point"
            else:
                passed, note = not (auc >= HIGH_AUC and acc < MIN_ACCURACY), ""
            checks.append(Check(f"decision_{name}", f"{LABELS[name]}: AUC >= {HIGH_AUC:.2f} "
                                f"needs accuracy >= {MIN_ACCURACY:.2f}", acc, passed, note))
    s_rate, e_rate = _num(system, "samples_per_s"), _num(expert, "samples_per_s")
    share = s_rate / e_rate if s_rate is not None and e_rate else None
    checks.append(Check("throughput", f"system samples/s >= {THROUGHPUT_MIN:.1f} x expert", share,
                        None if share is None else share >= THROUGHPUT_MIN - 1e-12,
                        missing(system, expert)))
    if metric == "auc" and system:
        ece, floor = _num(system, "ece"), _num(system, "ece_floor")
        note = (f"a calibrated model shows up to {floor:.3f} on this test set"
                if floor is not None else missing(system) or "no calibration measured")
        checks.append(Check("ece", f"system ECE <= {ECE_MAX:.2f}", ece,
                            None if ece is None else ece <= ECE_MAX + 1e-12, note))
    return checks


def _fmt(value: float | None, digits: int = 3, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


def _cell(record: dict | None, key: str, digits: int = 3, unit: str = "") -> str:
    if record is None:
        return ""
    if record.get("error"):
        return "failed"
    return _fmt(_num(record, key), digits, unit)


def format_task(task: dict, checks: list[Check]) -> str:
    """One task's table: a column per pipeline, the targets and their verdicts."""
    runs = task["pipelines"]
    names = [p for p in PIPELINES if p in runs]
    by_name = {c.name: c for c in checks}
    metric = task["metric"]

    def verdict(*keys: str) -> str:
        found = [by_name[k] for k in keys if k in by_name]
        return "; ".join(f"{c.target}: {_fmt(c.value)} {c.verdict()}"
                         + (f" ({c.note})" if c.note and c.passed is None else "")
                         for c in found)

    def acc_cell(record: dict | None) -> str:
        if record is None or record.get("error"):
            return _cell(record, "accuracy_at_threshold")
        acc, thr = _num(record, "accuracy_at_threshold"), _num(record, "threshold")
        return "-" if acc is None else f"{acc:.3f} @{thr:.2f}" if thr is not None else f"{acc:.3f}"

    rows = [("wall time", [_cell(runs[n], "wall_s", 0, " s") for n in names],
             verdict("wall_ratio")),
            (metric, [_cell(runs[n], "metric") for n in names],
             verdict("metric_vs_expert", "dice_vs_nnunet"))]
    if metric == "auc":
        rows.append(("acc @ threshold", [acc_cell(runs[n]) for n in names],
                     verdict("decision_system", "decision_expert")))
    rows.append(("train samples/s", [_cell(runs[n], "samples_per_s", 1) for n in names],
                 verdict("throughput")))
    if metric == "auc":   # calibration is a probability's: diagnosis only
        rows += [("ECE", [_cell(runs[n], "ece") for n in names], verdict("ece")),
                 ("  chance ECE", [_cell(runs[n], "ece_floor") for n in names], "")]
    width = max(14, *(len(v) for _, values, _ in rows for v in values)) + 2
    head = f"{'':<17}" + "".join(f"{LABELS[n]:>{width}}" for n in names) + "   targets"
    lines = [f"== {task['key']}: {task.get('summary', '')}", head]
    for label, values, text in rows:
        lines.append(f"{label:<17}" + "".join(f"{v:>{width}}" for v in values)
                     + (f"   {text}" if text else ""))
    for name in names:
        if runs[name].get("error"):
            lines.append(f"  {LABELS[name]} failed: {runs[name]['error'][:300]}")
    misses = [c.name for c in checks if c.passed is False]
    lines.append(f"  targets missed: {', '.join(misses)}" if misses else "  targets missed: none"
                 if all(c.passed is not None for c in checks) else
                 "  targets missed: none measured as missed; some could not be measured")
    return "\n".join(lines)


def checks_json(checks: list[Check]) -> list[dict]:
    return [asdict(c) | {"verdict": c.verdict()} for c in checks]
