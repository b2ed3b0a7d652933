"""The Module Architect's stage: the job's ``Datapath/dataloader.py`` instantiated from the
template of the plan's task, sized from the dataset fingerprint (median size, spacing, channels)
and the plan (modality -> intensity, device -> patch caps). Validating it is a child process
(the template's check_dataloader) that the caller starts; its gate is core.jobs.gates.

May import: core.config, core.datasets, core.evaluation (multi-label test), core.jobs.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from core.config.settings import TEMPLATES_DIR, Settings
from core.datasets.catalog import find_entry
from core.datasets.datacards import write_json_atomic
from core.datasets.fingerprint import fingerprint, intensity_for, training_image_size
from core.evaluation.diagnosis import is_multi_label
from core.jobs.workspace import JobWorkspace
from core.training.instantiate import instantiate


class DataloaderError(ValueError):
    """The dataloader cannot be written as asked; the message says why and what to do."""


def _images(index) -> list:
    return list(index) if isinstance(index, dict) else [e["image_path"] for e in index]


def _roi(shape: list[int], spacing: list[float] | None, pixdim: list[float] | None,
         device: str) -> list[int]:
    """Patch size: the resampled median size, capped (CPU 64x64x32 / 128x128; GPU 128^3 /
    256^2), rounded down to a multiple of 16 (UNet levels), at least 16."""
    if spacing and pixdim:  # header order (x, y, z) matches the NIfTI spacing order
        shape = [int(s * sp / p) for s, sp, p in zip(shape, spacing, pixdim)]
    caps = ([128, 128, 128] if device == "cuda" else [64, 64, 32]) if len(shape) == 3 else \
        ([256, 256] if device == "cuda" else [128, 128])
    return [max(16, min(c, s) // 16 * 16) for s, c in zip(shape, caps)]


def dataloader_config(template: str, plan: dict, fp: dict, train: list | dict, test: list | dict,
                      image_size: list[int] | None, in_channels: int | None) -> dict:
    device = plan.get("device", "cpu")
    dims = fp.get("spatial_dims", 2)
    channels = int(in_channels or fp.get("channels", 1))
    intensity = intensity_for(plan.get("modality", ""), plan.get("anatomy", ""),
                              plan.get("file_format", ""))
    size = list(image_size or training_image_size(fp, device))
    if template == "diagnosis":
        return {"IMAGE_SIZE": size, "IN_CHANNELS": channels,
                "MULTI_LABEL": is_multi_label({**train, **test}), "INTENSITY": intensity}
    if template == "segmentation":
        spacing = fp.get("median_spacing")
        pixdim = [round(max(s, min(spacing)), 2) for s in spacing] if spacing and dims == 3 \
            else None
        first = train[0]
        return {"SPATIAL_DIMS": dims, "PIXDIM": pixdim,
                "ROI_SIZE": list(image_size or _roi(fp["median_shape"], spacing, pixdim, device)),
                "IN_CHANNELS": len(first["image_path"]) if isinstance(first["image_path"], list)
                else channels, "NUM_CLASSES": len(first["labels"]) + 1, "INTENSITY": intensity}
    if template == "detection":
        return {"SPATIAL_DIMS": dims, "IMAGE_SIZE": size, "IN_CHANNELS": channels,
                "INTENSITY": intensity}
    words = [len((e["findings"] + " " + e["impression"]).split()) for e in train]
    max_tokens = min(256, max(32, int(sorted(words)[int(0.95 * (len(words) - 1))] * 1.5) + 8))
    return {"SPATIAL_DIMS": dims, "IMAGE_SIZE": size, "IN_CHANNELS": channels,
            "MAX_TOKENS": max_tokens, "TOKENIZER_PATH": "", "INTENSITY": intensity}


def _cache_dir(ws: JobWorkspace, plan: dict) -> str | None:
    """Where the dataloader keeps decoded images: the job's cache/ folder, relative to the
    Datapath (it moves with the workspace); None when that would lie inside the dataset folder
    (nothing is written there)."""
    cache = ws.cache.resolve()
    dataset = plan.get("dataset_path")
    if dataset and cache.is_relative_to(Path(dataset).expanduser().resolve()):
        return None
    return os.path.relpath(cache, ws.datapath.resolve())


def write_dataloader(settings: Settings, ws: JobWorkspace, image_size: list[int] | None = None,
                     in_channels: int | None = None) -> dict:
    """Write Datapath/dataloader.py (and its fingerprint and config beside it); returns what
    was written. Raises DataloaderError."""
    plan = ws.read_plan()
    template = plan.get("template", "")
    source = TEMPLATES_DIR / template / "dataloader_template.py"
    if not source.exists():
        raise DataloaderError(f"no dataloader template for {template!r}")
    if not ws.train_index.exists():
        raise DataloaderError("Datapath/train.json is missing: "
                              "the Data Engineer builds the index first")
    train = json.loads(ws.train_index.read_text())
    test = json.loads(ws.test_index.read_text())
    if image_size and (len(image_size) not in (2, 3) or
                       any(not 8 <= s <= 1024 for s in image_size)):
        raise DataloaderError("image_size must have 2 or 3 sides between 8 and 1024, "
                        f"got {image_size}")
    entry = find_entry(settings, plan.get("dataset") or "")
    # pickled volumes are read only when the datacard allows it (unpickling runs code)
    allow_pickle = bool(entry and entry.card.allow_pickle)
    fp = fingerprint(_images(train), allow_pickle=allow_pickle)
    values = {"DATAPATH": str(ws.datapath),
              **dataloader_config(template, plan, fp, train, test, image_size, in_channels)}
    if allow_pickle or "ALLOW_PICKLE" in source.read_text():
        values["ALLOW_PICKLE"] = allow_pickle
    cache_dir = _cache_dir(ws, plan)
    if cache_dir and "CACHE_DIR" in source.read_text():
        values["CACHE_DIR"] = cache_dir
    instantiate(source, ws.dataloader, values)
    write_json_atomic(ws.fingerprint, fp)
    write_json_atomic(ws.dataloader_config, values)
    return {"dataloader": str(ws.dataloader), "config": values, "fingerprint": fp}
