"""How often a page showing a job redraws itself on a timer, if at all.

An idle app must stay idle: a finished job (succeeded, failed, stopped, interrupted, cancelled,
no dataset) never changes again, so nothing re-runs on a timer for it. A job waiting for the
user's approval only changes when someone acts (on the Build a model page, which reruns the
app), so its page looks again only now and then; a queued or running job is followed closely.
"""
from __future__ import annotations

from core.store.db import TERMINAL_STATUSES

LIVE_S = 2.0          # queued or running: curves, progress and the timeline move
WAITING_S = 15.0      # awaiting approval: changes only when a user approves or cancels
PLANNING_S = 0.5      # the chat before its plan: the plan shows within a second of being made
PLANNER = "Task Manager"


def refresh_every(job: dict | None) -> float | None:
    """Seconds between timed redraws of a job's view; None: do not redraw on a timer."""
    if not job or job.get("status") in TERMINAL_STATUSES:
        return None
    if job.get("status") == "awaiting_approval":
        return WAITING_S
    return LIVE_S


def jobs_refresh_every(jobs: list[dict]) -> float | None:
    """Timed redraws of a jobs list: at the pace of its liveliest job; None when all are
    finished."""
    paces = [p for p in (refresh_every(j) for j in jobs) if p is not None]
    return min(paces) * 2.5 if paces else None


def chat_refresh_every(job: dict | None) -> float | None:
    """The chat's pace for a job: quick until its plan is shown (queued, or the Task Manager
    planning), then as any job view (``refresh_every``)."""
    if job and (job.get("status") == "queued" or (
            job.get("status") == "running" and (job.get("stage") or PLANNER) == PLANNER)):
        return PLANNING_S
    return refresh_every(job)
