"""Landlock policies for the children of a job: a script an agent wrote (script_policy), and the
template processes that run code an LLM may have edited (template_policy: the dataloader check
and training). Computed in the parent before fork; enforced by runtime.landlock. No policy grants
the store: children report to the parent, which writes it."""
from __future__ import annotations

import os
import sys

from core.config.settings import AUTOPILOT, REPO_ROOT
from runtime import landlock
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


def script_policy(jail: Jail) -> dict:
    """Landlock rules for a script of this job (computed in the parent, before fork)."""
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
    return {"read_only": read_only,
            "list_only": [str(REPO_ROOT)],  # the import system lists it; its files stay closed
            "read_write": [str(p) for p in folders] + ["/dev/shm"],  # multiprocessing needs shm
            "write_files": [str(p) for p in files] + list(DEVICE_WRITE)}


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
    policy = script_policy(jail)
    policy["read_write"] = [str(jail.root), "/dev/shm"]
    policy["write_files"] = list(DEVICE_WRITE) + [d for d in GPU_DEVICES if os.path.exists(d)]
    policy["read_only"] += [p for p in GPU_READ if os.path.exists(p)] + \
        [str(p) for p in extra_read if p]
    policy["allow_tcp"] = allow_tcp
    return policy


def confinement_for(ctx, extra_read: tuple = (), allow_tcp: bool = False) -> dict | None:
    """The policy for a template child of this job: None in autopilot (the code is the
    template's own), a Landlock policy in LLM mode. Raises ToolError when the kernel cannot
    confine and ``M3B_ALLOW_UNCONFINED_SCRIPTS`` is not set."""
    job = ctx.store.job(ctx.job_id) or {}
    if (job.get("llm") or AUTOPILOT) == AUTOPILOT:
        return None
    if landlock.abi_version() < 1:
        if os.environ.get(UNCONFINED_ENV) == "1":
            return None
        raise ToolError("this kernel has no Landlock, so code an LLM may have edited cannot be "
                        f"confined; run in autopilot, or set {UNCONFINED_ENV}=1 to accept the "
                        "risk")
    return template_policy(Jail(ctx), extra_read, allow_tcp)
