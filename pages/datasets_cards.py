"""The Datasets page's registered datacards: pick one of the user's cards, see its targets and
edit a target's recipe (pages/datasets_recipe.py), edit it (the folder is re-scanned and
re-validated) or delete it (never its data); and the uploaded folders whose draft was never
saved.

Not a page itself (st.navigation in app.py lists the pages explicitly). May import: core,
pages.ui_common, pages.datasets_common, pages.datasets_recipe.
"""
from __future__ import annotations

import streamlit as st

from core.config.settings import Settings
from core.datasets.catalog import CatalogEntry
from core.datasets.drafting import changed_fields, tasks_for_layout
from core.datasets.registration import delete_datacard, update_datacard
from core.datasets.uploads import remove_upload, unregistered_uploads
from core.store.db import Store
from pages.datasets_common import (PICKLE_HELP, PICKLE_LABEL, SOURCE_TEXT, TASK_TEXT, code,
                                   show_report)
from pages.datasets_recipe import recipe_form
from pages.ui_common import fmt_when, md_escape, read_json


def registered_cards(settings: Settings, store: Store, own: list[CatalogEntry],
                     flash: dict | None, deleted: dict | None) -> None:
    """The user's own cards: the one picked, its last validation, the edit and delete forms."""
    st.subheader("Registered datacards")
    if flash and flash["status"] == "updated":
        show_report(flash, "Updated")
    if deleted:
        st.success(f"Deleted the datacard **{md_escape(deleted['name'])}**. Its data folder was "
                   f"kept: {code(deleted['kept'])}.", icon=":material/delete:")
    if not own:
        st.info("No registered datacards yet. The built-in examples are read-only.")
        return
    names = [e.card.name for e in own]
    if st.session_state.get("card_pick") not in names:  # deleted, or renamed elsewhere
        st.session_state.pop("card_pick", None)
    picked = st.selectbox("Datacard", names, key="card_pick")
    entry = next(e for e in own if e.card.name == picked)
    card = entry.card
    slug = card.slug()
    st.markdown(f"**{md_escape(card.name)}** · "
                + ("✓ available" if entry.available else "✗ folder missing")
                + f" · {SOURCE_TEXT.get(card.source, card.source)}")
    st.caption(f"Folder: {code(entry.dataset_path)} · card: {code(entry.card_path)}")
    report = read_json(entry.card_path.with_name(f"{slug}.validation.json"))
    if report:
        counts = report.get("counts") or {}
        st.caption(f"Last validated {fmt_when(report.get('checked_at'))}: "
                   f"{counts.get('samples', card.num_samples)} samples, "
                   f"{counts.get('patients', '?')} patients; "
                   f"{len(report.get('warnings') or [])} warnings.")
    recipe_form(settings, store, entry)
    st.markdown("**Edit**")
    options = tasks_for_layout(card.label_source, card.tasks[0] if card.tasks else "")
    options += [t for t in card.tasks if t not in options]
    with st.form(f"edit_{slug}"):
        e_desc = st.text_area("Description", value=card.description, key=f"edit_desc_{slug}",
                              height=120)
        e_tasks = st.multiselect("Task", options, default=card.tasks,
                                 key=f"edit_tasks_{slug}",
                                 format_func=lambda t: TASK_TEXT.get(t, t))
        col_a, col_b = st.columns(2)
        with col_a:
            e_mod = st.text_input("Modality", value=card.modality, key=f"edit_mod_{slug}")
            e_lic = st.text_input("License", value=card.license, key=f"edit_lic_{slug}")
        with col_b:
            e_ana = st.text_input("Anatomy", value=card.anatomy, key=f"edit_ana_{slug}")
            e_prov = st.text_input("Provenance", value=card.provenance,
                                   key=f"edit_prov_{slug}")
        e_pickle = st.checkbox(PICKLE_LABEL, value=card.allow_pickle,
                               key=f"edit_pickle_{slug}", help=PICKLE_HELP)
        edit_clicked = st.form_submit_button("Validate and save changes", type="primary",
                                             icon=":material/fact_check:")
    st.caption("Saving re-scans and re-validates the folder; only the datacard and its "
               "validation report are rewritten, never the data.")
    if edit_clicked:
        new = {"description": e_desc.strip(), "tasks": list(e_tasks),
               "modality": e_mod.strip(), "anatomy": e_ana.strip(),
               "license": e_lic.strip(), "provenance": e_prov.strip(),
               "allow_pickle": bool(e_pickle)}
        changes = changed_fields(card, new)
        if not e_tasks:
            st.error("Not saved — nothing was written: choose at least one task.",
                     icon=":material/error:")
        elif not changes:
            st.info("Nothing changed.")
        else:
            with st.spinner("Re-validating the folder…"):
                result = update_datacard(settings, store, card.name, changes)
            if result["status"] == "updated":
                st.session_state["ds_flash"] = result
                st.rerun()
            show_report(result)
    st.markdown("**Delete**")
    st.caption("Deleting removes the datacard, its validation report and its catalog row. "
               f"The data folder {code(entry.dataset_path)} is never deleted.")
    if st.session_state.get("ds_confirm_delete") == card.name:
        st.warning(f"Delete the datacard **{md_escape(card.name)}**? Models already built "
                   "from it are kept.", icon=":material/warning:")
        yes_col, no_col = st.columns(2)
        with yes_col:
            confirmed = st.button("Yes, delete the datacard", key="confirm_delete",
                                  type="primary")
        with no_col:
            cancelled = st.button("Cancel", key="cancel_delete")
        if cancelled:
            st.session_state.pop("ds_confirm_delete", None)
            st.rerun()
        if confirmed:
            st.session_state.pop("ds_confirm_delete", None)
            outcome = delete_datacard(settings, store, card.name)
            if outcome["status"] == "deleted":
                st.session_state["ds_deleted"] = outcome
                st.rerun()
            st.error("Not deleted: " + md_escape("; ".join(outcome["errors"])),
                     icon=":material/error:")
    elif st.button("Delete this datacard…", key="delete_card", icon=":material/delete:"):
        st.session_state["ds_confirm_delete"] = card.name
        st.rerun()  # redraw with the confirmation in place of this button


def stray_uploads(settings: Settings, own: list[CatalogEntry], draft: dict | None) -> None:
    """Unpacked uploads no card (and not the current draft) uses, each with a delete button."""
    draft_upload = (draft or {}).get("upload_folder")
    stray = [p for p in unregistered_uploads(settings, [e.card.path for e in own])
             if str(p) != draft_upload]
    if stray:
        with st.expander(f"Uploaded folders without a datacard ({len(stray)})",
                         icon=":material/folder_off:"):
            st.caption("Zips unpacked here whose draft was never saved. Register one by its "
                       "folder, or delete it (only these unpacked copies are deleted).")
            for folder in stray:
                col_a, col_b = st.columns([4, 1])
                col_a.code(str(folder), language=None)
                if col_b.button("Delete", key=f"rm_upload_{folder.name}"):
                    remove_upload(settings, folder)
                    st.rerun()
