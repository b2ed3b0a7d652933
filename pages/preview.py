"""Preview: look at a dataset's images (or any image on the server) before building a model:
slices, window/level, mask overlays, boxes, the DICOM header and thumbnails per class."""
from __future__ import annotations

import hashlib
import html
import math
from pathlib import Path

import pandas as pd
import streamlit as st

from core.datasets.catalog import load_catalog
from core.viewing.dataset_preview import (MAX_THUMB_CLASSES, MAX_THUMBS_PER_CLASS, SampleRef,
                                          class_groups, class_thumbnails, dataset_scan,
                                          sample_ref)
from core.viewing.display_volume import AXES, MAX_CHANNELS, PreviewError, load_volume
from core.viewing.overlays import display_boxes, load_mask
from core.viewing.slice_render import (MANUAL, box_color, default_window_name, hex_color,
                                       render_slice, window_choices, window_for)
from core.viewing.dicom_header import HeaderError, dicom_file_of, dicom_header
from pages.ui_common import context, md_escape

DATASET, SERVER_PATH = "A registered dataset", "A file or folder on this server"
ALL = "All classes"

settings, store = context()

st.title("Preview")
st.caption("Look at the images before building a model: slices, window/level, masks and boxes. "
           "Images are read on this server and shown only in this browser; they are never sent "
           "to an LLM.")


def _swatch(color: str, name: str, note: str = "") -> str:
    return (f'<span style="display:inline-block;width:0.9em;height:0.9em;background:{color};'
            f'border-radius:2px;vertical-align:middle"></span> {html.escape(name)}'
            + (f' <small style="opacity:0.6">{html.escape(note)}</small>' if note else ""))


def _code(text: str) -> str:
    """Text as an inline code span (shown literally; backticks would end the span)."""
    return "`" + str(text).replace("`", "'") + "`"


def _nice_step(span: float) -> float:
    """A slider step giving about 500 positions over ``span`` (1 for integer-ish ranges)."""
    if span <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(span / 500)) if span < 500 else 1.0
    return float(step)


source = st.radio("Show", [DATASET, SERVER_PATH], horizontal=True, key="pv_source")
card, scan = None, None
allow_pickle, modality = False, ""
if source == DATASET:
    entries = [e for e in load_catalog(settings) if e.available]
    if not entries:
        st.info("No dataset is available on this server yet. Register a folder, or build the "
                "demo dataset, on the Datasets page.", icon=":material/info:")
        st.stop()
    names = [e.card.name for e in entries]
    name = st.selectbox("Dataset", names, key="pv_dataset")
    entry = entries[names.index(name)]
    card = entry.card
    allow_pickle, modality = bool(card.allow_pickle), card.modality
    try:
        with st.spinner("Listing the dataset's images…"):
            scan = dataset_scan(entry.dataset_path, card.description, card.interpretation)
    except PreviewError as exc:
        st.error(f"Cannot list **{md_escape(card.name)}**: {md_escape(exc)}",
                 icon=":material/error:")
        st.stop()
    if not scan.samples:
        st.warning("The dataset has no images to show.", icon=":material/warning:")
        st.stop()
    groups = class_groups(scan.samples)
    class_col, number_col = st.columns([2, 1])
    chosen = class_col.selectbox(
        "Class", [ALL] + sorted(groups), key=f"pv_class:{name}",
        format_func=lambda c: f"{c} ({len(scan.samples) if c == ALL else len(groups[c])})")
    indices = list(range(len(scan.samples))) if chosen == ALL else groups[chosen]
    number = number_col.number_input(f"Sample (1–{len(indices)})", min_value=1,
                                     max_value=len(indices), value=1, step=1,
                                     key=f"pv_sample:{name}:{chosen}")
    sample = sample_ref(scan.samples[indices[int(number) - 1]])
    facts = [_code(sample.name),
             "labels: " + md_escape(", ".join(sample.labels) or "none")]
    if sample.mask:
        facts.append(f"mask {_code(Path(sample.mask).name)}")
    if sample.boxes:
        facts.append(f"{len(sample.boxes)} boxes")
    st.caption(" · ".join(facts))
else:
    path_col, mask_col = st.columns(2)
    typed = path_col.text_input(
        "Image on the server", key="pv_path",
        placeholder="/data/ct/case_001.nii.gz, a DICOM folder, file.npz::images[0]",
        help="A file (NIfTI, NRRD/MHA, PNG/JPEG, DICOM, .npy), a folder of DICOM or PNG "
             "slices, a *.series.json manifest, or an element of an array file.")
    typed_mask = mask_col.text_input("Mask (optional)", key="pv_mask",
                                     help="A label image on the same grid (values 1..N).")
    if not typed.strip():
        st.info("Type the path of an image file or folder on this server.",
                icon=":material/info:")
        st.stop()
    sample = SampleRef(image=typed.strip(), name=Path(typed.strip()).name, labels=[],
                       mask=typed_mask.strip() or None)

try:
    with st.spinner("Reading the image…"):
        volume = load_volume(sample.image, allow_pickle, modality, sample.series_files)
except PreviewError as exc:
    volume = None
    st.error(f"Cannot show this image: {md_escape(exc)}", icon=":material/error:")

tabs = st.tabs(["Image", "Thumbnails per class"] if scan is not None else ["Image"])

with tabs[0]:
    if volume is not None:
        vkey = hashlib.sha1(f"{sample.image}|{sample.series_files}".encode()).hexdigest()[:12]
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
                    index=choices.index(default_window_name(volume, card.anatomy if card else "")),
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
                st.caption(f"Window W {width:.4g} / L {level:.4g}"
                           + (" HU" if volume.hu else ""))
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
        class_names = card.classes if card else []
        shown = render_slice(volume, axis, index, window, channel, mask=mask, opacity=opacity,
                             class_names=class_names, boxes=boxes, box_labels=sample.box_labels,
                             box_class_names=class_names)
        with view:
            where = f"{axis} slice {index + 1} of {volume.n_slices(axis)}" if volume.is_3d \
                else "2D image"
            st.image(shown.png(), caption=f"{sample.name} · {where}")
            if shown.legend:
                st.markdown(" &nbsp; ".join(
                    _swatch(item.color, item.name, "" if item.in_slice else "(not in this slice)")
                    for item in shown.legend), unsafe_allow_html=True)
            if sample.boxes and boxes:
                labels = sorted(set(sample.box_labels) or {"box"})
                st.markdown(" &nbsp; ".join(
                    _swatch(hex_color(box_color(lbl, class_names)), f"{lbl} (box)")
                    for lbl in labels) + f" &nbsp; {len(shown.boxes)} of {len(boxes)} boxes "
                    "on this slice", unsafe_allow_html=True)
            shape = " × ".join(str(s) for s in volume.stored_shape)
            spacing = " × ".join(f"{s:.3g}" for s in volume.spacing) + " mm" \
                if volume.has_spacing else "no spacing stored (square pixels assumed)"
            facts = [f"Size {shape}", f"display voxel {spacing}",
                     volume.modality or volume.fmt or "image"]
            if volume.is_3d:
                facts.append("oriented from the image's affine" if volume.oriented_by == "affine"
                             else "stored axis order (no affine)")
            st.caption(" · ".join(facts) + ". Radiological view: the patient's right is on "
                       "the left.")
            if volume.downsampled:
                st.caption(f"Shown downsampled ×{volume.stride[0]} to keep memory bounded.")
            if volume.channels_total > len(volume.channel_names) and not volume.rgb:
                st.caption(f"Showing the first {MAX_CHANNELS} of {volume.channels_total} "
                           "channels.")

    dcm = dicom_file_of(sample.image, sample.series_files)
    with st.expander("DICOM header", icon=":material/list_alt:"):
        if dcm is None:
            st.caption("Not a DICOM image: there is no DICOM header to show.")
        else:
            show_phi = st.checkbox(
                "Show patient-identifying tags", value=False, key="pv_show_phi",
                help="Names, IDs, birth date, address, physicians, institution, accession "
                     "number, dates, instance UIDs, every person-name (PN) and private tag.")
            if show_phi:
                st.warning("Patient-identifying values are shown on this screen. M3Builder "
                           "does not store them or send them to an LLM.",
                           icon=":material/visibility:")
                seen = st.session_state.setdefault("pv_phi_audited", set())
                if str(dcm) not in seen:  # who looked at whose identity, once per file
                    store.audit("user", "show_dicom_patient_tags", str(dcm))
                    seen.add(str(dcm))
            try:
                header = dicom_header(dcm, show_phi)
            except HeaderError as exc:
                st.error(md_escape(exc), icon=":material/error:")
            else:
                hidden = f"; {header.hidden} patient-identifying values hidden" \
                    if header.hidden else ""
                st.caption(f"{_code(Path(header.file).name)}: {len(header.rows)} "
                           f"rows{hidden}" + (" (truncated)" if header.truncated else ""))
                table = pd.DataFrame([{
                    "Tag": r["tag"], "Name": "  " * r["depth"] + r["name"], "VR": r["vr"],
                    "Value": r["value"]} for r in header.rows])
                st.dataframe(table, hide_index=True, width="stretch")

if scan is not None:
    with tabs[1]:
        st.caption("A few images of each class, chosen at random (seeded), with their masks "
                   f"and boxes. At most {MAX_THUMB_CLASSES} classes (the largest) are shown.")
        per_class = st.slider("Images per class", 1, MAX_THUMBS_PER_CLASS, 4,
                              key="pv_thumbs_per_class")
        if st.toggle("Show thumbnails", value=False, key="pv_thumbs_on",
                     help="Reads a few images per class; 3D volumes take a moment the first "
                          "time (then they are cached)."):
            with st.spinner("Making thumbnails…"):
                thumbs = class_thumbnails(scan, per_class, allow_pickle=allow_pickle,
                                          modality=modality, class_names=card.classes)
            for group in thumbs:
                st.markdown(f"**{md_escape(group.name)}** · {group.count} images")
                for col, thumb in zip(st.columns(per_class), group.thumbs):
                    with col:
                        if thumb.png:
                            st.image(thumb.png, caption=thumb.name)
                        else:
                            st.caption(f"{md_escape(thumb.name)}: {md_escape(thumb.error)}")
