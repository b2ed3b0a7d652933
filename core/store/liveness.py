"""Whether the process that runs a job still exists, and the status every reader shows for it.

A job row records the pid of its worker and that process's identity (``pid_start``: the boot id
and the process's start time in clock ticks, field 22 of ``/proc/<pid>/stat``), so a pid the
kernel has since given to another process is not mistaken for the worker. A job whose row says
it is queued, running or awaiting approval but whose process is gone was killed (``kill -9``,
out of memory, a reboot): every reader sees it as ``interrupted``, which can be resumed.
:func:`effective_status` is the one place that decides; the store's ``job()`` and ``jobs()``
apply it, so the CLI, the pages and the app's start-up all agree. Reading never writes: a
parent process that notices (the app at start-up, the CLI following its job) may persist it
with ``core.jobs.lifecycle.reap_orphans``.
"""
from __future__ import annotations

import os
from pathlib import Path

# statuses whose row claims a process is working on the job
LIVE_STATUSES = {"queued", "running", "awaiting_approval"}
INTERRUPTED = "interrupted"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (the command name, field 2, may hold spaces and ')')."""
    try:
        raw = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def process_identity(pid: int | None) -> str | None:
    """``"<boot id>:<start ticks>"`` of a living process; None when it is gone or a zombie."""
    if not pid or int(pid) <= 0:
        return None
    fields = _stat_fields(pid)
    if fields is not None:
        if not fields or fields[0] in ("Z", "X"):  # a zombie or a dead process is not running
            return None
        return f"{_boot_id()}:{fields[19]}"  # fields[0] is field 3, so field 22 is fields[19]
    if Path("/proc/self/stat").exists():
        return None  # /proc works and this pid has no entry: gone
    try:  # no /proc (not Linux): psutil's creation time stands in for the start ticks
        import psutil
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"psutil:{proc.create_time():.2f}"
    except Exception:  # noqa: BLE001 - psutil missing, no such process, access denied
        return None


def process_alive(pid: int | None, identity: str | None = None) -> bool:
    """Whether ``pid`` runs and, when ``identity`` was recorded, is still the same process."""
    now = process_identity(pid)
    if now is None:
        return False
    return not identity or identity == now


def is_orphaned(job: dict) -> bool:
    """True when the row claims a process works on the job but that process is gone."""
    if job.get("status") not in LIVE_STATUSES or not job.get("pid"):
        return False
    return not process_alive(job["pid"], job.get("pid_start") or None)


def interrupted_message(job: dict) -> str:
    return (f"the job's process (pid {job.get('pid')}) ended while the job was "
            f"{job.get('status')} (killed or the machine restarted); resume it with "
            f"`python -m crew resume {job.get('id')}` or the Training page's Resume")


def effective_status(job: dict | None) -> dict | None:
    """The job as readers should see it: ``interrupted`` (with the recorded status kept as
    ``recorded_status`` and an error saying what happened) when its process is gone."""
    if not job or not is_orphaned(job):
        return job
    return {**job, "status": INTERRUPTED, "recorded_status": job["status"],
            "error": job.get("error") or interrupted_message(job)}


def current_identity() -> str | None:
    return process_identity(os.getpid())
