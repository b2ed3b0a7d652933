"""Trainer callbacks shared by the templates: stream logs to the store, honour a stop flag and
a wall-clock budget."""
from __future__ import annotations

import math
import time

from transformers import TrainerCallback

from core.store import open_store


class StoreCallback(TrainerCallback):
    """Every value the Trainer logs becomes a metrics row; the job's stop flag ends training."""

    def __init__(self, store_path: str, job_id: str, time_budget_s: float | None = None,
                 check_every_s: float = 2.0):
        self.store = open_store(store_path)
        self.job_id = job_id
        self.budget = time_budget_s
        self.check_every_s = check_every_s
        self.started = time.time()
        self._last_check = 0.0
        self.stop_reason = ""

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.time()
        if state.is_world_process_zero:  # one writer when training runs on several processes
            self.store.add_metrics(self.job_id, 0, 0.0, {"max_steps": state.max_steps})

    def on_log(self, args, state, control, logs=None, **kwargs):
        values = {k: float(v) for k, v in (logs or {}).items()
                  if isinstance(v, (int, float)) and math.isfinite(float(v))}
        if values and state.is_world_process_zero:
            self.store.add_metrics(self.job_id, state.global_step, state.epoch, values)

    def on_step_end(self, args, state, control, **kwargs):
        now = time.time()
        if self.budget and now - self.started > self.budget:
            self.stop_reason = f"time budget of {self.budget:.0f} s reached"
            control.should_training_stop = True
        if now - self._last_check >= self.check_every_s:
            self._last_check = now
            job = self.store.job(self.job_id)
            if job and job.get("stop_requested"):
                self.stop_reason = "stopped by the user"
                control.should_training_stop = True
        return control
