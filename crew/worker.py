"""A job's own process: ``python -m crew.worker JOB_ID --home DIR [--resume]``. The app starts it
detached (``launch``), so a job outlives the page and the server that started it. ``--resume``
runs only the Model Trainer's training again, from the newest checkpoint (crew/resume.py), for
a job ``core.jobs.prepare_resume`` queued."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import core  # noqa: F401
from core.settings import REPO_ROOT, Settings, get_settings
from core.store import open_store
from tools.process import child_env


def launch(settings: Settings, job_id: str, resume: bool = False) -> int:
    """Start the worker detached from the caller; returns its pid."""
    store = open_store(settings.store_path)
    log = open(settings.jobs_dir / job_id / "worker.log", "ab")
    env = child_env({"M3B_HOME": str(settings.home)})
    # the worker needs the LLM key when an LLM is configured: keep the caller's environment
    if (store.job(job_id) or {}).get("llm", "autopilot") != "autopilot":
        env = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, "-m", "crew.worker", job_id, "--home",
                             str(settings.home), *(["--resume"] if resume else [])],
                            cwd=str(REPO_ROOT), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    store.update_job(job_id, pid=proc.pid)
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one M3Builder job")
    parser.add_argument("job_id")
    parser.add_argument("--home")
    parser.add_argument("--resume", action="store_true",
                        help="train again from the newest checkpoint (core.jobs.prepare_resume)")
    args = parser.parse_args(argv)
    if args.resume:
        from crew.resume import resume_job as run_job
    else:
        from crew.runner import run_job
    result = run_job(get_settings(args.home), args.job_id)
    print(json.dumps(result, indent=2))
    return 0 if result["status"] in ("succeeded", "no_dataset") else 1


if __name__ == "__main__":
    sys.exit(main())
