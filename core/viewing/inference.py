"""Run a trained model on one image a user uploads: class probabilities (diagnosis), a mask on
the image's own grid (segmentation), boxes (detection) or report text (report generation).
The model is the one ``core.viewing.model_loading.load_model`` rebuilt from its job folder.

Preprocessing is the model's own: the job's ``Datapath/dataloader.py`` (the template
instantiated with ``dataloader_config.json``) is imported and its dataset class reads and
transforms the upload exactly as it did the test images.

Uploads are written to a fresh folder under ``<home>/tmp/inference/`` (never into a dataset
folder) and removed when the prediction is done. What a file is comes from its first bytes
(``core.viewing.upload_kinds``), not its name: PNG, JPEG, NIfTI and DICOM are accepted (saved
under the suffix their content calls for), anything else is refused by name ("report.pdf is a
PDF document") with the formats the model takes and what to do. Several files are several
images, each run on its own (``group_uploads``), except the DICOM slices of one series for a 3D
model, which are one volume. Messages about an upload name the file, never the folder it was
saved in or an exception's class.
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

from core.imaging.refs import ELEMENT_RE, MANIFEST_SUFFIX, MissingImageFile, ref_files, suffix_of
from core.viewing.model_loading import InferenceError, LoadedModel
from core.viewing.upload_kinds import FileKind, sniff

UPLOAD_DIR = ("tmp", "inference")  # under the home folder
MAX_UPLOAD_MB = 200
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024
DICOM_NAMES = ("", ".dcm", ".dicom")
ACCEPTED_TEXT = "PNG, JPEG, NIfTI (.nii, .nii.gz) or DICOM (.dcm, or DICOM files without a suffix)"
ACCEPTED_2D = "PNG, JPEG or a single DICOM image (a 2D NIfTI file too)"
ACCEPTED_3D = ("a NIfTI volume (.nii, .nii.gz), a multi-frame DICOM file, or the DICOM slices of "
               "one series chosen together")
MAX_IMAGES = 8  # images run per upload; more are named and left out


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
    decision: dict | None = None   # the model's threshold(s), from its evaluation report
    mask: np.ndarray | None = None
    classes: list[str] = field(default_factory=list)
    boxes: list[dict] = field(default_factory=list)
    text: str = ""


# ----------------------------------------------------------------------------- uploads

def upload_suffix(name: str) -> str:
    lower = name.lower()
    return ".nii.gz" if lower.endswith(".nii.gz") else Path(lower).suffix


def _safe_name(name: str, index: int | None) -> str:
    """A plain file name for an upload (numbered when it is one of several)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._") or "upload"
    return base if index is None else f"{index:04d}_{base}"


def accepted_text(spatial_dims: int) -> str:
    """The files a model of ``spatial_dims`` (2, 3; 0 unknown) reads, in words."""
    return {2: ACCEPTED_2D, 3: ACCEPTED_3D}.get(spatial_dims, ACCEPTED_TEXT)


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


def refusal(name: str, kind: FileKind, accepted: str = ACCEPTED_TEXT) -> str:
    """"report.pdf is a PDF document, not an image this model reads. It reads ... . <advice>"."""
    text = f"{name} is {kind.text}, not an image this model reads. It reads {accepted}."
    return text + (f" {kind.advice}" if kind.advice else " Upload one of those instead.")


def _saved_name(name: str, kind: FileKind, index: int | None) -> str:
    """The upload's plain file name, with the suffix its content calls for (a DICOM file
    named .png is read as DICOM)."""
    base = _safe_name(name, index)
    suffix = upload_suffix(base)
    fits = suffix in DICOM_NAMES if kind.key == "dicom" else (
        suffix == kind.suffix or (kind.suffix == ".jpg" and suffix == ".jpeg"))
    return base if fits else base + kind.suffix


@contextlib.contextmanager
def saved_upload(home: str | Path, files: Sequence[tuple[str, bytes]],
                 accepted: str = ACCEPTED_TEXT) -> Iterator[Path]:
    """Write the uploaded bytes to a new folder under ``<home>/tmp/inference/`` and yield the
    image reference (the file, or the folder of DICOM slices); the folder is removed
    afterwards. Files that are not PNG, JPEG, NIfTI or DICOM (by their content) are refused
    by name, with ``accepted`` (what the model reads)."""
    check_upload([(name, len(data)) for name, data in files])
    kinds = [sniff(data) for _, data in files]
    for (name, _), kind in zip(files, kinds):
        if not kind.accepted:
            raise InferenceError(refusal(name, kind, accepted))
    if len(files) > 1 and any(k.key != "dicom" for k in kinds):
        others = [n for (n, _), k in zip(files, kinds) if k.key != "dicom"]
        raise InferenceError(f"several files make one image only as the DICOM slices of one "
                             f"series, and {', '.join(others)} is not DICOM; upload it on its "
                             "own")
    root = Path(home).joinpath(*UPLOAD_DIR)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
    try:
        paths = []
        for i, ((name, data), kind) in enumerate(zip(files, kinds)):
            path = folder / _saved_name(name, kind, i if len(files) > 1 else None)
            path.write_bytes(data)
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


@dataclass
class UploadedImage:
    """One image of an upload: one file, or the DICOM slices of one series (a 3D model);
    ``indices`` are the files' places in the upload."""
    label: str
    files: list[tuple[str, bytes]]
    indices: list[int]


def group_uploads(files: Sequence[tuple[str, bytes]], spatial_dims: int) -> list[UploadedImage]:
    """Several files are several images, in upload order, each run on its own; for a 3D model
    the DICOM files together are the slices of one volume, placed where its first slice was."""
    dicom = [i for i, (_, data) in enumerate(files) if sniff(data).key == "dicom"]
    series = spatial_dims == 3 and len(dicom) > 1
    images: list[UploadedImage] = []
    for i, (name, data) in enumerate(files):
        if series and i in dicom:
            if i == dicom[0]:
                first, last = files[dicom[0]][0], files[dicom[-1]][0]
                images.append(UploadedImage(f"{len(dicom)} DICOM slices ({first} … {last})",
                                            [files[j] for j in dicom], list(dicom)))
            continue
        images.append(UploadedImage(name, [(name, data)], [i]))
    return images


class UnreadableImage(InferenceError):
    """The file is of an accepted kind but its reader failed (damaged, cut short)."""


def _scrub(text: str, root: Path, shown_as: str) -> str:
    """A message about an upload as a user reads it: any path under the uploads folder
    ``root`` is the file's name and no exception class is named."""
    text = re.sub(re.escape(str(root)) + r"[^\s'\",;)]*", shown_as, text)
    return re.sub(r"\b[A-Za-z_.]*(?:Error|Exception|Warning)\b:\s*", "", text).strip()


# ----------------------------------------------------------------------------- prediction

def read_for_prediction(ref: Any) -> tuple[np.ndarray, dict]:
    """Read the image a model is asked about: an upload, or any index image reference (a file,
    a folder of slices, ``file.npz::key[i]``, a series manifest, a list of channel files).
    Raises InferenceError naming a missing file or saying why the image cannot be read."""
    from core.imaging.image_io import read_image
    ref = str(ref) if isinstance(ref, Path) else ref
    try:
        ref_files(ref)
        return read_image(ref)
    except MissingImageFile as exc:
        raise InferenceError(f"the image cannot be found: {exc}") from exc
    except (ValueError, OSError) as exc:  # ImageReadError is a ValueError
        raise UnreadableImage(f"the image cannot be read: {exc}. Use a {ACCEPTED_TEXT} "
                              "file.") from exc


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


def predict(loaded: LoadedModel, ref: Any) -> Prediction:
    """Run the model on one image reference: an upload (a file or a folder of DICOM slices)
    or any reference an index holds (see ``read_for_prediction``)."""
    import torch

    ref = str(ref) if isinstance(ref, Path) else ref
    array, meta = read_for_prediction(ref)
    array = _check_dims(array, loaded)
    if loaded.in_channels > 1 and array.shape[0] != loaded.in_channels and (
            loaded.template == "segmentation"):
        raise InferenceError(f"this model takes {loaded.in_channels} image channels per case "
                             f"(e.g. MRI sequences) and the upload has {array.shape[0]}; upload "
                             f"one {loaded.in_channels}-channel NIfTI volume")
    out = Prediction(loaded.template, _display(array), meta.get("spacing"),
                     classes=list(loaded.classes), multi_label=loaded.multi_label,
                     decision=loaded.extra.get("decision"))
    try:
        with torch.no_grad():
            if loaded.engine == "nnunet":
                if not isinstance(ref, str) or ELEMENT_RE.match(ref) or \
                        suffix_of(ref) == MANIFEST_SUFFIX:
                    raise InferenceError("an nnU-Net model reads one image file (NIfTI, PNG, "
                                         f"DICOM) or a folder of one DICOM series, not {ref}")
                out.mask = _predict_nnunet(loaded, Path(ref), array.shape[1:])
            elif loaded.template == "diagnosis":  # a diagnosis index names channels as JSON
                out.probabilities = _predict_diagnosis(
                    loaded, ref if isinstance(ref, str) else json.dumps(list(ref)))
            elif loaded.template == "segmentation":
                out.mask = _predict_segmentation(loaded, ref)
            elif loaded.template == "detection":
                out.boxes = _predict_detection(loaded, ref)
            else:
                out.text = _predict_report(loaded, ref)
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


def _predict_segmentation(loaded: LoadedModel, ref: Any) -> np.ndarray:
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


def _predict_detection(loaded: LoadedModel, ref: Any) -> list[dict]:
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


def _predict_report(loaded: LoadedModel, ref: Any) -> str:
    from ml_templates.report_generation.model import generate_reports
    dl, tokenizer = loaded.dl, loaded.extra["tokenizer"]
    dataset = dl.ReportDataset("test", augment=False, datapath=str(loaded.workspace / "Datapath"),
                               items=[{"image_path": ref, "findings": "", "impression": ""}],
                               tokenizer=tokenizer)
    return generate_reports(loaded.model, dataset, tokenizer, "cpu",
                            loaded.extra["max_new_tokens"], batch_size=1)[0]


def predict_upload(loaded: LoadedModel, home: str | Path,
                   files: Sequence[tuple[str, bytes]]) -> Prediction:
    """Save the upload (one image: a file, or the DICOM slices of one series) under
    ``<home>/tmp/inference/``, predict, and remove it again. Problems are named by the file's
    name and say what the model reads."""
    accepted = accepted_text(loaded.spatial_dims)
    shown = files[0][0] if len(files) == 1 else f"the {len(files)} DICOM slices"
    with saved_upload(home, files, accepted) as ref:
        try:
            return predict(loaded, ref)
        except UnreadableImage as exc:
            kind = sniff(files[0][1]).text
            raise InferenceError(
                f"{shown} {'start' if len(files) > 1 else 'starts'} like {kind} but cannot "
                "be read as one: it may be damaged or cut short. Export it again from the "
                f"viewer or PACS and upload the new file; this model reads {accepted}.") \
                from exc
        except InferenceError as exc:
            raise InferenceError(_scrub(str(exc), Path(home).joinpath(*UPLOAD_DIR), shown)) \
                from exc
        except Exception as exc:  # a template's own failure: named, without its internals
            raise InferenceError(f"the model could not process {shown} ("
                                 f"{_scrub(str(exc), Path(home).joinpath(*UPLOAD_DIR), shown)})"
                                 f"; this model reads {accepted}") from exc
