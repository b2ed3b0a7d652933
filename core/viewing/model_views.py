"""What the Models page shows about a trained model, as plain data (no UI): its job folder,
template, results and model card, the headline metric, ROC curves from the test predictions,
per-class results (with CIs for segmentation), precision-recall curves, generated reports
beside their references, and the files a user may download. Everything is read from the job
folder the crew wrote; nothing is recomputed that the evaluator already reported, except
curves and per-class CIs it did not keep.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from core.evaluation.common import bootstrap_ci
from core.planning.tasks import PRIMARY_METRIC
from core.jobs.workspace import JobWorkspace
from core.viewing.model_loading import TEMPLATES, model_template, preprocessing_config

METRIC_NAMES = {"auc": "AUC", "accuracy": "Accuracy", "f1_macro": "F1 (macro)",
                "sensitivity": "Sensitivity (at the threshold)",
                "specificity": "Specificity (at the threshold)",
                "ece": "Expected calibration error (calibrated)",
                "dice": "Dice (mean)", "hd95": "HD95 (mm)", "map50": "mAP@0.5",
                "image_auc": "Image-level AUC", "bleu1": "BLEU-1", "bleu2": "BLEU-2",
                "bleu3": "BLEU-3", "bleu4": "BLEU-4", "rouge_l": "ROUGE-L",
                "baseline_rouge_l": "ROUGE-L of the most common report",
                "rouge_l_gain": "ROUGE-L gain over the baseline"}
TASK_NAMES = {"diagnosis": "Diagnosis", "segmentation": "Segmentation",
              "detection": "Detection", "report_generation": "Report generation"}


def _json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _finite(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and np.isfinite(value) else None


# ----------------------------------------------------------------------------- the stored model

def workspace_of(model: dict, job: dict | None) -> Path:
    """The job folder of a stored model: its job's workspace, else the model card's folder,
    else two levels above the saved model (``<job>/Logout/model``)."""
    job = job or {}
    if job.get("workspace"):
        return Path(job["workspace"])
    if model.get("card_path"):
        return Path(model["card_path"]).parent
    return Path(model["path"]).parent.parent  # <job>/Logout/model


def template_of(model: dict, workspace: Path) -> str:
    """The training template of a stored model: the job folder's, else the model's task."""
    found = model_template(workspace)
    return found or (model["task"] if model["task"] in TEMPLATES else "")


def job_report(workspace: str | Path) -> dict:
    """The job's report.json as a dict; {} when missing or unreadable (e.g. being written)."""
    data = _json(JobWorkspace(Path(workspace)).report)
    return data if isinstance(data, dict) else {}


def model_result(model: dict, workspace: str | Path) -> dict:
    """The job's report.json; when it has no metrics (no report.json left), the metrics stored
    with the model as ``{"metrics": ...}`` ({} when those cannot be read either)."""
    result = job_report(workspace)
    if not result.get("metrics"):
        try:
            result = {"metrics": json.loads(model["metrics"] or "{}")}
        except ValueError:
            result = {}
    return result


def model_card_path(model: dict, workspace: Path) -> Path:
    return Path(model["card_path"] or workspace / "model_card.md")


def read_model_card(path: Path) -> str | None:
    """The model card's markdown; None when there is no card."""
    return path.read_text(encoding="utf-8") if path.is_file() else None


def demote_headings(markdown: str) -> str:
    """Headings two levels down, so that a card sits under the page's own headings."""
    return re.sub(r"^(#{1,4}) ", r"##\1 ", markdown, flags=re.MULTILINE)


def file_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:,.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MB"


# ----------------------------------------------------------------------------- results

def headline(report: dict, template: str) -> dict:
    """The template's primary metric: {"key", "name", "value", "ci"} (value None if absent)."""
    key = PRIMARY_METRIC.get(template, "")
    ci = (report.get("ci95") or {}).get(key) or []
    return {"key": key, "name": METRIC_NAMES.get(key, key),
            "value": _finite((report.get("metrics") or {}).get(key)),
            "ci": [float(c) for c in ci] if len(ci) == 2 else None}


def metric_table(report: dict) -> list[dict]:
    """Every test metric with its 95% CI (rows for a table), the evaluator's order."""
    ci95 = report.get("ci95") or {}
    rows = []
    for key, value in (report.get("metrics") or {}).items():
        if not isinstance(value, (int, float)) and value is not None:
            continue
        ci = ci95.get(key) or []
        rows.append({"Metric": METRIC_NAMES.get(key, key), "Value": _finite(value),
                     "95% CI low": ci[0] if len(ci) == 2 else None,
                     "95% CI high": ci[1] if len(ci) == 2 else None})
    return rows


# ----------------------------------------------------------------------------- diagnosis

def diagnosis_rows(report: dict) -> list[dict]:
    """Per class: the evaluator's numbers (NaN as None; the support as it is)."""
    return [
        {"Class": name, **{k.replace("_", " ").capitalize(): (v if k == "support" else
                                                               (None if v != v else v))
                           for k, v in values.items() if isinstance(v, (int, float))}}
        for name, values in (report.get("per_class") or {}).items()
        if isinstance(values, dict)]


def diagnosis_roc(workspace: str | Path, positive: str | None = None) -> dict:
    """ROC curves on the test set from ``Logout/predictions.json`` and the index's labels:
    {class: {"fpr", "tpr", "auc", "positives", "negatives"}}. Two classes: one curve (the
    second class as positive); more, or multi-label: one curve per class against the rest.
    Classes without both positives and negatives in the test set are left out. {} when the
    predictions or the index are missing or do not match. ``positive``: the class the decision
    detects (the report's), else the second class."""
    from sklearn.metrics import roc_auc_score, roc_curve

    ws = JobWorkspace(Path(workspace))
    predictions = _json(ws.predictions)
    test = _json(ws.test_index)
    label_dict = _json(ws.label_dict)
    if not (isinstance(predictions, dict) and isinstance(test, dict) and isinstance(label_dict,
                                                                                   dict)):
        return {}
    names = sorted(label_dict, key=label_dict.get)
    paths = [p for p in sorted(test) if p in predictions]
    if not paths:
        return {}
    probs = np.asarray([predictions[p] for p in paths], dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != len(names) or not np.isfinite(probs).all():
        return {}
    truth = np.zeros_like(probs, dtype=int)
    for row, path in enumerate(paths):
        for name in test[path]:
            if name in label_dict:
                truth[row, label_dict[name]] = 1
    single = all(len(test[p]) == 1 for p in paths)
    binary = [names.index(positive) if positive in names else 1]
    classes = binary if single and len(names) == 2 else range(len(names))
    curves = {}
    for c in classes:
        y = truth[:, c]
        if 0 < y.sum() < len(y):
            fpr, tpr, _ = roc_curve(y, probs[:, c])
            curves[names[c]] = {"fpr": fpr.round(4).tolist(), "tpr": tpr.round(4).tolist(),
                                "auc": float(roc_auc_score(y, probs[:, c])),
                                "positives": int(y.sum()), "negatives": int(len(y) - y.sum())}
    return curves


# ----------------------------------------------------------------------------- segmentation

def _case_series(per_case: list, metric: str, name: str) -> np.ndarray:
    values = [(case.get(metric) or {}).get(name) for case in per_case]
    return np.asarray([v if isinstance(v, (int, float)) else np.nan for v in values],
                      dtype=np.float64)


def _mean_ci(series: np.ndarray, n_boot: int) -> list[float] | None:
    if np.isfinite(series).sum() < 2:
        return None

    def mean_of(idx: np.ndarray) -> dict:
        sample = series[idx]
        return {"m": float(np.nanmean(sample))} if np.isfinite(sample).any() else {}

    return bootstrap_ci(len(series), mean_of, n_boot=n_boot).get("m")


def segmentation_rows(report: dict, n_boot: int = 1000) -> list[dict]:
    """Per foreground class: mean Dice and HD95 over the test cases with 95% bootstrap CIs over
    cases (from the evaluator's ``per_case``; no CI with fewer than two defined cases)."""
    per_case = report.get("per_case") or []
    return [{"Class": name, "Dice": _finite(values.get("dice")),
             "Dice CI": _mean_ci(_case_series(per_case, "dice", name), n_boot),
             "HD95 (mm)": _finite(values.get("hd95")),
             "HD95 CI": _mean_ci(_case_series(per_case, "hd95", name), n_boot)}
            for name, values in (report.get("per_class") or {}).items()
            if isinstance(values, dict)]


# ----------------------------------------------------------------------------- detection

def detection_curves(report: dict) -> dict:
    """{class: {"recall", "precision"}} at the evaluator's IoU threshold, classes with points."""
    return {name: {"recall": c["recall"], "precision": c["precision"]}
            for name, c in (report.get("pr_curve") or {}).items()
            if isinstance(c, dict) and c.get("recall")}


def detection_rows(report: dict) -> list[dict]:
    return [{"Class": name, "AP@0.5": _finite(v.get("ap50")),
             "Boxes in the test set": v.get("num_gt"), "Boxes predicted": v.get("num_pred")}
            for name, v in (report.get("per_class") or {}).items() if isinstance(v, dict)]


# ----------------------------------------------------------------------------- reports

def report_samples(report: dict, limit: int = 5) -> list[dict]:
    """Generated reports next to their references (the evaluator keeps the first few)."""
    return [{"Image": Path(str(s.get("image_path", ""))).name
             if isinstance(s.get("image_path"), str) else json.dumps(s.get("image_path")),
             "Reference": s.get("reference", ""), "Generated": s.get("generated", "")}
            for s in (report.get("samples") or [])[:limit]]


def rouge_l_gain(report: dict) -> float:
    """The model's ROUGE-L minus the most-common-report baseline's."""
    return (report.get("metrics") or {}).get("rouge_l", 0) - \
        (report.get("metrics") or {}).get("baseline_rouge_l", 0)


def report_comparison(report: dict) -> list[dict]:
    """Model against the most-common-report baseline on ROUGE-L and BLEU-4, with CIs."""
    metrics, ci95 = report.get("metrics") or {}, report.get("ci95") or {}
    baseline = report.get("baseline") or {}
    rows = [{"Metric": "ROUGE-L", "Who": "Model", "Value": _finite(metrics.get("rouge_l")),
             "CI": ci95.get("rouge_l")},
            {"Metric": "ROUGE-L", "Who": "Baseline", "Value":
             _finite(metrics.get("baseline_rouge_l")), "CI": ci95.get("baseline_rouge_l")},
            {"Metric": "BLEU-4", "Who": "Model", "Value": _finite(metrics.get("bleu4")),
             "CI": ci95.get("bleu4")},
            {"Metric": "BLEU-4", "Who": "Baseline", "Value": _finite(baseline.get("bleu4")),
             "CI": None}]
    return [r for r in rows if r["Value"] is not None]


# ----------------------------------------------------------------------------- downloads

def downloads(workspace: str | Path) -> list[dict]:
    """Files a user may download: {"label", "path", "file_name", "mime"}. Verified TorchScript
    and ONNX exports where the template wrote them, otherwise the checkpoint; then the model
    folder's configuration files, report.json and the model card."""
    ws = JobWorkspace(Path(workspace))
    model_dir, export = ws.model_dir, ws.exports
    out = []

    def add(label: str, path: Path, mime: str, name: str | None = None) -> None:
        if path.is_file():
            out.append({"label": label, "path": str(path), "file_name": name or path.name,
                        "mime": mime})

    add("TorchScript model", export / "model.torchscript.pt", "application/octet-stream")
    add("ONNX model", export / "model.onnx", "application/octet-stream")
    if not out:
        add("Model weights (safetensors)", model_dir / "model.safetensors",
            "application/octet-stream")
        add("nnU-Net checkpoint", model_dir / "checkpoint_final.pth", "application/octet-stream")
        nn_info = _json(model_dir / "nnunet_model.json") or {}
        if nn_info.get("plans"):
            add("nnU-Net plans", model_dir / nn_info["plans"], "application/json")
            add("nnU-Net dataset.json", model_dir / nn_info.get("dataset_json", "dataset.json"),
                "application/json")
        add("Detector configuration", model_dir / "config.json", "application/json")
        add("Report model configuration", model_dir / "report_config.json", "application/json")
        add("Tokenizer", model_dir / "tokenizer.json", "application/json")
    add("Preprocessing (dataloader_config.json)", ws.dataloader_config,
        "application/json")
    add("Evaluation report (report.json)", ws.report, "application/json")
    add("Model card (model_card.md)", ws.model_card, "text/markdown")
    return out


EXPORT_FORMATS = {"TorchScript model": "torchscript", "ONNX model": "onnx"}


def has_exports(offered: list[dict]) -> bool:
    """Whether ``downloads`` offers a TorchScript or ONNX export."""
    return any(d["label"] in EXPORT_FORMATS for d in offered)


def export_note(exports: dict, label: str) -> str:
    """How an export was verified (training's ``exports`` record), '' when it was not."""
    fmt = EXPORT_FORMATS.get(label)
    if fmt and exports.get(fmt, {}).get("verified"):
        return (f"Verified: reloaded and compared with PyTorch, largest difference "
                f"{exports[fmt]['max_abs_diff']:.1e}.")
    return ""


def export_input_shape(workspace: str | Path, template: str) -> str:
    """The exports' input shape as text, "batch, channels, *size", from the dataloader's
    configuration (the ROI for segmentation, else the image size)."""
    loader = preprocessing_config(workspace)["dataloader"]
    size = loader.get("ROI_SIZE") if template == "segmentation" else loader.get("IMAGE_SIZE")
    return ", ".join(["batch", str(loader.get("IN_CHANNELS", 1)), *map(str, size or [])])
