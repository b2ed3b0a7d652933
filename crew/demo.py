"""Build and register the built-in demo datasets (used by `make run`, the app and the tests):
one small synthetic dataset per task and dimension, each with a learnable signal."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.demo import detection as demo_detection, diagnosis as demo_diagnosis, \
    reports as demo_reports, segmentation as demo_segmentation
from core.datasets.catalog import find_entry, sync_store
from core.demo.chest_xray import (DEMO_DESCRIPTION, DEMO_FOLDER, DEMO_NAME,
                                  FULL_DEMO_DESCRIPTION, FULL_DEMO_FOLDER, FULL_DEMO_NAME,
                                  make_full_demo, make_quick_demo)
from core.datasets.registration import register_dataset
from core.config.settings import Settings
from core.store.db import open_store

# (datacard name, folder under <home>/demo, builder, description)
DEMOS: list[tuple[str, str, Callable[[Path], Path], str]] = [
    (DEMO_NAME, DEMO_FOLDER, make_quick_demo, DEMO_DESCRIPTION),
    (FULL_DEMO_NAME, FULL_DEMO_FOLDER, make_full_demo, FULL_DEMO_DESCRIPTION),
    ("Demo chest CT scans (synthetic)", "chest_ct_scans_demo",
     demo_diagnosis.make_ct_scan_folders_demo,
     "Synthetic 3D chest CT scans for COVID-19 (NCP) versus common pneumonia (CP) versus normal "
     "classification, CC-CCII style: class folders with one folder of axial PNG slices per scan."),
    ("Demo chest X-ray findings (synthetic)", "chest_xray_findings_demo",
     demo_diagnosis.make_multilabel_xray_demo,
     "Synthetic frontal chest X-rays with multi-label findings (effusion, nodule, "
     "cardiomegaly), NIH style: images/ and labels.csv with Finding Labels and Patient ID."),
    ("Demo abdominal CT organs (synthetic)", "abdominal_ct_organs_demo",
     demo_segmentation.make_ct_organ_demo_3d,
     "Synthetic 3D abdominal CT volumes (NIfTI, Hounsfield units, anisotropic spacing) with "
     "liver and spleen masks: images/, masks/, labels.json."),
    ("Demo chest X-ray organs (synthetic)", "chest_xray_organs_demo",
     demo_segmentation.make_xray_organ_demo_2d,
     "Synthetic 2D chest X-rays with lung and heart masks (PNG): images/, masks/, labels.json."),
    ("Demo brain MRI lesions (synthetic)", "brain_mri_lesions_demo",
     demo_segmentation.make_mri_multichannel_demo_3d,
     "Synthetic 3D brain MRI with two sequences per case (T1 and T2 NIfTI) and lesion masks; "
     "the lesion is only visible by combining both sequences."),
    ("Demo chest X-ray nodules (synthetic)", "chest_xray_nodules_demo",
     demo_detection.make_nodule_detection_demo_2d,
     "Synthetic chest X-rays with lung nodule bounding boxes (boxes.csv: image, x, y, w, h, "
     "label; images without nodules are negatives), for nodule detection."),
    ("Demo chest CT nodules (synthetic)", "chest_ct_nodules_demo",
     demo_detection.make_nodule_detection_demo_3d,
     "Synthetic 3D chest CT volumes (NIfTI) with lung nodule bounding boxes in boxes.csv, for "
     "3D nodule detection."),
    ("Demo chest X-ray reports (synthetic)", "chest_xray_reports_demo",
     demo_reports.make_report_demo_2d,
     "Synthetic chest X-rays with radiology reports (reports.csv: image_id, findings, "
     "impression) whose text depends on the image, IU-Xray style, for report generation."),
    ("Demo brain MRI reports (synthetic)", "brain_mri_reports_demo",
     demo_reports.make_report_demo_3d,
     "Synthetic 3D brain MRI volumes (NIfTI) with reports (reports_train.json, "
     "reports_test.json: finding, impression), RadGenome-Brain style, for report generation."),
]


def _ensure(settings: Settings, name: str, folder_name: str, build, description: str) -> dict:
    store = open_store(settings.store_path)
    folder = build(settings.demo_dir / folder_name)
    entry = find_entry(settings, name)
    if entry and entry.available and entry.dataset_path == Path(folder).resolve():
        sync_store(settings, store)
        return {"status": "registered", "name": name, "datacard_path": str(entry.card_path),
                "task": entry.card.tasks[0] if entry.card.tasks else None, "errors": [],
                "warnings": []}
    return register_dataset(settings, store, str(folder), name, description, source="demo",
                            overwrite=True)


def ensure_demo(settings: Settings) -> dict:
    """The 2D chest X-ray demo only (fast; what the app's first run and most tests need)."""
    return _ensure(settings, *DEMOS[0])


def ensure_full_demo(settings: Settings) -> dict:
    """The full-size 2D chest X-ray demo (the plan card's one-click switch)."""
    return _ensure(settings, *DEMOS[1])


def ensure_all_demos(settings: Settings) -> list[dict]:
    return [_ensure(settings, *demo) for demo in DEMOS]
