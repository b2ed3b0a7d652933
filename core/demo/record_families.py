"""Record layout families: dataset folders whose labels are records beside the images (a
CheXpert label table, an image/mask pairs table, COCO JSON, JSON Lines reports, a labels.json
for NumPy volumes, per-study report .txt files, LGG slices with a clinical table), each with the
datacard a clinician would write, the request they would type and the reading autopilot should
arrive at. The generators are in core.demo.families_records_tables and
core.demo.families_records_json; this registry is kept apart from ``layout_families.FAMILIES``.

``RECORD_FAMILIES`` (in order), ``RECORD_BY_NAME`` (key -> Family) and ``SECOND_TARGETS``
(key -> (request, Reading)) for folders that carry a second target. ``Reading`` is the expected
reading at the generator's default size; ``patient_of(root, sample)`` the true patient.

``python -m core.demo.record_families`` generates all seven and checks them against their
readings.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import csv
import re
from pathlib import Path

from core.demo import families_records_json as rj, families_records_tables as rt
from core.demo.families_common import group_sizes
from core.demo.layout_families import Family, Reading


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _match(pattern: str, sample: str) -> str | None:
    found = re.search(pattern, str(sample))
    return found.group(0) if found else None


def _pairs_patient(root: Path, sample: str) -> str | None:
    stem = Path(sample).stem
    for row in _rows(root / "pairs.csv"):
        if stem in (Path(row["image"]).stem, Path(row["mask"]).stem):
            return row["patient"]
    return None


def _head_patient(root: Path, sample: str) -> str | None:
    stem = _match(r"CT_[0-9a-f]{8}", sample)
    return next((r["patient_id"] for r in _rows(root / "patients.csv") if r["scan"] == stem),
                None)


def _iu_patient(root: Path, sample: str) -> str | None:
    study = _match(r"CXR\d+", Path(sample).name)
    return next((r["patient_id"] for r in _rows(root / "studies.csv")
                 if r["study_id"] == study), None)


def _jsonl_patient(root: Path, sample: str) -> str | None:
    return next((p for p in Path(sample).parts if re.fullmatch(r"p\d{8}", p)), None)


EFFUSION = rt.chexpert_counts(120, "Pleural Effusion")
CARDIO = rt.chexpert_counts(120, "Cardiomegaly")
LGG = rt.lgg_counts(680)
IU = rj.iu_counts(160)

RECORD_FAMILIES: list[Family] = [
    Family(
        "chexpert_table", "CheXpert small chest radiographs", "CheXpert-small",
        "label table with 1/0/-1/blank codes", "CheXpert-v1.0-small (Stanford, Kaggle copy)",
        rt.make_chexpert_table,
        "Chest radiographs from the downscaled CheXpert release, as downloaded: everything is "
        "inside CheXpert-v1.0-small/, with train.csv and valid.csv and the JPEGs under "
        "train/patientNNNNN/studyN/ and valid/...; the Path column starts with "
        "'CheXpert-v1.0-small/', so it is relative to the folder above. Each row is one image "
        "(frontal, and for some studies a lateral view too) with sex, age, view and 14 "
        "observations taken from the report: 1.0 present, 0.0 absent, -1.0 uncertain, and an "
        "empty cell means the report did not mention it (treat as absent). I would leave out "
        "the uncertain ones for whichever finding we train on. The labels are per study, so "
        "both views of a study carry the same values. A patient can have several studies; "
        "keep each patient's images together. valid.csv is the official validation set, "
        "labelled by radiologists, with no uncertain labels.",
        ("diagnosis",), "X-ray", "chest", "2D",
        "classify pleural effusion on chest X-rays",
        Reading("diagnosis", "diagnosis", ("No Pleural Effusion", "Pleural Effusion"),
                EFFUSION["n"], "table", "jpg", "patient folder patientNNNNN in the Path column",
                EFFUSION["patients"], EFFUSION["split"]),
        lambda root, sample: _match(r"patient\d{5}", sample)),
    Family(
        "pairs_table", "Thyroid nodule ultrasound pairs", "Thyroid-US-Pairs",
        "image/mask pairs table with unrelated file names",
        "DDTI/TN3K-style exports from annotation tools (hashed file names + a pairs CSV)",
        rt.make_pairs_table,
        "Thyroid ultrasound frames (grayscale PNG) with the lesion outlined by hand. The frames "
        "are in scans/ and the outlines in annotations/, but the annotation tool renamed "
        "everything, so the names do not match: pairs.csv tells which mask goes with which "
        "image (columns image and mask, paths from this folder) and which patient it is "
        "(column patient). A mask is white (255) on the lesion and black (0) elsewhere; a few "
        "frames show no lesion and have an all-black mask. We took two to four frames per "
        "patient, so a patient's frames must stay on the same side of the split.",
        ("lesion segmentation",), "Ultrasound", "thyroid", "2D",
        "segment the lesions in these ultrasound images",
        Reading("anomaly_detection", "segmentation", ("lesion",), 300, "masks", "png",
                "'patient' column of pairs.csv", rt.pairs_counts(300)["patients"]),
        _pairs_patient),
    Family(
        "coco_polygons", "Colonoscopy polyps COCO", "Colonoscopy-Polyps-COCO",
        "COCO instances JSON with polygons", "Kvasir-SEG/PolypGen COCO conversions, CVAT and "
        "Roboflow COCO exports", rj.make_coco_polygons,
        "Frames from colonoscopy videos (RGB JPEG) with each polyp outlined, exported from our "
        "annotation tool in COCO format. train/ and val/ hold the frames; "
        "annotations/instances_train.json and annotations/instances_val.json hold the outlines "
        "for each folder: 'images' lists every frame with its id and file name, 'annotations' "
        "has one entry per polyp with the polygon outline, its bounding box [x, y, width, "
        "height] in pixels and its area, and 'categories' has the single class, polyp. Frames "
        "without any annotation show no polyp and are there on purpose. Please keep our "
        "train/val split. No patient information is available.",
        ("detection",), "Endoscopy", "colon", "2D",
        "detect polyps with bounding boxes in endoscopy images",
        Reading("anomaly_detection", "detection", ("polyp",), 120, "coco_json", "jpg",
                "none (frame IDs only)", None, rj.coco_split_counts(120))),
    Family(
        "jsonl_reports", "Chest X-ray reports JSONL", "CXR-Reports-JSONL",
        "JSON Lines report records with image paths",
        "MIMIC-CXR-JPG / ReXGradient-style exports (one JSON record per study)",
        rj.make_jsonl_reports,
        "Frontal chest radiographs (JPEG) with their radiology reports, arranged like "
        "MIMIC-CXR-JPG: files/p10/p10000032/s50414267/<dicom_id>.jpg, i.e. a folder per "
        "subject and per study. The reports are in reports.jsonl, one JSON record per line "
        "with subject_id, study_id, dicom_id, image_path (relative to this folder), "
        "view_position and the report's findings and impression sections. The model should "
        "write the findings and impression from the image. A subject often has several "
        "studies over time, so all of a subject's studies belong on the same side of the "
        "split.",
        ("report generation",), "X-ray", "chest", "2D",
        "generate radiology reports for chest X-rays",
        Reading("report_generation", "report_generation", (), 200, "reports", "jpg",
                "subject_id (the p<subject_id> folder in image_path)",
                len(group_sizes(200, rj.JSONL_GROUPS))),
        _jsonl_patient),
    Family(
        "labels_json_npy", "Head CT haemorrhage NumPy", "HeadCT-ICH-NPY",
        "NumPy volumes + labels.json + patients table",
        "Kaggle/RSNA-ICH and CQ500 preprocessed exports (volumes saved as .npy)",
        rt.make_labels_json_npy,
        "Non-contrast head CT scans, already converted to NumPy: each scan is one .npy file "
        "in volumes/ (axial slices first, values in Hounsfield units). labels.json maps each "
        "file name without .npy to 'haemorrhage' or 'normal' (any type of intracranial "
        "bleed counts as haemorrhage). patients.csv lists every scan with the patient it "
        "belongs to (patient_id), age and sex; some patients had a follow-up scan, so keep a "
        "patient's scans together when splitting.",
        ("diagnosis",), "CT", "head", "3D",
        "detect intracranial hemorrhage on head CT scans",
        Reading("diagnosis", "diagnosis", ("haemorrhage", "normal"), 160, "table", "npy",
                "'patient_id' column of patients.csv", rt.head_counts(160)["patients"]),
        _head_patient),
    Family(
        "study_reports_txt", "IU chest X-ray study reports", "IU-CXR-Study-TXT",
        "report .txt per study + images named after the study",
        "IU X-ray / OpenI (reports as text, images per study)", rj.make_study_reports_txt,
        "Chest X-ray studies from our teaching file in the Open-i style. Each study has its "
        "report as reports/<study>.txt (e.g. CXR1234.txt) with COMPARISON, INDICATION, "
        "FINDINGS and IMPRESSION sections, and its images in images/ named after the study: "
        "CXR1234_frontal.png and, when one was taken, CXR1234_lateral.png. Both views of a "
        "study go with the same report; we want the findings and impression written from the "
        "images. studies.csv gives the patient and date of each study; a few patients have "
        "two studies, keep them together.",
        ("report generation",), "X-ray", "chest", "2D",
        "write chest X-ray reports",
        Reading("report_generation", "report_generation", (), IU["images"], "report_txt",
                "png", "'patient_id' column of studies.csv (study = file name prefix)",
                IU["patients"]),
        _iu_patient),
    Family(
        "masks_and_clinical", "LGG MRI slices with clinical table", "LGG-MRI-Clinical",
        "TIFF slices with 0/255 masks + per-patient clinical CSV",
        "Kaggle 'Brain MRI segmentation' (LGG, kaggle_3m, TCGA-LGG)", rt.make_masks_and_clinical,
        "Brain MRI of lower-grade glioma patients (TCGA-LGG), 2D axial slices as in the "
        "Kaggle kaggle_3m download: one folder per patient, each slice a 3-channel TIFF "
        "(pre-contrast, FLAIR, post-contrast) named <case>_<n>.tif, and the tumour outline in "
        "<case>_<n>_mask.tif (255 = tumour, 0 = background); some slices have no tumour. "
        "kaggle_3m/data.csv has one row per patient (Patient = the case folder name without "
        "the date) with the genomic clusters and clinical data as numeric codes; "
        "neoplasm_histologic_grade is 1 for G2 and 2 for G3, blank where not recorded. We "
        "want the tumour segmented and, separately, the grade predicted. Keep all slices of a "
        "patient on the same side of the split.",
        ("lesion segmentation", "diagnosis"), "MRI", "brain", "2D",
        "segment the brain tumour on MRI slices",
        Reading("anomaly_detection", "segmentation", ("tumour",), 680, "masks", "tif",
                "case folder TCGA_<site>_<patient>_<date> (patient = TCGA_<site>_<patient>)",
                LGG["patients"]),
        lambda root, sample: _match(r"TCGA_[A-Z]{2}_\d{4}", sample)),
]

RECORD_BY_NAME = {f.key: f for f in RECORD_FAMILIES}

SECOND_TARGETS: dict[str, tuple[str, Reading]] = {
    "chexpert_table": (
        "detect cardiomegaly on chest radiographs",
        Reading("diagnosis", "diagnosis", ("Cardiomegaly", "No Cardiomegaly"), CARDIO["n"],
                "table", "jpg", "patient folder patientNNNNN in the Path column",
                CARDIO["patients"], CARDIO["split"])),
    "masks_and_clinical": (
        "classify the tumour grade (G2 vs G3) from brain MRI",
        Reading("diagnosis", "diagnosis", ("G2", "G3"), LGG["graded"], "table", "tif",
                "'Patient' column of data.csv = case folder without the date",
                LGG["graded_patients"])),
}


# ------------------------------------------------------------------------------ self-check
def _chexpert(root: Path, finding: str) -> dict:
    out = {}
    for split in ("train", "valid"):
        for row in _rows(root / rt.CHEXPERT / f"{split}.csv"):
            assert (root / row["Path"]).is_file(), row["Path"]
            if row[finding] != "-1.0":
                out[row["Path"]] = (finding if row[finding] == "1.0" else f"No {finding}",
                                    "val" if split == "valid" else "train")
    return out


def _pairs(root: Path) -> dict:
    import numpy as np
    from PIL import Image

    out = {}
    for row in _rows(root / "pairs.csv"):
        mask = np.asarray(Image.open(root / row["mask"]))
        assert set(np.unique(mask)) <= {0, 255} and (root / row["image"]).is_file()
        out[row["image"]] = ("lesion" if mask.any() else "(empty)", None)
    return out


def _coco(root: Path) -> dict:
    import json

    out = {}
    for split in ("train", "val"):
        data = json.loads((root / "annotations" / f"instances_{split}.json").read_text())
        names = {c["id"]: c["name"] for c in data["categories"]}
        boxes: dict[int, list] = {}
        for ann in data["annotations"]:
            x, y, w, h = ann["bbox"]
            xs, ys = ann["segmentation"][0][0::2], ann["segmentation"][0][1::2]
            assert abs(min(xs) - x) < 0.2 and abs(max(ys) - y - h) < 0.2 and ann["iscrowd"] == 0
            boxes.setdefault(ann["image_id"], []).append(names[ann["category_id"]])
        for image in data["images"]:
            rel = f"{split}/{image['file_name']}"
            assert (root / rel).is_file(), rel
            out[rel] = ("+".join(boxes.get(image["id"], [])) or "(no polyp)", split)
    return out


def _jsonl(root: Path) -> dict:
    import json

    out = {}
    for line in (root / "reports.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert (root / record["image_path"]).is_file() and record["findings"]
        out[record["image_path"]] = ("cardiomegaly" if "enlarged" in record["findings"]
                                     else "normal heart", None)
    return out


def _npy(root: Path) -> dict:
    import json

    import numpy as np

    out = {}
    for stem, label in json.loads((root / "labels.json").read_text()).items():
        assert np.load(root / "volumes" / f"{stem}.npy").shape == rt.HEAD_SHAPE
        out[f"volumes/{stem}.npy"] = (label, None)
    return out


def _txt(root: Path) -> dict:
    out = {}
    for image in sorted((root / "images").glob("*.png")):
        report = (root / "reports" / f"{image.stem.split('_')[0]}.txt").read_text()
        assert "FINDINGS:" in report and "IMPRESSION:" in report
        out[f"images/{image.name}"] = (image.stem.split("_")[1], None)
    return out


def _lgg(root: Path, grade: bool = False) -> dict:
    import numpy as np
    from PIL import Image

    grades = {r["Patient"]: r["neoplasm_histologic_grade"]
              for r in _rows(root / "kaggle_3m" / "data.csv")}
    out = {}
    for image in sorted((root / "kaggle_3m").glob("*/*.tif")):
        if image.stem.endswith("_mask"):
            continue
        assert image.with_name(f"{image.stem}_mask.tif").is_file()
        rel = str(image.relative_to(root))
        code = grades["_".join(image.parent.name.split("_")[:3])]
        if not grade:
            mask = np.asarray(Image.open(image.with_name(f"{image.stem}_mask.tif")))
            out[rel] = ("tumour" if mask.any() else "(empty)", None)
        elif code:
            out[rel] = ({"1.0": "G2", "2.0": "G3"}[code], None)
    return out


INSPECT = {"chexpert_table": lambda r: _chexpert(r, "Pleural Effusion"),
           "pairs_table": _pairs, "coco_polygons": _coco, "jsonl_reports": _jsonl,
           "labels_json_npy": _npy, "study_reports_txt": _txt, "masks_and_clinical": _lgg}
INSPECT_SECOND = {"chexpert_table": lambda r: _chexpert(r, "Cardiomegaly"),
                  "masks_and_clinical": lambda r: _lgg(r, grade=True)}


def _summary(family: Family, root: Path, samples: dict) -> dict:
    from collections import Counter

    patients = {family.patient_of(root, s) for s in samples}
    split = Counter(v[1] for v in samples.values() if v[1])
    return {"files": sum(1 for p in root.rglob("*") if p.is_file()), "samples": len(samples),
            "patients": None if patients == {None} else len(patients),
            "classes": dict(sorted(Counter(v[0] for v in samples.values()).items())),
            "split": dict(sorted(split.items())) or None}


def _agrees(reading: Reading, summary: dict) -> list[str]:
    problems = []
    if summary["samples"] != reading.n_samples:
        problems.append(f"n_samples {summary['samples']} != {reading.n_samples}")
    if summary["patients"] != reading.n_groups:
        problems.append(f"patients {summary['patients']} != {reading.n_groups}")
    if reading.split and summary["split"] != dict(sorted(reading.split.items())):
        problems.append(f"split {summary['split']} != {reading.split}")
    if reading.template == "diagnosis" and set(summary["classes"]) != set(reading.classes):
        problems.append(f"classes {summary['classes']} != {reading.classes}")
    return problems


def self_check() -> int:
    import tempfile
    import time

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (0.25, 1.0):
            print(f"== scale {scale}")
            for family in RECORD_FAMILIES:
                started = time.perf_counter()
                root = family.generate(Path(tmp) / f"{scale}" / family.folder, scale=scale)
                seconds = time.perf_counter() - started
                targets = [(family.request, family.reading, INSPECT[family.key])]
                if family.key in SECOND_TARGETS:
                    request, reading = SECOND_TARGETS[family.key]
                    targets.append((request, reading, INSPECT_SECOND[family.key]))
                for request, reading, inspect in targets:
                    summary = _summary(family, root, inspect(root))
                    problems = _agrees(reading, summary) if scale == 1.0 else []
                    if scale < 1.0 and summary["patients"] is not None:
                        problems += [] if summary["patients"] >= 24 else ["< 24 patients"]
                    if reading.template == "diagnosis" and len(summary["classes"]) < 2:
                        problems.append("one class only")
                    failures += bool(problems)
                    print(f"{family.key:20s} {seconds:5.2f} s  {request!r}\n    {summary}"
                          + (f"\n    MISMATCH: {'; '.join(problems)}" if problems else
                             "  ok" if scale == 1.0 else ""))
    print("all readings agree" if not failures else f"{failures} mismatches")
    return failures


if __name__ == "__main__":
    raise SystemExit(1 if self_check() else 0)
