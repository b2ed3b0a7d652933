"""The warm standby worker (core/jobs/standby.py): the app keeps one worker warmed up (crew,
tools and torch imported) and hands it the next autopilot job, so a plan is shown seconds
sooner; the timing itself is measured by bench/ui_timings.py, not here."""
from __future__ import annotations

import io
import time
from pathlib import Path

import psutil
import pytest

from core.jobs import launcher, standby
from core.jobs.lifecycle import create_job, set_approval
from core.jobs.workspace import JobWorkspace

REQUEST = "classify pneumonia versus normal chest X-rays"


def wait_until(condition, what: str, timeout: float = 120.0):
    deadline = time.time() + timeout
    while not (value := condition()):
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@pytest.fixture
def warm(monkeypatch, settings):
    monkeypatch.setenv(standby.WARM_ENV, "1")
    monkeypatch.setattr(standby, "REPLACE_AFTER_S", 0.2)
    yield settings
    standby.stop_standby()
    for proc in standby._HANDED:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def ready(settings) -> bool:
    log = Path(settings.home) / "standby.log"
    return log.exists() and log.read_text().count("standby worker ready") >= 1


def test_off_by_setting(monkeypatch, settings):
    monkeypatch.setenv(standby.WARM_ENV, "0")
    assert standby.ensure_standby(settings) is None
    assert standby.hand_over(settings, "any") is None


@pytest.mark.slow
def test_a_job_is_handed_to_the_waiting_worker(warm, store, registered_demo):
    settings = warm
    pid = standby.ensure_standby(settings)
    assert standby.ensure_standby(settings) == pid  # one per home, not one per page run
    wait_until(lambda: ready(settings), "the standby to warm up")
    assert psutil.Process(pid).status() in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP)

    job_id = create_job(settings, store, REQUEST, llm="autopilot")
    assert launcher.launch_worker(settings, store, job_id) == pid  # no cold start
    wait_until(lambda: store.job(job_id)["status"] == "awaiting_approval", "the plan")
    assert store.job(job_id)["pid"] == pid and store.job(job_id)["stage"] == "Task Manager"
    set_approval(store, job_id, "cancelled")
    wait_until(lambda: store.job(job_id)["status"] == "cancelled", "the cancellation")
    assert standby._HANDED[-1].wait(timeout=60) == 1  # the worker ends with the job
    log = JobWorkspace(settings.jobs_dir / job_id).worker_log.read_text()
    assert '"status": "cancelled"' in log  # the job's output went to its own log

    # the next standby starts a moment later, and it is a new process
    wait_until(lambda: standby._STANDBY.get(str(settings.home)), "a replacement standby")
    replacement = standby._STANDBY[str(settings.home)]
    assert replacement.pid != pid
    wait_until(lambda: (Path(settings.home) / "standby.log").read_text().count("ready") == 2,
               "the replacement to warm up")
    standby.stop_standby(settings)  # end of file on its stdin: it exits cleanly, no job run
    assert replacement.returncode == 0 and not psutil.pid_exists(replacement.pid)


def test_an_llm_job_starts_cold_and_leaves_the_standby_waiting(warm, store, monkeypatch):
    settings = warm
    started = []

    class Fake:
        pid = 4242

        def __init__(self, argv, **kwargs):
            started.append(argv)

    class Waiting:
        stdin = io.BytesIO()

        def wait(self, timeout=None):
            return 0

    waiting = Waiting()
    monkeypatch.setitem(standby._STANDBY, str(settings.home), waiting)
    monkeypatch.setattr(launcher.subprocess, "Popen", Fake)
    job_id = create_job(settings, store, REQUEST, llm="openai/gpt-4o")
    assert launcher.launch_worker(settings, store, job_id) == 4242
    assert started and started[0][-3:] == [job_id, "--home", str(settings.home)]
    assert standby._STANDBY[str(settings.home)] is waiting


def test_a_dead_standby_is_not_handed_a_job(warm, store, monkeypatch):
    settings = warm

    class Dead:
        pid = 1

        def poll(self):
            return -9

    monkeypatch.setitem(standby._STANDBY, str(settings.home), Dead())
    assert standby.hand_over(settings, "some-job") is None
    assert str(settings.home) not in standby._STANDBY


def test_a_standby_that_keeps_dying_is_not_restarted_on_every_page_run(warm, monkeypatch):
    settings = warm
    spawned = []

    class Dies:
        pid = 7

        def poll(self):
            return 1

    def spawn(_settings):
        spawned.append(1)
        return Dies()

    monkeypatch.setattr(standby, "_spawn", spawn)
    assert standby.ensure_standby(settings) == 7 and len(spawned) == 1
    assert standby.ensure_standby(settings) is None and len(spawned) == 1  # died: wait
    monkeypatch.setitem(standby._SPAWNED, str(settings.home), 0.0)  # a minute later
    assert standby.ensure_standby(settings) == 7 and len(spawned) == 2
    monkeypatch.delitem(standby._STANDBY, str(settings.home))
