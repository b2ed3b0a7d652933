"""Opening the home folder and its store in one step, for every entry point (the CLI, the app's
start-up, the pages): a home that cannot be used (a file in its place, a file above it, a
read-only folder, a full disk) and a store that cannot be used (damaged, read-only, locked) end
in a ``core.store.errors.StoreError`` whose message says what is wrong and what to do, never in
an OSError or sqlite3 traceback.

    try:
        settings, store = open_home(args.home)
    except StoreError as exc:
        show str(exc) and stop
"""
from __future__ import annotations

import os
from pathlib import Path

from core.config.settings import DEFAULT_HOME, Settings, get_settings
from core.store.db import Store, open_store
from core.store.errors import StoreUnwritable, home_problem


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """The home folder get_settings would use (argument > M3B_HOME > the default)."""
    return Path(home or os.environ.get("M3B_HOME") or DEFAULT_HOME).expanduser()


def load_settings(home: str | os.PathLike | None = None, llm: str | None = None) -> Settings:
    """get_settings, with a home that cannot be made or used turned into a StoreUnwritable."""
    folder = resolve_home(home)
    problem = home_problem(folder)
    if problem and not folder.is_dir():  # a file where the folder (or one above it) should be
        raise StoreUnwritable(problem)
    try:
        return get_settings(home, llm)
    except OSError as exc:
        raise StoreUnwritable(home_problem(folder, exc) or
                              f"the home folder {folder} cannot be used ({exc}); point --home "
                              "(or M3B_HOME) at a writable folder") from None


def open_home(home: str | os.PathLike | None = None,
              llm: str | None = None) -> tuple[Settings, Store]:
    """Settings and the store of ``home``; raises StoreError with what to do."""
    settings = load_settings(home, llm)
    return settings, open_store(settings.store_path)
