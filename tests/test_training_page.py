"""The Training dashboard and what it is drawn from: curve downsampling and progress
(core/curves.py), the machine's load (core/system_stats.py), role timelines, log tails and
resume (core/jobs.py, crew/resume.py), and the page itself through AppTest.

No model is trained except in the one test marked slow (stop a real job, resume it).
"""
from __future__ import annotations

import base64
import json
import os
import time

import numpy as np
import psutil
import pytest

from core.store.curves import (MAX_POINTS, JobCurves, Series, chart_groups, downsample,
                         downsample_indices, latest_run_only, training_progress)
from core.jobs.lifecycle import (JobError, create_job, job_logs, prepare_resume, request_stop,
                       resume_problem, role_timeline, tail_file)
from core.viewing.system_stats import (GpuStats, fmt_bytes, gpu_stats, process_tree, system_stats)
from crew.stages import STAGES
from tests.test_app import REQUEST, context, home, run_app, texts  # noqa: F401

ROLES = [s.role for s in STAGES]


# ------------------------------------------------------------------------------ downsampling
def test_downsample_a_million_points_keeps_bound_ends_and_extremes():
    rng = np.random.default_rng(0)
    n = 1_000_000
    x = np.arange(n) * 5
    y = np.cumsum(rng.normal(size=n))
    top, bottom = 123_457, 876_543
    y[top], y[bottom] = y.max() + 50.0, y.min() - 50.0  # a spike and a dip mid-run
    started = time.perf_counter()
    dx, dy = downsample(x, y)
    seconds = time.perf_counter() - started
    assert len(dx) == len(dy) <= MAX_POINTS
    assert len(dx) > MAX_POINTS * 0.9  # uses its budget, not a handful of points
    assert dx[0] == x[0] and dx[-1] == x[-1] and dy[0] == y[0] and dy[-1] == y[-1]
    assert dy.max() == y.max() == y[top] and dy.min() == y.min() == y[bottom]
    assert top * 5 in dx and bottom * 5 in dx
    assert np.all(np.diff(dx) > 0)  # still in order, no duplicates
    assert np.array_equal(dy, y[dx // 5])  # real points, not averages
    assert seconds < 2.0, f"downsampling 1M points took {seconds:.2f} s"


def test_downsample_keeps_every_spike_of_a_flat_curve():
    y = np.zeros(200_000)
    spikes = np.arange(1_000, 199_000, 4_000)  # 50 spikes, up and down alternately
    y[spikes] = np.where(np.arange(len(spikes)) % 2, -1.0, 1.0)
    kept = downsample_indices(y, 500)
    assert len(kept) <= 500
    assert set(spikes) <= set(kept)


def test_downsample_short_series_unchanged_and_bad_input_named():
    x, y = np.arange(10), np.linspace(0, 1, 10)
    dx, dy = downsample(x, y)
    assert np.array_equal(dx, x) and np.array_equal(dy, y)
    with pytest.raises(ValueError, match="limit must be at least 4"):
        downsample_indices(y, 3)
    with pytest.raises(ValueError, match="x has 3 points but y has 2"):
        downsample([1, 2, 3], [1, 2])
    dx, dy = downsample([1, 2, 3, 4], [0.5, np.nan, np.inf, 0.7])
    assert list(dx) == [1, 4] and list(dy) == [0.5, 0.7]


def test_latest_run_wins_after_a_resume():
    # first run logged steps 5..20, the resumed run restarts at its checkpoint (step 10)
    steps = np.array([5, 10, 15, 20, 10, 15, 25])
    assert list(steps[latest_run_only(steps)]) == [5, 10, 15, 25]
    assert latest_run_only(np.array([1, 2, 3])).all()
    series = Series()
    series.extend([(5, 0.1, 1.0, 1.0), (10, 0.2, 0.9, 2.0), (15, 0.3, 0.8, 3.0),
                   (10, 0.2, 0.5, 4.0), (15, 0.3, 0.4, 5.0)])
    x, y = series.for_drawing()
    assert list(x) == [5, 10, 15] and list(y) == [1.0, 0.5, 0.4]


# ------------------------------------------------------------------------------ reading
def test_job_curves_read_only_new_rows_of_their_job(store, settings):
    store.add_metrics("a", 0, 0.0, {"max_steps": 40})
    store.add_metrics("a", 5, 0.5, {"loss": 0.9, "learning_rate": 1e-3})
    store.add_metrics("b", 5, 0.5, {"loss": 123.0})
    curves = JobCurves("a")
    assert curves.refresh(settings.store_path) == 3
    assert set(curves.series) == {"max_steps", "loss", "learning_rate"}
    assert curves.refresh(settings.store_path) == 0
    store.add_metrics("a", 10, 1.0, {"loss": 0.7, "eval_auc": 0.8, "epoch": 1.0})
    store.add_metrics("b", 10, 1.0, {"loss": 99.0})
    assert curves.refresh(settings.store_path) == 3
    assert list(curves.series["loss"].value) == [0.9, 0.7]
    assert list(curves.series["loss"].step) == [5, 10]
    assert curves.series["eval_auc"].epoch[0] == 1.0
    missing = JobCurves("a")
    assert missing.refresh(settings.home / "nope.db") == 0 and missing.empty


def test_chart_groups_cover_every_templates_names():
    names = {"loss", "eval_loss", "train_loss", "learning_rate", "grad_norm", "eval_auc",
             "eval_accuracy", "eval_runtime", "eval_samples_per_second", "train_runtime",
             "train_samples_per_second", "total_flos", "epoch", "max_steps",
             "eval_dice", "eval_dice_class1", "eval_map50",                  # seg, detection
             "val_loss", "mean_fg_dice", "ema_fg_dice", "lr", "epoch_seconds",  # nnU-Net
             "num_train", "test_image_auroc"}                                  # MVFA
    groups = chart_groups(names)
    assert groups["loss"] == ["loss", "train_loss", "eval_loss", "val_loss"]
    assert groups["learning_rate"] == ["learning_rate", "lr"]
    assert groups["validation"] == ["ema_fg_dice", "mean_fg_dice", "eval_accuracy", "eval_auc",
                                    "eval_dice", "eval_dice_class1", "eval_map50",
                                    "test_image_auroc"]
    assert groups["gradient_norm"] == ["grad_norm"] and groups["other"] == []


# ------------------------------------------------------------------------------ progress
def curves_from(rows: dict[str, list[tuple]]) -> JobCurves:
    curves = JobCurves("j")
    for name, part in rows.items():
        curves.series.setdefault(name, Series()).extend(part)
    return curves


def test_progress_eta_from_steps_and_time():
    loss = [(s, s / 10, 1.0 / s, 1000.0 + s) for s in range(10, 51, 10)]  # 1 step per second
    curves = curves_from({"max_steps": [(0, 0.0, 100, 1000.0)], "loss": loss})
    p = training_progress(curves, planned_epochs=10, now=1050.0)
    assert p.fraction == pytest.approx(0.5) and p.step == 50 and p.max_steps == 100
    assert p.epoch == pytest.approx(5.0) and p.run_started_ts == 1000.0
    assert p.eta_s == pytest.approx(50.0) and not p.eta_limited_by_budget
    later = training_progress(curves, planned_epochs=10, now=1060.0)
    assert later.eta_s == pytest.approx(40.0)  # counts down between logs
    budget = training_progress(curves, planned_epochs=10, time_budget_s=60, now=1050.0)
    assert budget.eta_s == pytest.approx(10.0) and budget.eta_limited_by_budget


def test_progress_says_estimating_until_enough_points():
    curves = curves_from({"max_steps": [(0, 0.0, 100, 1000.0)],
                          "loss": [(5, 0.1, 1.0, 1001.0), (10, 0.2, 0.9, 1002.0)]})
    p = training_progress(curves, now=1003.0)
    assert p.eta_s is None and p.fraction == pytest.approx(0.1)
    assert training_progress(JobCurves("none")).fraction == 0.0


def test_progress_by_epochs_and_only_the_resumed_run():
    # nnU-Net: no max_steps, one row per epoch; progress is epochs of the planned 20
    nnunet = curves_from({"train_loss": [(e * 10, float(e), 0.5, 2000.0 + 10 * e)
                                         for e in range(1, 6)]})
    p = training_progress(nnunet, planned_epochs=20, now=2050.0)
    assert p.fraction == pytest.approx(0.25) and p.max_steps is None
    assert p.eta_s == pytest.approx(150.0)  # 4 epochs in 40 s, 15 to go
    # a resume logs max_steps again: the first run's rows no longer set the rate
    first = [(s, s / 10, 1.0, 1000.0 + s) for s in range(10, 41, 10)]
    resumed = [(s, s / 10, 1.0, 5000.0 + (s - 40) * 2) for s in range(50, 81, 10)]
    curves = curves_from({"max_steps": [(0, 0.0, 100, 1000.0), (0, 0.0, 100, 5000.0)],
                          "loss": first + resumed})
    p = training_progress(curves, now=5080.0)
    assert p.run_started_ts == 5000.0 and p.fraction == pytest.approx(0.8)
    assert p.eta_s == pytest.approx(40.0)  # 0.5 steps per second in the resumed run


# ------------------------------------------------------------------------------ system stats
class FakeNvml:
    """Stands in for the pynvml module on a machine with two GPUs (this one has none)."""

    class NVMLError(Exception):
        pass

    class _Util:
        def __init__(self, gpu):
            self.gpu, self.memory = gpu, 0

    class _Mem:
        def __init__(self, used, total):
            self.used, self.total, self.free = used, total, total - used

    def __init__(self, fail_init=False, fail_query=False):
        self.fail_init, self.fail_query, self.inits = fail_init, fail_query, 0

    def nvmlInit(self):
        self.inits += 1
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        if self.fail_query and i == 1:
            raise self.NVMLError("GPU is lost")
        return i

    def nvmlDeviceGetName(self, handle):
        return [b"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"][handle]

    def nvmlDeviceGetUtilizationRates(self, handle):
        return self._Util([87, 3][handle])

    def nvmlDeviceGetMemoryInfo(self, handle):
        return self._Mem([40 * 2 ** 30, 1 * 2 ** 30][handle], 80 * 2 ** 30)


def test_gpu_stats_through_nvml():
    nvml = FakeNvml()
    gpus, note = gpu_stats(nvml)
    assert note == ""
    assert gpus == [GpuStats(0, "NVIDIA H100 80GB HBM3", 87.0, 40 * 2 ** 30, 80 * 2 ** 30),
                    GpuStats(1, "NVIDIA H100 80GB HBM3", 3.0, 2 ** 30, 80 * 2 ** 30)]
    assert gpus[0].memory_pct == pytest.approx(50.0)
    gpu_stats(nvml)
    assert nvml.inits == 1  # NVML is initialised once per process
    stats = system_stats(nvml)
    assert len(stats.gpus) == 2 and stats.ram_total_bytes > 0


def test_gpu_stats_degrade_without_a_gpu():
    gpus, note = gpu_stats(FakeNvml(fail_init=True))
    assert gpus == [] and note == "No NVIDIA GPU found: showing CPU and memory."
    gpus, note = gpu_stats(FakeNvml(fail_query=True))
    assert [g.index for g in gpus] == [0] and "stopped answering" in note
    assert "NVMLError" not in note  # plain words, never an exception name
    # the real module on this machine: a GPU is listed with sane numbers, or none with a reason
    gpus, note = gpu_stats()
    if gpus:
        assert all(0 <= g.utilization_pct <= 100 and 0 < g.memory_total_bytes for g in gpus)
    else:
        assert note.endswith("showing CPU and memory.") and "NVML" not in note


def test_system_stats_cpu_ram_and_process_tree():
    stats = system_stats()
    assert 0.0 <= stats.cpu_percent <= 100.0 and stats.cpu_count == psutil.cpu_count()
    assert stats.ram_total_bytes == psutil.virtual_memory().total
    assert 0 < stats.ram_used_bytes <= stats.ram_total_bytes and 0 < stats.ram_pct <= 100
    mine = process_tree(os.getpid())
    assert mine.processes >= 1 and mine.rss_bytes >= psutil.Process().memory_info().rss // 2
    assert process_tree(None) is None and process_tree(2 ** 22 + 7) is None
    assert fmt_bytes(512) == "512 B" and fmt_bytes(3 * 2 ** 30) == "3.0 GiB"


# ------------------------------------------------------------------------------ core/jobs views
def test_role_timeline_from_events():
    ev = []

    def add(role, kind, tool="", ts=0.0, seconds=0.0, ok=1, tokens=0):
        ev.append({"id": len(ev) + 1, "role": role, "kind": kind, "tool": tool, "ts": ts,
                   "seconds": seconds, "ok": ok, "tokens": tokens})

    add("Task Manager", "stage", "start", 100.0)
    add("Task Manager", "tool", "list_datacards", 101.0)
    add("Task Manager", "llm", "call", 101.5, tokens=120)
    add("Task Manager", "stage", "end", 104.0, seconds=4.0)
    add("Data Engineer", "stage", "start", 104.0)
    add("Data Engineer", "tool", "build_index", 105.0, ok=0)
    add("Data Engineer", "stage", "end", 110.0, seconds=6.0, ok=0)
    add("Model Trainer", "stage", "start", 200.0)
    add("Model Trainer", "stage", "end", 260.0, seconds=60.0, ok=0)
    add("Model Trainer", "stage", "start", 300.0)  # resumed, still running
    rows = role_timeline(ev, ROLES, {"status": "running"}, now=330.0)
    tm, de, ma, mt = rows
    assert (tm["status"], tm["started"], tm["ended"], tm["seconds"], tm["actions"],
            tm["tokens"]) == ("succeeded", 100.0, 104.0, 4.0, 1, 120)
    assert de["status"] == "failed" and de["actions"] == 1
    assert ma["status"] == "waiting" and ma["started"] is None and ma["runs"] == 0
    assert mt["status"] == "running" and mt["runs"] == 2 and mt["ended"] is None
    assert mt["seconds"] == pytest.approx(90.0)  # 60 s first run + 30 s so far
    ended = role_timeline(ev, ROLES, {"status": "failed", "finished_at": 310.0}, now=999.0)
    assert ended[3]["status"] == "interrupted" and ended[3]["ended"] == 310.0
    assert ended[3]["seconds"] == pytest.approx(70.0)


def test_tail_file_reads_only_the_end(tmp_path):
    log = tmp_path / "train.log"
    with open(log, "w") as handle:
        for i in range(200_000):
            handle.write(f"line {i} " + "x" * 20 + "\n")
    assert log.stat().st_size > 5_000_000
    assert tail_file(log, 3).splitlines() == [f"line {i} " + "x" * 20
                                              for i in (199_997, 199_998, 199_999)]
    bounded = tail_file(log, 1000, max_bytes=100).splitlines()
    assert 1 <= len(bounded) <= 4 and bounded[-1].startswith("line 199999 ")
    assert all(line.startswith("line ") for line in bounded)  # no half line at the top
    assert tail_file(tmp_path / "missing.log") == ""
    log.write_text("only\n")
    assert tail_file(log, 10, max_bytes=3) == "" and tail_file(log, 10) == "only"


def make_resumable(settings, store, status="stopped", checkpoint=True, complete=True,
                   engine=None) -> str:
    """A job stopped during training, as the runner leaves it: config, a checkpoint, metrics."""
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    ws = settings.jobs_dir / job_id
    config = {"job_id": job_id, "template": "diagnosis", "network": "densenet_small",
              "epochs": 10, "time_budget_s": 600, "resume": False}
    if engine:
        config["engine"] = engine
    (ws / "train_config.json").write_text(json.dumps(config))
    if checkpoint:
        ck = ws / "Logout" / "checkpoints" / "checkpoint-24"
        ck.mkdir(parents=True)
        if complete:
            (ck / "trainer_state.json").write_text(json.dumps({"global_step": 24}))
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 120})
    for step in range(5, 25, 5):
        store.add_metrics(job_id, step, step / 12, {"loss": 1.0 / step, "learning_rate": 1e-3})
    store.add_metrics(job_id, 24, 2.0, {"eval_loss": 0.6, "eval_auc": 0.7})
    now = time.time()
    store.update_job(job_id, status=status, stage="", started_at=now - 60, finished_at=now,
                     stop_requested=1, error="" if status == "stopped" else "worker died")
    return job_id


def test_prepare_resume_queues_the_job_and_sets_resume(settings, store):
    job_id = make_resumable(settings, store)
    assert resume_problem(store.job(job_id)) == ""
    job = prepare_resume(store, job_id)
    config = json.loads((settings.jobs_dir / job_id / "train_config.json").read_text())
    assert config["resume"] is True and config["epochs"] == 10  # the rest is kept
    assert job["status"] == "queued" and job["stop_requested"] == 0 and job["error"] == ""
    assert job["finished_at"] is None and job["stage"] == "Model Trainer"
    assert ("resume_job", job_id) in [(r["action"], r["target"])
                                      for r in store.rows("select * from audit")]


@pytest.mark.parametrize("kwargs, message", [
    ({"status": "succeeded"}, "only a stopped or failed job"),
    ({"engine": "nnunet"}, "nnU-Net engine cannot resume"),
])
def test_prepare_resume_refuses_and_changes_nothing(settings, store, kwargs, message):
    job_id = make_resumable(settings, store, **kwargs)
    config_path = settings.jobs_dir / job_id / "train_config.json"
    before_config, before_job = config_path.read_bytes(), store.job(job_id)
    with pytest.raises(JobError, match=message):
        prepare_resume(store, job_id)
    assert config_path.read_bytes() == before_config and store.job(job_id) == before_job
    with pytest.raises(JobError, match="no such job"):
        prepare_resume(store, "missing")


def test_without_a_checkpoint_a_job_goes_on_from_its_unfinished_stage(settings, store):
    """Stopped or killed before training saved a checkpoint: resumable from the stage that
    did not finish; train_config.json keeps ``resume: false`` (training starts over)."""
    from core.jobs.lifecycle import NO_CHECKPOINT, NO_TRAINING_YET, resume_mode
    job_id = make_resumable(settings, store, status="interrupted", checkpoint=False)
    assert resume_mode(store.job(job_id)) == ("stage", NO_CHECKPOINT)
    job = prepare_resume(store, job_id)
    assert job["status"] == "queued" and job["stage"] == "" and job["error"] == ""
    config = json.loads((settings.jobs_dir / job_id / "train_config.json").read_text())
    assert config["resume"] is False
    assert "from the stage that did not finish" in store.rows(
        "select detail from audit where action = 'resume_job'")[-1]["detail"]
    planned = create_job(settings, store, REQUEST, llm="autopilot")
    store.update_job(planned, status="failed")
    assert resume_mode(store.job(planned)) == ("stage", NO_TRAINING_YET)


def test_a_checkpoint_half_written_when_killed_is_set_aside(settings, store):
    """kill -9 while a checkpoint is written leaves it without trainer_state.json: resuming
    continues from the newest complete one (the trainer would otherwise pick the half-written
    one), and keeps the half-written one renamed; with no complete one, training starts over."""
    from core.jobs.lifecycle import resume_mode
    job_id = make_resumable(settings, store, status="interrupted")
    half = settings.jobs_dir / job_id / "Logout" / "checkpoints" / "checkpoint-48"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"partial")
    assert resume_mode(store.job(job_id)) == ("checkpoint", "")
    prepare_resume(store, job_id)
    assert not half.exists() and (half.parent / "checkpoint-24").is_dir()
    assert (half.parent / "incomplete-checkpoint-48" / "model.safetensors").read_bytes() == \
        b"partial"
    assert "set aside the incomplete checkpoint-48" in store.rows(
        "select detail from audit where action = 'resume_job'")[-1]["detail"]

    only_half = make_resumable(settings, store, status="interrupted", complete=False)
    assert resume_mode(store.job(only_half))[0] == "stage"


def test_resume_runner_checks_earlier_gates_first(settings, store):
    """The resume worker re-checks the plan before training; a job whose plan is gone fails
    with the gate's message and never starts the Model Trainer."""
    from crew.resume import resume_job
    job_id = make_resumable(settings, store)
    prepare_resume(store, job_id)
    result = resume_job(settings, job_id)
    assert result["status"] == "failed"
    assert "Task Manager" in result["error"] and "checked again before resuming" in result["error"]
    job = store.job(job_id)
    assert job["status"] == "failed" and job["finished_at"]
    stages = [(e["role"], e["tool"]) for e in store.events(job_id) if e["kind"] == "stage"]
    assert ("Model Trainer", "start") not in stages


def test_job_logs_names_both_logs(settings, store):
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    found = job_logs(store.job(job_id))
    assert found == {"Training log": settings.jobs_dir / job_id / "Logout" / "train.log",
                     "Worker log": settings.jobs_dir / job_id / "worker.log"}


# ------------------------------------------------------------------------------ the page
def chart_specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def values(array) -> np.ndarray:
    """A trace's x or y as plotly serialises it: a list, or typed base64 bytes."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def test_page_empty_state(home):
    at = run_app("pages/training.py")
    assert "No jobs yet" in texts(at)
    assert not at.get("plotly_chart") and not at.button


def test_page_finished_job_draws_downsampled_curves_and_timeline(home):
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    ws = settings.jobs_dir / job_id
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 6000})
    rows = [{"job_id": job_id, "ts": 1000.0 + s, "step": s, "epoch": s / 600, "name": "loss",
             "value": 1.0 / s} for s in range(1, 6001)]
    store.db["metrics"].insert_all(rows)  # a long run: 6000 loss points
    for step in range(600, 6001, 600):
        store.add_metrics(job_id, step, step / 600, {"eval_loss": 0.5, "eval_auc": 0.8,
                                                     "eval_dice": 0.7, "eval_hd95": 12.0,
                                                     "learning_rate": 1e-3})
    for role in ROLES:
        store.add_event(job_id, role, "stage", tool="start")
        store.add_event(job_id, role, "tool", tool="some_tool")
        store.add_event(job_id, role, "stage", tool="end", seconds=2.0, ok=True)
    (ws / "Logout" / "train.log").write_text("epoch 1\ntraining finished\n")
    (ws / "worker.log").write_text("worker started\n")
    (ws / "Logout" / "train_summary.json").write_text(json.dumps(
        {"epochs_run": 10.0, "stop_reason": "completed"}))
    now = time.time()
    store.update_job(job_id, status="succeeded", started_at=now - 90, finished_at=now)

    at = run_app("pages/training.py")
    assert at.selectbox[0].value == job_id
    specs = chart_specs(at)
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert titles == ["Loss", "Validation metrics", "Learning rate"]
    loss = {t["name"]: t for t in specs[0]["data"]}
    drawn_x, drawn_y = values(loss["Training loss"]["x"]), values(loss["Training loss"]["y"])
    assert len(drawn_x) == len(drawn_y) <= MAX_POINTS  # drawn from 6000 points
    assert drawn_x[0] == 1 and drawn_x[-1] == 6000 and drawn_y.max() == 1.0
    validation = {t["name"]: t for t in specs[1]["data"]}
    assert set(validation) == {"AUC", "Dice", "hd95"}
    assert validation["hd95"].get("yaxis") == "y2"  # millimetres on their own axis
    assert "6,000 points" in texts(at)
    timeline = at.dataframe[1].value
    assert list(timeline["Role"]) == ROLES and set(timeline["Status"]) == {"Done"}
    assert list(timeline["Actions"]) == [1, 1, 1, 1]
    assert any("training finished" in c.value for c in at.code)
    assert any("worker started" in c.value for c in at.code)
    assert not [b for b in at.button if b.label in ("Stop", "Resume")]
    assert {"CPU", "RAM"} <= {m.label for m in at.metric} or system_stats().gpus


def test_page_running_job_stop_button_and_eta(home):
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    store.update_job(job_id, status="running", stage="Model Trainer",
                     started_at=time.time() - 30, pid=os.getpid())
    at = run_app("pages/training.py")
    assert "No training metrics yet" in texts(at)
    now = time.time()
    store.db["metrics"].insert_all(
        [{"job_id": job_id, "ts": now - 20, "step": 0, "epoch": 0.0, "name": "max_steps",
          "value": 100}] +
        [{"job_id": job_id, "ts": now - 20 + s / 2, "step": s, "epoch": s / 10, "name": "loss",
          "value": 1.0 / s} for s in range(5, 31, 5)])
    at = run_app("pages/training.py")
    progress = at.get("progress")[0].proto
    assert progress.value == 30  # percent
    assert "Step 30 of at most 100" in progress.text and "left" in progress.text
    assert "This job:" in texts(at)  # its worker's processes and memory
    stop = at.button(key=f"stop-{job_id}")
    stop.click().run()
    assert store.job(job_id)["stop_requested"] == 1
    assert "Stop requested" in texts(at)


def test_page_running_job_says_estimating(home):
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    store.update_job(job_id, status="running", stage="Model Trainer", started_at=time.time())
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 100})
    store.add_metrics(job_id, 5, 0.5, {"loss": 0.9})
    at = run_app("pages/training.py")
    assert "estimating…" in at.get("progress")[0].proto.text


def test_page_resume_button_queues_and_launches(home, monkeypatch):
    from core.jobs import launcher
    calls = []
    monkeypatch.setattr(launcher, "launch_worker",
                        lambda settings, store, job_id, resume=False: calls.append((job_id, resume)))
    settings, store = context()
    job_id = make_resumable(settings, store)
    blocked = make_resumable(settings, store, engine="nnunet")
    early = make_resumable(settings, store, checkpoint=False)
    at = run_app("pages/training.py")
    at.selectbox[0].select(blocked).run()
    assert "Cannot resume: the nnU-Net engine cannot resume" in texts(at)
    assert not [b for b in at.button if b.label == "Resume"]
    at.selectbox[0].select(early).run()
    at.button(key=f"resume-{early}").click().run()
    assert "goes on from the stage that did not finish" in texts(at)
    assert calls == [(early, True)]
    calls.clear()
    at.selectbox[0].select(job_id).run()
    at.button(key=f"resume-{job_id}").click().run()
    assert not at.exception
    assert calls == [(job_id, True)]
    assert store.job(job_id)["status"] == "queued"
    assert json.loads((settings.jobs_dir / job_id / "train_config.json").read_text())["resume"]
    assert "Resuming" in texts(at)
    assert at.button(key=f"stop-{job_id}")  # queued again: the dashboard is live


# ------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_stopped_job_resumes_from_its_checkpoint(settings, store, registered_demo):
    """A real job is stopped after its first epoch (Stop keeps and scores the best model so
    far), then resumed through the worker: training continues from the checkpoint's step and
    the model is tested again."""
    from core.jobs.launcher import launch_worker
    from tests.test_jobs_worker import wait_for

    job_id = create_job(settings, store, REQUEST, "autopilot", auto_approve=True)
    launch_worker(settings, store, job_id)
    deadline = time.time() + 300
    while not any(m["name"] == "eval_auc" for m in store.metrics(job_id)):
        assert time.time() < deadline and store.job(job_id)["status"] != "failed", \
            store.job(job_id)["error"]
        time.sleep(0.5)
    request_stop(store, job_id)
    job = wait_for(store, job_id, {"stopped", "succeeded", "failed"}, timeout=300)
    assert job["status"] == "stopped", job["error"]
    # Stop keeps the best model so far, and the system's evaluator scores it on the test set
    assert "auc" in json.loads(job["result"])["metrics"]
    ws = settings.jobs_dir / job_id
    first = json.loads((ws / "Logout" / "train_summary.json").read_text())
    assert first["stop_reason"] == "stopped by the user" and first["epochs_run"] < 40
    config_path = ws / "train_config.json"
    config = json.loads(config_path.read_text())
    # two more epochs keep the test short and leave room for a logged loss (every 5 steps)
    config["epochs"] = int(first["epochs_run"]) + 2
    config_path.write_text(json.dumps(config))

    prepare_resume(store, job_id)
    launch_worker(settings, store, job_id, resume=True)
    job = wait_for(store, job_id, {"succeeded", "failed", "stopped"}, timeout=400)
    assert job["status"] == "succeeded", job["error"] + tail_file(ws / "worker.log", 30)
    again = json.loads((ws / "Logout" / "train_summary.json").read_text())
    assert again["global_step"] > first["global_step"]
    # each run logs max_steps as it begins: the resumed run's losses start past the checkpoint
    rows = store.metrics(job_id)
    resumed = max(i for i, m in enumerate(rows) if m["name"] == "max_steps")
    losses = [m["step"] for m in rows[resumed:] if m["name"] == "loss"]
    assert losses and min(losses) > first["global_step"]
    assert again["stop_reason"] == "completed"
    assert "auc" in json.loads(job["result"])["metrics"]
    trainer = role_timeline(store.events(job_id), ROLES, job)[3]
    assert trainer["runs"] == 2 and trainer["status"] == "succeeded"
