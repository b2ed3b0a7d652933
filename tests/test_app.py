"""The Streamlit app, driven headlessly with streamlit.testing.v1.AppTest.

Each test gets its own M3Builder home (M3B_HOME=tmp_path). No background worker is started:
`core.jobs.launcher.launch_worker` is replaced by a recorder, and the approval test runs the real planning
stage in a thread of this process.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import core
from core.demo.chest_xray import DEMO_DESCRIPTION, DEMO_NAME, make_chest_xray_demo
from core.jobs.lifecycle import create_job
from core.config.settings import get_settings
from core.store.db import open_store
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parent.parent / "app.py"
REQUEST = "classify pneumonia versus normal chest X-rays"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("M3B_HOME", str(tmp_path))
    monkeypatch.setenv("CREWAI_TESTING", "true")
    monkeypatch.delenv("M3B_LLM", raising=False)
    return tmp_path


@pytest.fixture
def launched(monkeypatch):
    """Record launch_worker calls instead of starting a worker process."""
    calls: list[str] = []
    from core.jobs import launcher
    monkeypatch.setattr(launcher, "launch_worker",
                        lambda settings, store, job_id, resume=False: calls.append(job_id))
    return calls


def context():
    settings = get_settings()
    return settings, open_store(settings.store_path)


def run_app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    if page:
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    """Every markdown, caption, alert and label on the page, as one string."""
    parts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error")
             for e in getattr(at, kind)]
    parts += [s.label for s in at.status]
    return "\n".join(str(p) for p in parts)


def make_finished_job(settings, store) -> str:
    """A succeeded job as the runner leaves it: plan, report, card, metrics, model row."""
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    ws = settings.jobs_dir / job_id
    (ws / "plan.json").write_text(json.dumps({
        "status": "ready", "dataset": DEMO_NAME, "task": "diagnosis", "model": "densenet_small",
        "metric": "auc", "time_budget_s": 600, "reasons": "matches the request",
        "split": {"method": "grouped by patient", "test_fraction": 0.2, "seed": 42}}))
    report = {"metrics": {"auc": 0.95, "accuracy": 0.9, "f1_macro": 0.89},
              "ci95": {"auc": [0.9, 0.99], "accuracy": [0.82, 0.96], "f1_macro": [0.8, 0.95]},
              "per_class": {"NORMAL": {"sensitivity": 0.88, "specificity": 0.92, "support": 37},
                            "PNEUMONIA": {"sensitivity": 0.92, "specificity": 0.88,
                                          "support": 34}},
              "confusion_matrix": {"labels": ["NORMAL", "PNEUMONIA"],
                                   "matrix": [[33, 4], [3, 31]]}, "num_test": 71}
    (ws / "report.json").write_text(json.dumps(report))
    (ws / "model_card.md").write_text("# Model card: demo\n\nTest card text.\n")
    (ws / "Logout" / "train.log").write_text("{'loss': '0.69'}\ntraining finished\n")
    store.add_metrics(job_id, 0, 0.0, {"max_steps": 100})
    for step in range(5, 101, 5):
        store.add_metrics(job_id, step, step / 20, {"loss": 1 / step, "learning_rate": 1e-3})
        if step % 20 == 0:
            store.add_metrics(job_id, step, step / 20, {"eval_loss": 0.5, "eval_auc": 0.9,
                                                        "eval_accuracy": 0.85})
    model_dir = ws / "Logout" / "model"
    store.add_model({"id": job_id, "job_id": job_id, "name": f"{DEMO_NAME} diagnosis",
                     "task": "diagnosis", "dataset": DEMO_NAME, "path": str(model_dir),
                     "metrics": json.dumps(report["metrics"]),
                     "card_path": str(ws / "model_card.md"), "created_at": time.time()})
    now = time.time()
    store.update_job(job_id, status="succeeded", dataset=DEMO_NAME, task="diagnosis",
                     started_at=now - 90, finished_at=now,
                     result={"status": "succeeded", "metrics": report["metrics"],
                             "ci95": report["ci95"], "model_dir": str(model_dir)})
    return job_id


# ------------------------------------------------------------------------------ app and pages
def test_app_loads_with_sidebar(home):
    at = run_app()
    assert at.title[0].value == "Build a model"
    sidebar = "\n".join(str(e.value) for e in [*at.sidebar.markdown, *at.sidebar.caption,
                                                *at.sidebar.info, *at.sidebar.code])
    assert "Autopilot" in sidebar
    assert str(home) in sidebar
    assert core.RESEARCH_ONLY in sidebar
    assert "metadata" in sidebar


def test_unusable_home_or_damaged_store_is_said_not_a_traceback(tmp_path, monkeypatch):
    a_file = tmp_path / "home-is-a-file"
    a_file.write_text("not a folder")
    monkeypatch.setenv("M3B_HOME", str(a_file))
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert str(a_file) in texts(at) and at.error
    home = tmp_path / "damaged"
    monkeypatch.setenv("M3B_HOME", str(home))
    settings, store = context()
    for i in range(200):
        store.audit("user", "test", f"row {i}", "x" * 200)
    from core.store.db import forget_store
    forget_store(settings.store_path)          # written through; the next open checks again
    data = bytearray(settings.store_path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096     # a whole page in the middle of the file
    data[middle: middle + 4096] = bytes(range(256)) * 16
    settings.store_path.write_bytes(bytes(data))
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "store" in texts(at).lower() and at.error


@pytest.mark.parametrize("page, title", [("pages/chat.py", "Build a model"),
                                         ("pages/datasets.py", "Datasets"),
                                         ("pages/training.py", "Training"),
                                         ("pages/models.py", "Models")])
def test_each_page_runs_on_an_empty_home(home, page, title):
    at = run_app(page)
    assert at.title[0].value == title


def test_empty_home_widgets(home):
    at = run_app("pages/chat.py")
    assert len(at.chat_input) == 1
    at = run_app("pages/datasets.py")
    assert len(at.dataframe) == 1 and at.text_input(key="scan_path").value == ""
    assert any(b.label == "Build the demo dataset" for b in at.button)
    at = run_app("pages/training.py")
    assert "No jobs yet" in texts(at)
    at = run_app("pages/models.py")
    assert "No models yet" in texts(at)


def test_pages_show_a_finished_job(home):
    settings, store = context()
    job_id = make_finished_job(settings, store)

    at = run_app("pages/chat.py")
    assert [m.value for m in at.metric] == ["0.950", "0.900", "0.890"]
    assert "95% CI 0.900 – 0.990" in texts(at)
    assert core.RESEARCH_ONLY in texts(at)
    assert any(str(settings.jobs_dir / job_id / "Logout" / "model") in c.value for c in at.code)

    at = run_app("pages/training.py")
    assert at.selectbox[0].value == job_id
    assert {m.label for m in at.metric} >= {"Status", "Stage", "Elapsed"}
    assert len(at.get("plotly_chart")) == 3
    assert not [b for b in at.button if b.label == "Stop"]  # finished: nothing to stop
    assert any("training finished" in c.value for c in at.code)

    at = run_app("pages/models.py")
    assert [m.value for m in at.metric] == ["0.950", "0.900", "0.890"]
    assert len(at.get("plotly_chart")) == 1  # confusion matrix
    per_class = at.dataframe[1].value
    assert list(per_class["Class"]) == ["NORMAL", "PNEUMONIA"]
    assert "Test card text." in texts(at)
    assert core.RESEARCH_ONLY in texts(at)


def test_training_page_stop_button(home):
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    store.update_job(job_id, status="running", stage="Model Trainer", started_at=time.time())
    at = run_app("pages/training.py")
    stop = at.button(key=f"stop-{job_id}")
    stop.click().run()
    assert store.job(job_id)["stop_requested"] == 1
    assert "Stop requested" in texts(at)


# ------------------------------------------------------------------------------ datasets
def fill_register_form(at: AppTest, path: str, name: str, description: str = "") -> AppTest:
    """Step 1 (Scan) and, when it drafted a card, step 2 (Validate and save)."""
    at.text_input(key="scan_path").input(path)
    at.text_input(key="scan_name").input(name)
    at.text_area(key="scan_description").input(description)
    next(b for b in at.button if b.label == "Scan").click()
    at.run()
    save = [b for b in at.button if b.label == "Validate and save"]
    if save:
        save[0].click()
        at.run()
    return at


def test_register_demo_folder_through_the_form(home):
    folder = make_chest_xray_demo(home / "demo_src", patients_per_class=12)
    at = run_app("pages/datasets.py")
    fill_register_form(at, str(folder), "Ward chest X-ray", DEMO_DESCRIPTION)
    assert not at.exception
    assert any("Registered" in s.value for s in at.success), texts(at)
    settings, store = context()
    assert (settings.datacards_dir / "Ward_chest_X-ray.json").is_file()
    assert "Ward chest X-ray" in list(at.dataframe[0].value["Name"])


def test_register_invalid_path_shows_error_and_adds_no_card(home):
    settings, store = context()
    before = store.datacards()
    at = run_app("pages/datasets.py")
    fill_register_form(at, str(home / "no such folder"), "Missing data")
    assert not at.exception
    assert at.error, "an invalid folder must show an error"
    assert not at.success
    assert not list(settings.datacards_dir.glob("*.json"))
    assert store.datacards() == before


def test_build_demo_button(home):
    at = run_app("pages/datasets.py")
    next(b for b in at.button if b.label == "Build the demo dataset").click().run()
    assert not at.exception
    assert any("demo dataset is ready" in s.value for s in at.success)
    assert DEMO_NAME in list(at.dataframe[0].value["Name"])


# ------------------------------------------------------------------------------ chat
def test_chat_request_creates_a_job(home, launched):
    at = run_app("pages/chat.py")
    at.chat_input[0].set_value(REQUEST).run()
    assert not at.exception
    _, store = context()
    jobs = store.jobs()
    assert len(jobs) == 1
    assert jobs[0]["request"] == REQUEST and jobs[0]["status"] == "queued"
    assert jobs[0]["approval"] == "pending"
    assert launched == [jobs[0]["id"]]
    user = [m for m in at.chat_message if m.name == "user"]
    assert user and REQUEST in user[-1].markdown[0].value


@pytest.mark.parametrize("bad", ["   ", "x" * 4001])
def test_chat_bad_request_shows_error_and_creates_nothing(home, launched, bad):
    at = run_app("pages/chat.py")
    at.chat_input[0].set_value(bad).run()
    assert not at.exception
    assert at.error and "No job was created" in at.error[0].value
    _, store = context()
    assert store.jobs() == [] and launched == []


def test_chat_no_dataset_points_to_datasets(home):
    settings, store = context()
    job_id = create_job(settings, store, "segment the pancreas in CT", llm="autopilot")
    (settings.jobs_dir / job_id / "plan.json").write_text(json.dumps(
        {"status": "no_dataset", "dataset": None, "reasons": "no available pancreas CT data"}))
    store.update_job(job_id, status="no_dataset", finished_at=time.time())
    at = run_app("pages/chat.py")
    assert "no available pancreas CT data" in texts(at)
    assert any("No registered dataset fits" in w.value for w in at.warning)


def test_chat_approval_drives_the_real_plan(home):
    from crew.demo import ensure_demo
    from crew.runner import JobRunner

    settings, store = context()
    assert ensure_demo(settings)["status"] == "registered"
    job_id = create_job(settings, store, REQUEST, llm=settings.llm, auto_approve=False)
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(JobRunner(settings, job_id).run()),
                              daemon=True)
    worker.start()
    try:
        deadline = time.time() + 60
        while store.job(job_id)["status"] != "awaiting_approval":
            assert time.time() < deadline, "planning did not reach approval in 60 s"
            assert worker.is_alive(), outcome
            time.sleep(0.2)

        at = run_app("pages/chat.py")
        assert DEMO_NAME in texts(at)  # the plan names the chosen dataset
        assert "Task Manager" in at.status[0].label
        approve = at.button(key=f"approve-{job_id}")
        assert approve.label == "Approve"
        assert at.button(key=f"cancel-{job_id}").label == "Cancel"
        approve.click().run()
        assert not at.exception
        assert store.job(job_id)["approval"] == "approved"
    finally:
        store.update_job(job_id, stop_requested=1)
        worker.join(timeout=120)
    assert not worker.is_alive()
    assert outcome["status"] == "stopped"
