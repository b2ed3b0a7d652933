"""Nothing a script or a template child starts outlives it (issue 14, escape 5): a double-forked
``setsid`` daemon, out of the child's process group and session, is killed when a foreground
script returns, when a background script is stopped or ends, and when a template child
(``runtime.process.run_module``) ends — confined or not. Not even a zombie is left, and the
tree kill takes no exit status a Popen waits for."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.config.settings import REPO_ROOT
from runtime import landlock, proctree
from runtime.process import run_module
from test_sandbox_tools import make_dataset, make_job
from tools import scripts
from tools.confinement import template_policy
from tools.files import FILE_TOOLS
from tools.sandbox import Jail

DAEMON_CODE = (Path(__file__).parent / "daemon_child.py").read_text()
needs_landlock = pytest.mark.skipif(landlock.abi_version() == 0, reason="no Landlock here")


def daemon_pid(output: str) -> int:
    line = next(ln for ln in output.splitlines() if ln.startswith("DAEMON "))
    return int(line.split()[1])


def alive(pid: int) -> bool:
    """Whether the pid names any process, zombies included."""
    return os.path.exists(f"/proc/{pid}")


def beats(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def assert_dead(pid: int, heartbeat: Path, timeout: float = 5.0) -> None:
    deadline = time.time() + timeout
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(pid), f"the daemon {pid} outlived its tree: {Path(f'/proc/{pid}/stat')}"
    seen = beats(heartbeat)
    time.sleep(0.4)  # it beat every 50 ms while alive
    assert beats(heartbeat) == seen, "the heartbeat went on"


def wait_for_beats(heartbeat: Path, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while beats(heartbeat) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert beats(heartbeat) >= 2, "the daemon never beat"


@pytest.fixture
def job(settings, store, tmp_path):
    ctx = make_job(settings, store, make_dataset(tmp_path / "tiny_dataset"))
    tools = {name: cls(ctx=ctx, role="Data Engineer") for name, cls in FILE_TOOLS.items()}
    assert tools["write_files"].call(path="scripts/daemon.py", content=DAEMON_CODE)["ok"]
    (ctx.workspace.root / ".tmp").mkdir(exist_ok=True)
    yield ctx, tools
    scripts.stop_background(ctx.job_id)


@needs_landlock
def test_foreground_script_daemon_dies_with_the_script(job):
    ctx, _ = job
    heartbeat = ctx.workspace.root / ".tmp" / "heartbeat"
    result = scripts.run_script(Jail(ctx), ctx.job_id, "scripts/daemon.py", [str(heartbeat)])
    assert result["returncode"] == 0, result["output"]
    pid = daemon_pid(result["output"])
    assert beats(heartbeat) >= 2  # it ran, confined, and wrote into the workspace
    assert_dead(pid, heartbeat, timeout=0)  # gone when run_script returned


@needs_landlock
def test_background_script_daemon_dies_with_stop_background(job):
    ctx, tools = job
    heartbeat = ctx.workspace.root / ".tmp" / "heartbeat"
    start = scripts.run_script(Jail(ctx), ctx.job_id, "scripts/daemon.py",
                               [str(heartbeat), "--stay"], background=True)
    wait_for_beats(heartbeat)
    status = scripts.script_status(ctx.job_id, start["handle"])
    assert status["status"] == "running"
    pid = daemon_pid(status["output"])
    assert scripts.stop_background(ctx.job_id) == 1
    assert_dead(pid, heartbeat, timeout=0)


@needs_landlock
def test_background_script_daemon_dies_when_the_script_ends(job):
    ctx, _ = job
    heartbeat = ctx.workspace.root / ".tmp" / "heartbeat"
    start = scripts.run_script(Jail(ctx), ctx.job_id, "scripts/daemon.py", [str(heartbeat)],
                               background=True)
    deadline = time.time() + 30
    status = scripts.script_status(ctx.job_id, start["handle"])
    while status["status"] == "running" and time.time() < deadline:
        time.sleep(0.1)
        status = scripts.script_status(ctx.job_id, start["handle"])
    assert status["status"] == "finished" and status["returncode"] == 0, status
    assert_dead(daemon_pid(status["output"]), heartbeat)  # the watchdog's tree kill


@pytest.mark.parametrize("confined", [False, pytest.param(True, marks=needs_landlock)])
def test_run_module_kills_the_daemon_of_a_template_child(job, tmp_path, confined):
    ctx, _ = job
    heartbeat = ctx.workspace.root / ".tmp" / "heartbeat"
    policy = template_policy(Jail(ctx), extra_read=(REPO_ROOT / "tests",)) if confined else None
    log = tmp_path / "child.log"
    run = run_module("tests.daemon_child", [str(heartbeat)], log, timeout_s=120,
                     confine=policy, scratch=ctx.workspace.root / ".tmp", poll_s=0.1)
    assert run["returncode"] == 0 and run["ended"] == "exited", run
    pid = daemon_pid(log.read_text())
    assert beats(heartbeat) >= 2
    assert_dead(pid, heartbeat, timeout=0)


def test_run_module_stopped_child_takes_its_daemon_along(job, tmp_path):
    ctx, _ = job
    heartbeat = ctx.workspace.root / ".tmp" / "heartbeat"
    log = tmp_path / "child.log"
    run = run_module("tests.daemon_child", [str(heartbeat), "--stay"], log, timeout_s=120,
                     should_stop=lambda: beats(heartbeat) >= 2, poll_s=0.1, grace_s=0.5)
    assert run["ended"] == "stopped by the user" and run["returncode"] == -9, run
    assert_dead(daemon_pid(log.read_text()), heartbeat, timeout=0)


# -- the kill routine on plain Popen trees ----------------------------------------------------
def start_daemon(heartbeat: Path) -> tuple[subprocess.Popen, int]:
    proc = proctree.spawn([sys.executable, "-c", DAEMON_CODE, str(heartbeat)],
                          stdout=subprocess.PIPE, start_new_session=True)
    pid = daemon_pid(proc.stdout.readline().decode())
    proc.wait(timeout=30)
    return proc, pid


def test_tree_kill_steals_no_exit_status(tmp_path):
    heartbeat = tmp_path / "heartbeat"
    code = "import sys, time; time.sleep(float(sys.argv[1])); sys.exit(int(sys.argv[2]))"
    ended = proctree.spawn([sys.executable, "-c", code, "0", "7"])            # a zombie by now
    running = proctree.spawn([sys.executable, "-c", code, "1.5", "3"])
    worker_done = subprocess.Popen([sys.executable, "-c", code, "0", "5"])    # not spawned:
    worker = subprocess.Popen([sys.executable, "-c", code, "1.5", "4"])       # the app's own
    proc, pid = start_daemon(heartbeat)
    wait_for_beats(heartbeat)
    assert os.path.exists(f"/proc/{pid}") and proctree.marked(pid)
    assert not proctree.marked(worker.pid)
    time.sleep(0.3)  # 'ended' and 'worker_done' are zombies, only their Popens may reap them
    assert proctree.kill_tree(proc) >= 1
    assert_dead(pid, heartbeat, timeout=0)
    assert proc.returncode == 0
    assert ended.wait(timeout=30) == 7 and running.wait(timeout=30) == 3
    assert worker_done.wait(timeout=30) == 5 and worker.wait(timeout=30) == 4  # never killed
    for p in (ended, running):
        proctree.kill_tree(p)
    assert not {ended.pid, running.pid, proc.pid} & proctree.tracked_pids()


def test_sweep_reaps_an_orphan_that_ended_on_its_own(tmp_path):
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(0.2)\n        os._exit(0)\n    os._exit(0)\n")
    proc = proctree.spawn([sys.executable, "-c", code], start_new_session=True)
    assert proc.wait(timeout=30) == 0
    deadline = time.time() + 10
    orphans: list[int] = []
    while time.time() < deadline:  # the middle one and the daemon, both zombies of ours
        orphans = proctree.adopted_orphans()
        states = [open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] for p in orphans
                  if alive(p)]
        if len(orphans) >= 2 and set(states) == {"Z"}:
            break
        time.sleep(0.05)
    assert len(orphans) >= 2, "the orphans were not re-parented to this process"
    proctree.kill_tree(proc)
    assert not any(alive(p) for p in orphans)
    assert proctree.adopted_orphans() == []
