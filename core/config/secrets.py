"""Secrets in the environment (API keys, tokens, passwords, credentials in URLs): which values
hold them, taking them out of any text that leaves the process (prompts, tool results, the event
log, errors), and the environments of child processes, which are built from an allow-list.

* ``secret_values()``: the values of the parent's variables that look secret, longest first:
  a variable whose *name* says so (``SECRET_ENV``), the variable ``M3B_LLM_KEY_ENV`` names, or a
  *value* that looks like a credential whatever its name (``core.config.secret_shapes``: a
  token, a JWT, a URL's ``user:password``). Cached until ``os.environ`` changes.
* ``scrub(text)``: ``text`` with each of them replaced (their JSON-escaped form too).
* ``child_env(extra)``: what every template child and agent script starts with: only the
  variables named in ``CHILD_NAMES`` / ``CHILD_PREFIXES`` (locale, PATH, the Python variables,
  thread counts, GPU selection, torch distributed, telemetry off), each dropped when its value
  looks secret (a URL keeps its address, not its credentials), plus ``extra``. HOME and
  TMPDIR come only from the caller's ``extra``; the children's own M3B variables
  (``M3B_WORKSPACE``, ``M3B_DATASET_DIR``) too. Never the parent's environment minus a deny-list.
* ``worker_env(extra, llm, key_env)``: the job worker's (``python -m crew.worker``, a process of
  the app's own code): ``child_env``'s plus what the worker reads (``WORKER_NAMES``: the M3B
  settings, HOME, proxies and CA bundles, CrewAI's storage), and the LLM's key variable(s) by
  name — only when the job uses an LLM.
"""
from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from core.config.bootstrap import QUIET_ENV
from core.config.secret_shapes import MIN_SECRET_CHARS, SECRET_ENV, value_secrets
from core.config.settings import REPO_ROOT
from core.config.user_settings import AUTOPILOT, default_key_env, provider_of

REMOVED = "[secret removed]"
KEY_ENV_SETTING = "M3B_LLM_KEY_ENV"  # its value is the *name* of the key's variable
# settings whose value is never a secret even though their name matches SECRET_ENV
NOT_SECRET_NAMES = frozenset({KEY_ENV_SETTING, "TOKENIZERS_PARALLELISM"})

THREAD_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS",
                "BLIS_NUM_THREADS", "TORCH_NUM_THREADS", "MKL_THREADING_LAYER")
GPU_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
             "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_HOME",
             "PYTORCH_CUDA_ALLOC_CONF", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "LD_LIBRARY_PATH")
# torchrun sets these in its own children; passed on when a launcher above us set them
DISTRIBUTED_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                     "LOCAL_WORLD_SIZE", "GLOO_SOCKET_IFNAME")
# the test suite's guard that refuses the store to a job's children (tests/conftest.py)
TEST_HOOK_NAMES = ("M3B_TEST_STORE_GUARD",)
CHILD_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUTF8",
    "VIRTUAL_ENV", *THREAD_NAMES, *GPU_NAMES, *DISTRIBUTED_NAMES, *TEST_HOOK_NAMES,
    *QUIET_ENV})  # telemetry and downloads off (core.config.bootstrap)
CHILD_PREFIXES = ("LC_", "NCCL_")

# what the job worker reads besides a child's variables (core.config.settings, core.store.db,
# tools.confinement, runtime.privileges)
WORKER_NAMES = frozenset({
    "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
    "M3B_LLM", "M3B_LLM_BASE_URL", KEY_ENV_SETTING, "M3B_MAX_ACTIONS", "M3B_ROLE_TIME_LIMIT_S",
    "M3B_LLM_RETRIES", "M3B_LLM_BACKOFF_S", "M3B_LLM_TIMEOUT_S", "M3B_ALLOW_UNCONFINED_SCRIPTS",
    "M3B_STORE_BUSY_TIMEOUT_S", "M3B_SANDBOX_UID", "M3B_SANDBOX_GID",
    "M3B_FAULT_PAUSE_BEFORE",  # the fault suite's kill point (core.config.faults)
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
    "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE"})
WORKER_PREFIXES = ("CREWAI_", "LITELLM_", "OTEL_")
# variables the worker needs as they are, credentials included (the LLM gateway, a proxy)
WORKER_URL_NAMES = frozenset({"M3B_LLM_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                              "http_proxy", "https_proxy", "all_proxy"})
# what a provider's client reads besides its key variable (litellm / CrewAI names)
PROVIDER_ENV = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORGANIZATION", "OPENAI_PROJECT"),
    "azure": ("AZURE_API_BASE", "AZURE_API_VERSION", "AZURE_OPENAI_API_KEY",
              "AZURE_OPENAI_ENDPOINT"),
    "bedrock": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"),
    "gemini": ("GOOGLE_API_KEY",),
    "vertex_ai": ("GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_PROJECT", "VERTEXAI_LOCATION"),
    "ollama": ("OLLAMA_API_BASE", "OLLAMA_HOST"),
    "ollama_chat": ("OLLAMA_API_BASE", "OLLAMA_HOST"),
    "hosted_vllm": ("HOSTED_VLLM_API_BASE", "HOSTED_VLLM_API_KEY"),
}

_cache: tuple[tuple, list[str]] | None = None


def _secrets_of(name: str, value: str, key_env: str) -> list[str]:
    """The parts of one variable's value to scrub (none when it does not look secret)."""
    if name in NOT_SECRET_NAMES:
        return []
    found = value_secrets(value)
    if name == key_env or SECRET_ENV.search(name):
        if len(value) >= MIN_SECRET_CHARS:
            found.append(value)
    return found


def secret_values(environ: dict | None = None) -> list[str]:
    """Values (and parts of values) of the environment's secret-looking variables, longest
    first (so a key containing another is replaced whole). Cached for ``os.environ`` until it
    changes."""
    global _cache
    env = os.environ if environ is None else environ
    items = tuple(env.items())
    if environ is None and _cache is not None and _cache[0] == items:
        return list(_cache[1])
    key_env = env.get(KEY_ENV_SETTING, "").strip()
    found = {part for name, value in items for part in _secrets_of(name, value, key_env)}
    values = sorted(found, key=lambda v: (-len(v), v))
    if environ is None:
        _cache = (items, values)
    return list(values)


def scrub(text: str, secrets: list[str] | None = None) -> tuple[str, int]:
    """``text`` with every secret value replaced (as written and as JSON escapes it); and how
    many were replaced."""
    hits = 0
    for value in secret_values() if secrets is None else secrets:
        for form in dict.fromkeys((value, json.dumps(value)[1:-1])):
            if form and form in text:
                hits += text.count(form)
                text = text.replace(form, REMOVED)
    return text, hits


def scrub_text(text: str) -> str:
    """``scrub`` for callers that only want the text."""
    return scrub(text)[0] if text else text


def scrub_value(value, secrets: list[str] | None = None):
    """A copy of ``value`` (JSON-like: dicts, lists, strings) with every string scrubbed."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        return scrub(value, secrets)[0]
    if isinstance(value, dict):
        return {k: scrub_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_value(v, secrets) for v in value]
    return value


def _without_userinfo(value: str) -> str:
    parts = urlsplit(value)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host).geturl()


def _passed_on(name: str, value: str) -> str | None:
    """The value a child gets for an allow-listed variable: as it is, without a URL's
    credentials, or None (dropped) when it still looks secret."""
    if "://" in value and "@" in value:
        try:
            value = _without_userinfo(value)
        except ValueError:
            return None
    if _secrets_of(name, value, ""):
        return None
    return value


def _allowed(name: str, names: frozenset, prefixes: tuple) -> bool:
    return name in names or name.startswith(prefixes)


def child_env(extra: dict | None = None) -> dict:
    """The environment of every template child and agent script: the allow-listed variables
    of this process whose values do not look secret, the repository on PYTHONPATH, unbuffered
    output, telemetry off, plus ``extra`` (the caller's HOME, TMPDIR, M3B_WORKSPACE ...)."""
    env: dict = {}
    for name, value in os.environ.items():
        if _allowed(name, CHILD_NAMES, CHILD_PREFIXES):
            kept = _passed_on(name, value)
            if kept is not None:
                env[name] = kept
    for name, value in QUIET_ENV.items():
        env.setdefault(name, value)
    parent_path = os.environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), parent_path]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def llm_env_names(llm: str, key_env: str = "") -> list[str]:
    """The variables the job's LLM client reads: its key variable (the one named in the
    settings, else the provider's usual one) and the provider's other settings."""
    if not llm or llm == AUTOPILOT:
        return []
    names = [key_env, default_key_env(llm), *PROVIDER_ENV.get(provider_of(llm), ())]
    return [n for n in dict.fromkeys(names) if n]


def worker_env(extra: dict | None = None, llm: str = AUTOPILOT, key_env: str = "") -> dict:
    """The job worker's environment: ``child_env``'s, the worker's own settings
    (``WORKER_NAMES``, URLs with their credentials: the worker talks to the gateway), and, when
    the job uses an LLM, its key variable(s) by name (``llm_env_names``). The worker's
    ``child_env`` then gives its children none of these."""
    env = child_env()
    for name, value in os.environ.items():
        if name in env or not _allowed(name, WORKER_NAMES, WORKER_PREFIXES):
            continue
        kept = value if name in WORKER_URL_NAMES else _passed_on(name, value)
        if kept is not None:
            env[name] = kept
    for name in llm_env_names(llm, key_env):
        if os.environ.get(name):
            env[name] = os.environ[name]
    if key_env and llm != AUTOPILOT:
        env[KEY_ENV_SETTING] = key_env  # so the worker knows which value to scrub
    env.update(extra or {})
    return env
