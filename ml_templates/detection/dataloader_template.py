"""Detection dataloader: reads the index (train.json / test.json / label_dict.json) and yields
one dict per image::

    {"image": float tensor (C, *IMAGE_SIZE), "boxes": float tensor (N, 2 * SPATIAL_DIMS),
     "labels": long tensor (N,), "image_path": ..., "original_size": [..], "image_size": [..]}

Index entries are ``{"image_path", "boxes": [[x0, y0, x1, y1], ...] (3D: [x0, y0, z0, x1, y1,
z1]), "labels": [name, ...]}`` in pixel/voxel coordinates of the image as stored; empty lists
mark a negative image. Axis order is MONAI's array order: x is the first spatial axis as MONAI
loads the file (the column of a PNG, the first voxel index of a NIfTI), z the slice index of a
folder of 2D slices. Boxes are corner boxes (MONAI ``StandardMode``): a box [0, 0, W, H] covers
the whole image.

Every spatial step moves the boxes with the image (MONAI's box-aware transforms from
``monai.apps.detection.transforms``): resizing to IMAGE_SIZE scales them, random zoom/flip/
rotation move them, clipping drops boxes that leave the image. ``to_original(boxes, item)`` maps
predicted boxes back to the stored image's coordinates. The Module Architect instantiates this
template as ``Datapath/dataloader.py`` by filling the block between the CONFIG markers.
"""
# --- M3B CONFIG START
DATAPATH = "."
SPATIAL_DIMS = 2
IMAGE_SIZE = [128, 128]
IN_CHANNELS = 1
INTENSITY = {"kind": "minmax"}
# --- M3B CONFIG END
import json
from pathlib import Path

import numpy as np
import torch
from monai.apps.detection.transforms.array import ResizeBox
from monai.apps.detection.transforms.dictionary import (ClipBoxToImaged, ConvertBoxToStandardModed,
                                                        RandFlipBoxd, RandRotateBox90d,
                                                        RandZoomBoxd, StandardizeEmptyBoxd)
from monai.transforms import (Compose, MapTransform, NormalizeIntensityd, RandGaussianNoised,
                              RandScaleIntensityd, Resize, ScaleIntensityd, ScaleIntensityRanged)

from core.imaging.image_io import read_image

ALLOW_PICKLE = globals().get("ALLOW_PICKLE", False)  # unpickle .pck/.pkl images (local data only)
BOX_MODE = "xyxy" if SPATIAL_DIMS == 2 else "xyzxyz"
CACHE_MAX_BYTES = 2e9  # prepared images kept in memory up to this size (per dataset)


class _ReadImage:
    """Any index image reference (core.imaging.image_io) -> (C, *spatial): a folder of
    2D slices or a DICOM series -> (C, X, Y, Z) with the slices along the last axis; a list of
    files -> their channels concatenated (e.g. MRI sequences)."""

    def __call__(self, key) -> torch.Tensor:
        img = torch.from_numpy(read_image(key, allow_pickle=ALLOW_PICKLE)[0])
        if img.ndim - 1 != SPATIAL_DIMS:
            raise ValueError(f"{key}: {img.ndim - 1} spatial dimensions, expected {SPATIAL_DIMS}")
        if img.shape[0] != IN_CHANNELS:  # RGB(A) -> gray, or gray -> repeated
            img = img[:3].mean(0, keepdim=True).repeat(IN_CHANNELS, *[1] * (img.ndim - 1))
        return img


class ResizeWithBoxesd(MapTransform):
    """Resize the image to ``spatial_size`` and scale its boxes with it (MONAI ``ResizeBox``);
    records the size before (``original_size``) so predictions can be mapped back."""

    def __init__(self, spatial_size):
        super().__init__(["image", "boxes"])
        mode = "bilinear" if len(spatial_size) == 2 else "trilinear"
        self.image_resize = Resize(spatial_size=spatial_size, mode=mode, anti_aliasing=False)
        self.box_resize = ResizeBox(spatial_size=spatial_size)

    def __call__(self, data: dict) -> dict:
        d = dict(data)
        src = list(d["image"].shape[1:])
        d["boxes"] = self.box_resize(d["boxes"], src_spatial_size=src)
        d["image"] = self.image_resize(d["image"])
        d["original_size"] = src
        return d


def to_original(boxes, original_size, image_size=IMAGE_SIZE):
    """Predicted boxes at IMAGE_SIZE -> coordinates of the stored image."""
    return ResizeBox(spatial_size=list(original_size))(boxes, src_spatial_size=list(image_size))


def intensity_transform():
    """CT: a window in HU mapped to [0, 1]; MRI: z-score over the body; otherwise min-max."""
    kind = INTENSITY.get("kind", "minmax")
    if kind == "ct":
        low, high = INTENSITY.get("window", [-1000, 400])
        return ScaleIntensityRanged("image", a_min=low, a_max=high, b_min=0.0, b_max=1.0, clip=True)
    if kind == "mri":
        return NormalizeIntensityd("image", nonzero=True, channel_wise=True)
    return ScaleIntensityd("image", minv=0.0, maxv=1.0)


def _clip() -> ClipBoxToImaged:
    return ClipBoxToImaged(box_keys="boxes", label_keys="labels", box_ref_image_keys="image",
                           remove_empty=True)


def preparation() -> Compose:
    """The deterministic part (cached per image when the set is small)."""
    return Compose([StandardizeEmptyBoxd(box_keys="boxes", box_ref_image_keys="image"),
                    ConvertBoxToStandardModed(box_keys="boxes", mode=BOX_MODE),
                    intensity_transform(), ResizeWithBoxesd(IMAGE_SIZE), _clip()])


def build_transforms(augment: bool) -> Compose:
    """Random augmentation on the prepared item (empty when ``augment`` is false)."""
    if not augment:
        return Compose([])
    box = {"image_keys": "image", "box_keys": "boxes", "box_ref_image_keys": "image"}
    steps = [RandZoomBoxd(**box, prob=0.3, min_zoom=0.85, max_zoom=1.15, padding_mode="constant",
                          keep_size=True)]
    # X-rays: left-right only; volumes: every axis (MONAI's LUNA16 recipe)
    for axis in range(SPATIAL_DIMS if SPATIAL_DIMS == 3 else 1):
        steps.append(RandFlipBoxd(**box, prob=0.5, spatial_axis=axis))
    if SPATIAL_DIMS == 3 and IMAGE_SIZE[0] == IMAGE_SIZE[1]:
        steps.append(RandRotateBox90d(**box, prob=0.5, max_k=3, spatial_axes=(0, 1)))
    steps += [RandScaleIntensityd("image", prob=0.3, factors=0.1),
              RandGaussianNoised("image", prob=0.3, std=0.02), _clip()]
    return Compose(steps)


def load_label_dict(datapath: str = DATAPATH) -> dict:
    return json.loads((Path(datapath) / "label_dict.json").read_text())


class DetectionDataset(torch.utils.data.Dataset):
    """``cache``: keep prepared items in memory (default: when they fit in CACHE_MAX_BYTES)."""

    def __init__(self, split: str = "train", augment: bool | None = None,
                 datapath: str = DATAPATH, items: list | None = None, cache: bool | None = None):
        self.label_dict = load_label_dict(datapath)
        if items is None:
            items = json.loads((Path(datapath) / f"{split}.json").read_text())
        self.items = list(items)
        self.read = _ReadImage()
        self.prepare = preparation()
        self.transforms = build_transforms(split == "train" if augment is None else augment)
        size = len(self.items) * IN_CHANNELS * int(np.prod(IMAGE_SIZE)) * 4
        self.cache = {} if (size <= CACHE_MAX_BYTES if cache is None else cache) else None

    def prepared(self, i: int) -> dict:
        """Item i after the deterministic transforms (before augmentation)."""
        if self.cache is not None and i in self.cache:
            return self.cache[i]
        entry = self.items[i]
        boxes = np.asarray(entry.get("boxes") or [], dtype=np.float32).reshape(-1, 2 * SPATIAL_DIMS)
        labels = np.asarray([self.label_dict[n] for n in entry.get("labels") or []], dtype=np.int64)
        if len(boxes) != len(labels):
            raise ValueError(f"{entry['image_path']}: {len(boxes)} boxes but {len(labels)} labels")
        d = self.prepare({"image": self.read(entry["image_path"]), "boxes": boxes,
                          "labels": labels})
        d = {"image": torch.as_tensor(d["image"], dtype=torch.float32).as_subclass(torch.Tensor),
             "boxes": d["boxes"], "labels": d["labels"], "original_size": d["original_size"]}
        if self.cache is not None:
            self.cache[i] = d
        return d

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        d = self.transforms(dict(self.prepared(i)))
        width = 2 * SPATIAL_DIMS
        return {"image": torch.as_tensor(d["image"], dtype=torch.float32).as_subclass(torch.Tensor),
                "boxes": torch.as_tensor(d["boxes"], dtype=torch.float32).reshape(-1, width),
                "labels": torch.as_tensor(d["labels"], dtype=torch.long).reshape(-1),
                "image_path": self.items[i]["image_path"], "original_size": d["original_size"],
                "image_size": list(IMAGE_SIZE)}


def get_dataset(split: str, augment: bool | None = None) -> DetectionDataset:
    return DetectionDataset(split, augment)
