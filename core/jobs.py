"""Job lifecycle in the store: create, approve / cancel the plan, request a stop, wait.

A job row is the only truth about a job: the page that started it may be gone; the worker
process (``python -m crew.worker``) reads and writes the same row.

Statuses: queued -> running -> [awaiting_approval -> running] -> succeeded | failed |
no_dataset | cancelled | stopped.
"""
from __future__ import annotations

import secrets
import time

from core.settings import Settings
from core.store import TERMINAL_STATUSES, Store
from core.workspace import JobWorkspace


class JobError(RuntimeError):
    pass


def new_job_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def create_job(settings: Settings, store: Store, request: str, llm: str,
               auto_approve: bool = False) -> str:
    request = (request or "").strip()
    if not request:
        raise JobError("the request is empty: say what model to build, e.g. 'classify "
                       "pneumonia versus normal chest X-rays'")
    if len(request) > 4000:
        raise JobError("the request is longer than 4000 characters; shorten it")
    job_id = new_job_id()
    ws = JobWorkspace(settings.jobs_dir / job_id).ensure()
    store.insert_job({"id": job_id, "request": request, "llm": llm, "status": "queued",
                      "stage": "", "workspace": str(ws.root), "created_at": time.time(),
                      "auto_approve": int(auto_approve), "approval": "pending",
                      "stop_requested": 0, "error": "", "result": ""})
    store.audit("user", "create_job", job_id, f"llm={llm}")
    return job_id


def set_approval(store: Store, job_id: str, decision: str, actor: str = "user") -> None:
    if decision not in ("approved", "cancelled"):
        raise JobError(f"decision must be 'approved' or 'cancelled', got {decision!r}")
    job = store.job(job_id)
    if job is None:
        raise JobError(f"no job {job_id}")
    store.update_job(job_id, approval=decision)
    store.audit(actor, f"plan_{decision}", job_id)


def request_stop(store: Store, job_id: str, actor: str = "user") -> None:
    store.update_job(job_id, stop_requested=1)
    store.audit(actor, "stop_job", job_id)


def wait_for_approval(store: Store, job_id: str, poll_s: float = 0.5,
                      timeout_s: float = 7 * 24 * 3600) -> str:
    """Block until the plan is approved or cancelled (or the job is asked to stop)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        job = store.job(job_id) or {}
        if job.get("approval") in ("approved", "cancelled"):
            return job["approval"]
        if job.get("stop_requested"):
            return "cancelled"
        time.sleep(poll_s)
    return "cancelled"


def reap_orphans(store: Store) -> list[str]:
    """Mark jobs whose worker process is gone (killed, machine restarted) as failed, so no job
    shows 'running' forever. Returns the ids it marked."""
    import psutil

    marked = []
    for job in store.jobs(limit=200):
        if job["status"] in TERMINAL_STATUSES or job["status"] == "queued" or not job.get("pid"):
            continue
        try:
            alive = psutil.Process(int(job["pid"])).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if not alive:
            store.update_job(job["id"], status="failed", finished_at=time.time(),
                             error="the job's worker process ended unexpectedly; start the "
                                   "request again")
            marked.append(job["id"])
    return marked


def is_finished(job: dict | None) -> bool:
    return bool(job) and job.get("status") in TERMINAL_STATUSES
