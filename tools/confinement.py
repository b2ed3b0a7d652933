"""Confinement policies for the children of a job: a script an agent wrote (script_policy), and
the template processes that run code an LLM may have edited (template_policy: the dataloader
check and training). Computed in the parent before fork; enforced by runtime.landlock (Landlock,
then runtime.hardening: namespaces, a private /dev/shm, rlimits, no capabilities, the sandbox uid
when the app is root, the seccomp filter). No policy grants the store: children report to the
parent, which writes it.

Where this machine lacks a protection (runtime.protections), code an LLM wrote is refused
unless ``M3B_ALLOW_UNCONFINED_SCRIPTS=1`` accepts running with what remains; the refusal names
what is missing. When the app runs as root, the folders and files a child may write are handed
to the sandbox uid (``M3B_SANDBOX_UID``, default 65534) before it starts, and the data it reads
must be readable by that uid (checked on a sample; the error names the file and the fix)."""
from __future__ import annotations

import json
import os
import stat
import sys
from collections import deque
from pathlib import Path

from core.config.settings import AUTOPILOT, REPO_ROOT
from runtime import landlock, namespaces, privileges
from runtime.hardening import granted_roots
from runtime.protections import missing as missing_protections
from runtime.protections import protections
from tools.context import ToolError
from tools.sandbox import Jail

UNCONFINED_ENV = "M3B_ALLOW_UNCONFINED_SCRIPTS"

PACKAGE_DIRS = ("core", "ml_templates", "tools", "crew")  # importable; not the repo root itself

# what of /etc Python and the usual libraries read (no shadow, ssh keys, sudoers ...)
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
               "zoneinfo", "passwd", "group", "nsswitch.conf", "host.conf", "hosts",
               "resolv.conf", "gai.conf", "mime.types", "ssl/certs", "ssl/openssl.cnf",
               "ca-certificates", "ca-certificates.conf", "pki/tls/certs", "fonts",
               "os-release", "lsb-release", "debian_version", "machine-id", "matplotlibrc",
               "xdg", "protocols", "services")

SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/opt/conda")

DEVICE_READ = ("/dev/zero", "/dev/random", "/dev/urandom")

DEVICE_WRITE = ("/dev/null", "/dev/full")

PROC_READ = ("/proc/cpuinfo",)  # torch's cpuinfo parses it (a warning without); no secrets

SCRIPT_CPU_S = 3600           # per core; a script's own timeout is at most 30 min
TEMPLATE_CPU_S = 4 * 3600     # per core, or twice the training's time budget when longer
MAX_CPU_S = 7 * 24 * 3600
SAMPLE_ENTRIES = 200          # files and folders of a dataset checked for the sandbox uid


def script_policy(jail: Jail, harden: bool = True) -> dict:
    """The policy for a script of this job (computed in the parent, before fork): Landlock
    rules, and (``harden``) the sandbox settings of ``add_sandbox``. Raises ToolError when a
    protection is missing (and not accepted) or the sandbox uid cannot read the dataset."""
    prefixes: set[str] = set()
    python_dir = os.path.dirname(os.path.realpath(sys.executable))
    for prefix in {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                 python_dir)}:
        if Jail.contains(prefix, str(REPO_ROOT)) or Jail.contains(prefix, str(jail.root)):
            # a prefix above the repository (or the workspace): only its Python folders
            prefixes.update(os.path.join(prefix, d) for d in ("bin", "lib", "lib64"))
        else:
            prefixes.add(prefix)
    read_only = sorted(prefixes) + list(SYSTEM_READ) + [f"/etc/{e}" for e in ETC_ENTRIES]
    read_only += [str(REPO_ROOT / d) for d in PACKAGE_DIRS] + list(DEVICE_READ) + list(PROC_READ)
    read_only.append(str(jail.root))  # the whole workspace readable; writable parts below
    dataset = jail.dataset_root(required=False)
    if dataset is not None:
        read_only.append(str(dataset))
    folders, files = jail.script_write_roots()
    policy = {"read_only": read_only,
              "list_only": [str(REPO_ROOT)],  # the import system lists it; its files stay closed
              "read_write": [str(p) for p in folders] + ["/dev/shm"],  # multiprocessing: shm
              "write_files": [str(p) for p in files] + list(DEVICE_WRITE)}
    if not harden:
        return policy
    require_protections()
    return add_sandbox(policy, jail, [dataset] if dataset else [], {"cpu_s": SCRIPT_CPU_S})


GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
               "/dev/nvidia-modeset") + tuple(f"/dev/nvidia{i}" for i in range(16))

GPU_READ = ("/proc/driver/nvidia", "/sys/devices", "/sys/bus/pci", "/sys/module/nvidia")


def template_policy(jail: Jail, extra_read: tuple = (), allow_tcp: bool = False) -> dict:
    """Landlock rules for the template processes that run code an LLM may have edited
    (``Datapath/dataloader.py``): validate_dataloader's checker and training. Like a script's,
    plus the whole workspace writable (Logout/ included: checkpoints, predictions, the run
    channel's metrics file) and, when present, the GPU's device files. Never the store: the
    parent writes what the child reports. Never
    ``/proc/<pid>/environ`` of another process, so never the app's keys."""
    require_protections(allow_tcp)
    policy = script_policy(jail, harden=False)
    scratch = jail.root / ".tmp"  # the child's HOME and TMPDIR: made here, so it is handed over
    if not scratch.is_symlink():
        scratch.mkdir(exist_ok=True)
    policy["read_write"] = [str(jail.root), "/dev/shm"]
    policy["write_files"] = list(DEVICE_WRITE) + [d for d in GPU_DEVICES if os.path.exists(d)]
    policy["read_only"] += [p for p in GPU_READ if os.path.exists(p)] + \
        [str(p) for p in extra_read if p]
    policy["allow_tcp"] = allow_tcp
    dataset = jail.dataset_root(required=False)
    data = ([dataset] if dataset else []) + [Path(p) for p in extra_read if p]
    return add_sandbox(policy, jail, data, {"cpu_s": _template_cpu_s(jail)})


def _template_cpu_s(jail: Jail) -> int:
    """CPU seconds per core for a template child: 4 h, or twice the training's time budget."""
    budget = 0.0
    try:  # a child may have swapped the file for a link or a FIFO: never follow, never block
        fd = os.open(jail.root / "train_config.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                budget = float(json.loads(fh.read(1 << 20)).get("time_budget_s") or 0)
    except (OSError, ValueError, AttributeError, TypeError):
        budget = 0.0
    return int(min(MAX_CPU_S, max(TEMPLATE_CPU_S, 2 * budget)))


def confinement_for(ctx, extra_read: tuple = (), allow_tcp: bool = False) -> dict | None:
    """The policy for a template child of this job: None in autopilot (the code is the
    template's own), a confinement policy in LLM mode. Raises ToolError when this machine lacks
    a protection and ``M3B_ALLOW_UNCONFINED_SCRIPTS`` is not set; when it is set, the policy
    brings the protections that remain (without Landlock: ``"landlock": False``)."""
    job = ctx.store.job(ctx.job_id) or {}
    if (job.get("llm") or AUTOPILOT) == AUTOPILOT:
        return None
    require_protections(allow_tcp)
    policy = template_policy(Jail(ctx), extra_read, allow_tcp)
    if landlock.abi_version() < 1:
        policy["landlock"] = False  # accepted by the administrator (require_protections)
    return policy


def require_protections(allow_tcp: bool = False) -> list[str]:
    """The protections this machine lacks for a confined child (runtime.protections.missing);
    raises ToolError naming them unless ``M3B_ALLOW_UNCONFINED_SCRIPTS=1`` accepts the risk."""
    lacking = missing_protections(allow_tcp)
    if lacking and os.environ.get(UNCONFINED_ENV) != "1":
        raise ToolError("code an LLM wrote cannot be confined on this machine; missing: "
                        + "; ".join(lacking) + ". Run in autopilot, ask the administrator to "
                        f"enable what is missing, or set {UNCONFINED_ENV}=1 to run it with the "
                        f"protections that remain")
    return lacking


def add_sandbox(policy: dict, jail: Jail, data_roots=(), limits: dict | None = None) -> dict:
    """Add the ``sandbox`` settings (runtime.hardening) to a policy. When the app is root and
    its children switch to the sandbox uid: hand the workspace's writable folders and files to
    that uid, and check it can reach every granted root and read the data (ToolError naming
    the file and the fix otherwise)."""
    found = protections()
    try:
        ids = privileges.sandbox_ids()
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    box: dict = {"limits": dict(limits or {}), "uid": None}
    if ids is not None and found["uid_drop"]:
        uid, gid = ids
        box.update(uid=uid, gid=gid)
        if uid != 0 and not _check_reachable(policy, jail, uid, gid, found):
            box.update(uid=None, gid=None)
        elif uid != 0:
            for root in data_roots:
                _check_readable(Path(root), uid, gid)
            box["own"] = writable_in_workspace(policy, jail)
            privileges.hand_over(box["own"], uid, gid)
    policy["sandbox"] = box
    return policy


def writable_in_workspace(policy: dict, jail: Jail) -> list[str]:
    """The policy's writable folders and regular files inside the workspace (never a symlink):
    what the sandbox uid must own."""
    out = []
    for path in list(policy.get("read_write") or []) + list(policy.get("write_files") or []):
        if os.path.islink(path) or not Jail.contains(str(jail.root), os.path.realpath(path)):
            continue
        if os.path.isdir(path) or os.path.isfile(path):
            out.append(os.path.realpath(path))
    return out


def _fix(uid: int) -> str:
    return (f"or set {privileges.SANDBOX_UID_ENV} (and {privileges.SANDBOX_GID_ENV}) to a user "
            f"that can read it (now uid {uid})")


def _check_reachable(policy: dict, jail: Jail, uid: int, gid: int, found: dict) -> bool:
    """Whether the sandbox uid can reach every granted root (through the veil where
    needed); ToolError when it cannot, False when that is accepted (no switch then)."""
    veils, problems = namespaces.veil_plan(granted_roots(policy), uid, gid)
    if problems:
        raise ToolError("a confined child cannot reach what it needs: " + "; ".join(problems)
                        + f"; make those folders enterable by others (chmod o+x), {_fix(uid)}")
    if veils and not found["mount_namespace"]:
        if os.environ.get(UNCONFINED_ENV) == "1":
            return False  # accepted: no way through, so the child keeps the app's uid
        folder, roots = veils[0]
        raise ToolError(f"the sandbox user (uid {uid}) cannot enter {folder}, which holds "
                        f"{roots[0]}, and this machine cannot make a mount namespace to open a "
                        f"way through it; make it enterable by others (chmod o+x {folder}), "
                        + _fix(uid))
    essential = [sys.prefix, sys.base_prefix, REPO_ROOT, *(REPO_ROOT / d for d in PACKAGE_DIRS),
                 jail.root]
    for root in essential:
        problem = privileges.access_problem(os.path.realpath(root), uid, gid, os.R_OK)
        if problem:
            raise ToolError(f"a confined child cannot read what it runs: {problem}; make it "
                            f"readable by others (chmod o+rX), " + _fix(uid))
    return True


def _check_readable(root: Path, uid: int, gid: int) -> None:
    """Check up to SAMPLE_ENTRIES folders and files of a data root, breadth first."""
    queue, seen = deque([str(root)]), 0
    while queue and seen < SAMPLE_ENTRIES:
        path = queue.popleft()
        seen += 1
        problem = privileges.access_problem(path, uid, gid, os.R_OK)
        if problem:
            raise ToolError(f"a confined child (uid {uid}) cannot read the data: {problem}. "
                            f"Make the dataset readable by others (chmod -R o+rX {root}), "
                            + _fix(uid))
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                with os.scandir(path) as entries:
                    for entry in sorted(entries, key=lambda e: e.name)[:SAMPLE_ENTRIES]:
                        queue.append(entry.path)
            except OSError:
                continue
