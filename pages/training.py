"""Training: live curves for one job, its progress, a Stop button and the training log."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.jobs import is_finished, request_stop
from pages.ui_common import STATUS_TEXT, context, elapsed, fmt_duration, job_label, read_json
from tools.process import tail

MAX_POINTS = 2000
LOG_LINES = 40

settings, store = context()

st.title("Training")
st.caption("Live curves from the Model Trainer: training loss should fall and validation AUC "
           "should rise. While a job runs the page refreshes every 2 seconds.")

jobs = store.jobs(limit=50)
if not jobs:
    st.info("No jobs yet. Ask for a model on the Build a model page.", icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()

by_id = {j["id"]: j for j in jobs}
running = [j["id"] for j in jobs if j["status"] == "running"]
default = running[0] if running else jobs[0]["id"]
job_id = st.selectbox("Job", list(by_id), index=list(by_id).index(default),
                      format_func=lambda i: job_label(by_id[i]),
                      help="Defaults to the most recent running job, else the latest one.")


SCORE_LABELS = {"eval_auc": "AUC", "eval_accuracy": "Accuracy", "eval_f1_macro": "F1 (macro)",
                "eval_dice": "Dice", "eval_map50": "mAP@0.5", "eval_rouge_l": "ROUGE-L"}


def downsample(frame: pd.DataFrame, limit: int = MAX_POINTS) -> pd.DataFrame:
    """Keep at most ~limit points, evenly spaced, always including the last one."""
    if len(frame) <= limit:
        return frame
    step = -(-len(frame) // limit)
    return pd.concat([frame.iloc[::step], frame.iloc[[-1]]]).drop_duplicates()


def line_chart(frame: pd.DataFrame, series: dict[str, str], title: str, y_title: str,
               markers: bool = False) -> go.Figure | None:
    fig = go.Figure()
    for name, label in series.items():
        part = downsample(frame[frame["name"] == name].sort_values("step"))
        if not part.empty:
            fig.add_trace(go.Scatter(x=part["step"], y=part["value"], name=label,
                                     mode="lines+markers" if markers else "lines"))
    if not fig.data:
        return None
    fig.update_layout(title=title, height=320, margin=dict(l=10, r=10, t=50, b=10),
                      xaxis_title="Step", yaxis_title=y_title, hovermode="x unified",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig


def show_chart(fig: go.Figure | None, empty_text: str) -> None:
    if fig is None:
        st.caption(empty_text)
    else:
        st.plotly_chart(fig, width="stretch", config={"displaylogo": False})


def render(job: dict) -> None:
    finished = is_finished(job)
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    c1.metric("Status", STATUS_TEXT.get(job["status"], job["status"]))
    c2.metric("Stage", job["stage"] or ("—" if finished else "starting"))
    c3.metric("Elapsed", fmt_duration(elapsed(job)))
    with c4:
        if not finished and job["stop_requested"]:
            st.caption("Stop requested: training ends within a few seconds and the best "
                       "checkpoint so far is tested.")
        elif not finished:
            st.button("Stop", icon=":material/stop_circle:", key=f"stop-{job['id']}",
                      on_click=request_stop, args=(store, job["id"]),
                      help="During training: training ends early, the job ends as stopped, and "
                           "the best checkpoint so far is tested and saved. Before training: "
                           "the job ends.")

    frame = pd.DataFrame(store.metrics(job["id"]), columns=["step", "epoch", "name", "value", "ts"])
    if frame.empty:
        if finished:
            st.info("This job did not reach training, so there are no curves.")
        else:
            st.info("No training metrics yet: curves appear once the Model Trainer starts.",
                    icon=":material/hourglass_top:")
        return

    max_steps = frame.loc[frame["name"] == "max_steps", "value"]
    steps = frame.loc[frame["name"] != "max_steps", "step"]
    step = int(steps.max()) if not steps.empty else 0
    epoch = frame["epoch"].fillna(0).max()
    if not max_steps.empty and max_steps.iloc[-1] > 0:
        total = int(max_steps.iloc[-1])
        text = f"Step {step} of at most {total} · epoch {epoch:.1f}"
        summary = read_json(Path(job["workspace"]) / "Logout" / "train_summary.json")
        if summary.get("stop_reason"):
            text += f" · training ended: {summary['stop_reason']}"
        st.progress(1.0 if summary else min(step / total, 1.0), text=text)

    left, middle, right = st.columns(3)
    with left:
        show_chart(line_chart(frame, {"loss": "Training loss", "eval_loss": "Validation loss"},
                              "Loss", "Loss"), "No loss logged yet.")
    with middle:
        skip = {"eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second"}
        scores = {name: SCORE_LABELS.get(name, name.removeprefix("eval_"))
                  for name in sorted(set(frame["name"])) if name.startswith("eval_")
                  and name not in skip}
        show_chart(line_chart(frame, scores, "Validation metrics", "Score", markers=True),
                   "Validation metrics appear after the first epoch.")
    with right:
        show_chart(line_chart(frame, {"learning_rate": "Learning rate"}, "Learning rate",
                              "Learning rate"), "No learning rate logged yet.")

    log = Path(job["workspace"]) / "Logout" / "train.log"
    with st.expander(f"Training log (last {LOG_LINES} lines)", icon=":material/article:"):
        text = tail(log, LOG_LINES)
        st.code(text or "The log is empty.", language=None)
        st.caption(f"Full log: `{log}`")
    if job["status"] == "succeeded":
        st.page_link("pages/models.py", label="See the test results on the Models page",
                     icon=":material/model_training:")


@st.fragment(run_every=2)
def live(selected: str) -> None:
    job = store.job(selected)
    if job is None:
        return
    if is_finished(job):  # finished since the last refresh: redraw once without the timer
        st.rerun()
    render(job)


job = store.job(job_id)
if job is None:
    st.error("This job no longer exists.")
elif is_finished(job):
    render(job)
else:
    live(job_id)
