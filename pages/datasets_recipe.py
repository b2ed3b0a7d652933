"""The Datasets page's targets and recipe of a registered card: its targets (task, classes,
counts, coverage), and for a target read by a recipe, a mapping form — each field of the
recipe's record source with its part (a select box), the value map (raw value -> class, empty
to leave those rows out), the image field's matching — with a live preview of what the folder
reads as. "Save recipe" re-registers the card by the recipe (core.datasets.registration
.register_dataset, as ``crew register --recipe``); on an error nothing is written.

Not a page itself (st.navigation in app.py lists the pages explicitly). May import: core,
pages.ui_common, pages.datasets_common. The logic is core.datasets.records.preview's.
"""
from __future__ import annotations

import hashlib
import json

import pandas as pd
import streamlit as st

from core.config.settings import Settings
from core.datasets.catalog import CatalogEntry
from core.datasets.records.preview import (FIELD_ROLES, form_fields, preview_recipe,
                                           recipe_from_roles, recipe_source, value_rows,
                                           values_of_rows)
from core.datasets.records.recipe import RecipeError
from core.datasets.registration import register_dataset
from core.store.db import Store
from pages.datasets_common import TASK_TEXT, code, show_report
from pages.ui_common import md_escape

KEPT_FIELDS = ("modality", "anatomy", "license", "provenance")   # the user's edits survive


def _short(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


@st.cache_resource(max_entries=4, ttl=120, show_spinner=False)
def _source(root: str, recipe_json: str, description: str):
    """The recipe's record source (read once per folder and source, shared, never changed)."""
    return recipe_source(root, json.loads(recipe_json), description)


@st.cache_data(max_entries=8, ttl=120, show_spinner=False)
def _fields(root: str, recipe_json: str, description: str) -> list[dict]:
    return form_fields(_source(root, recipe_json, description), json.loads(recipe_json))


@st.cache_data(max_entries=32, ttl=60, show_spinner=False)
def _preview(root: str, recipe_json: str, description: str) -> dict:
    return preview_recipe(root, json.loads(recipe_json), description)


def _counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in list(counts.items())[:8]) + (
        " …" if len(counts) > 8 else "")


def _targets_table(targets: list[dict]) -> None:
    st.dataframe(pd.DataFrame([{
        "Target": str(t.get("name") or t.get("id") or "—"),
        "Task": TASK_TEXT.get(t.get("task", ""), str(t.get("task", ""))),
        "Classes": ", ".join(map(str, t.get("classes") or [])) or "—",
        "Counts": _counts(t.get("class_counts") or {}) or "—",
        "Coverage": float(t.get("coverage") or 0.0),
        "Split": str(t.get("split") or "—"),
        "Recipe": "✓" if t.get("recipe") else "—",
    } for t in targets]), hide_index=True, width="stretch", column_config={
        "Coverage": st.column_config.ProgressColumn(
            format="percent", min_value=0.0, max_value=1.0,
            help="Share of the folder's images this target labels"),
        "Recipe": st.column_config.TextColumn(
            help="✓ read by a recipe you can edit below; — read by a layout reader")})


def _show_preview(preview: dict) -> None:
    if not preview["ok"]:
        st.error("This recipe reads nothing usable: " + md_escape(preview["error"]),
                 icon=":material/error:")
        return
    a, b, c, d = st.columns(4)
    a.metric("Coverage", f"{preview['coverage']:.0%}", border=True,
             help="Labelled images / images in the folder")
    b.metric("Labelled images", f"{preview['num_samples']} / {preview['num_images']}",
             border=True)
    c.metric("Patients", preview["patients"], border=True)
    d.metric("Classes", len(preview["classes"]), border=True)
    if preview["class_counts"]:
        st.dataframe(pd.DataFrame([{"Class": str(k), "Images": v}
                                   for k, v in preview["class_counts"].items()]),
                     hide_index=True, width="stretch")
    st.caption(f"{TASK_TEXT.get(preview['task'], preview['task'])}: "
               f"{md_escape(_counts(preview['class_counts'])) or 'no classes'}; patients by "
               f"{md_escape(preview['grouping'])}; split {md_escape(preview['split'])}.")
    st.dataframe(pd.DataFrame(preview["examples"]).rename(columns={
        "file": "File", "label": "Label", "patient": "Patient", "split": "Split"}),
        hide_index=True, width="stretch")
    for note in preview["notes"]:
        st.caption(md_escape(note))


def _role_boxes(fields: list[dict], prefix: str) -> dict[str, str]:
    """One select box per field: its part in the recipe."""
    options = list(FIELD_ROLES)
    parts: dict[str, str] = {}
    cols = st.columns(3)
    for i, f in enumerate(fields):
        examples = ", ".join(map(str, f["examples"])) or "no values"
        with cols[i % 3]:
            parts[f["name"]] = st.selectbox(
                md_escape(f["name"]) or "(unnamed field)", options,
                index=options.index(f["part"]),
                format_func=FIELD_ROLES.get, key=f"{prefix}_f_{_short(f['name'])}",
                help=md_escape(f"Looks like: {f['kind']}; {f['filled']} filled; e.g. "
                               f"{examples[:120]}"))
    return parts


def _value_editor(rows: list[dict], key: str) -> dict:
    """The value map as an editable table; returns the edited map."""
    frame = pd.DataFrame([{"Value": str(r["value"]), "Means": str(r["meaning"]),
                           "Rows": int(r["rows"]), "Reads as": r["reads_as"] or ""}
                          for r in rows])
    edited = st.data_editor(frame, key=key, hide_index=True, width="stretch",
                            num_rows="fixed", disabled=["Value", "Means", "Rows"],
                            column_config={"Reads as": st.column_config.TextColumn(
                                help="The class these rows read as; empty: leave them out")})
    return values_of_rows([{"value": v, "reads_as": r}
                           for v, r in zip(edited["Value"], edited["Reads as"])])


def recipe_form(settings: Settings, store: Store, entry: CatalogEntry) -> None:
    """The card's targets and, for a chosen target with a recipe, the mapping form."""
    card = entry.card
    slug = card.slug()
    st.markdown("**Targets and recipe**")
    flash = st.session_state.pop("rcp_flash", None)
    if flash:
        show_report(flash, "Saved the recipe of", "The card now reads the folder by it.")
    targets = [t for t in card.targets if isinstance(t, dict)]
    if not targets:
        st.caption("This card lists no targets (it was registered before targets were kept); "
                   "re-register its folder to list them.")
        return
    _targets_table(targets)
    editable = [t for t in targets if isinstance(t.get("recipe"), dict)]
    if not editable:
        st.caption("None of these targets is read by a recipe, so there is no mapping to "
                   "edit; the layout reader's reading is shown above.")
        return
    if not entry.available:
        st.caption(f"The folder {code(entry.dataset_path)} is not there; its recipe cannot "
                   "be previewed.")
        return
    ids = [str(t.get("id") or t.get("name")) for t in editable]
    pick_key = f"rcp_pick_{slug}_{_short('|'.join(ids))}"   # afresh when the targets change
    tid = st.selectbox("Target to edit", ids, key=pick_key, format_func=lambda i: next(
        str(t.get("name") or i) for t in editable if str(t.get("id") or t.get("name")) == i))
    base = next(t for t, i in zip(editable, ids) if i == tid)["recipe"]
    root, base_json = str(entry.dataset_path), json.dumps(base, sort_keys=True)
    prefix = f"rcp_{slug}_{_short(tid)}"
    try:
        fields = _fields(root, base_json, card.description)
    except RecipeError as exc:
        st.error(md_escape(str(exc)), icon=":material/error:")
        return
    st.caption(f"The fields of {code(base.get('source', ''))}: choose each one's part. One "
               "field names the images, one (or, for findings and reports, several) is the "
               "target; the preview below follows every change.")
    parts = _role_boxes(fields, prefix)
    match = st.radio("The image field gives", ["path", "id"],
                     index=["path", "id"].index(base.get("match", "path")), horizontal=True,
                     key=f"{prefix}_match", format_func={
                         "path": "a path, file name or stem",
                         "id": "an id in the file names (one row, several images)"}.get)
    recipe, error = None, ""
    try:
        first = recipe_from_roles(base, parts, match=match)
        # the name and value map start afresh for another target, and after a save (a new
        # base): an editor whose data changed under its key would rerun the page again
        sig = _short("|".join([first["role"], *first["fields"], base_json]))
        name = st.text_input("Target name", value=first["name"], key=f"{prefix}_name_{sig}")
        rows = value_rows(_source(root, base_json, card.description), first)
        values = None
        if rows:
            st.caption("Value map: what each raw value reads as. Type a class name, or empty "
                       "a cell to leave those rows out.")
            values = _value_editor(rows, f"{prefix}_values_{sig}")
        recipe = recipe_from_roles(base, parts, values=values, name=name.strip(), match=match)
    except RecipeError as exc:
        error = str(exc)
    st.markdown("**Preview**")
    if error:
        st.error("Not a usable recipe: " + md_escape(error), icon=":material/error:")
        preview = {"ok": False}
    else:
        with st.spinner("Reading the folder by this recipe…"):
            preview = _preview(root, json.dumps(recipe, sort_keys=True), card.description)
        _show_preview(preview)
    st.caption("Saving re-registers this card by the recipe (as `crew register --recipe`): "
               "this target becomes the card's first, its other targets stay. Only the "
               "datacard and its validation report are rewritten, never the data; on an "
               "error nothing changes.")
    if st.button("Save recipe", key=f"{prefix}_save", type="primary",
                 icon=":material/save:", disabled=not preview.get("ok")):
        with st.spinner("Re-registering the card…"):
            result = register_dataset(
                settings, store, root, card.name, card.description, source=card.source,
                allow_pickle=card.allow_pickle, recipe=recipe,
                fields={k: getattr(card, k) for k in KEPT_FIELDS if getattr(card, k)})
        if result["status"] == "registered":
            _preview.clear()
            st.session_state["rcp_flash"] = result
            st.rerun()
        show_report(result)
