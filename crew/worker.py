"""A job's own process: ``python -m crew.worker JOB_ID --home DIR``. The app starts it detached
(``launch``), so a job outlives the page and the server that started it."""
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


def launch(settings: Settings, job_id: str) -> int:
    """Start the worker detached from the caller; returns its pid."""
    store = open_store(settings.store_path)
    log = open(settings.jobs_dir / job_id / "worker.log", "ab")
    env = child_env({"M3B_HOME": str(settings.home)})
    # the worker needs the LLM key when an LLM is configured: keep the caller's environment
    if (store.job(job_id) or {}).get("llm", "autopilot") != "autopilot":
        env = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, "-m", "crew.worker", job_id, "--home",
                             str(settings.home)], cwd=str(REPO_ROOT), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    store.update_job(job_id, pid=proc.pid)
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one M3Builder job")
    parser.add_argument("job_id")
    parser.add_argument("--home")
    args = parser.parse_args(argv)
    from crew.runner import run_job
    result = run_job(get_settings(args.home), args.job_id)
    print(json.dumps(result, indent=2))
    return 0 if result["status"] in ("succeeded", "no_dataset") else 1


if __name__ == "__main__":
    sys.exit(main())
