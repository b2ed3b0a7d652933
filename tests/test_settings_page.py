"""The Settings page and the settings it saves (<home>/settings.json): precedence, validation,
where the API key comes from (never the key itself), upload limits."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config.settings import get_settings
from core.datasets.uploads import MiB, UploadLimits
from core.config.user_settings import (SettingsError, clean_settings, default_key_env, key_status,
                                load_saved, save_settings)

APP = Path(__file__).resolve().parent.parent / "app.py"
SECRET = "sk-test-DO-NOT-SHOW-1234567890abcdef"


def run_settings(secrets: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=30)
    for key, value in (secrets or {}).items():
        at.secrets[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/settings.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def everything(at: AppTest) -> str:
    """Every text the page shows, widget values and labels included, markdown escapes
    removed (``\\$OPENAI\\_API\\_KEY`` reads ``$OPENAI_API_KEY``)."""
    parts = [e.value for kind in ("title", "subheader", "markdown", "caption", "info",
                                  "success", "warning", "error", "code") for e in getattr(at, kind)]
    parts += [w.value for w in at.text_input] + [w.label for w in at.text_input]
    return re.sub(r"\\(.)", r"\1", "\n".join(str(p) for p in parts))


def sidebar() -> str:
    """The sidebar's text on the app's first page (a fresh session)."""
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "code", "info")
                     for e in getattr(at.sidebar, kind))


def click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def file_state(settings) -> bytes | None:
    return settings.settings_path.read_bytes() if settings.settings_path.exists() else None


# ------------------------------------------------------------------------------ core
def test_precedence_argument_environment_file_default(settings, monkeypatch):
    assert (settings.llm, settings.llm_source) == ("autopilot", "default")
    save_settings(settings.home, {"llm": "openai/gpt-4o-mini",
                                  "llm_base_url": "http://127.0.0.1:8000/v1",
                                  "llm_key_env": "GATEWAY_KEY"})
    s = get_settings()
    assert (s.llm, s.llm_source, s.llm_base_url, s.llm_key_env) == (
        "openai/gpt-4o-mini", "settings file", "http://127.0.0.1:8000/v1", "GATEWAY_KEY")
    monkeypatch.setenv("M3B_LLM", "anthropic/claude-3-5-sonnet-20241022")
    monkeypatch.setenv("M3B_LLM_BASE_URL", "http://10.0.0.2:9000/v1")
    s = get_settings()
    assert (s.llm, s.llm_source, s.llm_base_url) == (
        "anthropic/claude-3-5-sonnet-20241022", "environment", "http://10.0.0.2:9000/v1")
    s = get_settings(llm="ollama/llama3.1")
    assert (s.llm, s.llm_source) == ("ollama/llama3.1", "argument")


@pytest.mark.parametrize("values, match", [
    ({"llm": SECRET}, "looks like an API key"),
    ({"llm": "gpt 4o please"}, "not a model string"),
    ({"llm_key_env": SECRET}, "looks like an API key"),
    ({"llm_key_env": "my key!"}, "not an environment variable name"),
    ({"llm_base_url": "http://user:secret@host:8000/v1"}, "must not carry credentials"),
    ({"llm_base_url": "http://host:8000/v1?api_key=abc"}, "must not carry credentials"),
    ({"llm_base_url": "ftp://host"}, "not an http"),
    ({"upload_max_mb": 0}, "whole number from 1"),
    ({"upload_max_ratio": "lots"}, "whole number"),
    ({"upload_max_files": True}, "whole number"),
    ({"api_key": "x"}, "unknown setting"),
])
def test_bad_settings_are_refused_and_nothing_is_written(settings, values, match):
    save_settings(settings.home, {"llm": "openai/gpt-4o"})
    before = file_state(settings)
    with pytest.raises(SettingsError, match=match):
        save_settings(settings.home, values)
    assert file_state(settings) == before


def test_any_key_variable_name_is_accepted_and_its_value_scrubbed(settings, monkeypatch):
    """Children start from an allow-list, so the key variable need not be named *KEY*: a
    gateway's GATEWAY_PASSPHRASE_X or GATEWAY works, the job worker is told its name, and
    its value is scrubbed there like any key."""
    from core.config.secrets import scrub_text, worker_env
    save_settings(settings.home, {"llm": "openai/gpt-4o", "llm_key_env": "GATEWAY"})
    assert get_settings().llm_key_env == "GATEWAY"
    monkeypatch.setenv("GATEWAY", "plain-words-but-secret-42")
    env = worker_env(llm="openai/gpt-4o", key_env="GATEWAY")
    assert env["GATEWAY"] == "plain-words-but-secret-42" and env["M3B_LLM_KEY_ENV"] == "GATEWAY"
    monkeypatch.setenv("M3B_LLM_KEY_ENV", "GATEWAY")  # as in the worker
    assert "plain-words-but-secret-42" not in scrub_text("the key plain-words-but-secret-42")


def test_unpacked_limit_must_cover_the_zip_limit(settings):
    with pytest.raises(SettingsError, match="at least the largest zip"):
        save_settings(settings.home, {"upload_max_mb": 500, "upload_max_unpacked_mb": 100})
    assert file_state(settings) is None


def test_a_damaged_settings_file_falls_back_to_defaults(settings):
    settings.settings_path.write_text('{"llm": "sk-abcdefabcdef", "upload_max_mb": 64}')
    saved, problems = load_saved(settings.home)
    assert saved == {"upload_max_mb": 64}
    assert len(problems) == 1 and "API key" in problems[0]
    s = get_settings()
    assert s.llm == "autopilot" and s.upload_max_mb == 64
    assert UploadLimits.from_settings(s).max_zip_bytes == 64 * MiB
    settings.settings_path.write_text("{not json")
    assert load_saved(settings.home)[0] == {} and get_settings().upload_max_mb == 2048


def test_key_status_names_the_variable_never_the_value():
    env = {"OPENAI_API_KEY": SECRET}
    found = key_status("openai/gpt-4o", environ=env)
    assert found["found"] and found["message"] == "Key found in $OPENAI_API_KEY."
    assert SECRET not in json.dumps(found)
    custom = key_status("openai/gpt-4o", "GATEWAY_KEY", environ=env)
    assert not custom["found"] and "GATEWAY_KEY" in custom["message"]
    from_secrets = key_status("anthropic/claude-3-5-sonnet-20241022", environ={},
                              secrets_names={"ANTHROPIC_API_KEY"})
    assert from_secrets["where"] == "secrets.toml"
    assert not key_status("ollama/llama3.1", environ={})["needed"]
    assert not key_status("autopilot", environ={})["needed"]
    assert default_key_env("gpt-4o") == "OPENAI_API_KEY"
    assert default_key_env("groq/llama3-70b") == "GROQ_API_KEY"
    assert clean_settings({"llm": " "})[0] == {"llm": "autopilot"}


def test_custom_key_variable_reaches_the_client(monkeypatch):
    monkeypatch.setenv("GATEWAY_KEY", SECRET)
    from crew.llm import make_llm
    llm = make_llm("openai/gpt-4o", "http://127.0.0.1:9/v1", api_key_env="GATEWAY_KEY")
    assert llm.api_key == SECRET


# ------------------------------------------------------------------------------ page
def test_page_shows_mode_home_privacy_and_sidebar(settings):
    at = run_settings()
    text = everything(at)
    assert at.title[0].value == "Settings"
    assert "Only metadata is ever sent to a language model" in text
    assert "Never images, pixels or DICOM patient tags" in text
    assert str(settings.home) in [c.value for c in at.code]
    assert "Autopilot" in text and "M3B_HOME" in text
    assert "Precedence" in text and "settings.json" in text
    assert "2048" in str([n.value for n in at.number_input])
    assert "Settings page" in sidebar()


def test_choosing_a_model_saves_it_and_the_key_is_never_shown(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    at = run_settings()
    at.radio(key="set_mode").set_value("A language model (LLM agents)")
    at.text_input(key="set_model").input("openai/gpt-4o")
    at.text_input(key="set_base_url").input("http://127.0.0.1:8000/v1")
    click(at, "Save language model")
    assert json.loads(settings.settings_path.read_text()) == {
        "llm": "openai/gpt-4o", "llm_base_url": "http://127.0.0.1:8000/v1", "llm_key_env": ""}
    s = get_settings()
    assert (s.llm, s.llm_source) == ("openai/gpt-4o", "settings file")
    text = everything(at)
    assert "Language model settings saved." in text
    assert "Key found in $OPENAI_API_KEY." in text
    assert "openai/gpt-4o" in text
    assert SECRET not in text and SECRET not in settings.settings_path.read_text()
    from core.store.db import open_store
    assert SECRET not in json.dumps(open_store(settings.store_path).rows("SELECT * FROM audit"))
    assert "`openai/gpt-4o`" in sidebar()

    at.radio(key="set_mode").set_value("Autopilot (no language model)")
    click(at, "Save language model")
    assert get_settings().llm == "autopilot"


def test_key_from_secrets_toml_is_named_not_shown(settings, monkeypatch):
    save_settings(settings.home, {"llm": "anthropic/claude-3-5-sonnet-20241022"})
    # Streamlit copies top-level secrets into os.environ; make sure the test leaves none behind
    monkeypatch.setenv("ANTHROPIC_API_KEY", "placeholder")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    at = run_settings({"ANTHROPIC_API_KEY": SECRET})
    text = everything(at)
    assert "Key found in .streamlit/secrets.toml as ANTHROPIC_API_KEY." in text
    assert SECRET not in text


def test_missing_key_says_where_to_put_it(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    save_settings(settings.home, {"llm": "openai/gpt-4o"})
    at = run_settings()
    text = everything(at)
    assert "No key found in $OPENAI_API_KEY. Set it in the environment" in text
    assert 'add OPENAI_API_KEY = "..." to .streamlit/secrets.toml' in text


def test_environment_override_is_explained(settings, monkeypatch):
    monkeypatch.setenv("M3B_LLM", "ollama/llama3.1")
    at = run_settings()
    assert any("`M3B_LLM` is set in the server's environment" in w.value for w in at.warning)
    assert "set by `M3B_LLM`" in everything(at)


@pytest.mark.parametrize("model, base_url, key_env, match", [
    ("", "", "", "give a model string"),
    (SECRET, "", "", "looks like an API key"),
    ("openai/gpt-4o", "http://me:pw@host/v1", "", "must not carry credentials"),
    ("openai/gpt-4o", "", "not a name!", "not an environment variable name"),
])
def test_bad_llm_input_changes_nothing(settings, model, base_url, key_env, match):
    save_settings(settings.home, {"llm": "ollama/llama3.1"})
    before = file_state(settings)
    at = run_settings()
    at.radio(key="set_mode").set_value("A language model (LLM agents)")
    at.text_input(key="set_model").input(model)
    at.text_input(key="set_base_url").input(base_url)
    at.text_input(key="set_key_env").input(key_env)
    click(at, "Save language model")
    assert at.error and match in at.error[0].value and "Not saved" in at.error[0].value
    assert file_state(settings) == before
    assert SECRET not in "\n".join(e.value for e in at.error)


def test_upload_limits_are_saved_and_bad_ones_refused(settings):
    at = run_settings()
    at.number_input(key="set_upload_max_mb").set_value(100)
    at.number_input(key="set_upload_max_unpacked_mb").set_value(50)
    click(at, "Save upload limits")
    assert at.error and "at least the largest zip" in at.error[0].value
    assert file_state(settings) is None
    at.number_input(key="set_upload_max_unpacked_mb").set_value(400)
    at.number_input(key="set_upload_max_ratio").set_value(1000)
    click(at, "Save upload limits")
    s = get_settings()
    assert (s.upload_max_mb, s.upload_max_unpacked_mb, s.upload_max_ratio) == (100, 400, 1000)
    assert "Upload limits saved." in everything(at)


def test_unit_labels_keep_their_case_and_no_placeholder_looks_like_a_value(settings):
    """Labels say "(MB)", not "(mb)"; the LLM fields have no grey example text that reads like
    a setting: they are empty, and a caption says what is in effect while they are."""
    at = run_settings()
    labels = [n.label for n in at.number_input]
    assert "Largest zip (MB)" in labels and "Largest unpacked size (MB)" in labels
    assert not [label for label in labels if re.search(r"\((?:mb|gb|kb|ms|mm)\)", label)]
    for key in ("set_model", "set_base_url", "set_key_env"):
        field = at.text_input(key=key)
        assert field.value == "" and field.proto.placeholder == "", key
    captions = [re.sub(r"\\(.)", r"\1", c.value) for c in at.caption]
    assert any(c.startswith("Empty field: Autopilot is in effect (no language model).")
               and "`openai/gpt-4o`" in c for c in captions), captions
    assert any(c.startswith("Empty field: the provider's own address is used.") for c in captions)
    assert any(c.startswith("Empty field: no key is needed") for c in captions)

    save_settings(settings.home, {"llm": "openai/gpt-4o"})
    at = run_settings()
    assert at.text_input(key="set_model").value == "openai/gpt-4o"
    captions = [re.sub(r"\\(.)", r"\1", c.value) for c in at.caption]
    assert any(c.startswith("In effect: `openai/gpt-4o`.") for c in captions), captions
    assert any(c.startswith("Empty field: the provider's usual variable, `OPENAI_API_KEY`, is "
                            "read.") for c in captions), captions
