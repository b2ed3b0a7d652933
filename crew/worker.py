"""A job's own process: ``python -m crew.worker JOB_ID --home DIR [--resume]``. The app starts it
detached (``core.jobs.launcher.launch_worker``), so a job outlives the page, the server or the
terminal that started it. ``--resume``
runs only the Model Trainer's training again, from the newest checkpoint (crew/resume.py), for
a job ``core.jobs.lifecycle.prepare_resume`` queued."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one M3Builder job")
    parser.add_argument("job_id")
    parser.add_argument("--home")
    parser.add_argument("--resume", action="store_true",
                        help="train again from the newest checkpoint "
                             "(core.jobs.lifecycle.prepare_resume)")
    args = parser.parse_args(argv)
    if args.resume:
        from crew.resume import resume_job as run_job
    else:
        from crew.runner import run_job
    result = run_job(get_settings(args.home), args.job_id)
    print(json.dumps(result, indent=2))
    return 0 if result["status"] in ("succeeded", "no_dataset") else 1


if __name__ == "__main__":
    sys.stdout, sys.stderr = ScrubbedStream(sys.stdout), ScrubbedStream(sys.stderr)
    sys.exit(main())
