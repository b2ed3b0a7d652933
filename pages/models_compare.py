"""The Models page's comparison of two models side by side: every test metric of both with its
95% CI, the difference, the better value highlighted, a warning when they were tested on
different test sets, and the curves their reports hold. Not a page itself (app.py lists the
pages); the numbers come from core.viewing.model_compare."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.viewing.model_compare import (comparable, dice_pair, metric_rows, pr_pair, roc_pair,
                                        same_test_set, verdict)
from core.viewing.model_versions import STATUS_LABELS, ModelEntry, marked_best
from pages.models_charts import PLOT_CONFIG, bars_pair_figure, pr_pair_figure, roc_pair_figure
from pages.models_results import ci_text
from pages.ui_common import fmt_when, md_escape

BETTER = "background-color: rgba(118, 176, 65, 0.25); font-weight: 600"
APART = "font-weight: 700"


def entry_label(entry: ModelEntry) -> str:
    marks = [STATUS_LABELS.get(entry.status, entry.status)] if entry.status != "complete" else []
    marks += ["best"] if marked_best(entry) else []
    marks += ["archived"] if entry.archived else []
    return (f"{entry.name} · {fmt_when(entry.model.get('created_at'))}"
            + (f" ({', '.join(marks)})" if marks else ""))


def comparison_frame(rows: list[dict], first: str, second: str):
    """The metric table, the better value of each row highlighted and the difference in bold
    where the 95% CIs do not overlap (a pandas Styler)."""
    if first == second:
        second += " (2)"
    frame = pd.DataFrame([{"Metric": r["metric"], first: r["first"],
                           f"{first} 95% CI": ci_text(r["first_ci"]), second: r["second"],
                           f"{second} 95% CI": ci_text(r["second_ci"]),
                           "Difference": r["difference"],
                           "95% CIs overlap": {True: "yes", False: "no"}.get(r["overlap"],
                                                                            "n/a")}
                          for r in rows])

    def highlight(row: pd.Series) -> list[str]:
        source = rows[row.name]
        styles = []
        for column in frame.columns:
            style = ""
            if (column == first and source["better"] == -1) or \
                    (column == second and source["better"] == 1):
                style = BETTER
            elif column == "Difference" and source["overlap"] is False:
                style = APART
            styles.append(style)
        return styles

    numbers = [first, second, "Difference"]
    return frame.style.apply(highlight, axis=1).format(
        {c: (lambda v: "n/a" if v is None or v != v else f"{v:+.3f}") if c == "Difference"
         else (lambda v: "n/a" if v is None or v != v else f"{v:.3f}") for c in numbers})


def show_curves(first: ModelEntry, second: ModelEntry) -> None:
    if first.template == "diagnosis":
        pair = roc_pair(first, second)
        if all(pair.values()):
            st.plotly_chart(roc_pair_figure(pair), width="stretch", config=PLOT_CONFIG)
            st.caption(f"Solid: {md_escape(first.name)}; dashed: {md_escape(second.name)}. "
                       "From each model's test-set probabilities.")
        else:
            st.caption("No ROC curves: the test predictions of one model are not available.")
    elif first.template == "segmentation":
        pair = dice_pair(first, second)
        if all(pair.values()):
            st.plotly_chart(bars_pair_figure(pair, "Dice", "Dice CI", "Dice per class, both "
                                             "models (test set)", "Dice (higher is better)"),
                            width="stretch", config=PLOT_CONFIG)
            st.caption("Bars: mean Dice over the test cases; whiskers: 95% bootstrap CI over "
                       "cases.")
    elif first.template == "detection":
        pair = pr_pair(first, second)
        if all(pair.values()):
            iou = float(first.report.get("iou_threshold", 0.5))
            st.plotly_chart(pr_pair_figure(pair, iou), width="stretch", config=PLOT_CONFIG)
            st.caption(f"Solid: {md_escape(first.name)}; dashed: {md_escape(second.name)}.")


def show_compare(entries: list[ModelEntry], chosen: ModelEntry) -> None:
    """The Compare tab: ``chosen`` against another model of the same task."""
    others = comparable(entries, chosen)
    if not others:
        st.info("There is no other model of this task to compare with yet. Build another "
                "(for example with other settings) and it appears here.",
                icon=":material/info:")
        return
    by_id = {e.id: e for e in others}
    second = by_id[st.selectbox("Compare with", list(by_id),
                                format_func=lambda i: entry_label(by_id[i]),
                                key=f"compare-{chosen.id}")]
    same, sentence = same_test_set(chosen, second)
    if same is False:
        st.warning(sentence, icon=":material/warning:")
    else:
        st.caption(sentence)
    for entry in (chosen, second):
        if entry.status != "complete":
            st.caption(f"**{md_escape(entry.name)}** — {STATUS_LABELS[entry.status].lower()}: "
                       f"{md_escape(entry.status_detail)}.")
    rows = metric_rows(chosen, second)
    st.markdown(md_escape(verdict(chosen, second, rows)))
    if rows:
        st.dataframe(comparison_frame(rows, chosen.name, second.name), hide_index=True,
                     width="stretch")
        st.caption("Highlighted: the better value of each metric. The difference (second − "
                   "first) is in bold where the two 95% confidence intervals do not overlap; "
                   "overlapping intervals mean this test set cannot tell the models apart with "
                   "confidence.")
    show_curves(chosen, second)
