"""The Preview page's static view: one slice at a time drawn on the server (window presets,
mask overlay, boxes), for when the interactive viewer is not installed or is switched off.
Not a page itself (app.py lists the pages)."""
from __future__ import annotations

import html
import math

import streamlit as st

from core.viewing.display_volume import AXES, DisplayVolume, PreviewError
from core.viewing.overlays import display_boxes, load_mask
from core.viewing.slice_render import (MANUAL, box_color, default_window_name, hex_color,
                                       render_slice, window_choices, window_for)
from pages.ui_common import md_escape


def swatch(color: str, name: str, note: str = "") -> str:
    return (f'<span style="display:inline-block;width:0.9em;height:0.9em;background:{color};'
            f'border-radius:2px;vertical-align:middle"></span> {html.escape(name)}'
            + (f' <small style="opacity:0.6">{html.escape(note)}</small>' if note else ""))


def _nice_step(span: float) -> float:
    """A slider step giving about 500 positions over ``span`` (1 for integer-ish ranges)."""
    if span <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(span / 500)) if span < 500 else 1.0
    return float(step)


def static_view(volume: DisplayVolume, sample, vkey: str, anatomy: str = "",
                class_names: list[str] | None = None, allow_pickle: bool = False) -> None:
    """Controls on the left, the rendered slice with its legend on the right."""
    class_names = class_names or []
    controls, view = st.columns([1, 2], gap="large")
    with controls:
        channel = 0
        if not volume.rgb and len(volume.channel_names) > 1:
            channel = st.selectbox("Channel", range(len(volume.channel_names)),
                                   format_func=lambda i: volume.channel_names[i],
                                   key=f"pv_channel:{vkey}")
        axis, index = "axial", 0
        if volume.is_3d:
            axis = st.radio("View", AXES, index=AXES.index(volume.default_axis),
                            horizontal=True, format_func=str.capitalize,
                            key=f"pv_axis:{vkey}")
            count = volume.n_slices(axis)
            if count > 1:
                index = st.slider("Slice", 1, count, value=count // 2 + 1,
                                  key=f"pv_slice:{vkey}:{axis}") - 1
        window = None
        if volume.rgb:
            st.caption("Colour image: shown as stored (no window).")
        else:
            choices = window_choices(volume)
            preset = st.selectbox(
                "Window", choices, key=f"pv_window:{vkey}",
                index=choices.index(default_window_name(volume, anatomy)),
                help="CT presets are in Hounsfield units; Auto spans the 0.5–99.5 "
                     "percentiles of the volume (MRI, X-ray).")
            width, level = window_for(volume, preset, channel)
            if preset == MANUAL:
                _, _, vmin, vmax = volume.stats[channel]
                span = max(vmax - vmin, 1e-6)
                step = _nice_step(span)
                top = vmin + span
                level = st.slider("Level (centre)", float(vmin), float(top),
                                  float(min(max(level, vmin), top)), step=step,
                                  key=f"pv_level:{vkey}:{channel}")
                width = st.slider("Width", step, float(span) * 2,
                                  float(min(max(width, step), span * 2)), step=step,
                                  key=f"pv_width:{vkey}:{channel}")
            window = (width, level)
            st.caption(f"Window W {width:.4g} / L {level:.4g}" + (" HU" if volume.hu else ""))
        mask, opacity = None, 0.4
        if sample.mask:
            if st.toggle("Mask overlay", value=True, key=f"pv_mask_on:{vkey}"):
                opacity = st.slider("Opacity", 0.0, 1.0, 0.4, 0.05, key="pv_opacity")
                try:
                    mask = load_mask(sample.mask, volume, allow_pickle)
                except PreviewError as exc:
                    st.warning(md_escape(exc), icon=":material/warning:")
        boxes: list = []
        if sample.boxes:
            if st.toggle(f"Boxes ({len(sample.boxes)})", value=True,
                         key=f"pv_boxes_on:{vkey}"):
                boxes = display_boxes(sample.boxes, volume)
    shown = render_slice(volume, axis, index, window, channel, mask=mask, opacity=opacity,
                         class_names=class_names, boxes=boxes, box_labels=sample.box_labels,
                         box_class_names=class_names, label_values=sample.mask_values)
    with view:
        where = f"{axis} slice {index + 1} of {volume.n_slices(axis)}" if volume.is_3d \
            else "2D image"
        st.image(shown.png(), caption=f"{sample.name} · {where}")
        if shown.legend:
            st.markdown(" &nbsp; ".join(
                swatch(item.color, item.name, "" if item.in_slice else "(not in this slice)")
                for item in shown.legend), unsafe_allow_html=True)
        if sample.boxes and boxes:
            labels = sorted(set(sample.box_labels) or {"box"})
            st.markdown(" &nbsp; ".join(
                swatch(hex_color(box_color(lbl, class_names)), f"{lbl} (box)")
                for lbl in labels) + f" &nbsp; {len(shown.boxes)} of {len(boxes)} boxes "
                "on this slice", unsafe_allow_html=True)
