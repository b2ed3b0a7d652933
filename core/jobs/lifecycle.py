"""Job lifecycle in the store: create, approve / cancel the plan, request a stop, wait, resume
training; and the views the Training page draws from a job (role timeline, logs).

A job row is the only truth about a job: the page that started it may be gone; the worker
process (``python -m crew.worker``) reads and writes the same row.

Statuses: queued -> running -> [awaiting_approval -> running] -> succeeded | failed |
no_dataset | cancelled | stopped; stopped | failed | interrupted -> queued -> running (resume:
only the Model Trainer's training, from the newest checkpoint, and its evaluation run again).
``interrupted``: the job's process is gone (killed, the machine restarted) while its row said it
was working; every reader sees it so (core/store/liveness.py), and a parent that notices records
it (:func:`reap_orphans`).
"""
from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

from core.config.settings import Settings
from core.store.db import TERMINAL_STATUSES, Store
from core.store.liveness import INTERRUPTED, interrupted_message, is_orphaned, process_alive
from core.jobs.workspace import JobWorkspace
from core.datasets.datacards import write_json_atomic


class JobError(RuntimeError):
    pass


def new_job_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def check_request(request: str) -> str:
    """The request, stripped; JobError when it is empty or too long."""
    request = (request or "").strip()
    if not request:
        raise JobError("the request is empty: say what model to build, e.g. 'classify "
                       "pneumonia versus normal chest X-rays'")
    if len(request) > 4000:
        raise JobError("the request is longer than 4000 characters; shorten it")
    return request


def create_job(settings: Settings, store: Store, request: str, llm: str,
               auto_approve: bool = False, bound_dataset: str = "") -> str:
    """Queue a job for ``request``. ``bound_dataset``: the registered dataset the request named
    (its folder, core.planning.request_folder); the Task Manager then plans with it alone."""
    request = check_request(request)
    job_id = new_job_id()
    ws = JobWorkspace(settings.jobs_dir / job_id).ensure()
    store.insert_job({"id": job_id, "request": request, "llm": llm, "status": "queued",
                      "stage": "", "workspace": str(ws.root), "created_at": time.time(),
                      "auto_approve": int(auto_approve), "approval": "pending",
                      "stop_requested": 0, "error": "", "result": "",
                      "bound_dataset": bound_dataset or ""})
    store.audit("user", "create_job", job_id, f"llm={llm}"
                + (f", dataset named in the request: {bound_dataset}" if bound_dataset else ""))
    return job_id


def bound_dataset(job: dict | None) -> str:
    """The dataset a job's request named by its folder ('' when none): the Task Manager may
    plan with no other (the user may still change it at approval)."""
    return str((job or {}).get("bound_dataset") or "")


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


def worker_alive(pid: int, identity: str | None = None) -> bool:
    """Whether a job's worker process still runs (a zombie does not; with ``identity``, a pid
    now held by another process does not either)."""
    return process_alive(pid, identity)


def job_alive(job: dict) -> bool:
    """Whether the process recorded for the job still runs."""
    return bool(job.get("pid")) and process_alive(job["pid"], job.get("pid_start") or None)


def reap_orphans(store: Store) -> list[str]:
    """Record as ``interrupted`` (resumable) the jobs whose process is gone (killed, machine
    restarted), so no job stays 'running' in the store. Readers already see them so; this makes
    it last. Called by parents only (the app at start-up, the CLI following a job). Returns the
    ids it marked."""
    marked = []
    for job in store.jobs(limit=200, raw=True):
        if is_orphaned(job):
            store.update_job(job["id"], status=INTERRUPTED, finished_at=time.time(),
                             error=job.get("error") or interrupted_message(job))
            store.audit("system", "job_interrupted", job["id"],
                        f"pid {job['pid']} gone while {job['status']}")
            marked.append(job["id"])
    return marked


def is_finished(job: dict | None) -> bool:
    return bool(job) and job.get("status") in TERMINAL_STATUSES


# ------------------------------------------------------------------------------ dashboard views
RESUMABLE_STATUSES = {"stopped", "failed", INTERRUPTED}


def role_timeline(events: list[dict], roles: list[str], job: dict | None = None,
                  now: float | None = None) -> list[dict]:
    """One row per role from the job's events: when its stage first started and last ended, how
    many seconds it has run in all (a resumed stage runs more than once), its tool calls, LLM
    tokens, and its status (``waiting``, ``running``, ``succeeded``, ``failed``, or
    ``interrupted`` when the job ended while the stage was running)."""
    now = time.time() if now is None else now
    finished = is_finished(job)
    rows = []
    for role in roles:
        mine = [e for e in events if e.get("role") == role]
        stage = [e for e in mine if e.get("kind") == "stage"]
        starts = [e for e in stage if e.get("tool") == "start"]
        ends = [e for e in stage if e.get("tool") == "end"]
        row = {"role": role, "status": "waiting", "started": None, "ended": None,
               "seconds": 0.0, "runs": len(starts),
               "actions": sum(1 for e in mine if e.get("kind") == "tool"),
               "tokens": sum(int(e.get("tokens") or 0) for e in mine if e.get("kind") == "llm"),
               "fallback": any(e.get("kind") == "fallback" for e in mine)}
        if starts:
            row["started"] = starts[0]["ts"]
            row["seconds"] = float(sum(float(e.get("seconds") or 0.0) for e in ends))
            last_start = starts[-1]
            closed = [e for e in ends if e["id"] > last_start["id"]]
            if closed:
                row["ended"] = closed[-1]["ts"]
                row["status"] = "succeeded" if closed[-1].get("ok") else "failed"
            elif finished:
                row["status"] = "interrupted"
                if job.get("finished_at"):
                    row["ended"] = job["finished_at"]
                    row["seconds"] += max(0.0, job["finished_at"] - last_start["ts"])
            else:
                row["status"] = "running"
                row["seconds"] += max(0.0, now - last_start["ts"])
        rows.append(row)
    return rows


NO_TRAINING_YET = "training never started (there is no train_config.json)"
NO_CHECKPOINT = "no checkpoint was saved (training stopped before its first epoch ended)"


def checkpoint_problem(workspace: str | Path) -> str:
    """Why a job's training cannot continue from a checkpoint in its workspace ('' when it
    can: there is a complete one; incomplete newer ones are set aside when it resumes):
    ``NO_TRAINING_YET`` or ``NO_CHECKPOINT`` when there is none to continue from (the job
    then continues from the stage that did not finish), else what blocks resuming."""
    ws = JobWorkspace(Path(workspace))
    if not ws.train_config.is_file():
        return NO_TRAINING_YET
    try:
        config = json.loads(ws.train_config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"train_config.json cannot be read ({exc})"
    if config.get("engine") == "nnunet" or config.get("template") == "mvfa":
        engine = "nnU-Net" if config.get("engine") == "nnunet" else "MVFA"
        return f"the {engine} engine cannot resume; start the request again"
    complete, _incomplete = checkpoints(ws)
    return "" if complete else NO_CHECKPOINT


def checkpoints(ws: JobWorkspace) -> tuple[list[Path], list[Path]]:
    """(complete, incomplete) checkpoint folders, oldest first. A checkpoint is complete once
    its trainer_state.json is written (the last file the trainer writes); a kill while one is
    being written leaves it incomplete."""
    found = sorted((p for p in ws.checkpoints.glob("checkpoint-*") if p.is_dir()
                    and p.name.removeprefix("checkpoint-").isdigit()),
                   key=lambda p: int(p.name.removeprefix("checkpoint-")))
    complete = [p for p in found if (p / "trainer_state.json").is_file()]
    return complete, [p for p in found if p not in complete]


def set_aside_incomplete(ws: JobWorkspace) -> list[Path]:
    """Rename incomplete checkpoints to ``incomplete-checkpoint-N`` (kept, not deleted) so that
    resuming continues from the newest complete one; returns their new paths."""
    moved = []
    for path in checkpoints(ws)[1]:
        target = path.with_name(f"incomplete-{path.name}")
        n = 1
        while target.exists():
            n += 1
            target = path.with_name(f"incomplete-{n}-{path.name}")
        path.rename(target)
        moved.append(target)
    return moved


def resume_mode(job: dict | None) -> tuple[str, str]:
    """How a job resumes: ``("checkpoint", "")`` when its training continues from the newest
    checkpoint (the earlier stages' outputs must pass their gates again);
    ``("stage", why)`` when there is no checkpoint (the job was stopped, killed or failed
    before training saved one) and it continues from the first stage that did not finish,
    the finished ones checked again and kept; ``("", problem)`` when it cannot resume."""
    if not job:
        return "", "there is no such job"
    if job.get("status") not in RESUMABLE_STATUSES:
        return "", (f"only a stopped or failed job, or an interrupted one (its process was "
                    f"killed), can be resumed; this one is {job.get('status') or 'unknown'}")
    problem = checkpoint_problem(job.get("workspace") or "")
    if problem in (NO_TRAINING_YET, NO_CHECKPOINT):
        return "stage", problem
    return ("", problem) if problem else ("checkpoint", "")


def resume_problem(job: dict | None) -> str:
    """Why a job cannot be resumed ('' when it can): it must have stopped, failed or been
    interrupted, and a training it started must be one that resumes from a complete
    checkpoint (or have saved none yet)."""
    mode, why = resume_mode(job)
    return "" if mode else why


def prepare_resume(store: Store, job_id: str, actor: str = "user") -> dict:
    """Make a stopped, failed or interrupted job ready to go on, and queue it; the caller then
    starts the worker with ``core.jobs.launcher.launch_worker(..., resume=True)``
    (crew/resume.py). With a checkpoint, ``"resume": true`` is set in train_config.json and
    only the Model Trainer's training (from that checkpoint) and evaluation run again; without
    one the job continues from the first stage that did not finish. The stop flag and the
    error are cleared. Raises JobError, changing nothing, when the job cannot resume."""

    job = store.job(job_id)
    mode, why = resume_mode(job)
    if not mode:
        raise JobError(f"job {job_id} cannot resume: {why}")
    ws = JobWorkspace(Path(job["workspace"]))
    aside = set_aside_incomplete(ws)  # a kill while a checkpoint was written left it half done
    if mode == "checkpoint":
        config = json.loads(ws.train_config.read_text(encoding="utf-8"))
        write_json_atomic(ws.train_config, {**config, "resume": True})
    store.update_job(job_id, status="queued",
                     stage="Model Trainer" if mode == "checkpoint" else "",
                     stop_requested=0, error="", finished_at=None, pid=None,
                     pid_start="")  # the old process is gone
    store.audit(actor, "resume_job", job_id,
                f"from {job['status']}, " + ("from the newest checkpoint" if mode == "checkpoint"
                                             else "from the stage that did not finish")
                + "".join(f"; set aside the incomplete {p.name.removeprefix('incomplete-')}"
                          for p in aside))
    return store.job(job_id)


def tail_file(path: str | Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a text file, reading at most its last ``max_bytes`` bytes
    (a training log can grow to gigabytes); '' when the file does not exist."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read(max_bytes)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").splitlines()
    if size > max_bytes and text:
        text = text[1:]  # the first line was cut by the byte limit
    return "\n".join(text[-lines:]) if lines > 0 else ""


def job_logs(job: dict) -> dict[str, Path]:
    """The logs a job writes, by what they hold."""
    ws = JobWorkspace(Path(job["workspace"]))
    return {"Training log": ws.train_log, "Worker log": ws.worker_log}
