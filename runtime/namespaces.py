"""Namespaces and mounts for a confined child (between fork and exec, before Landlock, which
forbids mount changes once it is in force).

* ``enter(new_net)`` — new mount and IPC namespaces (and a network namespace with only a down
  loopback unless the child keeps TCP): directly as root, else inside a new user namespace that
  maps our own uid/gid (files we create keep their owner), all in one ``unshare``. Falls back to
  the network namespace alone, then to nothing; says what it got.
* ``private_mounts()`` then ``private_shm(size)`` — nothing we mount reaches the machine, and
  ``/dev/shm`` is a fresh, size-limited tmpfs only this child (and its children) see.
* ``veil(plan)`` — for a child that switches to an unprivileged uid: a folder above a granted
  root that the uid could not enter (``/root`` mode 0700, pytest's temp folders ...) is covered
  with an empty tmpfs holding only the granted roots, bind-mounted at their own paths. Nothing
  else under that folder exists for the child. ``veil_plan`` (in the parent) says which folders.

Only the standard library and ctypes are used.
"""
from __future__ import annotations

import ctypes
import os
import stat

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 1 << 18
SHM = "/dev/shm"
NEVER_VEILED = ("/", "/proc", "/sys", "/dev")


class NamespaceError(OSError):
    """A mount the child needs failed; it must not run."""


def _unshare(libc, flags: int) -> bool:
    return libc.unshare(ctypes.c_int(flags)) == 0


def _map_own_ids(uid: int, gid: int) -> None:
    try:
        with open("/proc/self/setgroups", "w") as fh:
            fh.write("deny")
        with open("/proc/self/uid_map", "w") as fh:
            fh.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as fh:
            fh.write(f"{gid} {gid} 1")
    except OSError:
        pass  # still new namespaces; files may show as the overflow uid


def enter(libc, new_net: bool) -> dict:
    """Unshare what we can; returns {"mount": bool, "net": bool, "user": bool}."""
    net = CLONE_NEWNET if new_net else 0
    wanted = CLONE_NEWNS | CLONE_NEWIPC | net
    if _unshare(libc, wanted):
        return {"mount": True, "net": bool(net), "user": False}
    uid, gid = os.geteuid(), os.getegid()
    if _unshare(libc, CLONE_NEWUSER | wanted):
        _map_own_ids(uid, gid)
        return {"mount": True, "net": bool(net), "user": True}
    if net and _unshare(libc, CLONE_NEWNET):
        return {"mount": False, "net": True, "user": False}
    if net and _unshare(libc, CLONE_NEWUSER | CLONE_NEWNET):
        _map_own_ids(uid, gid)
        return {"mount": False, "net": True, "user": True}
    return {"mount": False, "net": False, "user": False}


def _mount(libc, source, target: str, fstype, flags: int, data) -> None:
    enc = (lambda s: s.encode() if isinstance(s, str) else s)
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise NamespaceError(err, f"mount {fstype or source} on {target}: {os.strerror(err)}")


def private_mounts(libc) -> None:
    """No mount made from here on propagates to the machine's namespace."""
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)


def private_shm(libc, size: str = "1g") -> str:
    """Mount a fresh tmpfs on /dev/shm; returns the folder mounted ('' when there is none)."""
    target = os.path.realpath(SHM)
    if not os.path.isdir(target):
        return ""
    _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={size},mode=1777,nr_inodes=65536")
    return target


# -- the veil ---------------------------------------------------------------------------------

def _enterable(path: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def closed_ancestor(path: str, uid: int, gid: int) -> str:
    """The highest folder above ``path`` (a real path) that ``uid`` cannot enter; ''."""
    parts = path.strip("/").split("/")
    for i in range(len(parts) - 1):
        folder = "/" + "/".join(parts[: i + 1])
        if not _enterable(folder, uid, gid):
            return folder
    return "/" if not _enterable("/", uid, gid) else ""


def veil_plan(roots, uid: int, gid: int) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """([(folder to cover, [granted roots under it, outermost only]) ...], problems) for the
    granted roots (real paths, existing or not) of a child switching to uid/gid."""
    veils: dict[str, set[str]] = {}
    problems = []
    for root in sorted({os.path.realpath(str(r)) for r in roots}):
        if not os.path.lexists(root):
            continue
        folder = closed_ancestor(root, uid, gid)
        if not folder:
            continue
        if any(_within(folder, n) for n in NEVER_VEILED if n != "/") or folder == "/":
            problems.append(f"{folder} (above {root}) cannot be entered by uid {uid}")
            continue
        veils.setdefault(folder, set()).add(root)
    plan = []
    for folder, members in sorted(veils.items()):
        outer = sorted(r for r in members if not any(o != r and _within(r, o) for o in members))
        plan.append((folder, outer))
    return plan, problems


def veil(libc, plan) -> None:
    """Cover each folder of the plan with a tmpfs holding only its granted roots (as root,
    in our own mount namespace, after ``private_mounts``)."""
    cwd = os.getcwd()
    umask = os.umask(0o022)  # the folders made below must be enterable whatever the umask
    try:
        _cover(libc, plan)
    finally:
        os.umask(umask)
    os.chdir(cwd)  # the working folder as the child will see it


def _cover(libc, plan) -> None:
    for folder, roots in plan:
        fds = []
        try:
            for root in roots:  # opened before the folder is covered
                fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
                fds.append((root, fd, stat.S_ISDIR(os.fstat(fd).st_mode)))
            _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV,
                   "size=1m,nr_inodes=4096,mode=0755")
            for root, fd, is_dir in fds:
                os.makedirs(os.path.dirname(root), mode=0o755, exist_ok=True)
                if is_dir:
                    os.mkdir(root, 0o755)
                else:
                    os.close(os.open(root, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
                _mount(libc, f"/proc/self/fd/{fd}", root, None, MS_BIND | MS_REC, None)
        finally:
            for _root, fd, _is_dir in fds:
                os.close(fd)
