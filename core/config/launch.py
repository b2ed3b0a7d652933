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
would fail), and a refused ``os.chmod``/``os.utime`` (EPERM) is skipped instead of raised, so
copies keep their contents without modes and times (nnU-Net copies its plans with
``shutil.copy`` and its labels with distutils' ``copy_file``, which set both). The kernel still
refuses every change; only Python's error is left out. And threadpoolctl (nnU-Net's data
augmenter uses it) finds the loaded libraries without reading ``/proc/self/maps``, which no
confined child may read. ``M3B_CONFINED=1`` tells a template it is confined (nnU-Net then
predicts in its own process: its multi-process prediction needs a Unix socket).
"""
from __future__ import annotations

import errno
import functools
import os
import runpy
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


def _skip_refusal(call):
    @functools.wraps(call)
    def tolerant(*args, **kwargs):
        try:
            return call(*args, **kwargs)
        except PermissionError as exc:
            if exc.errno != errno.EPERM:  # EPERM: the sandbox's filter refused it
                raise
            return None
    return tolerant


def accommodate_sandbox() -> None:
    """Let a confined child's libraries work without Unix sockets, chmod and utime; set
    ``M3B_CONFINED=1`` (for the templates, and inherited by their processes)."""
    os.environ["M3B_CONFINED"] = "1"
    for name in ("chmod", "utime"):
        setattr(os, name, _skip_refusal(getattr(os, name)))
    try:
        import threadpoolctl
        threadpoolctl._HAS_PROCFS = False  # its dl_iterate_phdr path instead of /proc
    except ImportError:
        pass
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
