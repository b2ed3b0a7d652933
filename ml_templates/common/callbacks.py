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


class SelectionCallback(TrainerCallback):
    """Model selection that says what it did: the Trainer keeps the checkpoint with the best
    ``eval_<monitor>`` (``load_best_model_at_end``); this callback stops training when that value
    has not improved for ``patience`` evaluations — never before ``min_epochs`` — and records
    which epoch was kept and why, for the run's summary."""

    def __init__(self, monitor: str, greater_is_better: bool, patience: int | None,
                 min_epochs: int = 1, rel_delta: float = 0.0, description: str = ""):
        self.key = monitor if monitor.startswith("eval_") else f"eval_{monitor}"
        self.greater, self.patience = greater_is_better, int(patience or 0)
        # patience restarts only on an improvement of more than rel_delta of the best value
        # (a loss creeping down by 0.1 % an epoch is not progress); the kept epoch is the best
        self.min_epochs, self.rel_delta = int(min_epochs), float(rel_delta)
        self.reference: float | None = None
        self.description = description or self.key.removeprefix("eval_").replace("_", " ")
        self.best: float | None = None
        self.best_epoch: float | None = None
        self.waited = 0
        self.history: list[tuple[float, float]] = []
        self.early_stopped_at: float | None = None

    def _better(self, value: float, than: float | None, rel: float = 0.0) -> bool:
        if than is None:
            return True
        margin = abs(than) * rel
        return value > than + margin if self.greater else value < than - margin

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        value = (metrics or {}).get(self.key)
        if value is None or value != value:
            return control
        epoch = round(float(state.epoch or 0), 2)
        self.history.append((epoch, float(value)))
        if self._better(float(value), self.best):
            self.best, self.best_epoch = float(value), epoch
        if self._better(float(value), self.reference, self.rel_delta):
            self.reference, self.waited = float(value), 0
        else:
            self.waited += 1
        if self.patience and self.waited >= self.patience and epoch >= self.min_epochs:
            self.early_stopped_at = epoch
            control.should_training_stop = True
        return control

    def stop_reason(self, other: str = "") -> str:
        """``early_stopped at 14: no validation loss improvement for 10 epochs`` (of more than
        ``rel_delta``), another
        reason given (a stop request, the time budget), or ``completed``."""
        if other:
            return other
        if self.early_stopped_at is not None:
            size = f" of more than {self.rel_delta:.0%}" if self.rel_delta else ""
            return (f"early_stopped at {self.early_stopped_at:g}: no {self.description} "
                    f"improvement{size} for {self.patience} epochs")
        return "completed"

    def summary(self) -> dict:
        return {"epoch_kept": self.best_epoch, "selection_metric": self.key.removeprefix("eval_"),
                "selection_value": self.best,
                "selection": (f"kept epoch {self.best_epoch:g}: best {self.description} "
                              f"({self.best:.4g})" if self.best is not None else
                              "no validation evaluation ran: the last epoch is kept"),
                "min_epochs": self.min_epochs, "patience": self.patience,
                "val_history": self.history}
