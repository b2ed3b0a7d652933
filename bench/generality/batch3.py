"""Batch 3 of the generality check: ten more public-dataset layouts, none of them used in
batches 1-2 or elsewhere in the repository. Same contract as ``cases.py``: which public dataset
each folder follows, the documentation used, what a clinician would type (datacard description
and chat request) and the expected reading, which lives only here, never in a dataset folder.

Run with ``python -m bench.generality.run --batch 3`` (``--batch all`` runs all three batches).
Generators: ``batch3_2d.py`` and ``batch3_3d.py``.
"""
from __future__ import annotations

import csv
from pathlib import Path

from . import batch3_2d as b2
from . import batch3_3d as b3
from .cases import Case, Expected


def _rows(p: Path) -> list[dict]:
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def _count_mura(root: Path) -> int:
    return sum(len(p.read_text().split()) for p in root.glob("*_image_paths.csv"))


def _count_odir(root: Path) -> int:
    from openpyxl import load_workbook

    return load_workbook(root / "data.xlsx", read_only=True).active.max_row - 1


CASES3: list[Case] = [
    Case(
        key="mura", public_name="MURA v1.1 (musculoskeletal radiographs, Stanford)",
        docs="Rajpurkar et al., arXiv:1712.06957 (MIDL 2018); stanfordmlgroup.github.io/"
             "competitions/mura (MURA-v1.1/{train,valid}/XR_<PART>/patient#####/"
             "study<N>_{positive,negative}/image<K>.png; header-less *_image_paths.csv and "
             "*_labeled_studies.csv '<study>/,1|0')",
        make=b2.make_mura, name="MURA",
        layout="split / body part / patient / study folders whose name carries the label; "
               "header-less path lists and study label CSVs",
        description="Upper extremity radiographs (elbow, finger, forearm, hand, humerus, "
                    "shoulder, wrist) from Stanford. Each study was labelled normal or abnormal "
                    "by a radiologist at the time of reading.",
        request="classify musculoskeletal radiographs as normal or abnormal",
        expected=Expected(
            task="diagnosis", classes=["abnormal", "normal"],
            synonyms={"abnormal": ["positive", "1"], "normal": ["negative", "0"]},
            count=_count_mura, grouping="patient folder (patient#####)", split_ships=True,
            alternates=[{"task": "diagnosis", "classes": b2.MURA_PARTS}],
            note="labels are per study; counted per image (each inherits its study's label); "
                 "body-part folders are not the target"),
    ),
    Case(
        key="cvc_clinicdb", public_name="CVC-ClinicDB (colonoscopy polyp frames)",
        docs="Bernal et al., Comput Med Imaging Graph 43:99, 2015; polyp.grand-challenge.org/"
             "CVCClinicDB (Original/<n>.tif, 'Ground Truth'/<n>.tif)",
        make=b2.make_cvc_clinicdb, name="CVC-ClinicDB",
        layout="two parallel folders of numbered TIFFs: Original/ (RGB) and 'Ground Truth/' "
               "(0/255 polyp masks)",
        description="Frames from colonoscopy videos at Hospital Clinic Barcelona, each showing "
                    "a polyp, with the polyp outlined by hand in the Ground Truth folder.",
        request="segment polyps in colonoscopy frames",
        expected=Expected(
            task="segmentation", classes=["polyp"], synonyms={"polyp": ["polyps", "lesion"]},
            count=lambda r: sum(1 for _ in (r / "Ground Truth").glob("*.tif")),
            grouping="video sequence (not in the files; consecutive numbers)",
            split_ships=False, note="every frame has a polyp; sequences are consecutive numbers"),
    ),
    Case(
        key="monuseg", public_name="MoNuSeg 2018 (multi-organ nucleus segmentation)",
        docs="Kumar et al., IEEE TMI 36(7):1550, 2017 and 39(5):1380, 2020; "
             "monuseg.grand-challenge.org/Data ('MoNuSeg 2018 Training Data/Tissue Images/"
             "*.tif', 'Annotations/*.xml' Aperio ImageScope XML; MoNuSegTestData/ tif+xml)",
        make=b2.make_monuseg, name="MoNuSeg",
        layout="H&E TIFF tiles + Aperio XML polygons per nucleus (no mask images); test tiles "
               "and XML side by side in another folder",
        description="",
        request="segment cell nuclei in H&E histopathology images",
        expected=Expected(
            task="segmentation", classes=["nucleus"],
            synonyms={"nucleus": ["nuclei", "cell nucleus", "cell nuclei", "cell", "cells"]},
            count=lambda r: sum(1 for _ in r.rglob("*.xml")), grouping=None, split_ships=True,
            note="no description; masks must be rasterised from the XML polygons"),
    ),
    Case(
        key="node21", public_name="NODE21 (chest X-ray nodule detection)",
        docs="Sogancioglu et al., node21.grand-challenge.org; Zenodo doi:10.5281/zenodo.5548363 "
             "(cxr_images/proccessed_data/images/*.mha, metadata.csv img_name,x,y,width,"
             "height,label)",
        make=b2.make_node21, name="NODE21",
        layout="2D .mha radiographs + metadata.csv, one row per nodule box, a zero row with "
               "label 0 for images without nodules",
        description="Frontal chest radiographs pooled from public sets for the NODE21 challenge. "
                    "Lung nodules are marked with bounding boxes in metadata.csv.",
        request="detect lung nodules on chest X-rays",
        expected=Expected(
            task="anomaly_detection", classes=["nodule"],
            synonyms={"nodule": ["nodules", "lung nodule", "pulmonary nodule", "1"]},
            count=lambda r: len({x["img_name"] for x in _rows(
                r / "cxr_images" / "proccessed_data" / "metadata.csv")}),
            grouping=None, split_ships=False,
            alternates=[{"task": "diagnosis", "classes": ["0", "1"]}],
            note="images with two nodules have two rows; negatives have a zero box"),
    ),
    Case(
        key="odir5k", public_name="ODIR-5K (Ocular Disease Intelligent Recognition)",
        docs="odir2019.grand-challenge.org; Kaggle 'andrewmvd/ocular-disease-recognition-"
             "odir5k' (ODIR-5K/data.xlsx: ID, Patient Age, Patient Sex, Left-Fundus, "
             "Right-Fundus, Left-/Right-Diagnostic Keywords, N D G C A H M O; "
             "'Training Images/<ID>_{left,right}.jpg')",
        make=b2.make_odir5k, name="ODIR-5K",
        layout="an Excel sheet, one row per patient with both eyes' file names and 8 one-hot "
               "disease columns; keywords joined by a full-width comma",
        description="Paired left and right colour fundus photographs from Chinese hospitals. "
                    "Each patient is labelled for eight categories: normal, diabetes, glaucoma, "
                    "cataract, AMD, hypertension, myopia and other.",
        request="classify fundus photographs for diabetic retinopathy, glaucoma, cataract, AMD, "
                "hypertension, myopia and other diseases",
        expected=Expected(
            task="diagnosis", classes=list(b2.ODIR_COLS),
            synonyms={"N": ["normal"], "D": ["diabetes", "diabetic retinopathy"],
                      "G": ["glaucoma"], "C": ["cataract"],
                      "A": ["amd", "age-related macular degeneration"],
                      "H": ["hypertension", "hypertensive retinopathy"],
                      "M": ["myopia", "pathological myopia"], "O": ["other", "others"]},
            count=_count_odir, grouping="ID (one row per patient, two eyes)", split_ships=False,
            note="multi-label at patient level; per-eye reading from the keyword columns (2x "
                 "samples) would fail the count; Testing Images/ is unlabelled"),
    ),
    Case(
        key="fracatlas", public_name="FracAtlas (bone fracture radiographs)",
        docs="Abedeen et al., Sci Data 10:521, 2023; figshare doi:10.6084/m9.figshare.22363012 "
             "(images/{Fractured,Non_fractured}/, dataset.csv, Annotations/{COCO JSON,"
             "PASCAL VOC,YOLO})",
        make=b2.make_fracatlas, name="FracAtlas",
        layout="class folders + dataset.csv of 0/1 flags (body part, hardware, fractured) + "
               "COCO/VOC/YOLO fracture annotations for the fractured images",
        description="Musculoskeletal radiographs (hand, leg, hip, shoulder) from hospitals in "
                    "Bangladesh, with or without a fracture. Fractures are also outlined.",
        request="detect whether a radiograph shows a bone fracture",
        expected=Expected(
            task="diagnosis", classes=["Fractured", "Non_fractured"],
            synonyms={"Fractured": ["fracture", "1"],
                      "Non_fractured": ["non-fractured", "not fractured", "no fracture",
                                        "normal", "0"]},
            count=lambda r: len(_rows(r / "dataset.csv")), grouping=None, split_ships=False,
            alternates=[{"task": "anomaly_detection", "classes": ["fractured"]},
                        {"task": "segmentation", "classes": ["fractured"]}],
            note="Utilities/Fracture Split covers fractured images only, so it is no split"),
    ),
    Case(
        key="camus", public_name="CAMUS (echocardiography, 2CH/4CH, Lyon)",
        docs="Leclerc et al., IEEE TMI 38(9):2198, 2019; humanheart-project.creatis.insa-"
             "lyon.fr CAMUS page (training/patient####/patient####_{2CH,4CH}_{ED,ES}[_gt].mhd,"
             " _sequence.mhd, Info_{2CH,4CH}.cfg)",
        make=b3.make_camus, name="CAMUS",
        layout="patient folders of MetaImage .mhd/.raw frames with _gt label maps (1 LV endo, "
               "2 LV epi/myocardium, 3 left atrium), sequences and Info_*.cfg; testing without gt",
        description="Apical two- and four-chamber echocardiography from Saint-Etienne, "
                    "end-diastole and end-systole frames. Cardiologists outlined the left "
                    "ventricle, myocardium and left atrium.",
        request="segment the left ventricle, myocardium and left atrium on echocardiography",
        expected=Expected(
            task="segmentation", classes=["LV endocardium", "myocardium", "left atrium"],
            synonyms={"LV endocardium": ["left ventricle", "lv", "lv cavity", "endocardium",
                                         "lv endo", "1"],
                      "myocardium": ["lv epicardium", "myo", "epicardium", "lv epi",
                                     "lv myocardium", "2"],
                      "left atrium": ["la", "atrium", "3"]},
            count=lambda r: sum(1 for _ in r.glob("training/*/*_gt.mhd")),
            grouping="patient folder", split_ships=False,
            note="4 labelled frames per patient (2CH/4CH x ED/ES); testing/ has no gt"),
    ),
    Case(
        key="stoic2021", public_name="STOIC2021 (COVID-19 severity from chest CT)",
        docs="Revel et al., Radiology 301(1):E361, 2021; stoic2021.grand-challenge.org "
             "(data/mha/<PatientID>.mha, metadata/reference.csv PatientID,probCOVID,"
             "probSevere)",
        make=b3.make_stoic2021, name="STOIC2021",
        layout="3D .mha CTs named by integer PatientID + reference.csv with two 0/1 columns",
        description="Chest CTs of patients suspected of COVID-19 in France. probCOVID is the "
                    "RT-PCR result; probSevere means intubation or death within one month.",
        request="predict severe COVID-19 (intubation or death) from chest CT",
        expected=Expected(
            task="diagnosis", classes=["0", "1"],
            synonyms={"0": ["not severe", "non-severe", "non severe", "mild", "false"],
                      "1": ["severe", "true"]},
            count=lambda r: len(_rows(r / "metadata" / "reference.csv")), grouping=None,
            split_ships=False,
            note="3D; two binary targets, severity is the challenge's; a probCOVID target has "
                 "the same class names and count, so the check cannot tell them apart"),
    ),
    Case(
        key="isles2022", public_name="ISLES 2022 (ischemic stroke lesion segmentation)",
        docs="Hernandez Petzsche et al., Sci Data 9:762, 2022; isles22.grand-challenge.org; "
             "Zenodo doi:10.5281/zenodo.7153326 (BIDS sub-strokecase####/ses-0001/{dwi,anat}/,"
             " derivatives/.../*_msk.nii.gz)",
        make=b3.make_isles2022, name="ISLES-2022",
        layout="BIDS tree: DWI, ADC and FLAIR NIfTI with JSON sidecars per subject/session, "
               "lesion masks under derivatives/",
        description="Acute and subacute ischemic stroke MRI (DWI, ADC, FLAIR) from three "
                    "centres. The infarct is segmented on the DWI.",
        request="segment the stroke infarct on diffusion MRI",
        expected=Expected(
            task="segmentation", classes=["infarct"],
            synonyms={"infarct": ["stroke lesion", "stroke", "lesion", "ischemic lesion",
                                  "ischemic stroke lesion", "infarction", "1"]},
            count=lambda r: sum(1 for _ in r.glob("derivatives/*/*/*_msk.nii.gz")),
            grouping="sub-strokecase####", split_ships=False,
            note="3D; multi-sequence input; FLAIR on a different grid"),
    ),
    Case(
        key="chaos", public_name="CHAOS (CT-MR healthy abdominal organ segmentation)",
        docs="Kavur et al., Med Image Anal 69:101950, 2021; chaos.grand-challenge.org/Data; "
             "Zenodo doi:10.5281/zenodo.3431873 (Train_Sets/CT/<id>/{DICOM_anon,Ground}, "
             "Train_Sets/MR/<id>/T2SPIR/{DICOM_anon,Ground}, PNG 63/126/189/252)",
        make=b3.make_chaos, name="CHAOS",
        layout="DICOM slice series per patient and modality with one ground-truth PNG per "
               "slice; CT liver only (255), MR four organs coded 63/126/189/252",
        description="Abdominal CT (portal phase, liver donors) and T2-SPIR MRI from Dokuz Eylul "
                    "University. CT has the liver outlined; MRI has liver, kidneys and spleen.",
        request="segment the liver, kidneys and spleen on abdominal CT and MRI",
        expected=Expected(
            task="segmentation", classes=list(b3.CHAOS_MR_VALUES),
            synonyms={"right kidney": ["kidney_right", "kidney right", "r kidney"],
                      "left kidney": ["kidney_left", "kidney left", "l kidney"]},
            count=lambda r: sum(1 for _ in r.glob("Train_Sets/*/*/**/DICOM_anon")),
            grouping="patient id per modality", split_ships=False,
            note="3D volumes from DICOM series (counted per series); a per-slice reading has 8x "
                 "the samples; CT ground truth is liver only"),
    ),
]

CASES3_BY_KEY = {c.key: c for c in CASES3}

__all__ = ["CASES3", "CASES3_BY_KEY"]
