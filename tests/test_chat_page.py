"""The Chat page ("Build a model") and the plan edits behind it.

The plan is made by the real planning stage (JobRunner in a thread of this process, autopilot)
on the demo dataset; no model is trained: the Model Trainer's routine is replaced by one that
writes train_config.json with the real tool and then ends the job, so a test can check that the
user's edits reached the Data Engineer and the Model Trainer.
"""
from __future__ import annotations

import json
import time

import pytest

import core
import crew.autopilot
from core.demo.chest_xray import DEMO_NAME
from core.jobs.lifecycle import create_job
from core.planning.plan_edits import PlanEditError, edit_plan, validate_edits
from crew.autopilot import StageError
from tests.conftest import run_until_approval
from tests.test_app import (REQUEST, context, home, launched,  # noqa: F401  (fixtures)
                            make_finished_job, run_app, texts)


def configure_only(tools, ctx) -> str:
    """The Model Trainer up to its first tool: train_config.json is written, nothing trains."""
    result = {t.name: t for t in tools}["configure_training"].call()
    raise StageError(f"test ends before training (configure_training ok={result['ok']})")


class Planned:
    """A job whose real planning stage ran and now waits for approval."""

    def __init__(self, settings, store, job_id, worker, outcome):
        self.settings, self.store, self.job_id = settings, store, job_id
        self.worker, self.outcome = worker, outcome
        self.ws = settings.jobs_dir / job_id

    def plan_bytes(self) -> bytes:
        return (self.ws / "plan.json").read_bytes()

    def plan(self) -> dict:
        return json.loads(self.plan_bytes())

    def finish(self, timeout: float = 120) -> dict:
        self.worker.join(timeout=timeout)
        assert not self.worker.is_alive(), "the job did not end"
        return self.outcome


@pytest.fixture
def planned(home, monkeypatch):
    from crew.demo import ensure_demo

    monkeypatch.setitem(crew.autopilot.ROUTINES, "model_trainer", configure_only)
    settings, store = context()
    assert ensure_demo(settings)["status"] == "registered"
    job_id = create_job(settings, store, REQUEST, llm="autopilot", auto_approve=False)
    worker, outcome = run_until_approval(settings, store, job_id, timeout=60)
    job = Planned(settings, store, job_id, worker, outcome)
    yield job
    if worker.is_alive():
        store.update_job(job_id, stop_requested=1)
        worker.join(timeout=120)


def shown(at) -> str:
    """The page's text with markdown escapes removed."""
    return texts(at).replace("\\", "")


def audit(store, job_id: str) -> list[tuple[str, str]]:
    return [(r["actor"], r["action"]) for r in
            store.rows("select actor, action from audit where target = ? order by id", [job_id])]


def submit(at, job_id: str):
    button = next(b for b in at.button if b.label == "Save changes and approve")
    return button.click().run()


# ------------------------------------------------------------------------------ the plan card
def test_plan_card_shows_the_plan_with_approve_edit_cancel(planned):
    at = run_app("pages/chat.py")
    page = shown(at)
    for expected in (DEMO_NAME, "diagnosis", "densenet_small", "AUC",
                     "20% of patients held out for testing", "seed 42", "grouping key",
                     "up to 40", "10 min"):
        assert expected in page, expected
    assert at.button(key=f"approve-{planned.job_id}").label == "Approve"
    assert at.button(key=f"cancel-{planned.job_id}").label == "Cancel"
    assert at.expander[0].label == "Edit the plan"
    form = f"edit-{planned.job_id}-"
    assert at.selectbox(key=form + "dataset").value == DEMO_NAME
    assert at.selectbox(key=form + "model").value == "densenet_small"
    assert "resnet18" in at.selectbox(key=form + "model").options
    assert at.number_input(key=form + "epochs").value == 40
    assert at.number_input(key=form + "seed").value == 42
    assert not [s for s in at.selectbox if s.label == "Engine"]


def test_the_full_size_demo_is_one_click_away(planned):
    """The quick demo's plan card offers the full-size set: one click registers it (if it is
    not yet), switches the plan to it through the plan-edit checks, and approves."""
    from core.demo.chest_xray import FULL_DEMO_NAME
    at = run_app("pages/chat.py")
    assert "This is the quick demo set (120 patients, 64 px)" in shown(at)
    at.button(key=f"full-demo-{planned.job_id}").click().run()
    assert not at.exception
    job = planned.store.job(planned.job_id)
    assert job["approval"] == "approved"
    assert planned.plan()["dataset"] == FULL_DEMO_NAME
    assert ("user", "plan_approved") in audit(planned.store, planned.job_id)


def test_approve_path(planned):
    before = planned.plan_bytes()
    at = run_app("pages/chat.py")
    at.button(key=f"approve-{planned.job_id}").click().run()
    assert not at.exception
    assert planned.store.job(planned.job_id)["approval"] == "approved"
    assert ("user", "plan_approved") in audit(planned.store, planned.job_id)
    assert planned.plan_bytes() == before  # approved as proposed
    deadline = time.time() + 60  # the runner goes on to the Data Engineer ...
    while not [e for e in planned.store.events(planned.job_id) if e["role"] == "Data Engineer"]:
        assert time.time() < deadline and planned.worker.is_alive(), planned.outcome
        time.sleep(0.1)
    planned.store.update_job(planned.job_id, stop_requested=1)  # ... and is stopped there
    assert planned.finish()["status"] == "stopped"


def test_edit_path_rewrites_the_plan_and_the_agents_honour_it(planned):
    job_id, form = planned.job_id, f"edit-{planned.job_id}-"
    at = run_app("pages/chat.py")
    at.number_input(key=form + "epochs").set_value(3)
    at.selectbox(key=form + "model").set_value("resnet18")
    at.number_input(key=form + "seed").set_value(7)
    at.number_input(key=form + "test_fraction").set_value(0.3)
    at.number_input(key=form + "time_budget_min").set_value(5)
    submit(at, job_id)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    plan = planned.plan()
    assert plan["model"] == "resnet18" and plan["epochs"] == 3
    assert plan["time_budget_s"] == 300
    assert plan["split"]["test_fraction"] == 0.3 and plan["split"]["seed"] == 7
    assert plan["user_edits"] == {"model": "resnet18", "epochs": 3, "time_budget_s": 300,
                                  "test_fraction": 0.3, "seed": 7}
    assert plan["dataset"] == DEMO_NAME and plan["status"] == "ready"
    assert planned.store.job(job_id)["approval"] == "approved"

    events = planned.store.events(job_id)
    edit = next(e for e in events if e["kind"] == "edit")
    assert edit["role"] == "User" and "epochs 40 → 3" in edit["result"]
    assert "network densenet_small → resnet18" in edit["result"]
    assert json.loads(edit["args"]) == {"actor": "user", "set": {
        "model": "resnet18", "epochs": 3, "time_budget_min": 5, "test_fraction": 0.3, "seed": 7}}
    regate = [e for e in events if e["kind"] == "gate" and "after the user's edit" in e["result"]]
    assert regate and regate[0]["ok"] == 1 and regate[0]["id"] > edit["id"]
    # the user's own actions, in order (the runner audits fixing the dataset root on its own)
    users = [a for a in audit(planned.store, job_id) if a[0] == "user"]
    assert users[-2:] == [("user", "plan_edited"), ("user", "plan_approved")]

    # the Data Engineer and the Model Trainer used the edited values
    outcome = planned.finish()
    assert "test ends before training" in outcome["error"]
    split = json.loads((planned.ws / "Datapath" / "split.json").read_text())
    assert split["test_fraction"] == 0.3 and split["seed"] == 7
    config = json.loads((planned.ws / "train_config.json").read_text())
    assert (config["network"], config["epochs"], config["seed"], config["time_budget_s"]) == \
        ("resnet18", 3, 7, 300)

    at = run_app("pages/chat.py")  # the history shows what the user changed
    assert "You changed the plan before approving it" in shown(at)
    assert "epochs 40 → 3" in shown(at)
    assert "(set by you)" in shown(at)


def test_invalid_edit_in_the_form_changes_nothing(planned):
    before = planned.plan_bytes()
    at = run_app("pages/chat.py")
    at.number_input(key=f"edit-{planned.job_id}-epochs").set_value(0)
    at.number_input(key=f"edit-{planned.job_id}-seed").set_value(9)
    submit(at, planned.job_id)
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "Not saved" in errors and "epochs must be a whole number from 1 to 1000" in errors
    assert planned.plan_bytes() == before
    job = planned.store.job(planned.job_id)
    assert job["approval"] == "pending" and job["status"] == "awaiting_approval"
    assert not [e for e in planned.store.events(planned.job_id) if e["kind"] == "edit"]
    assert audit(planned.store, planned.job_id) == [("user", "create_job")]
    assert at.button(key=f"approve-{planned.job_id}").label == "Approve"  # still undecided


INVALID = [
    ({"epochs": 0}, "epochs must be a whole number from 1 to 1000, got 0"),
    ({"epochs": 2.5}, "epochs must be a whole number"),
    ({"epochs": True}, "epochs must be a whole number"),
    ({"model": "vgg16"}, "unknown network 'vgg16' for the diagnosis template; choose one of"),
    ({"test_fraction": 0.9}, "test fraction must be a number from 0.05 to 0.5"),
    ({"time_budget_min": 0}, "time budget (minutes) must be a number from 1 to 10080"),
    ({"seed": -1}, "seed must be a whole number from 0 to"),
    ({"seed": "abc"}, "seed must be a whole number"),
    ({"dataset": "No such data"}, "dataset 'No such data' is not a registered datacard"),
    ({"dataset": "COVID19"}, "is registered but its folder"),  # a paper card, no folder
    ({"engine": "nnunet"}, "the engine can only be chosen for segmentation"),
    ({"batch_size": 4}, "unknown field(s) batch_size"),
]


def test_invalid_edits_are_refused_and_change_nothing(planned):
    before = planned.plan_bytes()
    for values, message in INVALID:
        with pytest.raises(PlanEditError) as info:
            edit_plan(planned.settings, planned.store, planned.job_id, values)
        assert message in str(info.value), (values, str(info.value))
    # several problems at once are all named
    with pytest.raises(PlanEditError) as info:
        edit_plan(planned.settings, planned.store, planned.job_id, {"epochs": 0, "seed": -1})
    assert len(info.value.errors) == 2
    assert planned.plan_bytes() == before
    assert planned.store.job(planned.job_id)["approval"] == "pending"
    assert audit(planned.store, planned.job_id) == [("user", "create_job")]
    assert not [e for e in planned.store.events(planned.job_id) if e["role"] == "User"]


def test_edit_to_another_fitting_dataset(planned):
    cards = planned.settings.datacards_dir
    entry_card = json.loads(next(p for p in cards.glob("*.json")
                                 if not p.name.endswith(".validation.json")).read_text())
    twin = {**entry_card, "dataset name": "Ward chest X-ray"}
    (cards / "Ward_chest_X-ray.json").write_text(json.dumps(twin))
    masks = {**entry_card, "dataset name": "Ward lungs", "tasks": ["segmentation"],
             "label_source": "image_mask_folders"}
    (cards / "Ward_lungs.json").write_text(json.dumps(masks))
    before = planned.plan_bytes()
    with pytest.raises(PlanEditError, match="'Ward lungs' does not serve diagnosis"):
        edit_plan(planned.settings, planned.store, planned.job_id, {"dataset": "Ward lungs"})
    assert planned.plan_bytes() == before

    result = edit_plan(planned.settings, planned.store, planned.job_id,
                       {"dataset": "Ward chest X-ray"}, approve=False)
    plan = planned.plan()
    assert result.changes == {"dataset": (DEMO_NAME, "Ward chest X-ray")}
    assert plan["dataset"] == plan["user_edits"]["dataset"] == "Ward chest X-ray"
    assert "The user chose Ward chest X-ray" in plan["reasons"]
    assert planned.store.job(planned.job_id)["dataset"] == "Ward chest X-ray"
    assert planned.store.job(planned.job_id)["approval"] == "pending"  # approve=False


def test_a_plan_the_gate_refuses_is_put_back(planned, monkeypatch):
    import core.planning.plan_edits
    from core.jobs.gates import GateResult

    before = planned.plan_bytes()
    monkeypatch.setattr(core.planning.plan_edits, "check_plan", lambda ws, known: GateResult(
        "plan", False, ["dataset 'x' is registered but its folder does not exist"]))
    with pytest.raises(PlanEditError, match="its folder does not exist"):
        edit_plan(planned.settings, planned.store, planned.job_id, {"epochs": 5})
    assert planned.plan_bytes() == before
    assert planned.store.job(planned.job_id)["approval"] == "pending"
    assert not [e for e in planned.store.events(planned.job_id) if e["role"] == "User"]
    assert not list(planned.ws.glob(".plan.json*"))  # no temp file left behind


def test_edits_only_while_the_plan_waits(planned):
    edit_plan(planned.settings, planned.store, planned.job_id, {})  # no change: approved as is
    assert planned.store.job(planned.job_id)["approval"] == "approved"
    with pytest.raises(PlanEditError, match="no longer waiting for approval"):
        edit_plan(planned.settings, planned.store, planned.job_id, {"epochs": 5})


def segmentation_plan() -> dict:
    return {"status": "ready", "dataset": "Organs", "task": "segmentation",
            "template": "segmentation", "dimension": "2D", "device": "cpu", "model": "unet_small",
            "engine": "monai", "engine_reason": "CPU", "metric": "dice", "time_budget_s": 600,
            "split": {"test_fraction": 0.2, "seed": 42}, "reasons": "fits"}


def test_segmentation_engine_and_network_stay_consistent(settings):
    plan = segmentation_plan()
    # the engine alone: its default network for the data's dimension follows
    result = validate_edits(settings, plan, {"engine": "nnunet", "model": "unet_small"})
    assert (result.plan["engine"], result.plan["model"]) == ("nnunet", "nnunet_2d")
    # an nnU-Net network alone: the engine follows
    result = validate_edits(settings, plan, {"model": "nnunet_2d"})
    assert result.plan["engine"] == "nnunet"
    assert result.plan["user_edits"] == {"engine": "nnunet", "model": "nnunet_2d"}
    # both, contradicting each other
    with pytest.raises(PlanEditError, match="not trained by the monai engine"):
        validate_edits(settings, {**plan, "engine": "nnunet", "model": "nnunet_2d"},
                       {"engine": "monai", "model": "nnunet_3d_fullres"})
    with pytest.raises(PlanEditError, match="needs 3D images"):
        validate_edits(settings, plan, {"model": "nnunet_3d_fullres"})
    with pytest.raises(PlanEditError, match="unknown engine 'tensorflow'"):
        validate_edits(settings, plan, {"engine": "tensorflow"})


def test_cancel_path(planned):
    at = run_app("pages/chat.py")
    at.button(key=f"cancel-{planned.job_id}").click().run()
    assert not at.exception
    outcome = planned.finish()
    assert outcome["status"] == "cancelled"
    assert ("user", "plan_cancelled") in audit(planned.store, planned.job_id)
    assert not (planned.ws / "Datapath" / "train.json").exists()  # nothing was built
    at = run_app("pages/chat.py")
    assert "Plan cancelled — nothing was trained." in texts(at)


# ------------------------------------------------------------------------------ results, history
def test_result_card_links_and_research_statement(home):
    settings, store = context()
    make_finished_job(settings, store)
    at = run_app("pages/chat.py")
    assert [m.value for m in at.metric] == ["0.950", "0.900", "0.890"]
    assert "95% CI 0.820 – 0.960" in texts(at)
    assert core.RESEARCH_ONLY in texts(at)
    links = {link.proto.page: link.proto.label for link in at.get("page_link")}
    assert "Models" in links["models"] and "Training" in links["training"]


def test_history_survives_a_reload_and_a_restart(home, launched):
    settings, store = context()
    done = make_finished_job(settings, store)
    none_fits = create_job(settings, store, "segment the pancreas in CT", llm="autopilot")
    (settings.jobs_dir / none_fits / "plan.json").write_text(json.dumps(
        {"status": "no_dataset", "dataset": None, "reasons": "no available pancreas CT data"}))
    store.update_job(none_fits, status="no_dataset", finished_at=time.time())

    at = run_app("pages/chat.py")
    at.chat_input[0].set_value("detect nodules on chest CT").run()
    assert len(launched) == 1

    from core.store import db as store_module
    store_module._stores.clear()  # a server restart: new process, new connection
    at = run_app("pages/chat.py")  # a fresh session
    users = [m.markdown[0].value for m in at.chat_message if m.name == "user"]
    assert users == [REQUEST, "segment the pancreas in CT", "detect nodules on chest CT"]
    captions = texts(at)
    for job_id in (done, none_fits, launched[0]):
        assert f"job {job_id}" in captions
    assert [m.value for m in at.metric] == ["0.950", "0.900", "0.890"]
    assert "no available pancreas CT data" in captions
    assert any("No registered dataset fits" in w.value for w in at.warning)


# ------------------------------------------------------------------------------ role steps
def role_marks(at) -> dict[str, tuple[str, str]]:
    """Each role's box on the page: (state or 'neutral', icon), by role name."""
    marks = {}
    for box in [*at.status, *at.expander]:
        role = box.label.split("**")[1] if box.label.startswith("**") else ""
        if role:
            marks[role] = (box.state if box.type == "status" else "neutral", box.icon)
    return marks


def test_role_steps_mark_running_done_failed_and_stopped(home):
    """The role still working shows a spinner, never the ✓ of a finished one; a failed role
    its error mark; a role the job stopped in a neutral mark."""
    settings, store = context()
    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    store.add_event(job_id, "Task Manager", "stage", tool="start")
    store.add_event(job_id, "Task Manager", "tool", tool="list_datacards", result="3 cards")
    store.add_event(job_id, "Task Manager", "stage", tool="end", seconds=2.0)
    store.add_event(job_id, "Data Engineer", "stage", tool="start")
    store.add_event(job_id, "Data Engineer", "tool", tool="build_index", result="120 images")
    store.update_job(job_id, status="running", stage="Data Engineer", started_at=time.time())
    at = run_app("pages/chat.py")
    marks = role_marks(at)
    assert marks["Task Manager"] == ("complete", ":material/check:")
    assert marks["Data Engineer"] == ("running", "spinner")  # not ✓ beside "working…"
    working = next(s for s in at.status if "Data Engineer" in s.label)
    assert "working…" in working.label
    assert "Module Architect" not in marks
    assert "Next: Module Architect → Model Trainer" in texts(at)

    # the Data Engineer fails a first time, is resumed and works again: running, not failed
    store.add_event(job_id, "Data Engineer", "stage", tool="end", ok=False, result="bad index")
    store.add_event(job_id, "Data Engineer", "stage", tool="start")
    assert role_marks(run_app("pages/chat.py"))["Data Engineer"] == ("running", "spinner")

    # the user stops the job while the Data Engineer works: a neutral mark, neither ✓ nor ✗
    store.update_job(job_id, status="stopped", finished_at=time.time())
    at = run_app("pages/chat.py")
    marks = role_marks(at)
    assert marks["Data Engineer"] == ("neutral", ":material/stop_circle:")
    assert marks["Task Manager"] == ("complete", ":material/check:")
    assert "Next:" not in texts(at)

    failed = create_job(settings, store, REQUEST, llm="autopilot")
    store.add_event(failed, "Task Manager", "stage", tool="start")
    store.add_event(failed, "Task Manager", "stage", tool="end", ok=False,
                    result="no dataset could be read")
    store.update_job(failed, status="failed", finished_at=time.time(), error="planning failed")
    at = run_app("pages/chat.py")
    boxes = [s for s in at.status if "Task Manager" in s.label and "failed" in s.label]
    assert boxes and boxes[0].state == "error" and boxes[0].icon == ":material/error:"
    assert "no dataset could be read" in texts(at)
