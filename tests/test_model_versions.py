"""Model versions, status, the best model, comparing two models, archive and delete, the model
card's split sentence and the exports' metadata (issue 15: a stopped run, AUC 0.556, became a
model named exactly like the good one and was selected by default).

Fast: the models are job folders written here (report, training summary, files), recorded
through the store as the Model Trainer records them; the page is driven with AppTest.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import core
from core.jobs.model_card import render_model_card, split_sentence
from core.jobs.model_removal import ModelRemovalError, delete_model
from core.store.db import Store, forget_store
from core.viewing.model_compare import metric_rows, same_test_set, verdict
from core.viewing.model_versions import (COMPLETE, FAILED_GATE, STOPPED, catalog,
                                         default_model, marked_best, model_status)

APP = Path(__file__).resolve().parent.parent / "app.py"
DATASET = "Chest X-ray pneumonia"
GOOD_SUMMARY = {"network": "densenet_small", "epochs_run": 24.0, "epochs_planned": 40.0,
                "stop_reason": "early_stopped at 24: no validation loss improvement for 10 "
                               "epochs", "epoch_kept": 14.0, "selection_metric": "loss",
                "selection_value": 0.2, "num_train": 80, "num_val": 20, "device": "cpu",
                "seconds": 30.0, "exports": {"onnx": {"verified": True, "max_abs_diff": 0.0,
                                                      "metadata": ["class_names", "task"]}}}
STOPPED_SUMMARY = {**GOOD_SUMMARY, "epochs_run": 2.0, "stop_reason": "stopped by the user",
                   "epoch_kept": 2.0}


def make_model(settings, store, job_id: str, *, auc: float, ci: list, val_auc: float | None,
               summary: dict, job_status: str = "succeeded", test_sha: str = "same",
               created_at: float | None = None, dataset: str = DATASET,
               task: str = "diagnosis", legacy_name: str | None = None) -> dict:
    """A diagnosis model as a finished job leaves it, recorded through the store."""
    ws = settings.jobs_dir / job_id
    (ws / "Logout" / "model").mkdir(parents=True)
    (ws / "Logout" / "export").mkdir()
    (ws / "Logout" / "model" / "model.safetensors").write_bytes(b"w" * 2048)
    (ws / "Logout" / "export" / "model.onnx").write_bytes(b"o" * 1024)
    (ws / "Logout" / "train.log").write_text("training finished\n")
    (ws / "train_config.json").write_text(json.dumps({"template": "diagnosis", "epochs": 40}))
    report = {"task": "diagnosis", "metrics": {"auc": auc, "accuracy": auc - 0.05},
              "ci95": {"auc": ci, "accuracy": [ci[0] - 0.05, ci[1] - 0.05]},
              "num_test": 40, "test_index_sha256": test_sha, "evaluator":
              "core.evaluation.diagnosis", "training": summary}
    (ws / "report.json").write_text(json.dumps(report))
    (ws / "Datapath").mkdir()  # four test images and the probabilities the model gave them
    truth = {f"/data/{i}.png": ["PNEUMONIA" if i % 2 else "NORMAL"] for i in range(4)}
    (ws / "Datapath" / "test.json").write_text(json.dumps(truth))
    (ws / "Datapath" / "label_dict.json").write_text(json.dumps({"NORMAL": 0, "PNEUMONIA": 1}))
    right = 0.9 if auc > 0.8 else 0.4
    (ws / "Logout" / "predictions.json").write_text(json.dumps(
        {path: ([1 - right, right] if labels == ["PNEUMONIA"] else [right, 1 - right])
         for path, labels in truth.items()}))
    (ws / "model_card.md").write_text(f"# Model card\n\n> {core.RESEARCH_ONLY}\n")
    store.insert_job({"id": job_id, "request": "classify pneumonia", "llm": "autopilot",
                      "status": job_status, "dataset": dataset, "task": task,
                      "workspace": str(ws), "created_at": time.time(),
                      "error": "Model Trainer: report gate failed" if job_status == "failed"
                      else ""})
    if val_auc is not None:
        store.add_metrics(job_id, 10, summary["epoch_kept"], {"eval_auc": val_auc})
        store.add_metrics(job_id, 20, summary["epoch_kept"] + 1, {"eval_auc": 0.01})
    row = {"id": job_id, "job_id": job_id, "name": legacy_name or "ignored", "task": task,
           "dataset": dataset, "path": str(ws / "Logout" / "model"),
           "metrics": json.dumps(report["metrics"]), "card_path": str(ws / "model_card.md"),
           "created_at": created_at or time.time()}
    return store.add_model(row)


# ------------------------------------------------------------------------------ versions
def test_versions_count_per_dataset_and_task_and_are_never_reused(settings, store):
    first = make_model(settings, store, "j1", auc=0.9, ci=[0.8, 0.97], val_auc=0.93,
                       summary=GOOD_SUMMARY)
    second = make_model(settings, store, "j2", auc=0.556, ci=[0.4, 0.7], val_auc=0.6,
                        summary=STOPPED_SUMMARY, job_status="stopped")
    other = make_model(settings, store, "j3", auc=0.8, ci=[0.7, 0.9], val_auc=None,
                       summary=GOOD_SUMMARY, dataset="Knee MRI")
    assert [first["name"], second["name"], other["name"]] == [
        f"{DATASET} diagnosis v1", f"{DATASET} diagnosis v2", "Knee MRI diagnosis v1"]
    # recorded again (a resumed job scores it anew): same version, same name
    again = store.add_model({**second, "metrics": "{}", "name": "whatever"})
    assert (again["version"], again["name"]) == (2, f"{DATASET} diagnosis v2")
    assert store.next_model_name("j4", DATASET, "diagnosis") == f"{DATASET} diagnosis v3"
    delete_model(settings, store, "j2")
    third = make_model(settings, store, "j4", auc=0.91, ci=[0.85, 0.96], val_auc=0.9,
                       summary=GOOD_SUMMARY)
    assert third["name"] == f"{DATASET} diagnosis v3"  # v2 is gone and never given again
    audit = store.rows("select action, target, detail from audit where action like "
                       "'%model%'")
    assert [(a["action"], a["target"]) for a in audit] == [("delete_model", "j2")]
    assert "Logout/model" in audit[0]["detail"]


def test_an_older_store_gets_versions_and_its_old_names_still_work(tmp_path):
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)  # the models table as it was before versions
    conn.execute("create table models (id text primary key, job_id text, name text, task text,"
                 " dataset text, path text, metrics text, card_path text, created_at float)")
    for i, (name, t) in enumerate((("CXR diagnosis (densenet_small)", 1.0),
                                   ("CXR diagnosis (densenet_small)", 2.0),
                                   ("Liver segmentation (unet_small)", 3.0))):
        task = name.split()[1]
        conn.execute("insert into models values (?, ?, ?, ?, ?, '', '{}', '', ?)",
                     [f"m{i}", f"m{i}", name, task, name.split()[0], t])
    conn.commit()
    conn.close()
    store = Store(path, backup=False)
    rows = {m["id"]: m for m in store.models()}
    assert [rows[i]["name"] for i in ("m0", "m1", "m2")] == [
        "CXR diagnosis v1", "CXR diagnosis v2", "Liver segmentation v1"]
    assert rows["m1"]["former_name"] == "CXR diagnosis (densenet_small)"
    from core.external_validation.compat import find_model
    assert find_model(store, "CXR diagnosis v1")["id"] == "m0"
    assert find_model(store, "cxr diagnosis (densenet_small)")["id"] == "m1"  # newest of both
    assert store.add_model({"id": "m9", "job_id": "m9", "task": "diagnosis", "dataset": "CXR",
                            "created_at": 4.0})["name"] == "CXR diagnosis v3"
    store.close()
    again = Store(path, backup=False)  # opening again changes nothing
    assert {m["id"]: m["name"] for m in again.models()}["m0"] == "CXR diagnosis v1"
    again.close()
    forget_store(path)


# ------------------------------------------------------------------------------ status, best
def test_status_from_the_job_and_the_training_summary():
    assert model_status({"status": "succeeded"}, GOOD_SUMMARY)[0] == COMPLETE
    status, detail = model_status({"status": "stopped"}, STOPPED_SUMMARY)
    assert status == STOPPED and detail == ("training was stopped at your request after 2 of "
                                            "40 epochs")
    status, detail = model_status({"status": "succeeded"},
                                  {"stop_reason": "time budget of 600 s reached",
                                   "epochs_run": 3.0}, planned_epochs=40)
    assert status == STOPPED and "time budget of 600 s reached after 3 of 40 epochs" in detail
    assert model_status({"status": "failed", "error": "gate\nmore"}, GOOD_SUMMARY) == (
        FAILED_GATE, "the job failed after this model was scored: gate")


def test_the_best_model_is_marked_and_opens_first_not_the_newest(settings, store):
    make_model(settings, store, "good", auc=0.93, ci=[0.85, 0.98], val_auc=0.95,
               summary=GOOD_SUMMARY, created_at=100.0)
    make_model(settings, store, "stopped", auc=0.556, ci=[0.4, 0.7], val_auc=0.6,
               summary=STOPPED_SUMMARY, job_status="stopped", created_at=200.0)
    make_model(settings, store, "knee", auc=0.7, ci=[0.6, 0.8], val_auc=0.75,
               summary=GOOD_SUMMARY, created_at=50.0, dataset="Knee MRI")
    entries, best = catalog(store)
    by_id = {e.id: e for e in entries}
    assert by_id["good"].validation == 0.95  # the kept epoch's, not the last evaluation's
    assert by_id["good"].best == "validation" and not by_id["stopped"].best
    assert marked_best(by_id["good"]) and not marked_best(by_id["knee"])  # alone: no star
    assert default_model(entries, best).id == "good"
    # a model without a validation value: everyone is compared on the test set
    make_model(settings, store, "noval", auc=0.94, ci=[0.9, 0.97], val_auc=None,
               summary={**GOOD_SUMMARY, "epoch_kept": None, "selection_metric": None},
               created_at=300.0)
    entries, best = catalog(store)
    winner = best[(DATASET, "diagnosis")]
    assert (winner.id, winner.best) == ("noval", "test")
    # archived and failed-gate models are never the best
    store.set_model_archived("noval", True)
    make_model(settings, store, "failed", auc=0.99, ci=[0.97, 1.0], val_auc=0.99,
               summary=GOOD_SUMMARY, job_status="failed", created_at=400.0)
    entries, best = catalog(store)
    assert [e.id for e in entries] == ["failed", "stopped", "good", "knee"]
    assert best[(DATASET, "diagnosis")].id == "good"
    assert default_model(entries, best).id == "good"


# ------------------------------------------------------------------------------ compare
def test_comparison_rows_difference_overlap_and_test_set(settings, store):
    make_model(settings, store, "a", auc=0.93, ci=[0.88, 0.98], val_auc=0.95,
               summary=GOOD_SUMMARY)
    make_model(settings, store, "b", auc=0.556, ci=[0.40, 0.70], val_auc=0.6,
               summary=STOPPED_SUMMARY, test_sha="other")
    entries, _ = catalog(store)
    a, b = sorted(entries, key=lambda e: e.id)
    rows = metric_rows(a, b)
    auc = rows[0]
    assert (auc["metric"], auc["first"], auc["second"]) == ("AUC", 0.93, 0.556)
    assert auc["difference"] == pytest.approx(-0.374) and auc["better"] == -1
    assert auc["overlap"] is False
    assert rows[-1]["set"] == "validation" and rows[-1]["better"] == -1
    same, sentence = same_test_set(a, b)
    assert same is False and "different test sets" in sentence
    assert "do not overlap" in verdict(a, b, rows) and a.name in verdict(a, b, rows)


# ------------------------------------------------------------------------------ delete
def test_delete_removes_the_model_files_never_a_dataset(settings, store, tmp_path):
    make_model(settings, store, "j1", auc=0.9, ci=[0.8, 0.97], val_auc=0.93,
               summary=GOOD_SUMMARY)
    ws = settings.jobs_dir / "j1"
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "image.png").write_bytes(b"png")
    (ws / "Logout" / "checkpoints").symlink_to(data, target_is_directory=True)
    store.upsert_datacard({"name": "D", "path": str(data)})
    done = delete_model(settings, store, "j1")
    assert sorted(done["removed"]) == ["Logout/checkpoints", "Logout/export", "Logout/model",
                                       "model_card.md"]
    assert (data / "image.png").read_bytes() == b"png"  # the link went, not what it led to
    assert (ws / "report.json").is_file() and (ws / "Logout" / "train.log").is_file()
    assert store.model("j1") is None and store.job("j1") is not None
    # a job folder that is a registered dataset's: nothing is deleted
    make_model(settings, store, "j2", auc=0.9, ci=[0.8, 0.97], val_auc=None,
               summary=GOOD_SUMMARY)
    store.upsert_datacard({"name": "E", "path": str(settings.jobs_dir / "j2" / "Logout")})
    with pytest.raises(ModelRemovalError, match="datasets are never deleted"):
        delete_model(settings, store, "j2")
    assert (settings.jobs_dir / "j2" / "Logout" / "model").is_dir() and store.model("j2")
    store.update_job("j2", status="running", pid=0)
    with pytest.raises(ModelRemovalError, match="still running"):
        delete_model(settings, store, "j2")


# ------------------------------------------------------------------------------ model card
def test_the_split_reads_as_a_sentence_not_a_dict():
    split = {"grouping_key": "table column 'Subject'", "method": "grouped_stratified",
             "seed": 0, "test_fraction": 0.15, "patient_key": {"guess": False},
             "train_groups": [f"p{i}" for i in range(85)],
             "test_groups": [f"t{i}" for i in range(15)],
             "counts": {"train": {"AD": 100, "CN": 70}, "test": {"AD": 20, "CN": 10}},
             "num_images": {"train": 170, "test": 30}}
    summary = {**GOOD_SUMMARY, "num_train": 140, "num_val": 30}
    sentence = split_sentence(split, summary)
    assert sentence.startswith("Split by patient (table column 'Subject'): 85 training / 15 "
                               "test patients (15% for test, stratified by class, seed 0).")
    assert "Images: 170 training, 30 of them held out for validation while training; 30 test."\
        in sentence and "training: AD 100, CN 70; test: AD 20, CN 10" in sentence
    card = render_model_card({"dataset": "ADNI", "task": "diagnosis", "dataset_path": "/d"},
                             {"metrics": {"auc": 0.9}, "num_test": 30}, summary, split,
                             "ADNI diagnosis v2")
    assert "{" not in card.split("## Model")[0] and "# Model card: ADNI diagnosis v2" in card
    assert core.RESEARCH_ONLY in card and "Do not use it to make or support decisions" in card
    kept = split_sentence({"grouping_key": "none (one group per image)",
                           "method": "kept_from_dataset", "seed": 42,
                           "num_images": {"train": 8, "test": 2}})
    assert kept == ("Split by image (the dataset gives no patient key): 8 training / 2 test "
                    "images (the dataset's own training and test folders). Images: 8 training;"
                    " 2 test.")


# ------------------------------------------------------------------------------ exports
def test_onnx_export_carries_class_names_task_and_input(tmp_path):
    import onnx
    import onnxruntime as ort
    import torch

    from ml_templates.common.export import NOTICE, export_model
    assert NOTICE == core.RESEARCH_ONLY
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2), torch.nn.Softmax(-1))
    results = export_model(net, torch.rand(1, 1, 4, 4), tmp_path, output_name="probabilities",
                           metadata={"task": "diagnosis", "class_names": ["NORMAL", "PNEUMONIA"],
                                     "input_size": [4, 4], "spacing_mm": None})
    assert results["onnx"]["verified"] and results["torchscript"]["verified"]
    meta = ort.InferenceSession(str(tmp_path / "model.onnx"),
                                providers=["CPUExecutionProvider"]) \
        .get_modelmeta().custom_metadata_map
    assert json.loads(meta["class_names"]) == ["NORMAL", "PNEUMONIA"]
    assert meta["task"] == "diagnosis" and json.loads(meta["input_size"]) == [4, 4]
    assert meta["input_name"] == "pixel_values" and "spacing_mm" not in meta
    assert onnx.load(str(tmp_path / "model.onnx")).doc_string == core.RESEARCH_ONLY
    extra = {"metadata.json": ""}
    torch.jit.load(str(tmp_path / "model.torchscript.pt"), _extra_files=extra)
    assert json.loads(extra["metadata.json"])["class_names"] == ["NORMAL", "PNEUMONIA"]


# ------------------------------------------------------------------------------ the page
def run_models_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/models.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page_text(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info", "warning",
                                                "error", "success")
                     for e in getattr(at, kind))


def test_page_versions_status_best_compare_archive_and_delete(settings, store):
    make_model(settings, store, "good", auc=0.93, ci=[0.88, 0.98], val_auc=0.95,
               summary=GOOD_SUMMARY, created_at=time.time() - 60)
    make_model(settings, store, "stopped", auc=0.556, ci=[0.40, 0.70], val_auc=0.6,
               summary=STOPPED_SUMMARY, job_status="stopped", test_sha="other")
    ws = settings.jobs_dir / "good"  # a card written before the split was a sentence
    (ws / "Datapath" / "split.json").write_text(json.dumps({
        "grouping_key": "DICOM PatientID", "method": "grouped_stratified", "seed": 42,
        "test_fraction": 0.2, "train_groups": ["a", "b", "c", "d"], "test_groups": ["e"],
        "counts": {"train": {"NORMAL": 40, "PNEUMONIA": 40}, "test": {"NORMAL": 20,
                                                                      "PNEUMONIA": 20}}}))
    (ws / "model_card.md").write_text(
        f"# Model card: {DATASET} — diagnosis\n\n> **{core.RESEARCH_ONLY}**\n\n## Data\n"
        "- Split: grouped_stratified by DICOM PatientID, seed 42;\n"
        '  train {"NORMAL": 40, "PNEUMONIA": 40}, test {"NORMAL": 20, "PNEUMONIA": 20}\n'
        "- 4 training and 1 test patients/groups; none on both sides.\n")
    at = run_models_page()
    card = next(m.value for m in at.markdown if "Model card:" in m.value)
    assert "Split by patient (DICOM PatientID): 4 training / 1 test patient (20% for test, " \
        "stratified by class, seed 42). Images: 80 training, 20 of them held out" in card
    assert '{"NORMAL"' not in card and core.RESEARCH_ONLY in card
    overview = at.dataframe[0].value
    assert list(overview["Model"]) == [f"{DATASET} diagnosis v2", f"{DATASET} diagnosis v1"]
    assert list(overview["Status"]) == ["⏸ Stopped early", "Complete"]
    assert list(overview["Best"]) == ["", "★ by validation"]
    # the best, not the newest, is open
    assert at.selectbox[0].value == "good" and at.subheader[0].value == f"{DATASET} diagnosis v1"
    text = page_text(at)
    assert ":green-badge[Complete]" in text and "Best AUC on validation]" in text
    assert "Best AUC on validation (0.950) of the 2 " in text
    assert core.RESEARCH_ONLY in text
    assert "(`metadata_props`: `class_names`, `task`) and the TorchScript" in text
    # compare: the stopped run beside it, on a different test set
    assert at.selectbox(key="compare-good").value == "stopped"
    assert "different test sets" in page_text(at)
    table = next(d.value for d in at.dataframe if "Difference" in d.value.columns)
    assert table.iloc[0]["Metric"] == "AUC" and table.iloc[0]["95% CIs overlap"] == "no"
    roc = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
               if "ROC curves of both models" in c.proto.spec)
    assert {t["name"] for t in roc["data"]} == {
        "Chance", f"{DATASET} diagnosis v1 · PNEUMONIA (AUC 1.000)",
        f"{DATASET} diagnosis v2 · PNEUMONIA (AUC 0.000)"}
    # the stopped model shows its status
    at.selectbox[0].set_value("stopped").run()
    assert ":orange-badge[Stopped early]" in page_text(at)
    assert "training was stopped at your request after 2 of 40 epochs" in page_text(at)
    # archive: hidden from the list, shown again with the toggle, restored
    at.button(key="archive-stopped").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert list(at.dataframe[0].value["Model"]) == [f"{DATASET} diagnosis v1"]
    assert "Archived" in page_text(at) and store.model("stopped")["archived_at"]
    at.toggle(key="models-show-archived").set_value(True).run()
    assert len(at.dataframe[0].value) == 2
    at.selectbox[0].set_value("stopped").run()
    at.button(key="restore-stopped").click().run()
    assert store.model("stopped")["archived_at"] is None
    # delete: only after the confirmation; files gone, row gone, audited
    at.selectbox[0].set_value("stopped").run()
    assert at.button(key="delete-stopped").disabled
    at.checkbox(key="delete-confirm-stopped").check().run()
    at.button(key="delete-stopped").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert store.model("stopped") is None
    assert not (settings.jobs_dir / "stopped" / "Logout" / "model").exists()
    assert f"Deleted {DATASET} diagnosis v2" in page_text(at).replace("\\", "")
    assert list(at.dataframe[0].value["Model"]) == [f"{DATASET} diagnosis v1"]
    actions = [r["action"] for r in store.rows("select action from audit order by id")]
    assert actions[-3:] == ["archive_model", "restore_model", "delete_model"]


def test_chat_links_to_the_model_by_its_versioned_name_and_the_page_opens_it(settings, store):
    make_model(settings, store, "good", auc=0.93, ci=[0.88, 0.98], val_auc=0.95,
               summary=GOOD_SUMMARY, created_at=time.time() - 60)
    make_model(settings, store, "stopped", auc=0.556, ci=[0.40, 0.70], val_auc=0.6,
               summary=STOPPED_SUMMARY, job_status="stopped")
    store.update_job("stopped", result={"status": "stopped", "metrics": {"auc": 0.556}})
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("pages/chat.py").run()
    assert not at.exception, [e.value for e in at.exception]
    links = {p.proto.query_string: p.proto.label for p in at.get("page_link")
             if p.proto.page == "models"}
    assert links == {
        "model=good": f"Open {DATASET} diagnosis v1 in Models: report and model card",
        "model=stopped": f"Open {DATASET} diagnosis v2 in Models: report and model card"}
    at.query_params["model"] = "stopped"  # the link opens that model, not the best
    at.switch_page("pages/models.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox[0].value == "stopped"


def test_the_chat_reads_a_versioned_or_an_old_model_name():
    from core.external_validation.request import parse_external_request
    models = [{"id": "m12", "name": "CXR diagnosis v12", "former_name": ""},
              {"id": "m1", "name": "CXR diagnosis v1",
               "former_name": "CXR diagnosis (densenet_small)"}]
    datasets = ["CXR", "Hospital B chest X-ray"]
    for message, wanted in (("evaluate CXR diagnosis v1 on Hospital B chest X-ray", "m1"),
                            ("evaluate CXR diagnosis v12 on Hospital B chest X-ray", "m12"),
                            ("evaluate CXR diagnosis (densenet_small) on Hospital B chest X-ray",
                             "m1")):
        asked = parse_external_request(message, datasets, models)
        assert asked is not None and (asked.model, asked.dataset) == (
            wanted, "Hospital B chest X-ray"), message
