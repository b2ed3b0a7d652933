"""Whole-image prediction for the segmentation template (used by train.py):

* ``sliding_window_probs``: softmax class probabilities of a whole preprocessed image with MONAI
  ``sliding_window_inference`` (Gaussian-weighted patches of the training ROI);
* ``validation_dice``: mean foreground Dice over whole validation images (preprocessed grid);
* ``predict_dataset``: every test case mapped back to the original grid (the dataset's
  ``invert``: crop, resampling and reorientation undone on the probabilities), argmax, and saved
  with the label file's geometry: NIfTI with the label's header and affine, PNG for 2D images.
"""
from __future__ import annotations

import re
from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.data import MetaTensor
from monai.data.image_writer import PILWriter
from monai.inferers import sliding_window_inference
from monai.metrics import DiceMetric
from monai.transforms import AsDiscrete, LoadImage, ResampleToMatch

from core.imaging.image_io import ImageRefReader

NIFTI = (".nii.gz", ".nii")
RASTER = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


@torch.no_grad()
def sliding_window_probs(model: torch.nn.Module, pixel_values: torch.Tensor, roi_size,
                         device, sw_batch_size: int = 4, overlap: float = 0.25) -> torch.Tensor:
    """(C, *spatial) image -> (K, *spatial) class probabilities on the CPU."""
    model.eval()
    image = torch.as_tensor(pixel_values, dtype=torch.float32)[None].to(device)
    image = image.as_tensor() if isinstance(image, MetaTensor) else image
    logits = sliding_window_inference(image, list(roi_size), sw_batch_size,
                                      lambda x: model(pixel_values=x)["logits"],
                                      overlap=overlap, mode="gaussian")
    return torch.softmax(torch.as_tensor(logits).float(), dim=1)[0].cpu()


def validation_dice(model: torch.nn.Module, dataset, roi_size, num_classes: int,
                    device) -> dict:
    """Dice per foreground class over whole images (an empty mask predicted empty counts 1)
    and the model's own loss on those whole images (the tie-break of model selection)."""
    metric = DiceMetric(include_background=False, reduction="mean_batch", ignore_empty=False)
    to_onehot = AsDiscrete(to_onehot=num_classes)
    losses = []
    for i in range(len(dataset)):
        item = dataset[i]
        probs = sliding_window_probs(model, item["pixel_values"], roi_size, device)
        labels = torch.as_tensor(item["labels"]).long()
        pred = to_onehot(probs.argmax(0, keepdim=True))
        metric(y_pred=pred[None], y=to_onehot(labels)[None])
        if hasattr(model, "loss"):  # log-probabilities are logits up to a constant per voxel
            with torch.no_grad():
                losses.append(float(model.loss(torch.log(probs.clamp_min(1e-8))[None],
                                               labels[None])))
    per_class = [float(v) for v in metric.aggregate()]
    return {"dice": float(np.mean(per_class)), "per_class": per_class,
            "loss": float(np.mean(losses)) if losses else float("nan")}


def selection_score(dice: float, loss: float) -> float:
    """Dice to three decimals, then the lower loss: two epochs with the same Dice (a saturated
    validation set) are told apart by the loss, which never outweighs a Dice step of 0.001."""
    penalty = 1e-4 * min(float(loss), 5.0) if loss == loss else 0.0
    return round(float(dice), 3) - penalty


def _reference(item: dict) -> str:
    """The file whose geometry a prediction takes: the mask, else the (first) image."""
    if item.get("label_path"):
        return str(item["label_path"])
    path = item["image_path"]
    return str(path[0] if isinstance(path, (list, tuple)) else path)


def _output_name(reference: str, used: set[str]) -> str:
    name = Path(reference).name
    base = re.sub(r"(\.nii\.gz|\.[A-Za-z0-9]+)$", "", name)
    ext = ".png" if name.lower().endswith(RASTER) else ".nii.gz"
    out, k = base + ext, 1
    while out in used:
        out, k = f"{base}_{k}{ext}", k + 1
    used.add(out)
    return out


def save_label_map(labels: MetaTensor, reference: str, out_path: Path) -> Path:
    """Write an integer label map (1, *spatial) on the reference file's grid."""
    # the shared reader: NIfTI/NRRD/PNG and also DICOM series manifests and array references
    ref = LoadImage(reader=ImageRefReader(), image_only=True, ensure_channel_first=True)(reference)
    if tuple(labels.shape[1:]) != tuple(ref.shape[1:]):
        if int(np.prod(labels.shape[1:])) == int(np.prod(ref.shape[1:])):  # (H, W) vs (H, W, 1)
            labels = labels.reshape(ref.shape)
        else:  # a mask on another grid than its image: resample (nearest) onto the mask
            labels = ResampleToMatch(mode="nearest")(labels.float(), img_dst=ref)
    array = np.asarray(labels[0]).astype(np.uint8)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if reference.lower().endswith(NIFTI):
        header_img = nib.load(reference)
        array = array.reshape(header_img.shape)
        out = nib.Nifti1Image(array, header_img.affine, header_img.header.copy())
        out.set_data_dtype(np.uint8)
        out.header.set_slope_inter(1, 0)
        nib.save(out, str(out_path))
    elif out_path.suffix == ".png":
        writer = PILWriter(output_dtype=np.uint8, scale=None)
        writer.set_data_array(array, channel_dim=None)
        writer.write(str(out_path))
    else:  # other formats: NIfTI with the affine MONAI read from the reference
        affine = np.asarray(ref.affine, dtype=np.float64)
        nib.save(nib.Nifti1Image(array, affine), str(out_path))
    return out_path


def predict_dataset(model: torch.nn.Module, dataset, roi_size, device, out_dir: Path) -> list:
    """Predict every case of an evaluation-mode dataset; returns predictions.json rows."""
    rows, used = [], set()
    for i in range(len(dataset)):
        item = dataset[i]
        probs = sliding_window_probs(model, item["pixel_values"], roi_size, device)
        original = dataset.invert(probs, item["pixel_values"])
        labels = original.argmax(0, keepdim=True)
        reference = _reference(item)
        path = save_label_map(labels, reference, out_dir / _output_name(reference, used))
        rows.append({"image_path": item["image_path"], "label_path": item.get("label_path"),
                     "prediction_path": str(path)})
    return rows
