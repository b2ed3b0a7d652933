"""Settings: the language model and where its key comes from, the home folder, upload limits.

Non-secret settings are saved in ``<home>/settings.json`` (core.config.user_settings); keys never
are.
"""
from __future__ import annotations

import os

import streamlit as st

from core import RESEARCH_ONLY
from core.config.user_settings import (AUTOPILOT, UPLOAD_BOUNDS, UPLOAD_DEFAULTS, UPLOAD_LABELS,
                                       SettingsError, default_key_env, key_status, load_saved,
                                       save_settings)
from crew.llm import describe
from runtime import landlock
from pages.ui_common import context, md_escape

MODES = ("Autopilot (no language model)", "A language model (LLM agents)")
SOURCE_TEXT = {"argument": "given on the command line",
               "environment": "set by `M3B_LLM` in the server's environment",
               "settings file": "saved on this page",
               "default": "the default"}
ENV_OVERRIDES = (("M3B_LLM", "the model"), ("M3B_LLM_BASE_URL", "the base URL"),
                 ("M3B_LLM_KEY_ENV", "the key variable"))


def code(text) -> str:
    """``text`` as an inline code span (shown literally; no markdown escapes needed)."""
    return "`" + str(text).replace("`", "'") + "`"


def sentence_case(label: str) -> str:
    """A label's first letter in capitals, the rest as written (units stay "MB", not "mb")."""
    return label[:1].upper() + label[1:]


def in_effect(value: str, when_empty: str) -> str:
    """What a text field's setting is now: its value, or what applies while it is empty."""
    return f"In effect: {code(value)}." if value else f"Empty field: {when_empty}."


def _secret_names() -> set[str]:
    """Top-level names in .streamlit/secrets.toml (values are never read here)."""
    try:
        return {str(k) for k in st.secrets.keys()}
    except Exception:  # no secrets file, or one that does not parse
        return set()


settings, _store = context()
saved, problems = load_saved(settings.home)

st.title("Settings")
st.info("**Only metadata is ever sent to a language model**: datacard text, file and folder "
        "names, counts, shapes, plans and tool summaries. Never images, pixels or DICOM patient "
        "tags. Autopilot sends nothing anywhere.", icon=":material/shield:")
flash = st.session_state.pop("settings_flash", None)
if flash:
    st.success(flash, icon=":material/check_circle:")
for problem in problems:
    st.warning(md_escape(problem), icon=":material/warning:")

# ----------------------------------------------------------------------------- language model
st.subheader("Language model")
if settings.llm == AUTOPILOT:
    st.markdown("**In use:** Autopilot — deterministic agents; no language model is called.")
else:
    st.markdown(f"**In use:** LLM agents with {code(describe(settings.llm))}"
                + (f" at {code(settings.llm_base_url)}" if settings.llm_base_url else ""))
st.caption(f"Source: {SOURCE_TEXT.get(settings.llm_source, settings.llm_source)}. Precedence: "
           "the command line (`--llm`) > the server's environment (`M3B_LLM`, "
           "`M3B_LLM_BASE_URL`, `M3B_LLM_KEY_ENV`) > what is saved here "
           f"({code(settings.settings_path)}) > Autopilot.")
st.caption(f"LLM agents' bounds per role: {settings.max_actions} tool calls, "
           f"{settings.role_time_limit_s / 60:.0f} min, {settings.llm_retries} retries of a failed "
           f"LLM call ({settings.llm_backoff_s:g} s backoff, doubling), "
           f"{settings.llm_timeout_s:.0f} s per call; then the role's autopilot routine takes "
           "over. Agent scripts run " + ("confined by Landlock." if landlock.abi_version() >= 1
                                         else "**unconfined: this kernel has no Landlock** "
                                         "(they are refused unless "
                                         "`M3B_ALLOW_UNCONFINED_SCRIPTS=1`)."))
for var, what in ENV_OVERRIDES:
    if os.environ.get(var, "").strip():
        st.warning(f"`{var}` is set in the server's environment and overrides {what} saved "
                   "here. Unset it and restart the app to use this page's choice.",
                   icon=":material/warning:")

saved_llm = saved.get("llm", AUTOPILOT)
saved_model = "" if saved_llm == AUTOPILOT else saved_llm
with st.form("llm_settings"):
    mode = st.radio("Agents", MODES, index=int(saved_llm != AUTOPILOT), key="set_mode",
                    help="Autopilot runs the four roles deterministically and is what an LLM "
                         "must beat. LLM agents run the same tools through CrewAI.")
    # no placeholders: a grey example in an empty field reads like a value that is set
    model = st.text_input("Model", value=saved_model, key="set_model",
                          help="A litellm / CrewAI model string: provider/model, or "
                               "openai/<name> with a base URL for vLLM / LM Studio / a "
                               "hospital gateway.")
    st.caption(in_effect("" if settings.llm == AUTOPILOT else settings.llm,
                         "Autopilot is in effect (no language model)")
               + " Examples: `openai/gpt-4o`, `anthropic/claude-3-5-sonnet-20241022`, "
                 "`ollama/llama3.1`.")
    saved_base = saved.get("llm_base_url", "")
    base_url = st.text_input("Base URL (optional)", value=saved_base, key="set_base_url",
                             help="An OpenAI-compatible server. No credentials in the URL.")
    st.caption(in_effect(settings.llm_base_url, "the provider's own address is used")
               + " Example: `http://127.0.0.1:8000/v1` for a server on this machine.")
    saved_key_env = saved.get("llm_key_env", "")
    usual = default_key_env(settings.llm)
    key_env = st.text_input("Environment variable holding the API key (optional)",
                            value=saved_key_env, key="set_key_env",
                            help="Only the variable's name is stored. A top-level entry of "
                                 ".streamlit/secrets.toml counts as a variable.")
    st.caption(in_effect(settings.llm_key_env,
                         f"the provider's usual variable, {code(usual)}, is read" if usual
                         else "no key is needed (Autopilot or a local model)")
               + " Examples: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`.")
    save_llm = st.form_submit_button("Save language model", type="primary",
                                     icon=":material/save:")
if save_llm:
    use_llm = mode == MODES[1]
    if use_llm and not model.strip():
        st.error("Not saved: give a model string (e.g. openai/gpt-4o) or choose Autopilot.",
                 icon=":material/error:")
    else:
        values = {"llm": model.strip() if use_llm else AUTOPILOT,
                  "llm_base_url": base_url.strip() if use_llm else "",
                  "llm_key_env": key_env.strip() if use_llm else ""}
        try:
            save_settings(settings.home, values)
        except SettingsError as exc:
            st.error(f"Not saved: {md_escape(exc)}.", icon=":material/error:")
        else:
            st.session_state["settings_flash"] = "Language model settings saved."
            st.rerun()

status = key_status(settings.llm, settings.llm_key_env, secrets_names=_secret_names())
if status["found"]:
    st.success(md_escape(status["message"]) + " The key is never shown, stored or logged.",
               icon=":material/key:")
elif status["needed"]:
    st.warning(md_escape(status["message"]), icon=":material/key_off:")
else:
    st.caption(md_escape(status["message"]))
st.caption("API keys live only in the server's environment or in `.streamlit/secrets.toml` "
           "(kept out of git). M3Builder never stores them, never writes them to logs, and "
           "training processes never inherit them.")

# ----------------------------------------------------------------------------- home folder
st.subheader("Home folder")
st.code(str(settings.home), language=None)
st.caption("Everything M3Builder writes lives here: `store.db`, `datacards/`, `workspace/jobs/`, "
           "`datasets/` (uploaded zips unpack into `datasets/uploads/`), `demo/` and "
           "`settings.json`. Start the app with `M3B_HOME=/path` (or use `--home` on the "
           "command line) to use another folder; it cannot be changed here because these "
           "settings are kept inside it.")

# ----------------------------------------------------------------------------- uploads
st.subheader("Dataset uploads")
server_cap = int(st.get_option("server.maxUploadSize"))
with st.form("upload_settings"):
    cols = st.columns(4)
    chosen = {}
    for col, key in zip(cols, UPLOAD_DEFAULTS):
        low, high = UPLOAD_BOUNDS[key]
        with col:
            chosen[key] = st.number_input(sentence_case(UPLOAD_LABELS[key]), min_value=low,
                                          max_value=high, step=1, key=f"set_{key}",
                                          value=int(getattr(settings, key)))
    save_uploads = st.form_submit_button("Save upload limits", icon=":material/save:")
if save_uploads:
    try:
        save_settings(settings.home, {k: int(v) for k, v in chosen.items()})
    except SettingsError as exc:
        st.error(f"Not saved: {md_escape(exc)}.", icon=":material/error:")
    else:
        st.session_state["settings_flash"] = "Upload limits saved."
        st.rerun()
st.caption(f"Defaults: {UPLOAD_DEFAULTS['upload_max_mb']:,} MB zipped, "
           f"{UPLOAD_DEFAULTS['upload_max_unpacked_mb']:,} MB unpacked, "
           f"{UPLOAD_DEFAULTS['upload_max_files']:,} files, ratio "
           f"{UPLOAD_DEFAULTS['upload_max_ratio']} (zip-bomb guard). The web server itself "
           f"accepts at most {server_cap:,} MB per upload (`server.maxUploadSize` in "
           "`.streamlit/config.toml`); larger data is better copied to the server and "
           "registered by its folder.")

st.divider()
st.info(RESEARCH_ONLY, icon=":material/info:")
