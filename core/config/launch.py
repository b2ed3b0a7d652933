"""``python -m core.config.launch MODULE [ARGS...]``: run MODULE as ``__main__`` after the
process set-up (core.config.bootstrap).

Every child that runs a training template or a dataloader check starts here, so the templates
themselves import nothing of core's configuration: they stay at the bottom of the house and
import only their common package, image I/O and the evaluators. ``torchrun`` starts each of its
processes through this module too (``-m core.config.launch MODULE``).

A child confined by the sandbox (runtime/hardening.py: seccomp refuses Unix sockets, chmod and
utime) gets two accommodations first (``accommodate_sandbox``): tensors cross process
boundaries by value (PyTorch's default passes file descriptors over a Unix socket, and its
"file_system" strategy talks to a shared-memory manager over one too, so DataLoader workers
would fail), and ``shutil.copy``/``copy2``/``copytree`` copy contents without modes and times
(libraries such as nnU-Net copy their plans with ``shutil.copy``).
"""
from __future__ import annotations

import errno
import runpy
import shutil
import socket
import sys

from core.config import bootstrap

LAUNCHER = "core.config.launch"  # this module, as ``python -m`` names it


def sandboxed() -> bool:
    """Whether this process runs under the sandbox's seccomp filter (Unix sockets refused)."""
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def _tolerant(copy):
    def call(src, dst, *, follow_symlinks=True):
        try:
            copy(src, dst, follow_symlinks=follow_symlinks)
        except PermissionError as exc:
            if exc.errno != errno.EPERM:  # EPERM: the sandbox refused chmod/utime
                raise
    call.__doc__ = copy.__doc__
    return call


def accommodate_sandbox() -> None:
    """Let a confined child's libraries work without Unix sockets, chmod and utime."""
    shutil.copymode = _tolerant(shutil.copymode)
    shutil.copystat = _tolerant(shutil.copystat)
    try:
        import torch.multiprocessing  # noqa: F401  (registers torch's fd-passing reducers)
    except ImportError:
        return
    from multiprocessing.reduction import ForkingPickler
    for cls in [c for c in ForkingPickler._extra_reducers
                if (getattr(c, "__module__", "") or "").startswith("torch")]:
        del ForkingPickler._extra_reducers[cls]  # pickled by value through the pipe instead


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: python -m core.config.launch MODULE [ARGS...]")
    bootstrap.apply()
    if sandboxed():
        accommodate_sandbox()
    module, sys.argv = argv[0], [argv[0], *argv[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
