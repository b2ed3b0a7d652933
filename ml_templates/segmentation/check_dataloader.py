"""Validate a job's segmentation dataloader by loading its cases (run as its own process): every
case of a split up to ``WHOLE_SPLIT`` cases, else a stratified sample (each label set's first
and last case and a seeded random choice; ml_templates.common.check_sample).

    python -m core.config.launch ml_templates.segmentation.check_dataloader
        --datapath <job>/Datapath

Writes ``Datapath/dataloader_check.json``:
``expected`` cases per split, ``checked`` (the sample) and ``loaded`` (of those), ``failed``
(each with its error, plus configuration problems such as NUM_CLASSES not matching the index's
label names or mask values out of range),
``shapes`` (the distinct training patch shapes, i.e. [C, *ROI_SIZE]: what the network sees),
``image_shapes`` (whole preprocessed images, which differ per case), ``dtypes``,
``label_values`` (mask values seen in the sample), ``labels_in_range`` (all within
0..NUM_CLASSES-1),
``intensity`` range after normalisation, and the dataloader's configuration.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ml_templates.common.check_sample import stratified_sample
from ml_templates.common.entry import check_main, load_dataloader

PATCH_PROBES = 3  # training cases whose random patch is also drawn


def _failure(split: str, i: int, item: dict, exc: BaseException) -> str:
    """The innermost error (MONAI wraps it in "applying transform ...") and the step it hit."""
    step = ""
    while exc.__cause__ is not None:
        step = str(exc).removeprefix("applying transform ") if "applying transform" in str(
            exc) else step
        exc = exc.__cause__
    where = f" (in {step.split(' object at')[0].lstrip('<')})" if step else ""
    return f"{split}[{i}] {item.get('image_path')}: {type(exc).__name__}: {exc}{where}"


def check(datapath: Path, max_failures: int = 20) -> dict:
    module = load_dataloader(datapath / "dataloader.py")
    num_classes = int(module.NUM_CLASSES)
    report = {"expected": {}, "checked": {}, "loaded": {}, "sampled": False, "failed": [],
              "shapes": [], "image_shapes": [],
              "dtypes": [], "label_values": [], "labels_in_range": True,
              "intensity": [None, None], "config": module.describe()}
    shapes, image_shapes, dtypes, values = set(), set(), set(), set()
    lo, hi = float("inf"), float("-inf")
    names = set()
    for split in ("train", "test"):
        index = json.loads((datapath / f"{split}.json").read_text())
        report["expected"][split] = len(index)
        names.update(tuple(item.get("labels", [])) for item in index)
        dataset = module.SegmentationDataset(split, augment=False, datapath=str(datapath))
        sample = stratified_sample([[json.dumps(it.get("labels", []))] for it in dataset.items])
        report["checked"][split] = len(sample)
        report["sampled"] |= len(sample) < len(dataset.items)
        loaded = 0
        for i in sample:
            try:
                item = dataset[i]
                pixels = item["pixel_values"]
                image_shapes.add(tuple(pixels.shape))
                dtypes.add(str(pixels.dtype))
                lo, hi = min(lo, float(pixels.min())), max(hi, float(pixels.max()))
                if "labels" in item:
                    values.update(int(v) for v in torch.unique(torch.as_tensor(item["labels"])))
                loaded += 1
            except Exception as exc:  # record and keep going: the report lists every failure
                report["failed"].append(_failure(split, i, dataset.items[i], exc))
        report["loaded"][split] = loaded
    patches = module.SegmentationDataset("train", augment=True, datapath=str(datapath))
    for i in range(min(PATCH_PROBES, len(patches.items))):
        try:
            item = patches[i]
            shapes.add(tuple(item["pixel_values"].shape))
            if tuple(item["labels"].shape[1:]) != tuple(item["pixel_values"].shape[1:]):
                raise ValueError(f"patch mask {tuple(item['labels'].shape)} does not match "
                                 f"the patch {tuple(item['pixel_values'].shape)}")
        except Exception as exc:
            report["failed"].append(_failure("train-patch", i, patches.items[i], exc))
    report["shapes"] = sorted(list(s) for s in shapes)
    report["image_shapes"] = sorted(list(s) for s in image_shapes)[:50]
    report["dtypes"] = sorted(dtypes)
    report["label_values"] = sorted(values)
    report["labels_in_range"] = all(0 <= v < num_classes for v in values)
    report["intensity"] = [lo, hi]
    if not report["labels_in_range"]:
        report["failed"].append(f"mask values {report['label_values']} outside 0.."
                                f"{num_classes - 1} (NUM_CLASSES = {num_classes}); masks must "
                                "hold 0 for background and i + 1 for labels[i]")
    widest = max((len(n) for n in names), default=0)
    if widest + 1 != num_classes:
        report["failed"].append(f"NUM_CLASSES = {num_classes}, but the index names {widest} "
                                f"label(s) (+ background = {widest + 1})")
    del report["failed"][max_failures:]
    return report


def main(argv: list[str] | None = None) -> int:
    return check_main(check, argv, ("expected", "checked", "loaded", "shapes", "failed"))


if __name__ == "__main__":
    sys.exit(main())
