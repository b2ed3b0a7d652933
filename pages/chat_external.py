"""The chat's external validations: a message such as "test this model on the Hospital B set" is
read by core.external_validation.request (no LLM) and run at once through
crew.external.evaluate_on_dataset — the same function as the CLI and the Models page — instead
of starting a build job; the reply is the internal and external results side by side. Finished
evaluations are kept in the store (audit rows naming their reports), so the exchange survives a
reload; a refusal is shown for this session. Not a page itself (app.py lists the pages)."""
from __future__ import annotations

import time

import streamlit as st

from core import RESEARCH_ONLY
from core.datasets.catalog import load_catalog
from core.external_validation.compat import ExternalValidationError, find_model
from core.external_validation.request import parse_external_request
from core.external_validation.run import recorded_evaluations
from crew.external import evaluate_on_dataset
from pages.models_external import show_side_by_side
from pages.ui_common import fmt_when, md_escape

ACTOR = "chat"
REFUSALS = "external-chat-refusals"


def external_prompt(settings, store, prompt: str | None) -> str | None:
    """Run the external evaluation ``prompt`` asks for (returns None: handled), or return the
    prompt unchanged for the build crew."""
    if not prompt:
        return prompt
    names = [e.card.name for e in load_catalog(settings) if e.available]
    asked = parse_external_request(prompt, names, store.models())
    if asked is None:
        return prompt
    try:
        if asked.problem:
            raise ExternalValidationError(asked.problem)
        model = find_model(store, asked.model or "latest")
        with st.spinner(f"Scoring {model['name']} on {asked.dataset}…"):
            evaluate_on_dataset(settings, store, model["id"], asked.dataset, request=prompt,
                                actor=ACTOR)
    except ExternalValidationError as exc:
        st.session_state.setdefault(REFUSALS, []).append(
            {"recorded_at": time.time(), "request": prompt, "error": str(exc)})
    return None


def _show(item: dict) -> None:
    with st.chat_message("user"):
        st.markdown(md_escape(item.get("request") or ""))
        st.caption(f"{fmt_when(item.get('recorded_at'))} · external validation")
    with st.chat_message("assistant"):
        if item.get("error"):
            st.error(f"Not evaluated: {item['error']}", icon=":material/error:")
            return
        model, external = item.get("model") or {}, item.get("external") or {}
        st.success(f"Scored **{md_escape(model.get('name'))}** on "
                   f"**{md_escape(external.get('dataset'))}** ({external.get('num_test')} "
                   "cases), beside its internal held-out test:", icon=":material/fact_check:")
        show_side_by_side(item)
        st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        st.page_link("pages/models.py", label="Open in Models: this model's external "
                     "validations", icon=":material/model_training:")


class ExternalExchanges:
    """The chat's external validations since ``since``, shown in time order among the jobs."""

    def __init__(self, store, since: float = 0.0):
        done = recorded_evaluations(store, ACTOR, since)
        refused = [r for r in st.session_state.get(REFUSALS, []) if r["recorded_at"] >= since]
        self.items = sorted(done + refused, key=lambda r: r["recorded_at"])

    def show_until(self, ts: float | None = None) -> None:
        """Show the exchanges before ``ts`` (all that are left when None)."""
        while self.items and (ts is None or self.items[0]["recorded_at"] < ts):
            _show(self.items.pop(0))
