"""Build a model: the conversation is the job history in the store, so it survives a reload."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from core import RESEARCH_ONLY
from core.datasets.catalog import load_catalog
from core.jobs.workspace import JobWorkspace
from core.jobs.lifecycle import is_finished, role_timeline
from core.viewing.refresh import LIVE_S, PLANNING_S, WAITING_S, chat_refresh_every
from crew.stages import STAGES
from pages.chat_external import ExternalExchanges, external_prompt
from pages.chat_folder import bound_caption, choose_reading, submit
from pages.chat_plan import plan_card, plan_edits_made, plan_table
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
prompt = external_prompt(settings, store, prompt)  # "test this model on ...": scored here
submit_error = ""
if prompt is not None:  # a folder the request names is registered first (pages/chat_folder.py)
    submit_error = submit(settings, store, prompt)


# a role's mark: running spins, succeeded ✓, failed ✗ (st.status's error), and a neutral mark
# for a role the job ended before it finished (stopped, interrupted) or that never ran
NEUTRAL_ICON = {"stopped": ":material/stop_circle:", "interrupted": ":material/pause_circle:",
                "waiting": ":material/radio_button_unchecked:"}


def role_box(role: str, row: dict, job: dict):
    """The container one role's steps are written into, labelled and marked by its status
    (core.jobs.lifecycle.role_timeline). Never used as ``with``: st.status marks itself
    complete when its block ends, which put a ✓ next to a role still working."""
    status = row["status"]
    if status == "running":
        return st.status(f"**{role}** — working…", state="running", expanded=True)
    if status == "succeeded":
        return st.status(f"**{role}** — done in {fmt_duration(row['seconds'])}",
                         state="complete")
    if status == "failed":
        return st.status(f"**{role}** — failed", state="error", expanded=True)
    if status == "interrupted":
        status = "stopped" if job["status"] in ("stopped", "cancelled") else "interrupted"
    return st.expander(f"**{role}** — {status}", icon=NEUTRAL_ICON.get(status),
                       expanded=status == "interrupted")


def role_steps(box, mine: list[dict]) -> None:
    """One role's tool calls, checks, fallbacks and LLM use, written into its box."""
    for e in mine:
        if e["kind"] in ("tool", "gate"):
            mark = "✓" if e["ok"] else "✗"
            what = f"check `{e['tool']}`" if e["kind"] == "gate" else f"`{e['tool']}`"
            box.markdown(f"{mark} {what} — {md_escape(e['result'])} "
                         f"<small>· {e['seconds']:.1f} s</small>", unsafe_allow_html=True)
        elif e["kind"] == "stage" and e["tool"] == "end" and not e["ok"]:
            box.error(e["result"])
        elif e["kind"] in ("fallback", "cap"):
            what = "Autopilot took over" if e["kind"] == "fallback" else "Cap reached"
            box.warning(f"{what}: {md_escape(e['result'])}", icon="↪")
        elif e["kind"] == "llm" and e["tool"] == "retry":
            box.caption(f"LLM {md_escape(e['result'])}")
    llm_calls = [e for e in mine if e["kind"] == "llm" and e["tool"] != "retry"]
    if llm_calls:
        cost = sum(e.get("cost") or 0.0 for e in llm_calls)
        box.caption(f"{len(llm_calls)} LLM calls · "
                    f"{sum(e['tokens'] for e in llm_calls):,} tokens"
                    + (f" · ${cost:.4f}" if cost else ""))


def render_steps(job: dict) -> None:
    events = store.events(job["id"])
    rows = role_timeline(events, [s.role for s in STAGES], job)
    pending = []
    for stage, row in zip(STAGES, rows):
        mine = [e for e in events if e["role"] == stage.role]
        if not mine:
            pending.append(stage.role)
            continue
        role_steps(role_box(stage.role, row, job), mine)
    if pending and not is_finished(job):
        st.caption("Next: " + " → ".join(pending))


def render_outcome(job: dict) -> None:
    status = job["status"]
    ws = JobWorkspace(Path(job["workspace"]))
    if status == "queued":
        st.info("Queued — the agents are starting.", icon=":material/schedule:")
    elif status == "running":
        st.caption(f"Working: {job['stage'] or 'starting'} · elapsed {fmt_duration(elapsed(job))}")
        if job["stage"] == STAGES[-1].role:
            st.page_link("pages/training.py", label="Watch training curves",
                         icon=":material/monitoring:")
    elif status == "awaiting_approval":
        plan_card(job, ws)
    elif status == "succeeded":
        result, report = job_result(job), read_json(ws.report)
        st.success(f"Model ready — trained on **{md_escape(job['dataset'])}** and tested on "
                   f"{report.get('num_test', 'the')} held-out images.",
                   icon=":material/check_circle:")
        metrics_row(result.get("metrics") or report.get("metrics", {}),
                    result.get("ci95") or report.get("ci95", {}))
        st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        st.markdown("**Saved model**")
        st.code(result.get("model_dir") or str(ws.model_dir), language=None)
        result_links(job)
    elif status == "no_dataset":
        reasons = read_json(ws.plan).get("reasons") or job_result(job).get("reasons")
        st.warning("No registered dataset fits this request, so nothing was trained.",
                   icon=":material/search_off:")
        if reasons:
            st.markdown(f"**Task Manager:** {md_escape(reasons)}")
        if "Nearest: '" not in (reasons or "") and not job.get("bound_dataset"):
            # an LLM's own words: today's nearest dataset (not for a dataset the user named)
            from core.planning.matching import rank_datacards
            nearest = rank_datacards(job.get("request") or "", [
                (e.card, e.available) for e in load_catalog(settings)])["nearest_text"]
            if nearest:
                st.markdown("**Nearest registered dataset:** "
                            + md_escape(nearest.removeprefix("Nearest: ")))
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
            result_links(job)
        else:
            st.info("Stopped at your request.", icon=":material/stop_circle:")


def result_links(job: dict) -> None:
    model = store.model(job["id"])  # the job's model (named with its version), if kept
    left, right = st.columns(2)
    with left:
        if model:
            st.page_link("pages/models.py", label=f"Open {model['name']} in Models: report "
                         "and model card", icon=":material/model_training:",
                         query_params={"model": model["id"]})
        else:
            st.page_link("pages/models.py", label="Models (this job's model was deleted)",
                         icon=":material/model_training:")
    with right:
        st.page_link("pages/training.py", label="Open in Training: curves and log",
                     icon=":material/monitoring:")


def render_assistant(job: dict) -> None:
    render_steps(job)
    render_outcome(job)
    if job["status"] in ("queued", "awaiting_approval"):
        return  # no plan yet, or the plan card above shows it
    plan = read_json(JobWorkspace(Path(job["workspace"])).plan)
    if plan.get("status") == "ready":  # the plan the agents follow (or followed)
        plan_edits_made(job["id"])
        approved = job["approval"] == "approved"
        with st.expander("Plan" + (" (approved)" if approved else ""),
                         icon=":material/list_alt:"):
            plan_table(plan, JobWorkspace(Path(job["workspace"])),
                       "Approved" if approved else "Proposed")


def follow(job_id: str, pace: float) -> None:
    job = store.job(job_id)
    if job is None:
        return
    if chat_refresh_every(job) != pace:  # finished, or planned: redraw at the new pace (or none)
        st.rerun()
    render_assistant(job)


# one fragment per pace (core/viewing/refresh.py): quick until the plan shows, then slower
@st.fragment(run_every=PLANNING_S)
def follow_planning(job_id: str) -> None:
    follow(job_id, PLANNING_S)


@st.fragment(run_every=LIVE_S)
def follow_live(job_id: str) -> None:
    follow(job_id, LIVE_S)


@st.fragment(run_every=WAITING_S)
def follow_waiting(job_id: str) -> None:
    follow(job_id, WAITING_S)


PACED = {PLANNING_S: follow_planning, LIVE_S: follow_live, WAITING_S: follow_waiting}


def live_assistant(job: dict) -> None:
    PACED[chat_refresh_every(job)](job["id"])


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

exchanges = ExternalExchanges(store, since=jobs[0]["created_at"] if len(jobs) == HISTORY else 0)
for job in jobs:
    exchanges.show_until(job["created_at"])
    with st.chat_message("user"):
        st.markdown(md_escape(job["request"]))
        st.caption(f"{fmt_when(job['created_at'])} · job {job['id']}{bound_caption(job)}")
    with st.chat_message("assistant"):
        if is_finished(job):
            render_assistant(job)
        else:
            live_assistant(job)
exchanges.show_until()
choose_reading(settings, store)  # a request whose folder can be read more than one way

if submit_error:
    st.error(submit_error, icon=":material/error:")
if "chat_error" in st.session_state:
    st.error(st.session_state.pop("chat_error"), icon=":material/error:")
