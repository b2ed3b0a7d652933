from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from core.evaluation import EvaluationError, evaluate_diagnosis
from core.datasets.registration import register_dataset
from tests.conftest import tree_digest


def test_register_writes_card_and_validation_report(settings, store, demo_folder):
    before = tree_digest(demo_folder)
    result = register_dataset(settings, store, str(demo_folder), "CXR", "chest X-ray pneumonia")
    assert result["status"] == "registered", result
    card = json.loads(open(result["datacard_path"]).read())
    assert card["modality"] == "X-ray" and card["anatomy"] == "chest"
    assert card["class_counts"]["NORMAL"] > 100
    report = json.loads((settings.datacards_dir / "CXR.validation.json").read_text())
    assert report["valid"] and report["scan"]["num_groups"] < report["scan"]["num_samples"]
    assert {r["name"] for r in store.datacards()} >= {"CXR"}
    assert store.rows("select action from audit")[-1]["action"] == "register_dataset"
    assert tree_digest(demo_folder) == before


def test_corrupt_image_makes_dataset_invalid_and_writes_nothing(settings, store, demo_folder,
                                                                tmp_path):
    data = tmp_path / "bad"
    shutil.copytree(demo_folder, data)
    (data / "NORMAL" / "patient9999_1.png").write_bytes(b"not a png")
    result = register_dataset(settings, store, str(data), "Bad", "")
    assert result["status"] == "invalid"
    assert "cannot be read as images" in result["errors"][0]
    assert "patient9999_1.png" in result["errors"][0]
    assert list(settings.datacards_dir.iterdir()) == []
    assert store.datacards() == []


def test_single_class_and_name_clash(settings, store, demo_folder, tmp_path):
    one = tmp_path / "one"
    shutil.copytree(demo_folder / "NORMAL", one / "NORMAL")
    result = register_dataset(settings, store, str(one), "One", "")
    assert result["status"] == "invalid" and "at least two" in result["errors"][0]
    assert register_dataset(settings, store, str(demo_folder), "CXR", "")["status"] == "registered"
    other = tmp_path / "other"
    shutil.copytree(demo_folder, other)
    clash = register_dataset(settings, store, str(other), "CXR", "")
    assert clash["status"] == "invalid" and "already registered" in clash["errors"][0]


def _write_eval_inputs(tmp_path, labels, probs):
    dp = tmp_path / "Datapath"
    dp.mkdir()
    test = {f"/img/{i}.png": [lbl] for i, lbl in enumerate(labels)}
    (dp / "test.json").write_text(json.dumps(test))
    (dp / "label_dict.json").write_text(json.dumps({"A": 0, "B": 1}))
    preds = {f"/img/{i}.png": [1 - p, p] for i, p in enumerate(probs)}
    (tmp_path / "pred.json").write_text(json.dumps(preds))
    return dp


def test_evaluator_matches_sklearn_and_ci_contains_estimate(tmp_path):
    rng = np.random.default_rng(0)
    labels = ["A"] * 50 + ["B"] * 50
    probs = np.clip(np.r_[rng.normal(0.35, 0.2, 50), rng.normal(0.65, 0.2, 50)], 0, 1)
    dp = _write_eval_inputs(tmp_path, labels, probs)
    report = evaluate_diagnosis(dp, tmp_path / "pred.json")
    expected = roc_auc_score([0] * 50 + [1] * 50, probs)
    assert report["metrics"]["auc"] == pytest.approx(expected)
    lo, hi = report["ci95"]["auc"]
    assert lo <= report["metrics"]["auc"] <= hi and hi - lo < 0.3
    assert sum(map(sum, report["confusion_matrix"]["matrix"])) == 100
    assert 0 <= report["per_class"]["B"]["sensitivity"] <= 1


def test_evaluator_refuses_missing_predictions(tmp_path):
    dp = _write_eval_inputs(tmp_path, ["A", "B"], [0.2, 0.8])
    preds = json.loads((tmp_path / "pred.json").read_text())
    preds.pop("/img/1.png")
    (tmp_path / "pred.json").write_text(json.dumps(preds))
    with pytest.raises(EvaluationError, match="1 of 2 test images have no prediction"):
        evaluate_diagnosis(dp, tmp_path / "pred.json")


def test_multi_label_evaluator(tmp_path):
    dp = tmp_path / "Datapath"
    dp.mkdir()
    rng = np.random.default_rng(1)
    names = ["Effusion", "Nodule", "No Finding"]
    test, preds, truth = {}, {}, []
    for i in range(90):
        labels = [n for n in names[:2] if rng.random() < 0.4] or ["No Finding"]
        row = [1 if n in labels else 0 for n in names]
        truth.append(row)
        test[f"/img/{i}.png"] = labels
        preds[f"/img/{i}.png"] = [float(np.clip(0.7 * t + rng.normal(0.15, 0.2), 0, 1))
                                  for t in row]
    (dp / "test.json").write_text(json.dumps(test))
    (dp / "label_dict.json").write_text(json.dumps({n: i for i, n in enumerate(names)}))
    (tmp_path / "pred.json").write_text(json.dumps(preds))
    report = evaluate_diagnosis(dp, tmp_path / "pred.json")
    assert report["multi_label"] and report["confusion_matrix"] is None
    truth, probs = np.array(truth), np.array([preds[f"/img/{i}.png"] for i in range(90)])
    expected = np.mean([roc_auc_score(truth[:, c], probs[:, c]) for c in range(3)])
    assert report["metrics"]["auc"] == pytest.approx(expected)
    assert report["per_class"]["Nodule"]["support"] == truth[:, 1].sum()
    assert report["ci95"]["auc"][0] <= report["metrics"]["auc"] <= report["ci95"]["auc"][1]
