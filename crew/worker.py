"""A job's own process: ``python -m crew.worker JOB_ID --home DIR [--resume]``. The app starts it
detached (``core.jobs.launcher.launch_worker``), so a job outlives the page, the server or the
terminal that started it. ``--resume`` goes on with a job ``core.jobs.lifecycle.prepare_resume``
queued: training from its newest checkpoint, else from the stage that did not finish
(crew/resume.py). ``--standby`` starts a warm worker that
waits for the app to hand it a job (core/jobs/standby.py)."""
from __future__ import annotations

import argparse
import json
import sys

from core.config.secrets import scrub_text
from core.config.settings import get_settings


class ScrubbedStream:
    """The worker's stdout or stderr (its log file) with every secret value taken out of what is
    written: tracebacks and library warnings may quote a key or a URL's credentials."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(scrub_text(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def warm_up() -> None:
    """Import what a job needs before it is handed over (core/jobs/standby.py)."""
    import torch  # noqa: F401  (planning asks for the device)

    import crew.resume  # noqa: F401
    import crew.runner  # noqa: F401
    import tools.registry  # noqa: F401


def run(job_id: str, home: str | None, resume: bool) -> int:
    if resume:
        from crew.resume import resume_job as run_job
    else:
        from crew.runner import run_job
    result = run_job(get_settings(home), job_id)
    print(json.dumps(result, indent=2))
    return 0 if result["status"] in ("succeeded", "no_dataset") else 1


def standby(home: str | None) -> int:
    """Wait, warmed up, for the app to hand over a job on stdin; run it; exit. End of file
    (the app is gone or stopped the standby) exits without a job."""
    from core.jobs.standby import read_assignment, redirect_output
    from core.jobs.workspace import JobWorkspace
    warm_up()
    print("standby worker ready", flush=True)  # <home>/standby.log
    assignment = read_assignment(sys.stdin)
    if assignment is None:
        return 0
    settings = get_settings(home)  # read now: the settings may have changed while waiting
    redirect_output(JobWorkspace(settings.jobs_dir / assignment["job_id"]).worker_log)
    return run(assignment["job_id"], home, assignment["resume"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one M3Builder job")
    parser.add_argument("job_id", nargs="?")
    parser.add_argument("--home")
    parser.add_argument("--resume", action="store_true",
                        help="go on with a job prepare_resume queued: training from its newest "
                             "checkpoint, else from the stage that did not finish")
    parser.add_argument("--standby", action="store_true",
                        help="warm up, then wait for a job id on stdin (core/jobs/standby.py)")
    args = parser.parse_args(argv)
    if args.standby:
        return standby(args.home)
    if not args.job_id:
        parser.error("a job id is required (or --standby)")
    return run(args.job_id, args.home, args.resume)


if __name__ == "__main__":
    sys.stdout, sys.stderr = ScrubbedStream(sys.stdout), ScrubbedStream(sys.stderr)
    sys.exit(main())
