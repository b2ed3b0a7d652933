"""Preview: look at a dataset's images (or any image on the server) before building a model.
The interactive viewer (``pages/viewer_widget.py``: zoom, pan, window/level, three views, label
toggles, measurements) when it is installed, else the static slice view
(``pages/preview_static.py``); the DICOM header of DICOM images and thumbnails per class."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from core.datasets.catalog import load_catalog
from core.viewing.dataset_preview import (MAX_THUMB_CLASSES, MAX_THUMBS_PER_CLASS, SampleRef,
                                          class_thumbnails, dataset_scan, mask_labels_of,
                                          sample_groups, sample_ref)
from core.viewing.dicom_header import HeaderError, dicom_file_of, dicom_header
from core.viewing.display_volume import MAX_CHANNELS, PreviewError, image_facts, load_volume
from pages.preview_static import static_view
from pages.ui_common import context, md_escape
from pages.viewer_widget import MISSING, show_sample, viewer_available

DATASET, SERVER_PATH = "A registered dataset", "A file or folder on this server"
ALL = "All classes"
VIEWER_HELP = ("In the browser: zoom, pan, window/level by dragging, axial, coronal and sagittal "
               "views in patient orientation, each mask label on or off, distances and ROI "
               "statistics. Off: one slice at a time drawn on the server.")

settings, store = context()

st.title("Preview")
st.caption("Look at the images before building a model: slices, window/level, masks and boxes. "
           "Images are read on this server and shown only in this browser; they are never sent "
           "to an LLM.")


def _code(text: str) -> str:
    """Text as an inline code span (shown literally; backticks would end the span)."""
    return "`" + str(text).replace("`", "'") + "`"


source = st.radio("Show", [DATASET, SERVER_PATH], horizontal=True, key="pv_source")
card, scan = None, None
allow_pickle, modality, anatomy = False, "", ""
mask_names: list[str] | None = None   # a segmentation dataset's mask labels
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
    allow_pickle, modality, anatomy = bool(card.allow_pickle), card.modality, card.anatomy
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
    mask_names = mask_labels_of(scan, card.classes)
    groups = sample_groups(scan, card.classes)
    class_col, number_col = st.columns([2, 1])
    if mask_names is None:
        chosen = class_col.selectbox(
            "Class", [ALL] + sorted(groups), key=f"pv_class:{name}",
            format_func=lambda c: f"{c} ({len(scan.samples) if c == ALL else len(groups[c])})")
        indices = list(range(len(scan.samples))) if chosen == ALL else groups[chosen]
    else:
        chosen, indices = ALL, list(range(len(scan.samples)))
        class_col.markdown("**Mask labels:** " + (", ".join(
            f"{md_escape(n)} ({v})" for v, n in enumerate(mask_names, start=1))
            or "not named") + f" · {len(indices)} cases")
    number = number_col.number_input(f"Sample (1–{len(indices)})", min_value=1,
                                     max_value=len(indices), value=1, step=1,
                                     key=f"pv_sample:{name}:{chosen}")
    sample = sample_ref(scan.samples[indices[int(number) - 1]])
    facts = [_code(sample.name)]
    if mask_names is None:
        facts.append("labels: " + md_escape(", ".join(sample.labels) or "none"))
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

class_names = mask_names if mask_names is not None else (list(card.classes) if card else [])
vkey = hashlib.sha1(f"{sample.image}|{sample.series_files}".encode()).hexdigest()[:12]
tabs = st.tabs(["Image", "Thumbnails" if mask_names is not None else "Thumbnails per class"]
               if scan is not None else ["Image"])

with tabs[0]:
    interactive = False
    if viewer_available():
        interactive = st.toggle("Interactive viewer", value=True, key="pv_interactive",
                                help=VIEWER_HELP)
    else:
        st.caption(MISSING)
    if interactive:
        channel_box = st.container()
        channel = int(st.session_state.get(f"pv_vchannel:{vkey}", 0))
        try:
            payload = show_sample(
                sample.image, key="pv_viewer", allow_pickle=allow_pickle, modality=modality,
                series_files=sample.series_files, channel=channel, anatomy=anatomy,
                mask=sample.mask, mask_values=sample.mask_values, class_names=class_names,
                boxes=sample.boxes, box_labels=sample.box_labels)
        except PreviewError as exc:
            st.error(f"Cannot show this image: {md_escape(exc)}", icon=":material/error:")
        else:
            if len(payload.channel_names) > 1:
                channel_box.selectbox("Channel", range(len(payload.channel_names)),
                                      format_func=lambda i: payload.channel_names[i],
                                      key=f"pv_vchannel:{vkey}")
            st.caption(image_facts(payload.stored_shape, payload.stored_spacing,
                                   payload.oriented, payload.modality or "image"))
            if payload.downsampled:
                st.caption(f"Sent to the viewer downsampled ×{payload.stride} (the image is "
                           "larger than the viewer takes at full resolution).")
    else:
        try:
            with st.spinner("Reading the image…"):
                volume = load_volume(sample.image, allow_pickle, modality, sample.series_files)
        except PreviewError as exc:
            st.error(f"Cannot show this image: {md_escape(exc)}", icon=":material/error:")
        else:
            static_view(volume, sample, vkey, anatomy, class_names, allow_pickle)
            st.caption(image_facts(volume.stored_shape, volume.stored_spacing,
                                   volume.oriented_by == "affine",
                                   volume.modality or volume.fmt or "image"))
            if volume.downsampled:
                st.caption(f"Shown downsampled ×{volume.stride[0]} to keep memory bounded.")
            if volume.channels_total > len(volume.channel_names) and not volume.rgb:
                st.caption(f"Showing the first {MAX_CHANNELS} of {volume.channels_total} "
                           "channels.")

    dcm = dicom_file_of(sample.image, sample.series_files)
    if dcm is not None:  # only DICOM images have a DICOM header
        with st.expander("DICOM header", icon=":material/list_alt:"):
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
        if mask_names is not None:
            st.caption("A few cases, chosen at random (seeded), with their masks.")
        else:
            st.caption("A few images of each class, chosen at random (seeded), with their "
                       f"masks and boxes. At most {MAX_THUMB_CLASSES} classes (the largest) are "
                       "shown.")
        per_class = st.slider("Images per class" if mask_names is None else "Cases shown", 1,
                              MAX_THUMBS_PER_CLASS, 4, key="pv_thumbs_per_class")
        if st.toggle("Show thumbnails", value=False, key="pv_thumbs_on",
                     help="Reads a few images per class; 3D volumes take a moment the first "
                          "time (then they are cached)."):
            with st.spinner("Making thumbnails…"):
                thumbs = class_thumbnails(scan, per_class, allow_pickle=allow_pickle,
                                          modality=modality, class_names=class_names)
            for group in thumbs:
                st.markdown(f"**{md_escape(group.name)}** · {group.count} images")
                for col, thumb in zip(st.columns(per_class), group.thumbs):
                    with col:
                        if thumb.png:
                            st.image(thumb.png, caption=thumb.name)
                        else:
                            st.caption(f"{md_escape(thumb.name)}: {md_escape(thumb.error)}")
