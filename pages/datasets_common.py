"""What the Datasets page's parts share: display labels, the pickle checkbox's text, inline code
and the validation report of a registration or an edit.

Not a page itself (st.navigation in app.py lists the pages explicitly). May import: core,
pages.ui_common.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.datasets.datacards import TASKS
from pages.ui_common import md_escape

SOURCE_TEXT = {"builtin": "Built-in", "registered": "Registered", "demo": "Demo"}
TASK_TEXT = {t: t.replace("_", " ").capitalize() for t in TASKS}
PICKLE_LABEL = "Trust this folder's pickle files (.pck/.pkl)"
PICKLE_HELP = ("Reading a Python pickle can run any code inside it. Tick only for local data you "
               "made or got from a source you trust; otherwise pickled volumes are refused.")


def code(text) -> str:
    """``text`` as an inline code span (shown literally; no markdown escapes needed)."""
    return "`" + str(text).replace("`", "'") + "`"


def show_report(result: dict, saved_word: str = "Saved",
                where: str = "It is in the catalog.") -> None:
    """Registration's validation report: verdict, errors (where + fix), warnings, counts."""
    ok = result["status"] in ("registered", "updated")
    if ok:
        st.success(f"{saved_word} **{md_escape(result['name'])}** "
                   f"({TASK_TEXT.get(result.get('task') or '', result.get('task') or '')}). "
                   + where, icon=":material/check_circle:")
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
