"""Template-policy children cannot touch the store (issue 14, escape 3). In LLM mode the
dataloader check and training run code an LLM may have written; here that code tries to set
another job to ``succeeded`` and delete every audit row — through the store's path, a read-write
``file:`` URI, a symlink planted in the workspace, new sym- and hard links,
renames, truncation, the ``-wal``/``-shm``/``-journal`` files, ``/proc/self/root``, the parent's
``/proc/<pid>/fd`` and inherited descriptors. Every attempt is refused, the store's jobs and
audit rows are unchanged row by row, and ``PRAGMA integrity_check`` says ok."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from core.config.settings import REPO_ROOT
from core.jobs.lifecycle import create_job
from runtime import landlock
from runtime.process import run_module
from test_template_confinement import prepared
from tools.confinement import template_policy
from tools.sandbox import Jail

pytestmark = pytest.mark.skipif(landlock.abi_version() < 1, reason="kernel without Landlock")

PROBE_SOURCE = (Path(__file__).parent / "store_probe.py").read_text()


def snapshot(path: Path) -> dict:
    """The jobs and audit rows, each a dict (the parent may add columns while the child runs:
    rows are compared on the columns they had)."""
    con = sqlite3.connect(str(path))
    con.row_factory = sqlite3.Row
    try:
        return {table: [dict(r) for r in con.execute(f"select * from [{table}] order by rowid")]
                for table in ("jobs", "audit")}
    finally:
        con.close()


def integrity(path: Path) -> str:
    con = sqlite3.connect(str(path))
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def attack_setup(settings, store, small):
    victim = create_job(settings, store, "segment the lungs", llm="scripted/llm")
    store.update_job(victim, status="failed", error="the victim's real outcome")
    for i in range(3):
        store.audit("tester", "reveal_phi", f"target-{i}", "kept forever")
    ctx, tools = prepared(settings, store, "scripted/llm")
    ws = ctx.workspace.root
    link = ws / "Datapath" / "store_link.db"
    os.symlink(settings.store_path, link)  # planted however: the child must not follow it
    home = Path(settings.store_path).parent
    others = sorted(str(p) for p in home.rglob("*") if p.is_file() and ".db" in p.name
                    and str(p) != str(settings.store_path) and not str(p).startswith(str(ws)))
    args = {"store": str(settings.store_path), "victim": victim, "workspace": str(ws),
            "planted_link": str(link), "other_files": others}
    return ctx, tools, args, victim


def probe_line(log: Path) -> list[str]:
    line = next(ln for ln in log.read_text().splitlines() if ln.startswith("STOREPROBE "))
    return line.split()[1:]


def assert_all_refused(report: list[str], args: dict) -> None:
    assert len(report) == 18 + len(args["other_files"]), report
    opened = [r for r in report if not r.endswith(":refused")]
    assert not opened, f"a template child reached the store: {opened}"


def assert_store_unchanged(path: Path, before: dict, victim: str, own_job: str) -> None:
    after = snapshot(path)
    assert len(before["audit"]) >= 3
    assert [{k: r[k] for k in before["audit"][0]} for r in after["audit"][:len(before["audit"])]] \
        == before["audit"], "audit rows changed or went"
    columns = list(before["jobs"][0])
    others = [{k: r.get(k) for k in columns} for r in after["jobs"] if r["id"] != own_job]
    assert others == [r for r in before["jobs"] if r["id"] != own_job], "another job changed"
    assert [r["status"] for r in others if r["id"] == victim] == ["failed"]
    assert integrity(path) == "ok"


def test_dataloader_check_child_cannot_write_the_store(settings, store, attack_setup):
    ctx, tools, args, victim = attack_setup
    before = snapshot(settings.store_path)
    loader = ctx.workspace.dataloader
    injected = (f"import json\n_probe = {{'__name__': 'store_probe'}}\n"
                f"exec({PROBE_SOURCE!r}, _probe)\n"
                f"print('STOREPROBE ' + ' '.join(_probe['attack'](**{args!r})), flush=True)\n")
    loader.write_text(loader.read_text().replace("import json\n", injected, 1))
    result = tools["validate_dataloader"].call()
    assert result["ok"], result  # the check itself still passes, confined
    assert_all_refused(probe_line(ctx.workspace.logout / "dataloader_check.log"), args)
    assert_store_unchanged(settings.store_path, before, victim, ctx.job_id)


def test_training_policy_child_cannot_write_the_store(settings, store, attack_setup, tmp_path):
    """Training's policy (loopback TCP allowed for multi-process training, a read-only extra
    root): the same attempts from a child started as training is."""
    ctx, _, args, victim = attack_setup
    before = snapshot(settings.store_path)
    policy = template_policy(Jail(ctx), extra_read=(REPO_ROOT / "tests",), allow_tcp=True)
    log = tmp_path / "train.log"
    run = run_module("tests.store_probe", [json.dumps(args)], log, timeout_s=300,
                     confine=policy, scratch=ctx.workspace.scratch, poll_s=0.2)
    assert run["returncode"] == 0, run["log_tail"]
    assert_all_refused(probe_line(log), args)
    assert_store_unchanged(settings.store_path, before, victim, ctx.job_id)


def test_the_probe_reaches_an_unconfined_store(settings, store, attack_setup,
                                                            tmp_path):
    """The same child unconfined, against a copy of the store: the attempts are real ones."""
    _, _, args, victim = attack_setup
    copy = tmp_path / "home" / "store.db"
    copy.parent.mkdir()
    with sqlite3.connect(str(settings.store_path)) as src, sqlite3.connect(str(copy)) as dst:
        src.backup(dst)
    ws = tmp_path / "ws"
    (ws / "Datapath").mkdir(parents=True)
    os.symlink(copy, ws / "Datapath" / "store_link.db")
    args = {**args, "store": str(copy), "workspace": str(ws),
            "planted_link": str(ws / "Datapath" / "store_link.db"), "other_files": []}
    log = tmp_path / "unconfined.log"
    run = run_module("tests.store_probe", [json.dumps(args)], log, timeout_s=300, poll_s=0.2)
    assert run["returncode"] == 0, run["log_tail"]
    report = probe_line(log)
    for reached in ("read", "rw_open", "sql", "sql_uri", "planted_link", "symlink",
                    "hardlink", "rename_out"):
        assert f"{reached}:open" in report, report
    assert "inherited_fd:refused" in report  # children inherit no descriptor of the store
