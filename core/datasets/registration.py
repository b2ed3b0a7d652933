"""Register a dataset folder: scan it, draft the datacard, validate, then save atomically.

Nothing is written inside the dataset folder. Validation (core.datasets.validation) checks the
files decode, masks hold only declared labels and fit their images, duplicates, and that every
class has enough patients for a patient-grouped split; it previews that split. A valid dataset
gets ``<home>/datacards/NAME.json`` and its report ``NAME.validation.json``; an invalid one gets
errors that say what is wrong and where, and nothing is written anywhere.

The Datasets page works in two steps: ``draft_dataset`` (core.datasets.drafting) scans a folder
and drafts its card without saving anything; ``register_dataset`` (with the user's edits as
``fields``) validates and saves. ``update_datacard`` edits a registered card (re-validating the
folder) and ``delete_datacard`` removes a card, its report and its store row; neither ever
touches the data.

May import: core.config, core.store, core.datasets (catalog, datacards, drafting, folder_safety,
validation, layouts). A system folder, a home folder, the repository or the job workspaces are
refused before anything is read.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from core.config.settings import BUILTIN_DATACARDS, Settings
from core.datasets.catalog import CatalogEntry, find_entry, sync_store
from core.datasets.datacards import (Datacard, DatacardError, load_datacard, parse_datacard,
                                     save_datacard, write_json_atomic)
from core.datasets.drafting import apply_fields, compatible_tasks, draft_datacard
from core.datasets.folder_safety import DatasetRootError, check_dataset_folder
from core.datasets.layouts.arrays import pickle_check
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanError
from core.datasets.validation import Limits, Validation, validate
from core.store.db import Store


def validate_scan(scan, description: str = "", limits: Limits = Limits(),
                  allow_pickle: bool = False) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a scanned dataset; the full report is
    core.datasets.validation.validate."""
    v = validate(scan, description, limits, allow_pickle)
    return v.errors, v.warnings


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


def _summary(v: Validation) -> dict:
    """What `crew register` shows: counts, how much was checked, the split preview."""
    return {"counts": v.counts, "checked": v.checked, "split_preview": v.split_preview}


def _is_builtin(entry: CatalogEntry) -> bool:
    return entry.card_path.resolve().parent == BUILTIN_DATACARDS.resolve()


def register_dataset(settings: Settings, store: Store, path: str, name: str,
                     description: str = "", source: str = "registered",
                     overwrite: bool = False, allow_pickle: bool = False,
                     limits: Limits = Limits(), fields: dict | None = None,
                     new_only: bool = False, interpretation: str | int | None = None,
                     recipe: dict | None = None) -> dict:
    """Scan, validate and (when valid) save the datacard and its validation report.

    ``fields`` are the user's edits of the drafted card (EDITABLE_FIELDS but description, which
    is ``description``). ``new_only`` (the Datasets page) refuses any name a registered card
    already has; otherwise the same name and folder re-registers, and ``overwrite`` replaces a
    card of that name for another folder. Returns {"status": "registered"|"invalid", "name",
    "datacard_path", "validation_path", "task", "errors", "warnings", "validation": {counts,
    checked, split_preview}}.

    ``interpretation`` picks one reading of the folder (its number in the list a close call
    returns, or a reader name). When two readings are close, or the best explains under half the
    files, and none was picked, nothing is saved: the status is "needs_choice" and
    ``interpretations`` lists the readings to choose from. ``recipe`` (a recipe's JSON, e.g.
    edited by the user) reads the folder exactly as it says; that target becomes the card's
    first (its others are kept when the card is re-registered for the same folder). The result lists every target (``targets``: task, classes, counts, coverage,
    grouping, split, recipe)."""
    result = {"status": "invalid", "name": name, "datacard_path": None,
              "validation_path": None, "task": None, "errors": [], "warnings": [],
              "validation": None}
    if os.path.isdir(path):   # a missing folder gets the scanner's own message
        try:
            check_dataset_folder(settings, path, name)
        except DatasetRootError as exc:
            result["errors"].append(str(exc).replace(" and plan again", ""))
            return result
    try:
        scan = scan_folder(path, description, interpretation, recipe=recipe)
        result["targets"] = scan.details.get("targets", [])
        reading = scan.details.get("interpretation") or {}
        if reading.get("ambiguous"):
            result.update(status="needs_choice", task=scan.task,
                          interpretations=scan.details.get("interpretations", []))
            result["errors"].append(
                f"this folder can be read in more than one way ({reading['why']}); nothing was "
                "saved. Choose the reading that is right: on the Datasets page pick it from the "
                "list, or run the command again with --interpretation N (the numbers below), "
                "or say in the description where the labels are")
            return result
        card = draft_datacard(scan, name, description, source)
        if fields:
            card = apply_fields(card, fields, scan)
    except (ScanError, DatacardError) as exc:
        result["errors"].append(str(exc))
        return result
    existing = find_entry(settings, card.name)
    replaced_builtin = bool(existing and _is_builtin(existing))
    if recipe is not None and existing and not replaced_builtin and \
            Path(existing.card.path).resolve() == Path(scan.root):
        card.targets = _with_other_targets(card.targets, existing.card.targets)
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
    if v.errors and interpretation is None and recipe is None and not fields:
        scan, card, v = _next_usable_reading(path, scan, card, v, name, description, source,
                                             limits)
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


MAX_FALLBACKS = 4   # further readings tried when the best one cannot be used
FALLBACK_SHARE = 0.9   # ... that scored at least this share of the best one's score


def _next_usable_reading(path: str, scan, card: Datacard, v: Validation, name: str,
                         description: str, source: str, limits: Limits):
    """The best reading fails validation (a class of one patient, too few images to split):
    the next targets, in the card's order, until one passes — the user is told which reading
    was used and why the first was not. (scan, card, validation) as they are when none does."""
    first = scan.details.get("target") or scan.details.get("reader") or scan.layout
    targets = scan.details.get("targets", [])
    best = float(targets[0].get("score") or 0) if targets else 0.0
    tried = 0
    for target in targets[1:]:
        if tried >= MAX_FALLBACKS or not target.get("id") or target["id"] == first:
            continue
        if float(target.get("score") or 0) < FALLBACK_SHARE * best or \
                target.get("task") != scan.task:
            continue   # a reading the interpretation ranked well below, or another task
        tried += 1
        try:
            other = scan_folder(path, description, target["id"])
            other_card = draft_datacard(other, name, description, source)
        except (ScanError, DatacardError):
            continue
        other_v = validate(other, description, limits, card.allow_pickle)
        if not other_v.errors:
            other_v.warnings.insert(0, f"the best reading ({first}) cannot be used: "
                                       f"{v.errors[0]}; registered the next usable one, "
                                       f"{target['id']} (pick another with --interpretation "
                                       "or on the Datasets page)")
            other_card.allow_pickle = card.allow_pickle
            return other, other_card, other_v
    return scan, card, v


def _with_other_targets(new: list, old: list) -> list:
    """A card re-registered by an edited recipe: the edited target first (marked, so that a
    later edit of the card reads the folder by it again), then the card's other targets as they
    were, none lost."""
    edited = [{**t, "edited": True} for t in new if isinstance(t, dict)]
    ids = {t.get("id") for t in edited}
    return edited + [{k: v for k, v in t.items() if k != "edited"} for t in old
                     if isinstance(t, dict) and t.get("id") not in ids]


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
        kept = [t for t in card.targets if isinstance(t, dict) and t.get("recipe")]
        edited = [t for t in kept if t.get("edited")]
        recipe = edited[0]["recipe"] if edited else \
            kept[0]["recipe"] if len(card.targets) == 1 and kept else None
        scan = scan_folder(entry.dataset_path, description, card.interpretation or None,
                           recipe=recipe)   # a card registered by its recipe keeps it
        fresh = draft_datacard(scan, card.name, description, card.source)
        data = card.to_json_dict()
        for key in ("dimension", "file_format", "label_source", "grouping_key", "classes",
                    "class_counts", "num_samples"):
            data[key] = getattr(fresh, key)
        if card.tasks and not set(card.tasks) <= set(compatible_tasks(scan)):
            data["tasks"] = fresh.tasks  # the layout changed under the card
        data["updated_at"] = time.time()
        updated = apply_fields(parse_datacard(data), changes, scan)
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
    if result.get("interpretations"):
        lines.append("Readings of the folder (best first; choose with --interpretation N):")
        for item in result["interpretations"]:
            if item.get("refused"):
                lines.append(f"  {item['number']}. {item['reader']}: not usable: "
                             f"{item['refused']}")
                continue
            lines.append(f"  {item['number']}. {item['task']} from {item['source']}: "
                         f"{item['num_samples']} samples, classes "
                         f"{', '.join(item['classes']) or '(free text / masks)'}, covers "
                         f"{item['coverage']:.0%} of the images, patients by "
                         f"{item['patient_key']}")
            lines += [f"       e.g. {row}" for row in item["examples"]]
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
