"""Models: every trained model, its test results with confidence intervals, and its model card."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import RESEARCH_ONLY
from pages.ui_common import context, fmt_duration, fmt_when, md_escape, metrics_row, read_json

settings, store = context()

st.title("Models")
st.caption("Models built by M3Builder. Test results come from M3Builder's own evaluator on a "
           "held-out test set that shares no patient with the training data.")

models = store.models()
if not models:
    st.info("No models yet. A model appears here when a job finishes training.",
            icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()


def parse_metrics(text: str | None) -> dict:
    try:
        return json.loads(text or "{}") or {}
    except ValueError:
        return {}


def number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


overview = pd.DataFrame([{
    "Model": m["name"], "Dataset": m["dataset"], "Task": (m["task"] or "").replace("_", " "),
    "AUC": number(parse_metrics(m["metrics"]).get("auc")),
    "Accuracy": number(parse_metrics(m["metrics"]).get("accuracy")),
    "F1 (macro)": number(parse_metrics(m["metrics"]).get("f1_macro")),
    "Created": fmt_when(m["created_at"]), "Job": m["job_id"],
} for m in models])
score = st.column_config.NumberColumn(format="%.3f")
st.dataframe(overview, hide_index=True, width="stretch",
             column_config={"AUC": score, "Accuracy": score, "F1 (macro)": score})

by_id = {m["id"]: m for m in models}
chosen = by_id[st.selectbox("Model", list(by_id),
                            format_func=lambda i: f"{by_id[i]['name']} · "
                                                  f"{fmt_when(by_id[i]['created_at'])}")]
job = store.job(chosen["job_id"]) or {}
workspace = Path(job.get("workspace") or Path(chosen["card_path"] or ".").parent)
report = read_json(workspace / "report.json")
training = report.get("training", {})

st.subheader(chosen["name"])
facts = [f"Dataset: {md_escape(chosen['dataset'])}",
         f"{report.get('num_test', '?')} test images"]
if training:
    facts += [f"{training.get('network')} · {training.get('num_parameters', 0):,} parameters",
              f"{training.get('epochs_run', 0):.0f} epochs on {training.get('device')} in "
              f"{fmt_duration(training.get('seconds'))}"]
st.caption(" · ".join(facts))
if job.get("request"):
    st.markdown(f"**Request:** {md_escape(job['request'])}")

if not report:
    st.warning("The evaluation report for this model is missing, so no detailed results can "
               "be shown.", icon=":material/warning:")
else:
    st.markdown("**Test-set performance**")
    metrics_row(report.get("metrics", {}), report.get("ci95", {}))

    cm_col, class_col = st.columns([3, 2], gap="large")
    with cm_col:
        cm = report.get("confusion_matrix") or {}
        labels, matrix = cm.get("labels") or [], cm.get("matrix") or []
        if labels and matrix:
            fig = go.Figure(go.Heatmap(
                z=matrix, x=labels, y=labels, colorscale="Blues", showscale=False,
                text=matrix, texttemplate="%{text}", textfont={"size": 16},
                hovertemplate="True %{y}, predicted %{x}: %{z} images<extra></extra>"))
            fig.update_layout(title="Confusion matrix (test set)", height=380,
                              margin=dict(l=10, r=10, t=50, b=10),
                              xaxis_title="Predicted class", yaxis_title="True class",
                              yaxis=dict(autorange="reversed"))
            st.plotly_chart(fig, width="stretch", config={"displaylogo": False})
    with class_col:
        st.markdown("**Per class**")
        rows = report.get("per_class") or {}
        per_class = pd.DataFrame([{"Class": name, **{k.replace("_", " ").capitalize(): number(x)
                                                      if k != "support" else x
                                                      for k, x in v.items()
                                                      if isinstance(x, (int, float))}}
                                  for name, v in rows.items() if isinstance(v, dict)])
        if per_class.empty:
            st.caption("No per-class results in the report.")
        else:
            st.dataframe(per_class, hide_index=True, width="stretch")
            if "Sensitivity" in per_class:
                st.caption("Sensitivity and specificity treat each class in turn as "
                           "'positive' against all others.")
    samples = report.get("samples") or []
    if samples:
        st.markdown("**Generated reports next to the reference (test set)**")
        st.dataframe(pd.DataFrame([{"Image": Path(str(x.get("image_path", ""))).name,
                                    "Reference": x.get("reference"),
                                    "Generated": x.get("generated")} for x in samples[:10]]),
                     hide_index=True, width="stretch")

st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")

st.markdown("**Saved model**")
st.code(chosen["path"], language=None)

card_path = Path(chosen["card_path"] or workspace / "model_card.md")
with st.expander("Model card", icon=":material/description:"):
    if card_path.is_file():
        card = card_path.read_text(encoding="utf-8")
        # demote headings so the card sits under the page's own headings
        st.markdown(re.sub(r"^(#{1,4}) ", r"##\1 ", card, flags=re.MULTILINE))
        st.download_button("Download the model card", card, file_name="model_card.md",
                           mime="text/markdown", icon=":material/download:")
    else:
        st.caption(f"No model card at `{card_path}`.")
