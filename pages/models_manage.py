"""The Models page's archive and delete section. Archiving hides a model from the default list
(it can be shown and restored); deleting removes its row and its files in the app's home folder
after a confirmation, never the dataset (core.jobs.model_removal). Both are audited in the store,
which this page, a parent process, writes. Not a page itself (app.py lists the pages)."""
from __future__ import annotations

import streamlit as st

from core.jobs.model_removal import (ModelRemovalError, delete_model, model_files,
                                     model_workspace, size_of)
from core.store.errors import StoreError
from core.viewing.model_versions import ModelEntry
from core.viewing.model_views import file_size
from pages.ui_common import fmt_when, md_escape

FLASH = "models-flash"
ACTOR = "user"


def flash(kind: str, text: str) -> None:
    st.session_state[FLASH] = (kind, text)


def show_flash() -> None:
    """The outcome of the last archive, restore or delete (shown once, at the page's top)."""
    kind, text = st.session_state.pop(FLASH, (None, None))
    if kind == "success":
        st.success(md_escape(text), icon=":material/check_circle:")
    elif kind == "error":
        st.error(md_escape(text), icon=":material/error:")


def _archive(store, model: dict, archived: bool) -> None:
    try:
        store.set_model_archived(model["id"], archived, ACTOR)
    except StoreError as exc:
        flash("error", f"{model['name']} was not {'archived' if archived else 'restored'}: "
                       f"{exc}")
        return
    flash("success", f"Archived {model['name']}: it is hidden from the list; turn on “Show "
                     "archived models” to see or restore it." if archived else
          f"Restored {model['name']} to the list.")


def _delete(settings, store, model: dict) -> None:
    try:
        done = delete_model(settings, store, model["id"], ACTOR)
    except (ModelRemovalError, StoreError) as exc:
        flash("error", f"{model['name']} was not deleted: {exc}")
        return
    st.session_state.pop(f"delete-confirm-{model['id']}", None)
    flash("success", f"Deleted {done['name']} and its files ({file_size(done['bytes'])}). The "
                     "dataset was not touched.")


def show_manage(settings, store, entry: ModelEntry) -> None:
    model = entry.model
    st.markdown("**Archive**")
    if entry.archived:
        st.caption(f"Archived {fmt_when(model.get('archived_at'))}: hidden from the list "
                   "unless “Show archived models” is on. Nothing was deleted.")
        st.button("Restore to the list", key=f"restore-{entry.id}", on_click=_archive,
                  args=(store, model, False), icon=":material/unarchive:")
    else:
        st.caption("Archiving hides this model from the list (and from being picked as the "
                   "best); nothing is deleted and it can be restored at any time.")
        st.button("Archive", key=f"archive-{entry.id}", on_click=_archive,
                  args=(store, model, True), icon=":material/archive:")

    st.markdown("**Delete for good**")
    ws = model_workspace(settings, model, entry.job)
    files = model_files(ws)
    names = ", ".join(f"`{p.name}`" for p in files) or "none are left"
    st.caption(f"Deleting removes this model from the list and its files from the app's home "
               f"folder: the saved model, its exports, training checkpoints, external "
               f"validations and model card ({names}; {file_size(size_of(files))}). The job's "
               f"record, log and test report stay on the Training page; the dataset is never "
               f"touched; the version number v{model.get('version') or '?'} is not given "
               "again. This cannot be undone.")
    confirm = st.checkbox(f"Yes, delete {md_escape(entry.name)} and its files",
                          key=f"delete-confirm-{entry.id}")
    st.button("Delete model", key=f"delete-{entry.id}", type="primary", disabled=not confirm,
              on_click=_delete, args=(settings, store, model), icon=":material/delete:")
