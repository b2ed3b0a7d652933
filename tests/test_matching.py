from __future__ import annotations

from core.datasets.catalog import load_catalog
from core.datasets.datacards import parse_datacard
from core.planning.matching import parse_request, rank_datacards

DEMO = "Demo chest X-ray (synthetic)"


def rank(settings, request):
    return rank_datacards(request, [(e.card, e.available) for e in load_catalog(settings)])


def test_chest_xray_request_picks_the_demo(settings, registered_demo):
    result = rank(settings, "classify pneumonia versus normal chest X-rays")
    assert result["chosen"] == DEMO
    assert "modality X-ray matches" in result["explanation"]
    assert "PNEUMONIA" in result["explanation"]


def test_liver_mri_segmentation_has_no_dataset(settings, registered_demo):
    result = rank(settings, "segment the liver on MRI")
    assert result["chosen"] is None
    assert "No registered dataset fits a segmentation request on MRI" in result["explanation"]
    demo = next(c for c in result["candidates"] if c["name"] == DEMO)
    assert any("task mismatch" in r for r in demo["reasons"])


def test_ct_request_never_takes_an_xray_card(settings, registered_demo):
    result = rank(settings, "classify COVID-19 vs pneumonia from chest CT")
    assert result["chosen"] is None  # CC-CCII fits but its folder does not exist
    ccii = next(c for c in result["candidates"] if c["name"] == "CC-CCII")
    assert any("unavailable" in r for r in ccii["reasons"])
    assert any("modality mismatch" in r for r in
               next(c for c in result["candidates"] if c["name"] == DEMO)["reasons"])


def test_best_of_two_available_cards_wins():
    knee = parse_datacard({"dataset name": "Knee", "dataset path": "/k", "tasks": ["diagnosis"],
                           "modality": "MRI", "anatomy": "knee", "classes": ["torn", "intact"]})
    brain = parse_datacard({"dataset name": "Brain", "dataset path": "/b",
                            "tasks": ["diagnosis"], "modality": "MRI", "anatomy": "brain",
                            "classes": ["AD", "CN"]})
    result = rank_datacards("diagnose ACL tears on knee MRI", [(knee, True), (brain, True)])
    assert result["chosen"] == "Knee"
    assert rank_datacards("please help", [(knee, True)])["chosen"] is None


def test_parse_request():
    intent = parse_request("Write radiology reports for chest x-rays")
    assert (intent.task, intent.modality, intent.anatomy) == ("report_generation", "X-ray",
                                                              "chest")
    assert parse_request("segment the pancreas tumour in 3D CT").task == "anomaly_detection"
