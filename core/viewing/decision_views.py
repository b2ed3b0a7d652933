"""What the Models page shows of a diagnosis model's decisions: the operating point (threshold,
sensitivity, specificity, PPV, NPV and accuracy with 95 % CIs), the calibration (ECE before and
after temperature scaling, reliability-diagram bins) and the model's decision on one image.
Pure data from report.json; no Streamlit."""
from __future__ import annotations

RATES = (("sensitivity", "Sensitivity"), ("specificity", "Specificity"),
         ("ppv", "PPV (precision)"), ("npv", "NPV"), ("accuracy", "Accuracy"))
BOX_RATES = (("precision", "Precision (boxes)"), ("recall", "Recall (boxes)"),
             ("f1", "F1 (boxes)"), ("boxes_per_image", "Boxes shown per image"))


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value else None


def operating_point_rows(report: dict) -> list[dict]:
    """One row per rate at the threshold: test value with CI, and the validation value."""
    point = report.get("operating_point") or {}
    if not point:
        return []
    test, ci, val = point.get("test") or {}, point.get("ci95") or {}, point.get("validation") or {}
    rates = BOX_RATES if "precision" in test else RATES
    return [{"Measure": label, "Test": _num(test.get(key)),
             "95% CI low": (ci.get(key) or [None, None])[0],
             "95% CI high": (ci.get(key) or [None, None])[1],
             "Validation": _num(val.get(key))} for key, label in rates]


def operating_point_text(report: dict) -> str:
    point = report.get("operating_point") or {}
    if point and report.get("task") == "detection":
        return (f"Shows the boxes scoring at least **{point['threshold']:.3f}** — "
                f"{point.get('rule_text', '')} ({point.get('num_val', '?')} validation images).")
    if point:
        return (f"Decides **{point['positive_class']}** when its calibrated probability is at "
                f"least **{point['threshold']:.3f}** — {point.get('rule_text', '')}"
                f" ({point.get('num_val', '?')} validation images).")
    thresholds = (report.get("decision") or {}).get("thresholds") or {}
    if thresholds:
        return "One threshold per finding, chosen on validation: " + ", ".join(
            f"{name} ≥ {value:.3f}" for name, value in thresholds.items()) + "."
    return "Decides the most probable class (argmax)."


def roc_marker(report: dict) -> dict | None:
    """The operating point on the ROC curve: {"fpr", "tpr", "threshold", "positive"}."""
    point = report.get("operating_point") or {}
    test = point.get("test") or {}
    sens, spec = _num(test.get("sensitivity")), _num(test.get("specificity"))
    if sens is None or spec is None:
        return None
    return {"fpr": 1 - spec, "tpr": sens, "threshold": point["threshold"],
            "positive": point["positive_class"]}


def calibration_summary(report: dict) -> dict | None:
    """{"ece_before", "ece_after", "ece_ci", "ece_floor", "temperature", "fitted", "note",
    "before", "after"}; ``ece_floor`` is the ECE a perfectly calibrated model could show on
    this many test cases (95th percentile)."""
    cal = report.get("calibration") or {}
    if not cal or "reliability_after" not in cal:
        return None
    spread = cal.get("ece_after_uncertainty") or {}
    return {"ece_before": _num(cal.get("ece_before")), "ece_after": _num(cal.get("ece_after")),
            "ece_ci": spread.get("ci"), "ece_floor": _num(spread.get("noise_floor")),
            "temperature": _num(cal.get("temperature")), "fitted": bool(cal.get("fitted")),
            "note": cal.get("note") or "", "before": cal.get("reliability_before") or [],
            "after": cal.get("reliability_after") or [],
            "multi_label": bool(report.get("multi_label"))}


def ece_spread_text(cal: dict) -> str:
    """How far the test set's size lets its ECE be read: the bootstrap interval and the ECE a
    perfectly calibrated model could show on as many cases by chance."""
    ci, floor = cal.get("ece_ci"), cal.get("ece_floor")
    text = ""
    if ci:
        text += f"95% interval of the ECE: {ci[0]:.3f}-{ci[1]:.3f}. "
    if floor is not None:
        text += (f"On this test set a perfectly calibrated model could show an ECE up to "
                 f"{floor:.3f} by chance")
        after = cal.get("ece_after")
        if after is not None:
            text += (": the calibration error measured is within chance." if after <= floor
                     else ": the model is miscalibrated beyond chance.")
        else:
            text += "."
    return text.strip()


def decision_for(probabilities: dict[str, float], decision: dict | None,
                 multi_label: bool) -> dict:
    """The model's decision on one image from its (calibrated) class probabilities:
    {"classes": [decided class names], "why": text}."""
    decision = decision or {}
    if multi_label:
        cut = decision.get("thresholds") or {}
        chosen = [n for n, p in probabilities.items() if p >= cut.get(n, 0.5)]
        return {"classes": chosen, "why": "each finding at its own threshold" if cut else
                "each finding at probability ≥ 0.5"}
    positive, threshold = decision.get("positive_class"), decision.get("threshold")
    if positive in probabilities and threshold is not None and len(probabilities) == 2:
        other = next(n for n in probabilities if n != positive)
        p = probabilities[positive]
        return {"classes": [positive if p >= threshold else other],
                "why": f"{positive} probability {p:.3f} {'≥' if p >= threshold else '<'} "
                       f"threshold {threshold:.3f}"}
    best = max(probabilities, key=probabilities.get)
    return {"classes": [best], "why": "the most probable class"}
