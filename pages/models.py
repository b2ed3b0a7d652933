"""Models: every trained model with its version, status and whether it is the best of its
dataset and task; its test results with confidence intervals, a comparison with another model,
its model card, a try-it-on-an-image panel, the files to download, archive and delete.

The tabs' content lives beside this page: ``models_results`` (test results), ``models_compare``
(two models side by side), ``models_try`` (try it on an image), ``models_manage`` (archive and
delete) and ``models_charts`` (the figures); what they show is read and shaped in
``core.viewing`` (``model_versions``, ``model_compare``, ``model_views``, ``model_loading``,
``inference``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core import RESEARCH_ONLY
from core.jobs.model_card import with_split_sentence
from core.jobs.workspace import JobWorkspace
from core.viewing.model_versions import (FAILED_GATE, STATUS_LABELS, STOPPED, best_text,
                                         catalog, default_model, marked_best)
from core.viewing.model_views import (TASK_NAMES, demote_headings, downloads, export_input_shape,
                                      export_note, file_size, has_exports, job_report,
                                      model_card_path, read_model_card)
from pages.models_compare import entry_label, show_compare
from pages.models_external import show_external
from pages.models_manage import show_flash, show_manage
from pages.models_results import ci_text, show_results
from pages.models_try import show_try
from pages.ui_common import context, fmt_duration, fmt_when, md_escape, read_json

settings, store = context()

st.title("Models")
st.caption("Models built by M3Builder. Test results come from M3Builder's own evaluator on a "
           "held-out test set that shares no patient with the training data.")
show_flash()

every = store.models()
if not every:
    st.info("No models yet. A model appears here when a job finishes training: ask for one on "
            "the Build a model page.", icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()

n_archived = sum(1 for m in every if m.get("archived_at"))
show_archived = n_archived > 0 and st.toggle(f"Show archived models ({n_archived})",
                                             key="models-show-archived")
entries, best = catalog(store, archived=show_archived)
if not entries:
    st.info("Every model is archived. Turn on “Show archived models” to see or restore them.",
            icon=":material/archive:")
    st.stop()


# ------------------------------------------------------------------------------ overview
STATUS_MARK = {STOPPED: "⏸ ", FAILED_GATE: "✖ "}


def overview_row(entry) -> dict:
    top = entry.test
    row = {"Model": entry.name,
           "Status": STATUS_MARK.get(entry.status, "") + STATUS_LABELS[entry.status],
           "Best": f"★ by {entry.best}" if marked_best(entry) else "",
           "Task": TASK_NAMES.get(entry.template,
                                  (entry.model["task"] or "").replace("_", " ")),
           "Dataset": entry.model["dataset"], "Main metric": top["name"], "Value": top["value"],
           "95% CI": ci_text(top["ci"]), "Validation": entry.validation,
           "Created": fmt_when(entry.model["created_at"]), "Job": entry.model["job_id"]}
    if show_archived:
        row["Archived"] = "yes" if entry.archived else ""
    return row


st.dataframe(pd.DataFrame([overview_row(e) for e in entries]), hide_index=True, width="stretch",
             column_config={"Value": st.column_config.NumberColumn("Test value", format="%.3f"),
                            "Validation": st.column_config.NumberColumn(
                                "Validation value", format="%.3f",
                                help="The main metric on the validation set at the epoch "
                                     "training kept, where training recorded it")})
st.caption("★ the best of several models of one dataset and task by the main metric: on "
           "validation when every one of them recorded it, else on the test set. The best one "
           "opens first, not the newest.")

by_id = {e.id: e for e in entries}
ids = list(by_id)
wanted = st.query_params.get("model")  # a link from the chat names the model
opened = by_id[wanted] if wanted in by_id else default_model(entries, best)
chosen = by_id[st.selectbox("Model", ids, index=ids.index(opened.id),
                            format_func=lambda i: entry_label(by_id[i]))]
model, job, workspace, template = chosen.model, chosen.job, chosen.workspace, chosen.template
report = job_report(workspace)
training = report.get("training", {})

st.subheader(chosen.name)
BADGE_COLOURS = {"complete": "green", STOPPED: "orange", FAILED_GATE: "red"}
badges = [f":{BADGE_COLOURS[chosen.status]}-badge[{STATUS_LABELS[chosen.status]}]"]
if marked_best(chosen):
    badges.append(f":blue-badge[:material/star: Best {chosen.test['name']} on "
                  f"{chosen.best}]")
if chosen.archived:
    badges.append(":gray-badge[Archived]")
st.markdown(" ".join(badges))
st.caption(md_escape(f"{STATUS_LABELS[chosen.status]}: {chosen.status_detail}."
                     + (f" {best_text(chosen)}." if marked_best(chosen) else "")))
facts = [TASK_NAMES.get(template, template or "unknown task"),
         f"Dataset: {md_escape(model['dataset'])}", f"{report.get('num_test', '?')} test cases"]
if training:
    facts += [f"{md_escape(training.get('network'))} · "
              f"{training.get('num_parameters', 0):,} parameters",
              f"{training.get('epochs_run') or 0:.0f} epochs on {training.get('device')} in "
              f"{fmt_duration(training.get('seconds'))}"]
st.caption(" · ".join(facts))
if job.get("request"):
    st.markdown(f"**Request:** {md_escape(job['request'])}")
st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")

results_tab, compare_tab, card_tab, try_tab, files_tab, manage_tab = st.tabs(
    ["Test results", "Compare", "Model card", "Try it on an image", "Downloads",
     "Archive or delete"])


# ------------------------------------------------------------------------------ results
with results_tab:
    show_results(report, template, workspace)
    show_external(settings, store, model, workspace)


# ------------------------------------------------------------------------------ compare
with compare_tab:
    show_compare(entries, chosen)


# ------------------------------------------------------------------------------ model card
card_path = model_card_path(model, workspace)
with card_tab:
    card = read_model_card(card_path)
    if card is not None:  # an older card's split line reads as a sentence too
        card = with_split_sentence(card, read_json(JobWorkspace(workspace).split), training)
        if RESEARCH_ONLY not in card:
            st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        # demote headings so the card sits under the page's own headings
        st.markdown(demote_headings(card))
    else:
        st.caption(f"No model card at `{card_path}`.")


# ------------------------------------------------------------------------------ try it
with try_tab:
    show_try(model["id"], workspace, settings.home)


# ------------------------------------------------------------------------------ downloads
with files_tab:
    st.markdown("**Saved model**")
    st.code(model["path"], language=None)
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
                           key=f"download-{model['id']}-{d['file_name']}")
        if note:
            st.caption(note)
    if has_exports(offered):
        shape = export_input_shape(workspace, template)
        st.caption(f"The exports take `pixel_values` of shape ({shape}), preprocessed as the "
                   "dataloader configuration says, and return class `probabilities`"
                   + (" per pixel for one patch: run them with sliding-window inference over a "
                      "whole image." if template == "segmentation" else "."))
        stored = (exports.get("onnx") or {}).get("metadata") or []
        if "class_names" in stored:
            st.caption("The files say what they are: the ONNX model's metadata "
                       f"(`metadata_props`: {', '.join(f'`{k}`' for k in stored)}) and the "
                       "TorchScript file's `metadata.json` hold the class names in output "
                       "order, the task and the input, with the research-only notice.")


# ------------------------------------------------------------------------------ archive, delete
with manage_tab:
    show_manage(settings, store, chosen)
