"""Model card (markdown): data, split, metrics with CIs, intended use and limits."""
from __future__ import annotations

import re

from core import RESEARCH_ONLY

# the split line of cards written before it was a sentence: a method, a key and JSON counts
OLD_SPLIT_LINE = re.compile(r"^- Split: [^\n]*;\n  train \{[^\n]*\}, test \{[^\n]*\}$",
                            re.MULTILINE)

WHAT_IT_DOES = {
    "diagnosis": "Classifies {modality} {anatomy} images into: {classes}.",
    "segmentation": "Segments {classes} in {modality} {anatomy} images.",
    "detection": "Finds and boxes {classes} in {modality} {anatomy} images.",
    "report_generation": "Writes findings and impression text for {modality} {anatomy} images.",
}


def _fmt(value) -> str:
    if not isinstance(value, (int, float)) or value != value:
        return "n/a"
    return f"{value:.3f}"


def _metric_rows(report: dict) -> str:
    ci = report.get("ci95", {})
    return "\n".join(
        f"| {name} | {_fmt(value)} | "
        f"{_fmt(ci[name][0]) + ' – ' + _fmt(ci[name][1]) if ci.get(name) else 'n/a'} |"
        for name, value in report["metrics"].items() if isinstance(value, (int, float)))


def _per_class(report: dict) -> str:
    per_class = report.get("per_class") or {}
    keys = sorted({k for v in per_class.values() if isinstance(v, dict) for k, x in v.items()
                   if isinstance(x, (int, float))})
    if not keys:
        return ""
    rows = "\n".join(f"| {name} | " + " | ".join(
        _fmt(v.get(k)) if k != "support" else str(v.get(k, "")) for k in keys) + " |"
        for name, v in per_class.items())
    return f"\n| class | {' | '.join(keys)} |\n|{'---|' * (len(keys) + 1)}\n{rows}\n"


def _groups_line(split: dict) -> str:
    """Patients on each side; "none on both sides" only where the patient key was known."""
    n_train, n_test = len(split.get("train_groups", [])), len(split.get("test_groups", []))
    grouping = str(split.get("grouping_key") or "")
    if not grouping or grouping.startswith("none"):
        return (f"{n_train} training and {n_test} test images, each its own group: the dataset "
                "gives no patient key, so one patient's images may be on both sides.")
    if (split.get("patient_key") or {}).get("guess"):
        return (f"{n_train} training and {n_test} test groups by a patient key guessed from "
                "file or folder names; no group is on both sides, but where the guess is wrong "
                "one patient's images may be.")
    if "; none (" in grouping:
        return (f"{n_train} training and {n_test} test patients/groups ({grouping}); none on "
                "both sides, but the images without a key are each their own group, so one "
                "patient's images among them may be on both sides.")
    return f"{n_train} training and {n_test} test patients/groups; none on both sides."


def _count(n, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _class_counts(counts: dict) -> str:
    """``NORMAL 56, PNEUMONIA 56; test: ...`` per side; '' when a side names one class only (a
    segmentation or report index counts "case"s, which says nothing)."""
    sides = [(side, counts.get(side) or {}) for side in ("train", "test")]
    if any(len(c) < 2 for _, c in sides):
        return ""
    return " Images per class — " + "; ".join(
        f"{'training' if side == 'train' else 'test'}: "
        + ", ".join(f"{name} {n}" for name, n in c.items()) for side, c in sides) + "."


def split_sentence(split: dict, summary: dict | None = None) -> str:
    """The split in words, from split.json (and the training summary's validation count):
    "Split by patient (table column 'Subject'): 40 training / 10 test patients (20% for test,
    stratified by class, seed 42). Images: 200 training, 30 of them held out for validation
    while training; 50 test." """
    summary = summary or {}
    key = str(split.get("grouping_key") or "")
    n_train, n_test = len(split.get("train_groups", [])), len(split.get("test_groups", []))
    images = split.get("num_images") or {}
    counts = split.get("counts") or {}
    img_train = images.get("train", sum((counts.get("train") or {}).values()))
    img_test = images.get("test", sum((counts.get("test") or {}).values()))
    if split.get("method") == "kept_from_dataset":
        how = "the dataset's own training and test folders"
    else:
        fraction = split.get("test_fraction")
        how = (f"{fraction:.0%} for test, stratified by class"
               if isinstance(fraction, (int, float)) else "stratified by class")
    seed = split.get("seed")
    if seed is not None and split.get("method") != "kept_from_dataset":
        how += f", seed {seed}"
    if not key or key.startswith("none"):
        head = (f"Split by image (the dataset gives no patient key): {img_train} training / "
                f"{img_test} test images ({how}).")
    else:
        guessed = ", guessed from file or folder names" if (split.get("patient_key") or {}) \
            .get("guess") else ""
        head = (f"Split by patient ({key}{guessed}): {n_train} training / "
                f"{_count(n_test, 'test patient')} ({how}).")
    n_val = summary.get("num_val")
    held = (f", {n_val} of them held out for validation while training"
            if isinstance(n_val, int) and n_val > 0 else "")
    head += f" Images: {img_train} training{held}; {img_test} test."
    caps = split.get("caps") or {}
    if caps.get("images_left_out"):
        head += (f" Sample caps from the dataset's description left out "
                 f"{_count(caps['images_left_out'], 'image')}.")
    return head + _class_counts(counts)


def with_split_sentence(card: str, split: dict | None, summary: dict | None) -> str:
    """A card written before the split was a sentence, its split line as one (for showing
    it); other cards, or without split.json, unchanged."""
    if not split:
        return card
    line = f"- {split_sentence(split, summary)}"
    return OLD_SPLIT_LINE.sub(lambda _: line, card, count=1)


def _decision(report: dict) -> str:
    """The operating point and calibration of a diagnosis model, for the card."""
    point, cal = report.get("operating_point"), report.get("calibration") or {}
    lines = []
    test, ci = (point or {}).get("test") or {}, (point or {}).get("ci95") or {}

    def rate(key: str) -> str:
        band = f" ({_fmt(ci[key][0])} – {_fmt(ci[key][1])})" if ci.get(key) else ""
        return f"{key} {_fmt(test.get(key))}{band}"
    if point and report.get("task") == "detection":
        lines.append(f"- Boxes shown: score at least **{point['threshold']:.3f}** "
                     f"({point.get('rule_text', '')}). At this threshold on the test set: "
                     + ", ".join(rate(k) for k in ("precision", "recall", "f1")) + ".")
    elif point:
        lines.append(f"- Decision: **{point['positive_class']}** when its probability is at "
                     f"least **{point['threshold']:.3f}** ({point.get('rule_text', '')}). At this "
                     "threshold on the test set: "
                     + ", ".join(rate(k) for k in ("sensitivity", "specificity", "ppv", "npv",
                                                   "accuracy")) + ".")
    elif report.get("decision", {}).get("thresholds"):
        lines.append("- Decisions: one threshold per label, chosen on validation: " + ", ".join(
            f"{k} ≥ {v:.3f}" for k, v in report["decision"]["thresholds"].items()) + ".")
    elif report.get("task") == "diagnosis":
        lines.append("- Decision: the most probable class (argmax).")
    if cal:
        if cal.get("fitted"):
            lines.append(f"- Calibration: temperature scaling fitted on validation, T = "
                         f"{cal['temperature']:.2f}; expected calibration error on test "
                         f"{_fmt(cal.get('ece_before'))} before, {_fmt(cal.get('ece_after'))} "
                         "after. Exported models and the app give the calibrated probabilities."
                         + _ece_floor(cal))
        else:
            lines.append(f"- Calibration: not fitted ({cal.get('note') or cal.get('method')}); "
                         f"expected calibration error on test {_fmt(cal.get('ece_after'))}.")
    title = "Decisions" + (" and calibration" if cal else "")
    return (f"\n## {title}\n" + "\n".join(lines) + "\n") if lines else ""


def _ece_floor(cal: dict) -> str:
    floor = (cal.get("ece_after_uncertainty") or {}).get("noise_floor")
    return (f" On this many test cases a perfectly calibrated model could show an ECE up to "
            f"{floor:.3f} by chance." if isinstance(floor, (int, float)) else "")


def _selection(summary: dict) -> str:
    kept = summary.get("selection")
    return f" {kept}." if kept else ""


def render_model_card(plan: dict, report: dict, summary: dict, split: dict,
                      name: str | None = None) -> str:
    """The card's markdown; ``name``: the model's versioned name, when known."""
    template = plan.get("template", "diagnosis")
    does = WHAT_IT_DOES.get(template, "").format(
        modality=plan.get("modality") or "", anatomy=plan.get("anatomy") or "",
        classes=", ".join(plan.get("classes") or []) or "the labelled structures")
    title = name or f"{plan['dataset']} — {plan['task']}"
    return f"""# Model card: {title}

> **{RESEARCH_ONLY}**

## What it does
{does} Built by M3Builder from the request: "{plan.get('request', '')}".

## Data
- Dataset: {plan['dataset']} (`{plan['dataset_path']}`)
- {split_sentence(split, summary)}
- {_groups_line(split)}

## Model
- Template: {template}; network: {summary.get('network')}, trained from scratch unless a local
  pretrained path was given; {summary.get('epochs_run')} epochs on {summary.get('device')},
  {summary.get('seconds', 0):.0f} s; stop reason: {summary.get('stop_reason')}.{_selection(summary)}

## Test-set performance (system evaluator, {report.get('num_test')} cases, 95% bootstrap CI)
| metric | value | 95% CI |
|---|---|---|
{_metric_rows(report)}
{_per_class(report)}{_decision(report)}
## Intended use and limits
- Intended for research and method development only; not validated for clinical use.
- Performance is measured on a held-out split of one dataset; it says nothing about other
  scanners, hospitals or populations. Small test sets give wide confidence intervals.
- Do not use it to make or support decisions about individual patients.
"""
