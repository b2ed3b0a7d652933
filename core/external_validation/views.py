"""An external evaluation's internal and external results side by side, as plain data (rows with
95% CIs), as fixed-width text (the CLI) and as Markdown (the chat), with the notes a reader needs:
how decisions were made, classes the external set lacks, and that the model is for research."""
from __future__ import annotations

import math

from core.viewing.model_views import METRIC_NAMES

EXTRA_NAMES = {"sensitivity": "Sensitivity", "specificity": "Specificity",
               "ece": "Calibration error (ECE)"}
HEADLINE = {"diagnosis": "auc", "segmentation": "dice"}


def metric_name(key: str) -> str:
    return METRIC_NAMES.get(key) or EXTRA_NAMES.get(key) or key.replace("_", " ")


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _ci(ci95: dict, key: str) -> list[float] | None:
    ci = (ci95 or {}).get(key) or []
    return [float(ci[0]), float(ci[1])] if len(ci) == 2 else None


def side_by_side(report: dict) -> list[dict]:
    """One row per metric either side reports: value and 95% CI, internal then external."""
    internal, external = report.get("internal") or {}, report.get("external") or {}
    keys = [k for k in (internal.get("metrics") or {})]
    keys += [k for k in (external.get("metrics") or {}) if k not in keys]
    rows = []
    for key in keys:
        a = (internal.get("metrics") or {}).get(key)
        b = (external.get("metrics") or {}).get(key)
        if not any(isinstance(v, (int, float)) for v in (a, b)):
            continue
        rows.append({"key": key, "metric": metric_name(key), "internal": _number(a),
                     "internal_ci": _ci(internal.get("ci95"), key), "external": _number(b),
                     "external_ci": _ci(external.get("ci95"), key)})
    return rows


def fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_ci(ci) -> str:
    return f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else "n/a"


def headers(report: dict) -> tuple[str, str]:
    internal, external = report.get("internal") or {}, report.get("external") or {}
    return (f"Internal: {internal.get('dataset') or '?'} ({internal.get('num_test', '?')} "
            "held-out cases)",
            f"External: {external.get('dataset') or '?'} ({external.get('num_test', '?')} cases)")


def notes(report: dict) -> list[str]:
    """What a reader must know to read the table right."""
    out = []
    model, external = report.get("model") or {}, report.get("external") or {}
    present = external.get("classes_present") or []
    classes = model.get("classes") or []
    if model.get("template") == "diagnosis" and present and len(set(present)) < len(classes):
        out.append(f"The external set holds only {', '.join(present)} of the model's classes "
                   f"({', '.join(classes)}): metrics that need every class (AUC, macro F1) are "
                   "undefined or not comparable.")
    decision = report.get("decision") or {}
    if decision.get("applied") == "stored":
        parts = []
        if decision.get("threshold") is not None:
            parts.append(f"threshold {decision['threshold']:.3f} on "
                         f"{decision.get('positive_class') or 'the positive class'}")
        if float(decision.get("temperature") or 1.0) != 1.0:
            parts.append(f"temperature {float(decision['temperature']):.3f}")
        out.append("Decisions use the model's stored " + (" and ".join(parts) or "decision")
                   + ", chosen on its own validation set (not refitted on the external set).")
    elif model.get("template") == "diagnosis":
        out.append("Decisions are the most probable class (the model stores no threshold).")
    out.append("Every case of the external set is a test case; 95% CIs are bootstrap intervals "
               "over cases.")
    out.append(report.get("research_only") or "For research use only.")
    return out


def summary_line(report: dict) -> str:
    """One line: the headline metric internal vs external."""
    key = HEADLINE.get((report.get("model") or {}).get("template"), "")
    row = next((r for r in side_by_side(report) if r["key"] == key), None) or \
        next(iter(side_by_side(report)), None)
    external = report.get("external") or {}
    if row is None:
        return f"scored on {external.get('dataset')}: no metric"
    return (f"{row['metric']} {fmt(row['internal'])} internal "
            f"({(report.get('internal') or {}).get('dataset')}) vs {fmt(row['external'])} "
            f"external ({external.get('dataset')}, {external.get('num_test')} cases)")


def text_table(report: dict) -> str:
    """Fixed-width table for a terminal."""
    rows = side_by_side(report)
    left, right = headers(report)
    width = max([len("metric")] + [len(r["metric"]) for r in rows])
    lines = [f"Model: {(report.get('model') or {}).get('name')}", f"  {left}",
             f"  {right}", "",
             f"{'metric':<{width}}  {'internal':>8}  {'95% CI':<13}  {'external':>8}  "
             f"{'95% CI':<13}"]
    for r in rows:
        lines.append(f"{r['metric']:<{width}}  {fmt(r['internal']):>8}  "
                     f"{fmt_ci(r['internal_ci']):<13}  {fmt(r['external']):>8}  "
                     f"{fmt_ci(r['external_ci']):<13}")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes(report)])


def _md(text) -> str:
    return str(text).replace("|", "\\|")


def markdown_table(report: dict) -> str:
    """Markdown table for the chat."""
    left, right = headers(report)
    lines = [f"| Metric | {_md(left)} | 95% CI | {_md(right)} | 95% CI |",
             "|---|---|---|---|---|"]
    for r in side_by_side(report):
        lines.append(f"| {_md(r['metric'])} | {fmt(r['internal'])} | {fmt_ci(r['internal_ci'])}"
                     f" | {fmt(r['external'])} | {fmt_ci(r['external_ci'])} |")
    return "\n".join(lines)
