"""How a finished training run ended, in one sentence for the Training page, read from the
run's ``Logout/train_summary.json`` (and its ``train_config.json`` for the planned epochs).

The templates record ``epochs_run``, ``epochs_planned`` (some), ``stop_reason`` (``completed``,
``early_stopped at 24: no validation loss improvement of more than 1% for 10 epochs``,
``stopped by the user``, ``time budget of 600 s reached``), and which epoch was kept
(``epoch_kept``, ``selection_metric``, ``selection_value``, ``patience``). An early stop must
read as one ("stopped early at epoch 24 of 40 ... best epoch 14 kept"), never as "completed";
epochs are whole numbers.
"""
from __future__ import annotations

import math
import re

EARLY = re.compile(r"early_stopped at (?P<at>[\d.]+): no (?P<what>.+?) improvement"
                   r"(?: of more than (?P<delta>[\d.]+%))? for (?P<patience>\d+) epochs?")
BUDGET = re.compile(r"time budget of (?P<s>[\d.]+) s reached")
SELECTION = re.compile(r"best (?P<what>.+) \((?P<value>[^()]+)\)$")


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def whole(epoch: float) -> int:
    """An epoch count as an integer: 23.98 (the Trainer's float) is 24."""
    return int(round(epoch)) if abs(epoch - round(epoch)) < 0.05 else int(math.ceil(epoch))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _at_epoch(run: float | None, planned: float | None) -> str:
    if run is None:
        return ""
    of = f" of {whole(planned)}" if planned else ""
    return f" at epoch {whole(run)}{of}"


def _kept(summary: dict) -> str:
    kept = _number(summary.get("epoch_kept"))
    if kept is None:
        return ""
    # "kept epoch 14: best validation loss (0.412)" -> "(validation loss 0.412)"
    chosen = SELECTION.search(str(summary.get("selection") or ""))
    score = ""
    if chosen:
        what = re.sub(r"\s*\(.*?\)", "", chosen["what"]).strip()
        score = f" ({what} {chosen['value']})"
    return f"; best epoch {whole(kept)} kept{score}"


def training_outcome(summary: dict, config: dict | None = None) -> str:
    """One sentence: how training ended, at which epoch of how many planned, and which epoch
    was kept."""
    config = config or {}
    run = _number(summary.get("epochs_run"))
    planned = _number(summary.get("epochs_planned")) or _number(config.get("epochs"))
    reason = str(summary.get("stop_reason") or "completed").strip()
    at, kept = _at_epoch(run, planned), _kept(summary)
    early = EARLY.search(reason)
    if early:
        what = early["what"]
        by = f" by more than {early['delta']}" if early["delta"] else ""
        patience = int(early["patience"])
        if run is None:
            at = _at_epoch(float(early["at"]), planned)
        return (f"Stopped early{at} ({what} did not improve{by} for {patience} epoch"
                f"{'s' if patience != 1 else ''}){kept}.")
    if reason == "stopped by the user":
        return f"Stopped at your request{at}{kept}."
    budget = BUDGET.search(reason)
    if budget:
        return f"The time budget ({_duration(float(budget['s']))}) ended training{at}{kept}."
    if reason == "completed":
        if run is not None and planned and whole(run) < whole(planned):
            # ended before the planned epochs without saying why: the Trainer's own early
            # stopping (it records no reason)
            return (f"Stopped early{at} (early stopping ended it before the planned "
                    f"epochs){kept}.")
        done = f" all {whole(planned)} planned epochs" if planned else (
            f" {whole(run)} epochs" if run is not None else "")
        return f"Training completed{done}{kept}."
    return f"Training ended{at}: {reason}{kept}."
