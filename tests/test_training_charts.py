"""The Training page's charts and status lines: figures readable from their first point
(core/viewing/training_charts.py), how a run ended (core/viewing/training_outcome.py), the
machine panel without a GPU (core/viewing/system_stats.py), and a finished job's page running no
timer (core/viewing/refresh.py), unit-tested and through AppTest. One test renders the figures
in Chromium to check that legend and title never overlap and the learning rate reads 9e-4.
"""
from __future__ import annotations

import json
import os
import time

import plotly.graph_objects as go
import pytest

from core.jobs.lifecycle import create_job
from core.store.curves import JobCurves, Series
from core.viewing import system_stats as system_stats_module
from core.viewing.refresh import LIVE_S, WAITING_S, jobs_refresh_every, refresh_every
from core.viewing.system_stats import NO_GPU, gpu_stats, system_stats
from core.viewing.training_charts import (FEW_POINTS, LEGEND_BELOW, SCIENTIFIC, line_figure,
                                          training_panels)
from core.viewing.training_outcome import training_outcome
from tests.test_app import REQUEST, context, home, run_app, texts  # noqa: F401

TRAINER = {"template": "diagnosis", "epochs": 40, "time_budget_s": 600}


def curves_from(rows: dict[str, list[tuple]]) -> JobCurves:
    """rows: name -> [(step, epoch, value), ...]"""
    curves = JobCurves("j")
    for name, part in rows.items():
        curves.series.setdefault(name, Series()).extend(
            [(s, e, v, 1000.0 + i) for i, (s, e, v) in enumerate(part)])
    return curves


def by_key(panels) -> dict:
    return {p.key: p for p in panels}


# ------------------------------------------------------------------------------ figures
def test_a_one_point_curve_is_drawn_with_a_marker():
    one = curves_from({"loss": [(5, 0.1, 0.69)]})
    fig = line_figure(one, ["loss"], "Loss", "Loss")
    assert fig.data[0].mode == "lines+markers" and fig.data[0].marker.size >= 6
    long = curves_from({"loss": [(s, s / 100, 1.0 / s) for s in range(1, FEW_POINTS + 50)]})
    assert line_figure(long, ["loss"], "Loss", "Loss").data[0].mode == "lines"
    assert line_figure(curves_from({"loss": [(5, 0.1, float("nan"))]}), ["loss"], "Loss",
                       "Loss") is None  # nothing finite: no empty axes


def test_legend_below_the_plot_and_the_learning_rate_in_scientific_notation():
    curves = curves_from({"eval_auc": [(10, 1.0, 0.7), (20, 2.0, 0.8)],
                          "eval_accuracy": [(10, 1.0, 0.6), (20, 2.0, 0.75)],
                          "learning_rate": [(5, 0.5, 9e-4), (10, 1.0, 8e-4)]})
    fig = line_figure(curves, ["eval_accuracy", "eval_auc"], "Validation metrics", "Score",
                      validation=True)
    layout = fig.layout
    assert layout.title.text == "Validation metrics"
    assert layout.legend.orientation == "h" and layout.legend.yanchor == "top"
    assert layout.legend.y < 0  # under the plot area, far from the title above it
    assert layout.showlegend
    lr = line_figure(curves, ["learning_rate"], "Learning rate", "Learning rate",
                     scientific=True)
    assert lr.layout.yaxis.tickformat == SCIENTIFIC and lr.layout.yaxis.hoverformat == SCIENTIFIC
    assert not lr.layout.showlegend  # its one curve is named by the title


# ------------------------------------------------------------------------------ panels
def test_early_panels_say_when_their_first_points_come():
    curves = curves_from({"max_steps": [(0, 0.0, 120)]})
    panels = by_key(training_panels(curves, TRAINER, finished=False, step=0))
    assert all(p.figure is None for p in panels.values())
    assert panels["loss"].note == ("No training-loss points yet: the first are logged after 5 "
                                   "steps.")
    assert panels["learning_rate"].note.startswith("No learning-rate points yet")
    assert panels["gradient_norm"].note.startswith("No gradient-norm points yet")
    assert panels["validation"].note == ("No validation points yet: the first are logged after "
                                         "the first epoch.")
    later = by_key(training_panels(curves, {**TRAINER, "logging_steps": 20}, step=7))
    assert later["loss"].note.endswith("after 20 steps (now at step 7).")


def test_a_run_stopped_before_its_first_log_shows_what_was_logged():
    # stopped at step 3: the Trainer's closing log holds the mean training loss only
    curves = curves_from({"max_steps": [(0, 0.0, 120)], "train_loss": [(3, 0.3, 0.71)]})
    panels = by_key(training_panels(curves, TRAINER, finished=True, step=3, epoch=0.3))
    assert panels["loss"].figure.data[0].mode == "lines+markers"
    assert panels["loss"].figure.data[0].name == "Training loss (mean)"
    assert panels["loss"].figure.layout.showlegend  # "mean" is not in the title
    assert panels["learning_rate"].note == (
        "No learning-rate points were logged: training ended at step 3, before the first was "
        "due (after 5 steps).")
    assert panels["validation"].note.endswith("before the first was due (after the first "
                                              "epoch).")


def test_panels_follow_what_each_template_logs():
    # past step 5, loss and learning rate but no gradient norm: this Trainer does not log it
    curves = curves_from({"loss": [(5, 0.1, 0.9), (10, 0.2, 0.8)],
                          "learning_rate": [(5, 0.1, 1e-3), (10, 0.2, 9e-4)]})
    panels = by_key(training_panels(curves, TRAINER, step=10, epoch=0.2))
    assert "gradient_norm" not in panels and panels["learning_rate"].figure is not None
    grad = curves_from({"loss": [(5, 0.1, 0.9)], "grad_norm": [(5, 0.1, 2.5)]})
    panels = by_key(training_panels(grad, TRAINER, step=5, epoch=0.1))
    assert panels["gradient_norm"].figure.layout.title.text == "Gradient norm"
    # nnU-Net logs per epoch and no gradient norm; MVFA only its loss
    nnunet = {"template": "segmentation", "engine": "nnunet", "epochs": 20}
    panels = by_key(training_panels(curves_from({}), nnunet))
    assert set(panels) == {"loss", "validation", "learning_rate"}
    assert panels["loss"].note.endswith("after the first epoch.")
    assert set(by_key(training_panels(curves_from({}), {"template": "mvfa"}))) == {"loss"}


# ------------------------------------------------------------------------------ outcome
EARLY = {"epochs_run": 24.0, "epochs_planned": 40.0, "epoch_kept": 14.0, "patience": 10,
         "stop_reason": "early_stopped at 24: no validation loss improvement of more than 1% "
                        "for 10 epochs",
         "selection": "kept epoch 14: best validation loss (0.4123)"}


@pytest.mark.parametrize("summary, config, text", [
    (EARLY, {}, "Stopped early at epoch 24 of 40 (validation loss did not improve by more than "
                "1% for 10 epochs); best epoch 14 kept (validation loss 0.4123)."),
    # "completed" before the planned epochs is an early stop too (the Trainer's own)
    ({"epochs_run": 24.0, "stop_reason": "completed"}, {"epochs": 40},
     "Stopped early at epoch 24 of 40 (early stopping ended it before the planned epochs)."),
    ({"epochs_run": 39.999, "epochs_planned": 40, "stop_reason": "completed", "epoch_kept": 37,
      "selection": "kept epoch 37: best validation Dice (loss breaks ties) (0.8312)"}, {},
     "Training completed all 40 planned epochs; best epoch 37 kept (validation Dice 0.8312)."),
    ({"epochs_run": 2.43, "stop_reason": "stopped by the user", "epoch_kept": 2.0}, {"epochs": 40},
     "Stopped at your request at epoch 3 of 40; best epoch 2 kept."),
    ({"epochs_run": 12, "stop_reason": "time budget of 600 s reached"}, {"epochs": 40},
     "The time budget (10 min) ended training at epoch 12 of 40."),
])
def test_training_outcome_says_how_training_ended(summary, config, text):
    assert training_outcome(summary, config) == text


# ------------------------------------------------------------------------------ system panel
class NVMLError_LibraryNotFound(Exception):  # noqa: N801 - pynvml's own name
    pass


class MissingNvml:
    """pynvml installed, the NVIDIA library absent (as on this machine)."""

    def nvmlInit(self):
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")


def test_no_gpu_is_said_plainly_never_as_an_exception_name():
    gpus, note = gpu_stats(MissingNvml())
    assert gpus == [] and note == NO_GPU == "No NVIDIA GPU found: showing CPU and memory."
    gpus, note = gpu_stats()  # the real module on this machine
    if not gpus:
        assert note in (NO_GPU, system_stats_module.NO_MONITORING)
        assert "NVML" not in note and "Error" not in note


# ------------------------------------------------------------------------------ refresh
def test_refresh_only_while_a_job_is_live():
    for status in ("succeeded", "failed", "stopped", "interrupted", "cancelled", "no_dataset"):
        assert refresh_every({"status": status}) is None
    assert refresh_every(None) is None
    assert refresh_every({"status": "running"}) == refresh_every({"status": "queued"}) == LIVE_S
    assert refresh_every({"status": "awaiting_approval"}) == WAITING_S
    assert jobs_refresh_every([{"status": "succeeded"}, {"status": "stopped"}]) is None
    assert jobs_refresh_every([{"status": "succeeded"}, {"status": "running"}]) == LIVE_S * 2.5


# ------------------------------------------------------------------------------ the page
@pytest.fixture
def timers(monkeypatch):
    """The fragment timers a page run asks the browser for: [(seconds, fragment id), ...]."""
    from streamlit.runtime.forward_msg_queue import ForwardMsgQueue
    asked: list[tuple[float, str]] = []
    enqueue = ForwardMsgQueue.enqueue

    def recording(self, msg):
        if msg.WhichOneof("type") == "auto_rerun":
            asked.append((msg.auto_rerun.interval, msg.auto_rerun.fragment_id))
        return enqueue(self, msg)

    monkeypatch.setattr(ForwardMsgQueue, "enqueue", recording)
    return asked


def stopped_job(settings, store, summary: dict | None = None) -> str:
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    ws = settings.jobs_dir / job_id
    (ws / "train_config.json").write_text(json.dumps({**TRAINER, "job_id": job_id}))
    if summary is not None:
        (ws / "Logout" / "train_summary.json").write_text(json.dumps(summary))
    now = time.time()
    store.update_job(job_id, status="stopped", stage="", started_at=now - 60, finished_at=now)
    return job_id


def chart_modes(at) -> dict[str, list[str]]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"]["title"]["text"]: [t["mode"] for t in s["data"]] for s in specs}


def test_page_early_run_says_when_points_come_and_keeps_its_timer(home, timers):
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    (settings.jobs_dir / job_id / "train_config.json").write_text(json.dumps(TRAINER))
    store.update_job(job_id, status="running", stage="Model Trainer", started_at=time.time(),
                     pid=os.getpid())
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 120})
    at = run_app("pages/training.py")
    assert not at.get("plotly_chart")  # no empty axes
    shown = texts(at)
    assert "No training-loss points yet: the first are logged after 5 steps." in shown
    assert "No validation points yet: the first are logged after the first epoch." in shown
    assert LIVE_S in [seconds for seconds, _ in timers]  # a live job is followed


def test_page_stopped_run_shows_its_points_how_it_ended_and_no_gpu_error(home, timers):
    settings, store = context()
    job_id = stopped_job(settings, store, {"epochs_run": 0.3, "stop_reason":
                                           "stopped by the user", "epoch_kept": None})
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 120})
    store.add_metrics(job_id, 3, 0.3, {"train_loss": 0.71, "grad_norm": 1.5,
                                       "learning_rate": 9e-4})
    store.add_metrics(job_id, 3, 0.3, {"eval_loss": 0.69, "eval_auc": 0.55})
    at = run_app("pages/training.py")
    modes = chart_modes(at)
    assert set(modes) == {"Loss", "Validation metrics", "Learning rate", "Gradient norm"}
    assert all("markers" in m for ms in modes.values() for m in ms)  # one point each: visible
    lr = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
              if "Learning rate" in c.proto.spec)
    assert lr["layout"]["yaxis"]["tickformat"] == SCIENTIFIC
    assert at.get("progress")[0].proto.text == "Stopped at your request at epoch 1 of 40."
    shown = texts(at)
    assert "NVML" not in shown and "Error" not in shown
    if not system_stats().gpus:
        assert NO_GPU in shown
    assert timers == []  # a finished job's page asks for no timer: the app stays idle


def test_page_early_stop_is_not_called_completed(home, timers):
    settings, store = context()
    job_id = stopped_job(settings, store, EARLY)
    store.update_job(job_id, status="succeeded")
    for epoch in range(1, 25):
        store.add_metrics(job_id, epoch * 10, float(epoch), {"loss": 1.0 / epoch,
                                                             "eval_loss": 0.5})
    at = run_app("pages/training.py")
    text = at.get("progress")[0].proto.text
    assert text.startswith("Stopped early at epoch 24 of 40 (validation loss did not improve")
    assert "best epoch 14 kept" in text and "completed" not in text and "24.0" not in text
    assert timers == []


# ------------------------------------------------------------------------------ in Chromium
def test_charts_in_chromium_legend_clear_of_title_and_lr_ticks(tmp_path):
    """The figures as plotly.js draws them (offline, its bundled script): the legend's box does
    not meet the title's, and the learning-rate ticks read like 9e-4, never 900µ."""
    from tests.test_browser import artifacts_dir, chromium
    path = chromium()
    if path is None:
        if os.environ.get("M3B_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium found")
        pytest.skip("no Chromium on this machine")
    sync_api = pytest.importorskip("playwright.sync_api")
    curves = curves_from({
        "eval_auc": [(e * 10, e, 0.6 + e / 100) for e in range(1, 25)],
        "eval_accuracy": [(e * 10, e, 0.55 + e / 100) for e in range(1, 25)],
        "eval_f1_macro": [(e * 10, e, 0.5 + e / 100) for e in range(1, 25)],
        "learning_rate": [(s, s / 10, 1e-3 * (1 - s / 300)) for s in range(5, 241, 5)]})
    figures = {
        "validation": line_figure(curves, ["eval_accuracy", "eval_auc", "eval_f1_macro"],
                                  "Validation metrics", "Score", validation=True),
        "learning_rate": line_figure(curves, ["learning_rate"], "Learning rate",
                                     "Learning rate", scientific=True)}
    out = artifacts_dir()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 520, "height": 420})
            for name, fig in figures.items():
                html = tmp_path / f"{name}.html"
                # plotly's own colours for the screenshot (the app applies its theme)
                go.Figure(fig).update_layout(template="plotly").write_html(
                    html, include_plotlyjs=True, full_html=True)
                page.goto(html.as_uri())
                page.wait_for_selector(".main-svg .gtitle")
                title = page.locator(".gtitle").bounding_box()
                # plotly writes a typographic minus: 8e−4
                ticks = [t.replace("\u2212", "-")
                         for t in page.locator(".ytick text").all_text_contents()]
                page.screenshot(path=str(out / f"training-chart-{name}.png"))
                svg = page.locator(".main-svg").first.bounding_box()
                for tick in page.locator(".ytick text").all():  # none cut at the left edge
                    assert tick.bounding_box()["x"] >= svg["x"], ticks
                if name == "validation":
                    legend = page.locator(".legend").bounding_box()
                    assert legend and title
                    assert legend["y"] >= title["y"] + title["height"], (legend, title)
                    plot = page.locator(".nsewdrag").first.bounding_box()
                    assert legend["y"] >= plot["y"] + plot["height"]  # under the plot area
                    assert legend["y"] + legend["height"] <= svg["y"] + svg["height"] + 1
                else:
                    assert ticks and not any("µ" in t or "μ" in t for t in ticks), ticks
                    assert any("e-4" in t for t in ticks), ticks
        finally:
            browser.close()
    assert LEGEND_BELOW["y"] < 0


def test_the_chat_follows_a_job_quickly_until_its_plan_shows(home, timers):
    """Before the plan (queued, or the Task Manager planning) the chat looks every 0.5 s, so a
    plan shows within a second of being made; then at the job views' pace; none when done."""
    from core.viewing.refresh import PLANNING_S, chat_refresh_every
    assert chat_refresh_every({"status": "queued"}) == PLANNING_S
    assert chat_refresh_every({"status": "running", "stage": "Task Manager"}) == PLANNING_S
    assert chat_refresh_every({"status": "running", "stage": ""}) == PLANNING_S
    assert chat_refresh_every({"status": "running", "stage": "Data Engineer"}) == LIVE_S
    assert chat_refresh_every({"status": "awaiting_approval"}) == WAITING_S
    assert chat_refresh_every({"status": "succeeded"}) is None
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    store.update_job(job_id, pid=os.getpid())
    at = run_app("pages/chat.py")
    assert not at.exception
    assert {seconds for seconds, _ in timers} == {PLANNING_S}
    store.update_job(job_id, status="running", stage="Model Trainer")
    timers.clear()
    at.run()
    assert {seconds for seconds, _ in timers} == {LIVE_S}
