"""Trainer callbacks shared by the templates: report what the Trainer logs through the run
channel (ml_templates.common.channel), honour a stop request and a wall-clock budget."""
from __future__ import annotations

import time

from transformers import TrainerCallback

from ml_templates.common.channel import RunChannel


class ChannelCallback(TrainerCallback):
    """Every value the Trainer logs becomes a metrics line; a stop request ends training."""

    def __init__(self, cfg: dict, check_every_s: float = 1.0):
        self.channel = RunChannel.from_config(cfg)
        self.budget = cfg.get("time_budget_s")
        self.check_every_s = check_every_s
        self.started = time.time()
        self._last_check = 0.0
        self.stop_reason = ""

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.time()
        self.channel.writer = state.is_world_process_zero  # one writer across processes
        self.channel.metrics(0, 0.0, {"max_steps": state.max_steps})

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.channel.metrics(state.global_step, state.epoch, logs or {})

    def on_step_end(self, args, state, control, **kwargs):
        now = time.time()
        if self.budget and now - self.started > self.budget:
            self.stop_reason = f"time budget of {self.budget:.0f} s reached"
            control.should_training_stop = True
        if now - self._last_check >= self.check_every_s:
            self._last_check = now
            if self.channel.stop_requested():
                self.stop_reason = "stopped by the user"
                control.should_training_stop = True
        return control
