"""What a confined child may not keep: privileges, identity and unbounded resources.

In the parent (before fork):

* ``sandbox_ids()`` — the unprivileged uid/gid a child started by root switches to (65534,
  "nobody", unless ``M3B_SANDBOX_UID`` / ``M3B_SANDBOX_GID`` say otherwise); None when the app
  is not root (its children keep the app's own uid);
* ``hand_over(roots, uid, gid)`` — make the folders and files a child may write owned by that
  uid (never following a symlink, never a file with other hard links), so the switch does not
  take away what the policy grants;
* ``access_problem(path, uid, gid, ...)`` — why a uid could not read (or search) a path.

In the child, between fork and exec (``runtime.landlock.preexec``):

* ``set_limits(limits)`` — RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NPROC (only for the sandbox uid:
  the limit counts every task of a uid, so under the app's own uid it would count the user's
  whole session), RLIMIT_CORE 0. RLIMIT_AS is not set: CUDA reserves hundreds of GiB of
  address space at start and PyTorch maps large arenas, so any bound low enough to matter
  breaks GPU training; memory is left to the machine (or a cgroup);
* ``drop(uid, gid)`` — empty the capability bounding set, switch uid/gid (no supplementary
  groups), clear the effective, permitted, inheritable and ambient sets, set no_new_privs.

Only the standard library and ctypes are used.
"""
from __future__ import annotations

import ctypes
import os
import resource
import stat

SANDBOX_UID_ENV = "M3B_SANDBOX_UID"
SANDBOX_GID_ENV = "M3B_SANDBOX_GID"
NOBODY = 65534

PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS = 38, 39
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_VERSION_3 = 0x20080522

GIB = 1 << 30
DEFAULT_LIMITS = {
    "cpu_s": 4 * 3600,      # per core: times os.cpu_count() (every thread's time counts)
    "fsize": 8 * GIB,       # the largest file a child may write (checkpoints stay far below)
    "nproc": 4096,          # tasks (threads count) of the sandbox uid; a fork bomb stops here
    "core": 0,              # no core dumps (they would hold the data a child read)
}


class PrivilegeError(OSError):
    """A privilege could not be dropped; the child must not run."""


def sandbox_ids() -> tuple[int, int] | None:
    """(uid, gid) a child of root runs as; None when this process is not root. Raises
    ValueError when M3B_SANDBOX_UID/GID is not a number."""
    if os.geteuid() != 0:
        return None
    out = []
    for var in (SANDBOX_UID_ENV, SANDBOX_GID_ENV):
        raw = os.environ.get(var, "").strip()
        try:
            value = int(raw) if raw else NOBODY
        except ValueError:
            raise ValueError(f"{var}={raw!r} is not a number; set it to a numeric id (e.g. "
                             f"{NOBODY}) or unset it") from None
        if not 0 <= value < 2 ** 32 - 1:
            raise ValueError(f"{var}={raw!r} is out of range; give an id like {NOBODY}")
        out.append(value)
    if SANDBOX_GID_ENV not in os.environ and SANDBOX_UID_ENV in os.environ:
        out[1] = out[0]  # a uid given alone brings its own group number
    return out[0], out[1]


# -- in the parent --------------------------------------------------------------------------

def access_problem(path, uid: int, gid: int, want: int = os.R_OK) -> str:
    """'' when ``uid``/``gid`` (no supplementary groups, no capabilities) may ``want``
    (os.R_OK, os.W_OK, os.X_OK, or'ed) ``path`` by its mode bits, else what is missing."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if uid == 0:
        return ""
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    if stat.S_ISDIR(st.st_mode) and want & os.R_OK:
        want |= os.X_OK  # a folder is read by listing and entering it
    if bits & want == want:
        return ""
    names = {os.R_OK: "read", os.W_OK: "write", os.X_OK: "enter" if stat.S_ISDIR(st.st_mode)
             else "execute"}
    wanted = "/".join(n for b, n in names.items() if want & b and not bits & b)
    return (f"{path} is mode {stat.S_IMODE(st.st_mode):04o}, owner {st.st_uid}:{st.st_gid}: "
            f"uid {uid} cannot {wanted} it")


def hand_over(roots, uid: int, gid: int) -> int:
    """Make each existing root (a folder: all it holds; or a regular file) owned by uid:gid;
    returns how many entries changed. Symlinks are never followed (folders are walked by file
    descriptor, so a link swapped in mid-walk leads nowhere), and a file with more than one
    hard link is changed only when every link is inside the roots (a template links its
    checkpoint into model/; a link to a file from outside is left alone). Needs root."""
    inside: dict[tuple[int, int], int] = {}  # (dev, ino) of multi-link files: links seen
    for _name, st, _dir_fd in _entries(roots):
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            key = (st.st_dev, st.st_ino)
            inside[key] = inside.get(key, 0) + 1
    changed = 0
    for name, st, dir_fd in _entries(roots):
        if stat.S_ISREG(st.st_mode) and st.st_nlink > inside.get((st.st_dev, st.st_ino), 1):
            continue
        changed += _own(name, st, uid, gid, dir_fd)
    return changed


def _entries(roots):
    """(name, lstat, dir_fd) of every root and all a folder root holds, never following a
    link; a path a file was reached by is counted once."""
    seen: set[str] = set()
    for root in roots:
        root = os.path.realpath(str(root))
        if root in seen or any(root.startswith(s.rstrip("/") + "/") for s in seen):
            continue
        seen.add(root)
        try:
            st = os.lstat(root)
        except OSError:
            continue
        yield root, st, None
        if not stat.S_ISDIR(st.st_mode):
            continue
        for _top, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in dirs + files:
                try:
                    entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                yield name, entry, dir_fd


def _own(name: str, st: os.stat_result, uid: int, gid: int, dir_fd: int | None = None) -> int:
    if (st.st_uid, st.st_gid) == (uid, gid) or stat.S_ISLNK(st.st_mode):
        return 0
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return 0  # sockets, fifos, devices: the child made them (or they are not ours)
    try:
        os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return 0
    return 1


def limits_for(policy_limits: dict | None, cpu_count: int | None = None) -> dict:
    """The rlimits for a child: DEFAULT_LIMITS updated by the policy's ``limits`` (None or a
    missing key keeps the default; a value of -1 leaves that limit as it is)."""
    limits = dict(DEFAULT_LIMITS)
    for key, value in (policy_limits or {}).items():
        if key not in limits:
            raise ValueError(f"unknown limit {key!r}; known: {sorted(limits)}")
        if value is not None:
            limits[key] = int(value)
    if limits["cpu_s"] > 0:
        limits["cpu_s"] *= max(1, cpu_count or os.cpu_count() or 1)
    return limits


# -- in the child, before exec ------------------------------------------------------------------

_RLIMITS = {"cpu_s": resource.RLIMIT_CPU, "fsize": resource.RLIMIT_FSIZE,
            "nproc": resource.RLIMIT_NPROC, "core": resource.RLIMIT_CORE}


def set_limits(limits: dict, own_uid: bool = True) -> None:
    """Lower each limit (soft and hard) to its value; never raise one above its current hard
    limit. ``own_uid``: RLIMIT_NPROC is left alone (see the module's note)."""
    for key, value in limits.items():
        if value is None or value < 0 or (key == "nproc" and not own_uid):
            continue
        which = _RLIMITS[key]
        _soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # CPU: SIGXCPU at the soft limit (the child can log it), SIGKILL a little later
        top = value + 30 if key == "cpu_s" and value else value
        top = top if hard == resource.RLIM_INFINITY else min(top, hard)
        resource.setrlimit(which, (value, top))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _prctl(libc, option: int, arg: int = 0, arg3: int = 0) -> int:
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg3),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return 63


def drop(libc, ids: tuple[int, int] | None, last: int) -> None:
    """Empty the bounding set (when we may: root, or inside our own user namespace), switch
    to ``ids`` (when given), clear every capability set and set no_new_privs. Raises
    PrivilegeError when a step that must work fails."""
    for cap in range(last + 1):
        if _prctl(libc, PR_CAPBSET_READ, cap) == 1 and _prctl(libc, PR_CAPBSET_DROP, cap) != 0:
            err = ctypes.get_errno()
            if err != 1 or ids is not None:  # EPERM without CAP_SETPCAP: nothing to drop
                raise PrivilegeError(err, f"PR_CAPBSET_DROP({cap}): {os.strerror(err)}")
            break
    if ids is not None:
        uid, gid = ids
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if uid != 0 and (os.getuid(), os.geteuid()) != (uid, uid):
            raise PrivilegeError(1, f"the switch to uid {uid} did not hold")
    header = _CapHeader(CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise PrivilegeError(err, f"capset: {os.strerror(err)}")
    _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)  # EINVAL on old kernels: none then
    if _prctl(libc, PR_SET_NO_NEW_PRIVS, 1) != 0:
        err = ctypes.get_errno()
        raise PrivilegeError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
