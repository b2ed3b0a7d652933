"""Linux Landlock confinement for the scripts an agent writes and runs (``tools/scripts.py``).

Landlock is an unprivileged, stackable allow-list: once a process calls ``landlock_restrict_self``
it (and every child it starts) can touch only the file hierarchies named in its rules, with only
the rights given there, and the restriction can never be lifted. ``confine`` is meant for a
child's ``preexec_fn`` (after fork, before exec), so the agent's script starts already confined.

What a confined script gets (see ``tools/scripts.py`` for the job's own paths):

* the rights the kernel's ABI knows are *all* handled (denied unless a rule allows them):
  ABI 1 the thirteen basic file rights, ABI 2 ``REFER`` (links and renames across folders),
  ABI 3 ``TRUNCATE``, ABI 5 ``IOCTL_DEV``; ABI 4+ also handles TCP bind and connect with no
  rule, so every TCP connection and listening socket is refused; ABI 6+ scopes abstract Unix
  sockets and signals to the confined processes (no talking to, or killing, the app);
* ``read_only`` roots: read files, list folders, execute (Python's prefixes, ``/usr``, ``/lib``,
  ``/etc``, the repository's package folders, the dataset ...);
* ``read_write`` roots: every file right (no device nodes, no symlinks);
* ``list_only`` roots: may be listed but not read (the repository root: Python's import system
  lists it to find the package folders, while ``.streamlit/secrets.toml`` stays unreadable);
* ``write_files``: single files opened for writing (``/dev/null``; non-folder files).

Not covered by Landlock and so by other means (``preexec``, runtime/hardening.py): UDP and
other non-TCP sockets (a new, empty network namespace when the kernel lets us), a file's mode,
owner, times and xattrs, ptrace, mounts, namespaces, keyrings, BPF, perf events and Unix
sockets (runtime/seccomp.py), capabilities and root's uid (runtime/privileges.py), a shared
``/dev/shm`` (a private tmpfs in a new mount namespace, runtime/namespaces.py), resource use
(rlimits; the runner's timeout), and ``/proc`` (never granted: a child that could read
``/proc/<parent>/environ`` would see the app's API keys).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from runtime import namespaces
from runtime.hardening import Hardening

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on x86_64 and arm64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13      # ABI 2
FS_TRUNCATE = 1 << 14   # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0     # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1                # ABI 6

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
              5: (1 << 16) - 1}
# rights that apply to a file (a rule on a non-folder may hold only these)
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_ONLY = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
LIST_ONLY = FS_READ_DIR
READ_WRITE = (READ_ONLY | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR
              | FS_MAKE_REG | FS_MAKE_FIFO | FS_MAKE_SOCK | FS_REFER | FS_TRUNCATE)
# (MAKE_SYM, MAKE_CHAR, MAKE_BLOCK and IOCTL_DEV are never granted)


class LandlockError(OSError):
    """Confinement could not be set up; the child must not run unconfined."""


_LIBC = None


def prepare():
    """Load libc (call in the parent before fork: the child then only makes system calls)."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    return _LIBC


def _syscall(*args) -> int:
    return prepare().syscall(*args)


def die_with_parent(sig: int = 9) -> None:
    """In a child before exec: be killed (SIGKILL by default) when the parent dies, so no
    script outlives the app (PR_SET_PDEATHSIG)."""
    try:
        prepare().prctl(ctypes.c_int(1), ctypes.c_ulong(sig), ctypes.c_ulong(0),
                        ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        pass


def abi_version() -> int:
    """The kernel's Landlock ABI (1..7 so far); 0 when Landlock is missing or disabled."""
    if os.uname().sysname != "Linux":
        return 0
    try:
        version = _syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                           ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_fs(abi: int) -> int:
    return _FS_BY_ABI[min(abi, 5)] if abi >= 1 else 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _add_path(ruleset_fd: int, path: Path, access: int, handled: int) -> None:
    try:
        fd = os.open(str(path), os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a root that does not exist (e.g. /lib64 on some systems) grants nothing
    try:
        if not _is_dir_fd(fd):
            access &= FILE_RIGHTS
        attr = _PathBeneathAttr(access & handled, fd)
        if attr.allowed_access == 0:
            return
        if _syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset_fd),
                    ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _is_dir_fd(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def confine(read_write: Iterable[Path] = (), read_only: Iterable[Path] = (),
            list_only: Iterable[Path] = (), write_files: Iterable[Path] = (),
            abi: int | None = None, allow_tcp: bool = False) -> int:
    """Restrict this process (and its future children) to the given paths; TCP is denied
    (ABI 4+) unless ``allow_tcp`` (multi-process training talks over loopback TCP); abstract
    Unix sockets and signals are scoped (ABI 6+). Returns the ABI used. Raises LandlockError
    when the kernel has no Landlock or a step fails."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError(0, "this kernel has no Landlock (or it is disabled)")
    handled = handled_fs(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = 0 if allow_tcp else NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset_fd = _syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr),
                          ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for paths, access in ((read_only, READ_ONLY), (list_only, LIST_ONLY),
                              (read_write, READ_WRITE),
                              (write_files, FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE)):
            for path in paths:
                _add_path(ruleset_fd, Path(path), access, handled)
        if _libc_prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if _syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd),
                    ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset_fd)
    return abi


def _libc_prctl(option: int, arg: int) -> int:
    return prepare().prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))


def isolate_network() -> bool:
    """Move this process into a new network namespace (only a down loopback), as root or
    through a new user namespace; False when neither is permitted (Landlock's TCP rule still
    applies then). ``preexec`` does this together with the mount namespace."""
    return namespaces.enter(prepare(), new_net=True)["net"]


def preexec(policy: dict | None, abi: int):
    """The function a child runs between fork and exec: die with the parent, and when a policy
    is given, confine itself to it. Called in the parent, which prepares what it can there
    (runtime.hardening: the writable roots handed to the sandbox uid, the seccomp program);
    the child then enters new namespaces (network unless the policy keeps TCP, mount with a
    private /dev/shm, IPC), lowers its rlimits, confines itself with Landlock, drops every
    capability and, when started by root, switches to the sandbox uid, and loads the seccomp
    filter last. A policy with ``"landlock": False`` (no Landlock here, and the administrator
    accepted that) gets everything but Landlock. Raises OSError subclasses in the parent when
    the child cannot be confined."""
    libc = prepare()
    if policy is None:
        return die_with_parent
    rules = {k: policy[k] for k in ("read_write", "read_only", "list_only", "write_files",
                                    "allow_tcp") if k in policy}
    use_landlock = policy.get("landlock", True) is not False  # False: accepted, none here
    plan = Hardening.prepare(policy)

    def run() -> None:
        die_with_parent()
        plan.isolate(libc)
        rules["read_write"] = plan.writable(rules.get("read_write") or [])
        if use_landlock:
            confine(abi=abi, **rules)
        plan.drop(libc)
        die_with_parent()  # a uid switch clears the parent-death signal
    return run
