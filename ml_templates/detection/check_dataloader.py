"""Validate a job's detection dataloader by loading every sample (run as its own process).

    python -m core.config.launch ml_templates.detection.check_dataloader --datapath <job>/Datapath

Writes ``Datapath/dataloader_check.json``: samples loaded per split, failures with their error,
the distinct image shapes and dtypes, intensity range, boxes per image (min/mean/max, images
without boxes), box sizes after transforms, and whether every box lies inside its image both in
the index (against the stored image's size) and after the transforms. A box outside its image,
or boxes lost to the transforms, counts as a failure: the gate then stops the job.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ml_templates.common.entry import check_main, load_dataloader

TOLERANCE = 0.5  # pixels a box may overhang the image border (rounding in annotation tools)


def _inside(boxes: np.ndarray, size, tolerance: float = TOLERANCE) -> bool:
    if not len(boxes):
        return True
    dims = len(size)
    return bool(np.all(boxes[:, :dims] >= -tolerance)
                and np.all(boxes[:, dims:] <= np.asarray(size, float) + tolerance)
                and np.all(boxes[:, dims:] > boxes[:, :dims]))


def check(datapath: Path, max_failures: int = 20) -> dict:
    report = {"expected": {}, "loaded": {}, "failed": [], "shapes": [], "dtypes": [],
              "intensity": [None, None], "boxes_per_image": {}, "box_size": {},
              "boxes_inside_image": {"index": True, "transformed": True}, "outside": []}
    module = load_dataloader(datapath / "dataloader.py")
    shapes, dtypes, sizes = set(), set(), []
    lo, hi = float("inf"), float("-inf")

    def fail(message: str) -> None:
        if len(report["failed"]) < max_failures:
            report["failed"].append(message)

    for split in ("train", "test"):
        index = json.loads((datapath / f"{split}.json").read_text())
        report["expected"][split] = len(index)
        dataset = module.DetectionDataset(split, augment=False, datapath=str(datapath),
                                          cache=False)
        loaded, counts = 0, []
        for i in range(len(dataset)):
            path = dataset.items[i]["image_path"]
            try:
                item = dataset[i]
                image, boxes = item["image"], item["boxes"].numpy()
                shapes.add(tuple(image.shape))
                dtypes.add(str(image.dtype))
                lo, hi = min(lo, float(image.min())), max(hi, float(image.max()))
                raw = np.asarray(dataset.items[i].get("boxes") or [], float)
                raw = raw.reshape(-1, 2 * module.SPATIAL_DIMS)
                if not _inside(raw, item["original_size"]):
                    report["boxes_inside_image"]["index"] = False
                    report["outside"].append(f"{split}[{i}] {path}: index boxes {raw.tolist()} "
                                             f"vs image size {item['original_size']}")
                    fail(f"{split}[{i}] {path}: a box lies outside the image")
                if not _inside(boxes, image.shape[1:], 1e-3):
                    report["boxes_inside_image"]["transformed"] = False
                    fail(f"{split}[{i}] {path}: a box lies outside the image after transforms")
                if len(boxes) != len(raw) or len(item["labels"]) != len(boxes):
                    fail(f"{split}[{i}] {path}: {len(raw)} boxes in the index, {len(boxes)} "
                         f"boxes / {len(item['labels'])} labels after transforms")
                sizes += [b[module.SPATIAL_DIMS:] - b[:module.SPATIAL_DIMS] for b in boxes]
                counts.append(len(boxes))
                loaded += 1
            except Exception as exc:  # record and keep going: the report lists every failure
                fail(f"{split}[{i}] {path}: {type(exc).__name__}: {exc}")
        report["loaded"][split] = loaded
        report["boxes_per_image"][split] = {
            "min": int(min(counts, default=0)), "max": int(max(counts, default=0)),
            "mean": float(np.mean(counts)) if counts else 0.0,
            "images_without_boxes": int(sum(c == 0 for c in counts)),
            "total_boxes": int(sum(counts))}
    if sizes:
        arr = np.asarray(sizes)
        report["box_size"] = {"min": arr.min(0).round(2).tolist(),
                              "median": np.median(arr, 0).round(2).tolist(),
                              "max": arr.max(0).round(2).tolist()}
    report["outside"] = report["outside"][:max_failures]
    report["shapes"] = sorted(list(s) for s in shapes)
    report["dtypes"] = sorted(dtypes)
    report["intensity"] = [lo, hi]
    return report


def main(argv: list[str] | None = None) -> int:
    return check_main(check, argv, ("expected", "loaded", "shapes", "boxes_inside_image"))


if __name__ == "__main__":
    sys.exit(main())
