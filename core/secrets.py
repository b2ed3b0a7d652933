"""Secrets in the environment (API keys, tokens, passwords): which variables hold them, and
taking their values out of any text that leaves the process (prompts, logs, tool results)."""
from __future__ import annotations

import os
import re

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
