"""Everything a confined child gets besides Landlock, prepared in the parent and applied in the
child between fork and exec (``runtime.landlock.preexec`` wires it).

A policy (``tools/confinement.py``) may hold a ``sandbox`` entry; every key is optional:

* ``uid`` / ``gid`` — the ids a child of root switches to (default: ``privileges.sandbox_ids``);
* ``own`` — folders and files the parent hands over to that uid right before the fork (what
  the policy lets the child write);
* ``limits`` — rlimit overrides (``privileges.DEFAULT_LIMITS``: cpu_s per core, fsize, nproc,
  core; -1 leaves one as it is);
* ``shm_size`` — the private /dev/shm's size (default 1g);
* ``deny_unix_sockets`` — refuse ``socket(AF_UNIX)`` (default True).

In the child, in this order: new namespaces (mount, IPC, and network unless TCP is kept),
mounts made private, a private /dev/shm (or /dev/shm removed from the writable roots when no
mount namespace could be made), the veil over folders the sandbox uid cannot enter, rlimits;
then (``landlock.preexec``) Landlock; then the capability bounding set emptied, the uid switch,
every capability cleared, no_new_privs; and last the seccomp filter. A step that the parent
found possible and that fails stops the child before exec (the caller sees the error).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from runtime import namespaces, privileges, seccomp

DEFAULT_SHM_SIZE = "1g"


@dataclass
class Hardening:
    ids: tuple[int, int] | None           # switch to these (root only)
    limits: dict
    new_net: bool
    shm_size: str = DEFAULT_SHM_SIZE
    veils: list = field(default_factory=list)
    program: object = None                # seccomp.program(); None: no filter
    last_cap: int = 63
    shm_private: bool = False             # set in the child: whether /dev/shm is ours
    namespaces: dict = field(default_factory=dict)

    # -- in the parent ------------------------------------------------------------------------
    @classmethod
    def prepare(cls, policy: dict) -> Hardening:
        """Hand the writable roots over to the sandbox uid, plan the veil, build the seccomp
        program. Raises OSError subclasses when a protection this machine has cannot be set
        up for this child (then it must not start)."""
        box = dict(policy.get("sandbox") or {})
        ids = privileges.sandbox_ids() if "uid" not in box else (
            None if box["uid"] is None else (int(box["uid"]), int(box.get("gid", box["uid"]))))
        if ids is not None and os.geteuid() != 0:
            ids = None  # only root can switch
        limits = privileges.limits_for(box.get("limits"))
        plan = cls(ids=ids, limits=limits, new_net=not policy.get("allow_tcp"),
                   shm_size=str(box.get("shm_size") or DEFAULT_SHM_SIZE),
                   last_cap=privileges.last_cap())
        if ids is not None and ids[0] != 0:
            privileges.hand_over(box.get("own") or [], *ids)
            plan.veils, problems = namespaces.veil_plan(granted_roots(policy), *ids)
            if problems:
                raise privileges.PrivilegeError(
                    13, "the sandbox uid cannot reach what the child needs: "
                        + "; ".join(problems) + f"; make those folders enterable "
                        f"(chmod o+x) or set {privileges.SANDBOX_UID_ENV} to a uid that can")
        if box.get("seccomp", True) and not seccomp.unavailable_reason():
            plan.program = seccomp.program(bool(box.get("deny_unix_sockets", True)))
        return plan

    # -- in the child -------------------------------------------------------------------------
    def isolate(self, libc) -> None:
        """Namespaces, mounts, veil and rlimits (before Landlock)."""
        self.namespaces = namespaces.enter(libc, self.new_net)
        if self.namespaces["mount"]:
            namespaces.private_mounts(libc)
            self.shm_private = bool(namespaces.private_shm(libc, self.shm_size))
        if self.veils:
            if not self.namespaces["mount"]:
                raise namespaces.NamespaceError(
                    1, "no mount namespace, so folders the sandbox uid cannot enter stay closed")
            namespaces.veil(libc, self.veils)
        privileges.set_limits(self.limits, own_uid=self.ids is not None and self.ids[0] != 0)

    def writable(self, read_write: list) -> list:
        """The policy's writable roots, without /dev/shm when it is not private."""
        if self.shm_private:
            return list(read_write)
        shm = os.path.realpath(namespaces.SHM)
        return [p for p in read_write if os.path.realpath(str(p)) != shm]

    def drop(self, libc) -> None:
        """Capabilities, uid, no_new_privs, then the seccomp filter (after Landlock)."""
        privileges.drop(libc, self.ids, self.last_cap)
        if self.program is not None:
            seccomp.install(self.program, libc)


def granted_roots(policy: dict) -> list[str]:
    """Every path a policy grants (what the child must be able to reach)."""
    roots = []
    for key in ("read_only", "list_only", "read_write", "write_files"):
        roots += [str(p) for p in policy.get(key) or () if p]
    return roots
