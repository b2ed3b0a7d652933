"""Gates: code that checks each stage's output before the next stage may start.

Each gate returns a GateResult; a failed gate carries a message that says what is wrong, written
for the role that owns the stage (and for the user who reads the job log).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.layouts.types import group_of
from core.imaging.refs import ImageReadError, ref_files, ref_items
from core.jobs.workspace import JobWorkspace


class GateMemo:
    """Each gate runs once per state of the workspace: a tool that gates its own output (so the
    agent hears the verdict) and the stage's end share the one run."""

    def __init__(self):
        self._seen: dict[str, tuple[tuple, "GateResult"]] = {}

    def run(self, name: str, ws: JobWorkspace, check: Callable[[], "GateResult"]) -> "GateResult":
        state = ws.state()
        seen = self._seen.get(name)
        if seen is not None and seen[0] == state:
            return seen[1]
        result = check()  # gates only read: the state they judged is the one read above
        self._seen[name] = (state, result)
        return result


SUPPORTED_TASKS = {"diagnosis", "segmentation", "anomaly_detection", "report_generation"}


@dataclass
class GateResult:
    gate: str
    ok: bool
    errors: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def message(self) -> str:
        if self.ok:
            return f"gate {self.gate}: passed"
        return f"gate {self.gate} failed: " + "; ".join(self.errors)


def _load(path: Path, errors: list[str]):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        errors.append(f"{path.name} is missing")
    except json.JSONDecodeError as exc:
        errors.append(f"{path.name} is not valid JSON ({exc})")
    return None


def check_plan(ws: JobWorkspace, known_datasets: dict[str, bool]) -> GateResult:
    """plan.json parses; a chosen dataset is registered and available; the task is supported."""
    errors: list[str] = []
    plan = _load(ws.plan, errors)
    if plan is None:
        return GateResult("plan", False, errors)
    status = plan.get("status")
    if status not in ("ready", "no_dataset"):
        errors.append(f"plan status must be 'ready' or 'no_dataset', got {status!r}")
    elif status == "ready":
        name = plan.get("dataset")
        if name not in known_datasets:
            errors.append(f"dataset {name!r} is not a registered datacard")
        elif not known_datasets[name]:
            errors.append(f"dataset {name!r} is registered but its folder does not exist")
        if plan.get("task") not in SUPPORTED_TASKS:
            errors.append(f"task {plan.get('task')!r} is not supported yet "
                          f"(supported: {', '.join(sorted(SUPPORTED_TASKS))})")
        for key in ("dataset_path", "metric", "model", "reasons"):
            if not plan.get(key):
                errors.append(f"plan is missing {key!r}")
    elif not plan.get("reasons"):
        errors.append("a no_dataset plan must give the reasons")
    return GateResult("plan", not errors, errors, {"status": status})


def _index_key(image) -> str:
    """How split.json names an image: its path, or the JSON text of a list of channel files."""
    return image if isinstance(image, str) else json.dumps(image)


def _unresolved(ref) -> str | None:
    """Why an image reference's files cannot be found (core.imaging.refs.ref_files: the
    array file of ``file.npz::key[i]``, a folder's slices, a manifest's DICOM files, every
    channel of a list or its JSON text); None when they all exist."""
    try:
        ref_files(ref)
    except ImageReadError as exc:
        return str(exc)
    return None


def _first_file(key: str) -> str:
    """An index key names a file, or (JSON text of) a list of channel files: the first one."""
    try:
        return ref_items(key)[0]
    except ImageReadError:
        return key


def _group_leak(train_keys: list[str], test_keys: list[str], split: dict) -> str | None:
    """A patient/group with images on both sides, named with one file from each side. An
    image's group is the one split.json records for it, else its file name's patient prefix
    (``patient0012_...``); images with neither are not compared."""
    recorded = split.get("groups") if isinstance(split.get("groups"), dict) else {}

    def group(key: str) -> str | None:
        if key in recorded:
            return str(recorded[key])
        first = _first_file(key)
        if first in recorded:
            return str(recorded[first])
        found, matched = group_of(Path(first))
        return found if matched else None

    train_files: dict[str, str] = {}
    for key in train_keys:
        g = group(key)
        if g is not None:
            train_files.setdefault(g, key)
    leaks = {}
    for key in test_keys:
        g = group(key)
        if g is not None and g in train_files:
            leaks.setdefault(g, key)
    if not leaks:
        return None
    g = sorted(leaks)[0]
    return (f"{len(leaks)} patients/groups are in both train and test (e.g. {g}: "
            f"{_first_file(train_files[g])} in train.json and {_first_file(leaks[g])} in "
            "test.json): split by patient, keeping all of a patient's images on one side")


def _declared_overlap(split: dict) -> str | None:
    overlap = set(split.get("train_groups", [])) & set(split.get("test_groups", []))
    if not overlap:
        return None
    return (f"{len(overlap)} patients/groups are in both train and test "
            f"(e.g. {sorted(overlap)[0]}): split by patient")


def check_diagnosis_index(ws: JobWorkspace) -> GateResult:
    """Index files parse and follow the schema; no image or patient on both sides; every class
    in training; every listed image exists."""
    errors: list[str] = []
    d = ws.datapath
    train, test = _load(d / "train.json", errors), _load(d / "test.json", errors)
    labels, split = _load(d / "label_dict.json", errors), _load(d / "split.json", errors)
    if errors:
        return GateResult("index", False, errors)
    if not isinstance(labels, dict) or sorted(labels.values()) != list(range(len(labels))):
        errors.append("label_dict.json must map each label to 0..N-1 without gaps")
        labels = labels if isinstance(labels, dict) else {}
    for name, index in (("train", train), ("test", test)):
        if not isinstance(index, dict) or not index:
            errors.append(f"{name}.json must be a non-empty object {{image_path: [label, ...]}}")
            continue
        multi = any(isinstance(v, list) and len(v) != 1 for v in index.values())
        bad = [p for p, v in index.items() if not isinstance(v, list) or (not v and not multi)
               or any(lbl not in labels for lbl in v)]
        if bad:
            errors.append(f"{name}.json: {len(bad)} entries have labels missing from "
                          f"label_dict.json, e.g. {bad[0]}")
        missing = [why for p in index if (why := _unresolved(p))]
        if missing:
            errors.append(f"{name}.json: {len(missing)} images do not exist or name no image "
                          f"files, e.g. {missing[0]}")
    if errors:
        return GateResult("index", False, errors)
    overlap = set(train) & set(test)
    if overlap:
        errors.append(f"{len(overlap)} images are in both train and test, "
                      f"e.g. {next(iter(overlap))}")
    split = split if isinstance(split, dict) else {}
    errors.extend(e for e in (_declared_overlap(split), _group_leak(list(train), list(test), split))
                  if e)
    train_labels = {lbl for v in train.values() for lbl in v}
    absent = sorted(set(labels) - train_labels)
    if absent:
        errors.append(f"classes with no training image: {', '.join(absent)}")
    test_labels = {lbl for v in test.values() for lbl in v}
    facts = {"num_train": len(train), "num_test": len(test), "classes": sorted(labels),
             "test_classes_missing": sorted(set(labels) - test_labels)}
    return GateResult("index", not errors, errors, facts)


def _paths_of(entry: dict) -> list:
    """The references of a list-index entry: its image (a list of channels stays one
    reference, so one missing channel counts once) and its label_path."""
    return [entry.get("image_path")] + ([entry["label_path"]] if entry.get("label_path") else [])


def _entry_errors(entry, template: str) -> str | None:
    if not isinstance(entry, dict) or not entry.get("image_path"):
        return "an entry without image_path"
    if template == "segmentation":
        if not entry.get("label_path") or not entry.get("labels"):
            return "a segmentation entry needs label_path and a non-empty labels list"
    elif template == "detection":
        boxes, labels = entry.get("boxes"), entry.get("labels")
        if not isinstance(boxes, list) or not isinstance(labels, list) or len(boxes) != len(labels):
            return "a detection entry needs boxes and labels lists of the same length"
        for box in boxes:
            half = len(box) // 2
            if len(box) not in (4, 6) or any(box[i + half] <= box[i] for i in range(half)):
                return f"box {box} is not [x0, y0, (z0,) x1, y1, (z1)] with x1 > x0"
    elif not (str(entry.get("findings", "")).strip() or str(entry.get("impression", "")).strip()):
        return "a report entry has neither findings nor impression"
    return None


def check_list_index(ws: JobWorkspace, template: str) -> GateResult:
    """Segmentation / detection / report index: lists of well-formed entries whose files exist;
    no image or patient on both sides."""
    errors: list[str] = []
    d = ws.datapath
    train, test = _load(d / "train.json", errors), _load(d / "test.json", errors)
    split = _load(d / "split.json", errors)
    if errors:
        return GateResult("index", False, errors)
    for name, index in (("train", train), ("test", test)):
        if not isinstance(index, list) or not index:
            errors.append(f"{name}.json must be a non-empty list")
            continue
        bad = [(i, e) for i, entry in enumerate(index) if (e := _entry_errors(entry, template))]
        if bad:
            errors.append(f"{name}.json: {len(bad)} bad entries, e.g. #{bad[0][0]}: {bad[0][1]}")
            continue
        missing = [why for entry in index for p in _paths_of(entry) if (why := _unresolved(p))]
        if missing:
            errors.append(f"{name}.json: {len(missing)} files do not exist or name no image "
                          f"files, e.g. {missing[0]}")
    if errors:
        return GateResult("index", False, errors)
    key = lambda entry: _index_key(entry["image_path"])  # noqa: E731
    overlap = {key(e) for e in train} & {key(e) for e in test}
    if overlap:
        errors.append(f"{len(overlap)} images are in both train and test")
    split = split if isinstance(split, dict) else {}
    errors.extend(e for e in (_declared_overlap(split),
                              _group_leak([key(e) for e in train], [key(e) for e in test], split))
                  if e)
    return GateResult("index", not errors, errors, {"num_train": len(train),
                                                     "num_test": len(test)})


def check_dataloader(ws: JobWorkspace, one_shape: bool = True) -> GateResult:
    """The dataloader check loaded every image it tried (``checked``: a stratified sample of
    each split, when the check says so; else every image) and they share one shape."""
    errors: list[str] = []
    if not ws.dataloader.exists():
        errors.append("Datapath/dataloader.py is missing")
    report = _load(ws.dataloader_check, errors)
    if report is not None:
        if report.get("failed"):
            errors.append(f"{len(report['failed'])} samples failed to load, e.g. "
                          f"{report['failed'][0]}")
        expected = report.get("expected", {})
        checked = report.get("checked") or {}  # a sample of each split (absent: all of it)
        for split in ("train", "test"):
            target = checked.get(split, expected.get(split))
            if report.get("loaded", {}).get(split) != target:
                of_all = f" sampled of {expected.get(split)}" if split in checked and \
                    target != expected.get(split) else ""
                errors.append(f"{split}: loaded {report.get('loaded', {}).get(split)} of "
                              f"{target}{of_all} samples")
        if one_shape and len(report.get("shapes", [])) != 1:
            errors.append(f"samples must share one shape after transforms, got "
                          f"{report.get('shapes')}")
    return GateResult("dataloader", not errors, errors, report or {})


def check_training(ws: JobWorkspace, metric_rows: int) -> GateResult:
    errors: list[str] = []
    summary = _load(ws.train_summary, errors)  # written last by every template
    if metric_rows == 0:
        errors.append("training reported no metric through its run channel (Logout/metrics.jsonl)")
    if not (ws.predictions).exists():
        errors.append("Logout/predictions.json (test-set predictions) is missing")
    if summary is not None and not Path(summary.get("model_path", "")).exists():
        errors.append("the trained model file is missing")
    return GateResult("training", not errors, errors, summary or {})


def check_report(ws: JobWorkspace) -> GateResult:
    errors: list[str] = []
    report = _load(ws.report, errors)
    if report is not None:
        if not str(report.get("evaluator", "")).startswith("core.evaluation."):
            errors.append("report.json was not written by the system's evaluator")
        if not report.get("metrics"):
            errors.append("report.json has no metrics")
    return GateResult("report", not errors, errors, (report or {}).get("metrics", {}))
