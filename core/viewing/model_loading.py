"""A trained model rebuilt from its job folder for inference (``load_model`` -> ``LoadedModel``),
and what the job folder says about it: its template, preprocessing, training images and any
missing model files. ``InferenceError`` is the error the inference modules raise.

A model is loaded the way its template saved it, from the job folder:

=================  ===========================================================================
diagnosis          ``Logout/model/model.safetensors`` into ``DiagnosisModel`` (network, size
                   and channels from ``train_config.json``; classes from ``label_dict.json``),
                   wrapped in the template's exported form ``Probabilities``
segmentation       MONAI: ``model.safetensors`` into ``SegmentationModel``; sliding-window
                   inference and the dataset's ``invert`` (``ml_templates.segmentation``);
                   nnU-Net: the engine's ``load_predictor`` on ``checkpoint_final.pth`` and
                   its plans (mirroring as in training), the upload read with nnU-Net's
                   ``SimpleITKIO`` as its raw training images were
detection          ``load_detection_model(Logout/model)`` (``config.json`` + weights) and the
                   template's ``predict`` (boxes mapped back to the stored image)
report generation  ``load_trained(Logout/model)`` + the tokenizer saved beside it, the
                   template's ``generate_reports``
=================  ===========================================================================
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.jobs.workspace import JobWorkspace

TEMPLATES = ("diagnosis", "segmentation", "detection", "report_generation")


class InferenceError(ValueError):
    """The upload or the model cannot be used; the message names the problem and the fix."""


@dataclass
class LoadedModel:
    """A trained model ready for ``predict``; ``dl`` is the job's own dataloader module."""
    template: str
    workspace: Path
    config: dict
    model: Any
    dl: Any = None
    engine: str = "monai"
    classes: list[str] = field(default_factory=list)
    multi_label: bool = False
    spatial_dims: int = 2
    in_channels: int = 1
    extra: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- the job folder

def _read_json(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_template(workspace: str | Path) -> str:
    """The training template a job used: train_config.json, else plan.json, else report.json."""
    ws = JobWorkspace(Path(workspace))
    for path in (ws.train_config, ws.plan, ws.report):
        data = _read_json(path)
        value = data.get("template") or (data.get("task") if path == ws.report else None)
        if value in TEMPLATES:
            return value
    return ""


def preprocessing_config(workspace: str | Path) -> dict:
    """The dataloader's CONFIG values (dataloader_config.json) plus the training sizes that
    train_config.json adds, without machine paths."""
    ws = JobWorkspace(Path(workspace))
    loader = {k: v for k, v in _read_json(ws.dataloader_config).items()
              if k != "DATAPATH"}
    cfg = _read_json(ws.train_config)
    training = {k: cfg[k] for k in ("network", "engine", "image_size", "roi_size", "in_channels")
                if cfg.get(k) is not None}
    return {"dataloader": loader, "training": training}


def training_images(workspace: str | Path) -> str:
    """What the model was trained on, from the plan: e.g. "2D X-ray chest png images"."""
    plan = _read_json(JobWorkspace(Path(workspace)).plan)
    words = [plan.get("dimension"), plan.get("modality"), plan.get("anatomy"),
             plan.get("file_format")]
    return " ".join(str(w) for w in words if w) + " images" if any(words) else ""


def model_dims(workspace: str | Path) -> int:
    """2 or 3: the images the model takes, from the job folder without loading it (0 when the
    folder does not say): the dataloader's SPATIAL_DIMS or IMAGE_SIZE, nnU-Net's configuration,
    else the plan's dimension."""
    ws = JobWorkspace(Path(workspace))
    loader, cfg = _read_json(ws.dataloader_config), _read_json(ws.train_config)
    if loader.get("SPATIAL_DIMS") in (2, 3):
        return int(loader["SPATIAL_DIMS"])
    size = loader.get("IMAGE_SIZE") or cfg.get("image_size")
    if isinstance(size, list) and len(size) in (2, 3):
        return len(size)
    if cfg.get("engine") == "nnunet" and cfg.get("configuration"):
        return 2 if cfg["configuration"] == "2d" else 3
    dimension = str(_read_json(ws.plan).get("dimension", "")).upper()
    return {"2D": 2, "3D": 3}.get(dimension, 0)


def model_files_missing(workspace: str | Path) -> str:
    """Why the model in this job folder cannot be loaded ('' when it can)."""
    ws = JobWorkspace(Path(workspace))
    template = model_template(ws.root)
    if not template:
        return f"{ws.root} has no train_config.json naming a training template"
    cfg = _read_json(ws.train_config)
    model_dir = ws.model_dir
    if cfg.get("engine") == "nnunet":
        needed = [model_dir / "nnunet_model.json", model_dir / "checkpoint_final.pth"]
    else:
        needed = [ws.dataloader, model_dir / "model.safetensors"]
        if template == "detection":
            needed.append(model_dir / "config.json")
        if template == "report_generation":
            needed += [model_dir / "report_config.json", model_dir / "tokenizer.json"]
    missing = [str(p) for p in needed if not p.is_file()]
    return f"missing {', '.join(missing)}" if missing else ""


def weights_stamp(workspace: str | Path) -> float:
    """The newest modification time of the files in the job's model folder (0 when none):
    a loaded model is reused until its weights change."""
    files = [p for p in JobWorkspace(Path(workspace)).model_dir.glob("*") if p.is_file()]
    return max((p.stat().st_mtime for p in files), default=0.0)


def _load_dataloader(ws: JobWorkspace):
    from ml_templates.common.entry import load_dataloader
    return load_dataloader(ws.dataloader)


def _state(model_dir: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(str(model_dir / "model.safetensors"))


def load_model(workspace: str | Path) -> LoadedModel:
    """Rebuild the trained model of a job folder on the CPU (eval mode)."""
    ws = JobWorkspace(Path(workspace))
    problem = model_files_missing(ws.root)
    if problem:
        raise InferenceError(f"the model cannot be loaded: {problem}. Retrain it from the "
                             "Build a model page.")
    template, cfg = model_template(ws.root), _read_json(ws.train_config)
    model_dir = ws.model_dir
    if cfg.get("engine") == "nnunet":
        return _load_nnunet(ws, cfg)
    dl = _load_dataloader(ws)
    if template == "diagnosis":
        from ml_templates.diagnosis.model import DiagnosisModel
        from ml_templates.diagnosis.model import Probabilities
        label_dict = dl.load_label_dict(str(ws.datapath))
        classes = sorted(label_dict, key=label_dict.get)
        multi = bool(getattr(dl, "MULTI_LABEL", False))
        dims = len(cfg.get("image_size") or dl.IMAGE_SIZE)
        channels = int(cfg.get("in_channels", dl.IN_CHANNELS))
        net = DiagnosisModel(cfg["network"], dims, channels, len(classes), multi_label=multi)
        net.load_state_dict(_state(model_dir))
        model = Probabilities(net).eval()  # calibrated: the saved temperature is applied
        decision = (_read_json(ws.report) or {}).get("decision")  # thresholds from validation
        return LoadedModel(template, ws.root, cfg, model, dl, classes=classes, multi_label=multi,
                           spatial_dims=dims, in_channels=channels,
                           extra={"decision": decision} if decision else {})
    if template == "segmentation":
        from ml_templates.segmentation.model import SegmentationModel
        if cfg.get("roi_size"):  # train.py lets the config override the dataloader's ROI
            dl.ROI_SIZE = [int(s) for s in cfg["roi_size"]]
        dims, channels = int(dl.SPATIAL_DIMS), int(dl.IN_CHANNELS)
        model = SegmentationModel(cfg["network"], dims, channels, int(dl.NUM_CLASSES))
        model.load_state_dict(_state(model_dir))
        return LoadedModel(template, ws.root, cfg, model.eval(), dl,
                           classes=dl.label_names(str(ws.datapath)), spatial_dims=dims,
                           in_channels=channels)
    if template == "detection":
        from ml_templates.detection.model import load_detection_model
        model = load_detection_model(model_dir)
        decision = (_read_json(ws.report) or {}).get("decision")  # the boxes' score threshold
        return LoadedModel(template, ws.root, cfg, model, dl,
                           classes=list(model.detector_config["label_names"]),
                           spatial_dims=int(dl.SPATIAL_DIMS), in_channels=int(dl.IN_CHANNELS),
                           extra={"decision": decision} if decision else {})
    if template == "report_generation":
        from ml_templates.report_generation.model import load_trained
        from ml_templates.report_generation.tokenizer import load_tokenizer
        model = load_trained(model_dir)
        tokenizer = load_tokenizer(model_dir)
        return LoadedModel(template, ws.root, cfg, model, dl,
                           spatial_dims=int(dl.SPATIAL_DIMS), in_channels=int(dl.IN_CHANNELS),
                           extra={"tokenizer": tokenizer,
                                  "max_new_tokens": int(cfg.get("max_new_tokens",
                                                                int(dl.MAX_TOKENS) - 1))})
    raise InferenceError(f"no inference for template {template!r}")  # pragma: no cover


def _load_nnunet(ws: JobWorkspace, cfg: dict) -> LoadedModel:
    import torch

    from ml_templates.segmentation.nnunet_engine import load_predictor
    model_dir = ws.model_dir
    info = _read_json(model_dir / "nnunet_model.json")
    predictor = load_predictor(model_dir / info.get("checkpoint", "checkpoint_final.pth"),
                               model_dir / info["plans"],
                               model_dir / info.get("dataset_json", "dataset.json"),
                               info["configuration"], torch.device("cpu"),
                               use_mirroring=bool(cfg.get("use_mirroring", True)))
    dataset = _read_json(model_dir / info.get("dataset_json", "dataset.json"))
    labels = {int(v): k for k, v in (dataset.get("labels") or {}).items()
              if isinstance(v, int)}
    classes = [labels[i] for i in sorted(labels) if i > 0]
    dims = 2 if info["configuration"] == "2d" else 3
    channels = len(dataset.get("channel_names") or {"0": ""})
    return LoadedModel("segmentation", ws.root, cfg, predictor, engine="nnunet",
                       classes=classes, spatial_dims=dims, in_channels=channels,
                       extra={"file_ending": dataset.get("file_ending", ".nii.gz")})
