"""The Models page's Plotly figures (no Streamlit calls): confusion matrix, ROC and
precision-recall curves, per-class bars with confidence intervals, the report model against
its baseline, and a gray image for the try-it panel. Not a page itself (app.py lists the
pages)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

PLOT_CONFIG = {"displaylogo": False}
COLOURS = ["#e4572e", "#29a3d6", "#76b041", "#ffc914", "#9b5de5", "#f15bb5", "#00bbf9",
           "#8d6e63"]
COLOUR_NAMES = ["red", "blue", "green", "yellow", "purple", "pink", "cyan", "brown"]


def layout(fig: go.Figure, title: str, height: int = 380, **kwargs) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=50, b=10), **kwargs)
    return fig


def confusion_figure(labels: list[str], matrix: list[list[int]]) -> go.Figure:
    fig = go.Figure(go.Heatmap(
        z=matrix, x=labels, y=labels, colorscale="Blues", showscale=False,
        text=matrix, texttemplate="%{text}", textfont={"size": 16},
        hovertemplate="True %{y}, predicted %{x}: %{z} images<extra></extra>"))
    return layout(fig, "Confusion matrix (test set)", xaxis_title="Predicted class",
                  yaxis_title="True class", yaxis=dict(autorange="reversed"))


def roc_figure(curves: dict, marker: dict | None = None) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="Chance",
                               line=dict(dash="dash", color="gray")))
    for i, (name, c) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=c["fpr"], y=c["tpr"], mode="lines", line_shape="hv",
                                 line=dict(color=COLOURS[i % len(COLOURS)]),
                                 name=f"{name} (AUC {c['auc']:.3f})"))
    if marker:
        fig.add_trace(go.Scatter(
            x=[marker["fpr"]], y=[marker["tpr"]], mode="markers", name=(
                f"Operating point (threshold {marker['threshold']:.3f})"),
            marker=dict(size=13, symbol="x", color="black"),
            hovertemplate="sensitivity %{y:.3f}, specificity " f"{1 - marker['fpr']:.3f}"
                          "<extra></extra>"))
    return layout(fig, "ROC curve (test set)", xaxis_title="False positive rate "
                  "(1 − specificity)", yaxis_title="True positive rate (sensitivity)",
                  xaxis=dict(range=[0, 1]), yaxis=dict(range=[0, 1.02]))


def error_bars(values: list, cis: list) -> dict:
    upper = [(c[1] - v) if c and v is not None else 0 for v, c in zip(values, cis)]
    lower = [(v - c[0]) if c and v is not None else 0 for v, c in zip(values, cis)]
    return dict(type="data", symmetric=False, array=upper, arrayminus=lower)


def bar_figure(rows: list[dict], value: str, ci: str, title: str, axis: str) -> go.Figure:
    names, values = [r["Class"] for r in rows], [r[value] for r in rows]
    fig = go.Figure(go.Bar(x=names, y=values, error_y=error_bars(values, [r[ci] for r in rows]),
                           marker_color=[COLOURS[i % len(COLOURS)] for i in range(len(names))],
                           hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    return layout(fig, title, height=340, yaxis_title=axis, xaxis_title="Class")


def pr_figure(curves: dict, iou: float) -> go.Figure:
    fig = go.Figure()
    for i, (name, c) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=c["recall"], y=c["precision"], mode="lines+markers",
                                 marker=dict(size=4), line=dict(color=COLOURS[i % len(COLOURS)]),
                                 name=name))
    return layout(fig, f"Precision–recall at IoU {iou:g} (test set)", xaxis_title="Recall",
                  yaxis_title="Precision", xaxis=dict(range=[0, 1.02]),
                  yaxis=dict(range=[0, 1.02]))


def comparison_figure(rows: list[dict]) -> go.Figure:
    fig = go.Figure()
    for who, colour in (("Model", COLOURS[1]), ("Baseline", "#9e9e9e")):
        part = [r for r in rows if r["Who"] == who]
        fig.add_trace(go.Bar(x=[r["Metric"] for r in part], y=[r["Value"] for r in part],
                             name=who if who == "Model" else "Most common training report",
                             marker_color=colour,
                             error_y=error_bars([r["Value"] for r in part],
                                                [r["CI"] for r in part])))
    return layout(fig, "Model against the baseline (test set)", height=340, barmode="group",
                  yaxis_title="Score")


def image_figure(image2d: np.ndarray, title: str) -> go.Figure:
    """A gray image, rows downwards, square pixels; ``image2d`` is (x, y) as MONAI reads it."""
    fig = go.Figure(go.Heatmap(z=image2d.T, colorscale="gray", showscale=False,
                               hovertemplate="x %{x}, y %{y}: %{z:.1f}<extra></extra>"))
    return layout(fig, title, height=420, yaxis=dict(autorange="reversed", scaleanchor="x",
                                                     visible=False),
                  xaxis=dict(visible=False, constrain="domain"))


def probabilities_figure(names: list[str], values: list[float], best: int) -> go.Figure:
    """Horizontal bars of the class probabilities, the most likely class highlighted."""
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h",
                           marker_color=[COLOURS[1] if i == best else "#9e9e9e"
                                         for i in range(len(names))],
                           text=[f"{v:.3f}" for v in values], textposition="auto"))
    return layout(fig, "Class probabilities", height=120 + 40 * len(names),
                  xaxis=dict(range=[0, 1], title="Probability"),
                  yaxis=dict(autorange="reversed"))


def mask_figure(image2d: np.ndarray, mask2d: np.ndarray, classes: list[str]) -> go.Figure:
    """The image with each predicted class (label 1..N) over it in its colour."""
    fig = image_figure(image2d, "Predicted mask over the image")
    for c, name in enumerate(classes, start=1):
        layer = np.where(mask2d.T == c, 1.0, np.nan)
        if np.isfinite(layer).any():
            colour = COLOURS[(c - 1) % len(COLOURS)]
            fig.add_trace(go.Heatmap(z=layer, colorscale=[[0, colour], [1, colour]],
                                     showscale=False, opacity=0.45, name=name,
                                     hovertemplate=f"{name}<extra></extra>"))
    return fig


def boxes_figure(image2d: np.ndarray, corners: list, classes: list[str]) -> go.Figure:
    """The image with boxes drawn: ``corners`` as ``prediction_views.box_corners_on_slice``
    gives them, each labelled with its class and score."""
    fig = image_figure(image2d, "Detected boxes")
    for b, (x0, y0, x1, y1) in corners:
        colour = COLOURS[classes.index(b["label"]) % len(COLOURS)] \
            if b["label"] in classes else COLOURS[0]
        fig.add_shape(type="rect", x0=x0 - 0.5, y0=y0 - 0.5, x1=x1 - 0.5, y1=y1 - 0.5,
                      line=dict(color=colour, width=2))
        fig.add_annotation(x=x0 - 0.5, y=y0 - 0.5, text=f"{b['label']} {b['score']:.2f}",
                           showarrow=False, xanchor="left", yanchor="bottom",
                           font=dict(color=colour, size=11))
    return fig


def reliability_figure(before: list[dict], after: list[dict], multi_label: bool) -> go.Figure:
    """Reliability diagram: observed frequency against stated confidence per bin, before and
    after calibration; the diagonal is a perfectly calibrated model."""
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="Perfect calibration",
                               line=dict(dash="dash", color="gray")))
    for rows, name, colour in ((before, "Before calibration", COLOURS[0]),
                               (after, "After calibration", COLOURS[1])):
        if rows:
            fig.add_trace(go.Scatter(
                x=[r["confidence"] for r in rows], y=[r["accuracy"] for r in rows],
                mode="lines+markers", name=name, line=dict(color=colour),
                marker=dict(size=[6 + min(14, r["count"] ** 0.5) for r in rows]),
                customdata=[r["count"] for r in rows],
                hovertemplate="confidence %{x:.2f}, observed %{y:.2f} (%{customdata} "
                              "cases)<extra></extra>"))
    what = "label probability" if multi_label else "confidence (top class)"
    return layout(fig, "Reliability diagram (test set)", height=360,
                  xaxis_title=f"Stated {what}", yaxis_title="Observed frequency",
                  xaxis=dict(range=[0, 1]), yaxis=dict(range=[0, 1.02]),
                  legend=dict(orientation="h", y=-0.25))


# ------------------------------------------------------------------------------ two models
PAIR_DASH = ("solid", "dash")


def roc_pair_figure(pair: dict[str, dict]) -> go.Figure:
    """ROC curves of two models over each other: one colour per class, solid for the first
    model, dashed for the second."""
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="Chance",
                               line=dict(dash="dot", color="gray")))
    classes = sorted({c for curves in pair.values() for c in curves})
    for m, (model, curves) in enumerate(pair.items()):
        for name, c in curves.items():
            fig.add_trace(go.Scatter(
                x=c["fpr"], y=c["tpr"], mode="lines+markers", line_shape="hv",
                marker=dict(size=4), name=f"{model} · {name} (AUC {c['auc']:.3f})",
                line=dict(color=COLOURS[classes.index(name) % len(COLOURS)],
                          dash=PAIR_DASH[m % 2])))
    return layout(fig, "ROC curves of both models (test set)", height=420,
                  xaxis_title="False positive rate (1 − specificity)",
                  yaxis_title="True positive rate (sensitivity)", xaxis=dict(range=[0, 1]),
                  yaxis=dict(range=[0, 1.02]), legend=dict(orientation="h", y=-0.3))


def bars_pair_figure(pair: dict[str, list[dict]], value: str, ci: str, title: str,
                     axis: str) -> go.Figure:
    """Per-class values of two models side by side with their 95% CIs."""
    fig = go.Figure()
    for m, (model, rows) in enumerate(pair.items()):
        values = [r[value] for r in rows]
        fig.add_trace(go.Bar(x=[r["Class"] for r in rows], y=values, name=model,
                             marker_color=COLOURS[1] if m == 0 else COLOURS[0],
                             error_y=error_bars(values, [r[ci] for r in rows]),
                             hovertemplate="%{x}: %{y:.3f}<extra>" + model + "</extra>"))
    return layout(fig, title, height=360, barmode="group", yaxis_title=axis,
                  xaxis_title="Class", legend=dict(orientation="h", y=-0.25))


def pr_pair_figure(pair: dict[str, dict], iou: float) -> go.Figure:
    """Precision-recall curves of two detection models (solid first, dashed second)."""
    fig = go.Figure()
    classes = sorted({c for curves in pair.values() for c in curves})
    for m, (model, curves) in enumerate(pair.items()):
        for name, c in curves.items():
            fig.add_trace(go.Scatter(x=c["recall"], y=c["precision"], mode="lines+markers",
                                     marker=dict(size=4), name=f"{model} · {name}",
                                     line=dict(color=COLOURS[classes.index(name)
                                                             % len(COLOURS)],
                                               dash=PAIR_DASH[m % 2])))
    return layout(fig, f"Precision–recall of both models at IoU {iou:g} (test set)",
                  height=400, xaxis_title="Recall", yaxis_title="Precision",
                  xaxis=dict(range=[0, 1.02]), yaxis=dict(range=[0, 1.02]),
                  legend=dict(orientation="h", y=-0.3))
