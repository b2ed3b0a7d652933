"""Batch 4 of the generality check: ten more public-dataset layouts, none of them used in
batches 1-3 or elsewhere in the repository. Same contract as ``cases.py``: which public dataset
each folder follows, the documentation used, what a clinician would type (datacard description
and chat request) and the expected reading, which lives only here, never in a dataset folder.

Run with ``python -m bench.generality.run --batch 4`` (``--batch all`` runs all four batches).
Generators: ``batch4_2d.py``, ``batch4_2d_more.py``, ``batch4_3d.py`` and
``batch4_3d_more.py`` (shared writers in ``batch4_common.py``).
"""
from __future__ import annotations

import csv
from pathlib import Path

from . import batch4_2d as b2
from . import batch4_2d_more as b2m
from . import batch4_3d as b3
from . import batch4_3d_more as b3m
from .cases import Case, Expected


def _rows(p: Path) -> list[dict]:
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def _count(pattern: str):
    return lambda root: sum(1 for _ in root.glob(pattern))


_BIN_NEG = ["no cancer", "not cancer", "negative", "normal", "benign", "false"]

CASES4: list[Case] = [
    Case(
        key="rsna_mammo", public_name="RSNA Screening Mammography Breast Cancer Detection",
        docs="Kaggle 'rsna-breast-cancer-detection' Data page and the RSNA AI-Challenge-Data "
             "wiki (train.csv site_id,patient_id,image_id,laterality,view,age,cancer,biopsy,"
             "invasive,BIRADS,implant,density,machine_id,difficult_negative_case; "
             "[train/test]_images/[patient_id]/[image_id].dcm; test.csv prediction_id)",
        make=b2.make_rsna_mammo, name="RSNA-Mammography",
        layout="MG DICOM per patient folder named by image_id (some MONOCHROME1) + train.csv "
               "with one row per image and several 0/1 columns (cancer, biopsy, invasive, "
               "implant); unlabelled test_images/",
        description="Screening mammograms (CC and MLO views of each breast) from two sites. "
                    "The cancer column marks images of a breast with biopsy-proven cancer.",
        request="detect breast cancer on screening mammograms",
        expected=Expected(
            task="diagnosis", classes=["0", "1"],
            synonyms={"1": ["cancer", "malignant", "positive", "true"], "0": _BIN_NEG},
            count=lambda r: len(_rows(r / "train.csv")), grouping="patient_id",
            split_ships=False,
            note="image-level rows, label per breast; biopsy/invasive/implant are other 0/1 "
                 "columns, not the target; test_images/ is unlabelled"),
    ),
    Case(
        key="siim_covid", public_name="SIIM-FISABIO-RSNA COVID-19 Detection",
        docs="Kaggle 'siim-covid19-detection' Data page (train/<study>/<series>/<image>.dcm, "
             "train_study_level.csv one-hot, train_image_level.csv id,boxes,label,"
             "StudyInstanceUID; 'none 1 0 0 1 1'); RSNA news page on the challenge",
        make=b2.make_siim_covid, name="SIIM-COVID19",
        layout="hashed study/series/image DICOM tree; image-level CSV with boxes as a Python-"
               "literal list of dicts and a 'opacity 1 x1 y1 x2 y2' label string; study-level "
               "one-hot CSV with four appearance columns",
        description="Chest radiographs of patients with suspected COVID-19 pneumonia. "
                    "Radiologists boxed the lung opacities on each image and graded each study "
                    "as negative, typical, indeterminate or atypical.",
        request="detect and box lung opacities on COVID-19 chest X-rays",
        expected=Expected(
            task="anomaly_detection", classes=["opacity"],
            synonyms={"opacity": ["opacities", "lung opacity", "lung opacities",
                                  "covid opacity", "pneumonia"]},
            count=lambda r: len(_rows(r / "train_image_level.csv")),
            grouping="StudyInstanceUID (the patient only in the DICOM PatientID)",
            split_ships=False,
            alternates=[{"task": "diagnosis", "classes": list(b2.SIIM_STUDY_COLS)}],
            note="counted per image, negatives included ('none 1 0 0 1 1', empty boxes); three "
                 "studies have a second image; the study-level 4-class reading is the other "
                 "half of the challenge"),
    ),
    Case(
        key="covid_radiography", public_name="COVID-19 Radiography Database (Qatar/Dhaka)",
        docs="Chowdhury et al., IEEE Access 2020; Rahman et al., Comput Biol Med 2021; Kaggle "
             "'tawsifurrahman/covid19-radiography-database' (<class>/images/, <class>/masks/, "
             "<class>.metadata.xlsx, README.md.txt)",
        make=b2.make_covid_radiography, name="COVID19-Radiography",
        layout="four class folders each split into images/ and masks/ (lung masks, smaller "
               "than the images); per-class metadata XLSX of sources; a space in 'Viral "
               "Pneumonia'",
        description="Chest X-rays pooled from public collections: COVID-19, non-COVID lung "
                    "opacity, viral pneumonia and normal. Lung field masks are included.",
        request="classify chest X-rays as COVID-19, lung opacity, viral pneumonia or normal",
        expected=Expected(
            task="diagnosis", classes=list(b2.COVID_RAD_CLASSES),
            synonyms={"COVID": ["covid-19", "covid19", "covid 19"],
                      "Lung_Opacity": ["lung opacity", "non-covid lung infection"],
                      "Viral Pneumonia": ["viral_pneumonia", "viral", "pneumonia"]},
            count=_count("*/images/*.png"), grouping=None, split_ships=False,
            alternates=[{"task": "segmentation", "classes": ["lungs"]},
                        {"task": "segmentation", "classes": ["lung"]}],
            note="the masks are lung fields, not the label; counting masks and images together "
                 "doubles the count"),
    ),
    Case(
        key="idrid_seg", public_name="IDRiD, part A. Segmentation (diabetic retinopathy lesions)",
        docs="Porwal et al., Data 3(3):25, 2018 and Med Image Anal 59:101561, 2020; IEEE "
             "DataPort doi:10.21227/H25W98; idrid.grand-challenge.org ('1. Original Images/"
             "a. Training Set', '2. All Segmentation Groundtruths/a. Training Set/1. "
             "Microaneurysms/IDRiD_01_MA.tif', ...)",
        make=b2m.make_idrid_seg, name="IDRiD-Segmentation",
        layout="JPEG fundus photos + one folder per lesion type of binary masks drawn in red "
               "(RGB TIFF), files missing where a lesion is absent; training/testing subfolders "
               "named 'a. Training Set' / 'b. Testing Set'",
        description="Fundus photographs from an eye clinic in India with pixel masks of "
                    "diabetic retinopathy lesions (microaneurysms, haemorrhages, hard and soft "
                    "exudates) and of the optic disc.",
        request="segment diabetic retinopathy lesions and the optic disc on fundus photographs",
        expected=Expected(
            task="segmentation", classes=[v[1] for v in b2m.IDRID_LESIONS.values()],
            synonyms={"microaneurysms": ["microaneurysm", "ma"],
                      "haemorrhages": ["haemorrhage", "hemorrhages", "hemorrhage", "he"],
                      "hard exudates": ["hard exudate", "ex", "exudates"],
                      "soft exudates": ["soft exudate", "se", "cotton wool spots"],
                      "optic disc": ["optic disk", "od"]},
            count=_count("1. Original Images/*/*.jpg"), grouping=None, split_ships=True,
            note="five binary masks per image in parallel folders (numbered folder names); a "
                 "missing mask means an empty one; TIFF masks are red on black"),
    ),
    Case(
        key="hc18", public_name="HC18 (fetal head circumference, ultrasound)",
        docs="van den Heuvel et al., PLoS ONE 13(8):e0200412, 2018; hc18.grand-challenge.org; "
             "Zenodo doi:10.5281/zenodo.1327317 (training_set/NNN_HC.png + NNN_HC_Annotation"
             ".png, training_set_pixel_size_and_HC.csv, test_set/, test_set_pixel_size.csv)",
        make=b2m.make_hc18, name="HC18",
        layout="PNG frames with an _Annotation.png beside each holding the head ellipse as a "
               "thin outline (not filled); CSV of pixel size and circumference; unlabelled "
               "test_set/ reusing the same file names",
        description="Fetal ultrasound images of the standard plane for measuring head "
                    "circumference. The head is outlined with an ellipse in the annotation "
                    "images, and the CSV gives pixel size and the measured circumference.",
        request="segment the fetal head on ultrasound to measure head circumference",
        expected=Expected(
            task="segmentation", classes=["fetal head"],
            synonyms={"fetal head": ["head", "fetal skull", "skull", "hc", "head circumference",
                                     "foetal head"]},
            count=_count("training_set/*_Annotation.png"),
            grouping="subject number (NNN_2HC, NNN_3HC are further images of subject NNN)",
            split_ships=False,
            note="the annotation is an outline that has to be filled to give a mask"),
    ),
    Case(
        key="bccd", public_name="BCCD (blood cell count and detection)",
        docs="github.com/Shenggan/BCCD_Dataset README (BCCD/{Annotations,ImageSets/Main,"
             "JPEGImages}, Pascal VOC XML, classes RBC, WBC, Platelets; test.csv "
             "filename,cell_type,xmin,xmax,ymin,ymax)",
        make=b2m.make_bccd, name="BCCD",
        layout="Pascal VOC: JPEGImages/ + Annotations/*.xml + ImageSets/Main split lists; a "
               "top-level test.csv that lists every box (not a test split) with x before y "
               "columns in the order xmin,xmax,ymin,ymax; example.jpg that is not a sample",
        description="",
        request="detect red blood cells, white blood cells and platelets in blood smear images",
        expected=Expected(
            task="anomaly_detection", classes=list(b2m.BCCD_CLASSES),
            synonyms={"WBC": ["white blood cell", "white blood cells", "leukocyte",
                              "leukocytes"],
                      "RBC": ["red blood cell", "red blood cells", "erythrocyte",
                              "erythrocytes"],
                      "Platelets": ["platelet", "thrombocyte", "thrombocytes"]},
            count=_count("BCCD/Annotations/*.xml"), grouping=None, split_ships=True,
            note="no description; three box classes, many boxes per image; the split is in "
                 "ImageSets/Main, not in test.csv"),
    ),
    Case(
        key="rsna_cspine", public_name="RSNA 2022 Cervical Spine Fracture Detection",
        docs="Kaggle 'rsna-2022-cervical-spine-fracture-detection' Data page; Lin et al., "
             "Radiology: AI 5(5):e230034, 2023; RSNA AI-Challenge-Data wiki (train.csv "
             "StudyInstanceUID,patient_overall,C1..C7; train_images/<UID>/<n>.dcm; "
             "train_bounding_boxes.csv; segmentations/<UID>.nii)",
        make=b3.make_rsna_cspine, name="RSNA-CSpine-Fracture",
        layout="one folder of numbered CT slices per StudyInstanceUID + a study-level CSV with "
               "eight 0/1 columns; fracture boxes per slice for some studies; vertebra label "
               "maps for a few; unlabelled test_images/",
        description="Cervical spine CT scans of trauma patients. Each study is labelled for a "
                    "fracture at each vertebra C1 to C7, and overall.",
        request="detect which cervical vertebrae (C1 to C7) are fractured on CT",
        expected=Expected(
            task="diagnosis", classes=list(b3.CSPINE_VERTEBRAE),
            also_accept_classes=[["patient_overall", *b3.CSPINE_VERTEBRAE]],
            count=lambda r: len(_rows(r / "train.csv")), grouping="StudyInstanceUID",
            split_ships=False,
            alternates=[{"task": "diagnosis", "classes": ["0", "1"]},
                        {"task": "anomaly_detection", "classes": None}],
            note="3D, multi-label per study; slices named by instance number, some studies "
                 "stored bottom-up; boxes and segmentations cover subsets only"),
    ),
    Case(
        key="mosmeddata", public_name="MosMedData COVID19_1110 (chest CT severity)",
        docs="Morozov et al., arXiv:2005.06465 (medRxiv 2020.05.20.20100362); "
             "mosmed.ai/en/datasets/covid191110 (studies/CT-0..CT-4/study_NNNN.nii.gz, "
             "masks/study_NNNN_mask.nii.gz, dataset_registry.xlsx)",
        make=b3m.make_mosmeddata, name="MosMedData",
        layout="NIfTI volumes in five ordinal severity folders CT-0..CT-4 under studies/, a "
               "masks/ folder for a few CT-1 studies, an XLSX registry repeating the category",
        description="Chest CT scans from Moscow hospitals during the first COVID-19 wave, "
                    "graded CT-0 to CT-4 by the share of lung involved. A few CT-1 studies have "
                    "lesion masks.",
        request="grade COVID-19 pneumonia severity from CT-0 to CT-4 on chest CT",
        expected=Expected(
            task="diagnosis", classes=list(b3m.MOSMED_CATEGORIES),
            synonyms={f"CT-{k}": [f"ct{k}", f"{k}", f"ct {k}"] for k in range(5)},
            count=_count("studies/*/*.nii.gz"), grouping=None, split_ships=False,
            alternates=[{"task": "segmentation", "classes": None}],
            note="3D, ordinal; CT-4 has 2 studies as in the release; masks exist for 6 CT-1 "
                 "studies only"),
    ),
    Case(
        key="rsna_mgmt", public_name="RSNA-MICCAI Brain Tumor Radiogenomic Classification",
        docs="Kaggle 'rsna-miccai-brain-tumor-radiogenomic-classification' Data page; Baid et "
             "al., arXiv:2107.02314 (train/<5-digit id>/{FLAIR,T1w,T1wCE,T2w}/Image-<k>.dcm, "
             "train_labels.csv BraTS21ID,MGMT_value)",
        make=b3.make_rsna_mgmt, name="RSNA-MICCAI-MGMT",
        layout="per case four DICOM series folders in mixed planes; a label CSV whose ids drop "
               "the zero padding of the folder names; unlabelled test/",
        description="Pre-operative brain MRI (FLAIR, T1, T1 post-contrast, T2) of glioblastoma "
                    "patients. The label is MGMT promoter methylation measured on tissue.",
        request="predict MGMT promoter methylation status from brain MRI",
        expected=Expected(
            task="diagnosis", classes=["0", "1"],
            synonyms={"1": ["methylated", "mgmt methylated", "positive", "true"],
                      "0": ["unmethylated", "not methylated", "negative", "false"]},
            count=lambda r: len(_rows(r / "train_labels.csv")), grouping="BraTS21ID",
            split_ships=False,
            note="3D multi-sequence; joining the CSV to folders needs zero padding (12 -> 00012)"),
    ),
    Case(
        key="lits", public_name="LiTS (Liver Tumor Segmentation Challenge)",
        docs="Bilic et al., Med Image Anal 84:102680, 2023 (arXiv:1901.04056); CodaLab "
             "competition 17094 ('Training Batch 1/volume-N.nii', 'segmentation-N.nii', "
             "'Training Batch 2/')",
        make=b3m.make_lits, name="LiTS",
        layout="two batch folders of uncompressed NIfTI, image and label paired only by the "
               "number in volume-N / segmentation-N; labels 1 liver, 2 tumour",
        description="",
        request="segment the liver and liver tumours on abdominal CT",
        expected=Expected(
            task="segmentation", classes=["liver", "tumor"],
            synonyms={"tumor": ["tumour", "lesion", "liver tumor", "liver tumour",
                                "liver lesion", "cancer"]},
            count=_count("*/segmentation-*.nii"), grouping=None, split_ships=False,
            note="no description; label values 1/2 carry no names in the files"),
    ),
]

CASES4_BY_KEY = {c.key: c for c in CASES4}

__all__ = ["CASES4", "CASES4_BY_KEY"]
