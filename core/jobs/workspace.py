"""A job's folder: ``<home>/workspace/jobs/<job_id>/``.

    plan.json           the Task Manager's plan (dataset, task, model, metric, split, budget)
    Datapath/           index files (train.json, test.json, label_dict.json, split.json),
                        dataloader.py and its validation report
    train_config.json   the Model Trainer's configuration
    Logout/             training log, checkpoints, predictions, final model
    cache/              decoded images the dataloader keeps between runs (derived data: never
                        digested or exported; safe to delete)
    report.json         the system evaluator's metrics on the test set
    model_card.md       what the model is, how it was made, how well it does, what it is not for
    worker.log          the job worker's own output
    external/           the model scored on other datasets, one folder per run
                        (core.external_validation)

Every file name of a workspace is defined here, once; the rest of the code asks for
``ws.train_summary``, never for ``ws.logout / "train_summary.json"``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_JSON_BYTES = 16 << 20  # plan, index, summaries: files the system writes are far smaller


@dataclass(frozen=True)
class JobWorkspace:
    root: Path

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def datapath(self) -> Path:
        return self.root / "Datapath"

    @property
    def logout(self) -> Path:
        return self.root / "Logout"

    @property
    def train_config(self) -> Path:
        return self.root / "train_config.json"

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def model_card(self) -> Path:
        return self.root / "model_card.md"

    @property
    def worker_log(self) -> Path:
        return self.root / "worker.log"

    @property
    def external(self) -> Path:
        return self.root / "external"

    @property
    def scratch(self) -> Path:
        return self.root / ".tmp"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def dataloader(self) -> Path:
        return self.datapath / "dataloader.py"

    @property
    def dataloader_config(self) -> Path:
        return self.datapath / "dataloader_config.json"

    @property
    def dataloader_check(self) -> Path:
        return self.datapath / "dataloader_check.json"

    @property
    def fingerprint(self) -> Path:
        return self.datapath / "fingerprint.json"

    @property
    def dataloader_check_log(self) -> Path:
        return self.logout / "dataloader_check.log"

    @property
    def split(self) -> Path:
        return self.datapath / "split.json"

    @property
    def label_dict(self) -> Path:
        return self.datapath / "label_dict.json"

    @property
    def train_index(self) -> Path:
        return self.datapath / "train.json"

    @property
    def test_index(self) -> Path:
        return self.datapath / "test.json"

    @property
    def train_log(self) -> Path:
        return self.logout / "train.log"

    @property
    def metrics_channel(self) -> Path:
        return self.logout / "metrics.jsonl"

    @property
    def stop_request(self) -> Path:
        return self.logout / "stop.request"

    @property
    def checkpoints(self) -> Path:
        return self.logout / "checkpoints"

    @property
    def model_dir(self) -> Path:
        return self.logout / "model"

    @property
    def exports(self) -> Path:
        return self.logout / "export"

    @property
    def predictions(self) -> Path:
        return self.logout / "predictions.json"

    @property
    def train_summary(self) -> Path:
        return self.logout / "train_summary.json"

    @property
    def manifest(self) -> Path:
        return self.logout / "manifest.json"

    def ensure(self) -> "JobWorkspace":
        for folder in (self.root, self.datapath, self.logout):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    def state(self) -> tuple:
        """What the gates read, as (name, size, mtime) of the files directly in the workspace,
        Datapath/ and Logout/: equal states mean a gate's verdict still holds."""
        found = []
        for folder in (self.root, self.datapath, self.logout):
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        found.append((entry.path, st.st_size, st.st_mtime_ns))
                except OSError:
                    continue
        return tuple(sorted(found))

    def read_json(self, path: Path) -> Any:
        """A JSON file of the workspace, read only when it is at most ``MAX_JSON_BYTES`` (checked
        before reading: children may write the workspace). ValueError otherwise."""
        size = os.stat(path).st_size
        if size > MAX_JSON_BYTES:
            raise ValueError(f"{path.name} is {size / 1e6:.1f} MB, more than the "
                             f"{MAX_JSON_BYTES / 1e6:.1f} MB the system reads for it; it was not "
                             "written by the system: run the step that writes it again")
        with open(path, "rb") as handle:
            return json.loads(handle.read(MAX_JSON_BYTES + 1).decode("utf-8"))

    def read_plan(self) -> dict:
        return self.read_json(self.plan)
