"""Run a template module as a child process: bounded in time, output kept in a log, no secrets
inherited, stoppable through the job's stop flag."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from core.secrets import SECRET_ENV
from core.settings import REPO_ROOT


def child_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def _die_with_parent() -> None:
    """In the child, before exec: on Linux ask for SIGTERM when the parent (the job) dies, so a
    killed job never leaves an orphaned training process behind."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    keep = [ln for ln in text if "nvImageCodec" not in ln and "warnings.warn" not in ln]
    return "\n".join(keep[-lines:])


def run_module(module: str, args: list[str], log_path: Path, timeout_s: float,
               should_stop: Callable[[], bool] | None = None, poll_s: float = 1.0,
               confine: dict | None = None, scratch: Path | None = None) -> dict:
    """Run ``python -m module args``; returns rc, seconds, how it ended, and the log's tail.
    ``confine`` (tools.scripts.confinement_for) runs it under that Landlock policy, with HOME
    and TMPDIR in ``scratch`` (a folder it may write)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    extra: dict = {}
    preexec = _die_with_parent if sys.platform == "linux" else None
    if confine is not None:
        from tools import landlock
        from tools.scripts import _preexec
        landlock.prepare()  # libc loaded before the fork
        preexec = _preexec(confine, landlock.abi_version())
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
            extra = {"HOME": str(scratch), "TMPDIR": str(scratch),
                     "MPLCONFIGDIR": str(scratch)}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=str(REPO_ROOT),
                                stdout=log, stderr=subprocess.STDOUT, env=child_env(extra),
                                start_new_session=True, preexec_fn=preexec)
        ended = "exited"
        while proc.poll() is None:
            if time.time() - started > timeout_s:
                ended = f"killed after the {timeout_s:.0f} s limit"
                break
            if should_stop and should_stop():
                ended = "stopped by the user"
                # the template's callback sees the flag and stops cleanly; give it time
                try:
                    proc.wait(timeout=60)
                    break
                except subprocess.TimeoutExpired:
                    break
            time.sleep(poll_s)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {"returncode": proc.returncode, "seconds": round(time.time() - started, 2),
            "ended": ended, "log": str(log_path), "log_tail": tail(log_path)}
