from __future__ import annotations

import json

import pytest

from core.datasets.catalog import load_catalog, sync_store
from core.datasets.datacards import DatacardError, load_datacard, parse_datacard, save_datacard
from core.config.settings import BUILTIN_DATACARDS

PAPER_DATASETS = {"ADNI", "KneeMRI", "CC-CCII", "CT-Kidney", "COVID19", "INSTANCE2022",
                  "MSD Pancreas", "ChestX-Det10", "CT-RATE", "RadGenome-Brain", "IU-Xray", "BTCV",
                  "VerSe", "L2R-OASIS"}


def test_paper_style_card_round_trips_with_unknown_fields(tmp_path):
    card = parse_datacard({"dataset name": "Knee", "dataset description": "knee MRI",
                           "dataset path": "/data/knee", "scanner": {"vendor": "X"},
                           "tasks": ["classification"]})
    assert card.tasks == ["diagnosis"]
    path = save_datacard(card, tmp_path)
    data = json.loads(path.read_text())
    assert list(data)[:3] == ["dataset name", "dataset description", "dataset path"]
    assert data["scanner"] == {"vendor": "X"}
    assert load_datacard(path).name == "Knee"
    assert [p.name for p in tmp_path.iterdir()] == ["Knee.json"]  # no temp file left behind


@pytest.mark.parametrize("bad", [{"dataset description": "no name"},
                                 {"dataset name": "../../etc", "dataset path": "x"},
                                 {"dataset name": "ok", "tasks": ["telepathy"]}])
def test_invalid_cards_raise_clear_errors(bad):
    with pytest.raises(DatacardError):
        parse_datacard(bad)


def test_builtin_paper_cards_load_and_are_unavailable(settings):
    names = {load_datacard(p).name for p in BUILTIN_DATACARDS.glob("*.json")}
    assert PAPER_DATASETS <= names
    entries = {e.card.name: e for e in load_catalog(settings)}
    assert all(not entries[n].available for n in PAPER_DATASETS)
    assert entries["ADNI"].card.tasks == ["diagnosis"]
    assert entries["BTCV"].card.tasks == ["segmentation"]


def test_builtin_card_becomes_available_when_its_folder_exists(settings, store):
    (settings.datasets_dir / "CT-Kidney").mkdir()
    entries = {e.card.name: e for e in load_catalog(settings)}
    assert entries["CT-Kidney"].available
    sync_store(settings, store)
    rows = {r["name"]: r for r in store.datacards()}
    assert rows["CT-Kidney"]["available"] == 1 and rows["ADNI"]["available"] == 0
