"""The Task Manager never picks an incompatible dataset: task, modality, anatomy and dimension
must fit before any ranking, generic class words ("normal") tie nothing, and when nothing fits
the explanation names the nearest registered dataset and each way it differs."""
from __future__ import annotations

import pytest

from core.datasets.datacards import parse_datacard
from core.planning.matching import rank_datacards


def card(name, tasks, modality, anatomy, dimension, classes, description="", label_source=""):
    return parse_datacard({"dataset name": name, "dataset path": f"/data/{name}",
                           "tasks": tasks, "modality": modality, "anatomy": anatomy,
                           "dimension": dimension, "classes": classes,
                           "dataset description": description, "label_source": label_source})


DEMENTIA = card("ADNI-Dementia", ["diagnosis"], "MRI", "brain", "3D",
                ["dementia", "MCI", "cognitively normal"],
                "3D T1-weighted brain MRI volumes of dementia patients and controls.")
OCT = card("OCT-Retina", ["diagnosis"], "OCT", "eye", "2D", ["CNV", "DME", "drusen", "normal"],
           "Retinal OCT B-scans, normal eyes and three retinal diseases.", "class_folders")
# registered before the vocabulary knew OCT: no modality or anatomy, but its text says retina
OCT_DRAFTED = card("Drafted-OCT", ["diagnosis"], "", "", "2D", ["CNV", "DME", "normal"],
                   "Optical coherence tomography B-scans of the retina, in class folders.")
# nothing but generic classes: must never be tied to anything by "normal"
MYSTERY = card("Folders-Normal", ["diagnosis"], "", "", "", ["normal", "abnormal"],
               "Images sorted into two folders.")
PNEUMONIA = card("ChestXR-Pneumonia", ["diagnosis"], "X-ray", "chest", "2D",
                 ["pneumonia", "normal"], "Paediatric chest radiographs.")
COVID_CT = card("ChestCT-COVID", ["diagnosis"], "CT", "chest", "3D",
                ["COVID-19", "common pneumonia", "normal"], "Chest CT scans for COVID-19.")
LUNGS_CT = card("ChestCT-Lungs", ["segmentation"], "CT", "chest", "3D",
                ["left lung", "right lung"], "Chest CT volumes with lung masks.", "masks")
KNEE = card("Knee-MRI", ["diagnosis"], "MRI", "knee", "3D",
            ["healthy", "partial ACL tear", "complete ACL rupture"], "Sagittal knee MRI.")
POLYP_BOXES = card("Colon-Polyp-Boxes", ["detection"], "Endoscopy", "colon", "2D", ["polyp"],
                   "Colonoscopy frames with polyp bounding boxes.", "box_table")
SKIN = card("Skin-Dermoscopy", ["diagnosis"], "Dermoscopy", "skin", "2D",
            ["melanoma", "nevus", "benign keratosis"], "Dermoscopic images of skin lesions.")
TUMOUR_SEG = card("Brain-Tumour-Seg", ["lesion segmentation"], "MRI", "brain", "3D",
                  ["tumour"], "3D brain MRI with tumour masks.", "image_mask_folders")
TUMOUR_2D = card("BrainMRI-Slices-2D", ["diagnosis"], "MRI", "brain", "2D",
                 ["glioma", "meningioma", "pituitary", "no tumour"], "Axial brain MRI slices.")
NODULE_BOXES = card("LungCT-Nodule-Boxes", ["detection"], "CT", "chest", "3D", ["nodule"],
                    "Chest CT volumes with lung nodule boxes.", "box_table")
NODULE_MASKS = card("LungCT-Nodule-Masks", ["anomaly_detection"], "CT", "chest", "3D",
                    ["nodule"], "Chest CT volumes with lung nodule masks.", "image_mask_folders")
MAMMO = card("Mammo-Mass", ["diagnosis"], "Mammography", "breast", "2D",
             ["benign", "malignant", "mass"], "Screening mammograms with masses.")
ABDOMEN = card("AbdomenCT-Organs", ["segmentation"], "CT", "kidney", "3D",
               ["liver", "spleen", "kidney"], "Abdominal CT with organ masks.", "masks")

REGISTRY = [DEMENTIA, OCT, OCT_DRAFTED, MYSTERY, PNEUMONIA, COVID_CT, LUNGS_CT, KNEE,
            POLYP_BOXES, SKIN, TUMOUR_SEG, TUMOUR_2D, NODULE_BOXES, NODULE_MASKS, MAMMO, ABDOMEN]
BY_NAME = {c.name: c for c in REGISTRY}


def rank(request, cards=REGISTRY, available=True):
    return rank_datacards(request, [(c, available) for c in cards])


# request -> the card the Task Manager must choose from the whole registry
CHOICES = [
    ("Classify dementia versus normal on brain MRI volumes", "ADNI-Dementia"),
    ("Grade retinal OCT scans as CNV, DME, drusen or normal", "OCT-Retina"),
    ("Classify pneumonia vs normal on chest X-rays", "ChestXR-Pneumonia"),
    ("Diagnose COVID-19 on chest CT", "ChestCT-COVID"),
    ("Diagnose ACL tears on knee MRI", "Knee-MRI"),
    ("Detect polyps in colonoscopy frames and draw boxes around them", "Colon-Polyp-Boxes"),
    ("Tell apart melanoma and nevus in dermoscopy images", "Skin-Dermoscopy"),
    ("Segment brain tumours on 3D MRI", "Brain-Tumour-Seg"),
    ("Classify glioma, meningioma and pituitary tumours on brain MRI slices",
     "BrainMRI-Slices-2D"),
    ("Classify breast masses on mammograms as benign or malignant", "Mammo-Mass"),
    ("Classify breast X-rays as benign or malignant", "Mammo-Mass"),
    ("Where are the lung nodules on chest CT?", "LungCT-Nodule-Boxes"),
    ("Draw bounding boxes around lung nodules in chest CT", "LungCT-Nodule-Boxes"),
    ("Outline lung nodules on chest CT", "LungCT-Nodule-Masks"),
    ("Segment the liver and spleen on abdominal CT", "AbdomenCT-Organs"),
    ("Segment the kidneys on CT", "AbdomenCT-Organs"),
    ("Segment the lungs on chest CT", "ChestCT-Lungs"),
]

MODALITY_KIN = {("Mammography", "X-ray"), ("X-ray", "Mammography")}
ANATOMY_OF_CARD = {"kidney": "abdomen"}


def assert_compatible(result, chosen):
    """The chosen card's stated fields never contradict what the request states."""
    intent = result["intent"]
    if intent["modality"] and chosen.modality:
        assert (intent["modality"] == chosen.modality
                or (intent["modality"], chosen.modality) in MODALITY_KIN), chosen.name
    anatomy = ANATOMY_OF_CARD.get(chosen.anatomy, chosen.anatomy)
    if intent["anatomy"] and anatomy:
        assert intent["anatomy"] == anatomy, chosen.name
    if intent["dimension"] == "3D":
        assert chosen.dimension != "2D", chosen.name
    if intent["task"] == "diagnosis":
        assert "diagnosis" in chosen.tasks


@pytest.mark.parametrize("request_text,expected", CHOICES, ids=[c[1] + ":" + c[0][:30]
                                                               for c in CHOICES])
def test_the_compatible_card_is_chosen(request_text, expected):
    result = rank(request_text)
    assert result["chosen"] == expected, result["explanation"]
    assert result["nearest"] is None and result["differences"] == []
    assert_compatible(result, BY_NAME[expected])
    # no other eligible candidate contradicts the request either
    for cand in result["candidates"]:
        if cand["eligible"]:
            assert_compatible(result, BY_NAME[cand["name"]])


def test_enough_requests():
    assert len(CHOICES) >= 15


def test_dementia_request_never_takes_the_retina_card_for_the_word_normal():
    """The reported failure: only OCT cards (one without modality/anatomy) and a card of
    generic classes are registered; the dementia request must find nothing."""
    result = rank("Classify dementia versus normal on brain MRI", [OCT, OCT_DRAFTED, MYSTERY])
    assert result["chosen"] is None
    assert result["nearest"] == "OCT-Retina"
    assert result["differences"] == ["modality differs (request MRI, card OCT)",
                                     "anatomy differs (request brain, card eye)"]
    text = result["explanation"]
    assert text.startswith("No registered dataset fits a diagnosis request on MRI of the brain")
    assert "Nearest: 'OCT-Retina' — OCT, eye, 2D, diagnosis of CNV/DME/drusen/normal; your " \
           "request asks for MRI, the brain and dementia." in text
    assert "Register a dataset" in text
    drafted = next(c for c in result["candidates"] if c["name"] == "Drafted-OCT")
    assert "modality differs (request MRI, card's description names OCT)" in drafted["differences"]
    assert "anatomy differs (request brain, card's description names eye)" in drafted["differences"]
    mystery = next(c for c in result["candidates"] if c["name"] == "Folders-Normal")
    assert not mystery["eligible"]
    assert any("generic classes named (normal)" in r for r in mystery["reasons"])


def test_generic_classes_alone_tie_no_card():
    result = rank("Classify normal versus abnormal images", [MYSTERY, OCT, PNEUMONIA])
    assert result["chosen"] is None
    assert all(not c["eligible"] for c in result["candidates"])
    # a negated class ("no tumour") ties nothing either
    negated = card("Tumour-Folders", ["diagnosis"], "", "", "", ["no tumour", "normal"],
                   "Two folders of images.")
    result = rank("Is there a tumour on brain MRI?", [negated])
    assert result["chosen"] is None
    assert any("generic classes named (no tumour)" in r for r in result["candidates"][0]["reasons"])


def test_a_card_without_modality_is_tied_by_a_specific_class():
    open_card = card("Dementia-Folders", ["diagnosis"], "", "", "", ["dementia", "control"],
                     "Images sorted into two folders.")
    assert rank("Classify dementia vs control on brain MRI", [open_card])["chosen"] == \
        "Dementia-Folders"
    # without the specific class, the open fields leave it untied
    result = rank("Classify ischaemic stroke on brain MRI", [open_card])
    assert result["chosen"] is None
    assert "the card states no modality and its description does not name MRI" in \
        result["differences"]


def test_a_3d_request_never_takes_a_2d_card():
    result = rank("Classify brain tumour types on 3D MRI volumes", [TUMOUR_2D, OCT])
    assert result["chosen"] is None
    assert result["nearest"] == "BrainMRI-Slices-2D"
    assert result["differences"] == ["dimension differs (request 3D, card 2D)"]
    assert "your request asks for 3D volumes." in result["explanation"]


def test_masks_are_never_learned_from_boxes():
    result = rank("Outline polyps in colonoscopy images", [POLYP_BOXES, SKIN])
    assert result["chosen"] is None
    assert result["nearest"] == "Colon-Polyp-Boxes"
    assert result["differences"] == [
        "output differs (request masks/outlines, card has bounding boxes only)"]


def test_boxes_prefer_box_tables_over_masks():
    result = rank("Draw bounding boxes around lung nodules in chest CT",
                  [NODULE_MASKS, NODULE_BOXES])
    masks = next(c for c in result["candidates"] if c["name"] == "LungCT-Nodule-Masks")
    assert result["chosen"] == "LungCT-Nodule-Boxes"
    assert masks["eligible"] and any("has masks, not boxes" in r for r in masks["reasons"])


def test_a_wider_card_must_name_the_requested_organ():
    result = rank("Segment the heart on chest CT", [LUNGS_CT, ABDOMEN])
    assert result["chosen"] is None
    assert result["nearest"] == "ChestCT-Lungs"
    assert result["differences"] == [(
        "anatomy differs (request heart, card chest, whose classes and description do not "
        "name the heart)")]
    heart = card("ChestCT-Heart", ["segmentation"], "CT", "chest", "3D", ["heart", "aorta"])
    assert rank("Segment the heart on chest CT", [LUNGS_CT, heart])["chosen"] == "ChestCT-Heart"


def test_only_incompatible_cards_for_a_skin_request():
    result = rank("Classify skin lesions in dermoscopy images as melanoma or nevus",
                  [KNEE, PNEUMONIA, COVID_CT])
    assert result["chosen"] is None
    for cand in result["candidates"]:
        assert any(d.startswith("modality differs (request Dermoscopy") for d in
                   cand["differences"])
        assert any(d.startswith("anatomy differs (request skin") for d in cand["differences"])
    assert result["nearest"] in {"Knee-MRI", "ChestXR-Pneumonia", "ChestCT-COVID"}
    assert "your request asks for Dermoscopy, the skin, lesions, melanoma and nevus." in \
        result["explanation"]


def test_fundus_is_not_oct():
    result = rank("Grade diabetic retinopathy on fundus photographs", [OCT, DEMENTIA])
    assert result["chosen"] is None
    assert result["nearest"] == "OCT-Retina"
    assert result["differences"] == ["modality differs (request Fundus, card OCT)"]


def test_report_request_names_the_task_difference():
    result = rank("Write radiology reports for chest X-rays", [PNEUMONIA, DEMENTIA])
    assert result["chosen"] is None
    assert result["nearest"] == "ChestXR-Pneumonia"
    assert result["differences"] == ["task differs (request report_generation, card diagnosis)"]
    assert "Nearest: 'ChestXR-Pneumonia' — X-ray, chest, 2D, diagnosis of pneumonia/normal; " \
           "your request asks for report generation." in result["explanation"]


def test_an_unavailable_card_is_the_nearest_and_says_why():
    result = rank("Diagnose ACL tears on knee MRI", [KNEE], available=False)
    assert result["chosen"] is None
    assert result["nearest"] == "Knee-MRI"
    assert result["differences"] == ["its dataset folder does not exist on this machine"]


def test_a_request_without_any_content_names_no_nearest():
    result = rank("please help")
    assert result["chosen"] is None and result["nearest"] is None
    assert "names no task" in result["explanation"]


def test_class_codes_are_read_as_the_words_the_description_spells_out():
    """Class codes (PD, HC, SWEDD) tie a request only through the description's own spelling
    of them ("PD = Parkinson's disease", "healthy controls (HC)"); of two cards naming all their
    classes, the one covering more of the request wins, and a close runner-up is named."""
    from core.planning.class_terms import class_terms
    three = card("PPMI-DaT", ["diagnosis"], "SPECT", "brain", "3D", ["PD", "HC", "SWEDD"],
                 "DaTscan SPECT volumes. Groups: PD = Parkinson's disease; SWEDD (scans "
                 "without evidence of dopaminergic deficit); and healthy controls (HC).")
    two = card("Movement-DaT", ["diagnosis"], "SPECT", "brain", "3D", ["PD", "HC"],
               "DaTscan SPECT of Parkinson's disease (PD) patients and healthy controls (HC).")
    assert class_terms("HC", three.description) == ["HC", "healthy controls"]
    assert "scans without evidence of dopaminergic deficit" in class_terms("SWEDD",
                                                                          three.description)
    assert class_terms("tumor", "tumor = 2") == ["tumor"]          # not a code: its name only
    cards = [(three, True), (two, True)]
    wide = rank_datacards("Tell Parkinson's disease, healthy controls and scans without "
                          "evidence of dopaminergic deficit apart on DaTscan SPECT", cards)
    assert wide["chosen"] == "PPMI-DaT"
    assert "classes named in the request: PD, SWEDD" in wide["explanation"]
    assert "generic classes named (HC)" in wide["explanation"]   # "healthy controls" is generic
    narrow = rank_datacards("Classify Parkinson's disease versus healthy controls on SPECT",
                            cards)
    assert narrow["chosen"] == "Movement-DaT", narrow["candidates"]
    both = rank_datacards("Diagnose Parkinson's disease on brain SPECT", cards)
    assert "Close behind:" in both["explanation"] and "change the dataset at approval" in \
        both["explanation"]
