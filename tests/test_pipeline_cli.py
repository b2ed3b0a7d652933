"""End to end through the command line, as the acceptance checks run it: register, build on the
demo data with autopilot, no_dataset, jobs/show. One real training run (about a minute)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, store_guard, tree_digest


def cli(*args: str, home: Path, timeout: int = 600,
        env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "M3B_HOME": str(home), "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "crew", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Register the demo data through the CLI, then build with autopilot (shared by the tests).
    The job's children run with the store made unreadable to them (store_guard)."""
    from core.demo.chest_xray import make_chest_xray_demo
    home = tmp_path_factory.mktemp("cli-home")
    # half the demo's patients: the CLI contract and the AUC bar, in half the time
    data = make_chest_xray_demo(tmp_path_factory.mktemp("data") / "cxr", patients_per_class=70)
    before = tree_digest(data)
    reg = cli("register", str(data), "--name", "CXR demo", "--description",
              "chest X-ray pneumonia vs normal", "--json", home=home)
    guard_env, refused, guarded = store_guard(home, tmp_path_factory.mktemp("guard"))
    build = cli("build", "classify pneumonia versus normal chest X-rays", "--llm", "autopilot",
                "--yes", "--json", home=home, env_extra=guard_env)
    return {"home": home, "data": data, "before": before, "reg": reg, "build": build,
            "refused": refused, "guarded": guarded}


def test_register_contract(built):
    assert built["reg"].returncode == 0, built["reg"].stderr
    out = json.loads(built["reg"].stdout)
    assert out["status"] == "registered" and out["name"] == "CXR demo"
    assert out["task"] == "diagnosis" and out["errors"] == []
    card = json.loads(Path(out["datacard_path"]).read_text())
    assert card["dataset name"] == "CXR demo" and card["classes"] == ["NORMAL", "PNEUMONIA"]
    assert card["dataset path"] == str(built["data"])


@pytest.mark.slow
def test_build_succeeds_with_auc_above_090(built):
    proc = built["build"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "succeeded" and out["error"] is None
    assert out["dataset"] == "CXR demo" and out["task"] == "diagnosis"
    assert out["metrics"]["auc"] >= 0.9, out["metrics"]
    assert {"auc", "accuracy", "f1_macro"} <= set(out["metrics"])
    assert [r["role"] for r in out["roles"]] == ["Task Manager", "Data Engineer",
                                                 "Module Architect", "Model Trainer"]
    assert all(r["status"] == "succeeded" and r["actions"] >= 2 for r in out["roles"])
    ws = Path(out["workspace"])
    for name in ("plan.json", "report.json", "model_card.md", "Datapath/train.json",
                 "Datapath/test.json", "Datapath/label_dict.json", "Datapath/split.json",
                 "Datapath/dataloader.py"):
        assert (ws / name).exists(), name
    assert (Path(out["model_dir"]) / "model.safetensors").exists()
    assert "research" in (ws / "model_card.md").read_text().lower()
    split = json.loads((ws / "Datapath/split.json").read_text())
    assert not set(split["train_groups"]) & set(split["test_groups"])
    manifest = json.loads((ws / "Logout/manifest.json").read_text())
    n_images = sum(len(json.loads((ws / f"Datapath/{n}.json").read_text()))
                   for n in ("train", "test"))
    assert manifest["data_files_hashed"] == n_images and manifest["seed"] == 42
    assert manifest["packages"]["torch"].startswith("2.13")


def test_dataset_folder_is_byte_identical_after_job(built):
    assert tree_digest(built["data"]) == built["before"]


def test_no_dataset_for_liver_mri(built):
    proc = cli("build", "segment the liver on MRI", "--yes", "--json", home=built["home"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "no_dataset"
    assert "No registered dataset fits" in out["reasons"]
    assert out["metrics"] == {} and out["model_dir"] is None
    assert out["roles"][0]["status"] == "succeeded"
    assert all(r["status"] == "skipped" for r in out["roles"][1:])


def test_jobs_and_show(built):
    jobs = cli("jobs", home=built["home"])
    assert jobs.returncode == 0 and "classify pneumonia" in jobs.stdout
    job_id = json.loads(built["build"].stdout)["job_id"]
    show = cli("show", job_id, "--events", home=built["home"])
    assert show.returncode == 0, show.stderr
    detail = json.loads(show.stdout)
    assert detail["status"] == "succeeded"
    tools = [e["tool"] for e in detail["events"] if e["kind"] == "tool"]
    assert tools == ["list_datacards", "rank_datasets", "write_plan", "inspect_dataset",
                     "build_index", "write_dataloader", "validate_dataloader",
                     "configure_training", "run_training", "evaluate_model"]
    assert cli("show", "nope", home=built["home"]).returncode == 1


def test_build_without_yes_and_without_terminal_refuses(built):
    proc = cli("build", "classify pneumonia versus normal chest X-rays", home=built["home"])
    assert proc.returncode == 2 and "--yes" in proc.stderr


def test_register_invalid_path_writes_nothing(built):
    before = sorted(p.name for p in (built["home"] / "datacards").iterdir())
    proc = cli("register", str(built["home"] / "missing"), "--name", "X", "--json",
               home=built["home"])
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["status"] == "invalid" and "does not exist" in out["errors"][0]
    assert sorted(p.name for p in (built["home"] / "datacards").iterdir()) == before


@pytest.mark.slow
def test_children_never_open_the_store_and_metrics_arrive_live(built):
    """One writer of the store: the dataloader check and training ran with any open of store.db
    refused (and chmod would not stop root), yet the job succeeded; the worker wrote the metrics
    the training child reported while it ran, for this job only."""
    from core.jobs.workspace import JobWorkspace
    from core.store.db import Store
    assert built["build"].returncode == 0, built["build"].stderr[-3000:]
    assert len(built["guarded"].read_text().split()) >= 2, "the guard ran in no child"
    assert not built["refused"].exists(), built["refused"].read_text()
    out = json.loads(built["build"].stdout)
    ws = JobWorkspace(Path(out["workspace"]))
    config = json.loads(ws.train_config.read_text())
    assert "store_path" not in config and config["metrics_path"] == str(ws.metrics_channel)
    rows = Store(built["home"] / "store.db").metrics(out["job_id"])
    assert {"loss", "eval_auc", "max_steps"} <= {r["name"] for r in rows}
    assert min(r["ts"] for r in rows) < ws.train_summary.stat().st_mtime - 1.0  # live
