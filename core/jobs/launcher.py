"""One way to start a job, for the CLI and the pages alike: its own worker process,
``python -m crew.worker JOB --home DIR [--resume]``, detached from the caller so a job outlives
the page, the server or the terminal that started it. The worker is a parent process: it is the
one that writes the job's rows; what it starts (checks, training) reports back to it."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

from core.config.secrets import worker_env
from core.config.settings import AUTOPILOT, REPO_ROOT, Settings
from core.jobs.standby import hand_over
from core.jobs.workspace import JobWorkspace
from core.jobs.lifecycle import reap_orphans, request_stop
from core.store.db import TERMINAL_STATUSES, Store
from core.store.liveness import INTERRUPTED

WORKER_MODULE = "crew.worker"


def launch_worker(settings: Settings, store: Store, job_id: str, resume: bool = False) -> int:
    """Start the job's worker detached from the caller; returns its pid. In the app, an
    autopilot job is handed to the waiting standby worker when there is one
    (core/jobs/standby.py; only the app starts one), which saves the seconds of a cold start."""
    ws = JobWorkspace(settings.jobs_dir / job_id).ensure()
    llm = (store.job(job_id) or {}).get("llm") or AUTOPILOT
    if llm == AUTOPILOT:
        pid = hand_over(settings, job_id, resume=resume)
        if pid is not None:
            store.update_job(job_id, pid=pid)
            return pid
    # an allow-list, plus the LLM's key variable by name when the job uses an LLM
    env = worker_env({"M3B_HOME": str(settings.home)}, llm=llm, key_env=settings.llm_key_env)
    with open(ws.worker_log, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, job_id, "--home",
                                 str(settings.home), *(["--resume"] if resume else [])],
                                cwd=str(REPO_ROOT), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    store.update_job(job_id, pid=proc.pid)  # with the process's identity (core/store/liveness)
    return proc.pid


def run_to_end(settings: Settings, store: Store, job_id: str,
               on_tick: Callable[[dict], None] | None = None, poll_s: float = 0.5,
               actor: str = "cli", resume: bool = False) -> tuple[dict, bool]:
    """Start the job's worker and follow it to its end from the store (the CLI and the bench).
    ``on_tick(job)`` runs at every poll (progress lines, asking for approval). Ctrl-C asks the
    job to stop (training keeps its best model so far, which is still scored) and keeps waiting.
    A worker that dies without writing its result (killed) ends the job ``interrupted``, which
    is recorded and can be resumed. At the end the store gets a rolling backup when one is due.
    Returns (the job's result in the CLI's contract, whether it was interrupted)."""
    launch_worker(settings, store, job_id, resume=resume)
    interrupted = False
    while True:
        try:
            job = store.job(job_id) or {}
            if on_tick is not None:
                on_tick(job)
            if job.get("status") == INTERRUPTED and job.get("recorded_status"):
                reap_orphans(store)  # the worker died without writing its result: record it
            if job.get("status") in TERMINAL_STATUSES:
                break
            time.sleep(poll_s)
        except KeyboardInterrupt:
            interrupted = True
            request_stop(store, job_id, actor=actor)
    job = store.job(job_id) or {}
    store.backup_if_due()
    result = json.loads(job["result"]) if job.get("result") else {
        "status": job.get("status") or "failed", "job_id": job_id, "error": job.get("error")}
    return result, interrupted
