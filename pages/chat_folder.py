"""The chat's requests that name a dataset folder ("build a pneumonia classifier from /data/cxr"):
core.planning.request_folder registers the folder (or finds its datacard) before the job is
created, and the plan uses that dataset. When the folder can be read more than one way, nothing
is saved: the readings are shown here (as the Datasets page shows them) and the request goes on
with the one the user picks. Not a page itself (app.py lists the pages)."""
from __future__ import annotations

import streamlit as st

from core.jobs import launcher
from core.jobs.lifecycle import JobError
from core.planning.request_folder import start_request
from pages.datasets_common import TASK_TEXT, code
from pages.ui_common import md_escape

PENDING = "chat-folder-reading"   # the request waiting for the user to pick a reading


def submit(settings, store, request: str, interpretation: int | None = None) -> str:
    """Start the job for ``request`` (its folder registered first) and launch its worker;
    returns what went wrong ('' when it started or waits for a reading to be chosen)."""
    try:
        with st.spinner("Reading the request (a folder it names is checked and registered)…"):
            started = start_request(settings, store, request, llm=settings.llm,
                                    auto_approve=False, interpretation=interpretation)
    except JobError as exc:
        return f"No job was created: {exc}."
    if started["status"] == "needs_choice":
        st.session_state[PENDING] = {"request": request, **started["folder"]}
        return ""
    st.session_state.pop(PENDING, None)
    try:
        launcher.launch_worker(settings, store, started["job_id"])
    except Exception as exc:  # the worker could not start: say so, don't leave it queued
        store.update_job(started["job_id"], status="failed",
                         error=f"could not start the worker: {exc}")
        return f"The job was created but its worker could not start: {exc}"
    return ""


def reading_label(item: dict) -> str:
    return (f"{item['number']}. {TASK_TEXT.get(item['task'], item['task'])} from "
            f"{item['source']} — {item['num_samples']} samples, covers {item['coverage']:.0%}")


def choose_reading(settings, store) -> None:
    """The request waiting for a reading of the folder it names: the readings with example
    rows, a choice, and the buttons that go on with it or drop the request."""
    pending = st.session_state.get(PENDING)
    if not pending:
        return
    usable = [r for r in pending.get("interpretations", []) if not r.get("refused")]
    with st.chat_message("user"):
        st.markdown(md_escape(pending["request"]))
        st.caption("waiting for you to choose how its folder is read")
    with st.chat_message("assistant"):
        st.warning(f"The folder {code(pending['path'])} can be read in more than one way, so "
                   "nothing was registered yet. Choose the reading that is right; the folder is "
                   "then registered with it and the request goes on to the plan.",
                   icon=":material/help:")
        labels = {r["number"]: reading_label(r) for r in usable}
        for r in usable:
            st.markdown(f"**{md_escape(labels[r['number']])}** · classes: "
                        f"{md_escape(', '.join(r['classes']) or '(free text / masks)')} · "
                        f"patients by {md_escape(r['patient_key'])}")
            st.code("\n".join(r.get("examples") or []), language=None)
        if not labels:
            st.error("None of the readings can be used; register the folder on the Datasets "
                     "page, saying in the description where the labels are.",
                     icon=":material/error:")
        else:
            picked = st.radio("Use this reading", list(labels), format_func=labels.get,
                              key="chat_reading")
            go, drop = st.columns(2)
            if go.button("Register with this reading and plan", type="primary",
                         key="chat_reading_go", icon=":material/check:"):
                problem = submit(settings, store, pending["request"], int(picked))
                if problem:
                    st.session_state["chat_error"] = problem
                    st.session_state.pop(PENDING, None)
                st.rerun()
        if st.button("Drop this request", key="chat_reading_drop", icon=":material/close:"):
            st.session_state.pop(PENDING, None)
            st.rerun()


def bound_caption(job: dict) -> str:
    """What the user message's caption adds for a job bound to the dataset its request named."""
    name = job.get("bound_dataset") or ""
    return f" · dataset named by its folder: {name}" if name else ""
