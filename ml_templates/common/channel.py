"""How a training child talks to the job that started it, without the store.

The parent (the job's worker) names two files in ``train_config.json``:

* ``metrics_path``: the child appends one JSON object per line,
  ``{"kind": "metrics", "step": int, "epoch": float | null, "values": {name: float}}``.
  The parent tails the file, validates each complete line, and writes the rows to the store for
  its own job only. The child never opens the store.
* ``stop_path``: when that file exists the child stops at its next check, keeping its best model
  so far (Stop on the Training page); the parent kills the process group when it has not ended
  after a grace period. (No SIGTERM handler: data-loading and augmentation workers forked from
  the trainer must keep dying on the SIGTERM their pools send them.)

Only rank zero of a multi-process run writes.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path


class RunChannel:
    def __init__(self, metrics_path: str | os.PathLike | None,
                 stop_path: str | os.PathLike | None, writer: bool = True):
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.stop_path = Path(stop_path) if stop_path else None
        self.writer = writer
        if self.metrics_path is not None:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_config(cls, cfg: dict, writer: bool = True) -> "RunChannel":
        return cls(cfg.get("metrics_path"), cfg.get("stop_path"), writer)

    def metrics(self, step: int, epoch: float | None, values: dict) -> None:
        clean = {str(k): float(v) for k, v in values.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(float(v))}
        if not clean or not self.writer or self.metrics_path is None:
            return
        line = json.dumps({"kind": "metrics", "step": int(step), "ts": time.time(),
                           "epoch": None if epoch is None else float(epoch), "values": clean})
        with open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def stop_requested(self) -> bool:
        return self.stop_path is not None and self.stop_path.exists()
