"""The Models page's external validation section: score the chosen model on another registered
dataset with the same task and labels, and its internal and external results side by side (with
95% CIs), newest first. Not a page itself (app.py lists the pages); the work is
crew.external.evaluate_on_dataset, as for the CLI and the chat."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core import RESEARCH_ONLY
from core.external_validation.compat import (SUPPORTED_TEMPLATES, ExternalValidationError,
                                             candidate_datasets, model_facts)
from core.external_validation.run import past_evaluations
from core.external_validation.views import fmt_ci, headers, notes, side_by_side
from crew.external import evaluate_on_dataset
from pages.ui_common import fmt_duration, fmt_when, md_escape


def side_by_side_frame(report: dict) -> pd.DataFrame:
    return pd.DataFrame([{"Metric": r["metric"], "Internal": r["internal"],
                          "Internal 95% CI": fmt_ci(r["internal_ci"]),
                          "External": r["external"],
                          "External 95% CI": fmt_ci(r["external_ci"])}
                         for r in side_by_side(report)])


def show_side_by_side(report: dict) -> None:
    left, right = headers(report)
    st.caption(f"{md_escape(left)} · {md_escape(right)}")
    st.dataframe(side_by_side_frame(report), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("Internal", "External")})
    for note in notes(report)[:-1]:  # the last is the research-only line, shown once above
        st.caption(note)


def _run(settings, store, model: dict, dataset: str) -> None:
    key = f"external-{model['id']}"
    with st.spinner(f"Scoring {model['name']} on {dataset}…"):
        try:
            evaluate_on_dataset(settings, store, model["id"], dataset,
                                request=f"Models page: score on {dataset}")
        except ExternalValidationError as exc:
            st.session_state[f"{key}-error"] = str(exc)
        else:
            st.session_state.pop(f"{key}-error", None)


def show_external(settings, store, model: dict, workspace: Path) -> None:
    key = f"external-{model['id']}"
    st.markdown("#### External validation")
    st.caption("Score this model on another registered dataset with the same task and labels "
               "(another hospital, scanner or population) and compare it with its internal "
               "held-out test. Every case of the other dataset is a test case; nothing is "
               "retrained.")
    facts = model_facts(model, store.job(model["job_id"]))
    if facts.template not in SUPPORTED_TEMPLATES or facts.engine == "nnunet":
        st.caption("External validation is available for MONAI diagnosis and segmentation "
                   "models; this one is not scored on other datasets yet.")
        return
    fits, refused = candidate_datasets(settings, facts)
    if fits:
        left, right = st.columns([3, 1], vertical_alignment="bottom")
        dataset = left.selectbox("External dataset", fits, key=f"{key}-dataset")
        if right.button("Run external validation", key=f"{key}-run",
                        icon=":material/fact_check:"):
            _run(settings, store, model, dataset)
    else:
        st.info("No other registered dataset has this model's task, modality and dimension. "
                "Register one on the Datasets page.", icon=":material/info:")
    if refused:
        with st.expander(f"Datasets that do not fit ({len(refused)})"):
            for name, why in refused.items():
                st.caption(f"**{md_escape(name)}** — {md_escape(why)}")
    error = st.session_state.get(f"{key}-error")
    if error:
        st.error(f"Not evaluated: {error}", icon=":material/error:")
    past = past_evaluations(workspace)
    if not past:
        st.caption("No external validation of this model yet.")
        return
    st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
    for i, report in enumerate(past):
        external = report.get("external") or {}
        title = (f"{external.get('dataset')} · {fmt_when(report.get('created_at'))} · "
                 f"{external.get('num_test')} cases · {fmt_duration(report.get('seconds'))}")
        with st.expander(title, expanded=i == 0, icon=":material/fact_check:"):
            show_side_by_side(report)
