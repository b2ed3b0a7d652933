"""Segmentation dataloader (organs, lesions; 2D or 3D; one or several image channels).

Reads the index ``[{"image_path": file | [channel files], "label_path": file, "labels": [...]}]``
(``labels[i]`` is mask value i + 1) and builds MONAI dictionary transforms:

    load (any image reference of core.imaging.image_io: files, DICOM series, array
          elements; channel files stacked in their fixed order) -> channel first -> RAS (3D)
    -> resample to PIXDIM (bilinear image, nearest mask) -> intensity -> crop to the foreground
    training:   pad to ROI_SIZE -> foreground/background-balanced patch -> flips, intensity jitter
                -> {"pixel_values": (C, *ROI_SIZE) float, "labels": (1, *ROI_SIZE) long}
    evaluation: the whole preprocessed image (a MetaTensor that remembers every spatial step) so
                ``SegmentationDataset.invert`` maps a prediction back to the original grid.

The deterministic steps are cached on first use: in memory (``CACHE_RATE`` of the cases) when
the whole index fits the memory budget (ml_templates.common.cache; the size per case estimated
from ``Datapath/fingerprint.json``), else, for training patches, on disk through MONAI's
PersistentDataset in ``CACHE_DIR`` (the job's ``cache/`` folder, relative to the Datapath),
keyed by CONFIG, dataloader source and each file's size and mtime. Evaluation images keep their
MetaTensor history for ``invert``, which a safe (weights-only) disk cache cannot hold: past the
budget they are preprocessed on every use. The Module Architect instantiates this file as
``Datapath/dataloader.py`` by filling the CONFIG block.
"""
# --- M3B CONFIG START
DATAPATH = "."
SPATIAL_DIMS = 3
PIXDIM = [1.5, 1.5, 3.0]
ROI_SIZE = [48, 48, 16]
IN_CHANNELS = 1
NUM_CLASSES = 2
INTENSITY = {"kind": "ct", "window": [-160, 240]}
# --- M3B CONFIG END
import json
import math
from pathlib import Path

import torch
from monai.data import CacheDataset, Dataset, MetaTensor, PersistentDataset
from monai.transforms import (Compose, CropForegroundd, EnsureChannelFirstd, EnsureTyped,
                              Invertd, LoadImaged, MapTransform,
                              NormalizeIntensityd,
                              Orientationd, RandCropByLabelClassesd,
                              RandCropByPosNegLabeld, RandFlipd,
                              RandScaleIntensityd, RandShiftIntensityd, ScaleIntensityd,
                              ScaleIntensityRanged, Spacingd, SpatialPadd)

from core.imaging.arrays import map_label_values
from core.imaging.image_io import ImageRefReader
from ml_templates.common.cache import (cache_records, config_digest, fits_in_memory,
                                       safe_cache_dir)

SAMPLES_PER_CASE = globals().get("SAMPLES_PER_CASE", 4)  # training patches per case and epoch
CACHE_RATE = globals().get("CACHE_RATE", 1.0)
ALLOW_PICKLE = globals().get("ALLOW_PICKLE", False)  # unpickle .pck/.pkl images (local data only)
CACHE_DIR = globals().get("CACHE_DIR")  # preprocessed training cases on disk (past the budget)


class FitImage(MapTransform):
    """Checks the image and mask share a grid, drops trailing singleton axes of 2D files
    (H, W, 1) and turns RGB(A) into gray when the network takes one channel."""

    def __call__(self, data):
        d = dict(data)
        for key in self.key_iterator(d):
            while d[key].ndim - 1 > SPATIAL_DIMS and d[key].shape[-1] == 1:
                d[key] = d[key][..., 0]
        image = d["image"]
        if image.shape[0] != IN_CHANNELS and IN_CHANNELS == 1:
            d["image"] = image[:3].mean(0, keepdim=True)
        if d["image"].shape[0] != IN_CHANNELS:
            raise ValueError(f"image has {d['image'].shape[0]} channels, IN_CHANNELS is "
                             f"{IN_CHANNELS}")
        if "label" in d and tuple(d["label"].shape[1:]) != tuple(d["image"].shape[1:]):
            raise ValueError(f"image grid {tuple(d['image'].shape[1:])} and mask grid "
                             f"{tuple(d['label'].shape[1:])} differ")
        return d


def intensity_transform():
    """CT: a window in HU mapped to [0, 1]; MRI: z-score per channel over the nonzero body;
    otherwise min-max to [0, 1]."""
    kind = INTENSITY.get("kind", "minmax")
    if kind == "ct":
        low, high = INTENSITY.get("window", [-160, 240])
        return ScaleIntensityRanged("image", a_min=low, a_max=high, b_min=0.0, b_max=1.0,
                                    clip=True)
    if kind == "mri":
        return NormalizeIntensityd("image", nonzero=True, channel_wise=True)
    return ScaleIntensityd("image", minv=0.0, maxv=1.0, channel_wise=True)


def nonzero(x):
    """Foreground for cropping: anything but the background value (0 after every intensity
    step: below the CT window, outside a skull-stripped MRI, the darkest pixel otherwise)."""
    return x != 0


class MapStoredLabels(MapTransform):
    """Per case, mask values stored as other numbers become labels 1..N: the index entry's
    ``label_values`` (a binary mask stored as 0/255 gives [255]; a 3D Slicer segmentation whose
    segments carry different values in each file gives that file's values in label order)."""

    def __init__(self):
        super().__init__(["label"], allow_missing_keys=True)

    def __call__(self, data):
        d = dict(data)
        values = d.pop("label_values", None)
        if values and "label" in d:
            d["label"] = map_label_values(d["label"], values)
        return d


def preprocessing(keys: list[str]) -> list:
    """The deterministic, invertible steps shared by training and evaluation. Mask values are
    mapped to labels 1..N from each record's ``label_values``."""
    modes = ["bilinear", "nearest"][:len(keys)]
    steps = [LoadImaged(keys, reader=ImageRefReader(allow_pickle=ALLOW_PICKLE), image_only=True),
             EnsureChannelFirstd(keys), FitImage(keys)]
    if "label" in keys:
        steps.append(MapStoredLabels())
    if SPATIAL_DIMS == 3:
        steps.append(Orientationd(keys, axcodes="RAS", labels=(("L", "R"), ("P", "A"), ("I", "S"))))
    if PIXDIM:
        steps.append(Spacingd(keys, pixdim=PIXDIM, mode=modes))
    steps += [intensity_transform(),
              CropForegroundd(keys, source_key="image", select_fn=nonzero, margin=2,
                              allow_smaller=True)]
    return steps


def patch_sampler(keys: list[str]):
    """Patches centred on foreground twice as often as on background; with several classes,
    every class equally often (small structures are not drowned by large ones)."""
    if NUM_CLASSES > 2:
        return RandCropByLabelClassesd(keys, label_key="label", spatial_size=ROI_SIZE,
                                       num_classes=NUM_CLASSES, num_samples=1,
                                       ratios=[1.0] + [2.0 / (NUM_CLASSES - 1)] * (NUM_CLASSES - 1),
                                       warn=False)
    return RandCropByPosNegLabeld(keys, label_key="label", spatial_size=ROI_SIZE, pos=2, neg=1,
                                  num_samples=1)


def training_steps() -> list:
    keys = ["image", "label"]
    flips = [RandFlipd(keys, prob=0.2, spatial_axis=axis) for axis in range(SPATIAL_DIMS)]
    # CT numbers are absolute (a 0.1 shift is 40 HU in a 400 HU window): jitter them less
    jitter = 0.02 if INTENSITY.get("kind") == "ct" else 0.1
    return [SpatialPadd(keys, spatial_size=ROI_SIZE), patch_sampler(keys), *flips,
            RandScaleIntensityd("image", factors=jitter, prob=0.5),
            RandShiftIntensityd("image", offsets=jitter, prob=0.5),
            EnsureTyped(keys, dtype=torch.float32, track_meta=False)]


def case_bytes(datapath: Path) -> float | None:
    """Estimated bytes of one preprocessed case (image channels + mask, float32) from the
    fingerprint's median shape resampled to PIXDIM; None without a fingerprint."""
    try:
        fp = json.loads((datapath / "fingerprint.json").read_text())
        shape = [float(s) for s in fp["median_shape"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    spacing = fp.get("median_spacing")
    if PIXDIM and spacing and len(spacing) == len(shape) == len(PIXDIM):
        shape = [s * sp / p for s, sp, p in zip(shape, spacing, PIXDIM)]
    return (IN_CHANNELS + 1) * math.prod(shape) * 4


def _index_size(datapath: Path) -> int:
    return sum(len(json.loads(p.read_text())) for p in
               (datapath / "train.json", datapath / "test.json") if p.exists())


def _resolve(path, datapath: Path):
    if isinstance(path, (list, tuple)):
        return [_resolve(p, datapath) for p in path]
    return str(path if Path(path).is_absolute() else datapath / path)


class SegmentationDataset(torch.utils.data.Dataset):
    """``split`` is "train" or "test"; ``augment`` (default: split == "train") gives random
    patches, otherwise whole preprocessed images with their paths. ``items`` overrides the
    index entries (e.g. a validation subset)."""

    def __init__(self, split: str = "train", augment: bool | None = None,
                 datapath: str = DATAPATH, items: list | None = None):
        self.datapath = Path(datapath)
        if items is None:
            items = json.loads((self.datapath / f"{split}.json").read_text())
        self.items = list(items)
        self.augment = split == "train" if augment is None else augment
        has_label = all(it.get("label_path") for it in self.items)
        if self.augment and not has_label:
            raise ValueError("training patches need a label_path for every case")
        self.keys = ["image", "label"] if has_label else ["image"]
        self.pre = Compose(preprocessing(self.keys))
        self.transforms = Compose([*self.pre.transforms,
                                   *(training_steps() if self.augment else [])])
        records = [{"image": _resolve(it["image_path"], self.datapath),
                    **({"label": _resolve(it["label_path"], self.datapath)} if has_label else {}),
                    **({"label_values": list(it["label_values"])}
                       if has_label and it.get("label_values") else {})}
                   for it in self.items]
        self.data = self._cached(records)

    def _cached(self, records: list[dict]):
        """In memory when the job's cases fit the budget; else training patches come from the
        disk cache (evaluation images, which keep their MetaTensor history, are not cached)."""
        size = case_bytes(self.datapath)
        if size is None or fits_in_memory(max(_index_size(self.datapath), len(records)), size):
            self.cache = "memory"
            return CacheDataset(records, self.transforms, cache_rate=CACHE_RATE,
                                runtime_cache=True, progress=False)
        key = config_digest({"SPATIAL_DIMS": SPATIAL_DIMS, "PIXDIM": PIXDIM,
                             "IN_CHANNELS": IN_CHANNELS, "INTENSITY": INTENSITY,
                             "ALLOW_PICKLE": ALLOW_PICKLE}, globals().get("__file__"))
        keyed, folders = cache_records([[r["image"], r.get("label")] if "label" in r
                                        else r["image"] for r in records], key, key="refs")
        cache_dir = safe_cache_dir(self.datapath / CACHE_DIR if CACHE_DIR and self.augment
                                   else None, folders)
        self.cache = "disk" if cache_dir else "none"
        if cache_dir is None:
            return Dataset(records, self.transforms)
        records = [{**r, "cache_key": k["cache_key"]} for r, k in zip(records, keyed)]
        return PersistentDataset(records, self.transforms, cache_dir=cache_dir)

    def __len__(self) -> int:
        return len(self.items) * (SAMPLES_PER_CASE if self.augment else 1)

    def __getitem__(self, i: int) -> dict:
        item = self.items[i % len(self.items)]
        d = self.data[i % len(self.items)]
        if self.augment:
            d = d[0] if isinstance(d, list) else d
            return {"pixel_values": d["image"], "labels": d["label"].long()}
        out = {"pixel_values": d["image"], "image_path": item["image_path"],
               "label_path": item.get("label_path")}
        if "label" in d:
            out["labels"] = d["label"]
        return out

    def invert(self, prediction: torch.Tensor, pixel_values: MetaTensor) -> MetaTensor:
        """Undo crop, resampling and reorientation of ``prediction`` (K, *spatial), e.g. class
        probabilities on the preprocessed grid of ``pixel_values``: returns it on the grid of
        the original image file (bilinear; argmax afterwards)."""
        pred = MetaTensor(prediction.detach().cpu().float(), meta=dict(pixel_values.meta),
                          applied_operations=list(pixel_values.applied_operations))
        inverter = Invertd("pred", transform=self.pre, orig_keys="image", nearest_interp=False)
        return inverter({"pred": pred, "image": pixel_values})["pred"]


def get_dataset(split: str, augment: bool | None = None) -> SegmentationDataset:
    return SegmentationDataset(split, augment)


def label_names(datapath: str = DATAPATH) -> list[str]:
    """Label names from the first training case (mask value i + 1 is labels[i])."""
    index = json.loads((Path(datapath) / "train.json").read_text())
    return list(index[0].get("labels", [])) if index else []


def describe() -> dict:
    return {"spatial_dims": SPATIAL_DIMS, "pixdim": PIXDIM, "roi_size": list(ROI_SIZE),
            "in_channels": IN_CHANNELS, "num_classes": NUM_CLASSES, "intensity": INTENSITY,
            "samples_per_case": SAMPLES_PER_CASE, "cache_rate": CACHE_RATE,
            "cache_dir": CACHE_DIR}
