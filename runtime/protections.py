"""Which protections a confined child gets on this machine, found by trying them.

``protections()`` starts a throw-away child once per process (``python -m runtime.protections``)
that attempts, on itself, everything ``runtime.landlock.preexec`` does to a real child: new
mount/IPC/network namespaces (as root, or through a user namespace), a private ``/dev/shm``,
the switch to the sandbox uid with every capability dropped, and the seccomp filter; it reports
what worked. ``missing()`` names what a confined child would lack, for the refusal message
("refuse to run unconfined unless opted in") and the README's security section.

Only the standard library and ctypes are used.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CACHE: dict = {}


def _probe() -> dict:
    """Run in the throw-away child: try each protection on this process."""
    from runtime import landlock, namespaces, privileges, seccomp
    libc = landlock.prepare()
    found = {"landlock_abi": landlock.abi_version(), "root": os.geteuid() == 0,
             "user_namespace": False, "mount_namespace": False, "network_namespace": False,
             "private_shm": False, "uid_drop": None, "sandbox_uid": None, "seccomp": False,
             "seccomp_detail": seccomp.unavailable_reason(), "details": {}}
    details = found["details"]
    entered = namespaces.enter(libc, new_net=True)
    found["user_namespace"] = entered["user"]
    found["mount_namespace"] = entered["mount"]
    found["network_namespace"] = entered["net"]
    if entered["mount"]:
        try:
            namespaces.private_mounts(libc)
            found["private_shm"] = bool(namespaces.private_shm(libc, "1m"))
        except OSError as exc:
            details["private_shm"] = str(exc)
    ids = None
    try:
        ids = privileges.sandbox_ids()
    except ValueError as exc:
        details["uid_drop"] = str(exc)
    if found["root"]:
        found["sandbox_uid"] = list(ids) if ids else None
    try:
        privileges.drop(libc, ids, privileges.last_cap())
        if found["root"]:
            found["uid_drop"] = bool(ids) and os.geteuid() == ids[0] != 0
            if ids and ids[0] == 0:
                details["uid_drop"] = f"{privileges.SANDBOX_UID_ENV}=0 keeps children root"
    except OSError as exc:
        details["uid_drop"] = str(exc)
        if found["root"]:
            found["uid_drop"] = False
    if not found["seccomp_detail"]:
        try:
            seccomp.install(seccomp.program(), libc)
            found["seccomp"] = True
        except OSError as exc:
            found["seccomp_detail"] = str(exc)
    return found


def protections(refresh: bool = False) -> dict:
    """What this machine gives a confined child (found once per process, then cached):
    landlock_abi (0: none), seccomp, user/mount/network namespaces, private_shm, root (whether
    this process is root), uid_drop (None when not root: children keep the app's uid),
    sandbox_uid, and ``details``: why something failed."""
    key = (os.geteuid(), os.environ.get("M3B_SANDBOX_UID"), os.environ.get("M3B_SANDBOX_GID"))
    if not refresh and key in _CACHE:
        return dict(_CACHE[key])
    root = Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run([sys.executable, "-S", "-m", "runtime.protections"], cwd=root,
                              check=False,
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                   **{k: v for k, v in os.environ.items()
                                      if k.startswith("M3B_SANDBOX_")}})
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        from runtime import landlock
        found = {"landlock_abi": landlock.abi_version(), "root": os.geteuid() == 0,
                 "user_namespace": False, "mount_namespace": False,
                 "network_namespace": False, "private_shm": False,
                 "uid_drop": False if os.geteuid() == 0 else None, "sandbox_uid": None,
                 "seccomp": False, "seccomp_detail": f"the probe failed: {exc}",
                 "details": {}}
    _CACHE[key] = found
    return dict(found)


def missing(allow_tcp: bool = False, found: dict | None = None) -> list[str]:
    """What a confined child would lack here, each as a phrase naming the protection and why;
    [] when every protection is available."""
    p = found or protections()
    out = []
    if p["landlock_abi"] < 1:
        out.append("Landlock (Linux 5.13+ with Landlock enabled): file access is not confined")
    if not p["seccomp"]:
        out.append(f"seccomp ({p.get('seccomp_detail') or 'not available'}): chmod, chown, "
                   f"ptrace, mount, Unix sockets ... are not filtered")
    how = "as root" if p["root"] else "through user namespaces"
    if not allow_tcp and not p["network_namespace"]:
        out.append(f"a network namespace (none can be made {how}): UDP and raw sockets reach "
                   f"the network")
    if not p["mount_namespace"] or not p["private_shm"]:
        out.append(f"a mount namespace (none can be made {how}): no private /dev/shm (it is "
                   f"denied instead, so multiprocessing locks fail)")
    if p["root"] and not p["uid_drop"]:
        why = p.get("details", {}).get("uid_drop", "the switch failed")
        out.append(f"an unprivileged uid ({why}): children would run as root")
    return out


if __name__ == "__main__":
    print(json.dumps(_probe()))
