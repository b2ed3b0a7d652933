"""Run a Python script an agent wrote, confined: ``python <workspace .py file> args...``.

* No shell: the arguments reach ``sys.argv`` literally, so ``;``, ``|``, ``$(...)``, backticks
  and ``&&`` are just characters.
* cwd is the workspace; the environment is ``core.config.secrets.child_env()`` (an allow-list:
  locale, PATH, the Python variables, thread counts; no value that looks secret) plus
  ``M3B_WORKSPACE``, ``M3B_DATASET_DIR`` (the planned dataset's real folder, so a
  script can write absolute image paths into index files), and ``TMPDIR``/``HOME`` pointing to
  ``<workspace>/.tmp``.
* Landlock (``runtime/landlock.py``, see ``tools.confinement.script_policy``): read-only Python,
  system libraries, the repository's package folders and the dataset; read-write the workspace
  folders an agent may write (not ``Logout/``, not the system's files); no ``/proc`` (only
  ``/proc/cpuinfo``), no TCP, and where the kernel allows, a new empty network namespace (no UDP
  either). Without Landlock a script is refused unless ``M3B_ALLOW_UNCONFINED_SCRIPTS=1``.
* Bounded: a timeout (default 120 s, at most 1800) kills the script; the output kept is the
  first ``HEAD_CHARS`` and the last ``TAIL_CHARS`` characters.
* Nothing it starts outlives it: when a script ends (or is killed), its whole process tree is
  killed, double-forked ``setsid`` daemons included (``runtime.proctree``: the app is their
  subreaper, every spawned tree carries a mark, orphans are killed and reaped).
* ``background=True`` returns a handle; ``script_status(job_id, handle)`` reports on it and
  ``stop_background(job_id)`` (the runner calls it when a job ends) kills what is left.
"""
from __future__ import annotations

import codecs
import itertools
import os
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from runtime import landlock, proctree
from tools.context import ToolError
from core.config.secrets import child_env
from tools.confinement import script_policy
from tools.sandbox import Jail

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 1800
HEAD_CHARS = 2000
TAIL_CHARS = 4000
MAX_ARGS = 64
MAX_ARG_CHARS = 4096
MAX_BACKGROUND = 4           # running background scripts per job


class _Output:
    """Head and tail of a stream, read by a thread; bounded whatever the script prints."""

    def __init__(self, stream):
        self.head: list[str] = []
        self.head_len = 0
        self.tail: deque[str] = deque()
        self.tail_len = 0
        self.total = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while True:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not chunk:
                    break
                self._add(decoder.decode(chunk))
            self._add(decoder.decode(b"", final=True))
        except (OSError, ValueError):
            pass
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def _add(self, text: str) -> None:
        if not text:
            return
        with self.lock:
            self.total += len(text)
            if self.head_len < HEAD_CHARS:
                take = text[: HEAD_CHARS - self.head_len]
                self.head.append(take)
                self.head_len += len(take)
                text = text[len(take):]
            if text:
                self.tail.append(text)
                self.tail_len += len(text)
                while self.tail_len - len(self.tail[0]) >= TAIL_CHARS:
                    self.tail_len -= len(self.tail.popleft())

    def text(self, tail_only: bool = False) -> str:
        """Head + "[N chars cut]" + tail; ``tail_only``: the last TAIL_CHARS characters."""
        with self.lock:
            head, tail, total = "".join(self.head), "".join(self.tail), self.total
        tail = tail[-TAIL_CHARS:]
        cut = total - len(head) - len(tail)
        if tail_only:
            shown = (head + tail if cut <= 0 else tail)[-TAIL_CHARS:]
            return (f"[{total - len(shown)} chars cut]\n" if total > len(shown) else "") + shown
        return head + (f"\n[{cut} chars cut]\n" if cut > 0 else "") + tail


@dataclass
class ScriptRun:
    handle: str
    job_id: str
    script: str
    args: list[str]
    proc: subprocess.Popen
    output: _Output
    timeout_s: float
    started: float = field(default_factory=time.time)
    ended: str = ""
    seconds: float | None = None
    guarded: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    background: bool = False

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self, why: str) -> None:
        if self.proc.poll() is None:
            self.ended = why
        proctree.kill_tree(self.proc)

    def result(self, tail_only: bool = False) -> dict:
        running = self.running()
        if not running and self.seconds is None:
            self.seconds = round(time.time() - self.started, 2)
            self.output.thread.join(timeout=2)
        out = {"handle": self.handle, "script": self.script, "args": self.args,
               "status": "running" if running else "finished",
               "returncode": None if running else self.proc.returncode,
               "seconds": round(time.time() - self.started, 2) if running else self.seconds,
               "output": self.output.text(tail_only)}
        if self.ended:
            out["ended"] = self.ended
        if not running:
            self.warnings.extend(_check_guarded(self.guarded, remove=not self.background))
            self.guarded = {}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def _stamp(path: Path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)


def _check_guarded(before: dict, remove: bool = True) -> list[str]:
    """System files inside script-writable folders (``Jail.guarded_files``) that changed while
    a script ran. After a foreground script nothing else wrote them, so they are removed (the
    system tool that owns them writes them again). A background script runs beside the
    system's own tools, so its change is only reported."""
    warnings = []
    for path, stamp in before.items():
        if _stamp(path) == stamp:
            continue
        name = f"{path.parent.name}/{path.name}"
        if remove:
            try:
                os.unlink(path)
            except OSError:
                pass
            warnings.append(f"the script wrote {name}, which only the system writes; it was "
                            f"removed")
        else:
            warnings.append(f"{name} changed while this background script ran; only the "
                            f"system may write it (run its tool again if the script did)")
    return warnings


_RUNS: dict[str, dict[str, ScriptRun]] = {}
_RUNS_LOCK = threading.Lock()
_HANDLES = itertools.count(1)


def _check_args(args) -> list[str]:
    if args is None:
        return []
    if isinstance(args, str) or not isinstance(args, (list, tuple)):
        raise ToolError("args must be a list of strings, e.g. [\"--out\", \"Datapath\"]")
    if len(args) > MAX_ARGS:
        raise ToolError(f"at most {MAX_ARGS} arguments")
    out = []
    for a in args:
        a = str(a)
        if "\x00" in a:
            raise ToolError("an argument contains a NUL character")
        if len(a) > MAX_ARG_CHARS:
            raise ToolError(f"an argument is longer than {MAX_ARG_CHARS} characters")
        out.append(a)
    return out


def start_script(jail: Jail, job_id: str, script: str, args=None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, handle: str = "") -> ScriptRun:
    """Start the script (confined) and return its run; raises ToolError when refused."""
    if jail.is_dataset(script):
        raise ToolError("scripts in the dataset are never run; copy_files it into the "
                        "workspace (e.g. 'scripts/') and read it first")
    path = jail.resolve(script, write=False)
    if path.suffix != ".py":
        raise ToolError(f"'{script}' is not a .py file; only Python scripts in the workspace "
                        f"can be run (write one with write_files)")
    if not path.is_file():
        raise ToolError(f"'{script}' does not exist in the workspace; write it with "
                        f"write_files first (list_files shows what is there)")
    args = _check_args(args)
    try:
        timeout_s = float(timeout_s or DEFAULT_TIMEOUT_S)
    except (TypeError, ValueError):
        raise ToolError("timeout_s must be a number of seconds") from None
    if not 1 <= timeout_s <= MAX_TIMEOUT_S:
        raise ToolError(f"timeout_s must be between 1 and {MAX_TIMEOUT_S} seconds")
    abi = landlock.abi_version()
    tmp = jail.root / ".tmp"
    tmp.mkdir(exist_ok=True)
    if tmp.is_symlink():
        raise ToolError("the workspace's .tmp is a symlink; it must be a folder")
    dataset = jail.dataset_root(required=False)
    env = child_env({"M3B_WORKSPACE": str(jail.root),
                     "M3B_DATASET_DIR": str(dataset) if dataset else "",
                     "TMPDIR": str(tmp), "HOME": str(tmp), "MPLCONFIGDIR": str(tmp),
                     "PYTHONDONTWRITEBYTECODE": "1"})
    # refused (naming what is missing: Landlock, seccomp, namespaces ...) unless the
    # administrator set M3B_ALLOW_UNCONFINED_SCRIPTS=1; then the protections that remain apply
    policy = script_policy(jail)
    if abi == 0:
        policy["landlock"] = False
    guarded = {p: _stamp(p) for p in jail.guarded_files()}
    landlock.prepare()  # load libc in the parent: the child only makes system calls
    try:
        proc = proctree.spawn([sys.executable, "-s", str(path), *args], cwd=str(jail.root),
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=landlock.preexec(policy, abi))
    except subprocess.SubprocessError as exc:
        raise ToolError(f"the script could not be confined, so it was not run: {exc}") from exc
    except OSError as exc:
        raise ToolError(f"the script could not start: {exc}") from exc
    run = ScriptRun(handle or f"script-{next(_HANDLES)}", job_id, jail.virtual(path), args,
                    proc, _Output(proc.stdout), timeout_s, guarded=guarded)
    return run


def run_script(jail: Jail, job_id: str, script: str, args=None,
               timeout_s: float = DEFAULT_TIMEOUT_S, background: bool = False) -> dict:
    """Run a workspace script; foreground: wait and return returncode, seconds, output;
    background: return its handle at once (see ``script_status``)."""
    if background:
        with _RUNS_LOCK:
            runs = _RUNS.setdefault(job_id, {})
            busy = [r for r in runs.values() if r.running()]
            if len(busy) >= MAX_BACKGROUND:
                raise ToolError(f"{len(busy)} background scripts are still running (at most "
                                f"{MAX_BACKGROUND}); wait for one (script_status) first")
        run = start_script(jail, job_id, script, args, timeout_s)
        run.background = True
        with _RUNS_LOCK:
            _RUNS.setdefault(job_id, {})[run.handle] = run
        threading.Thread(target=_watchdog, args=(run,), daemon=True).start()
        return {"handle": run.handle, "status": "running", "script": run.script,
                "timeout_s": run.timeout_s}
    run = start_script(jail, job_id, script, args, timeout_s)
    try:
        run.proc.wait(timeout=run.timeout_s)
    except subprocess.TimeoutExpired:
        run.kill(f"killed after the {run.timeout_s:.0f} s limit")
    except BaseException:
        run.kill("interrupted")
        raise
    if run.running():
        run.kill("killed")
    proctree.kill_tree(run.proc)  # nothing it started outlives it, daemons included
    return run.result()


def _watchdog(run: ScriptRun) -> None:
    try:
        run.proc.wait(timeout=run.timeout_s)
    except subprocess.TimeoutExpired:
        run.kill(f"killed after the {run.timeout_s:.0f} s limit")
    else:
        proctree.kill_tree(run.proc)  # what it left running ends with it


def script_status(job_id: str, handle: str) -> dict:
    with _RUNS_LOCK:
        run = _RUNS.get(job_id, {}).get(handle)
        known = sorted(_RUNS.get(job_id, {}))
    if run is None:
        raise ToolError(f"no background script {handle!r} in this job; known: {known}")
    return run.result(tail_only=True)


def stop_background(job_id: str) -> int:
    """Kill every background script of a job with its whole process tree, and every orphan
    a script left behind (the runner calls this at the end of each stage and of the job);
    returns how many scripts were still running. Forgets the job's handles."""
    with _RUNS_LOCK:
        runs = list(_RUNS.pop(job_id, {}).values())
    stopped = 0
    for run in runs:
        if run.running():
            stopped += 1
            run.kill("stopped: the job ended")
        proctree.kill_tree(run.proc)
        _check_guarded(run.guarded, remove=False)
    proctree.sweep_orphans()  # daemons of scripts that ended before, and their zombies
    return stopped
