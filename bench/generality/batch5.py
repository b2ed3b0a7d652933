"""Batch 5 of the generality check: ten more public-dataset layouts, none of them used in
batches 1-4 or elsewhere in the repository. Same contract as ``cases.py``: which public dataset
each folder follows, the documentation used, what a clinician would type (datacard description
and chat request) and the expected reading, which lives only here, never in a dataset folder.

Run with ``python -m bench.generality.run --batch 5`` (``--batch all`` runs all five batches).
Generators: ``batch5_2d.py``, ``batch5_2d_more.py`` and ``batch5_3d.py`` (shared writers in
``batch5_common.py``).
"""
from __future__ import annotations

import csv
from pathlib import Path

from . import batch5_2d as b2
from . import batch5_2d_more as b2m
from . import batch5_3d as b3
from .cases import Case, Expected


def _rows(p: Path) -> list[dict]:
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def _count(*patterns: str):
    return lambda root: sum(1 for pat in patterns for _ in root.glob(pat))


def _xlsx_rows(p: Path) -> int:
    from openpyxl import load_workbook

    ws = load_workbook(p, read_only=True).active
    return sum(1 for r in ws.iter_rows(min_row=2, values_only=True) if r and r[0])


_RFMID_CSVS = ["Training_Set/Training_Set/RFMiD_Training_Labels.csv",
               "Evaluation_Set/Evaluation_Set/RFMiD_Validation_Labels.csv",
               "Test_Set/Test_Set/RFMiD_Testing_Labels.csv"]
_RFMID_NAMES = {"DR": ["diabetic retinopathy"], "ARMD": ["age-related macular degeneration",
                                                         "amd", "macular degeneration"],
                "MH": ["media haze"], "DN": ["drusen"], "MYA": ["myopia"],
                "ODC": ["optic disc cupping", "optic disk cupping", "cupping"]}
_SIDES = {"L": "left", "R": "right"}
_PDDCA_SYN = {"BrainStem": ["brain stem", "brainstem"], "Chiasm": ["optic chiasm", "chiasma"],
              "Mandible": ["jaw", "mandibula"]}
for _s, _w in _SIDES.items():
    _PDDCA_SYN[f"OpticNerve_{_s}"] = [f"{_w} optic nerve", f"optic nerve {_w}"]
    _PDDCA_SYN[f"Parotid_{_s}"] = [f"{_w} parotid", f"{_w} parotid gland", f"parotid {_w}"]
    _PDDCA_SYN[f"Submandibular_{_s}"] = [f"{_w} submandibular gland", f"{_w} submandibular",
                                         f"submandibular {_w}"]

CASES5: list[Case] = [
    Case(
        key="isic2020", public_name="SIIM-ISIC Melanoma Classification (ISIC 2020)",
        docs="Kaggle 'siim-isic-melanoma-classification' Data page (train.csv image_name,"
             "patient_id,sex,age_approx,anatom_site_general_challenge,diagnosis,"
             "benign_malignant,target; train/*.dcm, jpeg/train/*.jpg, tfrecords/); Rotemberg "
             "et al., Sci Data 8:34, 2021; ISIC 2020 doi:10.34970/2020-ds01",
        make=b2.make_isic2020, name="ISIC2020-Melanoma",
        layout="every image twice, as RGB DICOM (train/) and as JPEG (jpeg/train/); train.csv "
               "with a 0/1 target, a benign/malignant column and a mostly 'unknown' diagnosis; "
               "many images per patient_id; unlabelled test/ + jpeg/test/",
        description="Dermoscopic images of skin lesions from several centres, many images per "
                    "patient. The target column marks histopathologically confirmed melanoma.",
        request="detect melanoma in dermoscopy images",
        expected=Expected(
            task="diagnosis", classes=["0", "1"],
            synonyms={"1": ["malignant", "melanoma", "mel", "positive", "true"],
                      "0": ["benign", "not melanoma", "no melanoma", "negative", "false"]},
            count=lambda r: len(_rows(r / "train.csv")), grouping="patient_id",
            split_ships=False,
            note="each image is in the folder twice (DICOM and JPEG): counting files doubles "
                 "the count; test/ and jpeg/test/ are unlabelled"),
    ),
    Case(
        key="brain_tumor_mat", public_name="Brain tumor dataset (Cheng, figshare, MATLAB v7.3)",
        docs="figshare doi:10.6084/m9.figshare.1512427 (v5) README.txt (cjdata.label 1 "
             "meningioma, 2 glioma, 3 pituitary tumor; cjdata.PID, image, tumorBorder, "
             "tumorMask; brainTumorDataPublic_*.zip; cvind.mat); Cheng et al., PLoS ONE 2015",
        make=b2m.make_brain_tumor_mat, name="Figshare-BrainTumor",
        layout="numbered .mat files (MATLAB v7.3 = HDF5 with a 512-byte header) each holding a "
               "struct with image, numeric label, patient id, border points and mask; class "
               "names only in README.txt; cvind.mat with patient-wise fold numbers",
        description="T1-weighted contrast-enhanced MRI slices of patients with one of three "
                    "brain tumours: meningioma, glioma or pituitary tumour. Several slices per "
                    "patient; the tumour is outlined on each slice.",
        request="classify brain MRI slices as meningioma, glioma or pituitary tumour",
        expected=Expected(
            task="diagnosis", classes=list(b2m.BT_CLASSES.values()),
            synonyms={"pituitary tumor": ["pituitary", "pituitary tumour", "pituitary adenoma"],
                      "meningioma": ["meningiomas"], "glioma": ["gliomas"]},
            count=_count("brainTumorDataPublic_*/*.mat"), grouping="PID (inside each .mat)",
            split_ships=False,
            alternates=[{"task": "segmentation", "classes": ["tumor"]},
                        {"task": "segmentation", "classes": ["tumour"]}],
            note="labels 1/2/3 stored as doubles in the files, named only in README.txt; the "
                 "patient id is a char array inside each file; cvind.mat is a fold list, not a "
                 "sample"),
    ),
    Case(
        key="rfmid", public_name="RFMiD (Retinal Fundus Multi-disease Image Dataset)",
        docs="Pachade et al., Data 6(2):14, 2021; IEEE DataPort doi:10.21227/s3g7-st65; RIADD "
             "challenge (ISBI 2021); Kaggle copy 'Training_Set/Training_Set/Training/<ID>.png', "
             "'RFMiD_Training_Labels.csv' (ID,Disease_Risk,DR,ARMD,...,CL)",
        make=b2.make_rfmid, name="RFMiD",
        layout="three doubly nested set folders (Training_Set/Training_Set/...), each with PNGs "
               "named 1.png.. (the numbering restarts in every set) and a one-hot CSV of 45 "
               "conditions plus Disease_Risk; most condition columns all 0",
        description="Colour fundus photographs from an Indian eye clinic, labelled by two "
                    "retina specialists for 45 retinal conditions; several conditions can be "
                    "present in one image.",
        request="detect retinal diseases on fundus photographs (several per image)",
        expected=Expected(
            task="diagnosis", classes=list(b2.RFMID_PRESENT), synonyms=_RFMID_NAMES,
            also_accept_classes=[[*b2.RFMID_PRESENT, "Disease_Risk"]],
            count=lambda r: sum(len(_rows(r / c)) for c in _RFMID_CSVS), grouping=None,
            split_ships=True,
            alternates=[{"task": "diagnosis", "classes": ["0", "1"]}],
            note="multi-label over the conditions that occur (the other 39 columns are all 0); "
                 "Disease_Risk is the any-disease column; file names repeat across the sets"),
    ),
    Case(
        key="panda", public_name="PANDA (Prostate cANcer graDe Assessment, Kaggle 2020)",
        docs="Kaggle 'prostate-cancer-grade-assessment' Data page (train.csv image_id,"
             "data_provider,isup_grade,gleason_score; train_images/*.tiff; train_label_masks/"
             "*_mask.tiff, provider-specific values in the red channel); Bulten et al., Nat "
             "Med 28:154, 2022",
        make=b2m.make_panda, name="PANDA",
        layout="multi-resolution TIFF slides named by a 32-hex id + train.csv with the ISUP "
               "grade group and a Gleason score string ('negative' vs '0+0' by provider); mask "
               "TIFFs whose red-channel values mean different tissues per provider, a few "
               "missing; test images withheld",
        description="",
        request="grade prostate biopsies by ISUP grade group",
        expected=Expected(
            task="diagnosis", classes=[str(g) for g in range(6)],
            synonyms={"0": ["negative", "benign", "isup 0", "grade group 0"],
                      **{str(g): [f"isup {g}", f"grade group {g}", f"gg{g}"]
                         for g in range(1, 6)}},
            count=lambda r: len(_rows(r / "train.csv")), grouping=None, split_ships=False,
            alternates=[{"task": "segmentation", "classes": None}],
            note="ordinal, 6 grade groups; gleason_score is a finer, provider-dependent "
                 "encoding of the same label; no description"),
    ),
    Case(
        key="ddti", public_name="DDTI (Digital Database of Thyroid Images)",
        docs="Pedraza et al., Proc SPIE 9287, 2015 (Universidad Nacional de Colombia, IDIME); "
             "Kaggle 'dasmehdixtr/ddti-thyroid-ultrasound-images' (<case>.xml with number, age, "
             "sex, composition, echogenicity, margins, calcifications, tirads, mark/image, "
             "mark/svg; <case>_<k>.jpg)",
        make=b2m.make_ddti, name="DDTI-Thyroid",
        layout="one flat folder: per case an XML with the TI-RADS features and, per image, a "
               "<mark> whose <svg> text is a JSON list of freehand polygons; images "
               "<case>_<k>.jpg; no mask images; case numbers with gaps",
        description="Thyroid ultrasound images from a Colombian hospital with the nodule "
                    "outlined by radiologists and a TI-RADS score per case.",
        request="segment thyroid nodules on ultrasound images",
        expected=Expected(
            task="segmentation", classes=["thyroid nodule"],
            synonyms={"thyroid nodule": ["nodule", "nodules", "thyroid nodules", "lesion",
                                         "thyroid lesion"]},
            count=_count("*_*.jpg"), grouping="case number (the XML file)", split_ships=False,
            alternates=[{"task": "diagnosis", "classes": ["2", "3", "4a", "4b", "4c", "5"]}],
            note="outlines are JSON inside XML, per image of a case; a few cases have an empty "
                 "tirads but are outlined"),
    ),
    Case(
        key="endovis17", public_name="EndoVis 2017 Robotic Instrument Segmentation",
        docs="Allan et al., arXiv:1902.06426; endovissub2017-roboticinstrumentsegmentation."
             "grand-challenge.org (instrument_dataset_N/left_frames/frame###.png, "
             "ground_truth/<instrument>_labels/frame###.png; parts 10 shaft, 20 wrist, 30 "
             "claspers)",
        make=b2m.make_endovis17, name="EndoVis2017-Instruments",
        layout="one folder per sequence with left/right stereo frames and a ground_truth/ "
               "folder per instrument (names not uniform) whose grey levels 10/20/30 mark the "
               "parts; only left frames labelled; unlabelled test sequences",
        description="Frames from da Vinci robotic abdominal surgery videos. Each robotic "
                    "instrument has its own mask folder, with the shaft, wrist and claspers "
                    "marked.",
        request="segment the surgical instruments in robotic surgery video frames",
        expected=Expected(
            task="segmentation", classes=["instrument"],
            synonyms={"instrument": ["instruments", "surgical instrument", "surgical "
                                     "instruments", "robotic instrument", "robotic instruments",
                                     "tool", "tools", "surgical tool", "surgical tools"]},
            also_accept_classes=[["shaft", "wrist", "claspers"]],
            count=_count("train/*/left_frames/*.png"), grouping="instrument_dataset_N (sequence)",
            split_ships=False,
            alternates=[{"task": "segmentation", "classes": None}],
            note="binary instruments (all instrument folders merged) or the three parts; the "
                 "instrument-type reading (one class per folder name) is the challenge's third "
                 "sub-task; right_frames are unlabelled stereo twins"),
    ),
    Case(
        key="object_cxr", public_name="object-CXR (foreign objects on chest X-rays)",
        docs="github.com/jfhealthcare/object-CXR README (train.csv/dev.csv image_name,"
             "annotation; 'ANNO_TYPE_IDX x1 y1 x2 y2;...', 0 rectangle, 1 ellipse, 2 polygon); "
             "MIDL 2020 challenge",
        make=b2.make_object_cxr, name="object-CXR",
        layout="train/ and dev/ JPEG folders + one CSV each whose annotation cell lists "
               "';'-separated shapes led by a type code (rectangle/ellipse corners or polygon "
               "points); an empty cell for images without objects",
        description="Frontal chest X-rays from township hospitals, half of them with foreign "
                    "objects (buttons, coins, necklaces) in the lung fields, outlined as boxes, "
                    "ellipses or polygons.",
        request="detect foreign objects on chest X-rays",
        expected=Expected(
            task="anomaly_detection", classes=["foreign object"],
            synonyms={"foreign object": ["foreign objects", "object", "objects",
                                         "foreign body", "foreign bodies"]},
            count=lambda r: len(_rows(r / "train.csv")) + len(_rows(r / "dev.csv")),
            grouping=None, split_ships=True,
            alternates=[{"task": "diagnosis", "classes": ["0", "1"]}],
            note="negatives are rows with an empty annotation; polygons have to be boxed"),
    ),
    Case(
        key="fairvlmed", public_name="Harvard-FairVLMed (SLO fundus + clinical notes)",
        docs="github.com/Harvard-Ophthalmology-AI-Lab/FairCLIP README (FairVLMed/{Training,"
             "Validation,Testing}/data_#####.npz with slo_fundus, md, tds, age, gender, race, "
             "ethnicity, language, maritalstatus, glaucoma, note; data_summary.csv, "
             "gpt-4_summarized_notes.csv, original_notes.csv); Luo et al., CVPR 2024",
        make=b2.make_fairvlmed, name="FairVLMed",
        layout="one .npz per subject holding the image array, the note text, the glaucoma label "
               "and coded demographics; split folders; a summary CSV repeating notes, "
               "demographics as words and glaucoma yes/no",
        description="Scanning laser ophthalmoscopy fundus images of glaucoma clinic patients, "
                    "each with the clinician's de-identified note and a GPT-4 summary of it.",
        request="write the glaucoma clinic note from the SLO fundus image",
        expected=Expected(
            task="report_generation", classes=[],
            count=_count("Training/*.npz", "Validation/*.npz", "Testing/*.npz"), grouping=None,
            split_ships=True,
            alternates=[{"task": "diagnosis", "classes": ["no", "yes"]},
                        {"task": "diagnosis", "classes": ["0", "1"]}],
            note="images and text live inside the .npz; glaucoma diagnosis is the other "
                 "reading"),
    ),
    Case(
        key="pddca", public_name="PDDCA v1.4.1 (MICCAI 2015 head and neck CT)",
        docs="Raudaschl et al., Med Phys 44:2020, 2017; imagenglab.com PDDCA page (0522c####/"
             "img.nrrd, structures/<BrainStem|Chiasm|Mandible|OpticNerve_L|...>.nrrd)",
        make=b3.make_pddca, name="PDDCA",
        layout="one folder per patient with img.nrrd (gzip NRRD CT) and structures/ holding one "
               "binary NRRD per organ at risk, some missing where not delineated",
        description="",
        request="segment the head and neck organs at risk on CT for radiotherapy planning",
        expected=Expected(
            task="segmentation", classes=list(b3.PDDCA_STRUCTURES), synonyms=_PDDCA_SYN,
            count=_count("*/img.nrrd"), grouping=None, split_ships=False,
            note="3D, NRRD; structures as separate files; no description"),
    ),
    Case(
        key="duke_breast_mri", public_name="Duke-Breast-Cancer-MRI (TCIA)",
        docs="TCIA Duke-Breast-Cancer-MRI collection page, doi:10.7937/TCIA.e3sv-re93 "
             "(Annotation_Boxes.xlsx Patient ID, Start/End Row, Start/End Column, Start/End "
             "Slice; Clinical_and_Other_Features.xlsx); Saha et al., Br J Cancer 2018; "
             "sites.duke.edu/mazurowski breast cancer MRI dataset page",
        make=b3.make_duke_breast_mri, name="Duke-Breast-MRI",
        layout="NBIA download tree manifest-*/Duke-Breast-Cancer-MRI/<patient>/<study>/<series>/"
               "1-##.dcm (three MR series per patient, descriptions differing by scanner) + "
               "metadata.csv; tumour boxes as 1-based row/column/slice ranges in an XLSX keyed "
               "by Patient ID; a clinical XLSX with three header rows",
        description="Pre-operative breast MRI of women with invasive breast cancer: T1 and "
                    "dynamic contrast-enhanced series. The tumour is boxed in a spreadsheet by "
                    "row, column and slice.",
        request="detect and box breast tumours on MRI",
        expected=Expected(
            task="anomaly_detection", classes=["tumor"],
            synonyms={"tumor": ["tumour", "tumors", "tumours", "cancer", "breast cancer",
                                "lesion", "mass", "breast tumor", "breast tumour"]},
            count=lambda r: _xlsx_rows(r / "Annotation_Boxes.xlsx"), grouping="Patient ID",
            split_ships=False,
            note="3D multi-series per patient; boxes in voxel indices of the dynamic series "
                 "(row = y, column = x); every patient has cancer"),
    ),
]

CASES5_BY_KEY = {c.key: c for c in CASES5}

__all__ = ["CASES5", "CASES5_BY_KEY"]
