"""What confines a child beyond Landlock (issue 14, escapes 1, 4, 6 and 8), proved on real
confined children started the way the app starts them (a script through tools.scripts, the
dataloader check through validate_dataloader):

* a file's mode, owner, times and extended attributes cannot be changed, in the dataset, outside
  the workspace, or even on the child's own file (seccomp; Landlock does not cover them);
* ptrace, unshare, mount, keyctl, bpf and perf_event_open fail with EPERM;
* no Unix socket outside the workspace is reachable (the listener receives nothing);
* /dev/shm is the child's own (neither side sees the other's files);
* no capability in any set, no_new_privs, a seccomp filter, the sandbox uid when the app is
  root, rlimits set; in other namespaces (mount, network, IPC);
(tests/test_sandbox_protections.py: the refusal that names a missing protection, unreadable
data, handing files over, the report of what this machine gives.)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import SMALL_DEMO  # noqa: F401  (the ``small`` fixture registers it)
from test_sandbox_tools import make_job

from runtime import landlock, privileges, protections, seccomp
from tools import confinement, scripts
from tools.files import FILE_TOOLS
from tools.sandbox import Jail

MISSING = protections.missing()
pytestmark = pytest.mark.skipif(bool(MISSING) or landlock.abi_version() < 1,
                                reason=f"this machine lacks {MISSING}")
ROOT = os.geteuid() == 0
IDS = privileges.sandbox_ids()
CHILD_UID = IDS[0] if IDS else os.getuid()
CHILD_GID = IDS[1] if IDS else os.getgid()

TRY = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(what, fn):
    try:
        value = fn()
        print("ALLOWED", what, str(value)[:200], flush=True)
    except OSError as exc:
        print("DENIED", what, errno_name(exc.errno), flush=True)
def errno_name(n):
    return errno.errorcode.get(n, str(n))
def sys_call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if rc == -1:
        raise OSError(ctypes.get_errno(), "syscall")
    return rc
"""


def _xattrs(path: Path) -> dict:
    try:
        return {n: os.getxattr(path, n) for n in os.listxattr(path)}
    except OSError:
        return {}


def _meta(path: Path) -> tuple:
    st = os.lstat(path)
    return (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns,
            _xattrs(path))


def make_box(settings, store, tmp_path) -> dict:
    """A job with a small dataset; a 0600 file outside every granted folder (in a folder the
    child can enter, so only the filter stands between it and a chmod); each owned by the
    child's uid, so file permissions alone would let it change them. ``close_box`` ends it."""
    dataset = tmp_path / "dataset"
    (dataset / "NORMAL").mkdir(parents=True)
    (dataset / "NORMAL" / "a.png").write_bytes(b"\x89PNG fake")
    (dataset / "labels.csv").write_text("image,label\nNORMAL/a.png,0\n")
    outside_dir = Path(tempfile.mkdtemp(prefix="m3b-outside-"))
    outside_dir.chmod(0o755)
    outside = outside_dir / "secret.txt"
    outside.write_text("secret")
    outside.chmod(0o600)
    target = dataset / "labels.csv"
    xattrs = True
    for path in (outside, target):
        try:
            os.setxattr(path, "user.m3b_keep", b"kept")
        except OSError:
            xattrs = False
        if ROOT:
            os.chown(path, CHILD_UID, CHILD_GID)
    ctx = make_job(settings, store, dataset)
    tools = {name: cls(ctx=ctx, role="Data Engineer") for name, cls in FILE_TOOLS.items()}
    return {"ctx": ctx, "tools": tools, "dataset": dataset, "outside": outside,
            "target": target, "xattrs": xattrs, "ws": ctx.workspace.root}


def close_box(made: dict) -> None:
    scripts.stop_background(made["ctx"].job_id)
    shutil.rmtree(made["outside"].parent, ignore_errors=True)


@pytest.fixture
def box(settings, store, tmp_path):
    made = make_box(settings, store, tmp_path)
    yield made
    close_box(made)


def run(box, code: str, *args: str) -> str:
    assert box["tools"]["write_files"].call(path="scripts/probe.py", content=TRY + code)["ok"]
    result = box["tools"]["run_script"].call(script="scripts/probe.py", args=list(args))
    assert result["ok"], result
    return result["output"]


def lines(output: str, word: str) -> set[str]:
    return {" ".join(ln.split()[1:2]) for ln in output.splitlines() if ln.startswith(word)}


def test_mode_owner_times_and_xattrs_cannot_change(box):
    files = {"dataset": box["target"], "outside": box["outside"]}
    before = {k: _meta(p) for k, p in files.items()}
    code = """
path = sys.argv[1]
uid, gid = os.getuid(), os.getgid()
attempt("chmod", lambda: os.chmod(path, 0o666))
attempt("fchmodat", lambda: os.chmod(os.path.basename(path), 0o666,
                                     dir_fd=os.open(os.path.dirname(path), os.O_PATH)))
attempt("chown", lambda: os.chown(path, uid, gid))
attempt("lchown", lambda: os.lchown(path, uid, gid))
attempt("utime", lambda: os.utime(path, (0, 0)))
attempt("utime_now", lambda: os.utime(path))
attempt("setxattr", lambda: os.setxattr(path, "user.pwned", b"1"))
attempt("lsetxattr", lambda: os.setxattr(path, "user.pwned", b"1", follow_symlinks=False))
attempt("removexattr", lambda: os.removexattr(path, "user.m3b_keep"))
# its own file: the filter is all that refuses (the child owns it and may write it)
own = "Datapath/own.txt"
open(own, "w").write("x")
fd = os.open(own, os.O_RDONLY)
attempt("own_fchmod", lambda: os.fchmod(fd, 0o777))
attempt("own_fchown", lambda: os.fchown(fd, uid, gid))
attempt("own_futimens", lambda: os.utime(fd, (0, 0)))
attempt("own_fsetxattr", lambda: os.setxattr(fd, "user.x", b"1"))
attempt("own_fremovexattr", lambda: os.removexattr(fd, "user.x"))
attempt("own_write", lambda: os.write(os.open(own, os.O_WRONLY), b"y"))
"""
    for name, path in files.items():
        output = run(box, code, str(path))
        denied = lines(output, "DENIED")
        for what in ("chmod", "fchmodat", "chown", "lchown", "utime", "utime_now", "setxattr",
                     "lsetxattr", "removexattr", "own_fchmod", "own_fchown", "own_futimens",
                     "own_fsetxattr", "own_fremovexattr"):
            assert what in denied, (name, what, output)
        assert "DENIED chmod EPERM" in output and "DENIED own_fchmod EPERM" in output, output
        assert "ALLOWED own_write" in output, output  # the workspace still works
        assert _meta(path) == before[name], f"the {name} file changed"
    if box["xattrs"]:
        assert _xattrs(box["outside"]) == {"user.m3b_keep": b"kept"}
    own = box["ws"] / "Datapath" / "own.txt"
    assert stat.S_IMODE(own.stat().st_mode) != 0o777 and own.stat().st_mtime > 1e9


def test_process_mount_namespace_and_kernel_calls_fail(box):
    numbers = {name: seccomp.resolve(name) for name in
               ("ptrace", "unshare", "mount", "keyctl", "bpf", "perf_event_open", "setns",
                "fsopen", "add_key", "io_uring_setup")}
    code = """
numbers = {k: int(v) for k, v in (a.split("=") for a in sys.argv[1:])}
attempt("ptrace", lambda: sys_call(numbers["ptrace"], 0, 0, 0, 0))   # PTRACE_TRACEME
attempt("unshare", lambda: sys_call(numbers["unshare"], 0x10000000))  # a user namespace
attempt("mount", lambda: sys_call(numbers["mount"], 0, 0, 0, 0, 0))
attempt("fsopen", lambda: sys_call(numbers["fsopen"], 0, 0))
attempt("setns", lambda: sys_call(numbers["setns"], 0, 0))
attempt("keyctl", lambda: sys_call(numbers["keyctl"], 0, -3, 0))     # the session keyring
attempt("add_key", lambda: sys_call(numbers["add_key"], 0, 0, 0, 0, -3))
attempt("bpf", lambda: sys_call(numbers["bpf"], 0, 0, 0))
attempt("perf_event_open", lambda: sys_call(numbers["perf_event_open"], 0, 0, -1, -1, 0))
attempt("io_uring_setup", lambda: sys_call(numbers["io_uring_setup"], 1, 0))
"""
    output = run(box, code, *[f"{k}={v}" for k, v in numbers.items() if v >= 0])
    for name, nr in numbers.items():
        if nr >= 0:
            assert f"DENIED {name} EPERM" in output, (name, output)


def test_no_unix_socket_outside_the_workspace(box):
    folder = Path(tempfile.mkdtemp(prefix="m3b-sock-"))
    folder.chmod(0o777)
    path = folder / "listener.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        path.chmod(0o777)  # file permissions would let anyone connect
        listener.listen(1)
        listener.settimeout(0.5)
        name = f"\0m3b-test-{uuid.uuid4().hex}"
        abstract.bind(name)
        abstract.listen(1)
        abstract.settimeout(0.2)
        code = """
import socket
def send(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(address)
    s.sendall(os.environ.get("M3B_DATASET_DIR", "").encode())
attempt("path", lambda: send(sys.argv[1]))
attempt("abstract", lambda: send(sys.argv[2].replace("@", "\\0", 1)))
attempt("dgram", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt("socketpair", lambda: socket.socketpair())
attempt("pipe", lambda: os.pipe())
"""
        output = run(box, code, str(path), name.replace("\0", "@", 1))
        for server in (listener, abstract):
            with pytest.raises(socket.timeout):
                server.accept()
    finally:
        listener.close()
        abstract.close()
        shutil.rmtree(folder, ignore_errors=True)
    for what in ("path", "abstract", "dgram"):
        assert f"DENIED {what}" in output, output
    assert "ALLOWED socketpair" in output and "ALLOWED pipe" in output, output


def test_dev_shm_is_the_childs_own(box):
    host = Path("/dev/shm") / f"m3b-host-{uuid.uuid4().hex}"
    child = f"m3b-child-{uuid.uuid4().hex}"
    host.write_text("host")
    try:
        code = """
attempt("host_visible", lambda: os.path.exists(sys.argv[1]) or (_ for _ in ()).throw(
    FileNotFoundError(2, "no")))
attempt("listing", lambda: os.listdir("/dev/shm"))
attempt("write", lambda: open("/dev/shm/" + sys.argv[2], "w").write("child"))
attempt("sees_own", lambda: open("/dev/shm/" + sys.argv[2]).read())
"""
        output = run(box, code, str(host), child)
    finally:
        host.unlink()
    assert "DENIED host_visible ENOENT" in output, output
    assert "ALLOWED listing []" in output, output
    assert "ALLOWED write" in output and "ALLOWED sees_own child" in output, output
    assert not (Path("/dev/shm") / child).exists()


def _status(pid: int) -> dict:
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())}


def _limits(pid: int) -> dict:
    out = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]:
        match = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if match:
            out[match.group(1)] = (match.group(2), match.group(3))
    return out


def test_child_has_no_privileges_and_its_own_namespaces(box):
    tools = box["tools"]
    assert tools["write_files"].call(path="scripts/wait.py", content=(
        "import time\nprint('ready', flush=True)\ntime.sleep(30)\n"))["ok"]
    run_ = scripts.start_script(Jail(box["ctx"]), box["ctx"].job_id, "scripts/wait.py")
    try:
        deadline = time.time() + 20
        while "ready" not in run_.output.text() and time.time() < deadline:
            time.sleep(0.05)
        assert "ready" in run_.output.text(), run_.output.text()
        pid = run_.proc.pid
        status, limits = _status(pid), _limits(pid)
        namespaces = {n: os.readlink(f"/proc/{pid}/ns/{n}") for n in ("mnt", "net", "ipc")}
    finally:
        run_.kill("test over")
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", status
    uids = {int(u) for u in status["Uid"].split()}
    gids = {int(g) for g in status["Gid"].split()}
    assert uids == {CHILD_UID} and gids == {CHILD_GID}, (status["Uid"], status["Gid"])
    if ROOT:
        assert 0 not in uids and 0 not in gids and status["Groups"] == ""
    for name, link in namespaces.items():
        assert link != os.readlink(f"/proc/self/ns/{name}"), f"the {name} namespace is shared"
    cores = os.cpu_count() or 1
    assert limits["Max cpu time"][0] == str(confinement.SCRIPT_CPU_S * cores), limits
    assert limits["Max file size"] == (str(8 << 30), str(8 << 30)), limits
    assert limits["Max core file size"] == ("0", "0"), limits
    if ROOT:
        assert limits["Max processes"][0] == "4096", limits


def test_template_child_is_hardened_and_its_dataloader_workers_work(settings, store, small,
                                                                    monkeypatch):
    from test_template_confinement import prepared
    ctx, tools = prepared(settings, store, "scripted/llm")
    sample = next(p for p in sorted(Path(small).rglob("*.png")))
    before = _meta(sample)
    probe = f'''
import ctypes as _c, json as _j, os as _o, resource as _r, shutil as _sh, socket as _s
import tempfile as _t
_libc = _c.CDLL(None, use_errno=True)
_hdr, _data = (_c.c_uint32 * 2)(0x20080522, 0), (_c.c_uint32 * 6)()
_libc.capget(_hdr, _data)
_rep = {{"uid": _o.getuid(), "nnp": _libc.prctl(39, 0, 0, 0, 0),
        "seccomp": _libc.prctl(21, 0, 0, 0, 0), "eff": _data[0] | _data[3],
        "bnd": sum(_libc.prctl(23, _i, 0, 0, 0) == 1 for _i in range(64)),
        "fsize": _r.getrlimit(_r.RLIMIT_FSIZE)[0]}}
for _what, _act in (("unix", lambda: _s.socket(_s.AF_UNIX)),
                    ("chmod", lambda: _o.chmod({str(sample)!r}, 0o777)),
                    ("raw_chmod", lambda: _libc.chmod({str(sample).encode()!r}, 0o777) == 0
                     or (_ for _ in ()).throw(OSError(_c.get_errno(), "chmod"))),
                    ("copy", lambda: _sh.copy({str(sample)!r}, _t.gettempdir()))):
    try:
        _act()
        _rep[_what] = "open"
    except OSError:
        _rep[_what] = "refused"
import torch as _torch
from torch.utils.data import DataLoader as _DL
_rep["workers"] = float(sum(b.sum() for b in _DL([_torch.ones(4, 4) * _i for _i in range(6)],
                                                 batch_size=2, num_workers=2, timeout=120)))
print("PROBE " + _j.dumps(_rep), flush=True)
'''
    loader = ctx.workspace.dataloader
    loader.write_text(loader.read_text().replace("import json\n", f"import json\n{probe}\n", 1))
    result = tools["validate_dataloader"].call()
    assert result["ok"], result  # as the sandbox uid, the check still writes the workspace
    log = (ctx.workspace.logout / "dataloader_check.log").read_text()
    report = json.loads(next(ln for ln in log.splitlines() if ln.startswith("PROBE "))[6:])
    assert report["uid"] == CHILD_UID and report["nnp"] == 1 and report["seccomp"] == 2, report
    assert report["eff"] == 0 and report["bnd"] == 0, report
    assert report["unix"] == "refused" and report["raw_chmod"] == "refused", report
    # launch.py: a refused chmod is skipped in Python (the file is unchanged, below), so
    # shutil.copy works
    assert report["chmod"] == "open" and report["copy"] == "open", report
    assert report["workers"] == 16.0 * 15, report  # tensors by value through the pipe
    assert report["fsize"] == 8 << 30, report
    assert _meta(sample) == before
