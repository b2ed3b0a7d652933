"""Training: a live dashboard of the jobs. The jobs list; for the chosen job its status, each
role's timeline, a progress bar with an ETA (or how training ended), live curves (loss,
validation metrics, learning rate, gradient norm), the machine's load, Stop and Resume, and the
tail of its logs. While the job runs the dashboard part refreshes itself every few seconds (a
fragment), the rest of the page stays put; a finished job's page runs no timer at all.
"""
from __future__ import annotations

import time

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.jobs import launcher
from core.store.curves import MAX_POINTS, JobCurves, training_progress
from core.jobs.lifecycle import (RESUMABLE_STATUSES, JobError, is_finished, job_logs,
                                 prepare_resume, request_stop, resume_mode, resume_problem,
                                 role_timeline, tail_file)
from core.viewing.refresh import LIVE_S, jobs_refresh_every, refresh_every
from core.viewing.system_stats import fmt_bytes, process_tree, system_stats
from core.viewing.training_charts import training_panels
from core.viewing.training_outcome import training_outcome
from crew.stages import STAGES
from pages.ui_common import STATUS_TEXT, context, elapsed, fmt_duration, fmt_when, read_json

LOG_LINES = 60
LOG_BYTES = 64 * 1024
RESUMING = {"checkpoint": "Resuming: the Model Trainer continues from the newest checkpoint, then "
                          "the model is tested again.",
            "stage": "Resuming: the job goes on from the stage that did not finish; the stages "
                     "that finished are checked again and kept.",
            "": "Resuming."}
ROLE_STATUS = {"waiting": "Waiting", "running": "Running", "succeeded": "Done",
               "failed": "Failed", "interrupted": "Interrupted"}

settings, store = context()

st.title("Training")
st.caption("Live curves from the Model Trainer: training loss should fall and validation scores "
           f"should rise. While a job runs its dashboard refreshes every {LIVE_S:g} seconds.")

if "training_notice" in st.session_state:  # set by the Resume button's callback
    kind, text = st.session_state.pop("training_notice")
    (st.success if kind == "success" else st.error)(text)

jobs = store.jobs(limit=50)
if not jobs:
    st.info("No jobs yet. Ask for a model on the Build a model page.", icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()


# ------------------------------------------------------------------------------ jobs list
def jobs_table(timed: float | None) -> None:
    listed = store.jobs(limit=50)
    if timed is not None and jobs_refresh_every(listed) != timed:
        st.rerun()  # every job finished (or one started waiting): redraw at the new pace
    rows = [{"Created": fmt_when(j["created_at"]),
             "Status": STATUS_TEXT.get(j["status"], j["status"]),
             "Stage": j["stage"] or "—", "Elapsed": fmt_duration(elapsed(j)),
             "Dataset": j.get("dataset") or "—", "Task": j.get("task") or "—",
             "Request": j["request"], "Job": j["id"]} for j in listed]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 height=min(38 + 35 * len(rows), 300))


with st.expander(f"Jobs ({len(jobs)})", expanded=True, icon=":material/list:"):
    jobs_pace = jobs_refresh_every(jobs)
    st.fragment(jobs_table, run_every=jobs_pace)(jobs_pace)


def job_choice(i: str) -> str:
    """A job in the select box; no status in it, so the choice survives a status change."""
    job = by_id[i]
    request = job["request"] if len(job["request"]) <= 60 else job["request"][:57] + "..."
    return f"{fmt_when(job['created_at'])} · {request} · {i[-6:]}"


by_id = {j["id"]: j for j in jobs}
running = [j["id"] for j in jobs if j["status"] == "running"]
default = running[0] if running else jobs[0]["id"]
if st.session_state.get("training_job") not in by_id:  # first visit, or the job is gone
    st.session_state["training_job"] = default
job_id = st.selectbox("Job", list(by_id), key="training_job", format_func=job_choice,
                      help="Defaults to the most recent running job, else the latest one.")


# ------------------------------------------------------------------------------ actions
def resume(selected: str) -> None:
    """Resume button: queue the job to go on (training from its newest checkpoint, else from
    the stage that did not finish), start it."""
    mode = resume_mode(store.job(selected))[0]
    try:
        prepare_resume(store, selected)
    except JobError as exc:
        st.session_state["training_notice"] = ("error", str(exc))
        return
    try:
        launcher.launch_worker(settings, store, selected, resume=True)
    except OSError as exc:
        store.update_job(selected, status="failed", finished_at=time.time(),
                         error=f"could not start the worker: {exc}")
        st.session_state["training_notice"] = ("error", f"Could not start the worker: {exc}")
        return
    st.session_state["training_notice"] = ("success", RESUMING[mode])


def actions(job: dict) -> None:
    if not is_finished(job):
        if job["stop_requested"]:
            st.caption("Stop requested: training ends within a few seconds and the best "
                       "checkpoint so far is tested.")
        else:
            st.button("Stop", icon=":material/stop_circle:", key=f"stop-{job['id']}",
                      on_click=request_stop, args=(store, job["id"]),
                      help="During training: training ends early, the job ends as stopped, and "
                           "the best checkpoint so far is tested and saved. Before training: "
                           "the job ends.")
        return
    if job["status"] not in RESUMABLE_STATUSES:
        return
    problem = resume_problem(job)
    if problem:
        st.caption(f"Cannot resume: {problem}.")
    else:
        st.button("Resume", icon=":material/play_circle:", key=f"resume-{job['id']}",
                  on_click=resume, args=(job["id"],),
                  help="Training continues from the newest checkpoint (the plan, index and "
                       "dataloader are reused), then the model is tested again. A job stopped "
                       "before training saved a checkpoint continues from the stage that did "
                       "not finish; finished stages are checked again and kept.")


# ------------------------------------------------------------------------------ parts
def curves_of(selected: str) -> JobCurves:
    """The job's curves, kept in the session and read incrementally on each refresh."""
    cached = st.session_state.get("training_curves")
    if not isinstance(cached, JobCurves) or cached.job_id != selected:
        cached = JobCurves(selected)
        st.session_state["training_curves"] = cached
    cached.refresh(settings.store_path)
    return cached


def progress(job: dict, curves: JobCurves, config: dict) -> None:
    summary = read_json(f"{job['workspace']}/Logout/train_summary.json")
    if is_finished(job) and summary:
        st.progress(1.0, text=training_outcome(summary, config))
        return
    p = training_progress(curves, config.get("epochs"), config.get("time_budget_s"))
    parts = [f"Step {p.step}" + (f" of at most {p.max_steps}" if p.max_steps else "")]
    parts.append(f"epoch {p.epoch:.1f}" + (f" of {p.epochs:g}" if p.epochs else ""))
    if is_finished(job):
        if job["status"] != "succeeded":
            parts.append("training did not finish")
    elif p.eta_s is None:
        parts.append("ETA estimating…")
    else:
        parts.append(f"about {fmt_duration(p.eta_s)} left"
                     + (" (the time budget ends it)" if p.eta_limited_by_budget else
                        " at most (early stopping can end it sooner)"))
    st.progress(p.fraction, text=" · ".join(parts))


def timeline(job: dict) -> None:
    events = store.events(job["id"])
    rows = role_timeline(events, [s.role for s in STAGES], job)
    table = pd.DataFrame([{
        "Role": r["role"], "Status": ROLE_STATUS.get(r["status"], r["status"]),
        "Started": time.strftime("%H:%M:%S", time.localtime(r["started"]))
        if r["started"] else "—",
        "Ended": time.strftime("%H:%M:%S", time.localtime(r["ended"])) if r["ended"] else "—",
        "Time": fmt_duration(r["seconds"]) if r["started"] else "—",
        "Seconds": round(r["seconds"], 1), "Actions": r["actions"], "Tokens": r["tokens"],
        "Autopilot fallback": "yes" if r["fallback"] else "", "Runs": r["runs"]} for r in rows])
    if job.get("llm", "autopilot") == "autopilot":
        table = table.drop(columns=["Tokens", "Autopilot fallback"])
    if table["Runs"].max() <= 1:
        table = table.drop(columns=["Runs"])
    total = max(float(table["Seconds"].sum()), 1e-9)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "Seconds": st.column_config.ProgressColumn(
            "Share of time", format="%.1f s", min_value=0.0, max_value=total,
            help="Seconds this role has worked, against all roles together."),
        "Actions": st.column_config.NumberColumn(help="Tool calls made by the role."),
    })


def show_chart(fig: go.Figure) -> None:
    st.plotly_chart(fig, width="stretch", config={"displaylogo": False})


def charts(job: dict, curves: JobCurves, config: dict) -> None:
    """Loss, validation metrics, learning rate and gradient norm, two to a row; a panel with
    no points yet is a sentence saying when its first point comes, never empty axes."""
    p = training_progress(curves, config.get("epochs"))
    panels = training_panels(curves, config, finished=is_finished(job), step=p.step,
                             epoch=p.epoch)
    drawn = [x for x in panels if x.figure is not None and x.key != "other"]
    for i in range(0, len(drawn), 2):
        row = drawn[i:i + 2]
        for column, panel in zip(st.columns(len(row)), row):
            with column:
                show_chart(panel.figure)
    for panel in panels:
        if panel.figure is None:
            st.caption(panel.note)
        elif panel.key == "other":
            show_chart(panel.figure)
    longest = max((len(s) for s in curves.series.values()), default=0)
    if longest > MAX_POINTS:
        st.caption(f"Long run: each curve is drawn with at most {MAX_POINTS} of its "
                   f"{longest:,} points (every bucket's minimum and maximum are kept, so no "
                   "spike is hidden).")


def system_panel(job: dict) -> None:
    stats = system_stats()
    st.markdown("**System**")
    if stats.gpus:
        cols = st.columns(2 * len(stats.gpus))
        for i, gpu in enumerate(stats.gpus):
            cols[2 * i].metric(f"GPU {gpu.index} utilisation", f"{gpu.utilization_pct:.0f}%",
                               help=gpu.name)
            cols[2 * i + 1].metric(f"GPU {gpu.index} memory",
                                   f"{fmt_bytes(gpu.memory_used_bytes)} of "
                                   f"{fmt_bytes(gpu.memory_total_bytes)}",
                                   help=f"{gpu.memory_pct:.0f}% used")
        st.caption(f"CPU {stats.cpu_percent:.0f}% of {stats.cpu_count} cores · RAM "
                   f"{fmt_bytes(stats.ram_used_bytes)} of {fmt_bytes(stats.ram_total_bytes)}"
                   + (f" · {stats.gpu_note}" if stats.gpu_note else ""))
    else:
        cpu, ram = st.columns(2)
        cpu.metric("CPU", f"{stats.cpu_percent:.0f}%", help=f"All {stats.cpu_count} cores")
        ram.metric("RAM", f"{fmt_bytes(stats.ram_used_bytes)} of "
                          f"{fmt_bytes(stats.ram_total_bytes)}", help=f"{stats.ram_pct:.0f}% used")
        st.caption(stats.gpu_note)
    if not is_finished(job):
        tree = process_tree(job.get("pid"))
        if tree:
            st.caption(f"This job: {tree.processes} process(es) using "
                       f"{fmt_bytes(tree.rss_bytes)} of memory.")


def logs(job: dict) -> None:
    with st.expander(f"Logs (last {LOG_LINES} lines)", icon=":material/article:"):
        found = job_logs(job)
        for tab, (name, path) in zip(st.tabs(list(found)), found.items()):
            with tab:
                st.code(tail_file(path, LOG_LINES, LOG_BYTES) or "The log is empty.",
                        language=None)
                st.caption(f"Full log: `{path}`")


# ------------------------------------------------------------------------------ the dashboard
def render(job: dict) -> None:
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    c1.metric("Status", STATUS_TEXT.get(job["status"], job["status"]))
    c2.metric("Stage", job["stage"] or ("—" if is_finished(job) else "starting"))
    c3.metric("Elapsed", fmt_duration(elapsed(job)))
    with c4:
        actions(job)
    if job["status"] == "awaiting_approval":
        st.info("The plan waits for your approval on the Build a model page.",
                icon=":material/approval:")
    if job["status"] in ("failed", "stopped") and job.get("error"):
        st.error(job["error"])

    curves = curves_of(job["id"])
    config = read_json(f"{job['workspace']}/train_config.json")
    if not curves.empty:
        progress(job, curves, config)
    timeline(job)
    if curves.empty:
        if is_finished(job):
            st.info("This job did not reach training, so there are no curves.")
        else:
            st.info("No training metrics yet: curves appear once the Model Trainer starts.",
                    icon=":material/hourglass_top:")
    else:
        charts(job, curves, config)
    system_panel(job)
    logs(job)
    if job["status"] == "succeeded":
        st.page_link("pages/models.py", label="See the test results on the Models page",
                     icon=":material/model_training:")


def live(selected: str, pace: float) -> None:
    """The dashboard of a job that is not finished, redrawn every ``pace`` seconds. Once the
    job finishes (or starts or stops waiting for approval) the whole page is redrawn once, so
    the timer stops (or changes pace): a finished job's page stays idle."""
    job = store.job(selected)
    if job is None:
        return
    if refresh_every(job) != pace:
        st.rerun()
    render(job)


job = store.job(job_id)
pace = refresh_every(job)
if job is None:
    st.error("This job no longer exists.")
elif pace is None:  # finished: drawn once, no timer
    render(job)
else:
    st.fragment(live, run_every=pace)(job_id, pace)
