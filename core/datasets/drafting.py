"""Drafting a datacard from a dataset folder, before anything is saved: the folder checked
(absolute, existing, readable), a name proposed, the folder scanned and its card drafted, the
tasks its layout allows, the name a new card may take, and the user's edits (EDITABLE_FIELDS)
found and applied to a card.

May import: core.config, core.datasets.catalog, core.datasets.datacards,
core.datasets.vocabulary, core.datasets.layouts."""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from core.config.settings import Settings
from core.datasets.catalog import CatalogEntry
from core.datasets.datacards import NAME_RE, TASKS, Datacard, DatacardError, parse_datacard
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT
from core.datasets.vocabulary import parse_request


class RegistrationError(ValueError):
    """The form's input cannot be used; the message says what is wrong and how to fix it."""


# what a user may change on a registered card (the rest comes from scanning the folder)
EDITABLE_FIELDS = ("description", "modality", "anatomy", "tasks", "license", "provenance",
                   "allow_pickle")
_CARD_KEY = {"description": "dataset description"}
NAME_RULE = ("1-80 characters: letters, digits, spaces and ._()+- , starting with a letter or "
             "digit")


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
    """The tasks a card may declare for this scan's layout (see tasks_for_layout) and for
    every other target the folder offers."""
    tasks = tasks_for_layout(scan.layout, scan.task)
    for target in scan.details.get("targets") or []:
        tasks += [t for t in tasks_for_layout(target.get("layout", ""), target.get("task", ""))
                  if t not in tasks]
    return tasks


def tasks_for_layout(layout: str, task: str = "") -> list[str]:
    """The layout decides the training template (core.planning.tasks), so a mask dataset may be
    organ segmentation or lesion (anomaly) detection, a box table anomaly detection, a report
    table report generation, the rest diagnosis; ``task`` (the scan's) is always allowed."""
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
    scan: object  # core.datasets.layouts.types.ScanResult
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
                "needs_pickle": bool(scan.details.get("needs_pickle")),
                "interpretation": scan.details.get("interpretation", {}),
                "interpretations": scan.details.get("interpretations", [])}


def draft_dataset(path: str, name: str = "", description: str = "",
                  source: str = "registered", interpretation: str | int | None = None) -> Draft:
    """Scan ``path`` and draft its datacard (name proposed from the folder when empty). Saves
    nothing. Raises RegistrationError (bad input) or ScanError (unusable layout)."""
    folder = check_folder(path)
    name = (name or "").strip() or propose_name(folder)
    if not NAME_RE.match(name):
        raise RegistrationError(f"the name {name!r} is not allowed: 1-80 characters, letters, "
                                "digits, spaces and ._()+- , starting with a letter or digit")
    scan = scan_folder(folder, description, interpretation)
    try:
        card = draft_datacard(scan, name, description, source)
    except DatacardError as exc:
        raise RegistrationError(str(exc)) from exc
    return Draft(card=card, scan=scan, tasks=compatible_tasks(scan))


def is_own(entry: CatalogEntry, settings: Settings) -> bool:
    """A card the user registered (or the demo), kept in the home folder: editable."""
    return entry.card_path.resolve().parent == settings.datacards_dir.resolve()


def name_problem(name: str, entries: list[CatalogEntry], settings: Settings) -> str | None:
    """Why ``name`` cannot be used for a new datacard, or None."""
    if not name:
        return None
    if not NAME_RE.match(name):
        return f"the name {name!r} is not allowed: {NAME_RULE}"
    for e in entries:
        if e.card.name.lower() == name.lower() and is_own(e, settings):
            return (f"a dataset named {e.card.name!r} is already registered (folder "
                    f"{e.card.path}); choose another name, or edit that card below")
    return None


def changed_fields(card: Datacard, edited: dict) -> dict:
    """The edited fields (EDITABLE_FIELDS, as the edit form gives them) whose value differs
    from the card's."""
    return {k: v for k, v in edited.items() if v != getattr(card, k)}


def apply_fields(card: Datacard, fields: dict, scan) -> Datacard:
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


def draft_datacard(scan, name: str, description: str, source: str = "registered") -> Datacard:
    intent = parse_request(f"{name} {description}")
    modality = intent.modality
    text = f"{name} {description}".lower()
    if not modality and re.search(r"x-?ray|cxr|radiograph", text):
        modality = "X-ray"
    auto = (f"{scan.dimension} {scan.file_format} images, {len(scan.samples)} samples, layout "
            f"{scan.layout}; labels: {', '.join(scan.classes) or 'free text'}.")
    targets = scan.details.get("targets") or []
    tasks = list(dict.fromkeys([scan.task] + [t["task"] for t in targets]))
    return parse_datacard({
        "dataset name": name, "dataset description": description.strip() or auto,
        "dataset path": scan.root, "tasks": tasks, "modality": modality,
        "anatomy": intent.anatomy, "dimension": scan.dimension, "file_format": scan.file_format,
        "label_source": scan.layout, "grouping_key": scan.group_source,
        "classes": scan.classes, "class_counts": scan.class_counts,
        "num_samples": len(scan.samples), "source": source,
        "interpretation": (scan.details.get("interpretation") or {}).get("reader", ""),
        "targets": targets,
        "provenance": "registered with M3Builder", "registered_at": time.time()})
