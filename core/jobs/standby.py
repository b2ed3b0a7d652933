"""A warm job worker: ``python -m crew.worker --standby --home DIR`` started ahead of time by the
app, with the crew, the tools and torch already imported (the cold imports take most of the
seconds between a chat request and its plan), blocked on its stdin until it is handed a job.

The app (the parent) holds the standby's stdin. Handing a job over writes one JSON line
(``{"job_id": ..., "resume": false}``) and closes the pipe; the worker then redirects its
output to the job's worker.log and runs the job exactly as a cold ``python -m crew.worker JOB``
would, in its own session, so it outlives the page. A standby whose parent dies reads end of
file and exits; an idle one uses no CPU (it sleeps in ``read``).

Only autopilot jobs take the standby: an LLM job's worker also gets the LLM key variable
(core.config.secrets.worker_env), so it starts cold, and the LLM's own latency dominates there.
``M3B_WARM_WORKER=0`` turns the standby off (the test suite does, except where it tests it).

May import: core.config, core.jobs.workspace.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from core.config.secrets import worker_env
from core.config.settings import AUTOPILOT, REPO_ROOT, Settings

WARM_ENV = "M3B_WARM_WORKER"
REPLACE_AFTER_S = 15.0  # the next standby warms up once the job just handed over has planned
_LOCK = threading.Lock()
_STANDBY: dict[str, subprocess.Popen] = {}  # by home folder, in this (the app's) process
_HANDED: list[subprocess.Popen] = []        # handed-over workers, reaped once they end
_SPAWNED: dict[str, float] = {}             # when this home's last standby was started
RESPAWN_AFTER_S = 60.0  # a standby that died waiting is not restarted on every page run


def enabled() -> bool:
    return os.environ.get(WARM_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _spawn(settings: Settings) -> subprocess.Popen:
    log = settings.home / "standby.log"
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "crew.worker", "--standby", "--home", str(settings.home)],
            cwd=str(REPO_ROOT), stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            env=worker_env({"M3B_HOME": str(settings.home)}, llm=AUTOPILOT),
            start_new_session=True)


def _reap() -> None:
    _HANDED[:] = [p for p in _HANDED if p.poll() is None]


def ensure_standby(settings: Settings) -> int | None:
    """Start a standby worker for this home unless one is waiting; its pid (None when off)."""
    if not enabled():
        return None
    key = str(settings.home)
    with _LOCK:
        _reap()
        proc = _STANDBY.get(key)
        if proc is not None and proc.poll() is None:
            return proc.pid
        if proc is not None and time.time() - _SPAWNED.get(key, 0.0) < RESPAWN_AFTER_S:
            return None  # it died soon after starting (see <home>/standby.log): cold starts
        proc = _STANDBY[key] = _spawn(settings)
        _SPAWNED[key] = time.time()
        return proc.pid


def hand_over(settings: Settings, job_id: str, resume: bool = False) -> int | None:
    """Give the job to this home's waiting standby worker; its pid, or None when there is none
    (the caller starts a cold worker). The next standby starts a little later, so its imports
    do not compete with the job's planning for the cores."""
    if not enabled():
        return None
    key = str(settings.home)
    with _LOCK:
        proc = _STANDBY.pop(key, None)
        if proc is None or proc.poll() is not None:
            return None
        try:
            proc.stdin.write((json.dumps({"job_id": job_id, "resume": resume}) + "\n").encode())
            proc.stdin.close()
        except OSError:  # it died between the poll and the write
            return None
        _HANDED.append(proc)
    timer = threading.Timer(REPLACE_AFTER_S, ensure_standby, args=(settings,))
    timer.daemon = True
    timer.start()
    return proc.pid


def stop_standby(settings: Settings | None = None) -> None:
    """End the waiting standby worker(s) (closing stdin makes them exit)."""
    with _LOCK:
        keys = [str(settings.home)] if settings else list(_STANDBY)
        for key in keys:
            proc = _STANDBY.pop(key, None)
            if proc is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
                try:
                    proc.wait(timeout=30)  # it reads its stdin once warmed up
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def read_assignment(stream) -> dict | None:
    """The standby's side: the job it is handed, or None at end of file (the app is gone)."""
    line = stream.readline()
    if not line.strip():
        return None
    assignment = json.loads(line)
    return {"job_id": str(assignment["job_id"]), "resume": bool(assignment.get("resume"))}


def redirect_output(log: Path) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at the job's log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
