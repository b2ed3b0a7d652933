"""A child for tests/test_process_tree.py, run as ``python -m core.config.launch
tests.daemon_child HEARTBEAT [--stay]``: it double-forks a ``setsid`` daemon that appends to
HEARTBEAT every 50 ms (stdio on /dev/null, outside the child's process group and session),
prints ``DAEMON <pid>``, and ends (``--stay``: keeps running)."""
from __future__ import annotations

import os
import sys
import time


def daemonize(heartbeat: str) -> int:
    """Start the daemon; return its pid."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        os.setsid()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            while True:
                with open(heartbeat, "a") as fh:
                    fh.write("beat\n")
                time.sleep(0.05)
        os.write(write_end, str(pid).encode())
        os._exit(0)
    os.close(write_end)
    pid = int(os.read(read_end, 32))
    os.close(read_end)
    return pid


if __name__ == "__main__":
    print(f"DAEMON {daemonize(sys.argv[1])}", flush=True)
    time.sleep(0.3)  # it beats while its parent still runs
    if "--stay" in sys.argv[2:]:
        time.sleep(600)
