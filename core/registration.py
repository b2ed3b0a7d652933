"""Register a dataset folder: scan it, draft the datacard, validate, then save atomically.

Nothing is written inside the dataset folder. An invalid dataset gets errors that say what is
wrong and where, and no card is saved.
"""
from __future__ import annotations

import hashlib
import re
import time
from collections import defaultdict
from pathlib import Path

from core.catalog import find_entry, sync_store
from core.datacards import Datacard, DatacardError, parse_datacard, save_datacard, write_json_atomic
from core.matching import parse_request
from core.scan import ScanError, scan_folder
from core.settings import Settings
from core.store import Store

MAX_DECODE = 2000


def _decode_ok(path: Path) -> str | None:
    """Decode one image (or the first slice of a scan folder); return an error text or None."""
    try:
        if path.is_dir():
            path = sorted(p for p in path.iterdir() if p.is_file())[0]
        suffix = path.name.lower()
        if suffix.endswith((".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")):
            from PIL import Image
            with Image.open(path) as img:
                img.load()
        elif suffix.endswith((".dcm", ".dicom")):
            import pydicom
            pydicom.dcmread(path).pixel_array  # noqa: B018
        elif suffix.endswith((".nii", ".nii.gz")):
            import nibabel
            nibabel.load(path).get_fdata()
        elif suffix.endswith((".nrrd", ".mha", ".mhd")):
            import SimpleITK as sitk
            sitk.ReadImage(str(path))
        return None
    except Exception as exc:  # any decoder error means the file is unusable
        return f"{path}: cannot be decoded ({type(exc).__name__}: {str(exc)[:120]})"


def validate_scan(scan) -> tuple[list[str], list[str]]:
    errors, warnings = [], []
    if scan.task == "diagnosis":
        if len(scan.classes) < 2:
            errors.append(f"only one class found ({', '.join(scan.classes)}); diagnosis needs "
                          "at least two")
        for label, count in scan.class_counts.items():
            if count < 2:
                errors.append(f"class {label!r} has {count} image; each class needs at least 2 "
                              "(one for training, one for testing)")
    elif len(scan.samples) < 4:
        errors.append(f"only {len(scan.samples)} cases found; at least 4 are needed")
    files = [Path(p) for s in scan.samples[:MAX_DECODE] for p in
             ((s.image if isinstance(s.image, list) else [s.image]) +
              ([s.extra["label_path"]] if s.extra.get("label_path") else []))]
    bad = [err for p in files if (err := _decode_ok(p))]
    if bad:
        errors.append(f"{len(bad)} files cannot be read as images, e.g. {bad[0]}. Remove or "
                      "replace them")
    if len(scan.samples) > MAX_DECODE:
        warnings.append(f"decoded the first {MAX_DECODE} of {len(scan.samples)} images")
    counts = sorted(scan.class_counts.values())
    if counts and counts[0] * 5 < counts[-1]:
        warnings.append(f"classes are imbalanced ({scan.class_counts}); training weights "
                        "classes to compensate")
    hashes = defaultdict(list)
    for s in scan.samples[:MAX_DECODE]:
        p = Path(s.image[0] if isinstance(s.image, list) else s.image)
        if p.is_file() and p.stat().st_size < 50_000_000:
            hashes[hashlib.sha1(p.read_bytes()).hexdigest()].append(s)
    dups = [v for v in hashes.values() if len(v) > 1]
    cross = [v for v in dups if scan.task == "diagnosis" and len({s.label for s in v}) > 1]
    if cross:
        errors.append(f"{len(cross)} identical images carry different labels, e.g. "
                      f"{cross[0][0].image} and {cross[0][1].image}")
    elif dups:
        warnings.append(f"{len(dups)} images have exact duplicates, e.g. {dups[0][0].image}")
    if scan.skipped:
        warnings.append(f"{len(scan.skipped)} entries ignored, e.g. {scan.skipped[0]}")
    if scan.group_source.startswith("none"):
        warnings.append("no patient ID found in file names; the split treats every image as "
                        "its own patient")
    return errors, warnings


def draft_datacard(scan, name: str, description: str, source: str = "registered") -> Datacard:
    intent = parse_request(f"{name} {description}")
    modality = intent.modality
    text = f"{name} {description}".lower()
    if not modality and re.search(r"x-?ray|cxr|radiograph", text):
        modality = "X-ray"
    auto = (f"{scan.dimension} {scan.file_format} images, {len(scan.samples)} samples, layout "
            f"{scan.layout}; labels: {', '.join(scan.classes) or 'free text'}.")
    return parse_datacard({
        "dataset name": name, "dataset description": description.strip() or auto,
        "dataset path": scan.root, "tasks": [scan.task], "modality": modality,
        "anatomy": intent.anatomy, "dimension": scan.dimension, "file_format": scan.file_format,
        "label_source": scan.layout, "grouping_key": scan.group_source,
        "classes": scan.classes, "class_counts": scan.class_counts,
        "num_samples": len(scan.samples), "source": source,
        "provenance": "registered with M3Builder", "registered_at": time.time()})


def register_dataset(settings: Settings, store: Store, path: str, name: str,
                     description: str = "", source: str = "registered",
                     overwrite: bool = False) -> dict:
    result = {"status": "invalid", "name": name, "datacard_path": None, "task": None,
              "errors": [], "warnings": []}
    try:
        scan = scan_folder(path, description)
        card = draft_datacard(scan, name, description, source)
    except (ScanError, DatacardError) as exc:
        result["errors"].append(str(exc))
        return result
    existing = find_entry(settings, card.name)
    if existing and existing.card.source != "builtin" and not overwrite and \
            Path(existing.card.path).resolve() != Path(scan.root):
        result["errors"].append(f"a dataset named {card.name!r} is already registered for "
                                f"{existing.card.path}; choose another name")
        return result
    errors, warnings = validate_scan(scan)
    result.update(task=scan.task, errors=errors, warnings=warnings)
    report = {"dataset": card.name, "path": scan.root, "valid": not errors, "errors": errors,
              "warnings": warnings, "scan": scan.summary(), "checked_at": time.time()}
    if errors:
        return result
    card_path = save_datacard(card, settings.datacards_dir)
    write_json_atomic(card_path.with_suffix(".validation.json"), report)
    sync_store(settings, store)
    store.audit("user", "register_dataset", card.name, f"path={scan.root}")
    result.update(status="registered", name=card.name, datacard_path=str(card_path))
    return result
