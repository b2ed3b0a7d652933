"""Diagnosis dataloader: reads the paper-format index (train.json / test.json / label_dict.json)
and yields ``{"pixel_values": float tensor (C, *IMAGE_SIZE), "labels": ...}`` per image.

Single-label targets are class indices (softmax); with ``MULTI_LABEL`` they are multi-hot
vectors (sigmoid, one output per label). The Module Architect instantiates this template as
``Datapath/dataloader.py`` by filling the block between the CONFIG markers; the rest is used as it
is. An index key is any image reference ``core.imaging.image_io.read_image`` reads: an image file
(PNG/JPEG, DICOM, NIfTI, NRRD, ...), a folder of 2D slices or a DICOM series manifest (one 3D
scan, slices on the first spatial axis), an array element ``file.npz::key[i]``, or a JSON list of
channel files.
The optional CONFIG key ``ALLOW_PICKLE = True`` lets it unpickle ``.pck``/``.pkl`` arrays
(registered local datasets only: unpickling runs code).
"""
# --- M3B CONFIG START
DATAPATH = "."
IMAGE_SIZE = [128, 128]
IN_CHANNELS = 1
MULTI_LABEL = False
INTENSITY = {"kind": "minmax"}
# --- M3B CONFIG END
import json
from pathlib import Path

import torch
from monai.transforms import (Compose, EnsureType, NormalizeIntensity, RandAffine,
                              RandGaussianNoise, Resize, ScaleIntensity, ScaleIntensityRange)

from core.imaging.image_io import read_image

ALLOW_PICKLE = globals().get("ALLOW_PICKLE", False)  # unpickle .pck/.pkl images (local data only)


class _ReadImage:
    """Index key -> (IN_CHANNELS, ...) tensor through the shared reader; a stack of 2D slices
    (folder or DICOM series) -> (C, slices, ...), the order the fingerprint sizes it in."""

    def __call__(self, key: str) -> torch.Tensor:
        array, meta = read_image(key, allow_pickle=ALLOW_PICKLE)
        img = torch.from_numpy(array)
        if meta.get("stacked_slices"):
            img = img.movedim(-1, 1)
        if img.shape[0] != IN_CHANNELS:  # RGB(A) -> gray, or gray -> repeated
            img = img[:3].mean(0, keepdim=True).repeat(IN_CHANNELS, *[1] * (img.ndim - 1))
        return img


def intensity_transform():
    """CT: a window in HU mapped to [0, 1]; MRI: z-score over the body; otherwise min-max."""
    kind = INTENSITY.get("kind", "minmax")
    if kind == "ct":
        low, high = INTENSITY.get("window", [-1000, 1000])
        return ScaleIntensityRange(a_min=low, a_max=high, b_min=0.0, b_max=1.0, clip=True)
    if kind == "mri":
        return NormalizeIntensity(nonzero=True, channel_wise=True)
    return ScaleIntensity(minv=0.0, maxv=1.0)


def build_transforms(augment: bool) -> Compose:
    steps = [intensity_transform(), Resize(spatial_size=IMAGE_SIZE)]
    if augment:
        steps += [RandAffine(prob=0.5, rotate_range=0.1, scale_range=0.1,
                             translate_range=[s * 0.05 for s in IMAGE_SIZE], padding_mode="zeros"),
                  RandGaussianNoise(prob=0.3, std=0.02)]
    steps.append(EnsureType(data_type="tensor", dtype=torch.float32, track_meta=False))
    return Compose(steps)


def load_label_dict(datapath: str = DATAPATH) -> dict:
    return json.loads((Path(datapath) / "label_dict.json").read_text())


class DiagnosisDataset(torch.utils.data.Dataset):
    def __init__(self, split: str = "train", augment: bool | None = None,
                 datapath: str = DATAPATH, items: list | None = None):
        self.label_dict = load_label_dict(datapath)
        index = json.loads((Path(datapath) / f"{split}.json").read_text())
        self.items = items if items is not None else sorted(index.items())
        self.read = _ReadImage()
        self.transforms = build_transforms(split == "train" if augment is None else augment)

    def __len__(self) -> int:
        return len(self.items)

    def encode(self, labels: list) -> torch.Tensor:
        if MULTI_LABEL:
            target = torch.zeros(len(self.label_dict), dtype=torch.float32)
            for name in labels:
                target[self.label_dict[name]] = 1.0
            return target
        return torch.tensor(self.label_dict[labels[0]], dtype=torch.long)

    def __getitem__(self, i: int) -> dict:
        path, labels = self.items[i]
        pixels = self.transforms(self.read(path))
        return {"pixel_values": pixels, "labels": self.encode(labels), "image_path": path}


def get_dataset(split: str, augment: bool | None = None) -> DiagnosisDataset:
    return DiagnosisDataset(split, augment)
