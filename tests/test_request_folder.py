"""A request that names a dataset folder ("build a pneumonia classifier from /data/cxr")
registers the folder (or finds its datacard) and goes on to the plan, bound to that dataset:
found in the text (core.planning.folder_mention), checked with the folder safety rules,
registered in the parent (core.planning.request_folder), planned by the real Task Manager
(autopilot), and the same through `python -m crew build` and the Chat page."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.datasets.catalog import load_catalog
from core.datasets.registration import register_dataset
from core.jobs.lifecycle import JobError
from core.planning.folder_mention import find_folder_mentions, without_mentions
from core.planning.request_folder import RequestFolderError, rank_bound, start_request
from tests.conftest import ROOT, run_until_approval
from tests.test_app import home, launched  # noqa: F401  (fixtures)


def class_folders(root: Path, n: int = 12, loose: int = 0) -> Path:
    """``normal/`` and ``pneumonia/`` with ``n`` small PNGs each (one patient per image), and
    ``loose`` unlabelled images beside them."""
    for k, label in enumerate(("normal", "pneumonia")):
        for i in range(n):
            path = root / label / f"{label[0]}{i:02d}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            rng = np.random.default_rng(i + 100 * k)
            Image.fromarray((rng.integers(0, 60, (32, 32)) + 120 * k).astype(np.uint8)).save(path)
    for i in range(loose):
        rng = np.random.default_rng(1000 + i)
        Image.fromarray(rng.integers(0, 255, (32, 32), dtype=np.uint8)).save(
            root / f"scan_{i:03d}.png")
    return root


def card_files(settings) -> list[str]:
    return sorted(p.name for p in settings.datacards_dir.glob("*.json"))


def plan_of(settings, job_id: str) -> dict:
    return json.loads((settings.jobs_dir / job_id / "plan.json").read_text())


def plan_and_cancel(settings, store, job_id: str) -> dict:
    worker, outcome = run_until_approval(settings, store, job_id, timeout=60)
    plan = plan_of(settings, job_id)
    store.update_job(job_id, approval="cancelled")
    worker.join(timeout=60)
    assert outcome["status"] == "cancelled", outcome
    return plan


# ------------------------------------------------------------------------------ the text
def test_folders_are_found_in_the_request(tmp_path, settings, monkeypatch):
    data = class_folders(tmp_path / "my scans" / "knee", n=1)
    (settings.datasets_dir / "uploads" / "knee").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path))

    def found(text: str) -> list[str]:
        return [str(m.path) for m in find_folder_mentions(text, settings.datasets_dir)]

    assert found("build a pneumonia classifier from /data/cxr.") == ["/data/cxr"]
    assert found(f"classify knee MRI using the images in {data}, please") == [str(data)]
    assert found(f'classify knee MRI from "{data}"') == [str(data)]
    assert found("classify tears in ~/my scans/knee") == [str(data)]   # ~ and a space
    assert found("classify tears in ‘~/my scans/knee’") == [str(data)]
    assert found("classify knee X-rays in uploads/knee") == [
        str(settings.datasets_dir / "uploads" / "knee")]
    assert found("segment ./missing/folder") == [str(settings.datasets_dir / "missing/folder")]
    # words with slashes, fractions, a lone slash, URLs and apostrophes are not folders
    for text in ("classify pneumonia/normal chest X-rays", "use 1/3 of the images",
                 "classify pneumonia / normal", "see https://example.org/data for details",
                 "classify Alzheimer's disease from the patients' MRI", "T1/T2 brain MRI",
                 f"'{'x' * 300}'", f"a/{'x' * 300}/b"):
        assert found(text) == [], text
    assert found(f"from /{'x' * 300}") == [f"/{'x' * 300}"]  # named too long: no crash
    text = f"build a pneumonia classifier from the folder {data}."
    assert without_mentions(text, find_folder_mentions(text, settings.datasets_dir)) == \
        "build a pneumonia classifier"


# ------------------------------------------------------------------------------ registration
def test_an_unregistered_folder_is_registered_and_the_plan_uses_it(tmp_path, settings, store,
                                                                   small):
    """A card that fits the request as well (the small chest X-ray set) is registered too: the
    folder the user named wins, since the job is bound to it."""
    data = class_folders(tmp_path / "ward_cxr")
    before = card_files(settings)
    started = start_request(settings, store, f"build a pneumonia classifier from {data}",
                            "autopilot")
    assert started["status"] == "created" and started["folder"]["status"] == "registered"
    name = started["folder"]["dataset"]
    assert name == "ward_cxr"
    assert card_files(settings) == sorted(before + ["ward_cxr.json", "ward_cxr.validation.json"])
    card = next(e.card for e in load_catalog(settings) if e.card.name == name)
    assert card.path == str(data) and card.classes == ["normal", "pneumonia"]
    assert card.description.startswith("build a pneumonia classifier")
    job = store.job(started["job_id"])
    assert job["bound_dataset"] == name and job["status"] == "queued"
    plan = plan_and_cancel(settings, store, started["job_id"])
    assert plan["status"] == "ready" and plan["dataset"] == name
    assert plan["dataset_path"] == str(data) and "names its folder" in plan["reasons"]


def test_a_registered_folder_reuses_its_card(tmp_path, settings, store):
    data = class_folders(tmp_path / "cxr")
    assert register_dataset(settings, store, str(data), "Ward chest X-rays",
                            "chest X-ray, pneumonia vs normal")["status"] == "registered"
    link = tmp_path / "link-to-cxr"
    link.symlink_to(data)  # the same folder, written another way
    before = card_files(settings)
    started = start_request(settings, store, f"classify pneumonia from '{link}/'", "autopilot")
    assert started["folder"]["status"] == "existing"
    assert started["folder"]["dataset"] == "Ward chest X-rays"
    assert card_files(settings) == before  # no second card
    assert store.job(started["job_id"])["bound_dataset"] == "Ward chest X-rays"
    assert plan_and_cancel(settings, store, started["job_id"])["dataset"] == "Ward chest X-rays"


def test_a_missing_folder_or_a_file_is_a_clear_error(tmp_path, settings, store):
    missing = tmp_path / "nowhere" / "cxr"
    with pytest.raises(RequestFolderError, match="does not exist on this server") as err:
        start_request(settings, store, f"build a pneumonia classifier from {missing}", "autopilot")
    assert str(missing) in str(err.value) and "Datasets page" in str(err.value)
    (tmp_path / "scans.zip").write_bytes(b"PK")
    with pytest.raises(RequestFolderError, match="is a file, not a folder"):
        start_request(settings, store, f"classify from {tmp_path / 'scans.zip'}", "autopilot")
    assert card_files(settings) == [] and store.jobs() == []


@pytest.mark.parametrize("where", ["/etc", "app home", "user home", "/"])
def test_a_forbidden_folder_is_refused(tmp_path, settings, store, monkeypatch, where):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    (tmp_path / "me").mkdir()
    folder = {"/etc": "/etc", "/": "/", "app home": str(settings.home),
              "user home": "~/"}[where]
    request = f'build a pneumonia classifier from "{folder}"'
    with pytest.raises(RequestFolderError, match="cannot be a dataset"):
        start_request(settings, store, request, "autopilot")
    assert card_files(settings) == [] and store.jobs() == []


def test_two_folders_are_refused(tmp_path, settings, store):
    a, b = class_folders(tmp_path / "a", n=1), class_folders(tmp_path / "b", n=1)
    with pytest.raises(RequestFolderError, match="more than one folder"):
        start_request(settings, store, f"classify from {a} and {b}", "autopilot")
    assert store.jobs() == []


def test_an_invalid_folder_registers_nothing(tmp_path, settings, store):
    data = tmp_path / "empty_one"
    (data / "notes").mkdir(parents=True)
    (data / "notes" / "readme.txt").write_text("nothing here")
    with pytest.raises(RequestFolderError, match="could not be registered") as err:
        start_request(settings, store, f"classify pneumonia from {data}", "autopilot")
    assert str(data) in str(err.value)
    assert card_files(settings) == [] and store.jobs() == []


def test_a_folder_read_two_ways_asks_and_the_choice_registers(tmp_path, settings, store):
    data = class_folders(tmp_path / "mixed", loose=30)  # the classes explain under half
    request = f"classify pneumonia versus normal chest X-rays in {data}"
    asked = start_request(settings, store, request, "autopilot")
    assert asked["status"] == "needs_choice" and asked["job_id"] is None
    readings = [r for r in asked["folder"]["interpretations"] if not r["refused"]]
    assert readings and readings[0]["reader"] == "class_folders"
    assert card_files(settings) == [] and store.jobs() == []
    chosen = start_request(settings, store, request, "autopilot",
                           interpretation=readings[0]["number"])
    assert chosen["status"] == "created" and chosen["folder"]["status"] == "registered"
    assert store.job(chosen["job_id"])["bound_dataset"] == "mixed"
    with pytest.raises(JobError, match="registered already"):  # a reading for a known card
        start_request(settings, store, request, "autopilot", interpretation=1)


# ------------------------------------------------------------------------------ the binding
def test_the_bound_card_is_chosen_when_only_a_difference_would_rule_it_out(settings):
    from core.datasets.datacards import parse_datacard
    from core.planning.matching import rank_datacards
    card = parse_datacard({"dataset name": "knee_set", "dataset path": "/x", "tasks": ["diagnosis"],
                           "classes": ["a", "b"], "dataset description": "images"})
    request = "build a classifier from /data/knee_set"
    assert rank_datacards(request, [(card, True)])["chosen"] is None  # nothing ties it
    assert rank_bound(request, card, True, settings.datasets_dir)["chosen"] == "knee_set"
    refused = rank_bound("segment the tumour in /data/knee_set", card, True,
                         settings.datasets_dir)
    assert refused["chosen"] is None and "cannot serve the request" in refused["explanation"]


def test_a_bound_job_plans_with_no_other_dataset(tmp_path, settings, store, small):
    from tests.conftest import SMALL_DEMO
    from tools.context import JobContext
    from tools.gates import plan_gate
    from tools.task_manager import task_manager_tools
    data = class_folders(tmp_path / "ward")
    started = start_request(settings, store, f"classify pneumonia chest X-rays in {data}",
                            "autopilot")
    ctx = JobContext(settings, store, started["job_id"], store.job(started["job_id"])["request"])
    tools = {t.name: t for t in task_manager_tools(ctx)}
    listed = tools["list_datacards"].call()
    assert [c["name"] for c in listed["datacards"]] == ["ward"]
    refused = tools["write_plan"].call(dataset=SMALL_DEMO, reasons="it fits")
    assert not refused["ok"] and "names the folder" in refused["error"]
    # a plan.json naming another dataset (written around the tool) fails the plan gate
    from core.planning.plan import write_plan
    write_plan(settings, ctx.workspace, ctx.request, SMALL_DEMO, "it fits")
    verdict = plan_gate(ctx)
    assert not verdict.ok and "names the folder of the dataset 'ward'" in verdict.message()


# ------------------------------------------------------------------------------ CLI
def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`python -m crew ARGV` in this process (the job's worker still runs as its own
    process); stdin is not a terminal, as in a script."""
    from crew.cli import main
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_build_registers_the_folder_and_plans_with_it(tmp_path, settings, capsys):
    """A request the folder cannot serve (segmentation of class folders) ends at the plan
    (no_dataset) without training: the folder was registered and the plan judged it alone."""
    data = class_folders(tmp_path / "cli_cxr")
    home = str(settings.home)
    code, out, err = run_cli(capsys, "build", f"segment the lungs in {data}", "--yes", "--json",
                             "--home", home)
    assert code == 0, err[-2000:]
    result = json.loads(out)
    assert result["status"] == "no_dataset" and "cli_cxr" in result["reasons"]
    assert "cannot serve the request" in result["reasons"]
    assert "Registered the folder" in err and "cli_cxr.json" in card_files(settings)
    code, out, _ = run_cli(capsys, "build", f"classify pneumonia from {tmp_path / 'gone'}",
                           "--yes", "--json", "--home", home)
    error = json.loads(out)
    assert code == 2 and "does not exist" in error["error"]
    assert str(tmp_path / "gone") in error["error"]


def test_cli_build_lists_the_readings_and_takes_a_choice(tmp_path, settings, capsys):
    data = class_folders(tmp_path / "cli_mixed", loose=30)
    request, home = f"segment the lungs in {data}", str(settings.home)
    code, out, _ = run_cli(capsys, "build", request, "--yes", "--json", "--home", home)
    asked = json.loads(out)
    assert code == 1 and asked["kind"] == "needs_choice"
    assert "--interpretation N" in asked["error"]
    assert asked["interpretations"][0]["reader"] == "class_folders"
    code, out, err = run_cli(capsys, "build", request, "--yes", "--home", home)
    assert code == 1 and "1. diagnosis from class folders" in err and "--interpretation N" in err
    assert card_files(settings) == [] and json.loads(
        run_cli(capsys, "jobs", "--json", "--home", home)[1]) == []
    code, out, err = run_cli(capsys, "build", request, "--yes", "--json", "--interpretation", "1",
                             "--home", home)
    assert code == 0, err[-2000:]
    assert json.loads(out)["status"] == "no_dataset"
    assert "cli_mixed.json" in card_files(settings)


@pytest.mark.slow
def test_cli_build_from_a_folder_trains_on_it(tmp_path, settings):
    """The whole way, as a user runs it: `python -m crew build` in its own process."""
    data = class_folders(tmp_path / "cxr_ward", n=16)
    env = {**os.environ, "M3B_HOME": str(settings.home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "crew", "build",
                           f"build a pneumonia classifier from {data}", "--yes", "--json",
                           "--epochs", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "succeeded" and out["dataset"] == "cxr_ward"
    assert out["task"] == "diagnosis" and "auc" in out["metrics"]


# ------------------------------------------------------------------------------ Chat page
def test_chat_request_with_a_folder_registers_it_and_starts_the_job(home, launched,
                                                                   tmp_path_factory):
    from tests.test_app import context, run_app
    data = class_folders(tmp_path_factory.mktemp("chat") / "chat_cxr")
    at = run_app("pages/chat.py")
    at.chat_input[0].set_value(f"build a pneumonia classifier from {data}").run()
    assert not at.exception, [e.value for e in at.exception]
    settings, store = context()
    jobs = store.jobs()
    assert len(jobs) == 1 and jobs[0]["bound_dataset"] == "chat_cxr"
    assert launched == [jobs[0]["id"]] and "chat_cxr.json" in card_files(settings)
    assert any("dataset named by its folder: chat_cxr" in c.value for c in at.caption)
    at.chat_input[0].set_value(f"classify pneumonia from {data}/missing").run()
    assert at.error and "No job was created" in at.error[0].value
    assert "does not exist" in at.error[0].value and len(store.jobs()) == 1


def test_chat_shows_the_readings_and_goes_on_with_the_choice(home, launched, tmp_path_factory):
    from tests.test_app import context, run_app
    data = class_folders(tmp_path_factory.mktemp("chat") / "chat_mixed", loose=30)
    at = run_app("pages/chat.py")
    at.chat_input[0].set_value(f"classify pneumonia versus normal chest X-rays in {data}").run()
    assert not at.exception, [e.value for e in at.exception]
    settings, store = context()
    assert store.jobs() == [] and card_files(settings) == [] and launched == []
    assert any("can be read in more than one way" in w.value for w in at.warning)
    assert at.radio[0].options[0].startswith("1. Diagnosis from class folders")
    next(b for b in at.button if b.label == "Register with this reading and plan").click().run()
    assert not at.exception, [e.value for e in at.exception]
    jobs = store.jobs()
    assert len(jobs) == 1 and jobs[0]["bound_dataset"] == "chat_mixed"
    assert launched == [jobs[0]["id"]] and "chat_mixed.json" in card_files(settings)
    assert not any("can be read in more than one way" in w.value for w in at.warning)
