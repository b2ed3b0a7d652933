"""Datasets: the catalog of datacards the Task Manager chooses from, and registering new ones."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.catalog import load_catalog
from core.datacards import NAME_RE
from core.registration import register_dataset
from crew.demo import ensure_demo
from pages.ui_common import context, md_escape

SOURCE_TEXT = {"builtin": "Built-in", "registered": "Registered", "demo": "Demo"}

settings, store = context()

st.title("Datasets")
st.caption("The catalog the Task Manager chooses from. Each dataset is described by a datacard: "
           "metadata only (name, task, modality, classes, folder). Images stay on this server.")

entries = load_catalog(settings)
available = sum(e.available for e in entries)
table = pd.DataFrame([{
    "Name": e.card.name,
    "Task": ", ".join(t.replace("_", " ") for t in e.card.tasks) or "—",
    "Modality": e.card.modality or "—",
    "Anatomy": e.card.anatomy or "—",
    "Dimension": e.card.dimension or "—",
    "Classes": ", ".join(e.card.classes) or "—",
    "Images": e.card.num_samples,
    "Available": "✓" if e.available else "✗",
    "Source": SOURCE_TEXT.get(e.card.source, e.card.source),
} for e in entries])
st.subheader("Catalog")
if table.empty:
    st.info("No datacards yet. Register a dataset below or build the demo dataset.")
else:
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "Images": st.column_config.NumberColumn(format="%d"),
        "Available": st.column_config.TextColumn(
            help="✓ the images are on this server; ✗ the card is known but its folder is not"),
    })
    st.caption(f"{available} of {len(entries)} datasets are available here. Built-in cards "
               "describe public datasets; one becomes available once its images are placed "
               f"under `{settings.datasets_dir}`.")

with st.expander("Dataset descriptions", expanded=False, icon=":material/description:"):
    for e in entries:
        mark = "✓" if e.available else "✗"
        st.markdown(f"**{mark} {md_escape(e.card.name)}**")
        st.markdown(md_escape(e.card.description) or "_No description._")
        details = [f"Folder: `{e.dataset_path}`"]
        if e.card.class_counts:
            details.append("Images per class: " + ", ".join(
                f"{md_escape(k)} {v}" for k, v in e.card.class_counts.items()))
        st.caption(" · ".join(details))
        st.divider()

st.subheader("Add data")
register_col, demo_col = st.columns([2, 1], gap="large")

with register_col:
    st.markdown("**Register a dataset**")
    st.caption("A folder on this server: class folders, a label table (CSV/XLSX/JSON), "
               "images with masks, DICOM series, box or report tables, MedMNIST-style .npz. "
               "Every image is checked before a datacard is saved; nothing inside the folder "
               "is changed.")
    with st.form("register"):
        path = st.text_input("Folder on the server", placeholder="/data/chest_xray")
        name = st.text_input("Name", placeholder="Hospital chest X-ray 2024")
        description = st.text_area(
            "Description", placeholder="What the images show, how they were labelled, patient "
            "ID in file names… The Task Manager reads this to match requests.")
        allow_pickle = st.checkbox(
            "Trust this folder's pickle files (.pck/.pkl)",
            help="Reading a Python pickle can run any code inside it. Tick only for local data "
                 "you made or got from a source you trust; otherwise pickled volumes are "
                 "refused.")
        submitted = st.form_submit_button("Check and register", type="primary",
                                          icon=":material/fact_check:")
    if submitted:
        if not path.strip() or not name.strip():
            st.session_state["register_result"] = {
                "status": "invalid", "errors": ["give both the folder and a name"],
                "warnings": []}
        elif not NAME_RE.match(name.strip()):
            st.session_state["register_result"] = {
                "status": "invalid", "warnings": [], "errors": [
                    "the name must be 1-80 characters: letters, digits, spaces and ._()+- , "
                    "starting with a letter or digit"]}
        else:
            with st.spinner("Checking the images…"):
                result = register_dataset(settings, store, path.strip(), name.strip(),
                                          description.strip(), allow_pickle=allow_pickle)
            st.session_state["register_result"] = result
            if result["status"] == "registered":
                st.rerun()  # redraw the catalog with the new card
    result = st.session_state.pop("register_result", None)
    if result:
        if result["status"] == "registered":
            st.success(f"Registered **{md_escape(result['name'])}** "
                       f"({result.get('task') or 'diagnosis'}). It is now in the catalog.",
                       icon=":material/check_circle:")
        else:
            st.error("Not registered:\n\n" + "\n".join(f"- {md_escape(err)}"
                                                        for err in result["errors"]),
                     icon=":material/error:")
        for warning in result.get("warnings", []):
            st.warning(md_escape(warning), icon=":material/warning:")

with demo_col:
    st.markdown("**Demo dataset**")
    st.caption("A small synthetic chest X-ray set (pneumonia versus normal), generated on this "
               "server. Not patient data; good for trying M3Builder end to end.")
    if st.button("Build the demo dataset", icon=":material/science:"):
        with st.spinner("Generating and checking the demo images…"):
            demo = ensure_demo(settings)
        st.session_state["demo_result"] = demo
        st.rerun()
    demo = st.session_state.pop("demo_result", None)
    if demo and demo["status"] == "registered":
        st.success(f"The demo dataset is ready: **{md_escape(demo['name'])}**.",
                   icon=":material/check_circle:")
    elif demo:
        st.error("The demo dataset could not be registered: " + "; ".join(demo["errors"]))
