"""When no dataset fits, the Task Manager names the nearest registered dataset, what it is and
what the request asks for that it lacks, from its verdict per criterion (task, output,
modality, anatomy, dimension, classes, availability); the chat shows it, also when an LLM's own
reasons left it out."""
from __future__ import annotations

import json
import time

import pytest

from core.datasets.catalog import load_catalog
from core.datasets.datacards import parse_datacard
from core.datasets.vocabulary import parse_request
from core.jobs.lifecycle import create_job
from core.planning.matching import rank_datacards, score_card
from core.planning.nearest import describe_card, request_findings
from tests.test_app import context, home, run_app, texts  # noqa: F401 (fixture)


def card(name, tasks, modality, anatomy, dimension, classes, description="", label_source=""):
    return parse_datacard({"dataset name": name, "dataset path": f"/data/{name}",
                           "tasks": tasks, "modality": modality, "anatomy": anatomy,
                           "dimension": dimension, "classes": classes,
                           "dataset description": description, "label_source": label_source})


CXR = card("Chest X-ray demo", ["diagnosis"], "X-ray", "chest", "2D", ["NORMAL", "PNEUMONIA"],
           "Synthetic paediatric chest radiographs.")
ORGANS_CT = card("Abdomen CT organs", ["segmentation"], "CT", "abdomen", "3D",
                 ["liver", "spleen", "left kidney", "right kidney"], "Abdominal CT with masks.",
                 "masks")
GLIOMA_2D = card("Brain MRI slices", ["diagnosis"], "MRI", "brain", "2D",
                 ["glioma", "meningioma", "pituitary", "no tumour"], "Axial brain MRI slices.")
FUNDUS_DR = card("Fundus DR grades", ["diagnosis"], "Fundus", "eye", "2D",
                 ["no DR", "mild", "moderate", "severe", "proliferative"],
                 "Colour fundus photographs graded for diabetic retinopathy (DR).")
EYE_CT = card("Orbit CT masks", ["segmentation"], "CT", "eye", "3D", ["globe", "optic nerve"],
              "Orbital CT volumes with masks.", "masks")
POLYP_BOXES = card("Polyp boxes", ["detection"], "Endoscopy", "colon", "2D", ["polyp"],
                   "Colonoscopy frames with polyp bounding boxes.", "box_table")
ATLAS = card("Skin atlas", ["diagnosis"], "Dermoscopy", "skin", "2D",
             ["melanoma", "nevus", "basal cell carcinoma", "actinic keratosis", "dermatofibroma",
              "vascular lesion", "squamous cell carcinoma", "benign keratosis", "lentigo"],
             "Dermoscopic images of nine kinds of skin lesion.")
KNEE = card("Knee MRI", ["diagnosis"], "MRI", "knee", "3D",
            ["healthy", "partial ACL tear", "complete ACL rupture"], "Sagittal knee MRI.")

CASES = [
    # request, registered cards (all available unless named in the 4th item), nearest, text
    ("Classify COVID-19 versus normal on chest CT", [CXR, POLYP_BOXES], (), "Chest X-ray demo",
     "Nearest: 'Chest X-ray demo' — X-ray, chest, 2D, diagnosis of NORMAL/PNEUMONIA; your "
     "request asks for CT and COVID-19."),
    ("Segment the liver on MRI", [CXR, ORGANS_CT], (), "Abdomen CT organs",
     "Nearest: 'Abdomen CT organs' — CT, abdomen, 3D, segmentation of liver/spleen/left kidney/"
     "right kidney; your request asks for MRI."),
    ("Classify brain tumour types on 3D MRI volumes", [GLIOMA_2D, CXR], (), "Brain MRI slices",
     "your request asks for 3D volumes."),
    ("Grade diabetic retinopathy on fundus photographs", [FUNDUS_DR, CXR], {"Fundus DR grades"},
     "Fundus DR grades", "Nearest: 'Fundus DR grades' — Fundus, eye, 2D, diagnosis of no DR/"
     "mild/moderate/severe/proliferative; its images are not on this server (the folder its "
     "datacard names is missing). Nearest available here: 'Chest X-ray demo' — X-ray, chest, "
     "2D, diagnosis of NORMAL/PNEUMONIA; your request asks for Fundus, the eye and diabetic "
     "retinopathy."),
    ("Segment the optic disc on 2D fundus photographs", [FUNDUS_DR, EYE_CT, ATLAS], (),
     "Fundus DR grades", "your request asks for segmentation and optic disc."),
    ("Outline polyps in colonoscopy images", [POLYP_BOXES, CXR], (), "Polyp boxes",
     "your request asks for outlines (masks), where it has only bounding boxes."),
    ("Classify glaucoma versus healthy eyes on OCT", [ATLAS, KNEE], (), "Knee MRI", None),
    ("Classify Merkel cell carcinoma on skin ultrasound", [ATLAS, CXR], (), "Skin atlas",
     "Nearest: 'Skin atlas' — Dermoscopy, skin, 2D, diagnosis of melanoma/nevus/basal cell "
     "carcinoma/actinic keratosis/dermatofibroma/vascular lesion/… (9 classes); your request "
     "asks for Ultrasound and Merkel cell carcinoma."),
]


@pytest.mark.parametrize("request_text,cards,unavailable,nearest,text", CASES,
                         ids=[c[0][:40] for c in CASES])
def test_the_nearest_dataset_and_what_differs(request_text, cards, unavailable, nearest, text):
    result = rank_datacards(request_text, [(c, c.name not in unavailable) for c in cards])
    assert result["chosen"] is None, result["explanation"]
    assert result["nearest"] == nearest
    sentence = result["nearest_text"]
    assert sentence.startswith(f"Nearest: '{nearest}' — ") and sentence in result["explanation"]
    if text:
        assert text in sentence, sentence
    assert result["explanation"].startswith("No registered dataset fits")
    assert "Register a dataset of the requested kind" in result["explanation"]


def test_each_criterion_has_a_verdict():
    intent = parse_request("Segment the optic disc on 2D fundus photographs")
    assert score_card(intent, FUNDUS_DR, True).criteria == {
        "task": "differs", "modality": "match", "anatomy": "match", "dimension": "match"}
    assert score_card(intent, EYE_CT, False).criteria == {
        "task": "match", "modality": "differs", "anatomy": "match", "dimension": "near",
        "available": "differs"}
    intent = parse_request("Classify pneumonia versus normal on chest X-rays")
    assert score_card(intent, CXR, True).criteria == {
        "task": "match", "modality": "match", "anatomy": "match", "classes": "match"}


def test_the_nearest_is_the_card_matching_most_criteria_among_the_fewest_differences():
    """Both cards differ in one criterion; the one matching modality, anatomy and dimension is
    nearer than the one matching task and anatomy only, whatever their names' order."""
    renamed = card("AAA orbit CT", ["segmentation"], "CT", "eye", "3D", ["globe"], "", "masks")
    result = rank_datacards("Segment the optic disc on 2D fundus photographs",
                            [(renamed, True), (FUNDUS_DR, True)])
    assert result["nearest"] == "Fundus DR grades"


def test_findings_are_the_requests_own_words():
    assert request_findings("Classify COVID-19 versus normal on chest CT") == ["COVID-19"]
    assert request_findings("Grade diabetic retinopathy on fundus photographs") == [
        "diabetic retinopathy"]
    assert request_findings("Segment the liver and spleen on 3D abdominal CT") == []
    assert request_findings("Tell Parkinson's disease from healthy controls") == ["Parkinson's"]
    assert request_findings("detect lung nodules on chest X-rays for adult patients") == [
        "nodules"]
    assert describe_card(card("Bare", ["diagnosis"], "", "", "", [])) == "diagnosis"


def test_chat_names_the_nearest_dataset_when_the_reasons_do_not(home):
    """An LLM wrote its own reasons without a nearest dataset: the chat adds today's nearest;
    the autopilot's reasons already hold it and are not repeated."""
    from core.datasets.registration import register_dataset
    from core.demo.chest_xray import DEMO_DESCRIPTION, DEMO_NAME, make_chest_xray_demo

    settings, store = context()
    folder = make_chest_xray_demo(home / "data" / "cxr", patients_per_class=6, size=32)
    assert register_dataset(settings, store, str(folder), DEMO_NAME, DEMO_DESCRIPTION)[
        "status"] == "registered"
    llm_job = create_job(settings, store, "classify COVID-19 versus normal on chest CT",
                         llm="openai/gpt-4o")
    (settings.jobs_dir / llm_job / "plan.json").write_text(json.dumps(
        {"status": "no_dataset", "dataset": None, "reasons": "no chest CT data is registered"}))
    store.update_job(llm_job, status="no_dataset", finished_at=time.time())
    at = run_app("pages/chat.py")
    page = texts(at).replace("\\", "")
    assert "no chest CT data is registered" in page
    # the built-in CC-CCII card fits but its images are not here; the demo is what is here
    assert ("**Nearest registered dataset:** 'CC-CCII' — CT, chest, 3D, diagnosis of "
            "NCP/CP/Normal; its images are not on this server") in page, page
    assert (f"Nearest available here: '{DEMO_NAME}' — X-ray, chest, 2D, diagnosis of "
            "NORMAL/PNEUMONIA; your request asks for CT and COVID-19.") in page, page

    ranking = rank_datacards("segment the pancreas in CT",
                             [(e.card, e.available) for e in load_catalog(settings)])
    auto_job = create_job(settings, store, "segment the pancreas in CT", llm="autopilot")
    (settings.jobs_dir / auto_job / "plan.json").write_text(json.dumps(
        {"status": "no_dataset", "dataset": None, "reasons": ranking["explanation"]}))
    store.update_job(auto_job, status="no_dataset", finished_at=time.time())
    at = run_app("pages/chat.py")
    page = texts(at).replace("\\", "")
    assert ranking["nearest_text"] and ranking["nearest_text"] in page
    assert page.count("**Nearest registered dataset:**") == 1  # only for the LLM's job
