"""Run a template module as a child process: bounded in time, output kept in a log, no secrets
inherited, stopped through its stop file (core.training.run) and killed when it does not end;
when it ends, everything it started ends too (runtime.proctree: its whole process tree and any
orphan it left, double-forked daemons included)."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from core.config.launch import LAUNCHER
from core.config.secrets import child_env
from core.config.settings import REPO_ROOT
from core.jobs.lifecycle import tail_file
from runtime import landlock, proctree


TAIL_BYTES = 64 * 1024  # a child's log can grow to gigabytes: only its end is read


def tail(path: Path, lines: int = 25) -> str:
    text = tail_file(path, lines=TAIL_BYTES, max_bytes=TAIL_BYTES).splitlines()  # every line
    keep = [ln for ln in text if "nvImageCodec" not in ln and "warnings.warn" not in ln]
    return "\n".join(keep[-lines:])


THREAD_VARIABLE = "OMP_NUM_THREADS"
USER_THREAD_VARIABLES = (THREAD_VARIABLE, "MKL_NUM_THREADS")  # torch reads either


def template_pids() -> list[int]:
    """The template children (``core.config.launch ml_templates...``: trainings and dataloader
    checks of any job) running on this machine now."""
    pids = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if LAUNCHER in cmdline and any(str(arg).startswith("ml_templates.") for arg in cmdline):
            pids.append(proc.pid)
    return pids


def compute_threads(module: str = "", args: list[str] | None = None) -> dict:
    """The compute threads each process of a new template child gets: its share of the cores
    beside the template children already running (torchrun's ``--nproc_per_node`` processes
    count each), as ``{"OMP_NUM_THREADS": n}``; nothing when this process's environment sets
    it or MKL_NUM_THREADS (the user's choice, passed on as it is). Two 2-thread trainings on 2
    cores spin against each other: measured 89 s each, against 15 s each with one thread and
    22 s / 16 s for a 2-thread training beside a 1-thread one (alone: 11.5 s with 2 threads)."""
    if any(os.environ.get(name) for name in USER_THREAD_VARIABLES):
        return {}
    args = list(args or [])
    new = 1
    if module == "torch.distributed.run" and "--nproc_per_node" in args[:-1]:
        value = args[args.index("--nproc_per_node") + 1]
        new = int(value) if value.isdigit() and int(value) > 0 else 1
    share = (os.cpu_count() or 1) // (len(template_pids()) + new)
    return {THREAD_VARIABLE: str(max(1, share))}


def run_module(module: str, args: list[str], log_path: Path, timeout_s: float,
               should_stop: Callable[[], bool] | None = None, poll_s: float = 1.0,
               confine: dict | None = None, scratch: Path | None = None,
               on_tick: Callable[[], object] | None = None, grace_s: float = 60.0) -> dict:
    """Run ``python -m core.config.launch module args`` (the process set-up, then the module);
    returns rc, seconds, how it ended, and the log's tail. ``on_tick`` runs every ``poll_s``
    while the child runs (the parent tails the run channel there); once ``should_stop`` says so
    the child has ``grace_s`` to end on its own before it is killed.
    ``confine`` (tools.confinement.confinement_for) runs it under that Landlock policy, with HOME
    and TMPDIR in ``scratch`` (a folder it may write)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    extra: dict = compute_threads(module, args)
    preexec = None
    if sys.platform == "linux":
        landlock.prepare()  # libc loaded before the fork: the child only makes system calls
        # SIGTERM when the job dies, so a killed job never leaves an orphaned training behind
        preexec = functools.partial(landlock.die_with_parent, signal.SIGTERM)
    if confine is not None:
        preexec = landlock.preexec(confine, landlock.abi_version())
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
            extra.update({"HOME": str(scratch), "TMPDIR": str(scratch),
                          "MPLCONFIGDIR": str(scratch)})
    with open(log_path, "ab") as log:
        proc = proctree.spawn([sys.executable, "-m", LAUNCHER, module, *args],
                              cwd=str(REPO_ROOT), stdout=log, stderr=subprocess.STDOUT,
                              env=child_env(extra), start_new_session=True, preexec_fn=preexec)
        ended = "exited"
        while proc.poll() is None:
            if on_tick is not None:
                on_tick()
            if time.time() - started > timeout_s:
                ended = f"killed after the {timeout_s:.0f} s limit"
                break
            if should_stop and should_stop():
                ended = "stopped by the user"
                # the template sees its stop file and stops cleanly; give it time
                try:
                    proc.wait(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    break
            time.sleep(poll_s)
        # the whole tree (torchrun's workers, a daemon it forked) and orphans it left behind
        proctree.kill_tree(proc)
        if proc.poll() is None:
            proc.wait()
    return {"returncode": proc.returncode, "seconds": round(time.time() - started, 2),
            "ended": ended, "log": str(log_path), "log_tail": tail(log_path)}
