"""Models: every trained model, its test results with confidence intervals, its model card, a
try-it-on-an-image panel and the files to download.

The tabs' content lives beside this page: ``models_results`` (test results), ``models_try``
(try it on an image) and ``models_charts`` (the figures); what they show is read and shaped in
``core.viewing`` (``model_views``, ``model_loading``, ``inference``, ``prediction_views``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core import RESEARCH_ONLY
from core.viewing.model_views import (TASK_NAMES, demote_headings, downloads, export_input_shape,
                                      export_note, file_size, has_exports, headline, job_report,
                                      model_card_path, model_result, read_model_card,
                                      template_of, workspace_of)
from pages.models_external import show_external
from pages.models_results import ci_text, show_results
from pages.models_try import show_try
from pages.ui_common import context, fmt_duration, fmt_when, md_escape

settings, store = context()

st.title("Models")
st.caption("Models built by M3Builder. Test results come from M3Builder's own evaluator on a "
           "held-out test set that shares no patient with the training data.")

models = store.models()
if not models:
    st.info("No models yet. A model appears here when a job finishes training: ask for one on "
            "the Build a model page.", icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()


# ------------------------------------------------------------------------------ overview
def overview_row(model: dict) -> dict:
    ws = workspace_of(model, store.job(model["job_id"]))
    kind = template_of(model, ws)
    top = headline(model_result(model, ws), kind)
    return {"Model": model["name"],
            "Task": TASK_NAMES.get(kind, (model["task"] or "").replace("_", " ")),
            "Dataset": model["dataset"], "Main metric": top["name"], "Value": top["value"],
            "95% CI": ci_text(top["ci"]), "Created": fmt_when(model["created_at"]),
            "Job": model["job_id"]}


rows = [overview_row(m) for m in models]
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
             column_config={"Value": st.column_config.NumberColumn(format="%.3f")})

by_id = {m["id"]: m for m in models}
chosen = by_id[st.selectbox("Model", list(by_id),
                            format_func=lambda i: f"{by_id[i]['name']} · "
                                                  f"{fmt_when(by_id[i]['created_at'])}")]
job = store.job(chosen["job_id"]) or {}
workspace = workspace_of(chosen, job)
template = template_of(chosen, workspace)
report = job_report(workspace)
training = report.get("training", {})

st.subheader(chosen["name"])
facts = [TASK_NAMES.get(template, template or "unknown task"),
         f"Dataset: {md_escape(chosen['dataset'])}", f"{report.get('num_test', '?')} test cases"]
if training:
    facts += [f"{md_escape(training.get('network'))} · "
              f"{training.get('num_parameters', 0):,} parameters",
              f"{training.get('epochs_run') or 0:.0f} epochs on {training.get('device')} in "
              f"{fmt_duration(training.get('seconds'))}"]
st.caption(" · ".join(facts))
if job.get("request"):
    st.markdown(f"**Request:** {md_escape(job['request'])}")
st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")

results_tab, card_tab, try_tab, files_tab = st.tabs(
    ["Test results", "Model card", "Try it on an image", "Downloads"])


# ------------------------------------------------------------------------------ results
with results_tab:
    show_results(report, template, workspace)
    show_external(settings, store, chosen, workspace)


# ------------------------------------------------------------------------------ model card
card_path = model_card_path(chosen, workspace)
with card_tab:
    card = read_model_card(card_path)
    if card is not None:
        if RESEARCH_ONLY not in card:
            st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        # demote headings so the card sits under the page's own headings
        st.markdown(demote_headings(card))
    else:
        st.caption(f"No model card at `{card_path}`.")


# ------------------------------------------------------------------------------ try it
with try_tab:
    show_try(chosen["id"], workspace, settings.home)


# ------------------------------------------------------------------------------ downloads
with files_tab:
    st.markdown("**Saved model**")
    st.code(chosen["path"], language=None)
    offered = downloads(workspace)
    if not offered:
        st.caption(f"No files of this model are left in its job folder `{workspace}`.")
    if not has_exports(offered) and template in ("detection", "report_generation"):
        st.caption("Exports to TorchScript/ONNX are not made for detection and report models; "
                   "the weights and the configuration needed to rebuild the network are "
                   "offered instead.")
    exports = training.get("exports") or {}
    for d in offered:
        path = Path(d["path"])
        note = export_note(exports, d["label"])
        st.download_button(f"{d['label']} ({file_size(path.stat().st_size)})",
                           data=lambda p=path: p.read_bytes(), file_name=d["file_name"],
                           mime=d["mime"], icon=":material/download:", on_click="ignore",
                           key=f"download-{chosen['id']}-{d['file_name']}")
        if note:
            st.caption(note)
    if has_exports(offered):
        shape = export_input_shape(workspace, template)
        st.caption(f"The exports take `pixel_values` of shape ({shape}), preprocessed as the "
                   "dataloader configuration says, and return class `probabilities`"
                   + (" per pixel for one patch: run them with sliding-window inference over a "
                      "whole image." if template == "segmentation" else "."))
