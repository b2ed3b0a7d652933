"""The chat's plan card: the plan the Task Manager proposes, with Approve, Cancel, the edit form
(checked, re-gated, recorded, approved) and, for the quick demo, the full-size set one click
away."""
from __future__ import annotations

import streamlit as st

from core.datasets.catalog import find_entry
from core.demo.chest_xray import DEMO_NAME, FULL, FULL_DEMO_NAME, QUICK
from core.jobs.lifecycle import JobError, set_approval
from core.jobs.workspace import JobWorkspace
from core.planning.plan_edits import (LIMITS, PlanEditError, current_values, dataset_choices,
                                      edit_plan, engine_choices, network_choices, planned_epochs,
                                      user_edits)
from pages.ui_common import context, fmt_duration, fmt_when, md_escape, read_json


def decide(job_id: str, decision: str) -> None:
    _settings, store = context()
    st.session_state.pop(f"plan-error-{job_id}", None)
    try:
        set_approval(store, job_id, decision)
    except JobError as exc:
        st.session_state["chat_error"] = str(exc)


def use_full_demo(job_id: str) -> None:
    """The plan card's one click: the full-size demo set instead of the quick one, approved."""
    settings, store = context()
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
    settings, store = context()
    values = {f: st.session_state[f"edit-{job_id}-{f}"] for f in fields}
    try:
        result = edit_plan(settings, store, job_id, values, actor="user")
    except PlanEditError as exc:
        st.session_state[f"plan-error-{job_id}"] = exc.errors
        return
    st.session_state.pop(f"plan-error-{job_id}", None)
    st.session_state[f"plan-saved-{job_id}"] = result.summary()


def split_text(plan: dict, ws: JobWorkspace) -> str:
    """How the test set is held out: fraction, seed and the key that groups images by patient
    (split.json's once the Data Engineer has split, else the datacard's)."""
    settings, _store = context()
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
    _settings, store = context()
    for e in store.events(job_id):
        if e["kind"] == "edit" and e["role"] == "User":
            st.caption(f":material/edit: You changed the plan before approving it: "
                       f"{md_escape(e['result'])} · {fmt_when(e['ts'])}")


def edit_form(job_id: str, plan: dict) -> None:
    """Change the fields the agents honour, then save (checked, re-gated, approved)."""
    settings, _store = context()
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


def plan_card(job: dict, ws: JobWorkspace) -> None:
    """A plan awaiting approval."""
    job_id = job["id"]
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
