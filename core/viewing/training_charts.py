"""The Training page's curves as plotly figures, and what to say instead of a figure that has no
points yet.

Four panels (loss, validation metrics, learning rate, gradient norm) and one for any further
logged value. Every figure is readable from its first point: a series with few points is drawn
with markers (a one-point line is invisible), the legend sits below the plot so it never covers
the title, and the learning rate reads in scientific notation (9e-4, not 900µ). A panel with no
points is not drawn as empty axes: :func:`training_panels` gives it a sentence saying when its
first point is due (running) or why none was logged (finished), or leaves it out when the
template never logs it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from core.store.curves import MAX_POINTS, JobCurves, chart_groups

LABELS = {"loss": "Training loss", "train_loss": "Training loss (mean)",
          "eval_loss": "Validation loss", "val_loss": "Validation loss",
          "learning_rate": "Learning rate", "lr": "Learning rate",
          "eval_auc": "AUC", "eval_accuracy": "Accuracy", "eval_f1_macro": "F1 (macro)",
          "eval_dice": "Dice", "eval_map50": "mAP@0.5", "eval_image_auc": "Image AUC",
          "eval_rouge_l": "ROUGE-L", "mean_fg_dice": "Dice (foreground mean)",
          "ema_fg_dice": "Dice (moving average)", "grad_norm": "Gradient norm"}
OTHER_TITLE = "Other logged values"
# panel key -> (title, y-axis title, what its points are called in a sentence)
PANELS = {"loss": ("Loss", "Loss", "training-loss"),
          "validation": ("Validation metrics", "Score", "validation"),
          "learning_rate": ("Learning rate", "Learning rate", "learning-rate"),
          "gradient_norm": ("Gradient norm", "Gradient norm", "gradient-norm")}
FEW_POINTS = 60            # a series with at most this many points is drawn with markers
HEIGHT = 340
SCIENTIFIC = "~e"          # d3 format: 0.0009 -> 9e-4, 0.00015 -> 1.5e-4
# below the plot area, under the x-axis title: never over the figure's title
LEGEND_BELOW = dict(orientation="h", x=0, xanchor="left", y=-0.3, yanchor="top")
DEFAULT_LOGGING_STEPS = 5  # the Trainer templates' default (train_config logging_steps)


def label(name: str) -> str:
    return LABELS.get(name) or name.removeprefix("eval_").replace("_", " ")


def line_figure(curves: JobCurves, names: list[str], title: str, y_title: str, *,
                validation: bool = False, scientific: bool = False,
                limit: int = MAX_POINTS) -> go.Figure | None:
    """One panel's figure, or None when none of ``names`` has a finite point to draw.
    ``validation``: per-epoch scores, always with markers, and a value outside [0, 1] (e.g.
    HD95 in mm) on its own right axis. ``scientific``: y ticks and hover in 9e-4 notation."""
    drawn = {}
    for name in names:
        series = curves.series.get(name)
        if series is None or not len(series):
            continue
        x, y = series.for_drawing(limit)
        if len(x):
            drawn[name] = (x, y)
    if not drawn:
        return None
    wide = {n for n, (_, y) in drawn.items() if float(np.max(np.abs(y))) > 1.0}
    right = wide if wide and len(wide) < len(drawn) and validation else set()
    fig = go.Figure()
    for name, (x, y) in drawn.items():
        markers = validation or len(x) <= FEW_POINTS
        fig.add_trace(go.Scatter(x=x, y=y, name=label(name),
                                 mode="lines+markers" if markers else "lines",
                                 marker=dict(size=8 if len(x) == 1 else 6),
                                 yaxis="y2" if name in right else "y"))
    only = label(next(iter(drawn))) if len(drawn) == 1 else ""
    if only and title == OTHER_TITLE:  # one curve: name it in the title
        title = f"{title}: {only}"
    fig.update_layout(title=dict(text=title, x=0, xanchor="left"), height=HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="Step",
                      yaxis_title=y_title, hovermode="x unified",
                      showlegend=len(drawn) > 1 or only not in ("", title, y_title),
                      legend=LEGEND_BELOW)
    # tick labels (0.75, 1e-3) and axis titles get the room they need, never cut at the edge
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if scientific:
        fig.update_layout(yaxis=dict(tickformat=SCIENTIFIC, hoverformat=SCIENTIFIC,
                                     exponentformat="e"))
    if right:
        fig.update_layout(yaxis2=dict(overlaying="y", side="right", showgrid=False,
                                      automargin=True))
    return fig


# ------------------------------------------------------------------------------ panels
@dataclass(frozen=True)
class Panel:
    key: str                       # loss, validation, learning_rate, gradient_norm, other
    title: str
    figure: go.Figure | None       # None: say ``note`` instead
    note: str = ""


def logging_schedule(config: dict) -> dict[str, tuple[str, int]]:
    """When each panel's first point is logged, for the panels this run's template logs:
    ``{panel: ("steps", 5)}`` (after 5 steps) or ``("epochs", 1)``. nnU-Net logs everything
    once per epoch; MVFA logs its loss every step and scores only after training; the Trainer
    templates log loss, learning rate and gradient norm every ``logging_steps`` steps and
    validate after each epoch."""
    epoch = ("epochs", 1)
    if config.get("engine") == "nnunet":
        return {k: epoch for k in ("loss", "validation", "learning_rate")}
    if config.get("template") == "mvfa":
        return {"loss": ("steps", 1)}
    try:
        every = max(1, int(config.get("logging_steps") or DEFAULT_LOGGING_STEPS))
    except (TypeError, ValueError):
        every = DEFAULT_LOGGING_STEPS
    steps = ("steps", every)
    return {"loss": steps, "validation": epoch, "learning_rate": steps, "gradient_norm": steps}


def _due(unit: str, n: int) -> str:
    if unit == "epochs":
        return "after the first epoch" if n == 1 else f"after {n} epochs"
    return "after the first step" if n == 1 else f"after {n:,} steps"


def _reached(due: tuple[str, int], step: int, epoch: float) -> bool:
    """Whether training got far enough that the first point was due."""
    unit, n = due
    return epoch >= n if unit == "epochs" else step >= n


def missing_note(key: str, due: tuple[str, int], finished: bool, step: int = 0,
                 epoch: float = 0.0) -> str:
    """The sentence shown instead of an empty panel: when its first point is due (running),
    or why none was logged (finished)."""
    what, (unit, n) = PANELS[key][2], due
    when = _due(unit, n)
    if not finished:
        now = f" (now at step {step:,})" if step and unit == "steps" else ""
        return f"No {what} points yet: the first are logged {when}{now}."
    if _reached(due, step, epoch):
        return f"No {what} points were logged in this run."
    ended = f"at step {step:,}" if step else "before its first step"
    return (f"No {what} points were logged: training ended {ended}, before the first was due "
            f"({when}).")


def training_panels(curves: JobCurves, config: dict | None = None, finished: bool = False,
                    step: int = 0, epoch: float = 0.0) -> list[Panel]:
    """The panels to show, in order: each with its figure, or with a note when it has no points
    yet. A panel the template does not log, or whose companions (logged at the same moments)
    have points while it has none although its first point was due, is left out rather than
    explained. ``step``, ``epoch``: how far training got (for the notes)."""
    schedule = logging_schedule(config or {})
    groups = chart_groups(curves.series)
    panels, notes = [], []
    for key, (title, y_title, _) in PANELS.items():
        figure = line_figure(curves, groups[key], title, y_title,
                             validation=key == "validation",
                             scientific=key == "learning_rate")
        if figure is not None:
            panels.append(Panel(key, title, figure))
        elif key in schedule:
            notes.append(key)
    drawn = {p.key for p in panels}
    for key in notes:
        due = schedule[key]
        if _reached(due, step, epoch) and any(schedule.get(k) == due for k in drawn):
            continue  # due with a drawn panel's points, yet none: this template skips it
        panels.append(Panel(key, PANELS[key][0], None,
                            missing_note(key, due, finished, step, epoch)))
    if groups["other"]:
        figure = line_figure(curves, groups["other"], OTHER_TITLE, "Value")
        if figure is not None:
            panels.append(Panel("other", OTHER_TITLE, figure))
    return panels
