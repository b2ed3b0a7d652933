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

The deterministic steps (read, intensity, resize) run once per image (ml_templates.common.cache):
kept in memory when the whole index fits the memory budget, and written to ``CACHE_DIR`` (the
job's ``cache/`` folder, relative to the Datapath) when the CONFIG names one, so the dataloader
check's decodes, later epochs, worker processes and re-runs reuse them. Augmentation runs on
every access, after the cache, from ``dataset.transforms``' random state.
"""
# --- M3B CONFIG START
DATAPATH = "."
IMAGE_SIZE = [128, 128]
IN_CHANNELS = 1
MULTI_LABEL = False
INTENSITY = {"kind": "minmax"}
# --- M3B CONFIG END
import json
import math
from pathlib import Path

import torch
from monai.transforms import (Compose, EnsureType, NormalizeIntensity, RandAffine,
                              RandGaussianNoise, Randomizable, Resize, ScaleIntensity,
                              ScaleIntensityRange, Transform)
from monai.utils import convert_to_tensor

from core.imaging.image_io import read_image
from ml_templates.common.cache import (DecodedImages, cache_records, config_digest,
                                       fits_in_memory, safe_cache_dir)

ALLOW_PICKLE = globals().get("ALLOW_PICKLE", False)  # unpickle .pck/.pkl images (local data only)
CACHE_DIR = globals().get("CACHE_DIR")  # decoded images on disk (relative to the Datapath)


class _ReadImage:
    """Index key -> (IN_CHANNELS, ...) tensor through the shared reader; a stack of 2D slices
    (folder or DICOM series) -> (C, slices, ...), the order the fingerprint sizes it in."""

    def __call__(self, key: str) -> torch.Tensor:
        array, meta = read_image(key, allow_pickle=ALLOW_PICKLE)
        img = torch.from_numpy(array)
        if meta.get("stacked_slices"):
            img = img.movedim(-1, 1)
        counts = meta.get("channel_counts") or []
        if len(counts) == IN_CHANNELS and sum(counts) == img.shape[0] != IN_CHANNELS:
            # views of one record (left and right fundus), each RGB: one gray channel a view
            img = torch.cat([part[:3].mean(0, keepdim=True)
                             for part in torch.split(img, counts, dim=0)], dim=0)
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


def split_transforms(transforms: Compose) -> tuple[Compose, Compose]:
    """(deterministic steps before the first random one, the rest); the same transform objects,
    so ``transforms.set_random_state`` seeds the random part."""
    steps = list(transforms.transforms)
    first = next((i for i, t in enumerate(steps) if isinstance(t, Randomizable)), len(steps))
    return Compose(steps[:first]), Compose(steps[first:])


class PrepareImage(Transform):
    """``{"image": ref}`` -> ``{"image": (C, *IMAGE_SIZE) float tensor}``: read, intensity,
    resize; what the cache keeps."""

    def __init__(self, read, steps: Compose):
        self.read, self.steps = read, steps

    def __call__(self, data: dict) -> dict:
        return {"image": convert_to_tensor(self.steps(self.read(data["image"])),
                                           dtype=torch.float32, track_meta=False)}


def load_label_dict(datapath: str = DATAPATH) -> dict:
    return json.loads((Path(datapath) / "label_dict.json").read_text())


def _index_size(datapath: Path) -> int:
    """Images in train.json + test.json: what the job's datasets may cache between them."""
    return sum(len(json.loads(p.read_text())) for p in
               (datapath / "train.json", datapath / "test.json") if p.exists())


class DiagnosisDataset(torch.utils.data.Dataset):
    """``split`` is "train" or "test"; ``augment`` (default: split == "train") adds random
    affine and noise; ``items`` overrides the index entries ``[(image_path, [label, ...])]``
    (e.g. a validation subset)."""

    def __init__(self, split: str = "train", augment: bool | None = None,
                 datapath: str = DATAPATH, items: list | None = None):
        self.datapath = Path(datapath)
        self.label_dict = load_label_dict(datapath)
        index = json.loads((self.datapath / f"{split}.json").read_text())
        self.items = items if items is not None else sorted(index.items())
        self.read = _ReadImage()
        self.transforms = build_transforms(split == "train" if augment is None else augment)
        self.deterministic, self.random = split_transforms(self.transforms)
        self._prepared: DecodedImages | None = None

    @property
    def prepared(self) -> DecodedImages:
        """The cached deterministic part, built on first use (file stamps are read then)."""
        if self._prepared is None:
            size = IN_CHANNELS * math.prod(IMAGE_SIZE) * 4
            key = config_digest({"IMAGE_SIZE": IMAGE_SIZE, "IN_CHANNELS": IN_CHANNELS,
                                 "INTENSITY": INTENSITY, "ALLOW_PICKLE": ALLOW_PICKLE},
                                globals().get("__file__"))
            records, folders = cache_records([path for path, _ in self.items], key)
            cache_dir = safe_cache_dir(self.datapath / CACHE_DIR if CACHE_DIR else None, folders)
            self._prepared = DecodedImages(
                records, PrepareImage(self.read, self.deterministic), cache_dir,
                in_memory=fits_in_memory(max(_index_size(self.datapath), len(self.items)), size))
        return self._prepared

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
        pixels = self.random(self.prepared[i]["image"].clone())
        return {"pixel_values": pixels, "labels": self.encode(labels), "image_path": path}


def get_dataset(split: str, augment: bool | None = None) -> DiagnosisDataset:
    return DiagnosisDataset(split, augment)
