"""Register a dataset folder: scan it, draft the datacard, validate, then save atomically.

Nothing is written inside the dataset folder. Validation (core.validation) checks the files
decode, masks hold only declared labels and fit their images, duplicates, and that every class
has enough patients for a patient-grouped split; it previews that split. A valid dataset gets
``<home>/datacards/NAME.json`` and its report ``NAME.validation.json``; an invalid one gets
errors that say what is wrong and where, and nothing is written anywhere.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from core.catalog import find_entry, sync_store
from core.datacards import Datacard, DatacardError, parse_datacard, save_datacard, write_json_atomic
from core.matching import parse_request
from core.layout_arrays import pickle_check
from core.scan import ScanError, scan_folder
from core.settings import Settings
from core.store import Store
from core.validation import Limits, Validation, validate


def validate_scan(scan, description: str = "", limits: Limits = Limits(),
                  allow_pickle: bool = False) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a scanned dataset; the full report is core.validation.validate."""
    v = validate(scan, description, limits, allow_pickle)
    return v.errors, v.warnings


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


def _summary(v: Validation) -> dict:
    """What `crew register` shows: counts, how much was checked, the split preview."""
    return {"counts": v.counts, "checked": v.checked, "split_preview": v.split_preview}


def register_dataset(settings: Settings, store: Store, path: str, name: str,
                     description: str = "", source: str = "registered",
                     overwrite: bool = False, allow_pickle: bool = False,
                     limits: Limits = Limits()) -> dict:
    """Scan, validate and (when valid) save the datacard and its validation report. Returns
    {"status": "registered"|"invalid", "name", "datacard_path", "validation_path", "task",
    "errors", "warnings", "validation": {counts, checked, split_preview}}."""
    result = {"status": "invalid", "name": name, "datacard_path": None,
              "validation_path": None, "task": None, "errors": [], "warnings": [],
              "validation": None}
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
    # pickled volumes (KneeMRI .pck) run code when read: only with the card's allow_pickle
    card.allow_pickle = allow_pickle or bool(existing and existing.card.allow_pickle)
    v = validate(scan, description, limits, card.allow_pickle)
    pickle_errors, pickle_warnings = pickle_check(scan, card.allow_pickle)
    errors, warnings = v.errors + pickle_errors, v.warnings + pickle_warnings
    result.update(task=scan.task, errors=errors, warnings=warnings, validation=_summary(v))
    if errors:
        return result
    report = {"dataset": card.name, "path": scan.root, "valid": True, **v.to_json(),
              "scan": scan.summary(), "checked_at": time.time()}
    report.update(errors=errors, warnings=warnings)  # with the pickle check's
    card_path = settings.datacards_dir / f"{card.slug()}.json"
    report_path = settings.datacards_dir / f"{card.slug()}.validation.json"
    previous = {p: p.read_bytes() for p in (card_path, report_path) if p.exists()}
    try:  # the report first, then the card that makes it registered; undo both on failure
        write_json_atomic(report_path, report)
        card_path = save_datacard(card, settings.datacards_dir)
    except BaseException:
        for p in (card_path, report_path):
            if p in previous:
                p.write_bytes(previous[p])
            else:
                p.unlink(missing_ok=True)
        raise
    sync_store(settings, store)
    store.audit("user", "register_dataset", card.name, f"path={scan.root}")
    result.update(status="registered", name=card.name, datacard_path=str(card_path),
                  validation_path=str(report_path))
    return result


def format_registration(result: dict, max_classes: int = 30) -> str:
    """`crew register`'s readable summary: verdict, where things were written, errors (with
    where), warnings, counts per class, how much was checked, and the split preview."""
    registered = result["status"] == "registered"
    lines = [f"{result['name']}: {'registered' if registered else 'INVALID'}"
             + (f" ({result['task']})" if result.get("task") else "")]
    if registered:
        lines += [f"  datacard:          {result['datacard_path']}",
                  f"  validation report: {result['validation_path']}"]
    else:
        lines.append("  nothing was written (no datacard, no report); fix the errors and "
                     "register again")
    for title, items in (("Errors", result["errors"]), ("Warnings", result["warnings"])):
        if items:
            lines.append(f"{title} ({len(items)}):")
            lines += [f"  - {item}" for item in items]
    summary = result.get("validation") or {}
    counts, checked = summary.get("counts") or {}, summary.get("checked") or {}
    preview = summary.get("split_preview") or {}
    if counts:
        lines.append(f"Counts: {counts['samples']} samples, {counts['patients']} patients "
                     f"(grouped by {counts['grouping_key']})")
        classes = counts.get("classes", {})
        train_p = preview.get("patients", {}).get("train", {})
        test_p = preview.get("patients", {}).get("test", {})
        train_i = preview.get("images", {}).get("train", {})
        test_i = preview.get("images", {}).get("test", {})
        width = max([len("class")] + [len(c) for c in list(classes)[:max_classes]])
        head = f"  {'class':<{width}}  {'images':>7}  {'patients':>8}"
        if preview:
            head += f"  {'split preview: train / test patients (images)':>s}"
        lines.append(head)
        for label, c in list(classes.items())[:max_classes]:
            row = f"  {label:<{width}}  {c['images']:>7}  {c['patients']:>8}"
            if preview:
                row += (f"  {train_p.get(label, 0)} / {test_p.get(label, 0)} "
                        f"({train_i.get(label, 0)} / {test_i.get(label, 0)})")
            lines.append(row)
        if len(classes) > max_classes:
            lines.append(f"  ... {len(classes) - max_classes} more classes (see the report)")
    if preview:
        n_img, n_pat = preview["num_images"], preview["num_patients"]
        caps = preview.get("caps")
        lines.append(f"Split preview ({preview['method']}, seed {preview['seed']}): train "
                     f"{n_img['train']} images / {n_pat['train']} patients, test "
                     f"{n_img['test']} images / {n_pat['test']} patients")
        if caps:
            asked = ", ".join(f"{k} {caps[k]}" for k in ("train", "test", "total", "per_class")
                              if caps.get(k) is not None)
            asked += ", balanced" if caps.get("balanced") else ""
            lines.append(f"  caps from the description: {asked.lstrip(', ')}; "
                         f"{caps.get('images_left_out', 0)} images left out")
    if checked:
        lines.append(f"Checked: {checked.get('how', '')}; {checked.get('files', 0)} files "
                     f"exist"
                     + (f", {checked['masks_decoded']} masks decoded"
                        if checked.get("masks_decoded") else "")
                     + f"; {checked.get('hashed', 0)} of {checked.get('duplicate_candidates', 0)}"
                       " same-size files hashed for duplicates")
    return "\n".join(lines)
