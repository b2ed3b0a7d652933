"""The Models page's Try it on an image tab: upload images, run the model on each (the model
cached per job folder and weights) and show its class probabilities, mask, boxes or report.
Several files are several images, one result each (the DICOM slices of one series are one
volume for a 3D model); a file added or removed reruns only what changed.
Not a page itself (app.py lists the pages)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from core import RESEARCH_ONLY
from core.viewing.decision_views import decision_for
from core.viewing.inference import (MAX_IMAGES, MAX_UPLOAD_MB, accepted_text, group_uploads,
                                    predict_upload)
from core.viewing.model_loading import (InferenceError, load_model, model_dims,
                                        model_files_missing, preprocessing_config,
                                        training_images, weights_stamp)
from core.viewing.prediction_views import (box_corners_on_slice, boxes_at_least, busiest_slice,
                                           depth_of, first_box_slice, mask_sizes, middle_slice)
from pages.models_charts import (COLOUR_NAMES, PLOT_CONFIG, boxes_figure, image_figure,
                                 mask_figure, probabilities_figure)
from pages.ui_common import md_escape
from pages.viewer_widget import show_arrays, viewer_available


@st.cache_resource(max_entries=2, show_spinner="Loading the model…")
def cached_model(path: str, stamp: float):
    return load_model(path)


def slice_index(key: str, depth: int, default: int) -> int:
    if depth <= 1:
        return 0
    return st.slider("Slice", 0, depth - 1, default, key=key,
                     help="The volume is shown one slice (last axis) at a time.")


def show_probabilities(pred) -> None:
    names = list(pred.probabilities)
    values = [pred.probabilities[n] for n in names]
    best = int(np.argmax(values))
    st.plotly_chart(probabilities_figure(names, values, best), width="stretch",
                    config=PLOT_CONFIG)
    decided = decision_for(pred.probabilities, pred.decision, pred.multi_label)
    if pred.multi_label:
        found = decided["classes"]
        st.markdown(f"**Findings ({md_escape(decided['why'])}):** "
                    + (", ".join(map(md_escape, found)) if found else "none"))
        st.caption("Multi-label model: one independent, calibrated probability per finding.")
    else:
        st.markdown(f"**Model's decision:** {md_escape(decided['classes'][0])} "
                    f"({md_escape(decided['why'])})")
        st.caption("Calibrated probabilities; they sum to 1 over the classes the model knows, "
                   "so an image of something else still gets one of them. The threshold was "
                   "chosen on validation images (see Test results).")


def interactive(pred, key: str, prediction=None) -> bool:
    """The uploaded image (and the predicted mask) in the interactive viewer, when it is
    installed and wanted; False when the static figures are to be drawn instead."""
    if not viewer_available() or not st.toggle(
            "Interactive viewer", value=True, key=f"{key}-viewer",
            help="Three views for volumes in patient orientation, zoom, pan, window/level, "
                 "each predicted label on or off, distances and ROI statistics. Off: static "
                 "slices."):
        return False
    return show_arrays(pred.image, key=f"{key}-niivue", prediction=prediction,
                       spacing=pred.spacing, class_names=pred.classes,
                       name="uploaded image")


def show_mask(pred, key: str) -> None:
    mask, image = pred.mask, pred.image
    if interactive(pred, key, prediction=mask):
        show_mask_sizes(pred)
        return
    depth = depth_of(image)
    k = slice_index(f"{key}-slice", depth, busiest_slice(mask, depth))
    img2d, mask2d = (image[..., k], mask[..., k]) if depth > 1 else (image, mask)
    image_col, mask_col = st.columns(2, gap="large")
    with image_col:
        st.plotly_chart(image_figure(img2d, "Uploaded image"), width="stretch",
                        config=PLOT_CONFIG)
    fig = mask_figure(img2d, mask2d, pred.classes)
    with mask_col:
        st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG)
    show_mask_sizes(pred)


def show_mask_sizes(pred) -> None:
    unit, sizes = mask_sizes(pred.mask, pred.spacing, len(pred.classes))
    st.dataframe(pd.DataFrame([{"Class": name,
                                "Colour": COLOUR_NAMES[(c - 1) % len(COLOUR_NAMES)],
                                f"Size ({unit})": size}
                               for c, (name, size) in enumerate(zip(pred.classes, sizes),
                                                                start=1)]),
                 hide_index=True, width="stretch")


def show_boxes(pred, key: str) -> None:
    image = pred.image
    dims = image.ndim
    chosen = (pred.decision or {}).get("score_threshold")
    threshold = st.slider("Show boxes with a score of at least", 0.0, 1.0,
                          round(float(chosen), 3) if chosen is not None else 0.5, 0.01,
                          key=f"{key}-score",
                          help="Starts at the model's threshold, chosen on the validation "
                               "images (highest F1 of boxes)." if chosen is not None else None)
    kept = boxes_at_least(pred.boxes, threshold)
    depth = depth_of(image)
    k = slice_index(f"{key}-slice", depth, first_box_slice(kept, dims, depth))
    fig = boxes_figure(image[..., k] if dims == 3 else image,
                       box_corners_on_slice(kept, dims, k), pred.classes)
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
            if img.ndim < 3 or not interactive(pred, key):  # a volume: all of it, in 3 views
                st.plotly_chart(image_figure(middle_slice(img),
                                             "Uploaded image" + (" (middle slice)"
                                                                 if img.ndim == 3 else "")),
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
            st.plotly_chart(image_figure(middle_slice(pred.image), "Uploaded image"),
                            width="stretch", config=PLOT_CONFIG)
        with text_col:
            st.markdown("**Generated report**")
            st.text(pred.text or "(the model generated no text)")
    st.caption(RESEARCH_ONLY)


def show_try(model_id, workspace: Path, home: Path) -> None:
    """The tab's content for the model with store id ``model_id`` in its job folder; uploads
    are kept under ``home`` only while the model runs."""
    problem = model_files_missing(workspace)
    if problem:
        st.info(f"This model cannot be run here: {problem}.", icon=":material/info:")
        return
    config = preprocessing_config(workspace)
    st.caption("Run the model on images of your own. Each is preprocessed exactly as the "
               "training images were (the model's own dataloader and the settings below), "
               "kept only for the prediction in a temporary folder of the M3Builder home, "
               "and never sent anywhere.")
    trained_on = training_images(workspace)
    if trained_on:
        st.markdown(f"**Trained on:** {md_escape(trained_on)}. Upload the same kind of "
                    "image: the model knows nothing else.")
    with st.expander("Preprocessing used (the model's own)"):
        st.json(config)
    dims = model_dims(workspace)
    accepted = accepted_text(dims)
    key = f"upload-{model_id}"
    uploaded = st.file_uploader(
        f"Images: {accepted}", accept_multiple_files=True, key=key,
        max_upload_size=MAX_UPLOAD_MB,
        help=f"At most {MAX_UPLOAD_MB} MB. Each file is run on its own"
             + (" (the DICOM slices of one series together make one volume)" if dims == 3
                else "") + "; remove a file with its ×.")
    if not uploaded:
        return
    images = group_uploads([(f.name, f.getvalue()) for f in uploaded], dims)
    if len(images) > MAX_IMAGES:
        st.warning(f"{len(images)} images were added; the first {MAX_IMAGES} are run. Remove "
                   "some to run the others.", icon=":material/warning:")
        images = images[:MAX_IMAGES]
    done = st.session_state.get("models-predictions", {})
    kept, outcomes = {}, []
    for image in images:
        signature = (model_id, tuple(uploaded[j].file_id for j in image.indices))
        if signature not in done:
            try:
                model = cached_model(str(workspace), weights_stamp(workspace))
                with st.spinner(f"Running the model on {image.label}…"):
                    done[signature] = predict_upload(model, home, image.files)
            except InferenceError as exc:
                done[signature] = exc
        kept[signature] = done[signature]
        outcomes.append(done[signature])
    st.session_state["models-predictions"] = kept  # only the images shown are kept
    if len(images) > 1:
        st.caption(f"{len(images)} images, each run on its own: one tab per image.")
        tabs = st.tabs([f"{i}. {image.label}" for i, image in enumerate(images, start=1)])
    else:
        tabs = [st.container()]
    for i, (tab, outcome) in enumerate(zip(tabs, outcomes)):
        with tab:
            if isinstance(outcome, InferenceError):
                st.error(f"{outcome}", icon=":material/error:")
            else:
                show_prediction(outcome, f"{key}-{i}")
