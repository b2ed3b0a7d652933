"""Layout families: ordinary dataset folders in the layouts public medical datasets ship in, each
with the datacard a clinician would write, the request they would type and the reading
autopilot should arrive at. The generators (core.demo.families_*) write the folders; this
registry says what each one is, so tests and M3Bench-lite can assert the reading.

``FAMILIES`` (in order) and ``BY_NAME`` (family key -> Family). ``Family.reading`` holds the
expected reading at the generator's default size; ``Family.patient_of(root, sample)`` gives the
true patient (or other grouping) of one sample, a path relative to the generated root.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.demo import (families_boxes as boxes, families_labels as labels,
                       families_masks as masks, families_reports as reports,
                       families_volumes as volumes)
from core.demo.families_common import group_sizes


@dataclass(frozen=True)
class Reading:
    """What a correct reading of the folder gives, at the generator's default size."""
    task: str                         # datacard task
    template: str                     # diagnosis | segmentation | detection | report_generation
    classes: tuple[str, ...]          # class names (segmentation: in mask-value order)
    n_samples: int                    # samples with a label, mask, boxes or report
    label_source: str                 # where the labels are (datacard ``label_source`` words)
    file_format: str
    grouping_key: str                 # what identifies a patient, in words
    n_groups: int | None = None       # distinct patients; None when the layout gives none
    split: dict[str, int] | None = None   # the split the layout ships, else None
    unlabelled: int = 0               # images the layout ships without labels (not samples)


@dataclass(frozen=True)
class Family:
    key: str                          # short family name (make_<key>)
    name: str                         # datacard name
    folder: str                       # folder under a data folder
    layout: str                       # the layout, in a few words
    mimics: str                       # public datasets shipped this way
    generate: Callable[..., Path]     # (out_dir, seed=0, n=..., scale=1.0) -> dataset root
    description: str                  # datacard description, in a clinician's words
    tasks: tuple[str, ...]
    modality: str
    anatomy: str
    dimension: str
    request: str                      # what a clinician would type
    reading: Reading
    patient_of: Callable[[Path, str], str | None] = field(default=lambda root, sample: None)

    def datacard_fields(self, path: str | Path) -> dict:
        """The card as a clinician would register it (paper keys plus structured fields)."""
        return {"dataset name": self.name, "dataset description": self.description,
                "dataset path": str(path), "tasks": list(self.tasks),
                "modality": self.modality, "anatomy": self.anatomy,
                "dimension": self.dimension, "classes": list(self.reading.classes),
                "file_format": self.reading.file_format,
                "label_source": self.reading.label_source,
                "grouping_key": self.reading.grouping_key, "source": "demo",
                "provenance": f"Synthetic {self.layout} layout family ({self.mimics}); "
                              "not patient data"}


def _sidecar_patient(root: Path, sample: str) -> str:
    return json.loads((root / sample).with_suffix(".json").read_text())["patient_id"]


def _chest_xray_split() -> dict[str, int]:
    counts: dict[str, int] = {}
    for groups in labels.chest_xray_patients(120).values():
        for p, size in enumerate(groups):
            split = labels.chest_xray_split(p)
            counts[split] = counts.get(split, 0) + size
    return counts


def _yolo_split() -> dict[str, int]:
    counts: dict[str, int] = {}
    for g, size in enumerate(group_sizes(120)):
        counts[boxes.yolo_split(g)] = counts.get(boxes.yolo_split(g), 0) + size
    return counts


FAMILIES: list[Family] = [
    Family(
        "pascal_voc", "Colonoscopy polyps VOC", "Colonoscopy-Polyps-VOC", "Pascal VOC detection",
        "Kvasir-SEG boxes, PASCAL VOC, many CVAT/LabelImg exports", boxes.make_pascal_voc,
        "Colonoscopy video frames (RGB JPEG in JPEGImages/) with every polyp marked by a "
        "bounding box. The boxes are in Pascal VOC XML files in Annotations/, one file per "
        "frame with the same name: each <object> named 'polyp' is one polyp with its <bndbox> "
        "(xmin, ymin, xmax, ymax in pixels), and a frame whose file has no object shows no "
        "polyp. ImageSets/Main/train.txt, val.txt and test.txt list the frames of the split we "
        "used; please keep it. There is no patient information.",
        ("detection",), "Endoscopy", "colon", "2D",
        "Detect polyps in colonoscopy frames with bounding boxes",
        Reading("anomaly_detection", "detection", ("polyp",), 110, "voc_xml", "jpg",
                "none (frame IDs only)", None, boxes.voc_split(110))),
    Family(
        "yolo", "Chest X-ray nodules YOLO", "ChestXray-Nodules-YOLO", "YOLO detection",
        "Ultralytics/Roboflow YOLO exports (e.g. VinDr-CXR, NODE21 conversions)", boxes.make_yolo,
        "Frontal chest X-rays (PNG) with lung nodules marked as boxes, exported in YOLO format. "
        "images/train and images/val hold the radiographs; labels/train and labels/val hold one "
        "text file per image with the same name, one line per nodule: class (0 = nodule), then "
        "the box centre x, centre y, width and height as fractions of the image. An empty text "
        "file means no nodule. data.yaml names the class. File names are <patient ID>_<follow-up "
        "number>, so one patient can have several radiographs; the train/val split is already "
        "by patient, keep it.",
        ("detection",), "X-ray", "chest", "2D",
        "Find lung nodules on chest radiographs and draw a box around each",
        Reading("anomaly_detection", "detection", ("nodule",), 120, "yolo_txt", "png",
                "file name prefix before '_' (NIH-style <patient>_<follow-up>)",
                len(group_sizes(120)), _yolo_split()),
        lambda root, sample: Path(sample).stem.split("_")[0]),
    Family(
        "json_sidecar", "Dermoscopy melanoma ISIC JSON", "Dermoscopy-ISIC-JSON",
        "JSON sidecar per image", "ISIC Archive downloads (image + metadata JSON)",
        labels.make_json_sidecar,
        "Dermoscopy photographs of pigmented skin lesions (PNG in data/) for melanoma versus "
        "benign naevus. Each image has a JSON file of the same name beside it: its 'diagnosis' "
        "field is the label (melanoma or nevus) and 'patient_id' identifies the patient. Some "
        "patients had two or three lesions photographed, so keep each patient on one side of "
        "the split. The other fields (benign_malignant, age, sex, body site, how the diagnosis "
        "was confirmed) are metadata, not targets.",
        ("diagnosis",), "Dermoscopy", "skin", "2D",
        "Classify dermoscopy images as melanoma or nevus",
        Reading("diagnosis", "diagnosis", ("melanoma", "nevus"), 100, "json_sidecar", "png",
                "'patient_id' field of each JSON sidecar", len(group_sizes(100))),
        _sidecar_patient),
    Family(
        "study_reports", "Chest radiograph study reports", "CXR-Study-Reports",
        "per-study folder with report.txt", "MIMIC-CXR (files/p../s../ with s<study>.txt)",
        reports.make_study_reports,
        "Chest radiographs with their radiology reports, one folder per study under studies/ "
        "(the folder name is the study ID). Each study folder holds the frontal image "
        "(image.png) and the radiologist's report as plain text (report.txt). The report has "
        "the usual sections; the FINDINGS and IMPRESSION sections are what the model should "
        "learn to write from the image. One image per study; no patient IDs are given.",
        ("report generation",), "X-ray", "chest", "2D",
        "Generate the findings and impression of the report for each chest radiograph study",
        Reading("report_generation", "report_generation", (), 100, "report_txt", "png",
                "study folder (one image per study)", None)),
    Family(
        "multisheet_xlsx", "Fundus DR screening spreadsheet", "Fundus-DR-Spreadsheet",
        "multi-sheet Excel label file", "Messidor (Annotation_Base*.xls), screening programme "
        "exports", labels.make_multisheet_xlsx,
        "Colour fundus photographs from diabetic retinopathy screening, JPEG files in images/ "
        "named <patient>_OD (right eye) and <patient>_OS (left eye). The grades are in "
        "labels.xlsx: the first sheet, 'README', is only notes; the second sheet, 'Labels', has "
        "one row per photograph with 'Image' (the file name), 'PatientID', 'Eye', 'Age' and "
        "'Finding', the label: 'No DR' or 'Referable DR'. Most patients have both eyes "
        "photographed, so split by PatientID.",
        ("diagnosis",), "Fundus", "eye", "2D",
        "Classify fundus photographs as referable diabetic retinopathy or no DR",
        Reading("diagnosis", "diagnosis", ("No DR", "Referable DR"), 100, "table", "jpg",
                "'PatientID' column of the 'Labels' sheet", len(labels.xlsx_patients(100))),
        lambda root, sample: Path(sample).stem.split("_")[0]),
    Family(
        "tiff_masks", "LGG brain MRI TIFF masks", "LGG-MRI-TIFF", "TIFF slices with 0/255 masks",
        "Kaggle 'Brain MRI segmentation' (LGG, kaggle_3m)", masks.make_tiff_masks,
        "Brain MRI of patients with lower-grade glioma, as 2D axial slices. kaggle_3m/ has one "
        "folder per patient; in it each slice is a 3-channel TIFF (pre-contrast, FLAIR, "
        "post-contrast) named <case>_<slice number>.tif, and its manual tumour outline is the "
        "file of the same name ending in _mask.tif (255 = tumour, 0 = background). Many slices "
        "have no tumour. kaggle_3m/data.csv holds patient-level genomic clusters and is not "
        "needed. Keep all slices of a patient on the same side of the split.",
        ("lesion segmentation",), "MRI", "brain", "2D",
        "Segment low-grade glioma on brain MRI slices",
        Reading("anomaly_detection", "segmentation", ("tumour",), 100, "masks", "tif",
                "case folder TCGA_<site>_<patient>_<date> (patient = TCGA_<site>_<patient>)",
                len(group_sizes(100, masks.LGG_SLICES))),
        lambda root, sample: "_".join(Path(sample).parent.name.split("_")[:3])),
    Family(
        "slicer_seg", "Liver tumour CT Slicer segmentations", "Liver-CT-Slicer",
        "3D Slicer .seg.nrrd per case", "in-house 3D Slicer annotation projects",
        masks.make_slicer_seg,
        "Contrast-enhanced abdominal CT scans outlined in 3D Slicer. Each case folder (case_01, "
        "case_02, ...) holds the scan as case_NN.nrrd and the outlines as "
        "Segmentation.seg.nrrd, the file Slicer saves. Two segments were drawn, 'liver' and "
        "'tumor'; which label value each segment has is written in the header of the "
        "segmentation file (Segment0_Name, Segment0_LabelValue, ...) and is not the same in "
        "every case. The task is to segment the liver and the liver tumours in 3D.",
        ("segmentation",), "CT", "abdomen", "3D",
        "Segment the liver and liver tumors on abdominal CT volumes",
        Reading("segmentation", "segmentation", ("liver", "tumor"), 20, "masks", "nrrd",
                "case folder (one scan per patient)", None)),
    Family(
        "filename_tokens", "Alzheimer T1 MRI by file name", "AD-T1-Filenames",
        "labels as file-name tokens", "OASIS/ADNI exports renamed by research groups",
        volumes.make_filename_tokens,
        "3D T1-weighted brain MRI volumes (NIfTI) of patients with Alzheimer's disease and "
        "cognitively normal controls, all in one folder, scans/. The diagnosis is written in "
        "the file name: sub012_AD_T1.nii.gz is subject 012 with Alzheimer's disease (AD), "
        "sub013_CN_T1.nii.gz a cognitively normal control (CN). Some subjects have a second "
        "scan a year later (..._T1_m12.nii.gz); keep both scans of a subject on the same side "
        "of the split.",
        ("diagnosis",), "MRI", "brain", "3D",
        "Classify Alzheimer's disease versus cognitively normal from 3D T1 brain MRI volumes",
        Reading("diagnosis", "diagnosis", ("AD", "CN"), 48, "filenames", "nifti",
                "subject token subNNN at the start of the file name",
                volumes.token_subjects(48)),
        lambda root, sample: Path(sample).name.split("_")[0]),
    Family(
        "medmnist_npz", "BreastMNIST ultrasound", "BreastMNIST", "MedMNIST single .npz",
        "MedMNIST v2 (breastmnist.npz, pneumoniamnist.npz, ...)", labels.make_medmnist_npz,
        "Breast ultrasound images from MedMNIST (BreastMNIST), 28x28 grayscale, all in one "
        "NumPy archive, breastmnist.npz, with the split already made: train_images with "
        "train_labels, val_images with val_labels and test_images with test_labels. The labels "
        "are numbers: 0 = malignant, 1 = normal or benign. Keep the given split; there are no "
        "patient IDs.",
        ("diagnosis",), "Ultrasound", "breast", "2D",
        "Classify breast ultrasound images as malignant or benign",
        Reading("diagnosis", "diagnosis", ("malignant", "normal or benign"), 120, "npz_arrays",
                "npz", "none (array rows only)", None, labels.medmnist_split(120))),
    Family(
        "chest_xray_names", "Paediatric pneumonia chest X-rays", "Pediatric-CXR-Pneumonia",
        "class folders with patient-coded names", "Kermany et al. 2018 chest_xray (Kaggle)",
        labels.make_chest_xray_names,
        "Paediatric frontal chest X-rays (JPEG) for pneumonia versus normal, in the layout of "
        "the Guangzhou (Kermany) collection: chest_xray/train, chest_xray/val and "
        "chest_xray/test, each with a NORMAL and a PNEUMONIA folder; the folder is the label. "
        "Many children have several images: the patient is the middle number in "
        "IM-0119-0001.jpeg (also NORMAL2-IM-0119-0001.jpeg) and 'person12' in "
        "person12_bacteria_47.jpeg. Bacteria or virus is the type of pneumonia, not a separate "
        "class. Keep the given split, which already separates patients.",
        ("diagnosis",), "X-ray", "chest", "2D",
        "Classify paediatric chest X-rays as pneumonia or normal",
        Reading("diagnosis", "diagnosis", ("NORMAL", "PNEUMONIA"), 120, "class_folders", "jpg",
                "IM-<patient>-<image> or person<patient>_<type>_<image> in the file name",
                sum(len(g) for g in labels.chest_xray_patients(120).values()),
                _chest_xray_split()),
        lambda root, sample: labels.chest_xray_patient(Path(sample).name)),
    Family(
        "nnunet_raw", "Prostate lesion bpMRI nnU-Net", "Dataset042_ProstateLesion",
        "nnU-Net v2 raw dataset", "nnU-Net raw datasets (DatasetXXX_Name), MSD conversions",
        masks.make_nnunet_raw,
        "Biparametric prostate MRI prepared for nnU-Net (v2 raw format). imagesTr/ holds each "
        "training case as two files, prostate_NNN_0000.nii.gz (T2-weighted) and "
        "prostate_NNN_0001.nii.gz (ADC map), which are two channels of the same case; "
        "labelsTr/prostate_NNN.nii.gz holds its mask; imagesTs/ has cases without masks. "
        "dataset.json lists the channels and the labels: 0 = background, 1 = prostate, 2 = "
        "lesion. Use both sequences: a lesion is dark on T2 and on the ADC map.",
        ("segmentation",), "MRI", "prostate", "3D",
        "Segment the prostate and prostate lesions on biparametric MRI using T2 and ADC",
        Reading("segmentation", "segmentation", ("prostate", "lesion"), 20, "masks", "nifti",
                "case number (one case per patient)", None, None, unlabelled=4)),
    Family(
        "tcia_dicom", "COVID chest CT TCIA download", "COVID-CT-TCIA",
        "DICOM series per patient + clinical CSV by PatientID",
        "TCIA collections via the NBIA Data Retriever (e.g. MIDRC-RICORD, LIDC-IDRI)",
        volumes.make_tcia_dicom,
        "Chest CT scans downloaded from TCIA with the NBIA Data Retriever. "
        "manifest-1612365584013/COVID-CT-CHEST/<PatientID>/<study>/<series>/ holds each scan "
        "as a DICOM series, one file per axial slice (1-01.dcm, 1-02.dcm, ...); the axial "
        "series is the 3D scan, and a few patients also have a one-image SCOUT series, which "
        "is not part of it. The diagnosis is in clinical_data.csv at the top: one row per "
        "patient, 'PatientID' matches the patient folder and 'Diagnosis' is COVID-19 or "
        "Normal. One scan per patient.",
        ("diagnosis",), "CT", "chest", "3D",
        "Classify 3D chest CT scans as COVID-19 pneumonia or normal",
        Reading("diagnosis", "diagnosis", ("COVID-19", "Normal"), 32, "table", "dicom",
                "'PatientID' column = patient folder = DICOM PatientID", 32),
        lambda root, sample: Path(sample).parts[2] if len(Path(sample).parts) > 2 else None),
]

BY_NAME = {f.key: f for f in FAMILIES}
