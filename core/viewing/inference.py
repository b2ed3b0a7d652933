"""Run a trained model on one image a user uploads: class probabilities (diagnosis), a mask on
the image's own grid (segmentation), boxes (detection) or report text (report generation).

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

Preprocessing is the model's own: the job's ``Datapath/dataloader.py`` (the template
instantiated with ``dataloader_config.json``) is imported and its dataset class reads and
transforms the upload exactly as it did the test images.

Uploads are written to a fresh folder under ``<home>/tmp/inference/`` (never into a dataset
folder) and removed when the prediction is done. Only PNG, JPEG, NIfTI and DICOM are accepted;
several files only as the DICOM slices of one series.
"""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.jobs.workspace import JobWorkspace

UPLOAD_DIR = ("tmp", "inference")  # under the home folder
MAX_UPLOAD_MB = 200
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024
UPLOAD_SUFFIXES = (".png", ".jpg", ".jpeg", ".nii", ".nii.gz", ".dcm", ".dicom")
ACCEPTED_TEXT = "PNG, JPEG, NIfTI (.nii, .nii.gz) or DICOM (.dcm, or DICOM files without a suffix)"
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


@dataclass
class Prediction:
    """What the model made of one image. ``image`` is the upload as read (channels averaged)
    on its own grid, MONAI axis order (x first); ``mask`` shares that grid; ``boxes`` are
    corner boxes in those coordinates."""
    template: str
    image: np.ndarray
    spacing: list[float] | None = None
    probabilities: dict[str, float] = field(default_factory=dict)
    multi_label: bool = False
    mask: np.ndarray | None = None
    classes: list[str] = field(default_factory=list)
    boxes: list[dict] = field(default_factory=list)
    text: str = ""


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
        model = Probabilities(net).eval()
        return LoadedModel(template, ws.root, cfg, model, dl, classes=classes, multi_label=multi,
                           spatial_dims=dims, in_channels=channels)
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
        return LoadedModel(template, ws.root, cfg, model, dl,
                           classes=list(model.detector_config["label_names"]),
                           spatial_dims=int(dl.SPATIAL_DIMS), in_channels=int(dl.IN_CHANNELS))
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


# ----------------------------------------------------------------------------- uploads

def upload_suffix(name: str) -> str:
    lower = name.lower()
    return ".nii.gz" if lower.endswith(".nii.gz") else Path(lower).suffix


def _safe_name(name: str, index: int | None) -> str:
    """A plain file name for an upload (numbered when it is one of several)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._") or "upload"
    return base if index is None else f"{index:04d}_{base}"


def check_upload(files: Sequence[tuple[str, int]]) -> None:
    """``files`` = [(name, size in bytes)]. Raises InferenceError naming what is wrong."""
    if not files:
        raise InferenceError(f"no file uploaded: choose a {ACCEPTED_TEXT} file")
    total = sum(int(size) for _, size in files)
    if total > MAX_UPLOAD_BYTES:
        raise InferenceError(f"the upload is {total / 1024 / 1024:.0f} MB; the limit is "
                             f"{MAX_UPLOAD_MB} MB. Upload a smaller image (one scan).")
    for name, size in files:
        if int(size) == 0:
            raise InferenceError(f"{name} is empty (0 bytes); upload the image file itself")
        suffix = upload_suffix(name)
        if suffix and suffix not in UPLOAD_SUFFIXES:
            raise InferenceError(f"{name}: {suffix} files are not accepted. Upload a "
                                 f"{ACCEPTED_TEXT} file.")
    if len(files) > 1 and any(upload_suffix(n) not in ("", ".dcm", ".dicom") for n, _ in files):
        raise InferenceError("several files are accepted only as the DICOM slices of one series; "
                             "upload one PNG, JPEG or NIfTI file at a time")


@contextlib.contextmanager
def saved_upload(home: str | Path, files: Sequence[tuple[str, bytes]]) -> Iterator[Path]:
    """Write the uploaded bytes to a new folder under ``<home>/tmp/inference/`` and yield the
    image reference (the file, or the folder of DICOM slices); the folder is removed
    afterwards."""
    from pydicom.misc import is_dicom

    check_upload([(name, len(data)) for name, data in files])
    root = Path(home).joinpath(*UPLOAD_DIR)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
    try:
        paths = []
        for i, (name, data) in enumerate(files):
            path = folder / _safe_name(name, i if len(files) > 1 else None)
            path.write_bytes(data)
            if upload_suffix(name) in ("", ".dcm", ".dicom") and not is_dicom(str(path)):
                raise InferenceError(f"{name} is not a DICOM file (its header has no DICM "
                                     f"marker). Upload a {ACCEPTED_TEXT} file.")
            paths.append(path)
        if len(paths) == 1:
            yield paths[0]
        else:
            series = folder / "series"
            series.mkdir()
            for path in paths:
                path.rename(series / path.name)
            yield series
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ----------------------------------------------------------------------------- prediction

def _read(ref: Path) -> tuple[np.ndarray, dict]:
    from core.imaging.image_io import read_image
    try:
        return read_image(str(ref))
    except (ValueError, OSError) as exc:  # ImageReadError is a ValueError
        raise InferenceError(f"the upload cannot be read as an image: {exc}. Upload a "
                             f"{ACCEPTED_TEXT} file.") from exc


def _squeeze(array: np.ndarray, spatial_dims: int) -> np.ndarray:
    """(C, H, W, 1) -> (C, H, W) when the model takes 2D images."""
    while array.ndim - 1 > spatial_dims and array.shape[-1] == 1:
        array = array[..., 0]
    return array


def _check_dims(array: np.ndarray, loaded: LoadedModel) -> np.ndarray:
    array = _squeeze(array, loaded.spatial_dims)
    dims = array.ndim - 1
    if dims != loaded.spatial_dims:
        wanted = ("a 2D image (PNG, JPEG or a single DICOM image)" if loaded.spatial_dims == 2
                  else "a 3D volume (NIfTI, a multi-frame DICOM or the DICOM slices of one "
                       "series)")
        raise InferenceError(f"this model was trained on {loaded.spatial_dims}D images and the "
                             f"upload is {dims}D (shape {tuple(array.shape[1:])}); upload "
                             f"{wanted}")
    return array


def _display(array: np.ndarray) -> np.ndarray:
    """Channels averaged (gray) for showing; colour images keep their first three."""
    return array[:3].mean(0).astype(np.float32)


def predict(loaded: LoadedModel, ref: str | Path) -> Prediction:
    """Run the model on one image reference (a file or a folder of DICOM slices)."""
    import torch

    array, meta = _read(Path(ref))
    array = _check_dims(array, loaded)
    if loaded.in_channels > 1 and array.shape[0] != loaded.in_channels and (
            loaded.template == "segmentation"):
        raise InferenceError(f"this model takes {loaded.in_channels} image channels per case "
                             f"(e.g. MRI sequences) and the upload has {array.shape[0]}; upload "
                             f"one {loaded.in_channels}-channel NIfTI volume")
    out = Prediction(loaded.template, _display(array), meta.get("spacing"),
                     classes=list(loaded.classes), multi_label=loaded.multi_label)
    try:
        with torch.no_grad():
            if loaded.engine == "nnunet":
                out.mask = _predict_nnunet(loaded, Path(ref), array.shape[1:])
            elif loaded.template == "diagnosis":
                out.probabilities = _predict_diagnosis(loaded, str(ref))
            elif loaded.template == "segmentation":
                out.mask = _predict_segmentation(loaded, str(ref))
            elif loaded.template == "detection":
                out.boxes = _predict_detection(loaded, str(ref))
            else:
                out.text = _predict_report(loaded, str(ref))
    except InferenceError:
        raise
    except (ValueError, RuntimeError) as exc:  # the template refused this image
        raise InferenceError(f"the model could not process this image: {exc}") from exc
    return out


def _predict_diagnosis(loaded: LoadedModel, ref: str) -> dict[str, float]:
    dl = loaded.dl
    dataset = dl.DiagnosisDataset("test", augment=False, datapath=str(loaded.workspace /
                                                                      "Datapath"), items=[])
    image = dataset.read(ref)
    while image.ndim - 1 > loaded.spatial_dims and image.shape[-1] == 1:  # (C, H, W, 1)
        image = image[..., 0]
    pixels = dataset.transforms(image)
    probs = loaded.model(pixels[None])[0].tolist()
    return {name: float(p) for name, p in zip(loaded.classes, probs)}


def _predict_segmentation(loaded: LoadedModel, ref: str) -> np.ndarray:
    from ml_templates.segmentation.inference import sliding_window_probs
    dl = loaded.dl
    dataset = dl.SegmentationDataset("test", augment=False,
                                     datapath=str(loaded.workspace / "Datapath"),
                                     items=[{"image_path": ref}])
    item = dataset[0]
    probs = sliding_window_probs(loaded.model, item["pixel_values"], dl.ROI_SIZE, "cpu")
    original = dataset.invert(probs, item["pixel_values"])
    return np.asarray(original.argmax(0)).astype(np.uint8)


def _predict_nnunet(loaded: LoadedModel, ref: Path, shape: Sequence[int]) -> np.ndarray:
    """nnU-Net reads NIfTI through SimpleITK: the upload is converted beside itself first."""
    import SimpleITK as sitk
    from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

    from ml_templates.segmentation.nnunet_engine import read_image as sitk_read
    image = sitk_read(ref)
    components = image.GetNumberOfComponentsPerPixel()
    if components > 1:  # colour PNG/JPEG: the mean of the colour channels (gray)
        channels = [sitk.Cast(sitk.VectorIndexSelectionCast(image, i), sitk.sitkFloat32)
                    for i in range(min(components, 3))]
        image = sum(channels[1:], channels[0]) / float(len(channels))
    if image.GetDimension() == 3 and loaded.spatial_dims == 2 and image.GetSize()[2] == 1:
        image = image[:, :, 0]
    converted = ref.parent / f"nnunet_case_0000{loaded.extra['file_ending']}"
    sitk.WriteImage(sitk.Cast(image, sitk.sitkFloat32), str(converted))
    data, props = SimpleITKIO().read_images([str(converted)])
    seg = np.asarray(loaded.model.predict_single_npy_array(data, props, None, None, False))
    seg = np.squeeze(seg, axis=0) if seg.ndim == 3 and loaded.spatial_dims == 2 else seg
    mask = seg.T.astype(np.uint8)  # SimpleITK (z, y, x) -> MONAI (x, y, z)
    return mask.reshape(tuple(shape)) if mask.size == int(np.prod(shape)) else mask


def _predict_detection(loaded: LoadedModel, ref: str) -> list[dict]:
    from ml_templates.detection.model import predict as detect
    dl = loaded.dl
    dataset = dl.DetectionDataset("test", augment=False,
                                  datapath=str(loaded.workspace / "Datapath"),
                                  items=[{"image_path": ref, "boxes": [], "labels": []}],
                                  cache=False)
    found = detect(loaded.model, dataset, dl, "cpu", batch_size=1)[0]
    order = np.argsort(-found["scores"], kind="mergesort")
    return [{"box": [round(float(v), 2) for v in found["boxes"][i]],
             "score": float(found["scores"][i]),
             "label": loaded.classes[int(found["labels"][i])]} for i in order]


def _predict_report(loaded: LoadedModel, ref: str) -> str:
    from ml_templates.report_generation.model import generate_reports
    dl, tokenizer = loaded.dl, loaded.extra["tokenizer"]
    dataset = dl.ReportDataset("test", augment=False, datapath=str(loaded.workspace / "Datapath"),
                               items=[{"image_path": ref, "findings": "", "impression": ""}],
                               tokenizer=tokenizer)
    return generate_reports(loaded.model, dataset, tokenizer, "cpu",
                            loaded.extra["max_new_tokens"], batch_size=1)[0]


def predict_upload(loaded: LoadedModel, home: str | Path,
                   files: Sequence[tuple[str, bytes]]) -> Prediction:
    """Save the upload under ``<home>/tmp/inference/``, predict, and remove it again."""
    with saved_upload(home, files) as ref:
        return predict(loaded, ref)
