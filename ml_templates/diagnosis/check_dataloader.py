"""Validate a job's dataloader by loading every sample (run as its own process).

    python -m core.config.launch ml_templates.diagnosis.check_dataloader --datapath <job>/Datapath

Writes ``Datapath/dataloader_check.json``: samples loaded per split, failures with their error,
the distinct tensor shapes and dtypes, label counts, intensity range.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from ml_templates.common.entry import check_main, load_dataloader


def check(datapath: Path, max_failures: int = 20) -> dict:
    report = {"expected": {}, "loaded": {}, "failed": [], "shapes": [], "dtypes": [],
              "label_counts": {}, "intensity": [None, None]}
    module = load_dataloader(datapath / "dataloader.py")
    shapes, dtypes = set(), set()
    lo, hi = float("inf"), float("-inf")
    for split in ("train", "test"):
        index = json.loads((datapath / f"{split}.json").read_text())
        report["expected"][split] = len(index)
        dataset = module.DiagnosisDataset(split, augment=False, datapath=str(datapath))
        loaded, labels = 0, Counter()
        for i in range(len(dataset)):
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
    report["shapes"] = sorted(list(s) for s in shapes)
    report["dtypes"] = sorted(dtypes)
    report["intensity"] = [lo, hi]
    return report


def main(argv: list[str] | None = None) -> int:
    return check_main(check, argv)


if __name__ == "__main__":
    sys.exit(main())
