"""The interactive image viewer on a page: the Streamlit component in ``components/viewer``
(Niivue, served by this app from its own folder) fed by ``core.viewing.viewer_data``.

    from pages.viewer_widget import show_arrays, show_sample, viewer_available

    if viewer_available():
        show_sample(image_ref, key="preview", mask=mask_ref, class_names=names)
        show_arrays(pred.image, key="try", prediction=pred.mask, spacing=pred.spacing,
                    class_names=pred.classes)       # image + (mask) + prediction overlays

Decoded volumes are cached with ``st.cache_data`` (keyed by the files' paths and modification
times, or by the arrays' contents), so a rerun sends the same bytes and the browser keeps the
volume it has. Not a page itself (app.py lists the pages).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import streamlit as st
import streamlit.components.v1 as components

from core.viewing.display_volume import files_stamp
from core.viewing.viewer_data import BoxSet, ViewerPayload, arrays_payload, volume_payload

VIEWER_DIR = Path(__file__).resolve().parent.parent / "components" / "viewer"
LIBRARY = VIEWER_DIR / "node_modules" / "@niivue" / "niivue" / "build" / "index.min.js"
HEIGHT = 560
MISSING = ("The interactive viewer is not installed on this server, so images are shown as "
           "static slices. Run `make setup` (it needs Node.js and npm) to install it.")

_component = components.declare_component("m3b_viewer", path=str(VIEWER_DIR))


def viewer_available() -> bool:
    """Whether the viewer's library was installed (``make setup``)."""
    return LIBRARY.is_file()


def show_payload(payload: ViewerPayload, key: str, height: int = HEIGHT) -> None:
    """Draw the viewer for a payload (nothing returns to Python: every interaction stays in
    the browser)."""
    _component(key=key, default=None, **payload.component_args(height))


@st.cache_data(max_entries=3, ttl=3600, show_spinner=False)
def _sample_payload(ref: Any, stamp: tuple, allow_pickle: bool, modality: str,
                    series_files: tuple | None, channel: int, anatomy: str, mask: str | None,
                    mask_values: tuple | None, class_names: tuple, boxes: str,
                    box_labels: tuple, box_sets: tuple) -> tuple[ViewerPayload, str]:
    return volume_payload(ref, allow_pickle=allow_pickle, modality=modality,
                          series_files=list(series_files) if series_files else None,
                          channel=channel, anatomy=anatomy, mask_ref=mask,
                          mask_values=mask_values, class_names=class_names,
                          boxes=json.loads(boxes), box_labels=box_labels,
                          box_sets=[BoxSet(**json.loads(b)) for b in box_sets])


def sample_payload(ref: Any, *, allow_pickle: bool = False, modality: str = "",
                   series_files: Sequence[str] | None = None, channel: int = 0,
                   anatomy: str = "", mask: str | None = None,
                   mask_values: Sequence[int] | None = None, class_names: Sequence[str] = (),
                   boxes: Sequence[Sequence[float]] = (),
                   box_labels: Sequence[str] = (),
                   box_sets: Sequence[BoxSet] = ()) -> tuple[ViewerPayload, str]:
    """The (cached) payload of an image reference with its mask and boxes (``box_sets``: more
    box layers, e.g. a test image's true and predicted boxes), and a warning about the mask
    ("" if none). Raises core.viewing.display_volume.PreviewError."""
    stamp = files_stamp(ref, series_files) + (files_stamp(mask) if mask else ())
    return _sample_payload(ref, stamp, bool(allow_pickle), modality,
                           tuple(series_files) if series_files else None, int(channel),
                           anatomy, mask, tuple(mask_values) if mask_values else None,
                           tuple(class_names), json.dumps([list(b) for b in boxes or []]),
                           tuple(box_labels), tuple(json.dumps(
                               {**vars(b), "boxes": [list(x) for x in b.boxes],
                                "labels": list(b.labels)}) for b in box_sets))


def show_sample(ref: Any, *, key: str, height: int = HEIGHT, **options) -> ViewerPayload:
    """Show an image reference (a dataset sample or a file on the server) in the viewer with
    its mask and boxes (``sample_payload``'s options); a mask that does not fit is reported
    as a warning. Returns the payload shown. Raises PreviewError for the image."""
    with st.spinner("Preparing the viewer…"):
        payload, warning = sample_payload(ref, **options)
    if warning:
        st.warning(f"No mask overlay: {warning}", icon=":material/warning:")
    show_payload(payload, key, height)
    return payload


@st.cache_data(max_entries=2, ttl=3600, show_spinner=False)
def _arrays_payload(image: np.ndarray, spacing: tuple | None, affine: np.ndarray | None,
                    mask: np.ndarray | None, prediction: np.ndarray | None,
                    class_names: tuple, modality: str, name: str) -> ViewerPayload:
    return arrays_payload(image, spacing=spacing, affine=affine, mask=mask,
                          prediction=prediction, class_names=class_names, modality=modality,
                          name=name)


def show_arrays(image: np.ndarray, *, key: str, spacing: Sequence[float] | None = None,
                affine: np.ndarray | None = None, mask: np.ndarray | None = None,
                prediction: np.ndarray | None = None, class_names: Sequence[str] = (),
                modality: str = "", name: str = "image", height: int = HEIGHT) -> bool:
    """Show an image held in memory with its ground-truth ``mask`` and the model's
    ``prediction`` as toggleable label overlays (values 1..N = ``class_names``). ``image`` is
    (X, Y) or (X, Y, Z) in MONAI's axis order, as ``core.viewing.inference.Prediction`` holds
    it; ``affine`` (voxel -> RAS mm) orients a volume, else ``spacing`` gives its voxel size.
    Returns False (and shows nothing) when the viewer is not installed, so the caller can
    draw its static figures instead. Raises PreviewError for arrays that are not an image
    and its masks."""
    if not viewer_available():
        return False
    with st.spinner("Preparing the viewer…"):
        payload = _arrays_payload(np.asarray(image), tuple(spacing) if spacing else None,
                                  None if affine is None else np.asarray(affine, float),
                                  None if mask is None else np.asarray(mask),
                                  None if prediction is None else np.asarray(prediction),
                                  tuple(class_names), modality, name)
    show_payload(payload, key, height)
    return True
