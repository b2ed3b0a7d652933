"""Decisions, calibration and model selection (issue 13): the evaluator turns a ranking into a
decision at a threshold chosen on validation predictions, calibrates probabilities with a
temperature fitted on validation, and the selection callback keeps the epoch with the lowest
validation loss even when the validation AUC saturates."""
from __future__ import annotations

import json

import numpy as np
import pytest
from transformers import TrainerControl, TrainerState

from core.evaluation import EvaluationError, evaluate_diagnosis
from core.evaluation.calibration import (apply_temperature, ece_uncertainty,
                                         expected_calibration_error, fit_temperature, reliability)
from core.viewing.decision_views import ece_spread_text
from core.evaluation.decisions import Decision
from core.evaluation.step import check_temperature
from ml_templates.common.callbacks import SelectionCallback
from ml_templates.diagnosis.train import validation_items, validation_size

NAMES = {"NORMAL": 0, "PNEUMONIA": 1}


def _scores(rng, n_neg: int, n_pos: int, centre: float, spread: float) -> np.ndarray:
    """Positive-class probabilities that rank perfectly (or nearly) but sit on one side of 0.5:
    the failure the issue saw (AUC 1.0, accuracy 0.5)."""
    neg = rng.uniform(centre - spread, centre - spread / 4, n_neg)
    pos = rng.uniform(centre - spread / 4 + 0.01, centre, n_pos)
    return np.r_[neg, pos]


def _write(tmp_path, test_scores, test_labels, val_scores=None, val_labels=None,
           names=NAMES) -> tuple:
    dp = tmp_path / "Datapath"
    dp.mkdir(exist_ok=True)
    inv = {v: k for k, v in names.items()}
    test = {f"/data/test/{i}.png": [inv[y]] for i, y in enumerate(test_labels)}
    train = {f"/data/train/{i}.png": [inv[y]] for i, y in enumerate(val_labels or [])}
    train["/data/train/extra.png"] = [inv[0]]
    (dp / "test.json").write_text(json.dumps(test))
    (dp / "train.json").write_text(json.dumps(train))
    (dp / "label_dict.json").write_text(json.dumps(names))
    logout = tmp_path / "Logout"
    logout.mkdir(exist_ok=True)
    (logout / "predictions.json").write_text(json.dumps(
        {f"/data/test/{i}.png": [1 - s, s] for i, s in enumerate(test_scores)}))
    if val_scores is not None:
        (logout / "val_predictions.json").write_text(json.dumps(
            {f"/data/train/{i}.png": [1 - s, s] for i, s in enumerate(val_scores)}))
    return dp, logout / "predictions.json"


def test_saturated_ranking_gets_a_decision_at_the_validation_threshold(tmp_path):
    rng = np.random.default_rng(3)
    labels = [0] * 30 + [1] * 30
    dp, preds = _write(tmp_path, _scores(rng, 30, 30, 0.45, 0.4), labels,
                       _scores(rng, 30, 30, 0.45, 0.4), labels)
    report = evaluate_diagnosis(dp, preds)
    point = report["operating_point"]
    assert report["metrics"]["auc"] == pytest.approx(1.0)
    assert point["positive_class"] == "PNEUMONIA" and point["rule"] == "youden"
    # every positive probability is below 0.5: argmax would call all of them NORMAL
    assert report["calibration"]["temperature"] != 1.0
    assert point["threshold"] < 0.5 or report["calibration"]["temperature"] < 1.0
    assert report["metrics"]["accuracy"] >= 0.9 and point["test"]["accuracy"] >= 0.9
    for key in ("sensitivity", "specificity", "ppv", "npv", "accuracy"):
        lo, hi = point["ci95"][key]
        assert lo <= point["test"][key] <= hi
    assert report["ci95"]["sensitivity"][0] <= report["metrics"]["sensitivity"]
    assert sum(map(sum, report["confusion_matrix"]["matrix"])) == 60
    assert report["decision"]["threshold"] == point["threshold"]
    assert report["decision"]["source"] == "validation"
    from core.jobs.model_card import render_model_card
    card = render_model_card({"dataset": "CXR", "task": "diagnosis", "dataset_path": "/d"},
                             report, {"selection": "kept epoch 9: best validation loss (0.18)",
                                      "network": "densenet_small"}, {})
    assert f"**PNEUMONIA** when its probability is at least **{point['threshold']:.3f}**" in card
    assert "Calibration: temperature scaling fitted on validation" in card
    assert "kept epoch 9" in card


def test_target_sensitivity_rule_and_stored_decision(tmp_path):
    rng = np.random.default_rng(5)
    val_labels = [0] * 100 + [1] * 100
    val = np.r_[rng.normal(0.3, 0.15, 100), rng.normal(0.6, 0.15, 100)].clip(0.01, 0.99)
    test_labels = [0] * 80 + [1] * 80
    test = np.r_[rng.normal(0.3, 0.15, 80), rng.normal(0.6, 0.15, 80)].clip(0.01, 0.99)
    dp, preds = _write(tmp_path, test, test_labels, val, val_labels)
    youden = evaluate_diagnosis(dp, preds)
    sensitive = evaluate_diagnosis(dp, preds, operating_rule="at 95% sensitivity")
    point = sensitive["operating_point"]
    assert point["rule"] == "sensitivity" and point["target"] == 0.95
    assert point["validation"]["sensitivity"] >= 0.95
    assert point["threshold"] < youden["operating_point"]["threshold"]
    assert point["test"]["sensitivity"] > youden["operating_point"]["test"]["sensitivity"]
    with pytest.raises(EvaluationError, match="cannot read an operating point"):
        evaluate_diagnosis(dp, preds, operating_rule="as good as possible")
    # another dataset: no validation predictions, the stored decision is applied as it is
    (tmp_path / "Logout" / "val_predictions.json").unlink()
    external = evaluate_diagnosis(dp, preds, decision=sensitive["decision"])
    assert external["decision"]["source"] == "stored"
    assert external["operating_point"]["threshold"] == point["threshold"]
    assert external["operating_point"]["test"] == point["test"]
    plain = evaluate_diagnosis(dp, preds)
    assert plain["operating_point"] is None and plain["calibration"]["method"] == "none"


def test_validation_predictions_must_not_touch_test_images(tmp_path):
    dp, preds = _write(tmp_path, [0.2, 0.8], [0, 1], [0.3, 0.7], [0, 1])
    val = tmp_path / "Logout" / "val_predictions.json"
    rows = json.loads(val.read_text())
    rows["/data/test/0.png"] = [0.9, 0.1]
    val.write_text(json.dumps(rows))
    with pytest.raises(EvaluationError, match="are test images"):
        evaluate_diagnosis(dp, preds)
    rows.pop("/data/test/0.png")
    rows["/elsewhere/x.png"] = [0.5, 0.5]
    val.write_text(json.dumps(rows))
    with pytest.raises(EvaluationError, match="not training images"):
        evaluate_diagnosis(dp, preds)


def test_temperature_scaling_fixes_overconfidence_and_keeps_the_ranking():
    rng = np.random.default_rng(0)

    def overconfident(n):
        y = rng.integers(0, 3, n)
        logits = rng.normal(0, 1, (n, 3))
        logits[np.arange(n), y] += 1.2          # right about 60 % of the time ...
        z = logits * 6.0                        # ... but claims ~99 %
        p = np.exp(z - z.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True), y
    val_p, val_y = overconfident(600)
    test_p, test_y = overconfident(600)
    fit = fit_temperature(val_p, val_y)
    assert fit["fitted"] and fit["temperature"] > 3 and fit["nll_after"] < fit["nll_before"]
    after = apply_temperature(test_p, fit["temperature"], False)
    assert (after.argmax(1) == test_p.argmax(1)).all()
    before_ece = expected_calibration_error(test_p, test_y)
    assert before_ece > 0.2 and expected_calibration_error(after, test_y) < 0.06
    bins = reliability(after, test_y)
    assert sum(b["count"] for b in bins) == 600
    assert all(b["lower"] <= b["confidence"] <= b["upper"] for b in bins)
    small = fit_temperature(val_p[:5], val_y[:5])
    assert not small["fitted"] and small["temperature"] == 1.0 and "not calibrated" in small["note"]
    multi = fit_temperature(np.full((50, 2), 0.99), np.tile([1, 0], (50, 1)), multi_label=True)
    assert multi["temperature"] > 1.0  # half the 0.99s are wrong: soften


def test_multi_label_thresholds_per_label(tmp_path):
    dp = tmp_path / "Datapath"
    dp.mkdir()
    rng = np.random.default_rng(2)
    names = ["Effusion", "Nodule"]
    index, preds = {}, {}
    for split, n in (("val", 120), ("test", 120)):
        for i in range(n):
            row = [int(rng.random() < 0.4), int(rng.random() < 0.3)]
            key = f"/data/{split}/{i}.png"
            index.setdefault(split, {})[key] = [nm for nm, t in zip(names, row) if t]
            # Nodule scores rank well but all sit under 0.5: a fixed 0.5 never detects it
            preds.setdefault(split, {})[key] = [
                float(np.clip(0.6 * row[0] + rng.normal(0.2, 0.1), 0.01, 0.99)),
                float(np.clip(0.2 * row[1] + rng.normal(0.15, 0.04), 0.01, 0.49))]
    (dp / "test.json").write_text(json.dumps(index["test"]))
    (dp / "train.json").write_text(json.dumps(index["val"]))
    (dp / "label_dict.json").write_text(json.dumps({n: i for i, n in enumerate(names)}))
    (tmp_path / "predictions.json").write_text(json.dumps(preds["test"]))
    (tmp_path / "val_predictions.json").write_text(json.dumps(preds["val"]))
    report = evaluate_diagnosis(dp, tmp_path / "predictions.json")
    thresholds = report["decision"]["thresholds"]
    assert report["multi_label"] and set(thresholds) == set(names)
    assert thresholds["Nodule"] < 0.5 or report["calibration"]["temperature"] < 1.0
    assert report["per_class"]["Nodule"]["sensitivity"] > 0.6
    assert report["per_class"]["Nodule"]["threshold"] == thresholds["Nodule"]


def test_saved_temperature_must_match_the_refit():
    report = {"calibration": {"temperature": 1.8}, "decision": {"source": "validation"}}
    check_temperature(report, {"temperature": 1.8})
    check_temperature(report, {})  # a run from before calibration
    with pytest.raises(EvaluationError, match="do not belong together"):
        check_temperature(report, {"temperature": 1.0})
    assert Decision.from_json({"temperature": 2.0, "unknown": 1}).temperature == 2.0
    with pytest.raises(EvaluationError, match="positive"):
        Decision.from_json({"temperature": -1})


def _run_selection(callback: SelectionCallback, history: list[dict]) -> TrainerControl:
    state, control = TrainerState(), TrainerControl()
    for epoch, metrics in enumerate(history, start=1):
        state.epoch = float(epoch)
        control = callback.on_evaluate(None, state, control, metrics=metrics)
        if control.should_training_stop:
            break
    return control


def test_selection_keeps_the_lowest_validation_loss_when_auc_saturates():
    # AUC reaches 1.0 at epoch 2 and stays; the loss keeps falling until epoch 9
    losses = [0.9, 0.6, 0.45, 0.35, 0.3, 0.26, 0.22, 0.2, 0.18] + [0.19 + 0.01 * i
                                                                 for i in range(12)]
    history = [{"eval_loss": loss, "eval_auc": min(1.0, 0.9 + 0.1 * i)}
               for i, loss in enumerate(losses)]
    selection = SelectionCallback("loss", False, patience=5, min_epochs=3,
                                  description="validation loss")
    control = _run_selection(selection, history)
    assert control.should_training_stop
    summary = selection.summary()
    assert summary["epoch_kept"] == 9 and summary["selection_value"] == pytest.approx(0.18)
    assert selection.stop_reason() == ("early_stopped at 14: no validation loss improvement "
                                       "for 5 epochs")
    assert "kept epoch 9" in summary["selection"]
    assert selection.stop_reason("stopped by the user") == "stopped by the user"
    # the same history watched by AUC would have kept epoch 2
    by_auc = SelectionCallback("auc", True, patience=5, min_epochs=3)
    _run_selection(by_auc, history)
    assert by_auc.summary()["epoch_kept"] == 2


def test_selection_never_stops_before_min_epochs():
    flat = [{"eval_loss": 0.5}] * 12
    selection = SelectionCallback("loss", False, patience=2, min_epochs=8)
    _run_selection(selection, flat)
    assert selection.early_stopped_at == 8
    done = SelectionCallback("loss", False, patience=0, min_epochs=1)
    _run_selection(done, flat)
    assert done.stop_reason() == "completed" and done.summary()["epoch_kept"] == 1


def test_validation_split_has_a_floor_by_patient():
    assert validation_size(100, 0.15, 15) == 15
    assert validation_size(40, 0.15, 15) == 10      # capped at a quarter of the class
    assert validation_size(1000, 0.15, 15) == 150   # the fraction when it is larger
    assert validation_size(1, 0.15, 15) == 0 and validation_size(3, 0.15, 15) == 1
    items = [(f"/p{p}/img{i}.png", ["A" if p % 2 else "B"]) for p in range(120) for i in range(3)]
    groups = {path: path.split("/")[1] for path, _ in items}
    train, val = validation_items(items, groups, 0.05, seed=1, floor_per_class=15)
    val_patients = {groups[p] for p, _ in val}
    assert len(val_patients) == 30 and not val_patients & {groups[p] for p, _ in train}
    assert {lbl[0] for _, lbl in val} == {"A", "B"}


def test_plan_reads_and_edits_the_operating_point(settings):
    from core.planning.plan import operating_point_of
    from core.planning.plan_edits import PlanEditError, validate_edits

    assert operating_point_of("classify pneumonia at 95% sensitivity") == "95% sensitivity"
    assert operating_point_of("screen for TB with specificity of 0.9") == "90% specificity"
    assert operating_point_of("classify COVID-19 vs pneumonia from chest CT") == "youden"
    assert operating_point_of("high sensitivity please") == "youden"  # no target to read
    plan = {"status": "ready", "template": "diagnosis", "task": "diagnosis", "dataset": "CXR",
            "model": "densenet_small", "operating_point": "youden", "split": {}}
    edited = validate_edits(settings, plan, {"operating_point": "at 90 % specificity"})
    assert edited.changes == {"operating_point": ("youden", "90% specificity")}
    assert edited.plan["operating_point"] == edited.plan["user_edits"]["operating_point"]
    assert validate_edits(settings, plan, {"operating_point": "Youden"}).changes == {}
    with pytest.raises(PlanEditError, match="operating point: cannot read"):
        validate_edits(settings, plan, {"operating_point": "as sensitive as you can"})
    with pytest.raises(PlanEditError, match="diagnosis only"):
        validate_edits(settings, {**plan, "template": "segmentation", "task": "segmentation"},
                       {"operating_point": "95% sensitivity"})


def test_detection_score_threshold_is_chosen_on_validation(tmp_path):
    from core.evaluation.detection import evaluate_detection

    rng = np.random.default_rng(4)

    def split(name: str, n: int) -> tuple[list, list]:
        index, preds = [], []
        for i in range(n):
            x, y = (float(v) for v in rng.integers(5, 40, 2))
            truth = [[x, y, x + 12, y + 12]] if i % 3 else []
            boxes, scores = [], []
            if truth:  # the true box found with a middling score
                boxes.append([x + 1, y, x + 13, y + 12])
                scores.append(float(rng.uniform(0.3, 0.6)))
            for _ in range(2):  # false alarms, all under 0.25
                fx, fy = (float(v) for v in rng.integers(60, 90, 2))
                boxes.append([fx, fy, fx + 8, fy + 8])
                scores.append(float(rng.uniform(0.02, 0.25)))
            key = f"/data/{name}/{i}.png"
            index.append({"image_path": key, "boxes": truth, "labels": ["nodule"] * len(truth)})
            preds.append({"image_path": key, "boxes": boxes, "scores": scores,
                          "labels": ["nodule"] * len(boxes)})
        return index, preds
    dp = tmp_path / "Datapath"
    dp.mkdir()
    val_index, val_preds = split("train", 30)
    test_index, test_preds = split("test", 30)
    (dp / "train.json").write_text(json.dumps(val_index))
    (dp / "test.json").write_text(json.dumps(test_index))
    (dp / "label_dict.json").write_text(json.dumps({"nodule": 0}))
    (tmp_path / "predictions.json").write_text(json.dumps(test_preds))
    (tmp_path / "val_predictions.json").write_text(json.dumps(val_preds))
    report = evaluate_detection(dp, tmp_path / "predictions.json", n_boot=200)
    point = report["operating_point"]
    assert 0.25 < point["threshold"] < 0.3 and report["decision"]["source"] == "validation"
    assert point["test"]["precision"] == 1.0 and point["test"]["recall"] == 1.0
    assert point["validation"]["f1"] == 1.0 and point["num_val"] == 30
    assert point["ci95"]["recall"][0] <= 1.0
    per_image = {row["image_path"]: row for row in report["per_image"]}  # the viewer's list
    assert list(per_image) == [t["image_path"] for t in test_index]
    assert all(row["found"] == row["true_boxes"] == len(t["boxes"]) and row["missed"] == 0
               and row["false_boxes"] == 0 for row, t in zip(per_image.values(), test_index))
    from core.jobs.model_card import render_model_card
    card = render_model_card({"dataset": "Nod", "task": "detection", "dataset_path": "/d"},
                             report, {}, {})
    assert f"score at least **{point['threshold']:.3f}**" in card and "recall 1.000" in card
    # without validation predictions the stored threshold is applied; a leak is refused
    (tmp_path / "val_predictions.json").unlink()
    stored = evaluate_detection(dp, tmp_path / "predictions.json", n_boot=50,
                                decision={"score_threshold": 0.1})
    assert stored["operating_point"]["source"] == "stored"
    assert stored["operating_point"]["test"]["precision"] < 0.6
    false_alarms = [row["false_boxes"] for row in stored["per_image"]]  # scored 0.02-0.25
    assert sum(false_alarms) == sum(s >= 0.1 for p in test_preds for s in p["scores"][-2:])
    assert evaluate_detection(dp, tmp_path / "predictions.json", n_boot=50)["per_image"] == []
    assert evaluate_detection(dp, tmp_path / "predictions.json", n_boot=50)[
        "operating_point"] is None
    (tmp_path / "val_predictions.json").write_text(json.dumps(test_preds[:3]))
    with pytest.raises(EvaluationError, match="are test images"):
        evaluate_detection(dp, tmp_path / "predictions.json", n_boot=50)


def test_fast_metrics_equal_scikit_learn():
    from sklearn.metrics import f1_score, roc_auc_score

    from core.evaluation.diagnosis import diagnosis_metrics, multi_label_metrics
    rng = np.random.default_rng(9)
    for n_classes in (2, 3, 5):
        y = rng.integers(0, n_classes, 200)
        p = rng.dirichlet(np.ones(n_classes), 200).round(2) + 1e-3  # rounded: many ties
        p /= p.sum(axis=1, keepdims=True)
        m = diagnosis_metrics(y, p, n_classes)
        assert m["f1_macro"] == pytest.approx(f1_score(y, p.argmax(1), average="macro",
                                                       labels=list(range(n_classes)),
                                                       zero_division=0))
        expected = roc_auc_score(y, p[:, 1]) if n_classes == 2 else roc_auc_score(
            y, p, multi_class="ovr", average="macro")
        assert m["auc"] == pytest.approx(expected)
    assert np.isnan(diagnosis_metrics(np.zeros(5, int), np.full((5, 3), 1 / 3), 3)["auc"])
    truth = rng.integers(0, 2, (150, 4))
    probs = rng.random((150, 4)).round(1)
    m = multi_label_metrics(truth, probs)
    assert m["f1_macro"] == pytest.approx(f1_score(truth, probs >= 0.5, average="macro",
                                                   zero_division=0))
    assert m["auc"] == pytest.approx(np.mean([roc_auc_score(truth[:, c], probs[:, c])
                                              for c in range(4)]))


def test_perfectly_separated_small_validation_does_not_drive_the_temperature_to_zero():
    # 20 validation cases, all right with 0.7-0.9: plain NLL would sharpen without bound
    rng = np.random.default_rng(1)
    y = np.array([0] * 10 + [1] * 10)
    p_true = rng.uniform(0.7, 0.9, 20)
    probs = np.where(y[:, None] == np.arange(2), p_true[:, None], 1 - p_true[:, None])
    fit = fit_temperature(probs, y)
    calibrated = apply_temperature(probs, fit["temperature"], False)
    assert 0.3 < fit["temperature"] < 1.0      # sharpened, but not to the bound
    assert calibrated.max(axis=1).mean() == pytest.approx(11 / 12, abs=0.03)  # (N+1)/(N+2)
    assert fit["note"] == ""


def test_a_creeping_loss_does_not_restart_patience_but_the_best_epoch_is_kept():
    losses = [0.5, 0.3, 0.2] + [0.2 * (1 - 0.002 * i) for i in range(1, 12)]
    selection = SelectionCallback("loss", False, patience=4, min_epochs=3, rel_delta=0.01,
                                  description="validation loss")
    _run_selection(selection, [{"eval_loss": v} for v in losses])
    assert selection.early_stopped_at == 7        # 4 epochs after the last 1 % improvement
    assert selection.summary()["epoch_kept"] == 7  # yet the lowest loss seen is kept
    assert "improvement of more than 1% for 4 epochs" in selection.stop_reason()


def test_ece_uncertainty_tells_chance_from_miscalibration():
    rng = np.random.default_rng(5)

    def sample(n: int, temperature: float):
        p = rng.uniform(0.05, 0.95, n)
        y = (rng.random(n) < p).astype(int)            # outcomes drawn from p: calibrated
        return apply_temperature(np.c_[1 - p, p], temperature, False), y

    few, many = ece_uncertainty(*sample(30, 1.0)), ece_uncertainty(*sample(3000, 1.0))
    assert few["noise_floor"] > 3 * many["noise_floor"]   # 30 cases cannot show ECE 0.05
    probs, y = sample(3000, 1.0)
    ece, spread = expected_calibration_error(probs, y), ece_uncertainty(probs, y)
    assert ece <= spread["noise_floor"] and spread["ci"][1] >= ece
    sharp, y2 = sample(3000, 0.4)                         # overconfident: beyond chance
    assert expected_calibration_error(sharp, y2) > ece_uncertainty(sharp, y2)["noise_floor"]
    assert ece_uncertainty(np.zeros((0, 2)), np.zeros(0))["noise_floor"] is None
    text = ece_spread_text({"ece_ci": [0.03, 0.11], "ece_floor": 0.072, "ece_after": 0.05})
    assert "0.030-0.110" in text and "up to 0.072" in text and "within chance" in text
    assert "beyond chance" in ece_spread_text({"ece_floor": 0.072, "ece_after": 0.119})
