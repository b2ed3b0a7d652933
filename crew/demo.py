"""Build and register the built-in demo dataset (used by `make run` and the tests)."""
from __future__ import annotations

from core.catalog import find_entry, sync_store
from core.demo_data import DEMO_DESCRIPTION, DEMO_FOLDER, DEMO_NAME, make_chest_xray_demo
from core.registration import register_dataset
from core.settings import Settings
from core.store import open_store


def ensure_demo(settings: Settings) -> dict:
    store = open_store(settings.store_path)
    folder = make_chest_xray_demo(settings.demo_dir / DEMO_FOLDER)
    entry = find_entry(settings, DEMO_NAME)
    if entry and entry.available and entry.dataset_path == folder.resolve():
        sync_store(settings, store)
        return {"status": "registered", "name": DEMO_NAME, "datacard_path": str(entry.card_path),
                "task": "diagnosis", "errors": [], "warnings": []}
    return register_dataset(settings, store, str(folder), DEMO_NAME, DEMO_DESCRIPTION,
                            source="demo", overwrite=True)
