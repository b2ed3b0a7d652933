"""Two models side by side, as plain data for the Models page: every test metric of both with
its 95% CI, the difference and which is better (and whether the intervals overlap), the primary
metric on validation, whether both were tested on the same test set, and the curves their
reports allow (ROC for diagnosis, per-class Dice for segmentation, precision-recall for
detection). Nothing is recomputed that the evaluator reported.
"""
from __future__ import annotations

from core.viewing.model_versions import LOWER_IS_BETTER, ModelEntry
from core.viewing.model_views import (METRIC_NAMES, detection_curves, diagnosis_roc,
                                      segmentation_rows)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value else None


def _ci(report: dict, key: str) -> list[float] | None:
    ci = (report.get("ci95") or {}).get(key) or []
    return [float(c) for c in ci] if len(ci) == 2 and all(_number(c) is not None
                                                          for c in ci) else None


def same_test_set(a: ModelEntry, b: ModelEntry) -> tuple[bool | None, str]:
    """(same?, a sentence): the evaluator records a digest of the test index it scored."""
    da, db = a.report.get("test_index_sha256"), b.report.get("test_index_sha256")
    na, nb = a.report.get("num_test", "?"), b.report.get("num_test", "?")
    if da and db and da == db:
        return True, f"Both were scored on the same test set ({na} cases, identical test index)."
    if da and db:
        where = (f"{a.group[0]} and {b.group[0]}" if a.group[0] != b.group[0] else
                 f"two different splits of {a.group[0]}")
        return False, (f"They were tested on different test sets ({where}: {na} and {nb} "
                       "cases), so their metrics are not directly comparable: a difference may "
                       "come from the test cases rather than the models.")
    return None, ("Whether both were tested on the same test set cannot be told: a report "
                  "does not record its test index.")


def _better(key: str, va: float | None, vb: float | None) -> int:
    """1 when the second is better, -1 when the first is, 0 when equal or unknown."""
    if va is None or vb is None or abs(va - vb) < 1e-12:
        return 0
    second = vb < va if key in LOWER_IS_BETTER else vb > va
    return 1 if second else -1


def _overlap(ca: list | None, cb: list | None) -> bool | None:
    if not ca or not cb:
        return None
    return ca[0] <= cb[1] and cb[0] <= ca[1]


def metric_rows(a: ModelEntry, b: ModelEntry) -> list[dict]:
    """Per metric: both values and CIs, the difference (second − first), which is better
    (``better``: -1 first, 1 second, 0 neither) and whether the 95% CIs overlap (None: a CI is
    missing). Test metrics in the first report's order, then the primary metric on
    validation when both recorded it."""
    ma, mb = a.report.get("metrics") or {}, b.report.get("metrics") or {}
    keys = [k for k in ma if _number(ma[k]) is not None or _number(mb.get(k)) is not None]
    keys += [k for k in mb if k not in ma and _number(mb[k]) is not None]
    rows = []
    for key in keys:
        va, vb = _number(ma.get(key)), _number(mb.get(key))
        ca, cb = _ci(a.report, key), _ci(b.report, key)
        rows.append({"key": key, "metric": METRIC_NAMES.get(key, key), "set": "test",
                     "first": va, "first_ci": ca, "second": vb, "second_ci": cb,
                     "difference": vb - va if va is not None and vb is not None else None,
                     "better": _better(key, va, vb), "overlap": _overlap(ca, cb)})
    if a.validation is not None and b.validation is not None and a.test["key"]:
        key = a.test["key"]
        rows.append({"key": key, "metric": f"{a.test['name']} on validation (kept epoch)",
                     "set": "validation", "first": a.validation, "first_ci": None,
                     "second": b.validation, "second_ci": None,
                     "difference": b.validation - a.validation,
                     "better": _better(key, a.validation, b.validation), "overlap": None})
    return rows


def verdict(a: ModelEntry, b: ModelEntry, rows: list[dict]) -> str:
    """One sentence on the primary test metric: which is higher and whether the CIs overlap."""
    key = a.test["key"]
    row = next((r for r in rows if r["key"] == key and r["set"] == "test"), None)
    if row is None or row["difference"] is None:
        return f"The {a.test['name'] or 'primary metric'} is missing for one of the models."
    if row["better"] == 0:
        return f"Both have the same test {row['metric']}."
    winner = b if row["better"] == 1 else a
    text = (f"{winner.name} has the better test {row['metric']} "
            f"({abs(row['difference']):.3f} {'lower' if key in LOWER_IS_BETTER else 'higher'})")
    if row["overlap"] is True:
        return text + ", but the 95% confidence intervals overlap: this test set cannot tell " \
                      "the two apart with confidence."
    if row["overlap"] is False:
        return text + "; the 95% confidence intervals do not overlap."
    return text + "."


def roc_pair(a: ModelEntry, b: ModelEntry) -> dict[str, dict]:
    """{model name: ROC curves} of two diagnosis models ({} for one without predictions)."""
    out = {}
    for entry in (a, b):
        positive = (entry.report.get("decision") or {}).get("positive_class")
        out[entry.name] = diagnosis_roc(entry.workspace, positive)
    return out


def dice_pair(a: ModelEntry, b: ModelEntry, n_boot: int = 500) -> dict[str, list[dict]]:
    """{model name: per-class Dice rows with CIs} of two segmentation models."""
    return {e.name: segmentation_rows(e.report, n_boot) for e in (a, b)}


def pr_pair(a: ModelEntry, b: ModelEntry) -> dict[str, dict]:
    """{model name: precision-recall curves} of two detection models."""
    return {e.name: detection_curves(e.report) for e in (a, b)}


def comparable(entries: list[ModelEntry], chosen: ModelEntry) -> list[ModelEntry]:
    """The models ``chosen`` can be compared with: the others of the same template, those of
    the same dataset and task first, then the best of each group."""
    others = [e for e in entries if e.id != chosen.id and e.template == chosen.template]
    return sorted(others, key=lambda e: (e.group != chosen.group, not e.best))  # stable
