"""Index files in the paper's format, from a scan, with a leakage-free split.

Segmentation, detection and report-generation indexes are lists of dicts (write_list_index;
formats in ml_templates/README.md). Diagnosis index (``Datapath/``):

* ``train.json`` / ``test.json``: ``{image_path: [label, ...]}`` — absolute paths into the
  read-only dataset; an image is a file, or a folder of 2D slices forming one 3D scan;
* ``label_dict.json``: ``{label: index}`` from 0, labels sorted;
* ``split.json``: how the split was made — grouping key, seed, fractions, the caps applied (and
  the datacard sentence each came from), image counts per class on each side, which groups went
  where, and each indexed image's group (so training can hold out validation patients too).

The split is grouped by patient (no patient on both sides), stratified by class (multi-label:
by each patient's rarest label), and seeded; a split the dataset already has (``train/``,
``test/`` folders; ``val/`` is merged into training) is kept. Caps written in the datacard
description ("use at most 1000 samples for training and 200 for testing, keep classes
balanced", "at most 500 images", "max 50 per class", "balanced classes") are parsed
deterministically by :func:`parse_caps` and applied by picking whole patients.
"""
from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.datasets.datacards import write_json_atomic
from core.datasets.dicom_series import write_series_manifests
from core.datasets.layouts.types import Sample, ScanResult

NO_LABEL = "(none)"  # the stratum of a multi-label patient without any positive label


class IndexBuildError(ValueError):
    """The index cannot be built as asked; the message says why."""


@dataclass
class SplitResult:
    train: list[Sample]
    test: list[Sample]
    info: dict


# ----------------------------------------------------------------------------- caps

@dataclass
class SplitCaps:
    """Limits on how many samples the index may use, read from the datacard description."""
    train: int | None = None       # at most this many training samples
    test: int | None = None        # at most this many test samples
    total: int | None = None       # at most this many samples in all (shared by the sides)
    per_class: int | None = None   # at most this many samples of each class (both sides)
    balanced: bool = False         # the same number of samples of every class on each side
    sources: list[dict] = field(default_factory=list)  # {"cap", "value", "sentence"}

    def active(self) -> bool:
        return self.balanced or any(v is not None for v in
                                    (self.train, self.test, self.total, self.per_class))

    def to_json(self) -> dict:
        return {"train": self.train, "test": self.test, "total": self.total,
                "per_class": self.per_class, "balanced": self.balanced,
                "from": self.sources}


_CUE = re.compile(r"\b(?:at\s+most|up\s+to|no\s+more\s+than|not\s+more\s+than|maximum(?:\s+of)?|"
                  r"max\.?|limit(?:ed|ing)?|cap(?:ped)?\s+(?:at|to)|use\s+only|only\s+use|"
                  r"subsample(?:d)?\s+to)\b|^\s*(?:please\s+)?(?:only\s+)?"
                  r"(?:use|sample|subsample|take|select|pick|keep)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\s*k\b)?", re.I)
_UNIT = r"(?:samples?|images?|cases?|scans?|examples?|studies|study|volumes?|slices?|files?|" \
        r"pictures?|radiographs?|x-?rays?)"
_SIDE = r"(?P<side>train(?:ing)?|test(?:ing)?|val(?:idation)?)"
_TAIL_SIDE = re.compile(rf"^\s*(?:{_UNIT}\s*)?(?:(?:for|in|from|of|as)\s+(?:the\s+)?)?{_SIDE}\b",
                        re.I)
_TAIL_SIDE_FIRST = re.compile(rf"^\s*{_SIDE}\s+{_UNIT}\b", re.I)
_TAIL_CLASS = re.compile(rf"^\s*(?:{_UNIT}\s*)?(?:per|for\s+each|of\s+each|from\s+each|each|a)\s+"
                         r"(?:class|label|category|categories|diagnosis|group)\b", re.I)
_TAIL_UNIT = re.compile(rf"^\s*{_UNIT}\b", re.I)
_SIDE_BEFORE = re.compile(rf"\b{_SIDE}\b", re.I)
_TAIL_BARE = re.compile(r"^\s*(?:$|[,)]|and\b|or\b|in\s+(?:all|total)\b)", re.I)
_BALANCED = re.compile(r"\b(?:balanc(?:e|ed|ing)\b|equal\s+(?:number|numbers|count|counts)\s+"
                       r"(?:of\s+\w+\s+)?(?:per|for\s+each|of\s+each|in\s+each)\s+class)", re.I)
_NOT_BALANCED = re.compile(r"\b(?:not|never|no\s+need\s+to|don'?t|do\s+not)\s+(?:\w+\s+){0,2}"
                           r"balanc|\bbalanc\w*(?:\s+\w+){0,3}\s+or\b", re.I)  # or: an option


def _sentences(text: str) -> list[str]:
    """Split on sentence ends (not on decimal points or '1,000')."""
    parts = re.split(r"(?<!\d)[.;!?\n]+|[.;!?\n]+(?!\d)", text)
    return [p.strip() for p in parts if p and p.strip()]


def _number(match: re.Match) -> int:
    value = int(match.group(1).replace(",", ""))
    return value * 1000 if match.group(2) else value


def parse_caps(description: str) -> SplitCaps:
    """Read sample caps and class balance from free text, deterministically.

    A number counts as a cap only in a sentence that asks for one ("at most", "up to", "max",
    "no more than", "limit to", "use ...") and only after that cue; what follows the number says
    what it limits: "... for training" / "training samples" (train), "... for testing" (test),
    "... per class" (per class), a plain unit such as "images" (total). Other numbers
    ("from 300 patients", "3 classes") are ignored. "balanced classes" / "keep classes balanced"
    asks for balance. Each cap keeps the sentence it came from."""
    caps = SplitCaps()
    for sentence in _sentences(description or ""):
        if _BALANCED.search(sentence) and not _NOT_BALANCED.search(sentence):
            if not caps.balanced:
                caps.sources.append({"cap": "balanced", "value": True, "sentence": sentence})
            caps.balanced = True
        cue = _CUE.search(sentence)
        if not cue:
            continue
        cursor, previous_side = cue.end(), ""
        for match in _NUMBER.finditer(sentence, cue.end()):
            tail = sentence[match.end():match.end() + 60]
            before = _SIDE_BEFORE.search(sentence[cursor:match.start()])
            value = _number(match)
            side_match = _TAIL_SIDE.match(tail) or _TAIL_SIDE_FIRST.match(tail)
            unit_or_bare = _TAIL_UNIT.match(tail) or _TAIL_BARE.match(tail)
            cursor = match.end() + (side_match.end() if side_match else 0)
            if _TAIL_CLASS.match(tail):
                kind = "per_class"
            elif side_match or (before and unit_or_bare):
                side = (side_match or before).group("side").lower()
                kind = "train" if side.startswith("train") else \
                    "test" if side.startswith("test") else "val"
                previous_side = kind
            elif unit_or_bare:
                kind = "total"
            else:
                continue  # "3 classes", "from 300 patients", "aged 40": not a cap
            if kind == "val" or value <= 0:
                continue  # validation comes out of training; it is not capped here
            if kind == "total" and previous_side:
                continue  # "1000 for training and 200 images ..." is ambiguous: ignore it
            current = getattr(caps, kind)
            setattr(caps, kind, value if current is None else min(current, value))
            caps.sources.append({"cap": kind, "value": value, "sentence": sentence})
    return caps


def _as_caps(caps: SplitCaps | str | None) -> SplitCaps:
    if caps is None:
        return SplitCaps()
    return parse_caps(caps) if isinstance(caps, str) else caps


# ----------------------------------------------------------------------------- grouping

def sample_key(sample: Sample) -> str:
    """How an index names a sample: its path, or the JSON text of a channel list."""
    return json.dumps(sample.image) if isinstance(sample.image, list) else sample.image


def split_samples(scan: ScanResult) -> list[Sample]:
    """The scan's samples with the group each split uses. Without a patient key ("none (one
    group per image)") every image is its own group: two images that only share a file name in
    different folders are not one patient."""
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


# ----------------------------------------------------------------------------- caps applied

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
    samples = split_samples(scan)
    if keep_existing_split and scan.existing_split:
        split = existing_split(samples)
    else:
        split = grouped_stratified_split(samples, test_fraction, seed)
    split.info.setdefault("seed", seed)
    split = apply_caps(split, _as_caps(caps), seed, test_fraction)
    n = len(split.train) + len(split.test)
    split.info["fractions"] = {"requested_test_fraction": test_fraction,
                               "train": round(len(split.train) / n, 4) if n else 0.0,
                               "test": round(len(split.test) / n, 4) if n else 0.0}
    return split


# ----------------------------------------------------------------------------- split.json

def _class_counts(part: list[Sample], multi_label: bool) -> dict[str, int]:
    if multi_label:
        counts = Counter(lbl for s in part for lbl in s.label_list())
        negatives = sum(not s.label_list() for s in part)
        if negatives:
            counts[NO_LABEL] = negatives
    else:
        counts = Counter(s.label for s in part)
    return dict(sorted(counts.items()))


def _groups_map(split: SplitResult) -> dict[str, str]:
    """Each indexed image's group, keyed as the index names the image; a channel list is also
    keyed by its first file (templates look cases up either way)."""
    groups: dict[str, str] = {}
    for s in split.train + split.test:
        groups[sample_key(s)] = s.group
        if isinstance(s.image, list) and s.image:
            groups.setdefault(s.image[0], s.group)
    return groups


def split_record(scan: ScanResult, split: SplitResult) -> dict:
    """What split.json holds (see the module docstring)."""
    multi = any(s.labels is not None for s in scan.samples)
    counts = {"train": _class_counts(split.train, multi), "test": _class_counts(split.test, multi)}
    return {"grouping_key": scan.group_source, "dataset": scan.root, **split.info,
            "counts": counts,
            "num_images": {"train": len(split.train), "test": len(split.test)},
            "groups": _groups_map(split)}


def _summary(datapath: Path, scan: ScanResult, split: SplitResult, record: dict) -> dict:
    summary = {"datapath": str(datapath), "num_train": len(split.train),
               "num_test": len(split.test), "classes": scan.classes, "counts": record["counts"],
               "split_method": split.info["method"], "grouping_key": scan.group_source,
               "num_train_groups": len(split.info["train_groups"]),
               "num_test_groups": len(split.info["test_groups"])}
    if "caps" in split.info:
        caps = split.info["caps"]
        summary["caps"] = {k: caps[k] for k in ("train", "test", "total", "per_class",
                                                 "balanced", "images_left_out")}
    return summary


def _check_both_sides(scan: ScanResult, split: SplitResult) -> None:
    if not split.train or not split.test:
        raise IndexBuildError(f"the split left {len(split.train)} training and "
                              f"{len(split.test)} test images; each side needs at least one. "
                              "Relax the caps in the datacard or add patients")


def write_diagnosis_index(scan: ScanResult, datapath: str | Path, test_fraction: float = 0.2,
                          seed: int = 42, keep_existing_split: bool = True,
                          caps: SplitCaps | str | None = None) -> dict:
    """Write train/test/label_dict/split JSON files; returns a summary for the caller."""
    if len(scan.classes) < 2:
        raise IndexBuildError(f"diagnosis needs at least two classes; found {scan.classes}. "
                              "Add a folder for each class.")
    scan = write_series_manifests(scan, datapath)  # DICOM series sharing a folder -> manifests
    split = make_split(scan, test_fraction, seed, keep_existing_split, caps)
    _check_both_sides(scan, split)
    datapath = Path(datapath)
    label_dict = {label: i for i, label in enumerate(scan.classes)}
    train = {s.image: s.label_list() for s in split.train}
    test = {s.image: s.label_list() for s in split.test}
    record = split_record(scan, split)
    write_json_atomic(datapath / "label_dict.json", label_dict)
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", record)
    return _summary(datapath, scan, split, record)


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
                     keep_existing_split: bool = True,
                     caps: SplitCaps | str | None = None) -> dict:
    """Segmentation / detection / report generation index: lists of dicts (see
    ml_templates/README.md), plus split.json (and label_dict.json for detection)."""
    if template not in ("segmentation", "detection", "report_generation"):
        raise IndexBuildError(f"no list index for template {template!r}")
    if len(scan.samples) < 4:
        raise IndexBuildError(f"only {len(scan.samples)} cases; at least 4 are needed to train "
                              "and test")
    scan = write_series_manifests(scan, datapath)  # DICOM series sharing a folder -> manifests
    split = make_split(scan, test_fraction, seed, keep_existing_split, caps)
    _check_both_sides(scan, split)
    datapath = Path(datapath)
    train = [_entry(s, template, scan.classes) for s in split.train]
    test = [_entry(s, template, scan.classes) for s in split.test]
    if template == "detection":
        write_json_atomic(datapath / "label_dict.json",
                          {label: i for i, label in enumerate(scan.classes)})
    record = split_record(scan, split)
    write_json_atomic(datapath / "train.json", train)
    write_json_atomic(datapath / "test.json", test)
    write_json_atomic(datapath / "split.json", record)
    return _summary(datapath, scan, split, record)


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
               "images": {"train": _class_counts(split.train, multi),
                          "test": _class_counts(split.test, multi)},
               "patients": {"train": patients(split.train), "test": patients(split.test)},
               "num_images": {"train": len(split.train), "test": len(split.test)},
               "num_patients": {"train": len(split.info["train_groups"]),
                                "test": len(split.info["test_groups"])}}
    if "caps" in split.info:
        preview["caps"] = {k: v for k, v in split.info["caps"].items()
                           if k in ("train", "test", "total", "per_class", "balanced", "from",
                                    "images_left_out")}
    if "left_out_for_leakage" in split.info:
        preview["left_out_for_leakage"] = split.info["left_out_for_leakage"]["images"]
    return preview
