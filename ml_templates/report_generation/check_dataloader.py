"""Validate a job's report-generation dataloader by loading every sample (its own process).

    python -m core.config.launch ml_templates.report_generation.check_dataloader
        --datapath <job>/Datapath

Writes ``Datapath/dataloader_check.json``: samples expected and loaded per split, failures with
their error, the distinct image tensor shapes and dtypes, intensity range, vocabulary size and
report length statistics in tokens (min / mean / max, and how many reports MAX_TOKENS cuts).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from ml_templates.common.entry import check_main, load_dataloader


def check(datapath: Path, max_failures: int = 20) -> dict:
    report = {"expected": {}, "loaded": {}, "failed": [], "shapes": [], "dtypes": [],
              "intensity": [None, None], "token_length": {}}
    module = load_dataloader(datapath / "dataloader.py")
    shapes, dtypes = set(), set()
    lo, hi = float("inf"), float("-inf")
    max_tokens = int(module.MAX_TOKENS)
    for split in ("train", "test"):
        index = json.loads((datapath / f"{split}.json").read_text())
        report["expected"][split] = len(index)
        dataset = module.ReportDataset(split, augment=False, datapath=str(datapath))
        report["vocab_size"] = len(dataset.tokenizer)
        loaded, lengths, cut = 0, [], 0
        for i in range(len(dataset)):
            try:
                item = dataset[i]
                pixels = item["pixel_values"]
                if item["input_ids"].shape != (max_tokens,) or \
                        item["labels"].shape != (max_tokens,):
                    raise ValueError(f"text tensors of shape {tuple(item['input_ids'].shape)}, "
                                     f"expected ({max_tokens},)")
                if not bool(torch.isfinite(pixels).all()):
                    raise ValueError("image has NaN or infinite values")
                shapes.add(tuple(pixels.shape))
                dtypes.add(str(pixels.dtype))
                lo, hi = min(lo, float(pixels.min())), max(hi, float(pixels.max()))
                full = len(dataset.tokenizer.encode(dataset.text(i), add_special_tokens=False)) + 2
                lengths.append(full)
                cut += full > max_tokens
                loaded += 1
            except Exception as exc:  # record and keep going: the report lists every failure
                if len(report["failed"]) < max_failures:
                    report["failed"].append(f"{split}[{i}] {dataset.items[i].get('image_path')}: "
                                            f"{type(exc).__name__}: {exc}")
        report["loaded"][split] = loaded
        if lengths:
            report["token_length"][split] = {
                "min": int(min(lengths)), "mean": float(np.mean(lengths)),
                "max": int(max(lengths)), "p95": float(np.percentile(lengths, 95)),
                "truncated": int(cut), "max_tokens": max_tokens}
    report["shapes"] = sorted(list(s) for s in shapes)
    report["dtypes"] = sorted(dtypes)
    report["intensity"] = [lo, hi] if shapes else [None, None]
    return report


def main(argv: list[str] | None = None) -> int:
    return check_main(check, argv, ("expected", "loaded", "shapes", "token_length"))


if __name__ == "__main__":
    sys.exit(main())
