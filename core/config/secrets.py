"""Secrets in the environment (API keys, tokens, passwords): which variables hold them, and
taking their values out of any text that leaves the process (prompts, logs, tool results)."""
from __future__ import annotations

import os
import re

from core.config.settings import REPO_ROOT

SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH)", re.IGNORECASE)
MIN_SECRET_CHARS = 8  # shorter values ("1", "true") are settings, not secrets
REMOVED = "[secret removed]"


def secret_values(environ: dict | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so a key containing another is
    replaced whole)."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if SECRET_ENV.search(k)
                   and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> tuple[str, int]:
    """``text`` with every secret value replaced; and how many were replaced."""
    hits = 0
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            hits += text.count(value)
            text = text.replace(value, REMOVED)
    return text, hits


def child_env(extra: dict | None = None) -> dict:
    """The environment of every child process (job worker, training, checks, scripts): the
    parent's without secret-looking variables, the repository on PYTHONPATH, unbuffered
    output, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env
