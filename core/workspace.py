"""A job's folder: ``<home>/workspace/jobs/<job_id>/``.

    plan.json           the Task Manager's plan (dataset, task, model, metric, split, budget)
    Datapath/           index files (train.json, test.json, label_dict.json, split.json),
                        dataloader.py and its validation report
    train_config.json   the Model Trainer's configuration
    Logout/             training log, checkpoints, predictions, final model
    report.json         the system evaluator's metrics on the test set
    model_card.md       what the model is, how it was made, how well it does, what it is not for
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
    def dataloader(self) -> Path:
        return self.datapath / "dataloader.py"

    def ensure(self) -> "JobWorkspace":
        for folder in (self.root, self.datapath, self.logout):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    def read_json(self, path: Path) -> Any:
        return json.loads(path.read_text(encoding="utf-8"))

    def read_plan(self) -> dict:
        return self.read_json(self.plan)
