"""What the sandbox needs from the machine and the app, and what it says when that is missing
(issue 14): the refusal names the missing protection (and M3B_ALLOW_UNCONFINED_SCRIPTS=1 runs
with what remains, without Landlock too); runtime.protections reports this machine; data the
sandbox uid cannot read is refused naming the file and the fix; handing the workspace to that
uid follows no link; the seccomp filter skips calls this architecture does not have."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from test_sandbox_hardening import CHILD_GID, CHILD_UID, ROOT, close_box, make_box

from runtime import landlock, privileges, protections, seccomp
from tools import confinement
from tools.context import ToolError
from tools.sandbox import Jail

pytestmark = pytest.mark.skipif(bool(protections.missing()) or landlock.abi_version() < 1,
                                reason="this machine lacks a protection")


@pytest.fixture
def box(settings, store, tmp_path):
    made = make_box(settings, store, tmp_path)
    yield made
    close_box(made)


def test_refusal_names_the_missing_protection(box, monkeypatch):
    found = dict(protections.protections(), seccomp=False,
                 seccomp_detail="libseccomp (libseccomp.so.2) is not installed")
    lacking = protections.missing(found=found)
    assert len(lacking) == 1 and lacking[0].startswith("seccomp (libseccomp"), lacking
    monkeypatch.setattr(confinement, "missing_protections",
                        lambda allow_tcp=False: protections.missing(allow_tcp, found))
    monkeypatch.delenv(confinement.UNCONFINED_ENV, raising=False)
    with pytest.raises(ToolError, match="missing: seccomp .*M3B_ALLOW_UNCONFINED_SCRIPTS=1"):
        confinement.script_policy(Jail(box["ctx"]))
    assert box["tools"]["write_files"].call(path="scripts/ok.py", content="print(1)\n")["ok"]
    result = box["tools"]["run_script"].call(script="scripts/ok.py")
    assert not result["ok"] and "missing: seccomp" in result["error"], result
    monkeypatch.setenv(confinement.UNCONFINED_ENV, "1")  # accepted: runs with what remains
    assert confinement.script_policy(Jail(box["ctx"]))["read_only"]
    no_userns = dict(protections.protections(), root=False, user_namespace=False,
                     network_namespace=False, mount_namespace=False, private_shm=False)
    named = " ".join(protections.missing(found=no_userns))
    assert "network namespace" in named and "private /dev/shm" in named, named


def test_protections_report_this_machine():
    found = protections.protections()
    assert found["landlock_abi"] == landlock.abi_version()
    assert found["seccomp"] == (seccomp.unavailable_reason() == "")
    assert found["root"] == ROOT
    assert found["uid_drop"] is (True if ROOT else None)
    assert found["private_shm"] and found["mount_namespace"] and found["network_namespace"]


@pytest.mark.skipif(not ROOT, reason="the uid switch happens only when the app is root")
def test_unreadable_data_is_refused_naming_the_file_and_the_fix(box):
    hidden = box["dataset"] / "NORMAL" / "a.png"
    hidden.chmod(0o600)
    os.chown(hidden, 0, 0)
    with pytest.raises(ToolError) as caught:
        confinement.script_policy(Jail(box["ctx"]))
    message = str(caught.value)
    assert str(hidden) in message and "chmod -R o+rX" in message
    assert privileges.SANDBOX_UID_ENV in message


@pytest.mark.skipif(not ROOT, reason="handing over files needs root")
def test_hand_over_follows_no_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    linked = tmp_path / "linked.txt"
    linked.write_text("y")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "mine.txt").write_text("z")
    os.symlink(outside, work / "sub" / "link")
    os.link(linked, work / "hard.txt")                    # a link to a file from outside
    (work / "ckpt.pth").write_bytes(b"w")
    os.link(work / "ckpt.pth", work / "sub" / "ckpt.pth")  # both links inside (a template's)
    changed = privileges.hand_over([work], CHILD_UID, CHILD_GID)
    assert changed == 4  # work, sub, mine.txt, the checkpoint (once)
    assert (work / "sub" / "mine.txt").stat().st_uid == CHILD_UID
    assert (work / "ckpt.pth").stat().st_uid == CHILD_UID
    assert outside.stat().st_uid == 0 and linked.stat().st_uid == 0


def test_unknown_syscalls_are_skipped_and_the_filter_is_bpf():
    assert seccomp.resolve("no_such_call") < 0
    code = seccomp.build(denied=seccomp.DENIED + ("no_such_call",))
    assert len(code) % 8 == 0 and len(code) // 8 > len(seccomp.DENIED) // 2


def test_without_landlock_the_other_protections_still_apply(box):
    """M3B_ALLOW_UNCONFINED_SCRIPTS=1 on a kernel without Landlock: the policy says so and the
    child gets every other protection (here Landlock exists, so reading outside shows it is
    really off)."""
    policy = confinement.script_policy(Jail(box["ctx"]))
    policy["landlock"] = False
    outside = box["outside"]
    outside.chmod(0o644)
    code = ("import ctypes, os, sys\nlibc = ctypes.CDLL(None)\n"
            "print(open(sys.argv[1]).read(), libc.prctl(21, 0, 0, 0, 0))\n"
            "try:\n    os.chmod(sys.argv[1], 0o600)\nexcept PermissionError:\n"
            "    print('chmod refused')\n")
    done = subprocess.run([sys.executable, "-c", code, str(outside)], cwd=box["ws"],
                          capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=landlock.preexec(policy, landlock.abi_version()))
    assert done.stdout.split("\n")[:2] == ["secret 2", "chmod refused"], done
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644


def test_template_cpu_limit_follows_the_budget_and_never_blocks_on_a_fifo(box):
    config = box["ws"] / "train_config.json"
    config.write_text('{"time_budget_s": 36000}')
    assert confinement.template_policy(Jail(box["ctx"]))["sandbox"]["limits"]["cpu_s"] == 72000
    config.unlink()
    os.mkfifo(config)  # what a child could leave there: reading it would block the app
    limits = confinement.template_policy(Jail(box["ctx"]))["sandbox"]["limits"]
    assert limits["cpu_s"] == confinement.TEMPLATE_CPU_S
