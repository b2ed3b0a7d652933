"""Models: every trained model, its test results with confidence intervals, its model card, a
try-it-on-an-image panel and the files to download."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import RESEARCH_ONLY
from core.jobs.workspace import JobWorkspace
from core.viewing.inference import (ACCEPTED_TEXT, MAX_UPLOAD_MB, TEMPLATES, InferenceError,
                                  load_model, model_files_missing, model_template,
                                  predict_upload, preprocessing_config, training_images)
from core.viewing.model_views import (TASK_NAMES, detection_curves, detection_rows, diagnosis_roc,
                              downloads, headline, metric_table, report_comparison,
                              report_samples, segmentation_rows)
from pages.ui_common import (context, fmt_duration, fmt_num, fmt_when, md_escape, metrics_row,
                             read_json)

settings, store = context()
PLOT_CONFIG = {"displaylogo": False}
COLOURS = ["#e4572e", "#29a3d6", "#76b041", "#ffc914", "#9b5de5", "#f15bb5", "#00bbf9",
           "#8d6e63"]
COLOUR_NAMES = ["red", "blue", "green", "yellow", "purple", "pink", "cyan", "brown"]

st.title("Models")
st.caption("Models built by M3Builder. Test results come from M3Builder's own evaluator on a "
           "held-out test set that shares no patient with the training data.")

models = store.models()
if not models:
    st.info("No models yet. A model appears here when a job finishes training: ask for one on "
            "the Build a model page.", icon=":material/info:")
    st.page_link("pages/chat.py", label="Build a model", icon=":material/chat:")
    st.stop()


def workspace_of(model: dict) -> Path:
    job = store.job(model["job_id"]) or {}
    if job.get("workspace"):
        return Path(job["workspace"])
    if model.get("card_path"):
        return Path(model["card_path"]).parent
    return Path(model["path"]).parent.parent  # <job>/Logout/model


def template_of(model: dict, workspace: Path) -> str:
    found = model_template(workspace)
    return found or (model["task"] if model["task"] in TEMPLATES else "")


def file_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:,.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MB"


def ci_text(ci) -> str:
    return f"{fmt_num(ci[0])} – {fmt_num(ci[1])}" if ci and len(ci) == 2 else "n/a"


# ------------------------------------------------------------------------------ overview
def overview_row(model: dict) -> dict:
    ws = workspace_of(model)
    kind = template_of(model, ws)
    result = read_json(JobWorkspace(ws).report)
    if not result.get("metrics"):  # no report.json left: the metrics stored with the model
        try:
            result = {"metrics": json.loads(model["metrics"] or "{}")}
        except ValueError:
            result = {}
    top = headline(result, kind)
    return {"Model": model["name"],
            "Task": TASK_NAMES.get(kind, (model["task"] or "").replace("_", " ")),
            "Dataset": model["dataset"], "Main metric": top["name"], "Value": top["value"],
            "95% CI": ci_text(top["ci"]), "Created": fmt_when(model["created_at"]),
            "Job": model["job_id"]}


rows = [overview_row(m) for m in models]
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
             column_config={"Value": st.column_config.NumberColumn(format="%.3f")})

by_id = {m["id"]: m for m in models}
chosen = by_id[st.selectbox("Model", list(by_id),
                            format_func=lambda i: f"{by_id[i]['name']} · "
                                                  f"{fmt_when(by_id[i]['created_at'])}")]
job = store.job(chosen["job_id"]) or {}
workspace = workspace_of(chosen)
template = template_of(chosen, workspace)
report = read_json(workspace / "report.json")
training = report.get("training", {})

st.subheader(chosen["name"])
facts = [TASK_NAMES.get(template, template or "unknown task"),
         f"Dataset: {md_escape(chosen['dataset'])}", f"{report.get('num_test', '?')} test cases"]
if training:
    facts += [f"{md_escape(training.get('network'))} · "
              f"{training.get('num_parameters', 0):,} parameters",
              f"{training.get('epochs_run') or 0:.0f} epochs on {training.get('device')} in "
              f"{fmt_duration(training.get('seconds'))}"]
st.caption(" · ".join(facts))
if job.get("request"):
    st.markdown(f"**Request:** {md_escape(job['request'])}")
st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")

results_tab, card_tab, try_tab, files_tab = st.tabs(
    ["Test results", "Model card", "Try it on an image", "Downloads"])


# ------------------------------------------------------------------------------ charts
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


def roc_figure(curves: dict) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="Chance",
                               line=dict(dash="dash", color="gray")))
    for i, (name, c) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=c["fpr"], y=c["tpr"], mode="lines", line_shape="hv",
                                 line=dict(color=COLOURS[i % len(COLOURS)]),
                                 name=f"{name} (AUC {c['auc']:.3f})"))
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


# ------------------------------------------------------------------------------ results
def show_diagnosis(report: dict) -> None:
    cm = report.get("confusion_matrix") or {}
    cm_col, class_col = st.columns([3, 2], gap="large")
    with cm_col:
        if cm.get("labels") and cm.get("matrix"):
            st.plotly_chart(confusion_figure(cm["labels"], cm["matrix"]), width="stretch",
                            config=PLOT_CONFIG)
        elif report.get("multi_label"):
            st.caption("Multi-label model: each finding is decided on its own (probability "
                       "≥ 0.5), so there is no single confusion matrix; see the per-finding "
                       "table and ROC curves.")
    with class_col:
        st.markdown("**Per class**")
        per_class = pd.DataFrame([
            {"Class": name, **{k.replace("_", " ").capitalize(): (v if k == "support" else
                                                                   (None if v != v else v))
                               for k, v in values.items() if isinstance(v, (int, float))}}
            for name, values in (report.get("per_class") or {}).items()
            if isinstance(values, dict)])
        if per_class.empty:
            st.caption("No per-class results in the report.")
        else:
            st.dataframe(per_class, hide_index=True, width="stretch")
            st.caption("Sensitivity and specificity treat each class in turn as 'positive' "
                       "against all others.")
    curves = diagnosis_roc(workspace)
    if curves:
        st.plotly_chart(roc_figure(curves), width="stretch", config=PLOT_CONFIG)
        st.caption("From the test-set probabilities the model wrote (Logout/predictions.json) "
                   "and the true labels in the test index. "
                   + ("Two classes: the curve treats the second class as positive."
                      if len(curves) == 1 and len(cm.get("labels") or []) == 2 else
                      "One curve per class against all others."))
    else:
        st.caption("No ROC curve: the test predictions (Logout/predictions.json) are not "
                   "available for this model.")


def show_segmentation(report: dict) -> None:
    rows = segmentation_rows(report)
    if not rows:
        st.caption("No per-class results in the report.")
        return
    st.markdown("**Per class** (mean over test cases; 95% bootstrap CI over cases)")
    st.dataframe(pd.DataFrame([{"Class": r["Class"], "Dice": r["Dice"],
                                "Dice 95% CI": ci_text(r["Dice CI"]),
                                "HD95 (mm)": r["HD95 (mm)"],
                                "HD95 95% CI": ci_text(r["HD95 CI"])} for r in rows]),
                 hide_index=True, width="stretch",
                 column_config={"Dice": st.column_config.NumberColumn(format="%.3f"),
                                "HD95 (mm)": st.column_config.NumberColumn(format="%.2f")})
    dice_col, hd_col = st.columns(2, gap="large")
    with dice_col:
        st.plotly_chart(bar_figure(rows, "Dice", "Dice CI", "Dice per class", "Dice (higher "
                                   "is better)"), width="stretch", config=PLOT_CONFIG)
    with hd_col:
        st.plotly_chart(bar_figure(rows, "HD95 (mm)", "HD95 CI", "HD95 per class",
                                   "HD95 in mm (lower is better)"), width="stretch",
                        config=PLOT_CONFIG)
    st.caption("HD95: the 95th percentile of the distances between predicted and true "
               "boundaries, in mm (pixels for images without a spacing). A class missed "
               "entirely counts as the image diagonal.")


def show_detection(report: dict) -> None:
    st.caption(f"{report.get('num_test', '?')} test images, {report.get('num_test_abnormal', '?')}"
               f" with boxes, {report.get('num_gt_boxes', '?')} true boxes; a predicted box "
               f"counts as found when it overlaps a true box with IoU ≥ "
               f"{report.get('iou_threshold', 0.5):g}.")
    curves = detection_curves(report)
    if curves:
        st.plotly_chart(pr_figure(curves, float(report.get("iou_threshold", 0.5))),
                        width="stretch", config=PLOT_CONFIG)
    else:
        st.caption("No precision–recall curve: no class has both true boxes in the test set "
                   "and boxes predicted by the model.")
    rows = detection_rows(report)
    if rows:
        st.markdown("**Per class**")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"AP@0.5": st.column_config.NumberColumn(format="%.3f")})


def show_report_generation(report: dict) -> None:
    comparison = report_comparison(report)
    baseline = report.get("baseline") or {}
    chart_col, text_col = st.columns([3, 2], gap="large")
    with chart_col:
        if comparison:
            st.plotly_chart(comparison_figure(comparison), width="stretch", config=PLOT_CONFIG)
    with text_col:
        st.markdown("**Baseline:** always answer the most common training report "
                    f"({baseline.get('train_count', '?')} of {baseline.get('num_train', '?')} "
                    "training reports):")
        st.text(baseline.get("report") or "(none)")
        gain = (report.get("metrics") or {}).get("rouge_l", 0) - \
            (report.get("metrics") or {}).get("baseline_rouge_l", 0)
        verdict = "beats" if gain > 0 else "does not beat"
        st.markdown(f"The model **{verdict}** the baseline on ROUGE-L "
                    f"({gain:+.3f}; 95% CI of the gain "
                    f"{ci_text((report.get('ci95') or {}).get('rouge_l_gain'))}).")
    samples = report_samples(report)
    if samples:
        st.markdown("**Generated reports next to their references (test set)**")
        st.table(pd.DataFrame(samples).set_index("Image"))


SECTIONS = {"diagnosis": show_diagnosis, "segmentation": show_segmentation,
            "detection": show_detection, "report_generation": show_report_generation}

with results_tab:
    if not report:
        st.warning("The evaluation report for this model is missing, so no detailed results "
                   "can be shown.", icon=":material/warning:")
    else:
        st.markdown("**Test-set performance**")
        metrics_row(report.get("metrics", {}), report.get("ci95", {}))
        show = SECTIONS.get(template or report.get("task", ""))
        if show:
            show(report)
        with st.expander("All test metrics with 95% confidence intervals"):
            st.dataframe(pd.DataFrame(metric_table(report)), hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%.3f") for c in
                                        ("Value", "95% CI low", "95% CI high")})
            st.caption(f"Scored by `{report.get('evaluator', 'the system evaluator')}` on "
                       f"{report.get('num_test', '?')} test cases; intervals from 1,000 "
                       "bootstrap resamples of the test cases (fewer for reports).")


# ------------------------------------------------------------------------------ model card
card_path = Path(chosen["card_path"] or workspace / "model_card.md")
with card_tab:
    if card_path.is_file():
        card = card_path.read_text(encoding="utf-8")
        if RESEARCH_ONLY not in card:
            st.warning(RESEARCH_ONLY, icon=":material/gpp_maybe:")
        # demote headings so the card sits under the page's own headings
        st.markdown(re.sub(r"^(#{1,4}) ", r"##\1 ", card, flags=re.MULTILINE))
    else:
        st.caption(f"No model card at `{card_path}`.")


# ------------------------------------------------------------------------------ try it
@st.cache_resource(max_entries=2, show_spinner="Loading the model…")
def cached_model(path: str, stamp: float):
    return load_model(path)


def weights_stamp(ws: Path) -> float:
    files = [p for p in JobWorkspace(ws).model_dir.glob("*") if p.is_file()]
    return max((p.stat().st_mtime for p in files), default=0.0)


def slice_index(key: str, depth: int, default: int) -> int:
    if depth <= 1:
        return 0
    return st.slider("Slice", 0, depth - 1, default, key=key,
                     help="The volume is shown one slice (last axis) at a time.")


def image_figure(image2d: np.ndarray, title: str) -> go.Figure:
    """A gray image, rows downwards, square pixels; ``image2d`` is (x, y) as MONAI reads it."""
    fig = go.Figure(go.Heatmap(z=image2d.T, colorscale="gray", showscale=False,
                               hovertemplate="x %{x}, y %{y}: %{z:.1f}<extra></extra>"))
    return layout(fig, title, height=420, yaxis=dict(autorange="reversed", scaleanchor="x",
                                                     visible=False),
                  xaxis=dict(visible=False, constrain="domain"))


def show_probabilities(pred) -> None:
    names = list(pred.probabilities)
    values = [pred.probabilities[n] for n in names]
    best = int(np.argmax(values))
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h",
                           marker_color=[COLOURS[1] if i == best else "#9e9e9e"
                                         for i in range(len(names))],
                           text=[f"{v:.3f}" for v in values], textposition="auto"))
    layout(fig, "Class probabilities", height=120 + 40 * len(names),
           xaxis=dict(range=[0, 1], title="Probability"), yaxis=dict(autorange="reversed"))
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG)
    if pred.multi_label:
        found = [n for n, v in pred.probabilities.items() if v >= 0.5]
        st.markdown("**Findings at probability ≥ 0.5:** " + (", ".join(map(md_escape, found))
                                                              if found else "none"))
        st.caption("Multi-label model: one independent probability per finding.")
    else:
        st.markdown(f"**Most likely class:** {md_escape(names[best])} ({values[best]:.3f})")
        st.caption("The probabilities sum to 1 over the classes the model knows; an image of "
                   "something else still gets one of them.")


def show_mask(pred, key: str) -> None:
    mask, image = pred.mask, pred.image
    depth = image.shape[2] if image.ndim == 3 else 1
    default = int(np.argmax((mask > 0).reshape(-1, depth).sum(0))) if depth > 1 else 0
    k = slice_index(f"{key}-slice", depth, default)
    img2d, mask2d = (image[..., k], mask[..., k]) if depth > 1 else (image, mask)
    image_col, mask_col = st.columns(2, gap="large")
    with image_col:
        st.plotly_chart(image_figure(img2d, "Uploaded image"), width="stretch",
                        config=PLOT_CONFIG)
    fig = image_figure(img2d, "Predicted mask over the image")
    for c, name in enumerate(pred.classes, start=1):
        layer = np.where(mask2d.T == c, 1.0, np.nan)
        if np.isfinite(layer).any():
            colour = COLOURS[(c - 1) % len(COLOURS)]
            fig.add_trace(go.Heatmap(z=layer, colorscale=[[0, colour], [1, colour]],
                                     showscale=False, opacity=0.45, name=name,
                                     hovertemplate=f"{name}<extra></extra>"))
    with mask_col:
        st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG)
    voxel = float(np.prod(pred.spacing)) if pred.spacing and len(pred.spacing) == mask.ndim \
        else None
    unit = ("ml" if mask.ndim == 3 else "mm²") if voxel else ("voxels" if mask.ndim == 3
                                                               else "pixels")
    scale = (voxel / 1000.0 if mask.ndim == 3 else voxel) if voxel else 1.0
    st.dataframe(pd.DataFrame([{"Class": name,
                                "Colour": COLOUR_NAMES[(c - 1) % len(COLOUR_NAMES)],
                                f"Size ({unit})": round(float((mask == c).sum()) * scale, 2)}
                               for c, name in enumerate(pred.classes, start=1)]),
                 hide_index=True, width="stretch")


def show_boxes(pred, key: str) -> None:
    image = pred.image
    dims = image.ndim
    threshold = st.slider("Show boxes with a score of at least", 0.0, 1.0, 0.5, 0.05,
                          key=f"{key}-score")
    kept = [b for b in pred.boxes if b["score"] >= threshold]
    depth = image.shape[2] if dims == 3 else 1
    default = int(round((kept[0]["box"][2] + kept[0]["box"][5]) / 2)) if kept and dims == 3 \
        else depth // 2
    k = slice_index(f"{key}-slice", depth, min(max(default, 0), depth - 1))
    fig = image_figure(image[..., k] if dims == 3 else image, "Detected boxes")
    for i, b in enumerate(kept):
        box = b["box"]
        if dims == 3 and not box[2] <= k + 0.5 <= box[5]:
            continue
        x0, y0 = box[0], box[1]
        x1, y1 = (box[3], box[4]) if dims == 3 else (box[2], box[3])
        colour = COLOURS[pred.classes.index(b["label"]) % len(COLOURS)] \
            if b["label"] in pred.classes else COLOURS[0]
        fig.add_shape(type="rect", x0=x0 - 0.5, y0=y0 - 0.5, x1=x1 - 0.5, y1=y1 - 0.5,
                      line=dict(color=colour, width=2))
        fig.add_annotation(x=x0 - 0.5, y=y0 - 0.5, text=f"{b['label']} {b['score']:.2f}",
                           showarrow=False, xanchor="left", yanchor="bottom",
                           font=dict(color=colour, size=11))
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG)
    if kept:
        st.dataframe(pd.DataFrame([{"Label": b["label"], "Score": round(b["score"], 3),
                                    "Box (corners, pixels)": ", ".join(f"{v:.0f}"
                                                                       for v in b["box"])}
                                   for b in kept]), hide_index=True, width="stretch")
    else:
        st.caption(f"No box scored {threshold:.2f} or more ({len(pred.boxes)} below it); "
                   "lower the threshold to see weaker candidates.")


def show_prediction(pred, key: str) -> None:
    if pred.template == "diagnosis":
        image_col, result_col = st.columns(2, gap="large")
        with image_col:
            img = pred.image
            st.plotly_chart(image_figure(img[..., img.shape[2] // 2] if img.ndim == 3 else img,
                                         "Uploaded image" + (" (middle slice)" if img.ndim == 3
                                                             else "")),
                            width="stretch", config=PLOT_CONFIG)
        with result_col:
            show_probabilities(pred)
    elif pred.template == "segmentation":
        show_mask(pred, key)
    elif pred.template == "detection":
        show_boxes(pred, key)
    else:
        image_col, text_col = st.columns(2, gap="large")
        with image_col:
            img = pred.image
            st.plotly_chart(image_figure(img[..., img.shape[2] // 2] if img.ndim == 3 else img,
                                         "Uploaded image"), width="stretch", config=PLOT_CONFIG)
        with text_col:
            st.markdown("**Generated report**")
            st.text(pred.text or "(the model generated no text)")
    st.caption(RESEARCH_ONLY)


with try_tab:
    problem = model_files_missing(workspace)
    if problem:
        st.info(f"This model cannot be run here: {problem}.", icon=":material/info:")
    else:
        config = preprocessing_config(workspace)
        st.caption("Run the model on one image of your own. It is preprocessed exactly as the "
                   "training images were (the model's own dataloader and the settings below), "
                   "kept only for the prediction in a temporary folder of the M3Builder home, "
                   "and never sent anywhere.")
        trained_on = training_images(workspace)
        if trained_on:
            st.markdown(f"**Trained on:** {md_escape(trained_on)}. Upload the same kind of "
                        "image: the model knows nothing else.")
        with st.expander("Preprocessing used (the model's own)"):
            st.json(config)
        key = f"upload-{chosen['id']}"
        uploaded = st.file_uploader(
            f"Image ({ACCEPTED_TEXT}; several files only as the DICOM slices of one series)",
            accept_multiple_files=True, key=key, max_upload_size=MAX_UPLOAD_MB,
            help=f"At most {MAX_UPLOAD_MB} MB.")
        if uploaded:
            files = [(f.name, f.getvalue()) for f in uploaded]
            signature = (chosen["id"], tuple((f.name, f.size, f.file_id) for f in uploaded))
            last = st.session_state.get("models-last-prediction")
            if last and last[0] == signature:
                outcome = last[1]
            else:
                try:
                    model = cached_model(str(workspace), weights_stamp(workspace))
                    with st.spinner("Running the model…"):
                        outcome = predict_upload(model, settings.home, files)
                except InferenceError as exc:
                    outcome = exc
                st.session_state["models-last-prediction"] = (signature, outcome)
            if isinstance(outcome, InferenceError):
                st.error(f"{outcome}", icon=":material/error:")
            else:
                show_prediction(outcome, key)


# ------------------------------------------------------------------------------ downloads
with files_tab:
    st.markdown("**Saved model**")
    st.code(chosen["path"], language=None)
    offered = downloads(workspace)
    if not offered:
        st.caption(f"No files of this model are left in its job folder `{workspace}`.")
    if not any(d["label"] in ("TorchScript model", "ONNX model") for d in offered) and \
            template in ("detection", "report_generation"):
        st.caption("Exports to TorchScript/ONNX are not made for detection and report models; "
                   "the weights and the configuration needed to rebuild the network are "
                   "offered instead.")
    exports = training.get("exports") or {}
    for d in offered:
        path = Path(d["path"])
        fmt = {"TorchScript model": "torchscript", "ONNX model": "onnx"}.get(d["label"])
        note = ""
        if fmt and exports.get(fmt, {}).get("verified"):
            note = (f"Verified: reloaded and compared with PyTorch, largest difference "
                    f"{exports[fmt]['max_abs_diff']:.1e}.")
        st.download_button(f"{d['label']} ({file_size(path.stat().st_size)})",
                           data=lambda p=path: p.read_bytes(), file_name=d["file_name"],
                           mime=d["mime"], icon=":material/download:", on_click="ignore",
                           key=f"download-{chosen['id']}-{d['file_name']}")
        if note:
            st.caption(note)
    if any(d["label"] in ("TorchScript model", "ONNX model") for d in offered):
        loader = preprocessing_config(workspace)["dataloader"]
        size = loader.get("ROI_SIZE") if template == "segmentation" else loader.get("IMAGE_SIZE")
        shape = ", ".join(["batch", str(loader.get("IN_CHANNELS", 1)), *map(str, size or [])])
        st.caption(f"The exports take `pixel_values` of shape ({shape}), preprocessed as the "
                   "dataloader configuration says, and return class `probabilities`"
                   + (" per pixel for one patch: run them with sliding-window inference over a "
                      "whole image." if template == "segmentation" else "."))
