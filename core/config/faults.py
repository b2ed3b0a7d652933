"""Fault-injection point for the fault suite (tests/test_kill_stages.py, ``make faults``).

With ``M3B_FAULT_PAUSE_BEFORE=<tool name>`` in a job worker's environment, the worker stops
itself (SIGSTOP) just before its first call of that tool, after the stage has begun and the
earlier tools have run, so a test can ``kill -9`` the CLI, the worker and its children at a
known point of a stage that is otherwise over in well under a second. Unset (always, outside
the fault suite) it costs one environment lookup per tool call. The variable passes to the
worker only (core.config.secrets.WORKER_NAMES), never to the children it starts.
"""
from __future__ import annotations

import os
import signal

PAUSE_ENV = "M3B_FAULT_PAUSE_BEFORE"
_paused: set[str] = set()


def pause_point(tool: str) -> None:
    """Stop this process before the first call of ``tool`` when the fault suite asks for it."""
    if os.environ.get(PAUSE_ENV) == tool and tool not in _paused:
        _paused.add(tool)
        os.kill(os.getpid(), signal.SIGSTOP)  # a SIGCONT would go on as if nothing happened
