"""How the Task Manager reads a request's words: task (with the output form asked for),
modality, anatomy and dimension. An explicit output form (boxes, masks/outline, report) wins
over a generic verb such as "detect" or "identify"."""
from __future__ import annotations

import pytest

from core.datasets.vocabulary import canonical_anatomy, canonical_modality, parse_request

DIAG, SEG, LESION, REPORT = "diagnosis", "segmentation", "anomaly_detection", "report_generation"

# request, task, output form, modality, anatomy, dimension ("" = not stated)
CASES = [
    # the reported failure: boxes make it detection, not classification
    ("Detect polyps in colonoscopy frames and draw boxes around them",
     LESION, "boxes", "Endoscopy", "colon", "2D"),
    ("Put a bounding box around each kidney stone in abdominal CT",
     LESION, "boxes", "CT", "abdomen", ""),
    ("Identify every lung nodule on chest CT with a box", LESION, "boxes", "CT", "chest", ""),
    ("Where are the lung nodules on this chest CT?", LESION, "boxes", "CT", "chest", ""),
    ("Localise fractures on wrist radiographs", LESION, "boxes", "X-ray", "wrist", ""),
    ("Please localize the optic disc in retinal fundus photos", LESION, "boxes", "Fundus",
     "eye", ""),
    ("Count the mitoses in histology slides", LESION, "boxes", "Histopathology", "", ""),
    # masks: outline / contour / delineate / mask
    ("Outline the prostate on T2 MRI", SEG, "masks", "MRI", "prostate", ""),
    ("Contour the liver and spleen in abdominal CT volumes", SEG, "masks", "CT", "abdomen", "3D"),
    ("Delineate the left ventricle on cardiac MRI", SEG, "masks", "MRI", "heart", ""),
    ("I need masks of the lungs on chest radiographs", SEG, "masks", "X-ray", "chest", ""),
    ("Detect brain tumours and outline them on 3D MRI", LESION, "masks", "MRI", "brain", "3D"),
    ("Segment the pancreas tumour in 3D CT", LESION, "masks", "CT", "abdomen", "3D"),
    ("Identify the skin lesion boundaries in dermoscopy images", LESION, "masks", "Dermoscopy",
     "skin", ""),
    ("On chest CT, segment the heart", SEG, "masks", "CT", "heart", ""),
    # diagnosis: grade / stage / tell apart / classify / diagnose
    ("Grade diabetic retinopathy from fundus photographs", DIAG, "", "Fundus", "eye", ""),
    ("Stage prostate cancer on MRI", DIAG, "", "MRI", "prostate", ""),
    ("Tell apart melanoma and benign nevi in dermoscopy images", DIAG, "", "Dermoscopy", "skin",
     ""),
    ("Can you tell COVID-19 from other pneumonia on chest CT?", DIAG, "", "CT", "chest", ""),
    ("Classify dementia vs normal on 3D brain MRI", DIAG, "", "MRI", "brain", "3D"),
    ("Diagnose ACL tears on knee MRI", DIAG, "", "MRI", "knee", ""),
    ("Is there a pneumothorax on this chest film?", DIAG, "", "X-ray", "chest", ""),
    ("Detect breast cancer on mammograms", DIAG, "", "Mammography", "breast", ""),
    ("Detect cardiomegaly on chest X-rays", DIAG, "", "X-ray", "heart", ""),
    ("Detect abnormal chest X-rays", DIAG, "", "X-ray", "chest", ""),
    ("Sort OCT scans into CNV, DME, drusen and normal", DIAG, "", "OCT", "eye", ""),
    ("Which patients have Alzheimer's disease, from PET scans", DIAG, "", "PET", "brain", ""),
    ("Predict bone age from hand X-rays", DIAG, "", "X-ray", "hand", ""),
    ("Recognise pneumonia in paediatric chest x-rays", DIAG, "", "X-ray", "chest", ""),
    ("Differentiate benign from malignant breast masses on ultrasound", DIAG, "", "Ultrasound",
     "breast", ""),
    # lesion words alone mean lesion detection
    ("Spot colorectal polyps during endoscopy", LESION, "", "Endoscopy", "colon", ""),
    ("Find tumour regions in H&E whole-slide images", LESION, "", "Histopathology", "", ""),
    # reports
    ("Write the findings for each chest X-ray", REPORT, "report", "X-ray", "chest", ""),
    ("Generate free-text radiology reports for head CT", REPORT, "report", "CT", "brain", ""),
    ("Describe the findings of brain MRI scans in a paragraph", REPORT, "report", "MRI", "brain",
     ""),
    ("Caption knee radiographs automatically", REPORT, "report", "X-ray", "knee", ""),
    ("Create a model to detect findings on chest X-rays", DIAG, "", "X-ray", "chest", ""),
    # no task
    ("please help", "", "", "", "", ""),
    ("Show me which datasets I have", "", "", "", "", ""),
    ("Train a model on my knee MRI data", "", "", "MRI", "knee", ""),
    ("What can you do with 2D ultrasound?", "", "", "Ultrasound", "", "2D"),
    ("hello there", "", "", "", "", ""),
]


@pytest.mark.parametrize("request_text,task,output,modality,anatomy,dimension", CASES,
                         ids=[c[0][:40] for c in CASES])
def test_request_is_read(request_text, task, output, modality, anatomy, dimension):
    intent = parse_request(request_text)
    assert (intent.task, intent.output, intent.modality, intent.anatomy, intent.dimension) == (
        task, output, modality, anatomy, dimension), request_text


def test_the_table_is_wide():
    assert len(CASES) >= 30
    assert {c[1] for c in CASES} == {DIAG, SEG, LESION, REPORT, ""}


def test_mri_sequence_names_yield_to_a_named_modality():
    # "T1" is also a thoracic vertebra: CT named outright wins
    assert parse_request("segment vertebrae T1 to T12 on spine CT").modality == "CT"
    assert parse_request("classify T1 and FLAIR sequences of gliomas").modality == "MRI"


def test_by_hand_is_not_the_hand():
    assert parse_request("chest X-rays whose lungs were outlined by hand").anatomy == "chest"
    assert parse_request("hand-drawn masks of the liver on CT").anatomy == "abdomen"


@pytest.mark.parametrize("value,canonical", [
    ("MR", "MRI"), ("CR", "X-ray"), ("xray", "X-ray"), ("Mammography", "Mammography"),
    ("colonoscopy", "Endoscopy"), ("optical coherence tomography", "OCT"),
    ("WSI", "Histopathology"),
    ("Dermoscopy", "Dermoscopy"), ("PET", "PET"), ("fundus photography", "Fundus")])
def test_card_modalities_are_canonical(value, canonical):
    assert canonical_modality(value) == canonical


@pytest.mark.parametrize("value,canonical", [
    ("kidney", "abdomen"), ("head", "brain"), ("thorax", "chest"), ("retina", "eye"),
    ("Colon", "colon"), ("gastrointestinal", "colon"), ("wrist", "wrist"), ("skin", "skin"),
    ("Breast", "breast"), ("heart", "heart"), ("prostate", "prostate"),
    ("bone", "musculoskeletal")])
def test_card_anatomies_are_canonical(value, canonical):
    assert canonical_anatomy(value) == canonical
