"""The ten cases: which public dataset each folder follows, the documentation used, what a
clinician would type (datacard description and chat request) and the expected reading.

Expected sample counts are counted from the generated folder by a small function that knows
the public layout (``count``), so they stay right if a generator's size changes.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import datasets_2d as d2
from . import datasets_3d as d3


@dataclass
class Expected:
    task: str                                  # diagnosis | segmentation | anomaly_detection | report_generation
    classes: list[str]                         # class / label-map / finding names (no background)
    count: Callable[[Path], int]               # labelled samples, counted from the folder
    grouping: str | None                       # patient / grouping field, None if one sample per patient
    split_ships: bool                          # a train/test split comes with the data
    synonyms: dict[str, list[str]] = field(default_factory=dict)   # other accepted names per class
    also_accept_classes: list[list[str]] = field(default_factory=list)  # whole other class sets
    alternates: list[dict] = field(default_factory=list)  # defensible other readings {task, classes}
    note: str = ""


@dataclass
class Case:
    key: str
    public_name: str
    docs: str                     # documentation followed
    make: Callable[..., Path]
    name: str                     # datacard name to register under
    description: str
    request: str
    expected: Expected
    layout: str = ""


def _csv_rows(p: Path) -> list[dict]:
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def _glob_count(pattern: str) -> Callable[[Path], int]:
    return lambda root: sum(1 for _ in root.glob(pattern))


CASES: list[Case] = [
    Case(
        key="nih_cxr14", public_name="NIH ChestX-ray14",
        docs="NIH Clinical Center README_CHESTXRAY.pdf (nihcc.app.box.com/v/ChestXray-NIHCC) and "
             "Kaggle 'nih-chest-xrays/data' (Data_Entry_2017.csv, BBox_List_2017.csv, "
             "train_val_list.txt, test_list.txt, images_0NN/images/)",
        make=d2.make_nih_cxr14, name="NIH-ChestXray14-extract",
        layout="images_00N/images/*.png + Data_Entry_2017.csv ('A|B' Finding Labels) + list files",
        description="Extract of the NIH ChestX-ray14 set: frontal chest radiographs with finding "
                    "labels text-mined from the reports. Only some of the 14 findings occur here.",
        request="classify chest X-rays for atelectasis, cardiomegaly, effusion and nodule",
        expected=Expected(
            task="diagnosis", classes=list(d2.NIH_FINDINGS),
            also_accept_classes=[list(d2.NIH_FINDINGS) + ["No Finding"]],
            count=lambda r: len(_csv_rows(r / "Data_Entry_2017.csv")),
            grouping="Patient ID", split_ships=True,
            alternates=[{"task": "anomaly_detection", "classes": ["Cardiomegaly", "Nodule"]}],
            note="multi-label; BBox_List_2017.csv holds boxes for a few images only"),
    ),
    Case(
        key="rsna_pneumonia", public_name="RSNA Pneumonia Detection Challenge (2018)",
        docs="Kaggle competition 'rsna-pneumonia-detection-challenge' Data page (stage_2_train_labels."
             "csv: patientId,x,y,width,height,Target; stage_2_detailed_class_info.csv; DICOM per "
             "patientId); Shih et al., Radiology: AI 2019",
        make=d2.make_rsna_pneumonia, name="RSNA-Pneumonia",
        layout="stage_2_train_images/<patientId>.dcm + box table with Target 0/1",
        description="RSNA pneumonia detection challenge chest X-rays (stage 2 download). Lung "
                    "opacities suspicious for pneumonia are boxed by radiologists.",
        request="detect lung opacities from pneumonia with bounding boxes on chest X-rays",
        expected=Expected(
            task="anomaly_detection", classes=["Lung Opacity"],
            synonyms={"Lung Opacity": ["opacity", "pneumonia", "lung opacities", "opacities"]},
            count=lambda r: len({row["patientId"] for row in
                                 _csv_rows(r / "stage_2_train_labels.csv")}),
            grouping="patientId", split_ships=False,
            alternates=[{"task": "diagnosis", "classes": None}],
            note="Target 0 rows are images without a box; stage_2_test_images has no labels"),
    ),
    Case(
        key="luna16", public_name="LUNA16 (LIDC-IDRI subset)",
        docs="luna16.grand-challenge.org/Data (subset0-9 .mhd/.raw, annotations.csv: seriesuid,"
             "coordX,coordY,coordZ,diameter_mm in world mm; candidates.csv: ...,class); "
             "Setio et al., MedIA 2017",
        make=d3.make_luna16, name="LUNA16-extract",
        layout="subsetN/<seriesuid>.mhd+.raw + annotations.csv in world coordinates (mm)",
        description="Lung nodule CT scans from LUNA16.",
        request="detect lung nodules on chest CT",
        expected=Expected(
            task="anomaly_detection", classes=["nodule"],
            synonyms={"nodule": ["nodules", "lung nodule", "pulmonary nodule"]},
            count=_glob_count("subset*/*.mhd"), grouping="seriesuid", split_ships=False,
            note="3D; scans with no row in annotations.csv are nodule-free negatives"),
    ),
    Case(
        key="brats2021", public_name="BraTS 2021 (RSNA-ASNR-MICCAI, Task 1)",
        docs="Synapse BraTS 2021 data description / Baid et al. arXiv:2107.02314 "
             "(BraTS2021_#####_{flair,t1,t1ce,t2,seg}.nii.gz; labels 1 NCR, 2 ED, 4 ET)",
        make=d3.make_brats2021, name="BraTS2021-extract",
        layout="one folder per case with 4 sequences and _seg (labels 0,1,2,4)",
        description="BraTS 2021 glioma MRI: FLAIR, T1, T1ce and T2 per case with the tumour "
                    "segmentation (1 necrotic tumour core, 2 peritumoral edema, 4 enhancing tumour).",
        request="segment the brain tumour sub-regions on MRI",
        expected=Expected(
            task="segmentation",
            classes=["necrotic tumour core", "peritumoral edema", "enhancing tumour"],
            synonyms={"necrotic tumour core": ["ncr", "necrotic tumor core", "necrosis",
                                               "necrotic core", "ncr/net", "necrotic"],
                      "peritumoral edema": ["ed", "edema", "oedema", "peritumoral oedema",
                                            "peritumoral edematous tissue"],
                      "enhancing tumour": ["et", "enhancing tumor", "gd-enhancing tumour",
                                           "gd-enhancing tumor", "enhancing"]},
            count=_glob_count("BraTS2021_*/*_seg.nii.gz"), grouping=None, split_ships=False,
            note="4 input channels; label values are 1, 2 and 4 (not 3)"),
    ),
    Case(
        key="acdc", public_name="ACDC (Automated Cardiac Diagnosis Challenge, MICCAI 2017)",
        docs="humanheart-project.creatis.insa-lyon.fr/database (database/training|testing/"
             "patient###/Info.cfg, _4d.nii.gz, _frame##.nii.gz, _frame##_gt.nii.gz; labels "
             "1 RV, 2 MYO, 3 LV); Bernard et al., IEEE TMI 2018",
        make=d3.make_acdc, name="ACDC-extract",
        layout="patient folders with ED/ES frames + _gt masks, Info.cfg, a 4D cine file",
        description="ACDC cardiac cine MRI in short axis. End-diastolic and end-systolic frames "
                    "have manual contours of the right ventricle, myocardium and left ventricle.",
        request="segment the left ventricle, right ventricle and myocardium on cardiac MRI",
        expected=Expected(
            task="segmentation", classes=["right ventricle", "myocardium", "left ventricle"],
            synonyms={"right ventricle": ["rv", "right ventricle cavity", "right ventricular cavity",
                                          "rv cavity", "right ventricular"],
                      "myocardium": ["myo", "lv myocardium", "left ventricular myocardium",
                                     "left ventricle myocardium"],
                      "left ventricle": ["lv", "left ventricle cavity", "left ventricular cavity",
                                         "lv cavity", "left ventricular"]},
            count=_glob_count("database/*/patient*/*_gt.nii.gz"), grouping="patient folder",
            split_ships=True,
            alternates=[{"task": "diagnosis", "classes": ["NOR", "MINF", "DCM", "HCM", "RV"]}],
            note="two labelled frames per patient; the _4d file is unlabelled"),
    ),
    Case(
        key="montgomery_tb", public_name="Montgomery County chest X-ray set (NLM)",
        docs="Jaeger et al., Quant Imaging Med Surg 2014 and the NLM-MontgomeryCXRSet ReadMe "
             "(CXR_png/MCUCXR_####_0|1.png, ClinicalReadings/*.txt, ManualMask/leftMask|rightMask)",
        make=d2.make_montgomery_tb, name="Montgomery-TB",
        layout="label as the last file-name digit + one clinical-reading .txt per image + lung masks",
        description="Montgomery County TB screening chest X-rays. The last digit of the file name "
                    "is the reading (0 normal, 1 TB); left and right lung masks are included.",
        request="classify tuberculosis versus normal chest X-rays",
        expected=Expected(
            task="diagnosis", classes=["normal", "tuberculosis"],
            synonyms={"tuberculosis": ["tb", "abnormal", "tb positive"],
                      "normal": ["healthy", "negative"]},
            count=_glob_count("CXR_png/*.png"), grouping=None, split_ships=False,
            alternates=[{"task": "segmentation", "classes": None},
                        {"task": "report_generation", "classes": None}],
            note="one image per patient"),
    ),
    Case(
        key="ham10000", public_name="HAM10000 (ISIC 2018 Task 3 training set)",
        docs="Tschandl et al., Sci Data 2018; Harvard Dataverse doi:10.7910/DVN/DBW86T and Kaggle "
             "'skin-cancer-mnist-ham10000' (HAM10000_metadata.csv: lesion_id,image_id,dx,dx_type,"
             "age,sex,localization; HAM10000_images_part_1|2; hmnist_*.csv)",
        make=d2.make_ham10000, name="HAM10000-extract",
        layout="label table by image_id with several images per lesion_id, images in two folders",
        description="",
        request="classify dermoscopy images of skin lesions into the seven diagnoses",
        expected=Expected(
            task="diagnosis", classes=["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"],
            synonyms={"akiec": ["actinic keratoses", "actinic keratosis", "bowen's disease"],
                      "bcc": ["basal cell carcinoma"],
                      "bkl": ["benign keratosis", "benign keratosis-like lesions"],
                      "df": ["dermatofibroma"], "mel": ["melanoma"],
                      "nv": ["melanocytic nevi", "melanocytic nevus", "nevus"],
                      "vasc": ["vascular lesions", "vascular lesion"]},
            count=lambda r: len(_csv_rows(r / "HAM10000_metadata.csv")),
            grouping="lesion_id", split_ships=False,
            note="no description given; hmnist_8_8_L.csv is Kaggle's pixel table with a label "
                 "code column"),
    ),
    Case(
        key="busi", public_name="BUSI - Breast Ultrasound Images Dataset",
        docs="Al-Dhabyani et al., Data in Brief 28 (2020) 104863; Kaggle "
             "'aryashah2k/breast-ultrasound-images-dataset' (Dataset_BUSI_with_GT/<class>/"
             "'<class> (N).png' + '_mask.png' / '_mask_1.png')",
        make=d2.make_busi, name="BUSI",
        layout="class folders with '(N).png' images and '(N)_mask.png' masks side by side",
        description="Breast ultrasound images from Baheya hospital, grouped as benign, malignant "
                    "and normal, with tumour masks drawn by radiologists.",
        request="classify breast ultrasound images as benign, malignant or normal",
        expected=Expected(
            task="diagnosis", classes=["benign", "malignant", "normal"],
            count=lambda r: sum(1 for p in r.glob("*/*.png") if "_mask" not in p.name),
            grouping=None, split_ships=False,
            alternates=[{"task": "segmentation", "classes": None}],
            note="masks make a segmentation reading defensible too"),
    ),
    Case(
        key="picai", public_name="PI-CAI Public Training and Development Dataset",
        docs="pi-cai.grand-challenge.org/DATA, zenodo.org/record/6624726 (picai_public_images_"
             "fold0-4/<patient>/<patient>_<study>_{t2w,adc,hbv,cor,sag}.mha) and github.com/"
             "DIAGNijmegen/picai_labels (clinical_information/marksheet.csv, case_csPCa YES/NO)",
        make=d3.make_picai, name="PI-CAI-extract",
        layout="per-patient folders of .mha sequences + marksheet.csv keyed by patient_id/study_id",
        description="PI-CAI prostate bpMRI exams (T2, ADC, high b-value). Whether each exam has "
                    "clinically significant cancer (csPCa) is in the marksheet.",
        request="predict clinically significant prostate cancer from prostate MRI",
        expected=Expected(
            task="diagnosis", classes=["YES", "NO"],
            synonyms={"YES": ["cspca", "case cspca", "positive", "clinically significant prostate cancer",
                              "significant", "cancer"],
                      "NO": ["negative", "no cspca", "no case cspca", "no cancer", "not significant"]},
            count=lambda r: len(_csv_rows(r / "picai_labels/clinical_information/marksheet.csv")),
            grouping="patient_id", split_ships=False,
            alternates=[{"task": "diagnosis", "classes": ["0", "1", "2", "3", "4", "5"]}],
            note="3D multi-sequence; ADC/HBV on a coarser grid than T2W; cor/sag are other "
                 "orientations; some patients have two studies"),
    ),
    Case(
        key="roco", public_name="ROCO - Radiology Objects in COntext (radiology part)",
        docs="github.com/razorx89/roco-dataset README and data/<split>/radiology/captions.txt "
             "('ROCO_#####<TAB> caption'); Pelka et al., LABELS@MICCAI 2018",
        make=d2.make_roco, name="ROCO-extract",
        layout="train/validation/test folders of images + tab-separated captions.txt",
        description="",
        request="write a report for a radiology image",
        expected=Expected(
            task="report_generation", classes=[],
            count=_glob_count("data/*/radiology/images/*.jpg"), grouping=None, split_ships=True,
            note="no description given; keywords/semtypes/cuis/dlinks/licences files beside"),
    ),
]

CASES_BY_KEY = {c.key: c for c in CASES}
