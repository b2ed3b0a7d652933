"""Adding a dataset on the Datasets page: step 1 scans a folder on this server, an uploaded zip
or the demo data and drafts its datacard (nothing saved); step 2 reviews the draft, then
validates and saves it. The draft lives in ``st.session_state["ds_draft"]``.

Not a page itself (st.navigation in app.py lists the pages explicitly). May import: core, crew,
pages.ui_common, pages.datasets_common.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.config.settings import Settings
from core.datasets.catalog import CatalogEntry
from core.datasets.drafting import NAME_RULE, RegistrationError, draft_dataset, name_problem
from core.datasets.layouts.types import ScanError
from core.datasets.registration import register_dataset
from core.datasets.thumbnails import class_thumbnails
from core.datasets.uploads import (UploadError, UploadLimits, extract_zip, folder_name,
                                   remove_upload, uploads_dir)
from core.store.db import Store
from crew.demo import ensure_demo
from pages.datasets_common import PICKLE_HELP, PICKLE_LABEL, TASK_TEXT, code, show_report
from pages.ui_common import md_escape

REVIEW_KEYS = ("rev_name", "rev_tasks", "rev_modality", "rev_anatomy", "rev_description",
               "rev_license", "rev_provenance", "rev_pickle")
# step 1's fields as a fresh page shows them; the zip uploader is renewed by its key instead
STEP1_EMPTY = {"scan_path": "", "scan_name": "", "scan_description": "", "scan_pickle": False,
               "upload_name": "", "upload_description": "", "upload_pickle": False}


def after_save() -> None:
    """The run after a new dataset was saved (``ds_saved`` holds its name): empty step 1's
    forms and pick the new datacard in the registered cards' picker. Called before any widget
    is drawn: a widget's state can only be set before it is."""
    name = st.session_state.pop("ds_saved", None)
    if not name:
        return
    st.session_state.update(STEP1_EMPTY)
    st.session_state["ds_upload_round"] = st.session_state.get("ds_upload_round", 0) + 1
    st.session_state["card_pick"] = name


def zip_uploader_key() -> str:
    """The zip uploader's key: a new one after each save drops the zip it held."""
    round_ = st.session_state.get("ds_upload_round", 0)
    return "upload_file" if not round_ else f"upload_file_{round_}"


def start_draft(path: str, name: str, description: str, allow_pickle: bool,
                upload_folder: str | None = None, interpretation: int | None = None) -> None:
    """Scan the folder and keep the drafted card (nothing saved) for the review form."""
    draft = draft_dataset(path, name, description, interpretation=interpretation)
    thumbs = class_thumbnails(draft.scan, allow_pickle=allow_pickle)
    card = draft.card
    st.session_state["ds_draft"] = {
        "path": draft.scan.root, "facts": draft.facts(), "task_options": draft.tasks,
        "upload_folder": upload_folder, "thumbs": thumbs.by_class,
        "thumbs_unreadable": thumbs.unreadable, "thumbs_timed_out": thumbs.timed_out,
        # the user's pick, kept by reader name: the numbering may change with the description
        "interpretation": (draft.facts()["interpretation"].get("reader")
                           if interpretation else None), "reading_number": interpretation,
        "name": name, "description": description,
        "allow_pickle": allow_pickle}
    initial = {"rev_name": card.name, "rev_tasks": list(card.tasks),
               "rev_modality": card.modality, "rev_anatomy": card.anatomy,
               "rev_description": description.strip() or card.description,
               "rev_license": card.license, "rev_provenance": "", "rev_pickle": allow_pickle}
    st.session_state["ds_draft"]["initial"] = initial
    st.session_state.update(initial)
    st.session_state.pop("ds_report", None)


def replace_draft(settings: Settings, *args, **kwargs) -> None:
    """start_draft, then (only when it worked) drop the unpacked upload of the old draft."""
    old = (st.session_state.get("ds_draft") or {}).get("upload_folder")
    start_draft(*args, **kwargs)
    if old and old != st.session_state["ds_draft"].get("upload_folder"):
        remove_upload(settings, old)


def drop_draft(settings: Settings, remove_data: bool) -> None:
    """Forget the draft and its review widgets; with ``remove_data``, its unpacked upload too."""
    draft = st.session_state.pop("ds_draft", None) or {}
    for key in REVIEW_KEYS:
        st.session_state.pop(key, None)
    st.session_state.pop("ds_report", None)
    if remove_data and draft.get("upload_folder"):
        remove_upload(settings, draft["upload_folder"])


def add_dataset(settings: Settings, entries: list[CatalogEntry], flash: dict | None) -> None:
    """Step 1: the folder, upload and demo tabs; a scan becomes the draft step 2 reviews."""
    st.subheader("Add a dataset")
    st.caption("Step 1 scans the data and drafts its datacard; nothing is saved until step 2 "
               "validates it. Nothing inside a dataset folder is ever changed.")
    if flash and flash["status"] == "registered":
        show_report(flash, "Registered", "It is in the catalog and selected under Registered "
                                         "datacards below.")
    folder_tab, upload_tab, demo_tab = st.tabs(["Folder on this server", "Upload a zip",
                                                "Demo dataset"])

    with folder_tab:
        st.caption("Class folders, a label table (CSV/XLSX/JSON), images with masks, DICOM series, "
                   "box or report tables, MedMNIST-style .npz.")
        with st.form("scan_folder"):
            path = st.text_input("Folder on the server", key="scan_path",
                                 placeholder="the full path, e.g. /data/chest_xray")
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
            problem = name_problem(name.strip(), entries, settings)
            if problem:
                st.error(f"Not scanned: {md_escape(problem)}.", icon=":material/error:")
            else:
                try:
                    with st.spinner("Scanning the folder…"):
                        replace_draft(settings, path, name.strip(), description, allow_pickle)
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
            upload = st.file_uploader("Dataset zip", type=["zip"], key=zip_uploader_key(),
                                      max_upload_size=widget_mb)
            up_name = st.text_input("Name", key="upload_name",
                                    placeholder="proposed from the zip's file name")
            up_description = st.text_area("Description (optional)", key="upload_description")
            up_pickle = st.checkbox(PICKLE_LABEL, key="upload_pickle", help=PICKLE_HELP)
            upload_clicked = st.form_submit_button("Upload and scan", type="primary",
                                                   icon=":material/upload:")
        if upload_clicked:
            chosen = up_name.strip() or (Path(upload.name).stem if upload is not None else "")
            problem = name_problem(chosen, entries, settings)
            current = (st.session_state.get("ds_draft") or {}).get("upload_folder")
            if upload is None:
                st.error("Not uploaded: choose a .zip file first.", icon=":material/error:")
            elif problem:
                st.error(f"Not uploaded: {md_escape(problem)}.", icon=":material/error:")
            else:
                if current and Path(current).name == folder_name(chosen):
                    # uploading the same name again replaces the draft
                    drop_draft(settings, remove_data=True)
                try:
                    with st.spinner("Checking and unpacking the zip…"):
                        unpacked = extract_zip(upload, settings, chosen, limits)
                except UploadError as exc:
                    st.error(f"Not uploaded: {md_escape(exc)}. Nothing was kept.",
                             icon=":material/error:")
                else:
                    try:
                        with st.spinner("Scanning the unpacked folder…"):
                            replace_draft(settings, str(unpacked.dataset_root), chosen,
                                          up_description, up_pickle,
                                          upload_folder=str(unpacked.folder))
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


def choose_reading(draft: dict) -> None:
    """When the folder can be read in more than one way, list the readings (with example rows)
    and let the user pick; a close call must be decided here before saving."""
    facts = draft["facts"]
    reading = facts.get("interpretation") or {}
    usable = [r for r in facts.get("interpretations", []) if not r.get("refused")]
    if len(usable) < 2 and not reading.get("ambiguous"):
        return
    if reading.get("ambiguous"):
        st.warning(f"This folder can be read in more than one way ({md_escape(reading['why'])}). "
                   "Pick the reading that is right before saving.", icon=":material/help:")
    labels = {r["number"]: f"{r['number']}. {TASK_TEXT.get(r['task'], r['task'])} from "
              f"{r['source']} — {r['num_samples']} samples, covers {r['coverage']:.0%}"
              for r in usable}
    current = draft.get("reading_number") or usable[0]["number"]
    with st.expander("Readings of the folder", expanded=bool(reading.get("ambiguous"))):
        for r in usable:
            st.markdown(f"**{md_escape(labels[r['number']])}** · classes: "
                        f"{md_escape(', '.join(r['classes']) or '(free text / masks)')} · "
                        f"patients by {md_escape(r['patient_key'])}")
            st.code("\n".join(r["examples"]), language=None)
        picked = st.radio("Use this reading", list(labels), format_func=labels.get,
                          index=list(labels).index(current) if current in labels else 0,
                          key="ds_reading")
        if st.button("Use this reading", key="ds_use_reading") and \
                (picked != current or reading.get("ambiguous")):
            start_draft(draft["path"], draft.get("name", ""), draft.get("description", ""),
                        draft.get("allow_pickle", False), draft.get("upload_folder"), picked)
            st.rerun()


def review_draft(settings: Settings, store: Store, entries: list[CatalogEntry],
                 draft: dict) -> None:
    """Step 2: what the scan found, a few images per class, the editable card; saving
    validates the folder and registers the card, or shows why it cannot."""
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
    choose_reading(draft)
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
        drop_draft(settings, remove_data=True)
        st.rerun()
    if save_clicked:
        ss = st.session_state
        new_name = ss["rev_name"].strip()
        problem = ("give the dataset a name" if not new_name
                   else name_problem(new_name, entries, settings))
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
                                          new_only=True,
                                          interpretation=draft.get("interpretation"))
            if result["status"] == "registered":
                drop_draft(settings, remove_data=False)
                st.session_state["ds_flash"] = result
                st.session_state["ds_saved"] = result["name"]  # after_save, next run
                st.rerun()
            st.session_state["ds_report"] = result
    if st.session_state.get("ds_report"):
        show_report(st.session_state["ds_report"])
