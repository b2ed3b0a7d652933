"""Validate a job's dataloader by loading a stratified sample of each split (run as its own
process).

    python -m core.config.launch ml_templates.diagnosis.check_dataloader --datapath <job>/Datapath

A split of up to ``WHOLE_SPLIT`` images is loaded whole; a larger one, every class's first and
last image and a seeded random choice (ml_templates.common.check_sample). The images go through
the dataloader's own cache, so training reuses what the check decoded.

Writes ``Datapath/dataloader_check.json``: ``expected`` (images per split), ``checked`` (images
of the sample per split), ``loaded`` (of those, loaded), failures with their error, the
distinct tensor shapes and dtypes, label counts and intensity range over the sample, and
``cache`` (where decoded images are kept).
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from ml_templates.common.check_sample import stratified_sample
from ml_templates.common.entry import check_main, load_dataloader


def check(datapath: Path, max_failures: int = 20) -> dict:
    report = {"expected": {}, "checked": {}, "loaded": {}, "failed": [], "shapes": [],
              "dtypes": [], "label_counts": {}, "intensity": [None, None], "sampled": False}
    module = load_dataloader(datapath / "dataloader.py")
    shapes, dtypes = set(), set()
    lo, hi = float("inf"), float("-inf")
    for split in ("train", "test"):
        index = json.loads((datapath / f"{split}.json").read_text())
        report["expected"][split] = len(index)
        dataset = module.DiagnosisDataset(split, augment=False, datapath=str(datapath))
        sample = stratified_sample([labels for _, labels in dataset.items])
        report["checked"][split] = len(sample)
        report["sampled"] |= len(sample) < len(dataset)
        loaded, labels = 0, Counter()
        for i in sample:
            try:
                item = dataset[i]
                pixels = item["pixel_values"]
                shapes.add(tuple(pixels.shape))
                dtypes.add(str(pixels.dtype))
                lo, hi = min(lo, float(pixels.min())), max(hi, float(pixels.max()))
                labels[str(item["labels"].tolist())] += 1
                loaded += 1
            except Exception as exc:  # record and keep going: the report lists every failure
                if len(report["failed"]) < max_failures:
                    report["failed"].append(f"{split}[{i}] {dataset.items[i][0]}: "
                                            f"{type(exc).__name__}: {exc}")
        report["loaded"][split] = loaded
        report["label_counts"][split] = dict(labels)
        prepared = getattr(dataset, "prepared", None)  # an older dataloader has no cache
        report["cache"] = getattr(prepared, "mode", "none")
    report["shapes"] = sorted(list(s) for s in shapes)
    report["dtypes"] = sorted(dtypes)
    report["intensity"] = [lo, hi]
    return report


def main(argv: list[str] | None = None) -> int:
    return check_main(check, argv, ("expected", "checked", "loaded", "shapes"))


if __name__ == "__main__":
    sys.exit(main())
