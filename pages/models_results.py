"""The Models page's Test results tab: the test-set metrics, each template's charts and
per-class tables, and every test metric with its 95% confidence interval. Not a page itself
(app.py lists the pages)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.viewing.decision_views import (calibration_summary, ece_spread_text,
                                         operating_point_rows, operating_point_text, roc_marker)
from core.viewing.model_views import (detection_curves, detection_rows, diagnosis_roc,
                                      diagnosis_rows, metric_table, report_comparison,
                                      report_samples, rouge_l_gain, segmentation_rows)
from core.jobs.workspace import JobWorkspace
from core.viewing.case_review import (case_choices, detection_box_sets, detection_case_choices,
                                      load_case)
from core.viewing.viewer_data import BoxSet, ViewerPayload, arrays_payload
from pages.models_charts import (PLOT_CONFIG, bar_figure, comparison_figure, confusion_figure,
                                 pr_figure, reliability_figure, roc_figure)
from pages.ui_common import fmt_num, metrics_row
from pages.viewer_widget import show_payload, show_sample, viewer_available


def ci_text(ci) -> str:
    return f"{fmt_num(ci[0])} – {fmt_num(ci[1])}" if ci and len(ci) == 2 else "n/a"


def show_diagnosis(report: dict, workspace: Path) -> None:
    cm = report.get("confusion_matrix") or {}
    cm_col, class_col = st.columns([3, 2], gap="large")
    with cm_col:
        if cm.get("labels") and cm.get("matrix"):
            st.plotly_chart(confusion_figure(cm["labels"], cm["matrix"]), width="stretch",
                            config=PLOT_CONFIG)
        elif report.get("multi_label"):
            st.caption("Multi-label model: each finding is decided on its own (at its own "
                       "threshold), so there is no single confusion matrix; see the "
                       "per-finding table and ROC curves.")
    with class_col:
        st.markdown("**Per class**")
        per_class = pd.DataFrame(diagnosis_rows(report))
        if per_class.empty:
            st.caption("No per-class results in the report.")
        else:
            st.dataframe(per_class, hide_index=True, width="stretch")
            st.caption("Sensitivity and specificity treat each class in turn as 'positive' "
                       "against all others.")
    show_decision(report)
    positive = (report.get("decision") or {}).get("positive_class")
    curves = diagnosis_roc(workspace, positive)
    if curves:
        st.plotly_chart(roc_figure(curves, roc_marker(report)), width="stretch",
                        config=PLOT_CONFIG)
        st.caption("From the test-set probabilities the model wrote (Logout/predictions.json) "
                   "and the true labels in the test index. "
                   + (f"Two classes: the curve treats {positive or 'the second class'} as "
                      "positive; the cross is the model's operating point."
                      if len(curves) == 1 and len(cm.get("labels") or []) == 2 else
                      "One curve per class against all others."))
    else:
        st.caption("No ROC curve: the test predictions (Logout/predictions.json) are not "
                   "available for this model.")


def show_decision(report: dict) -> None:
    """The threshold and what it gives (with CIs), then the reliability diagram."""
    st.markdown("**Decision at the threshold**")
    st.markdown(operating_point_text(report))
    rows = operating_point_rows(report)
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3f")
                                    for c in ("Test", "95% CI low", "95% CI high",
                                              "Validation")})
        st.caption("Test values with 95% bootstrap confidence intervals; the threshold was "
                   "chosen on the validation images only, never on the test set.")
    cal = calibration_summary(report)
    if not cal:
        return
    chart_col, text_col = st.columns([3, 2], gap="large")
    with chart_col:
        st.plotly_chart(reliability_figure(cal["before"], cal["after"], cal["multi_label"]),
                        width="stretch", config=PLOT_CONFIG)
    with text_col:
        st.markdown("**Calibration**")
        st.markdown(f"Expected calibration error (ECE) on the test set: "
                    f"**{fmt_num(cal['ece_before'])}** before, **{fmt_num(cal['ece_after'])}** "
                    "after temperature scaling" + (f" (T = {cal['temperature']:.2f}, fitted on "
                                                   "validation)." if cal["fitted"] else "."))
        if cal.get("ece_floor") is not None:
            st.markdown(ece_spread_text(cal))
        st.caption("A calibrated model's 80% means right 4 times in 5: its points lie on the "
                   "diagonal. " + (cal["note"] or ""))


def show_segmentation(report: dict, workspace: Path | None = None) -> None:
    rows = segmentation_rows(report)
    if not rows:
        st.caption("No per-class results in the report.")
        return
    st.markdown("**Per class** (mean over test cases; 95% bootstrap CI over cases)")
    st.dataframe(pd.DataFrame([{"Class": r["Class"], "Dice": r["Dice"],
                                "Dice 95% CI": ci_text(r["Dice CI"]),
                                "HD95 (mm)": r["HD95 (mm)"],
                                "HD95 95% CI": ci_text(r["HD95 CI"])} for r in rows]),
                 hide_index=True, width="stretch",
                 column_config={"Dice": st.column_config.NumberColumn(format="%.3f"),
                                "HD95 (mm)": st.column_config.NumberColumn(format="%.2f")})
    dice_col, hd_col = st.columns(2, gap="large")
    with dice_col:
        st.plotly_chart(bar_figure(rows, "Dice", "Dice CI", "Dice per class", "Dice (higher "
                                   "is better)"), width="stretch", config=PLOT_CONFIG)
    with hd_col:
        st.plotly_chart(bar_figure(rows, "HD95 (mm)", "HD95 CI", "HD95 per class",
                                   "HD95 in mm (lower is better)"), width="stretch",
                        config=PLOT_CONFIG)
    st.caption("HD95: the 95th percentile of the distances between predicted and true "
               "boundaries, in mm (pixels for images without a spacing). A class missed "
               "entirely counts as the image diagonal.")
    if workspace is not None:
        show_test_cases(report, workspace)


def _results_stamp(workspace: Path) -> int:
    """Changes when the evaluation is written again (and the predictions it read with it)."""
    return JobWorkspace(workspace).report.stat().st_mtime_ns


@st.cache_data(max_entries=2, ttl=3600, show_spinner=False)
def _case_payload(workspace: str, case: dict, stamp: int, names: tuple) -> ViewerPayload:
    """A segmentation test case's viewer payload, read once per case (the page reruns on every
    click; a 3D case is three volumes)."""
    loaded = load_case(Path(workspace), case)
    return arrays_payload(loaded.image, mask=loaded.truth, prediction=loaded.prediction,
                          affine=loaded.affine, spacing=loaded.spacing or None,
                          class_names=names, name="test case")


@st.cache_data(max_entries=4, ttl=3600, show_spinner=False)
def _case_boxes(workspace: str, case: dict, threshold: float | None,
                stamp: int) -> list[BoxSet]:
    """A detection test image's true and predicted boxes, read once per image."""
    return detection_box_sets(Path(workspace), case, threshold)


def _picked_case(cases: list[dict], prompt: str, key: str) -> dict:
    """The case chosen in a picker of the cases' labels (the first shown first)."""
    labels = [c["label"] for c in cases]
    return cases[labels.index(st.selectbox(prompt, labels, key=key))]


def show_test_cases(report: dict, workspace: Path) -> None:
    """One test case in the viewer: the image, its ground truth and the model's prediction as
    overlays, each label on or off (worst Dice first)."""
    cases = case_choices(report)
    if not cases or not viewer_available():
        return
    with st.expander("Test cases: image, ground truth and prediction in the viewer",
                     icon=":material/view_in_ar:"):
        case = _picked_case(cases, "Test case (lowest Dice first)",
                            f"test-case-{workspace.name}")
        try:
            with st.spinner("Preparing the viewer…"):
                payload = _case_payload(str(workspace), case, _results_stamp(workspace),
                                        tuple(report.get("per_class") or {}))
        except (OSError, ValueError) as exc:  # ImageReadError, PreviewError are ValueErrors
            st.warning(f"This test case cannot be shown: {exc}", icon=":material/warning:")
            return
        show_payload(payload, f"test-case-viewer-{workspace.name}")
        st.caption("Ground truth and prediction are separate layers (the prediction's labels "
                   "in their own colours); switch each label of either on or off in the viewer.")


def show_detection_cases(report: dict, workspace: Path) -> None:
    """One test image in the viewer with its true boxes and the model's boxes at the score
    threshold, each class of either on or off (most mistakes first)."""
    cases = detection_case_choices(report)
    if not cases or not viewer_available():
        return
    threshold = (report.get("operating_point") or {}).get("threshold")
    with st.expander("Test images: true and predicted boxes in the viewer",
                     icon=":material/view_in_ar:"):
        case = _picked_case(cases, "Test image (most mistakes first)",
                            f"test-image-{workspace.name}")
        try:
            box_sets = _case_boxes(str(workspace), case, threshold, _results_stamp(workspace))
            show_sample(case["image_path"], key=f"test-image-viewer-{workspace.name}",
                        class_names=list(report.get("per_class") or {}), box_sets=box_sets)
        except (OSError, ValueError) as exc:  # PreviewError and ImageReadError are ValueErrors
            st.warning(f"This test image cannot be shown: {exc}", icon=":material/warning:")
            return
        shown = f"scoring at least {threshold:.3f}" if threshold is not None else "(all scores)"
        st.caption(f"True boxes and the model's boxes {shown} are separate layers; a box "
                   f"counts as found when it overlaps a true box with IoU ≥ "
                   f"{report.get('iou_threshold', 0.5):g}.")


def show_detection(report: dict, workspace: Path | None = None) -> None:
    st.caption(f"{report.get('num_test', '?')} test images, {report.get('num_test_abnormal', '?')}"
               f" with boxes, {report.get('num_gt_boxes', '?')} true boxes; a predicted box "
               f"counts as found when it overlaps a true box with IoU ≥ "
               f"{report.get('iou_threshold', 0.5):g}.")
    curves = detection_curves(report)
    if curves:
        st.plotly_chart(pr_figure(curves, float(report.get("iou_threshold", 0.5))),
                        width="stretch", config=PLOT_CONFIG)
    else:
        st.caption("No precision–recall curve: no class has both true boxes in the test set "
                   "and boxes predicted by the model.")
    if report.get("operating_point"):
        st.markdown("**Boxes at the threshold**")
        st.markdown(operating_point_text(report))
        st.dataframe(pd.DataFrame(operating_point_rows(report)), hide_index=True,
                     width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3f")
                                    for c in ("Test", "95% CI low", "95% CI high",
                                              "Validation")})
    rows = detection_rows(report)
    if rows:
        st.markdown("**Per class**")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"AP@0.5": st.column_config.NumberColumn(format="%.3f")})
    if workspace is not None:
        show_detection_cases(report, workspace)


def show_report_generation(report: dict) -> None:
    comparison = report_comparison(report)
    baseline = report.get("baseline") or {}
    chart_col, text_col = st.columns([3, 2], gap="large")
    with chart_col:
        if comparison:
            st.plotly_chart(comparison_figure(comparison), width="stretch", config=PLOT_CONFIG)
    with text_col:
        st.markdown("**Baseline:** always answer the most common training report "
                    f"({baseline.get('train_count', '?')} of {baseline.get('num_train', '?')} "
                    "training reports):")
        st.text(baseline.get("report") or "(none)")
        gain = rouge_l_gain(report)
        verdict = "beats" if gain > 0 else "does not beat"
        st.markdown(f"The model **{verdict}** the baseline on ROUGE-L "
                    f"({gain:+.3f}; 95% CI of the gain "
                    f"{ci_text((report.get('ci95') or {}).get('rouge_l_gain'))}).")
    samples = report_samples(report)
    if samples:
        st.markdown("**Generated reports next to their references (test set)**")
        st.table(pd.DataFrame(samples).set_index("Image"))


def show_results(report: dict, template: str, workspace: Path) -> None:
    """The tab's content for a model's report.json (``{}`` when it is missing)."""
    sections = {"diagnosis": lambda r: show_diagnosis(r, workspace),
                "segmentation": lambda r: show_segmentation(r, workspace),
                "detection": lambda r: show_detection(r, workspace),
                "report_generation": show_report_generation}
    if not report:
        st.warning("The evaluation report for this model is missing, so no detailed results "
                   "can be shown.", icon=":material/warning:")
    else:
        st.markdown("**Test-set performance**")
        metrics_row(report.get("metrics", {}), report.get("ci95", {}))
        show = sections.get(template or report.get("task", ""))
        if show:
            show(report)
        with st.expander("All test metrics with 95% confidence intervals"):
            st.dataframe(pd.DataFrame(metric_table(report)), hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%.3f") for c in
                                        ("Value", "95% CI low", "95% CI high")})
            st.caption(f"Scored by `{report.get('evaluator', 'the system evaluator')}` on "
                       f"{report.get('num_test', '?')} test cases; intervals from 1,000 "
                       "bootstrap resamples of the test cases (fewer for reports).")
