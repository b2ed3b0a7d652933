"""`streamlit run app.py` on a free loopback port with its own M3Builder home, for the browser
tests and the browser benches (one way to start and stop it)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class AppServerError(RuntimeError):
    """The app did not start: the message ends with its log's tail."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(home: Path, log: Path, env: dict | None = None,
              timeout_s: float = 120.0) -> tuple[subprocess.Popen, str]:
    """Start the app with ``M3B_HOME=home`` (plus ``env``; no LLM), wait for its health check;
    (process, url). Raises AppServerError when it exits or does not answer in time."""
    port = free_port()
    full_env = {**os.environ, "M3B_HOME": str(home), "STREAMLIT_BROWSER_GATHER_USAGE_STATS":
                "false", "CREWAI_DISABLE_TELEMETRY": "true", "OTEL_SDK_DISABLED": "true",
                **(env or {})}
    full_env.pop("M3B_LLM", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port",
             str(port), "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.2)
        if proc.poll() is not None:
            raise AppServerError("streamlit exited: " + log.read_text(errors="replace")[-2000:])
    proc.kill()
    raise AppServerError(f"streamlit did not answer within {timeout_s:.0f} s: "
                         + log.read_text(errors="replace")[-2000:])


def stop_app(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
