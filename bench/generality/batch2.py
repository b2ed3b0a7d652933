"""Batch 2 of the generality check: ten more public-dataset layouts, none of them used in
batch 1 or elsewhere in the repository. Same contract as ``cases.py``: which public dataset
each folder follows, the documentation used, what a clinician would type (datacard description
and chat request) and the expected reading, which lives only here, never in a dataset folder.

Run with ``python -m bench.generality.run --batch 2`` (``--batch all`` runs both batches).
Generators: ``batch2_2d.py``, ``batch2_2d_more.py`` and ``batch2_3d.py``.
"""
from __future__ import annotations

import csv
from pathlib import Path

from . import batch2_2d as b2
from . import batch2_2d_more as b2m
from . import batch2_3d as b3
from .cases import Case, Expected


def _rows(p: Path, delimiter: str = ",") -> list[dict]:
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh, delimiter=delimiter))


def _count_kermany(root: Path) -> int:
    return sum(1 for p in root.glob("*/*/*.jpeg")
               if p.parts[-3] in ("train", "test", "val") and not p.name.startswith("._"))


def _count_cbis(root: Path) -> int:
    return sum(len(_rows(p)) for p in root.glob("*_case_description_*_set.csv"))


def _count_ctrate(root: Path) -> int:
    return sum(len(_rows(p)) for p in root.glob("dataset/radiology_text_reports/*_reports.csv"))


def _count_oasis(root: Path) -> int:
    return sum(1 for r in _rows(root / "oasis_cross-sectional.csv") if r["CDR"].strip())


_TS_SYN = {"urinary_bladder": ["bladder"], "kidney_left": ["left kidney"],
           "kidney_right": ["right kidney"],
           "vertebrae_L1": ["l1", "l1 vertebra", "vertebra l1", "lumbar vertebra 1", "vertebrae l1"],
           "lung_upper_lobe_left": ["left upper lobe", "left upper lung lobe",
                                    "upper lobe of left lung"],
           "lung_upper_lobe_right": ["right upper lobe", "right upper lung lobe",
                                     "upper lobe of right lung"]}

CASES2: list[Case] = [
    Case(
        key="kermany_pneumonia",
        public_name="Chest X-Ray Images (Pneumonia), Kermany 2018",
        docs="Kermany et al., Cell 172(5):1122, 2018; Mendeley Data doi:10.17632/rscbjbr9sj.2; "
             "Kaggle 'paultimothymooney/chest-xray-pneumonia' (chest_xray/{train,test,val}/"
             "{NORMAL,PNEUMONIA}/, person<P>_bacteria_<K>.jpeg, person<P>_virus_<K>.jpeg, "
             "IM-####-####.jpeg, NORMAL2-IM-####-####.jpeg)",
        make=b2.make_kermany_pneumonia, name="Pediatric-Pneumonia-CXR",
        layout="split/class folders of JPEGs; bacteria/virus and patient number in the file "
               "name; .DS_Store files and a __MACOSX/ folder of '._' stubs",
        description="Pediatric chest X-rays (children aged 1 to 5, Guangzhou) sorted into "
                    "normal and pneumonia. The file name also says whether a pneumonia was "
                    "bacterial or viral.",
        request="classify pediatric chest X-rays as normal or pneumonia",
        expected=Expected(
            task="diagnosis", classes=["NORMAL", "PNEUMONIA"],
            synonyms={"NORMAL": ["healthy", "negative", "no pneumonia"],
                      "PNEUMONIA": ["positive", "pneumonic"]},
            also_accept_classes=[["NORMAL", "bacteria", "virus"],
                                 ["normal", "bacterial", "viral"],
                                 ["normal", "bacterial pneumonia", "viral pneumonia"]],
            count=_count_kermany, grouping="patient number in the file name (person<P>, IM-<P>)",
            split_ships=True,
            note="__MACOSX/._*.jpeg are AppleDouble stubs, not images; val/ is tiny as in the "
                 "release"),
    ),
    Case(
        key="aptos2019", public_name="APTOS 2019 Blindness Detection",
        docs="Kaggle competition 'aptos2019-blindness-detection' Data page (train.csv: id_code,"
             "diagnosis 0-4 on the 0 No DR / 1 Mild / 2 Moderate / 3 Severe / 4 Proliferative DR "
             "scale; test.csv; sample_submission.csv; train_images/<id_code>.png)",
        make=b2.make_aptos2019, name="APTOS2019",
        layout="train.csv with a 12-hex-digit id_code and a bare 0-4 grade; PNG fundus photos",
        description="",
        request="grade diabetic retinopathy severity from 0 to 4 on fundus photographs",
        expected=Expected(
            task="diagnosis", classes=["0", "1", "2", "3", "4"],
            synonyms={"0": ["no dr", "no diabetic retinopathy", "none", "no_dr", "normal"],
                      "1": ["mild", "mild dr", "mild npdr"],
                      "2": ["moderate", "moderate dr", "moderate npdr"],
                      "3": ["severe", "severe dr", "severe npdr"],
                      "4": ["proliferative", "proliferative dr", "proliferative_dr", "pdr"]},
            count=lambda r: len(_rows(r / "train.csv")), grouping=None, split_ships=False,
            note="no description given; test_images/ has no labels; grades are bare integers"),
    ),
    Case(
        key="padchest", public_name="PadChest (BIMCV, Hospital San Juan)",
        docs="Bustos et al., Med Image Anal 66:101797, 2020; bimcv.cipf.es/bimcv-projects/"
             "padchest (PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv; ImageDir folders "
             "0-54 of 16-bit PNGs; Labels / Localizations as list strings)",
        make=b2.make_padchest, name="PadChest-extract",
        layout="one big CSV (Labels as \"['a', 'b']\", Spanish Report) + numbered folders of "
               "16-bit PNGs named by ImageID",
        description="PadChest chest X-rays from Hospital San Juan, Alicante, with the Spanish "
                    "radiology reports. The findings were extracted from the reports, some by "
                    "physicians and most by a trained model.",
        request="classify chest X-rays for cardiomegaly, pleural effusion, pneumonia and nodule",
        expected=Expected(
            task="diagnosis", classes=list(b2.PADCHEST_LABELS),
            synonyms={"pleural effusion": ["effusion"],
                      "nodule": ["pulmonary nodule", "lung nodule", "nodules"]},
            also_accept_classes=[list(b2.PADCHEST_LABELS) + ["normal"]],
            count=lambda r: len(_rows(r / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv")),
            grouping="PatientID", split_ships=False,
            alternates=[{"task": "report_generation", "classes": None}],
            note="multi-label; PA/AP and lateral views; several studies per patient"),
    ),
    Case(
        key="siim_acr_ptx", public_name="SIIM-ACR Pneumothorax Segmentation (2019)",
        docs="Kaggle competition 'siim-acr-pneumothorax-segmentation' Data page and its "
             "mask_functions.py (train-rle.csv 'ImageId, EncodedPixels', relative column-major "
             "RLE, -1 = no pneumothorax; dicom-images-train/<study>/<series>/<SOP>.dcm)",
        make=b2.make_siim_acr_ptx, name="SIIM-ACR-Pneumothorax",
        layout="DICOMs nested study/series/SOP-UID + train-rle.csv (', '-separated, relative "
               "RLE, one row per pneumothorax, -1 for none)",
        description="SIIM-ACR pneumothorax challenge chest X-rays in DICOM. The pneumothorax "
                    "masks are run-length encoded in train-rle.csv; -1 means no pneumothorax.",
        request="segment pneumothorax on chest X-rays",
        expected=Expected(
            task="segmentation", classes=["pneumothorax"],
            synonyms={"pneumothorax": ["ptx", "pneumothoraces"]},
            count=lambda r: len({row["ImageId"] for row in _rows(r / "train-rle.csv")}),
            grouping=None, split_ships=False,
            alternates=[{"task": "diagnosis", "classes": c} for c in (
                ["pneumothorax", "no pneumothorax"], ["pneumothorax", "normal"],
                ["pneumothorax", "-1"], ["1", "0"])],
            note="images with two pneumothoraces have two rows; dicom-images-test/ unlabelled"),
    ),
    Case(
        key="drive", public_name="DRIVE (Digital Retinal Images for Vessel Extraction)",
        docs="Staal et al., IEEE TMI 23(4):501, 2004; drive.grand-challenge.org and the original "
             "DRIVE.zip (training|test/images/NN_<split>.tif, 1st_manual/NN_manual1.gif, "
             "2nd_manual/ (test), mask/NN_<split>_mask.gif)",
        make=b2m.make_drive, name="DRIVE",
        layout="training/ and test/ with images/*.tif, 1st_manual/*.gif vessel masks, mask/*.gif "
               "field-of-view masks, test/2nd_manual/",
        description="DRIVE retinal fundus photographs from a Dutch diabetic retinopathy "
                    "screening programme, with manual vessel segmentations. The mask folder is "
                    "only the field of view.",
        request="segment the retinal blood vessels in fundus images",
        expected=Expected(
            task="segmentation", classes=["vessel"],
            synonyms={"vessel": ["vessels", "blood vessel", "blood vessels", "retinal vessel",
                                 "retinal vessels", "vasculature", "vascular"]},
            count=lambda r: sum(1 for _ in r.glob("*/1st_manual/*.gif")), grouping=None,
            split_ships=True,
            note="mask/ is the field of view, not the label; 2nd_manual is a second observer"),
    ),
    Case(
        key="cbis_ddsm", public_name="CBIS-DDSM (Curated Breast Imaging Subset of DDSM)",
        docs="Lee et al., Sci Data 4:170177, 2017; TCIA wiki CBIS-DDSM, doi:10.7937/K9/"
             "TCIA.2016.7O02S9CY (mass_/calc_case_description_{train,test}_set.csv with image, "
             "cropped and ROI mask file paths; pathology MALIGNANT/BENIGN/"
             "BENIGN_WITHOUT_CALLBACK)",
        make=b2m.make_cbis_ddsm, name="CBIS-DDSM-extract",
        layout="TCIA DICOM tree per image (<Mass|Calc>-<Training|Test>_P_#####_<side>_<view>"
               "[_N]/<study UID>/<series UID>/00000N.dcm) + four case description CSVs",
        description="CBIS-DDSM scanned film mammograms (DICOM) with the masses and "
                    "calcification clusters outlined. Pathology, benign or malignant, is "
                    "biopsy-proven and listed in the case description CSVs.",
        request="classify mammogram lesions as benign or malignant",
        expected=Expected(
            task="diagnosis", classes=["BENIGN", "MALIGNANT"],
            also_accept_classes=[["BENIGN", "BENIGN_WITHOUT_CALLBACK", "MALIGNANT"]],
            count=_count_cbis, grouping="patient_id", split_ships=True,
            alternates=[{"task": "segmentation", "classes": None},
                        {"task": "anomaly_detection", "classes": None}],
            note="one row per abnormality per view (CC and MLO); ROI masks and crops beside "
                 "the full images"),
    ),
    Case(
        key="deeplesion", public_name="DeepLesion (NIH Clinical Center)",
        docs="Yan et al., J Med Imaging 5(3):036501, 2018; nihcc.app.box.com/v/DeepLesion "
             "README (Images_png/<patient>_<study>_<series>/<slice>.png, HU = value - 32768; "
             "DL_info.csv with Bounding_boxes 'x1, y1, x2, y2', Coarse_lesion_type, "
             "Train_Val_Test)",
        make=b2m.make_deeplesion, name="DeepLesion-extract",
        layout="16-bit PNG slices per series folder + DL_info.csv, one row per lesion with the "
               "box as a quoted 'x1, y1, x2, y2' string",
        description="DeepLesion CT slices from the NIH Clinical Center with the lesions "
                    "radiologists measured (RECIST) during routine reads; each lesion's box is "
                    "in DL_info.csv. PNG values are HU plus 32768.",
        request="detect lesions on CT slices with bounding boxes",
        expected=Expected(
            task="anomaly_detection", classes=["lesion"],
            synonyms={"lesion": ["lesions", "abnormality", "finding", "tumor", "tumour"]},
            count=lambda r: len({row["File_name"] for row in _rows(r / "DL_info.csv")}),
            grouping="Patient_index", split_ships=True,
            alternates=[{"task": "anomaly_detection",
                         "classes": list(b2m.DL_TYPES.values())}],
            note="the key slice is one of 5 slices in its series folder; Coarse_lesion_type is "
                 "-1 for the whole training split"),
    ),
    Case(
        key="totalsegmentator", public_name="TotalSegmentator dataset v2",
        docs="Wasserthal et al., Radiology: AI 5(5):e230024, 2023; Zenodo doi:10.5281/"
             "zenodo.10047292 (s####/ct.nii.gz, s####/segmentations/<structure>.nii.gz, "
             "meta.csv separated by ';' with a split column)",
        make=b3.make_totalsegmentator, name="TotalSegmentator-extract",
        layout="case folders with ct.nii.gz and one binary mask file per structure under "
               "segmentations/; ';'-separated meta.csv",
        description="",
        request="segment the liver, spleen, kidneys, stomach, aorta, bladder, L1 vertebra and "
                "the upper lung lobes on CT",
        expected=Expected(
            task="segmentation", classes=list(b3.TOTALSEG_STRUCTURES),
            synonyms=_TS_SYN,
            count=lambda r: sum(1 for _ in r.glob("s*/ct.nii.gz")), grouping=None,
            split_ships=True,
            note="3D; no description given; masks are empty when the structure is outside the "
                 "scan; split in meta.csv"),
    ),
    Case(
        key="ct_rate", public_name="CT-RATE (chest CT volumes with reports)",
        docs="Hamamci et al., arXiv:2403.17834, 2024; huggingface.co/datasets/ibrahimhamamci/"
             "CT-RATE dataset card (dataset/{train,valid}/..., radiology_text_reports/*_reports."
             "csv, multi_abnormality_labels/*_predicted_labels.csv, metadata/*_metadata.csv)",
        make=b3.make_ct_rate, name="CT-RATE-extract",
        layout="patient/scan/reconstruction NIfTI tree + report, 18-label and metadata CSVs "
               "keyed by VolumeName; rescale and spacing only in the metadata",
        description="CT-RATE non-contrast chest CT volumes from Istanbul Medipol University, "
                    "each with its radiology report (findings and impression, in English). "
                    "Eighteen abnormality labels were extracted from the reports.",
        request="write radiology reports for chest CT scans",
        expected=Expected(
            task="report_generation", classes=[], count=_count_ctrate,
            grouping="patient folder (<split>_<N>)", split_ships=True,
            alternates=[{"task": "diagnosis", "classes": list(b3.CTRATE_ABNORMALITIES)}],
            note="3D; a scan's reconstructions share its report; 18 abnormality columns make a "
                 "multi-label diagnosis reading defensible too"),
    ),
    Case(
        key="oasis1", public_name="OASIS-1 (Open Access Series of Imaging Studies, cross-sectional)",
        docs="Marcus et al., J Cogn Neurosci 19(9):1498, 2007; oasis-brains.org OASIS-1 fact "
             "sheet (disc<N>/OAS1_####_MR1/{RAW,PROCESSED/MPRAGE/T88_111,FSL_SEG}/*.hdr+.img, "
             "oasis_cross-sectional.csv: ID,M/F,Hand,Age,Educ,SES,MMSE,CDR,eTIV,nWBV,ASF,Delay)",
        make=b3.make_oasis1, name="OASIS-1-extract",
        layout="disc folders of session folders with Analyze .hdr/.img pairs (raw, atlas, "
               "tissue segmentation) + oasis_cross-sectional.csv with CDR (empty under 60)",
        description="OASIS-1 T1 brain MRI of adults aged 18 to 96. The Clinical Dementia Rating "
                    "(CDR: 0 none, 0.5 very mild, 1 mild, 2 moderate dementia) is in "
                    "oasis_cross-sectional.csv, for subjects 60 and over only.",
        request="classify dementia severity (CDR) from brain MRI",
        expected=Expected(
            task="diagnosis", classes=["0", "0.5", "1", "2"],
            synonyms={"0": ["0.0", "cdr 0", "nondemented", "non demented", "no dementia",
                            "normal", "cognitively normal"],
                      "0.5": ["cdr 0.5", "very mild dementia", "very mild", "questionable"],
                      "1": ["1.0", "cdr 1", "mild dementia", "mild"],
                      "2": ["2.0", "cdr 2", "moderate dementia", "moderate"]},
            count=_count_oasis, grouping="subject (OAS1_####; MR2 rows are rescans)",
            split_ships=False,
            alternates=[{"task": "diagnosis", "classes": c} for c in (
                ["nondemented", "demented"], ["non-demented", "demented"],
                ["normal", "dementia"])] + [{"task": "segmentation", "classes": None}],
            note="3D Analyze 7.5; subjects under 60 and MR2 rescans have no CDR; FSL_SEG tissue "
                 "maps (CSF/GM/WM) make a segmentation reading possible"),
    ),
]

CASES2_BY_KEY = {c.key: c for c in CASES2}

__all__ = ["CASES2", "CASES2_BY_KEY"]
