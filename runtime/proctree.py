"""Every process a job starts, and everything those processes start, ends with it.

A script or a template child can leave its process group (``setsid``) and its parent (a double
fork). Killing the group then misses the grandchild, and ``PR_SET_PDEATHSIG`` is cleared by the
fork, so the grandchild would run on, re-parented to init. Here:

* the process that starts children becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``, set
  once, on the first ``spawn``): an orphaned descendant is re-parented to it, not to init, so it
  stays findable and its exit status is ours to collect;
* every child is started through ``spawn``, which marks it between fork and exec with
  ``no_new_privs`` and a one-instruction allow-all seccomp filter. Both are inherited by every
  descendant and can never be removed, so a child of this process that shows more seccomp
  filters than this process (or ``no_new_privs`` where this process has none) came from a
  spawned tree, while other children of this process (the app's job workers, ``git``) are never
  touched. The child is tracked while its Popen has not been waited for;
* ``kill_tree(proc)`` SIGKILLs ``proc``, all its descendants (``/proc/<pid>/task/*/children``,
  else a scan of ``/proc/*/stat``) and every *adopted orphan* (a marked child of this process
  that is not a tracked Popen) with its own descendants, until nothing of theirs is left alive;
  it reaps exactly the adopted orphans' pids (``waitpid(pid)``, never ``waitpid(-1)``, which
  would take the exit status a Popen waits for), and ``proc`` through its own Popen.
  ``sweep_orphans()`` does the same without a ``proc``: it also collects the zombies of orphans
  that ended on their own.

Why not a cgroup: a cgroup v2 with ``cgroup.kill`` would name the tree even better, but it needs a
writable, delegated cgroup2 hierarchy (read-only in most containers, under ``/unified`` on hybrid
hosts, root or systemd ``Delegate=`` elsewhere) and leaves directories behind when the app dies.
The subreaper needs no privilege and works on every Linux since 3.4, the mark on every kernel
with seccomp filters; where neither mark can be set (no seccomp, and the app already runs with
``no_new_privs``) only the live tree of ``proc`` is killed, not orphans adopted earlier.

Standard library and ctypes only (``runtime/`` is the lowest layer).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000

_LOCK = threading.RLock()      # spawn and the sweeps: a child just forked is tracked before any
_TRACKED: set = set()          # sweep can see it; live Popen objects started by spawn
_STATE: dict = {}              # libc, the filter program, whether we are a subreaper


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _prepare() -> dict:
    """libc and the mark's filter program, made in the parent: the child only makes calls."""
    if "libc" not in _STATE:
        libc = ctypes.CDLL(None, use_errno=True)
        insns = (_SockFilter * 1)(_SockFilter(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
        _STATE.update(libc=libc, insns=insns, prog=_SockFprog(1, insns))
    return _STATE


def _prctl(option: int, arg2: int) -> int:
    return _prepare()["libc"].prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0),
                                    ctypes.c_ulong(0), ctypes.c_ulong(0))


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (once); False where the kernel
    refuses (not Linux, or before 3.4)."""
    with _LOCK:
        if "subreaper" not in _STATE:
            try:
                _STATE["subreaper"] = _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
            except (OSError, AttributeError):
                _STATE["subreaper"] = False
        return _STATE["subreaper"]


def mark_self() -> None:
    """In a child between fork and exec: set the inherited, irremovable mark (no_new_privs and
    an allow-all seccomp filter). Best effort: a kernel without seccomp keeps no_new_privs."""
    state = _prepare()
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        state["libc"].prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                            ctypes.byref(state["prog"]), ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        pass


def preexec(inner: Callable[[], None] | None = None) -> Callable[[], None]:
    """The child's preexec: the mark first, then ``inner`` (confinement, death signal)."""
    _prepare()

    def run() -> None:
        mark_self()
        if inner is not None:
            inner()
    return run


def spawn(argv: list[str], preexec_fn: Callable[[], None] | None = None,
          **popen_kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, ...)`` marked and tracked (see the module's doc); end it with
    ``kill_tree(proc)``."""
    become_subreaper()
    with _LOCK:
        proc = subprocess.Popen(argv, preexec_fn=preexec(preexec_fn), **popen_kwargs)
        _TRACKED.add(proc)
    return proc


def tracked_pids() -> set[int]:
    with _LOCK:
        for proc in [p for p in _TRACKED if p.returncode is not None]:
            _TRACKED.discard(proc)  # waited for: its pid is no longer ours
        return {p.pid for p in _TRACKED}


# ---------------------------------------------------------------------------- /proc readers
def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, ppid) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
    try:
        return fields[0].decode(), int(fields[1])
    except (IndexError, ValueError):
        return None


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines)}


def _mark_of(status: dict[str, str]) -> tuple[int, int]:
    """(seccomp filters, no_new_privs) of a process's status; filters from ``Seccomp_filters``
    (Linux 5.9+), else 1 when in filter mode."""
    try:
        filters = int(status.get("Seccomp_filters") or (1 if status.get("Seccomp") == "2" else 0))
        return filters, int(status.get("NoNewPrivs") or 0)
    except ValueError:
        return 0, 0


def marked(pid: int) -> bool:
    """Whether the process carries the mark of a spawned tree (compared with this process)."""
    filters, nnp = _mark_of(_status(pid))
    own_filters, own_nnp = _mark_of(_status(os.getpid()))
    return filters > own_filters or (nnp > own_nnp)


def _children_file(pid: int) -> list[int] | None:
    """Children of every thread of ``pid``; None where the kernel has no ``children`` files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None
        except (OSError, ValueError):
            continue
    return out


def _ppid_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _stat(int(name))
            if info is not None:
                kids.setdefault(info[1], []).append(int(name))
    return kids


def children(pid: int, _map: dict | None = None) -> list[int]:
    """The pids whose parent is ``pid`` (any of its threads)."""
    if _map is None and not _STATE.get("no_children_file"):
        found = _children_file(pid)
        if found is not None:
            return found
        _STATE["no_children_file"] = True
    return list((_map if _map is not None else _ppid_map()).get(pid, []))


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before their children."""
    kids = _ppid_map() if _STATE.get("no_children_file") else None
    out, queue, seen = [], [pid], {pid}
    while queue:
        for child in children(queue.pop(0), kids):
            if child not in seen:
                seen.add(child)
                out.append(child)
                queue.append(child)
    return out


def adopted_orphans() -> list[int]:
    """Marked children of this process that no tracked Popen owns (alive or zombies)."""
    tracked = tracked_pids()
    return [c for c in children(os.getpid()) if c not in tracked and marked(c)]


# ---------------------------------------------------------------------------- killing
def _signal(pid: int, parents: Iterable[int]) -> bool:
    """SIGKILL ``pid`` if its parent is still one of ``parents`` (through a pidfd where the
    kernel has them, so a pid reused in between is never hit)."""
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):
        fd = None
    try:
        info = _stat(pid)
        if info is None or info[1] not in parents:
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def _reap(pid: int) -> bool:
    """Collect an adopted orphan's exit status; True once it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _sweep(proc: subprocess.Popen | None, deadline: float) -> int:
    """Kill ``proc``'s tree and the adopted orphans' trees until nothing of them is alive and
    every orphan is reaped (or the deadline passes); returns how many processes were killed
    (``proc`` not counted)."""
    me = os.getpid()
    killed: set[int] = set()
    with _LOCK:
        while True:
            roots = []
            if proc is not None and proc.returncode is None and _stat(proc.pid) is not None:
                roots.append(proc.pid)
            orphans = adopted_orphans()
            tree = {pid: None for pid in roots + orphans}
            for root in list(tree):
                tree.update((pid, None) for pid in descendants(root))
            parents = set(tree) | {me}
            pending = False
            for pid in tree:
                info = _stat(pid)
                if info is None:
                    continue
                if info[0] in "ZX":
                    if pid in orphans and not _reap(pid):
                        pending = True
                    continue
                pending = True
                if roots and pid == roots[0]:
                    try:
                        proc.kill()
                    except OSError:
                        pass
                elif _signal(pid, parents):
                    killed.add(pid)
            if not pending or time.monotonic() > deadline:
                return len(killed)
            time.sleep(0.005)


def kill_tree(proc: subprocess.Popen | None = None, timeout_s: float = 10.0) -> int:
    """SIGKILL ``proc`` (when still running), every process below it, and every orphan this
    process adopted from a spawned tree with what is below it; reap the orphans; wait for
    ``proc`` through its Popen and stop tracking it. Returns how many processes other than
    ``proc`` were killed."""
    deadline = time.monotonic() + timeout_s
    killed = _sweep(proc, deadline)
    if proc is not None:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        killed += _sweep(None, deadline)  # its zombie children, re-parented as it ended
        with _LOCK:
            if proc.returncode is not None:
                _TRACKED.discard(proc)
    return killed


def sweep_orphans(timeout_s: float = 10.0) -> int:
    """Kill and reap the orphans adopted from spawned trees (the end of a stage, of a job)."""
    return _sweep(None, time.monotonic() + timeout_s)
