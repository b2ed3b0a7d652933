"""Build a model: the conversation is the job history in the store, so it survives a reload."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import crew.worker
from core import RESEARCH_ONLY
from core.catalog import load_catalog
from core.jobs import JobError, create_job, is_finished, set_approval
from crew.stages import STAGES
from pages.ui_common import (context, elapsed, fmt_duration, fmt_when, job_result, md_escape,
                             metrics_row, read_json)

HISTORY = 10
EXAMPLE = "classify pneumonia versus normal chest X-rays"

settings, store = context()

st.title("Build a model")
st.caption("Say what you need in plain words. Four agents — Task Manager, Data Engineer, Module "
           "Architect and Model Trainer — choose a dataset, prepare it, write the data loader "
           "and train. You approve the plan before any training starts.")

prompt = st.chat_input(f"Describe the model you need, e.g. “{EXAMPLE}”")
submit_error = ""
if prompt is not None:
    try:
        new_id = create_job(settings, store, prompt, llm=settings.llm, auto_approve=False)
    except JobError as exc:
        submit_error = f"No job was created: {exc}."
    else:
        try:
            crew.worker.launch(settings, new_id)
        except Exception as exc:  # the worker could not start: say so, don't leave it queued
            store.update_job(new_id, status="failed", error=f"could not start the worker: {exc}")
            submit_error = f"The job was created but its worker could not start: {exc}"


def decide(job_id: str, decision: str) -> None:
    try:
        set_approval(store, job_id, decision)
    except JobError as exc:
        st.session_state["chat_error"] = str(exc)


def stage_state(events: list[dict], job: dict) -> tuple[str, str]:
    """(st.status state, label suffix) for one role from its stage events."""
    end = next((e for e in reversed(events) if e["kind"] == "stage" and e["tool"] == "end"), None)
    if end is not None:
        if end["ok"]:
            return "complete", f"done in {fmt_duration(end['seconds'])}"
        return "error", "failed"
    if is_finished(job):
        return "error", "stopped" if job["status"] in ("stopped", "cancelled") else "interrupted"
    return "running", "working…"


def render_steps(job: dict) -> None:
    events = store.events(job["id"])
    pending = []
    for stage in STAGES:
        mine = [e for e in events if e["role"] == stage.role]
        if not mine:
            pending.append(stage.role)
            continue
        state, label = stage_state(mine, job)
        with st.status(f"**{stage.role}** — {label}", state=state,
                       expanded=state in ("running", "error")):
            for e in mine:
                if e["kind"] in ("tool", "gate"):
                    mark = "✓" if e["ok"] else "✗"
                    what = f"check `{e['tool']}`" if e["kind"] == "gate" else f"`{e['tool']}`"
                    st.markdown(f"{mark} {what} — {md_escape(e['result'])} "
                                f"<small>· {e['seconds']:.1f} s</small>", unsafe_allow_html=True)
                elif e["kind"] == "stage" and e["tool"] == "end" and not e["ok"]:
                    st.error(e["result"])
            llm_calls = [e for e in mine if e["kind"] == "llm"]
            if llm_calls:
                st.caption(f"{len(llm_calls)} LLM calls · "
                           f"{sum(e['tokens'] for e in llm_calls):,} tokens")
    if pending and not is_finished(job):
        st.caption("Next: " + " → ".join(pending))


def plan_table(plan: dict) -> None:
    split = plan.get("split") or {}
    split_text = split.get("method", "—")
    if split.get("test_fraction") is not None:
        split_text += f"; {round(100 * split['test_fraction'])}% held out for testing"
    rows = [
        ("Dataset", plan.get("dataset") or "—"),
        ("Data", " · ".join(filter(None, [plan.get("modality"), plan.get("anatomy"),
                                          plan.get("dimension")])) or "—"),
        ("Classes", ", ".join(plan.get("classes") or []) or "—"),
        ("Task", plan.get("task") or "—"),
        ("Model", plan.get("model") or "—"),
        *([("Engine", f"{plan['engine']} ({plan.get('engine_reason', '')})")]
          if plan.get("engine") else []),
        ("Main metric", (plan.get("metric") or "—").upper()),
        ("Split", split_text),
        ("Time budget", fmt_duration(plan.get("time_budget_s"))),
    ]
    st.markdown("| Plan | Proposed |\n|---|---|\n" +
                "\n".join(f"| {k} | {md_escape(v)} |" for k, v in rows))
    if plan.get("reasons"):
        st.markdown(f"**Why:** {md_escape(plan['reasons'])}")


def render_outcome(job: dict) -> None:
    status, job_id = job["status"], job["id"]
    ws = Path(job["workspace"])
    if status == "queued":
        st.info("Queued — the agents are starting.", icon=":material/schedule:")
    elif status == "running":
        st.caption(f"Working: {job['stage'] or 'starting'} · elapsed {fmt_duration(elapsed(job))}")
        if job["stage"] == STAGES[-1].role:
            st.page_link("pages/training.py", label="Watch training curves",
                         icon=":material/monitoring:")
    elif status == "awaiting_approval":
        with st.container(border=True):
            st.markdown("**The Task Manager proposes this plan.** Nothing is trained until you "
                        "approve it.")
            plan_table(read_json(ws / "plan.json"))
            if job["approval"] == "approved":
                st.info("Approved — training starts in a moment.")
            else:
                left, right, _ = st.columns([1, 1, 4])
                left.button("Approve", type="primary", key=f"approve-{job_id}", on_click=decide,
                            args=(job_id, "approved"), icon=":material/check:")
                right.button("Cancel", key=f"cancel-{job_id}", on_click=decide,
                             args=(job_id, "cancelled"), icon=":material/close:")
    elif status == "succeeded":
        result, report = job_result(job), read_json(ws / "report.json")
        st.success(f"Model ready — trained on **{md_escape(job['dataset'])}** and tested on "
                   f"{report.get('num_test', 'the')} held-out images.",
                   icon=":material/check_circle:")
        metrics_row(result.get("metrics") or report.get("metrics", {}),
                    result.get("ci95") or report.get("ci95", {}))
        st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        st.markdown("**Saved model**")
        st.code(result.get("model_dir") or str(ws / "Logout" / "model"), language=None)
        st.page_link("pages/models.py", label="Open in Models: confusion matrix and model card",
                     icon=":material/model_training:")
    elif status == "no_dataset":
        reasons = read_json(ws / "plan.json").get("reasons") or job_result(job).get("reasons")
        st.warning("No registered dataset fits this request, so nothing was trained.",
                   icon=":material/search_off:")
        if reasons:
            st.markdown(f"**Task Manager:** {md_escape(reasons)}")
        st.page_link("pages/datasets.py", label="Register a dataset on the Datasets page",
                     icon=":material/dataset:")
    elif status == "failed":
        st.error(f"The job failed. {job['error'] or 'No error message was recorded.'}",
                 icon=":material/error:")
    elif status == "cancelled":
        st.info("Plan cancelled — nothing was trained.", icon=":material/cancel:")
    elif status == "stopped":
        result = job_result(job)
        if result.get("metrics"):
            st.info("Stopped at your request. Training ended early; the best model so far was "
                    "tested on the held-out images.", icon=":material/stop_circle:")
            metrics_row(result["metrics"], result.get("ci95", {}))
            st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        else:
            st.info("Stopped at your request.", icon=":material/stop_circle:")


def render_assistant(job: dict) -> None:
    render_steps(job)
    render_outcome(job)


@st.fragment(run_every=2)
def live_assistant(job_id: str) -> None:
    job = store.job(job_id)
    if job is None:
        return
    if is_finished(job):  # done since the last look: redraw the page without the timer
        st.rerun()
    render_assistant(job)


jobs = list(reversed(store.jobs(limit=HISTORY)))
if not jobs:
    available = sum(e.available for e in load_catalog(settings))
    with st.chat_message("assistant"):
        st.markdown(f"Hello. Tell me which model you need, for example *“{EXAMPLE}”*. "
                    f"I will pick a suitable dataset from the catalog ({available} available "
                    "now), show you the plan, and train once you approve.")
        st.page_link("pages/datasets.py", label="See or add datasets", icon=":material/dataset:")
elif len(store.jobs(limit=HISTORY + 1)) > HISTORY:
    st.caption(f"Showing your latest {HISTORY} requests; the Training and Models pages list "
               "older ones.")

for job in jobs:
    with st.chat_message("user"):
        st.markdown(md_escape(job["request"]))
        st.caption(f"{fmt_when(job['created_at'])} · job {job['id']}")
    with st.chat_message("assistant"):
        if is_finished(job):
            render_assistant(job)
        else:
            live_assistant(job["id"])

if submit_error:
    st.error(submit_error, icon=":material/error:")
if "chat_error" in st.session_state:
    st.error(st.session_state.pop("chat_error"), icon=":material/error:")
