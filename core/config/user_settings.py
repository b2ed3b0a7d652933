"""Settings the user saves from the Settings page: ``<home>/settings.json``. Non-secret only.

What is kept: the language model (``autopilot`` or a litellm/CrewAI model string), an optional
OpenAI-compatible base URL, the *name* of the environment variable that holds the API key, and
the upload limits. API keys themselves are never accepted, stored or logged: a value that looks
like a key is refused with a message saying where keys go (an environment variable, or
``.streamlit/secrets.toml``, whose top-level entries Streamlit copies into the environment).

Precedence (core.config.settings.get_settings): a command-line argument (``--llm``) > the
environment (``M3B_LLM``, ``M3B_LLM_BASE_URL``, ``M3B_LLM_KEY_ENV``) > ``<home>/settings.json`` >
defaults.
The home folder itself comes from ``--home`` > ``$M3B_HOME`` > ``~/.m3builder`` (it cannot be
kept inside itself).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from core.config.secret_shapes import KEY_PREFIX

SETTINGS_FILE = "settings.json"
AUTOPILOT = "autopilot"
MiB = 1024 * 1024

UPLOAD_DEFAULTS = {"upload_max_mb": 2048,            # the zip as uploaded
                   "upload_max_unpacked_mb": 10240,  # everything it unpacks to
                   "upload_max_files": 200_000,      # entries in the zip
                   "upload_max_ratio": 250}          # unpacked / packed bytes (zip bombs)
UPLOAD_BOUNDS = {"upload_max_mb": (1, 1_048_576), "upload_max_unpacked_mb": (1, 10_485_760),
                 "upload_max_files": (1, 10_000_000), "upload_max_ratio": (2, 100_000)}
UPLOAD_LABELS = {"upload_max_mb": "largest zip (MB)",
                 "upload_max_unpacked_mb": "largest unpacked size (MB)",
                 "upload_max_files": "most files in a zip",
                 "upload_max_ratio": "highest compression ratio"}
DEFAULTS = {"llm": AUTOPILOT, "llm_base_url": "", "llm_key_env": "", **UPLOAD_DEFAULTS}

MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+@/\-]{0,199}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# a key pasted where a name belongs: the known key prefixes (core.config.secret_shapes) or any
# long unbroken token
KEY_LIKE = re.compile(KEY_PREFIX.pattern + r"|^[A-Za-z0-9_\-]{40,}$")
# the environment variable a provider's client reads its key from (litellm / CrewAI names)
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
    "azure": "AZURE_API_KEY", "bedrock": "AWS_ACCESS_KEY_ID", "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY", "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY", "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY", "xai": "XAI_API_KEY",
}
NO_KEY_PROVIDERS = ("ollama", "ollama_chat", "hosted_vllm", "lm_studio")


class SettingsError(ValueError):
    """Settings that cannot be saved; the message lists each problem and its fix."""


def settings_path(home: str | os.PathLike) -> Path:
    return Path(home) / SETTINGS_FILE


def provider_of(model: str) -> str:
    model = (model or "").strip()
    if not model or model == AUTOPILOT:
        return ""
    return model.split("/", 1)[0].lower() if "/" in model else "openai"


def default_key_env(model: str) -> str:
    """The variable the model's provider reads its key from ('' when it needs none)."""
    provider = provider_of(model)
    if not provider or provider in NO_KEY_PROVIDERS:
        return ""
    return PROVIDER_KEY_ENV.get(provider, f"{provider.upper()}_API_KEY")


def _key_refusal(field: str) -> str:
    return (f"{field} looks like an API key. Keys are never stored by M3Builder: put the key in "
            "an environment variable (e.g. OPENAI_API_KEY) or in .streamlit/secrets.toml, and "
            "give only the variable's name here")


def check_model(value: str) -> str | None:
    """Why a model string is unusable, or None."""
    if value == AUTOPILOT:
        return None
    if KEY_LIKE.search(value):
        return _key_refusal("The model")
    if not MODEL_RE.match(value):
        return (f"{value!r} is not a model string: use provider/model with no spaces, e.g. "
                "openai/gpt-4o, anthropic/claude-3-5-sonnet-20241022 or ollama/llama3.1")
    return None


def check_base_url(value: str) -> str | None:
    if not value:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError on a bad port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"{value!r} is not an http(s) URL: use e.g. http://127.0.0.1:8000/v1 for a "
                "vLLM or LM Studio server")
    if parts.username or parts.password or parts.query or parts.fragment:
        return ("The base URL must not carry credentials or a query string (user:password@, "
                "?key=...): they would be stored in plain text. Give the bare URL and put the "
                "key in an environment variable or .streamlit/secrets.toml")
    del port  # parsed only to reject a malformed port
    return None


def check_key_env(value: str) -> str | None:
    if not value:
        return None
    if KEY_LIKE.search(value):
        return _key_refusal("The key variable")
    if not ENV_NAME_RE.match(value):
        return (f"{value!r} is not an environment variable name: letters, digits and _ only, "
                "e.g. OPENAI_API_KEY")
    return None


def clean_settings(values: Mapping) -> tuple[dict, list[str]]:
    """(the valid values, a problem per invalid one). Unknown keys are problems too."""
    clean: dict = {}
    problems: list[str] = []
    for key, value in values.items():
        if key not in DEFAULTS:
            problems.append(f"unknown setting {key!r} (known: {', '.join(DEFAULTS)})")
            continue
        if key in UPLOAD_DEFAULTS:
            low, high = UPLOAD_BOUNDS[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    value != int(value) or not low <= value <= high:
                problems.append(f"{UPLOAD_LABELS[key]} must be a whole number from {low} to "
                                f"{high}, not {value!r}")
                continue
            clean[key] = int(value)
            continue
        if not isinstance(value, str):
            problems.append(f"{key} must be text, not {type(value).__name__}")
            continue
        value = value.strip()
        check = {"llm": check_model, "llm_base_url": check_base_url,
                 "llm_key_env": check_key_env}[key]
        if key == "llm" and not value:
            value = AUTOPILOT
        problem = check(value)
        if problem:
            problems.append(problem)
        else:
            clean[key] = value
    return clean, problems


def load_saved(home: str | os.PathLike) -> tuple[dict, list[str]]:
    """The saved settings that are valid, and what is wrong with the file (if anything)."""
    path = settings_path(home)
    if not path.exists():
        return {}, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {}, [f"{path} cannot be read ({exc}); the defaults apply. Save the Settings "
                    "page again to replace it"]
    if not isinstance(data, dict):
        return {}, [f"{path} must hold a JSON object; the defaults apply"]
    clean, problems = clean_settings(data)
    return clean, [f"{path}: {p}; ignored" for p in problems]


def save_settings(home: str | os.PathLike, values: Mapping) -> dict:
    """Validate ``values`` and write them (merged over what is saved) atomically. On any
    problem nothing is written and SettingsError lists every problem."""
    clean, problems = clean_settings(values)
    if problems:
        raise SettingsError("; ".join(problems))
    saved, _ = load_saved(home)
    merged = {**saved, **clean}
    if merged.get("upload_max_unpacked_mb", UPLOAD_DEFAULTS["upload_max_unpacked_mb"]) < \
            merged.get("upload_max_mb", UPLOAD_DEFAULTS["upload_max_mb"]):
        raise SettingsError("the largest unpacked size must be at least the largest zip size")
    path = settings_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(merged, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return merged


def key_status(model: str, key_env: str = "", environ: Mapping[str, str] | None = None,
               secrets_names: Iterable[str] = ()) -> dict:
    """Where the model's API key would come from. Never holds the key itself:
    {"needed", "env", "found", "where" ("secrets.toml" | "environment" | ""), "message"}."""
    environ = os.environ if environ is None else environ
    provider = provider_of(model)
    env = key_env or default_key_env(model)
    status = {"needed": bool(env), "env": env, "found": False, "where": "", "message": ""}
    if not provider:
        status["message"] = "Autopilot calls no language model and needs no key."
        return status
    if not env:
        status["message"] = (f"{provider} models run locally and need no key (give a key "
                             "variable only if your server asks for one).")
        return status
    if env in set(secrets_names):
        status.update(found=True, where="secrets.toml",
                      message=f"Key found in .streamlit/secrets.toml as {env}.")
    elif environ.get(env):
        status.update(found=True, where="environment", message=f"Key found in ${env}.")
    else:
        status["message"] = (f"No key found in ${env}. Set it in the environment of the "
                             f"server (export {env}=...) or add {env} = \"...\" to "
                             ".streamlit/secrets.toml, then restart the app.")
    return status
