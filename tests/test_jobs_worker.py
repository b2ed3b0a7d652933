"""Jobs run in their own detached process and are steered only through the store."""
from __future__ import annotations

import json
import os
import time

import pytest

from core.jobs.lifecycle import JobError, create_job, set_approval
from core.jobs.launcher import launch_worker


def wait_for(store, job_id, statuses, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = store.job(job_id)
        if job["status"] in statuses:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job stayed {store.job(job_id)['status']}")


def test_worker_waits_for_approval_then_cancels(settings, store, registered_demo):
    job_id = create_job(settings, store, "classify pneumonia versus normal chest X-rays",
                        "autopilot")
    pid = launch_worker(settings, store, job_id)
    assert pid != os.getpid() and os.getpgid(pid) != os.getpgid(0)  # its own session
    job = wait_for(store, job_id, {"awaiting_approval", "failed"})
    assert job["status"] == "awaiting_approval", job["error"]
    plan = json.loads((settings.jobs_dir / job_id / "plan.json").read_text())
    assert plan["status"] == "ready" and plan["metric"] == "auc"
    set_approval(store, job_id, "cancelled")
    job = wait_for(store, job_id, {"cancelled"})
    result = json.loads(job["result"])
    assert [r["status"] for r in result["roles"]] == ["succeeded", "skipped", "skipped",
                                                      "skipped"]
    assert not (settings.jobs_dir / job_id / "Datapath" / "train.json").exists()
    actions = [r["action"] for r in store.rows("select action from audit")]
    assert "plan_cancelled" in actions and "create_job" in actions


def test_worker_finishes_no_dataset_job(settings, store, registered_demo):
    job_id = create_job(settings, store, "segment the liver on MRI", "autopilot")
    launch_worker(settings, store, job_id)
    job = wait_for(store, job_id, {"no_dataset", "failed"})
    assert job["status"] == "no_dataset"
    assert "No registered dataset fits" in json.loads(job["result"])["reasons"]
    assert (settings.jobs_dir / job_id / "worker.log").exists()


@pytest.mark.parametrize("request_text", ["", "   ", "x" * 5000])
def test_bad_requests_create_no_job(settings, store, request_text):
    with pytest.raises(JobError):
        create_job(settings, store, request_text, "autopilot")
    assert store.jobs() == []


def test_approval_decision_is_validated(store):
    with pytest.raises(JobError):
        set_approval(store, "nope", "approved")
    store.insert_job({"id": "j", "status": "queued", "created_at": 0.0})
    with pytest.raises(JobError):
        set_approval(store, "j", "maybe")


def test_orphaned_running_job_is_marked_interrupted(store):
    from core.jobs.lifecycle import reap_orphans
    store.insert_job({"id": "dead", "status": "running", "created_at": 0.0, "pid": 2 ** 22 + 7})
    store.insert_job({"id": "live", "status": "running", "created_at": 0.0, "pid": os.getpid()})
    assert store.job("dead", raw=True)["status"] == "running"
    assert store.job("dead")["status"] == "interrupted"  # every reader sees it before the reap
    assert reap_orphans(store) == ["dead"]
    assert store.job("dead", raw=True)["status"] == "interrupted"
    assert "python -m crew resume dead" in store.job("dead")["error"]
    assert store.job("live")["status"] == "running"
    assert reap_orphans(store) == []


# Stopping a job during training (the best model so far is kept and scored) is checked by
# tests/test_training_page.py::test_stopped_job_resumes_from_its_checkpoint, which then resumes
# the same job.
