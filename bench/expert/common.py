"""What the expert scripts share: the system job's files they must follow (the same network
family, sizes, epoch budget, train/test split), the validation hold-out by patient groups,
scoring with the system's evaluator, and the result file each script writes.

The expert scripts read a job workspace as plain files (``train_config.json``,
``Datapath/train.json``, ``test.json``, ``label_dict.json``, ``split.json``,
``dataloader_config.json``) and import nothing of the product but ``core.evaluation``.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupShuffleSplit, StratifiedGroupKFold

VAL_FRACTION = 0.15   # the share of training patients held out for validation


class ExpertError(RuntimeError):
    """The job's files cannot be followed; the message says which and why."""


@dataclass
class Job:
    """A system job as the expert scripts read it."""
    root: Path
    config: dict
    loader: dict
    train: object            # diagnosis: {path: [label]}; segmentation: [{image_path, ...}]
    test: object
    groups: dict             # image reference -> patient group (split.json)
    label_dict: dict = field(default_factory=dict)

    @property
    def datapath(self) -> Path:
        return self.root / "Datapath"

    @property
    def template(self) -> str:
        return self.config.get("template") or ""

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 42))


def _read(path: Path):
    if not path.exists():
        raise ExpertError(f"{path} is missing: run the system's build first (the expert follows "
                          "its split and configuration)")
    return json.loads(path.read_text())


def load_job(root: str | Path) -> Job:
    root = Path(root)
    datapath = root / "Datapath"
    config = _read(root / "train_config.json")
    loader_path = datapath / "dataloader_config.json"
    loader = json.loads(loader_path.read_text()) if loader_path.exists() else {}
    split = _read(datapath / "split.json")
    label_path = datapath / "label_dict.json"
    return Job(root, config, loader, _read(datapath / "train.json"), _read(datapath / "test.json"),
               dict(split.get("groups") or {}),
               json.loads(label_path.read_text()) if label_path.exists() else {})


def case_key(item) -> str:
    """The reference a split groups by: a diagnosis index key, or a segmentation entry's
    (first) image path."""
    if isinstance(item, dict):
        item = item["image_path"]
    if isinstance(item, (list, tuple)):
        item = item[0]
    return str(item)


def group_of(groups: dict, item) -> str:
    key = case_key(item)
    return str(groups.get(key, key))


def hold_out_validation(keys: list[str], groups: dict, labels: list | None = None,
                        fraction: float = VAL_FRACTION, seed: int = 42) -> tuple[list, list]:
    """Indices (train, val) of ``keys``: about ``fraction`` of the patient groups held out,
    stratified by label when ``labels`` are given (sklearn's StratifiedGroupKFold, first fold),
    at random otherwise (GroupShuffleSplit). No patient is on both sides."""
    group_ids = np.array([group_of(groups, k) for k in keys])
    n_groups = len(set(group_ids))
    if n_groups < 2:
        raise ExpertError(f"{len(keys)} training cases from {n_groups} patient: at least two "
                          "patients are needed to hold out validation")
    index = np.arange(len(keys))
    if labels is not None and len(set(labels)) > 1:
        folds = max(2, min(n_groups, round(1 / fraction)))
        splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        train, val = next(splitter.split(index, np.asarray(labels), group_ids))
    else:
        n_val = min(n_groups - 1, max(1, round(n_groups * fraction)))
        splitter = GroupShuffleSplit(n_splits=1, test_size=n_val, random_state=seed)
        train, val = next(splitter.split(index, groups=group_ids))
    return sorted(train.tolist()), sorted(val.tolist())


def check_split(train: list, val: list, test: list, groups: dict) -> None:
    """Raise when a case or a patient is on two sides of train / validation / test."""
    sides = {"train": train, "validation": val, "test": test}
    seen: dict[str, str] = {}
    for side, items in sides.items():
        for item in items:
            for what, key in (("case", "c:" + case_key(item)), ("patient", "g:" +
                                                                 group_of(groups, item))):
                if seen.get(key, side) != side:
                    raise ExpertError(f"{what} {key[2:]} is in both {seen[key]} and {side}")
                seen[key] = side


def score(template: str, datapath: Path, predictions: Path) -> dict:
    """The system's own evaluator on a predictions file (the format the templates write)."""
    from core.evaluation.step import evaluate
    return evaluate(template, Path(datapath), Path(predictions))


class Clock:
    """Wall-clock sections of a run: ``with clock("train"): ...``; ``clock.seconds``."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self._name = ""
        self._t0 = 0.0

    def __call__(self, name: str) -> "Clock":
        self._name = name
        return self

    def __enter__(self) -> "Clock":
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds[self._name] = self.seconds.get(self._name, 0.0) \
            + time.perf_counter() - self._t0

    def total(self) -> float:
        return time.perf_counter() - self.started


def write_result(out: Path, result: dict) -> Path:
    """``<out>/expert_result.json``: what the bench reads back."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "expert_result.json"
    path.write_text(json.dumps(result, indent=2, default=float))
    return path


def cosine_schedule(optimizer, total_steps: int, warmup_steps: int):
    """Linear warm-up, then cosine decay to zero (per optimiser step)."""
    import torch
    warmup_steps = max(1, min(warmup_steps, total_steps // 10 or 1))
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup_steps)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=max(1, total_steps - warmup_steps))
    return torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, decay],
                                                 milestones=[warmup_steps])
