"""Where M3Builder keeps its things: one home folder, overridable with --home / M3B_HOME.

    <home>/store.db              the SQLite store (WAL)
    <home>/datacards/*.json      datacards registered by the user
    <home>/workspace/jobs/<id>/  one folder per job (plan.json, Datapath/, Logout/, report.json)
    <home>/demo/                 generated demo datasets
    <home>/datasets/             default parent for the paper's datasets (their cards point here)

The repository's own ``datacards/`` folder holds the built-in example cards (read-only).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DATACARDS = REPO_ROOT / "datacards"
TEMPLATES_DIR = REPO_ROOT / "ml_templates"
DEFAULT_HOME = Path("~/.m3builder")
AUTOPILOT = "autopilot"


@dataclass(frozen=True)
class Settings:
    home: Path
    llm: str = AUTOPILOT
    llm_base_url: str | None = None

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

    def ensure(self) -> "Settings":
        for folder in (self.home, self.datacards_dir, self.jobs_dir, self.datasets_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def get_settings(home: str | os.PathLike | None = None, llm: str | None = None) -> Settings:
    """Resolve settings: explicit argument > environment (M3B_HOME, M3B_LLM) > defaults."""
    raw_home = home or os.environ.get("M3B_HOME") or DEFAULT_HOME
    resolved = Path(raw_home).expanduser().resolve()
    chosen_llm = (llm or os.environ.get("M3B_LLM") or AUTOPILOT).strip()
    base_url = os.environ.get("M3B_LLM_BASE_URL") or None
    return Settings(home=resolved, llm=chosen_llm, llm_base_url=base_url).ensure()
