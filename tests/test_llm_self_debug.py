"""What an LLM adds over autopilot: a dataset in a layout no recogniser knows (a flat folder of
hashed PNG names and a pipe-separated ``meta.dat``), registered with a hand-written datacard.
Through the real crew, a scripted Data Engineer reads the layout with the jailed file tools,
writes an indexing script, runs it, reads the traceback, patches the script and runs it again;
a scripted Module Architect breaks the dataloader with an edit, reads validate_dataloader's
traceback and fixes it. Gates pass, the model is trained and scored by the system."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.jobs.lifecycle import create_job
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanError
from crew.runner import run_job
from tests.conftest import tree_digest
from tests.scripted_llm import scripted_factory

NAME = "Hospital export 2024"
REQUEST = "classify pneumonia versus normal chest X-rays from the hospital export"

INDEX_SCRIPT = '''"""Index the hospital export: meta.dat lines are id|dx|subject (dx 1 = pneumonia)."""
import json
import os
from pathlib import Path

root = Path(os.environ["M3B_DATASET_DIR"])
rows = [line.strip().split(",") for line in (root / "meta.dat").read_text().splitlines()
        if line.strip() and not line.startswith("#")]
names = {"0": "NORMAL", "1": "PNEUMONIA"}
by_class = {}
for image_id, dx, subject in rows:
    by_class.setdefault(names[dx], set()).add(subject)
test_subjects = set()
for label, subjects in sorted(by_class.items()):
    test_subjects |= set(sorted(subjects)[: max(1, len(subjects) // 4)])
train, test, groups = {}, {}, {}
for image_id, dx, subject in rows:
    path = str(root / "blobs" / f"{image_id}.png")
    (test if subject in test_subjects else train)[path] = [names[dx]]
    groups[path] = subject
out = Path("Datapath")
out.mkdir(exist_ok=True)
(out / "train.json").write_text(json.dumps(train, indent=1))
(out / "test.json").write_text(json.dumps(test, indent=1))
(out / "label_dict.json").write_text(json.dumps({"NORMAL": 0, "PNEUMONIA": 1}))
(out / "split.json").write_text(json.dumps({
    "method": "by subject, 25% of each class's subjects to test",
    "train_groups": sorted({groups[p] for p in train}),
    "test_groups": sorted(test_subjects), "groups": groups}))
print(f"train {len(train)} test {len(test)}")
'''


def make_unknown_layout(root: Path) -> Path:
    rng = np.random.default_rng(7)
    (root / "blobs").mkdir(parents=True)
    lines = ["# id|dx|subject"]
    for k in range(32):
        dx = k % 2
        image = rng.normal(90, 20, (40, 40))
        if dx:
            image[10:30, 10:30] += 90
        image_id = f"{rng.integers(1 << 40):010x}"
        Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(
            root / "blobs" / f"{image_id}.png")
        lines.append(f"{image_id}|{dx}|S{k // 2:02d}")  # two images per subject
    (root / "meta.dat").write_text("\n".join(lines) + "\n")
    return root


def write_card(settings, folder: Path) -> None:
    card = {"dataset name": NAME, "dataset path": str(folder),
            "dataset description": "Chest X-ray PNGs from a hospital export: blobs/<id>.png, "
                                   "labels in meta.dat (id|dx|subject; dx 1 = pneumonia).",
            "tasks": ["diagnosis"], "modality": "X-ray", "anatomy": "chest", "dimension": "2D",
            "file_format": "png", "label_source": "table", "grouping_key": "subject",
            "classes": ["NORMAL", "PNEUMONIA"], "source": "registered"}
    (settings.datacards_dir / "hospital_export_2024.json").write_text(json.dumps(card))


@pytest.mark.slow
def test_llm_writes_and_debugs_index_script_and_fixes_dataloader(settings, store, tmp_path):
    data = make_unknown_layout(tmp_path / "export")
    before = tree_digest(data)
    write_card(settings, data)
    broken = 'ScaleIntensity(minv=0.0, maxv=1.0, channel_wize=True)'
    scripts = {
        "task_manager": [[("list_datacards", {})],
                         [("write_plan", {"dataset": NAME, "reasons": "chest X-ray export",
                                          "time_budget_s": 120})], "Planned."],
        "data_engineer": [
            [("inspect_dataset", {})],  # refused: the only reading is one class, 'blobs'

            [("preview_dirs", {"path": "dataset"})],
            [("preview_files", {"paths": ["dataset/meta.dat"]})],
            [("write_files", {"path": "scripts/make_index.py", "content": INDEX_SCRIPT})],
            [("run_script", {"script": "scripts/make_index.py", "timeout_s": 60})],
            [("edit_files", {"path": "scripts/make_index.py", "old": 'split(",")',
                             "new": 'split("|")'})],
            [("run_script", {"script": "scripts/make_index.py", "timeout_s": 60})],
            "Index written by scripts/make_index.py."],
        "module_architect": [
            [("write_dataloader", {"image_size": [32, 32]})],
            [("edit_files", {"path": "Datapath/dataloader.py",
                             "old": "ScaleIntensity(minv=0.0, maxv=1.0)", "new": broken})],
            [("validate_dataloader", {})],
            [("edit_files", {"path": "Datapath/dataloader.py", "old": broken,
                             "new": "ScaleIntensity(minv=0.0, maxv=1.0)"})],
            [("validate_dataloader", {})], "Every sample loads."],
        "model_trainer": [[("configure_training", {"epochs": 3, "early_stopping_patience": 0,
                                                   "batch_size": 8})],
                          [("run_training", {})], [("evaluate_model", {})],
                          "Scored; for research use only."],
    }
    made: dict = {}

    job_id = create_job(settings, store, REQUEST, llm="scripted/debug", auto_approve=True)
    result = run_job(settings, job_id, llm_factory=scripted_factory(scripts, made))
    assert result["status"] == "succeeded", result["error"]
    assert not any(e["kind"] == "fallback" for e in store.events(job_id))
    events = store.events(job_id)
    de = [e for e in events if e["role"] == "Data Engineer" and e["kind"] == "tool"]
    assert [(e["tool"], e["ok"]) for e in de] == [
        ("inspect_dataset", 0), ("preview_dirs", 1), ("preview_files", 1), ("write_files", 1),
        ("run_script", 1), ("edit_files", 1), ("run_script", 1)]
    # autopilot's only reading of this folder is one class, 'blobs': refused with the reason,
    # which the LLM reads before looking at the files itself
    de_prompts = [json.dumps(m, default=str) for m in made["data_engineer"].seen_messages]
    assert "only one class (blobs)" in de[0]["result"] and "blobs" in de_prompts[1]
    with pytest.raises(ScanError, match="only one class"):
        scan_folder(data)
    # the first run failed with a traceback the LLM then read; the second wrote the index
    assert "IndexError" in de_prompts[5] or "ValueError" in de_prompts[5]
    assert "train 24 test 8" in de_prompts[7]
    ma = [e for e in events if e["role"] == "Module Architect" and e["kind"] == "tool"]
    assert [(e["tool"], e["ok"]) for e in ma] == [
        ("write_dataloader", 1), ("edit_files", 1), ("validate_dataloader", 0),
        ("edit_files", 1), ("validate_dataloader", 1)]
    ma_prompts = [json.dumps(m, default=str) for m in made["module_architect"].seen_messages]
    assert "channel_wize" in ma_prompts[3]  # the traceback named the bad argument
    ws = settings.jobs_dir / job_id
    split = json.loads((ws / "Datapath" / "split.json").read_text())
    assert not set(split["train_groups"]) & set(split["test_groups"])
    assert result["metrics"]["auc"] > 0.5
    assert tree_digest(data) == before
