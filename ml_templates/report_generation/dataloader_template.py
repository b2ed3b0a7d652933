"""Report-generation dataloader: reads the paper-format index (train.json / test.json, each a list
of ``{"image_path", "findings", "impression"}``) and yields per report::

    {"pixel_values": float tensor (C, *IMAGE_SIZE), "input_ids": long (MAX_TOKENS,),
     "labels": long (MAX_TOKENS,) with padding as -100, "image_path": the index's image_path}

The text target is ``"FINDINGS: ... IMPRESSION: ..."`` framed as ``[BOS] ... [EOS]``. The tokenizer
is the local pretrained one at TOKENIZER_PATH, or else a small one trained on train.json's reports
only (``ml_templates.report_generation.tokenizer``); train.py passes its own (saved under
Logout/tokenizer/) with ``tokenizer=``. An image is any reference
``core.imaging.image_io.read_image`` reads: a 2D file (PNG/JPEG/DICOM), a 3D file (NIfTI,
NRRD, ...), a folder of 2D slices or a DICOM series manifest (one 3D scan), an array element
(``file.npz::key[i]``), or a list of these (channels, fixed order); ``ALLOW_PICKLE = True`` in
the CONFIG block lets it unpickle ``.pck``/``.pkl`` arrays (local data only).
Augmentation is light and never flips: the side of a finding is part of the report.
The Module Architect instantiates this template as ``Datapath/dataloader.py`` by filling the
block between the CONFIG markers (use "" for no tokenizer path).
"""
# --- M3B CONFIG START
DATAPATH = "."
SPATIAL_DIMS = 2
IMAGE_SIZE = [64, 64]
IN_CHANNELS = 1
MAX_TOKENS = 64
TOKENIZER_PATH = ""
INTENSITY = {"kind": "minmax"}
# --- M3B CONFIG END
import json
from pathlib import Path

import torch
from monai.transforms import (Compose, EnsureType, NormalizeIntensity, RandAffine,
                              RandGaussianNoise, Resize, ScaleIntensity, ScaleIntensityRange)

from core.imaging.image_io import read_image
from ml_templates.report_generation.tokenizer import encode_report, get_tokenizer, report_text

ALLOW_PICKLE = globals().get("ALLOW_PICKLE", False)  # unpickle .pck/.pkl images (local data only)
_TOKENIZERS: dict = {}


def image_key(image_path) -> str:
    """A hashable, JSON-stable name for an index entry's image (a path or a list of paths)."""
    return image_path if isinstance(image_path, str) else json.dumps(image_path)


class _ReadImage:
    """Any index image reference (core.imaging.image_io), or a list of them (channels,
    fixed order) -> (IN_CHANNELS, *spatial) tensor with SPATIAL_DIMS spatial axes. A stack of
    2D slices (folder or DICOM series) becomes one gray channel, slices on the first axis."""

    def _one(self, ref: str) -> torch.Tensor:
        array, meta = read_image(ref, allow_pickle=ALLOW_PICKLE)
        img = torch.from_numpy(array)
        if meta.get("stacked_slices"):
            img = img[:3].mean(0, keepdim=True).movedim(-1, 1)
        while img.ndim - 1 > SPATIAL_DIMS and img.shape[-1] == 1:  # (1, H, W, 1) -> (1, H, W)
            img = img[..., 0]
        return img

    def __call__(self, image_path) -> torch.Tensor:
        paths = [image_path] if isinstance(image_path, str) else list(image_path)
        img = torch.cat([self._one(str(p)) for p in paths], dim=0)
        if img.ndim - 1 != SPATIAL_DIMS:
            raise ValueError(f"{image_path}: {img.ndim - 1} spatial axes (shape "
                             f"{tuple(img.shape)}), SPATIAL_DIMS is {SPATIAL_DIMS}")
        if img.shape[0] != IN_CHANNELS:  # RGB(A) -> gray, or gray -> repeated
            img = img[:3].mean(0, keepdim=True).repeat(IN_CHANNELS, *[1] * SPATIAL_DIMS)
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
    if augment:  # small rotations/zoom/shift and noise; no flips (left/right is in the report)
        steps += [RandAffine(prob=0.5, rotate_range=0.08, scale_range=0.08,
                             translate_range=[s * 0.04 for s in IMAGE_SIZE], padding_mode="zeros"),
                  RandGaussianNoise(prob=0.3, std=0.02)]
    steps.append(EnsureType(data_type="tensor", dtype=torch.float32, track_meta=False))
    return Compose(steps)


def load_index(split: str, datapath: str = DATAPATH) -> list[dict]:
    return json.loads((Path(datapath) / f"{split}.json").read_text())


def default_tokenizer(datapath: str = DATAPATH):
    """TOKENIZER_PATH's tokenizer, or one trained on this datapath's training reports."""
    key = str(Path(datapath).resolve())
    if key not in _TOKENIZERS:
        texts = [report_text(it.get("findings"), it.get("impression"))
                 for it in load_index("train", datapath)]
        _TOKENIZERS[key] = get_tokenizer(texts, TOKENIZER_PATH or None)
    return _TOKENIZERS[key]


class ReportDataset(torch.utils.data.Dataset):
    def __init__(self, split: str = "train", augment: bool | None = None,
                 datapath: str = DATAPATH, items: list | None = None, tokenizer=None):
        self.items = items if items is not None else load_index(split, datapath)
        self.tokenizer = tokenizer or default_tokenizer(datapath)
        self.read = _ReadImage()
        self.transforms = build_transforms(split == "train" if augment is None else augment)

    def __len__(self) -> int:
        return len(self.items)

    def text(self, i: int) -> str:
        return report_text(self.items[i].get("findings"), self.items[i].get("impression"))

    def __getitem__(self, i: int) -> dict:
        item = self.items[i]
        pixels = self.transforms(self.read(item["image_path"]))
        input_ids, labels, _ = encode_report(self.tokenizer, self.text(i), MAX_TOKENS)
        return {"pixel_values": pixels, "input_ids": torch.tensor(input_ids, dtype=torch.long),
                "labels": torch.tensor(labels, dtype=torch.long),
                "image_path": image_key(item["image_path"])}


def get_dataset(split: str, augment: bool | None = None) -> ReportDataset:
    return ReportDataset(split, augment)
