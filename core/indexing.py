"""Index files in the paper's format, from a scan, with a leakage-free split.

Segmentation, detection and report-generation indexes are lists of dicts (write_list_index;
formats in ml_templates/README.md). Diagnosis index (``Datapath/``):

* ``train.json`` / ``test.json``: ``{image_path: [label, ...]}`` — absolute paths into the
  read-only dataset; an image is a file, or a folder of 2D slices forming one 3D scan;
* ``label_dict.json``: ``{label: index}`` from 0, labels sorted;
* ``split.json``: how the split was made — grouping key, seed, fraction, which groups went
  where, and each image's group (so training can hold out validation patients too).

The split is grouped by patient (no patient on both sides), stratified by class, and seeded; a
split the dataset already has (``train/``, ``test/`` folders) is kept.
"""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from core.datacards import write_json_atomic
from core.scan import Sample, ScanResult


class IndexBuildError(ValueError):
    """The index cannot be built as asked; the message says why."""


@dataclass
class SplitResult:
    train: list[Sample]
    test: list[Sample]
    info: dict


def grouped_stratified_split(samples: list[Sample], test_fraction: float = 0.2,
                             seed: int = 42) -> SplitResult:
    """Assign whole groups to train or test so each class gets ~test_fraction of its groups."""
    if not 0.0 < test_fraction < 1.0:
        raise IndexBuildError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    by_group: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_group[sample.group].append(sample)
    # a group's stratum is its most common label (ties broken by name, deterministic)
    strata: dict[str, list[str]] = defaultdict(list)
    for group, members in sorted(by_group.items()):
        counts = Counter(s.label for s in members)
        label = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        strata[label].append(group)
    rng = random.Random(seed)
    test_groups: set[str] = set()
    for label, groups in sorted(strata.items()):
        groups = sorted(groups)
        rng.shuffle(groups)
        n_test = round(len(groups) * test_fraction)
        if len(groups) >= 2:
            n_test = min(max(n_test, 1), len(groups) - 1)  # each class on both sides
        else:
            n_test = 0
        test_groups.update(groups[:n_test])
    train = [s for s in samples if s.group not in test_groups]
    test = [s for s in samples if s.group in test_groups]
    info = {"method": "grouped_stratified", "seed": seed, "test_fraction": test_fraction,
            "train_groups": sorted({s.group for s in train}),
            "test_groups": sorted(test_groups)}
    return SplitResult(train, test, info)


def existing_split(samples: list[Sample]) -> SplitResult:
    train = [s for s in samples if s.split in ("train", "val")]
    test = [s for s in samples if s.split == "test"]
    info = {"method": "kept_from_dataset",
            "train_groups": sorted({s.group for s in train}),
            "test_groups": sorted({s.group for s in test}),
            "note": "the dataset's own train/ (and val/) folders form the training set; "
                    "test/ is the test set"}
    return SplitResult(train, test, info)


def write_diagnosis_index(scan: ScanResult, datapath: str | Path, test_fraction: float = 0.2,
                          seed: int = 42, keep_existing_split: bool = True) -> dict:
    """Write train/test/label_dict/split JSON files; returns a summary for the caller."""
    if len(scan.classes) < 2:
        raise IndexBuildError(f"diagnosis needs at least two classes; found {scan.classes}. "
                          "Add a folder for each class.")
    use_existing = keep_existing_split and scan.existing_split
    split = existing_split(scan.samples) if use_existing else grouped_stratified_split(
        scan.samples, test_fraction, seed)
    datapath = Path(datapath)
    label_dict = {label: i for i, label in enumerate(scan.classes)}
    train = {s.image: s.label_list() for s in split.train}
    test = {s.image: s.label_list() for s in split.test}
    counts = {
        "train": dict(sorted(Counter(lbl for s in split.train for lbl in s.label_list()).items())),
        "test": dict(sorted(Counter(lbl for s in split.test for lbl in s.label_list()).items())),
    }
    split_info = {"grouping_key": scan.group_source, "dataset": scan.root, **split.info,
                  "counts": counts, "groups": {s.image: s.group for s in scan.samples}}
    write_json_atomic(datapath / "label_dict.json", label_dict)
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", split_info)
    return {"datapath": str(datapath), "num_train": len(train), "num_test": len(test),
            "classes": scan.classes, "counts": counts, "split_method": split.info["method"],
            "grouping_key": scan.group_source,
            "num_train_groups": len(split.info["train_groups"]),
            "num_test_groups": len(split.info["test_groups"])}


def _split(scan: ScanResult, test_fraction: float, seed: int, keep_existing_split: bool):
    if keep_existing_split and scan.existing_split:
        return existing_split(scan.samples)
    return grouped_stratified_split(scan.samples, test_fraction, seed)


def _entry(sample: Sample, template: str, classes: list[str]) -> dict:
    if template == "segmentation":
        return {"image_path": sample.image, "label_path": sample.extra["label_path"],
                "labels": classes}
    if template == "detection":
        return {"image_path": sample.image, "boxes": sample.extra.get("boxes", []),
                "labels": sample.extra.get("labels", [])}
    return {"image_path": sample.image, "findings": sample.extra.get("findings", ""),
            "impression": sample.extra.get("impression", "")}


def write_list_index(scan: ScanResult, datapath: str | Path, template: str,
                     test_fraction: float = 0.2, seed: int = 42,
                     keep_existing_split: bool = True) -> dict:
    """Segmentation / detection / report generation index: lists of dicts (see
    ml_templates/README.md), plus split.json (and label_dict.json for detection)."""
    if template not in ("segmentation", "detection", "report_generation"):
        raise IndexBuildError(f"no list index for template {template!r}")
    if len(scan.samples) < 4:
        raise IndexBuildError(f"only {len(scan.samples)} cases; at least 4 are needed to train "
                              "and test")
    split = _split(scan, test_fraction, seed, keep_existing_split)
    datapath = Path(datapath)
    train = [_entry(s, template, scan.classes) for s in split.train]
    test = [_entry(s, template, scan.classes) for s in split.test]
    if template == "detection":
        write_json_atomic(datapath / "label_dict.json",
                          {label: i for i, label in enumerate(scan.classes)})
    counts = {"train": dict(Counter(s.label for s in split.train)),
              "test": dict(Counter(s.label for s in split.test))}
    groups = {json.dumps(s.image) if isinstance(s.image, list) else s.image: s.group
              for s in scan.samples}
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", {"grouping_key": scan.group_source,
                                                "dataset": scan.root, **split.info,
                                                "counts": counts, "groups": groups})
    return {"datapath": str(datapath), "num_train": len(train), "num_test": len(test),
            "classes": scan.classes, "counts": counts, "split_method": split.info["method"],
            "grouping_key": scan.group_source,
            "num_train_groups": len(split.info["train_groups"]),
            "num_test_groups": len(split.info["test_groups"])}
