"""M3Builder's web app: build medical imaging models by asking in plain language.

    streamlit run app.py            (M3B_HOME picks the home folder; default ~/.m3builder)

Pages are listed explicitly below; helpers shared by the pages live in ``pages/ui_common.py``.
"""
from core.config.bootstrap import apply

apply()  # first: the process set-up before anything else loads

from pathlib import Path

import streamlit as st

from core import RESEARCH_ONLY
from core.config.settings import AUTOPILOT
from core.jobs.lifecycle import reap_orphans
from core.jobs.standby import ensure_standby
from core.store.errors import StoreError
from core.store.home import open_home

# a local file: a ":material/...:" page icon makes the browser fetch the favicon from a font host
ICON = Path(__file__).resolve().parent / "assets" / "favicon.png"
st.set_page_config(page_title="M3Builder", page_icon=ICON, layout="wide")

try:  # an unusable home or a damaged store: say what is wrong and what to do, no traceback
    settings, store = open_home()
except (StoreError, ValueError) as exc:
    st.error(str(exc))
    st.stop()
reap_orphans(store)  # jobs whose worker died show as interrupted (resumable)
ensure_standby(settings)  # a warm worker waits for the next request (core/jobs/standby.py)

pages = [
    st.Page("pages/chat.py", title="Build a model", icon=":material/chat:", default=True),
    st.Page("pages/datasets.py", title="Datasets", icon=":material/dataset:"),
    st.Page("pages/preview.py", title="Preview", icon=":material/visibility:"),
    st.Page("pages/training.py", title="Training", icon=":material/monitoring:"),
    st.Page("pages/models.py", title="Models", icon=":material/model_training:"),
    st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
]
current = st.navigation(pages)

with st.sidebar:
    st.markdown("### M3Builder")
    st.caption("Medical imaging models from a plain-language request.")
    if settings.llm == AUTOPILOT:
        st.markdown("**Mode:** Autopilot")
        st.caption("Deterministic agents; no language model is called.")
    else:
        st.markdown(f"**Mode:** LLM agents  \n`{settings.llm}`")
    st.markdown("**Home folder**")
    st.code(str(settings.home), language=None)
    st.caption("Only metadata is ever sent to an LLM — never images or patient data. "
               "Change the model on the Settings page.")
    st.info(RESEARCH_ONLY, icon=":material/info:")

current.run()
