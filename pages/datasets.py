"""Datasets: the catalog of datacards the Task Manager chooses from; registering (two steps:
scan and draft, then validate and save), editing and deleting datacards."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.datasets.catalog import load_catalog
from core.datasets.datacards import NAME_RE, TASKS
from core.datasets.registration import (RegistrationError, delete_datacard, draft_dataset,
                               register_dataset, tasks_for_layout, update_datacard)
from core.datasets.layouts.types import ScanError
from core.config.settings import BUILTIN_DATACARDS
from core.datasets.thumbnails import class_thumbnails
from core.datasets.uploads import (UploadError, UploadLimits, extract_zip, folder_name, remove_upload,
                          unregistered_uploads, uploads_dir)
from crew.demo import ensure_demo
from pages.ui_common import context, fmt_when, md_escape, read_json

SOURCE_TEXT = {"builtin": "Built-in", "registered": "Registered", "demo": "Demo"}
TASK_TEXT = {t: t.replace("_", " ").capitalize() for t in TASKS}
PICKLE_LABEL = "Trust this folder's pickle files (.pck/.pkl)"
PICKLE_HELP = ("Reading a Python pickle can run any code inside it. Tick only for local data you "
               "made or got from a source you trust; otherwise pickled volumes are refused.")
NAME_RULE = ("1-80 characters: letters, digits, spaces and ._()+- , starting with a letter or "
             "digit")
REVIEW_KEYS = ("rev_name", "rev_tasks", "rev_modality", "rev_anatomy", "rev_description",
               "rev_license", "rev_provenance", "rev_pickle")

settings, store = context()


def code(text) -> str:
    """``text`` as an inline code span (shown literally; no markdown escapes needed)."""
    return "`" + str(text).replace("`", "'") + "`"


def is_own(entry) -> bool:
    """A card the user registered (or the demo), kept in the home folder: editable."""
    return entry.card_path.resolve().parent == settings.datacards_dir.resolve()


def name_problem(name: str, entries) -> str | None:
    """Why ``name`` cannot be used for a new datacard, or None."""
    if not name:
        return None
    if not NAME_RE.match(name):
        return f"the name {name!r} is not allowed: {NAME_RULE}"
    for e in entries:
        if e.card.name.lower() == name.lower() and is_own(e):
            return (f"a dataset named {e.card.name!r} is already registered (folder "
                    f"{e.card.path}); choose another name, or edit that card below")
    return None


def start_draft(path: str, name: str, description: str, allow_pickle: bool,
                upload_folder: str | None = None) -> None:
    """Scan the folder and keep the drafted card (nothing saved) for the review form."""
    draft = draft_dataset(path, name, description)
    thumbs = class_thumbnails(draft.scan, allow_pickle=allow_pickle)
    card = draft.card
    st.session_state["ds_draft"] = {
        "path": draft.scan.root, "facts": draft.facts(), "task_options": draft.tasks,
        "upload_folder": upload_folder, "thumbs": thumbs.by_class,
        "thumbs_unreadable": thumbs.unreadable, "thumbs_timed_out": thumbs.timed_out}
    initial = {"rev_name": card.name, "rev_tasks": list(card.tasks),
               "rev_modality": card.modality, "rev_anatomy": card.anatomy,
               "rev_description": description.strip() or card.description,
               "rev_license": card.license, "rev_provenance": "", "rev_pickle": allow_pickle}
    st.session_state["ds_draft"]["initial"] = initial
    st.session_state.update(initial)
    st.session_state.pop("ds_report", None)


def replace_draft(*args, **kwargs) -> None:
    """start_draft, then (only when it worked) drop the unpacked upload of the old draft."""
    old = (st.session_state.get("ds_draft") or {}).get("upload_folder")
    start_draft(*args, **kwargs)
    if old and old != st.session_state["ds_draft"].get("upload_folder"):
        remove_upload(settings, old)


def drop_draft(remove_data: bool) -> None:
    draft = st.session_state.pop("ds_draft", None) or {}
    for key in REVIEW_KEYS:
        st.session_state.pop(key, None)
    st.session_state.pop("ds_report", None)
    if remove_data and draft.get("upload_folder"):
        remove_upload(settings, draft["upload_folder"])


def show_report(result: dict, saved_word: str = "Saved") -> None:
    """Registration's validation report: verdict, errors (where + fix), warnings, counts."""
    ok = result["status"] in ("registered", "updated")
    if ok:
        st.success(f"{saved_word} **{md_escape(result['name'])}** "
                   f"({TASK_TEXT.get(result.get('task') or '', result.get('task') or '')}). "
                   "It is in the catalog.", icon=":material/check_circle:")
    else:
        st.error("Not saved — nothing was written. Fix these and try again:\n\n"
                 + "\n".join(f"- {md_escape(e)}" for e in result["errors"]),
                 icon=":material/error:")
    for warning in result.get("warnings") or []:
        st.warning(md_escape(warning), icon=":material/warning:")
    summary = result.get("validation") or {}
    counts, preview = summary.get("counts") or {}, summary.get("split_preview") or {}
    if counts:
        patients = preview.get("patients", {})
        st.dataframe(pd.DataFrame([{
            "Class": label, "Images": c.get("images", 0), "Patients": c.get("patients", 0),
            "Train patients": patients.get("train", {}).get(label, 0),
            "Test patients": patients.get("test", {}).get(label, 0),
        } for label, c in (counts.get("classes") or {}).items()]), hide_index=True,
            width="stretch")
        st.caption(f"{counts.get('samples', 0)} samples from {counts.get('patients', 0)} "
                   f"patients, grouped by {md_escape(counts.get('grouping_key', '—'))}.")
    checked = summary.get("checked") or {}
    if checked:
        st.caption(f"Checked: {md_escape(checked.get('how', ''))}; "
                   f"{checked.get('files', 0)} files exist.")


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
st.subheader("Add a dataset")
st.caption("Step 1 scans the data and drafts its datacard; nothing is saved until step 2 "
           "validates it. Nothing inside a dataset folder is ever changed.")
if flash and flash["status"] == "registered":
    show_report(flash, "Registered")
folder_tab, upload_tab, demo_tab = st.tabs(["Folder on this server", "Upload a zip",
                                            "Demo dataset"])

with folder_tab:
    st.caption("Class folders, a label table (CSV/XLSX/JSON), images with masks, DICOM series, "
               "box or report tables, MedMNIST-style .npz.")
    with st.form("scan_folder"):
        path = st.text_input("Folder on the server", key="scan_path",
                             placeholder="/data/chest_xray")
        name = st.text_input("Name (optional)", key="scan_name",
                             placeholder="proposed from the folder name")
        description = st.text_area(
            "Description (optional)", key="scan_description",
            placeholder="What the images show, how they were labelled, patient ID in file "
                        "names… The Data Engineer reads it to understand the layout and the "
                        "Task Manager to match requests.")
        allow_pickle = st.checkbox(PICKLE_LABEL, key="scan_pickle", help=PICKLE_HELP)
        scan_clicked = st.form_submit_button("Scan", type="primary", icon=":material/search:")
    if scan_clicked:
        problem = name_problem(name.strip(), entries)
        if problem:
            st.error(f"Not scanned: {md_escape(problem)}.", icon=":material/error:")
        else:
            try:
                with st.spinner("Scanning the folder…"):
                    replace_draft(path, name.strip(), description, allow_pickle)
            except (RegistrationError, ScanError) as exc:
                st.error(f"Not scanned: {md_escape(exc)}", icon=":material/error:")

with upload_tab:
    limits = UploadLimits.from_settings(settings)
    widget_mb = max(1, min(settings.upload_max_mb, int(st.get_option("server.maxUploadSize"))))
    st.caption(f"A .zip of the dataset folder, at most {widget_mb:,} MB zipped and "
               f"{settings.upload_max_unpacked_mb:,} MB unpacked (Settings page). It is "
               f"unpacked into {code(uploads_dir(settings) / '<name>')}; links, absolute or "
               "`..` paths and zip bombs are refused.")
    with st.form("upload_zip"):
        upload = st.file_uploader("Dataset zip", type=["zip"], key="upload_file",
                                  max_upload_size=widget_mb)
        up_name = st.text_input("Name", key="upload_name",
                                placeholder="proposed from the zip's file name")
        up_description = st.text_area("Description (optional)", key="upload_description")
        up_pickle = st.checkbox(PICKLE_LABEL, key="upload_pickle", help=PICKLE_HELP)
        upload_clicked = st.form_submit_button("Upload and scan", type="primary",
                                               icon=":material/upload:")
    if upload_clicked:
        chosen = up_name.strip() or (Path(upload.name).stem if upload is not None else "")
        problem = name_problem(chosen, entries)
        current = (st.session_state.get("ds_draft") or {}).get("upload_folder")
        if upload is None:
            st.error("Not uploaded: choose a .zip file first.", icon=":material/error:")
        elif problem:
            st.error(f"Not uploaded: {md_escape(problem)}.", icon=":material/error:")
        else:
            if current and Path(current).name == folder_name(chosen):
                drop_draft(remove_data=True)  # uploading the same name again replaces the draft
            try:
                with st.spinner("Checking and unpacking the zip…"):
                    unpacked = extract_zip(upload, settings, chosen, limits)
            except UploadError as exc:
                st.error(f"Not uploaded: {md_escape(exc)}. Nothing was kept.",
                         icon=":material/error:")
            else:
                try:
                    with st.spinner("Scanning the unpacked folder…"):
                        replace_draft(str(unpacked.dataset_root), chosen, up_description,
                                      up_pickle, upload_folder=str(unpacked.folder))
                except (RegistrationError, ScanError) as exc:
                    remove_upload(settings, unpacked.folder)
                    st.error(f"Not scanned: {md_escape(exc)} The unpacked upload was removed.",
                             icon=":material/error:")

with demo_tab:
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

# ----------------------------------------------------------------------------- step 2
draft = st.session_state.get("ds_draft")
if draft:
    facts = draft["facts"]
    st.subheader("Review the draft and save")
    st.markdown(f"Scanned {code(draft['path'])}: **{facts['num_samples']}** samples, "
                f"{facts['num_groups']} patients/groups, "
                f"{facts['dimension'] or '?'} {md_escape(facts['file_format'] or '')} images.")
    st.caption(f"Layout (label source): {md_escape(facts['layout'])} · grouping key: "
               f"{md_escape(facts['grouping_key'])} · task found: "
               f"{TASK_TEXT.get(facts['task'], facts['task'])}"
               + (" · the dataset's own train/test split is kept" if facts["existing_split"]
                  else "")
               + (f" · {facts['num_skipped']} files skipped" if facts["num_skipped"] else ""))
    if facts["classes"]:
        st.dataframe(pd.DataFrame([{"Class": k, "Samples": v}
                                   for k, v in facts["classes"].items()]),
                     hide_index=True, width="content",
                     column_config={"Samples": st.column_config.NumberColumn(format="%d")})
    if facts["skipped"]:
        with st.expander(f"Skipped files ({facts['num_skipped']})"):
            st.code("\n".join(facts["skipped"]), language=None)
    if draft["thumbs"]:
        st.markdown("**A few images per class**")
        for label, images in draft["thumbs"].items():
            st.caption(md_escape(label))
            if images:
                st.image(images, width=96)
            else:
                st.caption("no image could be previewed for this class")
        notes = []
        if draft["thumbs_unreadable"]:
            notes.append(f"{draft['thumbs_unreadable']} images could not be previewed "
                         "(validation will say why)")
        if draft["thumbs_timed_out"]:
            notes.append("the preview stopped after its time limit")
        if notes:
            st.caption("; ".join(notes) + ".")
    for key, value in draft["initial"].items():  # widget state is dropped on other pages
        if key not in st.session_state:
            st.session_state[key] = value
    with st.form("review"):
        st.text_input("Name", key="rev_name", help=NAME_RULE)
        st.multiselect("Task", draft["task_options"], key="rev_tasks",
                       format_func=lambda t: TASK_TEXT.get(t, t),
                       help="The tasks this layout can train; the layout decides the template.")
        col_a, col_b = st.columns(2)
        with col_a:
            st.text_input("Modality", key="rev_modality", placeholder="CT, MRI, X-ray, …")
        with col_b:
            st.text_input("Anatomy", key="rev_anatomy", placeholder="chest, brain, …")
        st.text_area("Description", key="rev_description", height=120)
        col_c, col_d = st.columns(2)
        with col_c:
            st.text_input("License (optional)", key="rev_license")
        with col_d:
            st.text_input("Provenance (optional)", key="rev_provenance",
                          placeholder="where the data came from")
        st.checkbox(PICKLE_LABEL, key="rev_pickle", help=PICKLE_HELP)
        save_clicked = st.form_submit_button("Validate and save", type="primary",
                                             icon=":material/fact_check:")
    discard_label = ("Discard the draft and the unpacked upload" if draft["upload_folder"]
                     else "Discard the draft")
    if st.button(discard_label, key="discard_draft", icon=":material/close:"):
        drop_draft(remove_data=True)
        st.rerun()
    if save_clicked:
        ss = st.session_state
        new_name = ss["rev_name"].strip()
        problem = ("give the dataset a name" if not new_name
                   else name_problem(new_name, entries))
        if not problem and not ss["rev_tasks"]:
            problem = "choose at least one task"
        if problem:
            st.error(f"Not saved — nothing was written: {md_escape(problem)}.",
                     icon=":material/error:")
        else:
            fields = {"tasks": list(ss["rev_tasks"]), "modality": ss["rev_modality"],
                      "anatomy": ss["rev_anatomy"], "license": ss["rev_license"]}
            if ss["rev_provenance"].strip():
                fields["provenance"] = ss["rev_provenance"]
            with st.spinner("Validating: checking files, decoding a sample, previewing the "
                            "split…"):
                result = register_dataset(settings, store, draft["path"], new_name,
                                          ss["rev_description"].strip(),
                                          allow_pickle=ss["rev_pickle"], fields=fields,
                                          new_only=True)
            if result["status"] == "registered":
                drop_draft(remove_data=False)
                st.session_state["ds_flash"] = result
                st.rerun()
            st.session_state["ds_report"] = result
    if st.session_state.get("ds_report"):
        show_report(st.session_state["ds_report"])

# ----------------------------------------------------------------------------- saved cards
st.subheader("Registered datacards")
if flash and flash["status"] == "updated":
    show_report(flash, "Updated")
if deleted:
    st.success(f"Deleted the datacard **{md_escape(deleted['name'])}**. Its data folder was "
               f"kept: {code(deleted['kept'])}.", icon=":material/delete:")
own = [e for e in entries if is_own(e)]
if not own:
    st.info("No registered datacards yet. The built-in examples are read-only.")
else:
    names = [e.card.name for e in own]
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
        old = {"description": card.description, "tasks": card.tasks,
               "modality": card.modality, "anatomy": card.anatomy,
               "license": card.license, "provenance": card.provenance,
               "allow_pickle": card.allow_pickle}
        changes = {k: v for k, v in new.items() if v != old[k]}
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

# ----------------------------------------------------------------------------- stray uploads
draft_upload = (draft or {}).get("upload_folder")
stray = [p for p in unregistered_uploads(settings, [e.card.path for e in own])
         if str(p) != draft_upload]
if stray:
    with st.expander(f"Uploaded folders without a datacard ({len(stray)})",
                     icon=":material/folder_off:"):
        st.caption("Zips unpacked here whose draft was never saved. Register one by its folder, "
                   "or delete it (only these unpacked copies are deleted).")
        for folder in stray:
            col_a, col_b = st.columns([4, 1])
            col_a.code(str(folder), language=None)
            if col_b.button("Delete", key=f"rm_upload_{folder.name}"):
                remove_upload(settings, folder)
                st.rerun()
st.caption(f"Built-in example cards live in `{BUILTIN_DATACARDS.name}/` of the application and "
           "cannot be edited or deleted here.")
