"""External validation (issue 13): a trained model scored on a second registered dataset with the
same task and labels, from the CLI (`python -m crew evaluate`), the chat and the Models page —
all through crew.external.evaluate_on_dataset and core.external_validation.

One real diagnosis model is built by the crew in autopilot (one epoch, a tiny chest X-ray set,
"Hospital A") and scored on "Hospital B" once; the other tests read that result or are refused
before anything runs.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from conftest import crew_home, tree_digest
from core.external_validation.compat import ExternalValidationError, ModelFacts, check_labels
from core.external_validation.request import parse_external_request

APP = Path(__file__).resolve().parent.parent / "app.py"
HOSPITAL_A, HOSPITAL_B = "Hospital A chest X-ray", "Hospital B chest X-ray"
HOSPITAL_C = "Hospital C chest X-ray"  # other classes
ORGANS = "Tiny chest X-ray organs"     # another task


def _count_rows(store) -> dict:
    return {t: store.rows(f"select count(*) as n from {t}")[0]["n"]
            for t in ("jobs", "job_events", "models", "audit", "metrics")}


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    """A diagnosis model trained on Hospital A (the crew, autopilot, one epoch), then Hospital
    B (same classes), Hospital C (NORMAL vs COVID) and a segmentation set registered."""
    from core.config.training_defaults import DEFAULT_TRAINING
    from core.datasets.registration import register_dataset
    from core.demo.chest_xray import make_chest_xray_demo
    from core.demo.segmentation import make_xray_organ_demo_2d
    from core.jobs.lifecycle import create_job
    from crew.runner import run_job

    with pytest.MonkeyPatch.context() as mp:
        home, settings, store = crew_home(tmp_path_factory, mp, "external-home")
        mp.setitem(DEFAULT_TRAINING["diagnosis"], "epochs", 1)
        data = home / "data"
        a = make_chest_xray_demo(data / "a", patients_per_class=10, size=32)
        description = "Synthetic chest X-ray PNGs, NORMAL vs PNEUMONIA folders"
        assert register_dataset(settings, store, str(a), HOSPITAL_A,
                                description)["status"] == "registered"
        job_id = create_job(settings, store, "classify pneumonia versus normal chest X-rays",
                            "autopilot", auto_approve=True)
        result = run_job(settings, job_id)
        assert result["status"] == "succeeded", result["error"]
        b = make_chest_xray_demo(data / "b", patients_per_class=6, size=40, seed=1)
        assert register_dataset(settings, store, str(b), HOSPITAL_B,
                                "Chest X-ray PNGs from a second hospital, NORMAL vs PNEUMONIA "
                                "folders")["status"] == "registered"
        c = data / "c"
        shutil.copytree(b / "NORMAL", c / "NORMAL")
        shutil.copytree(b / "PNEUMONIA", c / "COVID")
        assert register_dataset(settings, store, str(c), HOSPITAL_C,
                                "Chest X-ray PNGs, NORMAL vs COVID folders")["status"] == \
            "registered"
        organs = make_xray_organ_demo_2d(data / "organs", n_cases=4, size=32)
        assert register_dataset(settings, store, str(organs), ORGANS,
                                "Synthetic 2D chest X-rays with lung and heart masks (PNG): "
                                "images/, masks/, labels.json.")["status"] == "registered"
        yield {"home": home, "settings": settings, "store": store, "job_id": job_id,
               "b": b, "c": c, "organs": organs}


@pytest.fixture(scope="module")
def evaluated(ext):
    """`python -m crew evaluate MODEL --dataset "Hospital B chest X-ray" --json` (in-process;
    the model itself runs in its child process)."""
    import contextlib
    import io

    from crew.cli import main
    before, digest = _count_rows(ext["store"]), tree_digest(ext["b"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["evaluate", ext["job_id"], "--dataset", HOSPITAL_B, "--json",
                   "--home", str(ext["home"])])
    return {"rc": rc, "report": json.loads(out.getvalue()), "before": before,
            "after": _count_rows(ext["store"]), "digest": digest}


@pytest.mark.slow
def test_cli_scores_the_model_on_the_second_hospital(ext, evaluated):
    assert evaluated["rc"] == 0
    report = evaluated["report"]
    images = sorted(p for p in ext["b"].rglob("*.png"))
    external, internal = report["external"], report["internal"]
    assert external["num_test"] == len(images) and external["dataset"] == HOSPITAL_B
    assert set(external) >= {"metrics", "ci95", "per_class", "confusion_matrix"}
    assert external["evaluator"] == "core.evaluation.diagnosis"
    for side in (internal, external):
        for key in ("auc", "accuracy", "f1_macro"):
            assert math.isfinite(side["metrics"][key]), (key, side)
    assert internal["dataset"] == HOSPITAL_A and internal["num_test"] > 0
    rows = {r["key"]: r for r in report["side_by_side"]}
    assert {"auc", "accuracy", "f1_macro"} <= set(rows)
    assert rows["auc"]["external"] == pytest.approx(external["metrics"]["auc"])
    assert report["research_only"].startswith("For research use only")
    # the model's own decision (threshold and temperature chosen on its validation set) decides
    stored = json.loads((ext["settings"].jobs_dir / ext["job_id"] / "report.json").read_text())
    if (stored.get("decision") or {}).get("threshold") is not None:
        assert report["decision"]["applied"] == "stored"
        assert external["decision"]["threshold"] == stored["decision"]["threshold"]
        assert external["decision"]["source"] == "stored"
    # the model's probabilities are calibrated once, by the model itself, not again on scoring
    assert external["decision"]["temperature"] == 1.0
    assert report["decision"]["model_temperature"] == pytest.approx(
        (stored.get("decision") or {}).get("temperature", 1.0))
    # written inside the model's job folder, never into the dataset; recorded by this process
    folder = Path(report["folder"])
    assert folder.parent == ext["settings"].jobs_dir / ext["job_id"] / "external"
    index = json.loads((folder / "Datapath" / "test.json").read_text())
    assert sorted(index) == [str(p) for p in images]
    assert json.loads((folder / "Datapath" / "label_dict.json").read_text()) == \
        json.loads((ext["settings"].jobs_dir / ext["job_id"] / "Datapath" /
                    "label_dict.json").read_text())
    assert tree_digest(ext["b"]) == evaluated["digest"]
    grew = {t: evaluated["after"][t] - evaluated["before"][t] for t in evaluated["before"]}
    assert grew == {"jobs": 0, "job_events": 1, "models": 0, "audit": 1, "metrics": 0}
    event = ext["store"].events(ext["job_id"])[-1]
    assert event["role"] == "External validation" and event["ok"] and "AUC" in event["result"]


@pytest.mark.slow
@pytest.mark.parametrize("dataset, words", [
    (HOSPITAL_C, ["COVID", "does not know"]),
    (ORGANS, ["offers segmentation", "diagnosis"]),
    (HOSPITAL_A, ["trained on"]),
    ("Hospital Z", ["no registered dataset", HOSPITAL_B]),
])
def test_an_incompatible_set_is_refused_before_anything_is_written(ext, dataset, words):
    from crew.external import evaluate_on_dataset
    store, ws = ext["store"], ext["settings"].jobs_dir / ext["job_id"]
    before, runs = _count_rows(store), sorted((ws / "external").glob("*"))
    digests = {k: tree_digest(ext[k]) for k in ("c", "organs")}
    with pytest.raises(ExternalValidationError) as refused:
        evaluate_on_dataset(ext["settings"], store, ext["job_id"], dataset)
    for word in words:
        assert word in str(refused.value), str(refused.value)
    assert _count_rows(store) == before
    assert sorted((ws / "external").glob("*")) == runs
    assert {k: tree_digest(ext[k]) for k in ("c", "organs")} == digests


@pytest.mark.slow
def test_cli_errors_name_the_problem(ext, capsys):
    from crew.cli import main
    home = ["--home", str(ext["home"])]
    assert main(["evaluate", "no-such-model", "--dataset", HOSPITAL_B, *home]) == 2
    assert "no model is called 'no-such-model'" in capsys.readouterr().err
    assert main(["evaluate", "latest", "--dataset", HOSPITAL_C, *home]) == 2
    assert "COVID" in capsys.readouterr().err


def _app(ext, monkeypatch) -> AppTest:
    monkeypatch.setenv("M3B_HOME", str(ext["home"]))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.slow
def test_models_page_shows_internal_and_external_side_by_side(ext, evaluated, monkeypatch):
    at = _app(ext, monkeypatch)
    at.switch_page("pages/models.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(m.value == "#### External validation" for m in at.markdown)
    chooser = next(s for s in at.selectbox if s.label == "External dataset")
    assert chooser.options == [HOSPITAL_B]  # C has other classes, the organs another task
    assert any(e.label.startswith("Datasets that do not fit (2)") for e in at.expander)
    past = [e for e in at.expander if e.label.startswith(HOSPITAL_B)]
    cases = evaluated["report"]["external"]["num_test"]
    assert len(past) == 1 and f"{cases} cases" in past[0].label
    frame = at.dataframe[-1].value
    assert list(frame.columns) == ["Metric", "Internal", "Internal 95% CI", "External",
                                   "External 95% CI"]
    assert "AUC" in set(frame["Metric"])
    assert any(b.label == "Run external validation" for b in at.button)


@pytest.mark.slow
def test_chat_reads_the_request_and_replies_without_a_build_job(ext, evaluated, monkeypatch):
    store = ext["store"]
    jobs = len(store.jobs())
    at = _app(ext, monkeypatch)
    at.chat_input[0].set_value(f"test this model on the {HOSPITAL_C}").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("COVID" in e.value for e in at.error), [e.value for e in at.error]
    assert len(store.jobs()) == jobs  # not sent to the build crew
    assert not any("Scored" in s.value for s in at.success)  # the CLI's run is no chat turn
    # a finished chat evaluation is kept in the store: a new session shows the exchange
    from core.external_validation.run import record
    record(store, evaluated["report"], "chat")
    at = _app(ext, monkeypatch)
    assert any("Scored" in s.value and HOSPITAL_B in s.value for s in at.success)
    assert {"AUC", "Accuracy"} <= set(at.dataframe[-1].value["Metric"])


# ------------------------------------------------------------------------------ no model needed

def _facts(template: str, classes: list[str], multi: bool = False) -> ModelFacts:
    return ModelFacts("m", "model", "m", Path("."), template, template, "Train set",
                      dimension="2D", classes=classes, multi_label=multi)


def test_labels_must_be_the_models_or_some_of_them():
    facts = _facts("diagnosis", ["NORMAL", "PNEUMONIA"])
    assert check_labels(facts, "B", ["normal", "Pneumonia"], "2D", False) == \
        {"normal": "NORMAL", "Pneumonia": "PNEUMONIA"}
    assert check_labels(facts, "B", ["PNEUMONIA"], "2D", False) == {"PNEUMONIA": "PNEUMONIA"}
    with pytest.raises(ExternalValidationError, match="COVID"):
        check_labels(facts, "B", ["NORMAL", "COVID"], "2D", False)
    with pytest.raises(ExternalValidationError, match="dimension differs"):
        check_labels(facts, "B", ["NORMAL"], "3D", False)
    with pytest.raises(ExternalValidationError, match="single-label"):
        check_labels(facts, "B", ["NORMAL"], "2D", True)
    seg = _facts("segmentation", ["lung", "heart"])
    assert check_labels(seg, "B", ["heart", "lung"], "2D", False) == \
        {"heart": "heart", "lung": "lung"}
    with pytest.raises(ExternalValidationError, match="does not label heart"):
        check_labels(seg, "B", ["lung"], "2D", False)


def test_segmentation_masks_are_renumbered_to_the_models_order(tmp_path):
    from core.external_validation.run import ExternalRun, _model_index
    run = ExternalRun(tmp_path)
    run.datapath.mkdir()
    (run.datapath / "test.json").write_text(json.dumps([
        {"image_path": "i0.png", "label_path": "m0.png", "labels": ["heart", "lung"]},
        {"image_path": "i1.png", "label_path": "m1.png", "labels": ["Heart", "Lung"],
         "label_values": [255, 128]}]))
    _model_index(_facts("segmentation", ["lung", "heart"]), run, "segmentation",
                 {"heart": "heart", "lung": "lung", "Heart": "heart", "Lung": "lung"})
    entries = json.loads((run.datapath / "test.json").read_text())
    assert [(e["labels"], e["label_values"]) for e in entries] == \
        [(["lung", "heart"], [2, 1]), (["lung", "heart"], [128, 255])]


DATASETS = [HOSPITAL_A, HOSPITAL_B, "Demo chest X-ray pneumonia (synthetic)",
            "Tiny abdominal CT organs"]
MODELS = [{"id": "20261125-033151-aa5a52", "dataset": HOSPITAL_A,
           "name": "Hospital A chest X-ray diagnosis (densenet_small)"},
          {"id": "20261120-000000-bbbbbb", "dataset": "Tiny abdominal CT organs",
           "name": "Tiny abdominal CT organs segmentation (unet_small)"}]


@pytest.mark.parametrize("message, model, dataset", [
    ("test this model on the Hospital B set", "", HOSPITAL_B),
    ("Test this model on the Hospital B set.", "", HOSPITAL_B),
    ("evaluate 20261125-033151-aa5a52 on Hospital B chest X-ray", MODELS[0]["id"], HOSPITAL_B),
    ("Evaluate Hospital A chest X-ray diagnosis (densenet_small) on Hospital B chest X-ray",
     MODELS[0]["id"], HOSPITAL_B),
    ("How well does my model do on hospital b?", "", HOSPITAL_B),
    ("run external validation of the latest model against the hospital B data", "",
     HOSPITAL_B),
    ("validate the Hospital A model on Hospital B", MODELS[0]["id"], HOSPITAL_B),
    ("does the model generalise to hospital b", "", HOSPITAL_B),
    ("can you check it on the demo set please", "", DATASETS[2]),
    ("score the abdominal CT model on hospital a", MODELS[1]["id"], HOSPITAL_A),
])
def test_chat_requests_for_an_external_evaluation_are_read(message, model, dataset):
    asked = parse_external_request(message, DATASETS, MODELS)
    assert asked is not None and not asked.problem, asked
    assert (asked.model, asked.dataset) == (model, dataset)


@pytest.mark.parametrize("message", [
    "classify pneumonia versus normal chest X-rays",
    "build a pneumonia model on the Hospital B set and test it",
    "train on hospital b and evaluate on hospital a",
    "segment the liver and spleen on abdominal CT",
    "test on chest x-ray",
    "what datasets do I have?",
])
def test_other_messages_go_to_the_build_crew(message):
    assert parse_external_request(message, DATASETS, MODELS) is None


def test_an_unknown_set_is_named_back():
    asked = parse_external_request("test this model on the Hospital Z set", DATASETS, MODELS)
    assert asked is not None and asked.dataset == ""
    assert "hospital z set" in asked.problem and HOSPITAL_B in asked.problem
