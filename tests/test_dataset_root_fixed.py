"""The dataset folder a job may read is fixed by the parent when the plan is approved (the job's
row in the store), from a registered dataset's folder, and confined code cannot widen it by
rewriting plan.json: read_files, run_script, the jail and the Landlock policies keep using the
folder fixed at approval. System folders, homes, the repository and the workspaces are refused
even when a datacard points at them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config.settings import REPO_ROOT
from core.datasets.datacards import Datacard, save_datacard
from core.jobs.dataset_root import DatasetRootError, check_dataset_folder, fix_dataset_root
from core.jobs.lifecycle import create_job
from runtime import landlock
from tools import scripts
from tools.confinement import script_policy, template_policy
from tools.context import JobContext, ToolError
from tools.files import FILE_TOOLS
from tools.sandbox import Jail


def card(settings, name: str, folder: Path | str) -> None:
    save_datacard(Datacard(name=name, path=str(folder), tasks=["diagnosis"]),
                  settings.datacards_dir)


def folder(root: Path, text: str) -> Path:
    root.mkdir(parents=True)
    (root / "note.txt").write_text(text)
    return root


def plan_for(name: str, path: Path | str) -> dict:
    return {"status": "ready", "dataset": name, "dataset_path": str(path),
            "task": "diagnosis", "template": "diagnosis"}


@pytest.fixture
def two(settings, store, tmp_path):
    """Registered datasets A and B, an unregistered outside folder, and a job planned on A
    whose plan was approved (the runner's approval step fixed A)."""
    a = folder(tmp_path / "A", "dataset A")
    b = folder(tmp_path / "B", "dataset B")
    outside = folder(tmp_path / "outside", "canary outside")
    card(settings, "A", a)
    card(settings, "B", b)
    job_id = create_job(settings, store, "classify", llm="scripted/x")
    ctx = JobContext(settings, store, job_id, "classify")
    ctx.workspace.ensure().plan.write_text(json.dumps(plan_for("A", a)))
    from crew.runner import JobRunner
    runner = JobRunner(settings, job_id)
    store.update_job(job_id, approval="approved")
    assert runner._after_plan(), runner.error  # the parent's approval step fixes the folder
    yield ctx, a.resolve(), b.resolve(), outside.resolve()
    scripts.stop_background(job_id)


def read(ctx, path: str) -> dict:
    return FILE_TOOLS["read_files"](ctx=ctx, role="Data Engineer").call(paths=[path])


def text_of(result: dict) -> str:
    assert result["ok"], result
    return json.dumps(result)


def hostile_plans(b: Path, outside: Path) -> list[dict]:
    return [plan_for("B", b), plan_for("A", outside), plan_for("A", "/etc"),
            {"status": "ready", "dataset_path": "/"}, plan_for("nobody", outside)]


def test_approval_records_the_registered_folder_in_the_store(two, store):
    ctx, a, _, _ = two
    job = store.job(ctx.job_id)
    assert job["dataset_root"] == str(a) and job["dataset"] == "A"
    audit = store.rows("select * from audit where action = 'fix_dataset_root'")
    assert [r["target"] for r in audit] == [ctx.job_id] and str(a) in audit[0]["detail"]


def test_a_rewritten_plan_never_changes_what_the_tools_read(two, settings, store):
    ctx, a, b, outside = two
    assert "dataset A" in text_of(read(ctx, "dataset/note.txt"))  # cached in this context
    for hostile in hostile_plans(b, outside):
        ctx.workspace.plan.write_text(json.dumps(hostile))  # as confined code may
        # the same context (the job's life) and a fresh one (another process of the job)
        for c in (ctx, JobContext(settings, store, ctx.job_id, "classify")):
            got = text_of(read(c, "dataset/note.txt"))
            assert "dataset A" in got and "dataset B" not in got and "canary" not in got
            listed = FILE_TOOLS["list_files"](ctx=c, role="Data Engineer").call(path="dataset")
            assert listed["ok"] and "note.txt" in json.dumps(listed)
            assert Jail(c).dataset_root() == a
            if hostile.get("status") == "ready" and "dataset" in hostile:
                assert c.plan()["dataset_path"] == str(a) and c.plan()["dataset"] == "A"


def test_a_rewritten_plan_never_changes_the_policies(two):
    ctx, a, b, outside = two
    ctx.workspace.plan.write_text(json.dumps(plan_for("B", b)))
    jail = Jail(ctx)
    for policy in (script_policy(jail), template_policy(jail)):
        granted = policy["read_only"] + policy["read_write"] + policy["write_files"]
        assert str(a) in policy["read_only"]
        assert not any(p in (str(b), str(outside), "/etc", "/") for p in granted)


def test_a_rewritten_plan_never_changes_what_a_script_reads(two):
    ctx, a, b, outside = two
    tools = {n: FILE_TOOLS[n](ctx=ctx, role="Data Engineer") for n in ("write_files",
                                                                       "run_script")}
    probe = ("import os\nprint('DIR', os.environ['M3B_DATASET_DIR'])\n"
             "print(open(os.path.join(os.environ['M3B_DATASET_DIR'], 'note.txt')).read())\n"
             f"for p in ({str(b / 'note.txt')!r}, {str(outside / 'note.txt')!r}):\n"
             "    try:\n        print('READ', open(p).read())\n"
             "    except OSError:\n        print('REFUSED', p)\n")
    assert tools["write_files"].call(path="scripts/probe.py", content=probe)["ok"]
    ctx.workspace.plan.write_text(json.dumps(plan_for("B", b)))
    ctx.workspace.plan.write_text(json.dumps(plan_for("A", outside)))
    if landlock.abi_version() == 0:
        pytest.skip("no Landlock on this kernel: scripts do not run")
    result = tools["run_script"].call(script="scripts/probe.py")
    assert result["ok"] and result["returncode"] == 0, result
    out = result["output"]
    assert f"DIR {a}" in out and "dataset A" in out
    assert "READ" not in out and out.count("REFUSED") == 2, out


def test_a_job_approved_before_the_record_existed_gets_the_registered_folder(settings, store,
                                                                             tmp_path):
    a = folder(tmp_path / "A", "dataset A")
    card(settings, "A", a)
    job_id = create_job(settings, store, "classify", llm="scripted/x")
    ctx = JobContext(settings, store, job_id, "classify")
    ctx.workspace.ensure().plan.write_text(json.dumps(plan_for("A", a)))
    assert Jail(ctx).dataset_root() == a.resolve()  # fixed on first use from the registry
    assert store.job(job_id)["dataset_root"] == str(a.resolve())
    # a plan rewritten to another folder for the same name is refused, not followed
    job_id = create_job(settings, store, "classify", llm="scripted/x")
    ctx = JobContext(settings, store, job_id, "classify")
    ctx.workspace.ensure().plan.write_text(json.dumps(plan_for("A", tmp_path)))
    with pytest.raises(ToolError, match="registered at"):
        Jail(ctx).dataset_root()
    assert not store.job(job_id).get("dataset_root")


@pytest.mark.parametrize("where", ["/etc", "/", "/usr", "/proc/self", "{home}", "{app}",
                                   "{repo}", "{workspace}", "{jobs}"])
def test_system_and_own_folders_are_refused_even_when_registered(settings, store, where):
    job_id = create_job(settings, store, "classify", llm="scripted/x")
    ws = JobContext(settings, store, job_id, "x").workspace.ensure()
    path = where.format(home=Path.home(), app=settings.home, repo=REPO_ROOT,
                        workspace=ws.root / "Datapath", jobs=settings.jobs_dir)
    card(settings, "sys", path)
    ws.plan.write_text(json.dumps(plan_for("sys", path)))
    with pytest.raises(DatasetRootError) as caught:
        fix_dataset_root(settings, store, job_id, json.loads(ws.plan.read_text()))
    message = str(caught.value)
    assert "register" in message and ("contains" in message or "inside" in message
                                      or "overlaps" in message), message
    assert not store.job(job_id).get("dataset_root")
    from crew.runner import JobRunner
    runner = JobRunner(settings, job_id)
    store.update_job(job_id, approval="approved")
    assert not runner._after_plan()  # the job ends failed with the reason, nothing is read
    assert runner.outcome == "failed" and "register" in runner.error


def test_unregistered_and_missing_folders_are_refused(settings, store, tmp_path):
    job_id = create_job(settings, store, "classify", llm="scripted/x")
    with pytest.raises(DatasetRootError, match="not a registered dataset"):
        fix_dataset_root(settings, store, job_id, plan_for("ghost", tmp_path))
    with pytest.raises(DatasetRootError, match="does not exist"):
        check_dataset_folder(settings, tmp_path / "gone", "gone")
    assert fix_dataset_root(settings, store, job_id, {"status": "no_dataset"}) is None
    assert check_dataset_folder(settings, tmp_path) == tmp_path.resolve()


@pytest.mark.parametrize("folder", ["/etc", "/etc/ssl", "/"])
def test_registration_refuses_system_folders_before_reading_them(settings, store, folder):
    from core.datasets.registration import register_dataset
    result = register_dataset(settings, store, folder, "system")
    assert result["status"] == "invalid"
    assert "system folder" in result["errors"][0] and "register the folder" in result["errors"][0]
    assert not list(settings.datacards_dir.glob("system*"))


def test_registration_refuses_the_apps_own_folders(settings, store):
    from core.datasets.registration import register_dataset
    settings.ensure()
    for folder, words in ((settings.home, "app's home folder"),
                          (settings.jobs_dir, "job workspaces")):
        result = register_dataset(settings, store, str(folder), "own")
        assert result["status"] == "invalid" and words in result["errors"][0], result["errors"]
