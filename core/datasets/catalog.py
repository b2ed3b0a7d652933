"""The catalogue of datacards: built-in examples (repo ``datacards/``) plus the user's registered
cards (``<home>/datacards/``). The JSON files are the source of truth; the store's datacards
table mirrors them for the UI and for ranking.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from core.datasets.datacards import Datacard, DatacardError, load_datacard
from core.config.settings import BUILTIN_DATACARDS, Settings
from core.store.db import Store


@dataclass
class CatalogEntry:
    card: Datacard
    card_path: Path
    available: bool
    dataset_path: Path


def load_catalog(settings: Settings) -> list[CatalogEntry]:
    """Every readable card; a registered card overrides a built-in one of the same name."""
    entries: dict[str, CatalogEntry] = {}
    for folder in (BUILTIN_DATACARDS, settings.datacards_dir):
        for path in sorted(Path(folder).glob("*.json")):
            if path.name.endswith(".validation.json"):
                continue
            try:
                card = load_datacard(path)
            except DatacardError:
                continue  # an unreadable card is reported by `crew register`, never fatal here
            resolved = card.resolved_path(settings.datasets_dir)
            entries[card.name] = CatalogEntry(card, path, card.available(settings.datasets_dir),
                                              resolved)
    return sorted(entries.values(), key=lambda e: (not e.available, e.card.name.lower()))


def find_entry(settings: Settings, name: str) -> CatalogEntry | None:
    wanted = name.strip().lower()
    for entry in load_catalog(settings):
        if entry.card.name.lower() == wanted:
            return entry
    return None


def sync_store(settings: Settings, store: Store) -> int:
    """Mirror the card files into the store; drop rows whose file is gone."""
    entries = load_catalog(settings)
    now = time.time()
    for entry in entries:
        card = entry.card
        store.upsert_datacard({
            "name": card.name, "path": str(entry.dataset_path), "task": ",".join(card.tasks),
            "modality": card.modality, "anatomy": card.anatomy, "dimension": card.dimension,
            "source": card.source, "card_path": str(entry.card_path),
            "card": json.dumps(card.to_json_dict()), "updated_at": now,
            "available": int(entry.available)})
    names = {e.card.name for e in entries}
    for row in store.datacards():
        if row["name"] not in names:
            store.delete_datacard(row["name"])
    return len(entries)
