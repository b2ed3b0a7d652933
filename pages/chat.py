"""Build a model: the conversation is the job history in the store, so it survives a reload."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.jobs import launcher
from core import RESEARCH_ONLY
from core.datasets.catalog import find_entry, load_catalog
from core.demo.chest_xray import DEMO_NAME, FULL, FULL_DEMO_NAME, QUICK
from core.jobs.workspace import JobWorkspace
from core.jobs.lifecycle import (JobError, create_job, is_finished, role_timeline,
                                 set_approval)
from core.planning.plan_edits import (LIMITS, PlanEditError, current_values, dataset_choices,
                                      edit_plan, engine_choices, network_choices, planned_epochs,
                                      user_edits)
from core.viewing.refresh import LIVE_S, PLANNING_S, WAITING_S, chat_refresh_every
from crew.stages import STAGES
from pages.chat_external import ExternalExchanges, external_prompt
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
if prompt is not None:
    try:
        new_id = create_job(settings, store, prompt, llm=settings.llm, auto_approve=False)
    except JobError as exc:
        submit_error = f"No job was created: {exc}."
    else:
        try:
            launcher.launch_worker(settings, store, new_id)
        except Exception as exc:  # the worker could not start: say so, don't leave it queued
            store.update_job(new_id, status="failed", error=f"could not start the worker: {exc}")
            submit_error = f"The job was created but its worker could not start: {exc}"


def decide(job_id: str, decision: str) -> None:
    st.session_state.pop(f"plan-error-{job_id}", None)
    try:
        set_approval(store, job_id, decision)
    except JobError as exc:
        st.session_state["chat_error"] = str(exc)


def use_full_demo(job_id: str) -> None:
    """The plan card's one click: the full-size demo set instead of the quick one, approved."""
    from crew.demo import ensure_full_demo
    with st.spinner("Preparing the full-size demo set…"):
        registered = ensure_full_demo(settings)
    if registered.get("status") != "registered":
        st.session_state[f"plan-error-{job_id}"] = registered.get("errors") or [
            "the full-size demo set could not be registered"]
        return
    try:
        result = edit_plan(settings, store, job_id, {"dataset": FULL_DEMO_NAME}, actor="user")
    except PlanEditError as exc:
        st.session_state[f"plan-error-{job_id}"] = exc.errors
        return
    st.session_state.pop(f"plan-error-{job_id}", None)
    st.session_state[f"plan-saved-{job_id}"] = result.summary()


def full_size_choice(job_id: str) -> None:
    st.caption(f"This is the quick demo set ({2 * QUICK['patients_per_class']} patients, "
               f"{QUICK['size']} px): a first model in about two minutes. The full-size set "
               f"({2 * FULL['patients_per_class']} patients, {FULL['size']} px) gives a better "
               "model in a few more minutes.")
    st.button("Approve with the full-size demo set", key=f"full-demo-{job_id}",
              on_click=use_full_demo, args=(job_id,), icon=":material/zoom_out_map:")


def save_edits(job_id: str, fields: list[str]) -> None:
    """The edit form's values: checked, written into plan.json, re-gated, recorded, approved."""
    values = {f: st.session_state[f"edit-{job_id}-{f}"] for f in fields}
    try:
        result = edit_plan(settings, store, job_id, values, actor="user")
    except PlanEditError as exc:
        st.session_state[f"plan-error-{job_id}"] = exc.errors
        return
    st.session_state.pop(f"plan-error-{job_id}", None)
    st.session_state[f"plan-saved-{job_id}"] = result.summary()


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


def split_text(plan: dict, ws: JobWorkspace) -> str:
    """How the test set is held out: fraction, seed and the key that groups images by patient
    (split.json's once the Data Engineer has split, else the datacard's)."""
    split = plan.get("split") or {}
    done = read_json(ws.split)
    if done.get("method") == "kept_from_dataset":
        parts = ["the dataset's own train/test split"]
    else:
        parts = [split.get("method") or "grouped by patient, stratified by class"]
        if split.get("test_fraction") is not None:
            parts.append(f"{split['test_fraction']:.0%} of patients held out for testing")
        if split.get("seed") is not None:
            parts.append(f"seed {split['seed']}")
    entry = find_entry(settings, plan["dataset"]) if plan.get("dataset") else None
    key = done.get("grouping_key") or (entry.card.grouping_key if entry else "")
    parts.append(f"grouping key: {key}" if key else
                 "grouping key: found when the Data Engineer scans the folder (a patient "
                 "column, DICOM PatientID, patient folder or file-name prefix)")
    return "; ".join(parts)


def threshold_text(rule: str) -> str:
    if rule == "youden":
        return ("chosen on the validation images by Youden's J (balances sensitivity and "
                "specificity)")
    return f"chosen on the validation images for {rule}"


def plan_table(plan: dict, ws: JobWorkspace, header: str = "Proposed") -> None:
    edited = user_edits(plan)

    def mine(*keys: str) -> str:
        return " *(set by you)*" if any(k in edited for k in keys) else ""

    epochs = planned_epochs(plan)
    epochs_text = (f"{epochs}" if "epochs" in edited else
                   f"up to {epochs} (the template's default; training stops early when the "
                   "validation score stops improving)")
    rows = [
        ("Dataset", md_escape(plan.get("dataset") or "—") + mine("dataset")),
        ("Data", md_escape(" · ".join(filter(None, [plan.get("modality"), plan.get("anatomy"),
                                                     plan.get("dimension")])) or "—")),
        ("Classes", md_escape(", ".join(plan.get("classes") or []) or "—")),
        ("Task / template", md_escape(" / ".join(filter(None, [plan.get("task"),
                                                              plan.get("template")])) or "—")),
        *([("Engine", md_escape(f"{plan['engine']} ({plan.get('engine_reason', '')})")
            + mine("engine"))] if plan.get("engine") else []),
        ("Model / network", md_escape(plan.get("model") or "—") + mine("model")),
        ("Main metric", md_escape((plan.get("metric") or "—").upper())),
        ("Split", md_escape(split_text(plan, ws)) + mine("test_fraction", "seed")),
        ("Epochs", md_escape(epochs_text) + mine("epochs")),
        ("Time budget", md_escape(fmt_duration(plan.get("time_budget_s"))) + mine("time_budget_s")),
        *([("Decision threshold", md_escape(threshold_text(plan["operating_point"]))
            + mine("operating_point"))] if plan.get("operating_point") else []),
    ]
    st.markdown(f"| Plan | {header} |\n|---|---|\n" +
                "\n".join(f"| {k} | {v} |" for k, v in rows))
    if plan.get("reasons"):
        st.markdown(f"**Why:** {md_escape(plan['reasons'])}")


def plan_edits_made(job_id: str) -> None:
    """The user's edits to this job's plan, from its events."""
    for e in store.events(job_id):
        if e["kind"] == "edit" and e["role"] == "User":
            st.caption(f":material/edit: You changed the plan before approving it: "
                       f"{md_escape(e['result'])} · {fmt_when(e['ts'])}")


def edit_form(job_id: str, plan: dict) -> None:
    """Change the fields the agents honour, then save (checked, re-gated, approved)."""
    now = current_values(plan)
    key = f"edit-{job_id}-"
    fields = ["dataset", "model", "epochs", "time_budget_min", "test_fraction", "seed"]
    with st.form(f"edit-{job_id}", border=False):
        left, right = st.columns(2)
        datasets = dataset_choices(settings, plan)
        left.selectbox("Dataset", datasets, index=datasets.index(now["dataset"])
                       if now["dataset"] in datasets else 0, key=key + "dataset",
                       help="Available registered datasets that serve this task.")
        engines = engine_choices(plan)
        if engines:
            fields.append("engine")
            right.selectbox("Engine", engines, index=engines.index(now["engine"])
                            if now["engine"] in engines else 0, key=key + "engine",
                            help="MONAI trains a small UNet in minutes; nnU-Net configures "
                                 "itself and needs a GPU and hours to shine. Changing only the "
                                 "engine picks its default network.")
        networks = network_choices(plan)
        right.selectbox("Network", networks, index=networks.index(now["model"])
                        if now["model"] in networks else 0, key=key + "model")
        # no min/max on the inputs: a value out of range gets plan_edits' message naming the
        # allowed range instead of being silently clamped
        lo, hi = LIMITS["epochs"]
        left.number_input(f"Epochs (at most; {lo}–{hi})", step=1, value=int(now["epochs"]),
                          key=key + "epochs")
        lo, hi = LIMITS["time_budget_min"]
        budget = now["time_budget_min"]
        integral = float(budget).is_integer()
        right.number_input(f"Time budget (minutes; {lo}–{hi})", step=1 if integral else 1.0,
                           value=int(budget) if integral else float(budget),
                           key=key + "time_budget_min",
                           help="Training stops when the budget is spent; the best model so "
                                "far is tested.")
        lo, hi = LIMITS["test_fraction"]
        left.number_input(f"Test fraction ({lo}–{hi})", step=0.05,
                          value=float(now["test_fraction"]), format="%.2f",
                          key=key + "test_fraction",
                          help="Share of patients held out for testing. Changing it re-splits "
                               "the data by patient at this share, even when the dataset comes "
                               "with its own train/test split.")
        right.number_input("Seed", step=1, value=int(now["seed"]), key=key + "seed",
                           help="Seeds the split and the training (a whole number from 0).")
        if plan.get("template") == "diagnosis":
            fields.append("operating_point")
            left.text_input("Decision threshold rule", value=now["operating_point"] or "youden",
                            key=key + "operating_point",
                            help="How the threshold that turns a score into a decision is "
                                 "chosen on the validation images: 'youden' (balances "
                                 "sensitivity and specificity), or a target such as '95% "
                                 "sensitivity' or '90% specificity'.")
        st.form_submit_button("Save changes and approve", type="primary", icon=":material/check:",
                              on_click=save_edits, args=(job_id, fields))
    for message in st.session_state.get(f"plan-error-{job_id}", []):
        st.error(f"Not saved: {message}", icon=":material/error:")


def render_outcome(job: dict) -> None:
    status, job_id = job["status"], job["id"]
    ws = JobWorkspace(Path(job["workspace"]))
    if status == "queued":
        st.info("Queued — the agents are starting.", icon=":material/schedule:")
    elif status == "running":
        st.caption(f"Working: {job['stage'] or 'starting'} · elapsed {fmt_duration(elapsed(job))}")
        if job["stage"] == STAGES[-1].role:
            st.page_link("pages/training.py", label="Watch training curves",
                         icon=":material/monitoring:")
    elif status == "awaiting_approval":
        plan = read_json(ws.plan)
        with st.container(border=True):
            st.markdown("**The Task Manager proposes this plan.** Nothing is trained until you "
                        "approve it. You can approve it, change it, or cancel.")
            plan_table(plan, ws)
            plan_edits_made(job_id)
            if job["approval"] == "approved":
                saved = st.session_state.get(f"plan-saved-{job_id}")
                st.info(f"Approved{' with your changes' if saved else ''} — training starts "
                        "in a moment.", icon=":material/check:")
            elif job["approval"] == "cancelled":
                st.info("Cancelled — the agents are stopping.", icon=":material/cancel:")
            else:
                left, right, _ = st.columns([1, 1, 4])
                left.button("Approve", type="primary", key=f"approve-{job_id}", on_click=decide,
                            args=(job_id, "approved"), icon=":material/check:")
                right.button("Cancel", key=f"cancel-{job_id}", on_click=decide,
                             args=(job_id, "cancelled"), icon=":material/close:")
                if plan.get("dataset") == DEMO_NAME:
                    full_size_choice(job_id)
                if plan.get("status") == "ready":
                    with st.expander("Edit the plan", icon=":material/edit:",
                                     expanded=bool(st.session_state.get(
                                         f"plan-error-{job_id}"))):
                        edit_form(job_id, plan)
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
        if "Nearest: '" not in (reasons or ""):  # an LLM's own words: today's nearest dataset
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
        st.caption(f"{fmt_when(job['created_at'])} · job {job['id']}")
    with st.chat_message("assistant"):
        if is_finished(job):
            render_assistant(job)
        else:
            live_assistant(job)
exchanges.show_until()

if submit_error:
    st.error(submit_error, icon=":material/error:")
if "chat_error" in st.session_state:
    st.error(st.session_state.pop("chat_error"), icon=":material/error:")
