"""The leakage-free split an index uses, and its preview.

The split is grouped by patient (no patient on both sides), stratified by class (multi-label:
by each patient's rarest label), and seeded; a split the dataset already has (``train/``,
``test/`` folders; ``val/`` is merged into training) is kept. Caps written in the datacard
description (core.datasets.split_caps) are applied by picking whole patients. The patient key
is the one core.datasets.patient_keys infers (a layout's own key wins; a guess is flagged and
warned about in ``info["warnings"]``).

May import: core.datasets.split_caps, core.datasets.patient_keys, core.datasets.layouts.types."""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.patient_keys import REPORT, infer_patient_keys
from core.datasets.split_caps import SplitCaps, as_caps

NO_LABEL = "(none)"  # the stratum of a multi-label patient without any positive label


class IndexBuildError(ValueError):
    """The index cannot be built as asked; the message says why."""


@dataclass
class SplitResult:
    train: list[Sample]
    test: list[Sample]
    info: dict


def sample_key(sample: Sample) -> str:
    """How an index names a sample: its path, or the JSON text of a channel list."""
    return json.dumps(sample.image) if isinstance(sample.image, list) else sample.image


def split_samples(scan: ScanResult) -> list[Sample]:
    """The scan's samples with the group each split uses: the patient key inferred by
    core.datasets.patient_keys (a no-op when the scan has it already). Without a patient key
    ("none (one group per image)") every image is its own group: two images that only share a
    file name in different folders are not one patient."""
    scan = infer_patient_keys(scan)
    if scan.group_source.startswith("none"):
        return [replace(s, group=sample_key(s)) for s in scan.samples]
    return scan.samples


def _by_group(samples: list[Sample]) -> dict[str, list[Sample]]:
    by_group: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_group[sample.group].append(sample)
    return by_group


def _strata(by_group: dict[str, list[Sample]]) -> dict[str, str]:
    """Each group's stratum: its most common label (ties by name); multi-label: the rarest label
    any of its images has (so rare findings reach both sides), NO_LABEL when it has none."""
    multi = any(s.labels is not None for members in by_group.values() for s in members)
    strata: dict[str, str] = {}
    if multi:
        freq = Counter(lbl for members in by_group.values() for s in members
                       for lbl in s.label_list())
        for group, members in by_group.items():
            present = {lbl for s in members for lbl in s.label_list()}
            strata[group] = min(present, key=lambda lbl: (freq[lbl], lbl)) if present \
                else NO_LABEL
        return strata
    for group, members in by_group.items():
        counts = Counter(s.label for s in members)
        strata[group] = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return strata


def grouped_stratified_split(samples: list[Sample], test_fraction: float = 0.2,
                             seed: int = 42) -> SplitResult:
    """Assign whole groups to train or test so each class gets ~test_fraction of its groups."""
    if not 0.0 < test_fraction < 1.0:
        raise IndexBuildError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    by_group = _by_group(samples)
    strata: dict[str, list[str]] = defaultdict(list)
    for group, stratum in sorted(_strata(by_group).items()):
        strata[stratum].append(group)
    rng = random.Random(seed)
    test_groups: set[str] = set()
    for _, groups in sorted(strata.items()):
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
    """Keep the dataset's own split; ``val`` joins training. A patient found in both the
    dataset's training and test folders stays in test only (its training images are left out),
    so the kept split is leakage-free too."""
    test_groups = {s.group for s in samples if s.split == "test"}
    test = [s for s in samples if s.split == "test"]
    train = [s for s in samples if s.split in ("train", "val") and s.group not in test_groups]
    leaked = [s for s in samples if s.split in ("train", "val") and s.group in test_groups]
    val_merged = sum(s.split == "val" and s.group not in test_groups for s in samples)
    info = {"method": "kept_from_dataset",
            "train_groups": sorted({s.group for s in train}),
            "test_groups": sorted(test_groups),
            "val_merged_into_train": val_merged,
            "note": "the dataset's own train/ (and val/) folders form the training set; "
                    "test/ is the test set" + ("; its val/ images were merged into training"
                                               if val_merged else "")}
    if leaked:
        info["left_out_for_leakage"] = {
            "images": len(leaked), "groups": sorted({s.group for s in leaked})[:50],
            "why": "these patients are also in the dataset's test folder; their training "
                   "images were left out so no patient is on both sides"}
    return SplitResult(train, test, info)


def _shares(total: int, weights: dict[str, int]) -> dict[str, int]:
    """Split ``total`` over keys in proportion to weights (largest remainder, deterministic)."""
    whole = sum(weights.values())
    if whole <= total:
        return dict(weights)
    exact = {k: total * w / whole for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = total - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:left]:
        out[k] += 1
    return out


def _cap_side(groups: list[str], by_group: dict[str, list[Sample]], strata: dict[str, str],
              side_cap: int | None, class_cap: int | None, balanced: bool,
              rng: random.Random) -> tuple[list[str], dict[str, int]]:
    """Pick whole groups of one side within the caps; returns (groups kept, budget per class)."""
    by_class: dict[str, list[str]] = defaultdict(list)
    for group in groups:
        by_class[strata[group]].append(group)
    budget = {c: sum(len(by_group[g]) for g in gs) for c, gs in by_class.items()}
    if class_cap is not None:
        budget = {c: min(b, class_cap) for c, b in budget.items()}
    if balanced and budget:
        low = min(budget.values())
        budget = {c: low for c in budget}
    if side_cap is not None and sum(budget.values()) > side_cap:
        if balanced:
            each = side_cap // len(budget)
            budget = {c: min(b, each) for c, b in budget.items()}
        else:
            budget = _shares(side_cap, budget)
    kept: list[str] = []
    for label in sorted(by_class):
        candidates = sorted(by_class[label])
        rng.shuffle(candidates)
        used = 0
        for group in candidates:
            size = len(by_group[group])
            if used + size <= budget[label]:
                kept.append(group)
                used += size
            if used >= budget[label]:
                break
    return kept, budget


def apply_caps(split: SplitResult, caps: SplitCaps, seed: int,
               test_fraction: float) -> SplitResult:
    """Shrink each side of a split to the caps by dropping whole patients (never splitting
    one), stratified by class, balanced when asked. Records what was applied in ``info``."""
    if not caps.active():
        return split
    samples = split.train + split.test
    by_group = _by_group(samples)
    strata = _strata(by_group)
    n_train, n_test = len(split.train), len(split.test)
    if split.info.get("method") == "kept_from_dataset" and samples:
        train_share = n_train / len(samples)
    else:
        train_share = 1.0 - test_fraction
    side_caps = {"train": caps.train, "test": caps.test}
    if caps.total is not None:
        total_train = round(caps.total * train_share)
        for side, share in (("train", total_train), ("test", caps.total - total_train)):
            side_caps[side] = share if side_caps[side] is None else min(side_caps[side], share)
    class_caps: dict[str, int | None] = {"train": None, "test": None}
    if caps.per_class is not None:
        per_train = round(caps.per_class * train_share)
        if caps.per_class >= 2:
            per_train = min(max(per_train, 1), caps.per_class - 1)
        class_caps = {"train": per_train, "test": caps.per_class - per_train}
    kept: dict[str, list[str]] = {}
    budgets: dict[str, dict[str, int]] = {}
    for side, part in (("train", split.train), ("test", split.test)):
        groups = sorted({s.group for s in part})
        kept[side], budgets[side] = _cap_side(groups, by_group, strata, side_caps[side],
                                              class_caps[side], caps.balanced,
                                              random.Random(f"{seed}-caps-{side}"))
    keep = {side: set(groups) for side, groups in kept.items()}
    train = [s for s in split.train if s.group in keep["train"]]
    test = [s for s in split.test if s.group in keep["test"]]
    dropped = sorted(({s.group for s in split.train} - keep["train"]) |
                     ({s.group for s in split.test} - keep["test"]))
    info = dict(split.info)
    info.update(train_groups=sorted(keep["train"]), test_groups=sorted(keep["test"]))
    info["caps"] = {**caps.to_json(), "side_caps": side_caps, "class_caps": class_caps,
                    "budget_per_class": budgets,
                    "before": {"train": n_train, "test": n_test},
                    "after": {"train": len(train), "test": len(test)},
                    "images_left_out": n_train + n_test - len(train) - len(test),
                    "groups_left_out": len(dropped)}
    return SplitResult(train, test, info)


def make_split(scan: ScanResult, test_fraction: float = 0.2, seed: int = 42,
               keep_existing_split: bool = True,
               caps: SplitCaps | str | None = None) -> SplitResult:
    """The split an index uses: the dataset's own (kept) or grouped and stratified, then the
    datacard's caps (a SplitCaps, or the description text to parse)."""
    if not 0.0 < test_fraction < 1.0:
        raise IndexBuildError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    scan = infer_patient_keys(scan)
    samples = split_samples(scan)
    if keep_existing_split and scan.existing_split:
        split = existing_split(samples)
    else:
        split = grouped_stratified_split(samples, test_fraction, seed)
    split.info.setdefault("seed", seed)
    _record_patient_key(scan, split)
    split = apply_caps(split, as_caps(caps), seed, test_fraction)
    n = len(split.train) + len(split.test)
    split.info["fractions"] = {"requested_test_fraction": test_fraction,
                               "train": round(len(split.train) / n, 4) if n else 0.0,
                               "test": round(len(split.test) / n, 4) if n else 0.0}
    return split


def _record_patient_key(scan: ScanResult, split: SplitResult) -> None:
    """The key the split grouped by, how sure it is, and its warnings, in ``split.info``."""
    report = scan.details[REPORT]
    split.info["grouping_key"] = scan.group_source
    split.info["patient_key"] = {k: v for k, v in report.items() if k != "warnings"}
    warnings = list(report["warnings"])
    leaked = split.info.get("left_out_for_leakage")
    if leaked:
        warnings.append(f"{leaked['images']} training images were left out: their patients "
                        "are also in the dataset's own test folder")
    split.info["warnings"] = warnings


def class_counts(part: list[Sample], multi_label: bool) -> dict[str, int]:
    """Images per class on one side of a split (multi-label: per label, the images without
    any under NO_LABEL)."""
    if multi_label:
        counts = Counter(lbl for s in part for lbl in s.label_list())
        negatives = sum(not s.label_list() for s in part)
        if negatives:
            counts[NO_LABEL] = negatives
    else:
        counts = Counter(s.label for s in part)
    return dict(sorted(counts.items()))


def preview_split(scan: ScanResult, description: str = "", test_fraction: float = 0.2,
                  seed: int = 42) -> dict:
    """What the index split would be (nothing written): images and patients per class on each
    side, with the datacard's caps. Used by registration to show the split before any job."""
    split = make_split(scan, test_fraction, seed, True, description)
    multi = any(s.labels is not None for s in scan.samples)

    def patients(part: list[Sample]) -> dict[str, int]:
        seen: dict[str, set[str]] = defaultdict(set)
        for s in part:
            for label in (s.label_list() if multi else [s.label]) or [NO_LABEL]:
                seen[label].add(s.group)
        return {label: len(groups) for label, groups in sorted(seen.items())}

    preview = {"method": split.info["method"], "seed": seed, "test_fraction": test_fraction,
               "images": {"train": class_counts(split.train, multi),
                          "test": class_counts(split.test, multi)},
               "patients": {"train": patients(split.train), "test": patients(split.test)},
               "num_images": {"train": len(split.train), "test": len(split.test)},
               "num_patients": {"train": len(split.info["train_groups"]),
                                "test": len(split.info["test_groups"])},
               "grouping_key": split.info["grouping_key"],
               "patient_key_guessed": split.info["patient_key"]["guess"],
               "images_sharing_a_patient":
                   split.info["patient_key"]["images_sharing_a_patient"],
               "warnings": split.info["warnings"]}
    if "caps" in split.info:
        preview["caps"] = {k: v for k, v in split.info["caps"].items()
                           if k in ("train", "test", "total", "per_class", "balanced", "from",
                                    "images_left_out")}
    if "left_out_for_leakage" in split.info:
        preview["left_out_for_leakage"] = split.info["left_out_for_leakage"]["images"]
    return preview
