"""Small helpers shared by the pages: settings + store, formatting, the metrics row.

Not a page itself (st.navigation in app.py lists the pages explicitly).
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import streamlit as st

from core.config.settings import Settings
from core.store.db import Store
from core.store.errors import StoreError
from core.store.home import open_home


def _run_through_app_entry() -> None:
    """A page opened by its URL (``/datasets``) before anyone opened ``/`` is run by Streamlit's
    legacy pages-folder mode, without app.py (no menu, no sidebar, no page config), because this
    package is named ``pages/``. Leave that mode and rerun: app.py's st.navigation then runs the
    same page (pages are keyed by URL path in both modes)."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


_run_through_app_entry()

METRIC_LABELS = {"auc": "AUC", "accuracy": "Accuracy", "sensitivity": "Sensitivity",
                 "specificity": "Specificity", "f1_macro": "F1 (macro)",
                 "dice": "Dice (mean)", "hd95": "HD95 (mm)", "map50": "mAP@0.5",
                 "image_auc": "Image AUC", "rouge_l": "ROUGE-L",
                 "baseline_rouge_l": "ROUGE-L of the most common report", "bleu4": "BLEU-4"}
STATUS_TEXT = {
    "queued": "Queued", "running": "Running", "awaiting_approval": "Awaiting approval",
    "succeeded": "Succeeded", "failed": "Failed", "no_dataset": "No dataset",
    "cancelled": "Cancelled", "stopped": "Stopped", "interrupted": "Interrupted",
}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~$])")


def context() -> tuple[Settings, Store]:
    """Settings (M3B_HOME honoured) and the shared store; an unusable home or a damaged store
    stops the page with what is wrong and what to do."""
    try:
        return open_home()
    except (StoreError, ValueError) as exc:
        st.error(str(exc))
        st.stop()
        raise


def md_escape(text: str) -> str:
    """Show text literally inside st.markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text or ""))


def read_json(path: str | Path) -> dict:
    """A JSON file as a dict; {} when missing or unreadable (e.g. being written)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def job_result(job: dict) -> dict:
    try:
        return json.loads(job.get("result") or "{}") or {}
    except ValueError:
        return {}


def fmt_when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "—"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "—"
    if seconds < 1:
        return "<1 s"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min" if sec == 0 else f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_num(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def elapsed(job: dict) -> float | None:
    start = job.get("started_at")
    if not start:
        return None
    return (job.get("finished_at") or time.time()) - start


def job_label(job: dict) -> str:
    """One line naming a job in a select box."""
    request = job["request"] if len(job["request"]) <= 60 else job["request"][:57] + "..."
    status = STATUS_TEXT.get(job['status'], job['status']).lower()
    return f"{fmt_when(job['created_at'])} · {status} · {request}"


def metrics_row(metrics: dict, ci95: dict) -> None:
    """Test-set metrics as st.metric tiles, each with its 95% confidence interval."""
    shown = [(k, v) for k, v in METRIC_LABELS.items() if isinstance(metrics.get(k), (int, float))]
    if not shown:
        return
    cols = st.columns(len(shown))
    for col, (key, label) in zip(cols, shown):
        ci = ci95.get(key) or []
        ci_text = f"95% CI {fmt_num(ci[0])} – {fmt_num(ci[1])}" if len(ci) == 2 else "95% CI n/a"
        with col:
            st.metric(label, fmt_num(metrics.get(key)), border=True,
                      help="On the held-out test set, scored by M3Builder's own evaluator; "
                           "the interval is a 95% bootstrap confidence interval.")
            st.caption(ci_text)
