"""Register a dataset folder: scan it, draft the datacard, validate, then save atomically.

Nothing is written inside the dataset folder. Validation (core.datasets.validation) checks the files
decode, masks hold only declared labels and fit their images, duplicates, and that every class
has enough patients for a patient-grouped split; it previews that split. A valid dataset gets
``<home>/datacards/NAME.json`` and its report ``NAME.validation.json``; an invalid one gets
errors that say what is wrong and where, and nothing is written anywhere.

The Datasets page works in two steps: ``draft_dataset`` scans a folder and drafts its card
without saving anything; ``register_dataset`` (with the user's edits as ``fields``) validates and
saves. ``update_datacard`` edits a registered card (re-validating the folder) and
``delete_datacard`` removes a card, its report and its store row; neither ever touches the data.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from core.datasets.catalog import CatalogEntry, find_entry, sync_store
from core.datasets.datacards import (NAME_RE, TASKS, Datacard, DatacardError, load_datacard,
                            parse_datacard, save_datacard, write_json_atomic)
from core.datasets.vocabulary import parse_request
from core.datasets.layouts.arrays import pickle_check
from core.datasets.layouts.types import ScanError
from core.datasets.layouts.dispatch import scan_folder
from core.config.settings import BUILTIN_DATACARDS, Settings
from core.store.db import Store
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT
from core.datasets.validation import Limits, Validation, validate


def validate_scan(scan, description: str = "", limits: Limits = Limits(),
                  allow_pickle: bool = False) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a scanned dataset; the full report is core.datasets.validation.validate."""
    v = validate(scan, description, limits, allow_pickle)
    return v.errors, v.warnings


class RegistrationError(ValueError):
    """The form's input cannot be used; the message says what is wrong and how to fix it."""


# what a user may change on a registered card (the rest comes from scanning the folder)
EDITABLE_FIELDS = ("description", "modality", "anatomy", "tasks", "license", "provenance",
                   "allow_pickle")
_CARD_KEY = {"description": "dataset description"}


def check_folder(path: str) -> Path:
    """The dataset folder as an absolute, readable directory; RegistrationError otherwise."""
    raw = (path or "").strip()
    if not raw:
        raise RegistrationError("give the dataset's folder on this server, e.g. "
                                "/data/chest_xray")
    if "\x00" in raw:
        raise RegistrationError("the folder path contains a NUL character; type the path again")
    folder = Path(os.path.expanduser(raw))
    if not folder.is_absolute():
        raise RegistrationError(f"{raw!r} is not a full path: give the absolute path of the "
                                "folder on this server, starting with / (e.g. /data/chest_xray)")
    if not folder.exists():
        raise RegistrationError(f"the folder {folder} does not exist on this server; check the "
                                "path (it must be on the machine running M3Builder, not on "
                                "your computer; to send data from your computer, upload a zip)")
    if not folder.is_dir():
        raise RegistrationError(f"{folder} is a file, not a folder; give the folder that holds "
                                "the dataset (to register a zip, use the upload instead)")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise RegistrationError(f"the folder {folder} cannot be read by the M3Builder server "
                                "(permission denied); give its user read access")
    return folder.resolve()


def propose_name(folder: str | Path) -> str:
    """A valid datacard name from a folder name ('chest_xray' -> 'chest_xray')."""
    text = re.sub(r"[^A-Za-z0-9 ._()+-]+", " ", Path(folder).name).strip()
    text = re.sub(r"^[^A-Za-z0-9]+", "", text)[:80].strip()
    return text if NAME_RE.match(text) else "Dataset"


def compatible_tasks(scan) -> list[str]:
    """The tasks a card may declare for this scan's layout (see tasks_for_layout)."""
    return tasks_for_layout(scan.layout, scan.task)


def tasks_for_layout(layout: str, task: str = "") -> list[str]:
    """The layout decides the training template (core.planning.tasks), so a mask dataset may be organ
    segmentation or lesion (anomaly) detection, a box table anomaly detection, a report table
    report generation, the rest diagnosis; ``task`` (the scan's) is always allowed."""
    template = TEMPLATE_OF_LAYOUT.get(layout)
    if template == "segmentation":
        options = ["segmentation", "anomaly_detection"]
    elif template == "detection":
        options = ["anomaly_detection"]
    elif template == "report_generation":
        options = ["report_generation"]
    elif template == "diagnosis":
        options = ["diagnosis"]
    else:
        options = list(TASKS)
    return options if task not in TASKS or task in options else [task, *options]


@dataclass
class Draft:
    """A scanned folder and its drafted card; nothing has been saved."""
    card: Datacard
    scan: object  # core.datasets.layouts.dispatch.ScanResult
    tasks: list[str]

    def facts(self) -> dict:
        """What the scan found (metadata only), for the form's read-only part."""
        scan = self.scan
        return {"path": scan.root, "layout": scan.layout, "task": scan.task,
                "dimension": scan.dimension, "file_format": scan.file_format,
                "grouping_key": scan.group_source, "num_samples": len(scan.samples),
                "num_files": scan.num_files, "num_groups": len({x.group for x in scan.samples}),
                "existing_split": scan.existing_split,
                # labels with their sample counts (None where samples are not counted per
                # label, e.g. organs in segmentation masks)
                "classes": {c: scan.class_counts.get(c) for c in scan.classes},
                "skipped": scan.skipped[:10], "num_skipped": len(scan.skipped),
                "needs_pickle": bool(scan.details.get("needs_pickle"))}


def draft_dataset(path: str, name: str = "", description: str = "",
                  source: str = "registered") -> Draft:
    """Scan ``path`` and draft its datacard (name proposed from the folder when empty). Saves
    nothing. Raises RegistrationError (bad input) or ScanError (unusable layout)."""
    folder = check_folder(path)
    name = (name or "").strip() or propose_name(folder)
    if not NAME_RE.match(name):
        raise RegistrationError(f"the name {name!r} is not allowed: 1-80 characters, letters, "
                                "digits, spaces and ._()+- , starting with a letter or digit")
    scan = scan_folder(folder, description)
    try:
        card = draft_datacard(scan, name, description, source)
    except DatacardError as exc:
        raise RegistrationError(str(exc)) from exc
    return Draft(card=card, scan=scan, tasks=compatible_tasks(scan))


def _apply_fields(card: Datacard, fields: dict, scan) -> Datacard:
    """The card with the user's edits (EDITABLE_FIELDS); DatacardError when one is invalid."""
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise DatacardError(f"these fields cannot be set: {', '.join(unknown)} (editable: "
                            f"{', '.join(EDITABLE_FIELDS)})")
    data = card.to_json_dict()
    for key, value in fields.items():
        if key == "allow_pickle":
            data[key] = bool(value)
        elif key == "tasks":
            tasks = [value] if isinstance(value, str) else list(value or [])
            if not tasks:
                raise DatacardError("choose at least one task")
            allowed = compatible_tasks(scan)
            wrong = [t for t in tasks if t not in allowed]
            if wrong:
                raise DatacardError(f"task {', '.join(wrong)} does not fit this dataset's "
                                    f"layout ({scan.layout}); choose from {', '.join(allowed)}")
            data["tasks"] = tasks
        else:
            if not isinstance(value, str):
                raise DatacardError(f"{key} must be text")
            if len(value) > 20000:
                raise DatacardError(f"{key} is too long ({len(value)} characters; at most "
                                    "20000)")
            data[_CARD_KEY.get(key, key)] = value.strip()
    return parse_datacard(data)


def _save_card(settings: Settings, store: Store, card: Datacard, report: dict) -> tuple[Path,
                                                                                        Path]:
    """Write the report, then the card (which makes it registered); undo both on failure."""
    card_path = settings.datacards_dir / f"{card.slug()}.json"
    report_path = settings.datacards_dir / f"{card.slug()}.validation.json"
    previous = {p: p.read_bytes() for p in (card_path, report_path) if p.exists()}
    try:
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
    return card_path, report_path


def _slug_owner(settings: Settings, card: Datacard) -> str | None:
    """The name of another card already saved under this card's file name, if any."""
    path = settings.datacards_dir / f"{card.slug()}.json"
    if not path.exists():
        return None
    try:
        other = load_datacard(path).name
    except DatacardError:
        return None
    return other if other.lower() != card.name.lower() else None


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


def _is_builtin(entry: CatalogEntry) -> bool:
    return entry.card_path.resolve().parent == BUILTIN_DATACARDS.resolve()


def register_dataset(settings: Settings, store: Store, path: str, name: str,
                     description: str = "", source: str = "registered",
                     overwrite: bool = False, allow_pickle: bool = False,
                     limits: Limits = Limits(), fields: dict | None = None,
                     new_only: bool = False) -> dict:
    """Scan, validate and (when valid) save the datacard and its validation report.

    ``fields`` are the user's edits of the drafted card (EDITABLE_FIELDS but description, which
    is ``description``). ``new_only`` (the Datasets page) refuses any name a registered card
    already has; otherwise the same name and folder re-registers, and ``overwrite`` replaces a
    card of that name for another folder. Returns {"status": "registered"|"invalid", "name",
    "datacard_path", "validation_path", "task", "errors", "warnings", "validation": {counts,
    checked, split_preview}}."""
    result = {"status": "invalid", "name": name, "datacard_path": None,
              "validation_path": None, "task": None, "errors": [], "warnings": [],
              "validation": None}
    try:
        scan = scan_folder(path, description)
        card = draft_datacard(scan, name, description, source)
        if fields:
            card = _apply_fields(card, fields, scan)
    except (ScanError, DatacardError) as exc:
        result["errors"].append(str(exc))
        return result
    existing = find_entry(settings, card.name)
    replaced_builtin = bool(existing and _is_builtin(existing))
    if existing and not replaced_builtin and new_only:
        result["errors"].append(f"a dataset named {existing.card.name!r} is already registered "
                                f"(folder {existing.card.path}); choose another name, or edit "
                                "or delete that card under Registered datacards")
        return result
    if existing and not replaced_builtin and not overwrite and \
            Path(existing.card.path).resolve() != Path(scan.root):
        result["errors"].append(f"a dataset named {card.name!r} is already registered for "
                                f"{existing.card.path}; choose another name")
        return result
    owner = _slug_owner(settings, card)
    if owner:
        result["errors"].append(f"the name {card.name!r} would be saved as {card.slug()}.json, "
                                f"which already holds the card {owner!r}; choose a name that "
                                "differs in more than punctuation or spaces")
        return result
    # pickled volumes (KneeMRI .pck) run code when read: only with the card's allow_pickle
    card.allow_pickle = allow_pickle or card.allow_pickle or bool(
        existing and not replaced_builtin and existing.card.allow_pickle)
    v = validate(scan, description, limits, card.allow_pickle)
    pickle_errors, pickle_warnings = pickle_check(scan, card.allow_pickle)
    errors, warnings = v.errors + pickle_errors, v.warnings + pickle_warnings
    if replaced_builtin:
        warnings.append(f"this card replaces the built-in example card {existing.card.name!r} "
                        "(deleting it brings the example back)")
    result.update(task=scan.task, errors=errors, warnings=warnings, validation=_summary(v))
    if errors:
        return result
    report = {"dataset": card.name, "path": scan.root, "valid": True, **v.to_json(),
              "scan": scan.summary(), "checked_at": time.time()}
    report.update(errors=errors, warnings=warnings)  # with the pickle check's
    card_path, report_path = _save_card(settings, store, card, report)
    store.audit("user", "register_dataset", card.name, f"path={scan.root}")
    result.update(status="registered", name=card.name, datacard_path=str(card_path),
                  validation_path=str(report_path))
    return result


def update_datacard(settings: Settings, store: Store, name: str, changes: dict,
                    limits: Limits = Limits()) -> dict:
    """Edit a registered card (EDITABLE_FIELDS), re-scanning and re-validating its folder with
    the new description; the scanned facts (classes, counts, layout, grouping) are refreshed.
    Only the card and its report change, and only when valid; the dataset folder is only read.
    Returns register_dataset's shape with status "updated" or "invalid"."""
    result = {"status": "invalid", "name": name, "datacard_path": None,
              "validation_path": None, "task": None, "errors": [], "warnings": [],
              "validation": None}
    entry = find_entry(settings, name)
    if entry is None:
        result["errors"].append(f"no datacard named {name!r}; pick one from the list")
        return result
    if _is_builtin(entry):
        result["errors"].append(f"{entry.card.name!r} is a built-in example card and cannot be "
                                "edited; register its folder under a name of your own")
        return result
    if not entry.available:
        result["errors"].append(f"the folder {entry.dataset_path} is not there, so the card "
                                "cannot be re-validated; put the data back, or delete the card "
                                "and register the data where it is now")
        return result
    card = entry.card
    description = changes.get("description", card.description)
    if not isinstance(description, str):
        result["errors"].append("description must be text")
        return result
    try:
        scan = scan_folder(entry.dataset_path, description)
        fresh = draft_datacard(scan, card.name, description, card.source)
        data = card.to_json_dict()
        for key in ("dimension", "file_format", "label_source", "grouping_key", "classes",
                    "class_counts", "num_samples"):
            data[key] = getattr(fresh, key)
        if card.tasks and not set(card.tasks) <= set(compatible_tasks(scan)):
            data["tasks"] = fresh.tasks  # the layout changed under the card
        data["updated_at"] = time.time()
        updated = _apply_fields(parse_datacard(data), changes, scan)
    except (ScanError, DatacardError) as exc:
        result["errors"].append(str(exc))
        return result
    v = validate(scan, description, limits, updated.allow_pickle)
    pickle_errors, pickle_warnings = pickle_check(scan, updated.allow_pickle)
    errors, warnings = v.errors + pickle_errors, v.warnings + pickle_warnings
    result.update(task=scan.task, errors=errors, warnings=warnings, validation=_summary(v),
                  name=card.name)
    if errors:
        return result
    report = {"dataset": card.name, "path": scan.root, "valid": True, **v.to_json(),
              "scan": scan.summary(), "checked_at": time.time(), "errors": errors,
              "warnings": warnings}
    card_path, report_path = _save_card(settings, store, updated, report)
    changed = ", ".join(sorted(changes)) or "nothing"
    store.audit("user", "edit_datacard", card.name, f"changed={changed}")
    result.update(status="updated", datacard_path=str(card_path),
                  validation_path=str(report_path))
    return result


def delete_datacard(settings: Settings, store: Store, name: str) -> dict:
    """Remove a registered card, its validation report and its store row. The dataset folder
    is never touched. Returns {"status": "deleted"|"invalid", "name", "removed", "kept",
    "errors"}."""
    result = {"status": "invalid", "name": name, "removed": [], "kept": None, "errors": []}
    entry = find_entry(settings, name)
    if entry is None:
        result["errors"].append(f"no datacard named {name!r}; nothing was deleted")
        return result
    cards_dir = settings.datacards_dir.resolve()
    if _is_builtin(entry) or entry.card_path.resolve().parent != cards_dir:
        result["errors"].append(f"{entry.card.name!r} is a built-in example card; it cannot be "
                                "deleted")
        return result
    report_path = entry.card_path.with_name(
        entry.card_path.name[:-len(".json")] + ".validation.json")
    entry.card_path.unlink()  # first: without its card the dataset is no longer registered
    result["removed"].append(str(entry.card_path))
    if report_path.exists():
        report_path.unlink()
        result["removed"].append(str(report_path))
    sync_store(settings, store)
    store.audit("user", "delete_datacard", entry.card.name, f"kept data={entry.dataset_path}")
    result.update(status="deleted", name=entry.card.name, kept=str(entry.dataset_path))
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
