"""Where M3Builder keeps its things: one home folder, overridable with --home / M3B_HOME.

    <home>/store.db              the SQLite store (WAL)
    <home>/datacards/*.json      datacards registered by the user
    <home>/workspace/jobs/<id>/  one folder per job (plan.json, Datapath/, Logout/, report.json)
    <home>/demo/                 generated demo datasets
    <home>/datasets/             default parent for the paper's datasets (their cards point here)
    <home>/datasets/uploads/     datasets uploaded as zip files (core.datasets.uploads)
    <home>/settings.json         what the Settings page saved (non-secret;
                                 core.config.user_settings)

The repository's own ``datacards/`` folder holds the built-in example cards (read-only).

Precedence: an explicit argument (``--home``, ``--llm``) > the environment (``M3B_HOME``,
``M3B_LLM``, ``M3B_LLM_BASE_URL``, ``M3B_LLM_KEY_ENV``) > ``<home>/settings.json`` > defaults.
LLM mode's bounds come from ``M3B_MAX_ACTIONS`` (per role, default 100), ``M3B_ROLE_TIME_LIMIT_S``
(default 7200), ``M3B_LLM_RETRIES`` (default 3), ``M3B_LLM_BACKOFF_S`` (default 2) and
``M3B_LLM_TIMEOUT_S`` (one LLM call, default 120).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from core.config.user_settings import AUTOPILOT, UPLOAD_DEFAULTS, load_saved

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_DATACARDS = REPO_ROOT / "datacards"
TEMPLATES_DIR = REPO_ROOT / "ml_templates"
DEFAULT_HOME = Path("~/.m3builder")


@dataclass(frozen=True)
class Settings:
    home: Path
    llm: str = AUTOPILOT
    llm_base_url: str | None = None
    llm_key_env: str = ""         # name of the variable holding the key ("" = provider default)
    llm_source: str = "default"   # where llm came from: argument, environment, settings file
    upload_max_mb: int = UPLOAD_DEFAULTS["upload_max_mb"]
    upload_max_unpacked_mb: int = UPLOAD_DEFAULTS["upload_max_unpacked_mb"]
    upload_max_files: int = UPLOAD_DEFAULTS["upload_max_files"]
    upload_max_ratio: int = UPLOAD_DEFAULTS["upload_max_ratio"]
    # LLM mode's bounds per role (the paper's 100 actions; wall time; LLM error retries)
    max_actions: int = 100
    role_time_limit_s: float = 7200.0
    llm_retries: int = 3
    llm_backoff_s: float = 2.0
    llm_timeout_s: float = 120.0

    @property
    def settings_path(self) -> Path:
        return self.home / "settings.json"

    @property
    def store_path(self) -> Path:
        return self.home / "store.db"

    @property
    def datacards_dir(self) -> Path:
        return self.home / "datacards"

    @property
    def jobs_dir(self) -> Path:
        return self.home / "workspace" / "jobs"

    @property
    def demo_dir(self) -> Path:
        return self.home / "demo"

    @property
    def datasets_dir(self) -> Path:
        return self.home / "datasets"

    @property
    def weights_dir(self) -> Path:
        """Where local pretrained weights live (M3B_WEIGHTS_DIR, else <home>/weights): the only
        folder a training run may read weights from."""
        return Path(os.environ.get("M3B_WEIGHTS_DIR") or self.home / "weights").expanduser()

    def ensure(self) -> "Settings":
        for folder in (self.home, self.datacards_dir, self.jobs_dir, self.datasets_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def get_settings(home: str | os.PathLike | None = None, llm: str | None = None) -> Settings:
    """Resolve settings: explicit argument > environment (M3B_HOME, M3B_LLM, M3B_LLM_BASE_URL,
    M3B_LLM_KEY_ENV) > <home>/settings.json (invalid entries ignored) > defaults."""
    raw_home = home or os.environ.get("M3B_HOME") or DEFAULT_HOME
    resolved = Path(raw_home).expanduser().resolve()
    saved, _problems = load_saved(resolved)  # the Settings page shows the problems
    if llm and llm.strip():
        chosen_llm, source = llm.strip(), "argument"
    elif os.environ.get("M3B_LLM", "").strip():
        chosen_llm, source = os.environ["M3B_LLM"].strip(), "environment"
    elif saved.get("llm"):
        chosen_llm, source = saved["llm"], "settings file"
    else:
        chosen_llm, source = AUTOPILOT, "default"
    base_url = os.environ.get("M3B_LLM_BASE_URL") or saved.get("llm_base_url") or None
    key_env = os.environ.get("M3B_LLM_KEY_ENV") or saved.get("llm_key_env") or ""
    uploads = {k: saved.get(k, v) for k, v in UPLOAD_DEFAULTS.items()}
    return Settings(home=resolved, llm=chosen_llm, llm_base_url=base_url, llm_key_env=key_env,
                    llm_source=source, **uploads, **_llm_bounds()).ensure()


_BOUNDS = {"max_actions": ("M3B_MAX_ACTIONS", int), "role_time_limit_s": ("M3B_ROLE_TIME_LIMIT_S",
                                                                          float),
           "llm_retries": ("M3B_LLM_RETRIES", int), "llm_backoff_s": ("M3B_LLM_BACKOFF_S", float),
           "llm_timeout_s": ("M3B_LLM_TIMEOUT_S", float)}


def _llm_bounds() -> dict:
    """LLM-mode bounds from the environment; a malformed value is an error naming the variable."""
    out = {}
    for field_name, (var, kind) in _BOUNDS.items():
        raw = os.environ.get(var, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise ValueError(f"{var}={raw!r} is not a number; unset it or give e.g. "
                             f"{Settings.__dataclass_fields__[field_name].default}") from None
        if value < 0:
            raise ValueError(f"{var} must not be negative (got {raw})")
        out[field_name] = value
    return out
