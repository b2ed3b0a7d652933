"""Datasets: the catalog of datacards the Task Manager chooses from; registering (two steps:
scan and draft, then validate and save), editing and deleting datacards.

The page shows the catalog; adding a dataset is pages/datasets_add.py, the registered cards
pages/datasets_cards.py (helpers, not pages), the logic core.datasets (drafting, registration).
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.config.settings import BUILTIN_DATACARDS
from core.datasets.catalog import load_catalog
from core.datasets.drafting import is_own
from pages.datasets_add import add_dataset, after_save, review_draft
from pages.datasets_cards import registered_cards, stray_uploads
from pages.datasets_common import SOURCE_TEXT, code
from pages.ui_common import context, md_escape

settings, store = context()
after_save()  # before any widget: empty step 1 and pick the dataset just saved

entries = load_catalog(settings)

st.title("Datasets")
st.caption("The catalog the Task Manager chooses from. Each dataset is described by a datacard: "
           "metadata only (name, task, modality, classes, folder). Images stay on this server.")
flash = st.session_state.pop("ds_flash", None)  # shown where the user saved it
deleted = st.session_state.pop("ds_deleted", None)

# ----------------------------------------------------------------------------- catalog
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
               "describe the paper's public datasets and are examples only: one becomes "
               f"available once its images are placed under {code(settings.datasets_dir)} in the "
               "folder its card names (see the descriptions).")

with st.expander("Dataset descriptions", expanded=False, icon=":material/description:"):
    for e in entries:
        mark = "✓" if e.available else "✗ unavailable"
        st.markdown(f"**{md_escape(e.card.name)}** · {mark}")
        st.markdown(md_escape(e.card.description) or "_No description._")
        details = [f"Folder: {code(e.dataset_path)}"]
        if e.card.class_counts:
            details.append("Images per class: " + ", ".join(
                f"{md_escape(k)} {v}" for k, v in e.card.class_counts.items()))
        st.caption(" · ".join(details))
        st.divider()

# ----------------------------------------------------------------------------- step 1
add_dataset(settings, entries, flash)

# ----------------------------------------------------------------------------- step 2
draft = st.session_state.get("ds_draft")
if draft:
    review_draft(settings, store, entries, draft)

# ----------------------------------------------------------------------------- saved cards
own = [e for e in entries if is_own(e, settings)]
registered_cards(settings, store, own, flash, deleted)

# ----------------------------------------------------------------------------- stray uploads
stray_uploads(settings, own, draft)
st.caption(f"Built-in example cards live in `{BUILTIN_DATACARDS.name}/` of the application and "
           "cannot be edited or deleted here.")
