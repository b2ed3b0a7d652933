"""Readings of a dataset folder, scored; the best one wins, and a close call is put to the user.

Every reader (``READERS``: DICOM series, .npz arrays, report tables and per-image texts, box
tables, Pascal VOC, YOLO, labelme sidecars, masks, labels in file names, class folders) proposes
at most one *reading*: a ScanResult, i.e. a task, the image set, where the annotations come from,
how images join them, the patient key and the split. The records engine
(core.datasets.records.reading) proposes one reading per target of the folder's record sources:
label tables on every sheet (also of per-sample array volumes), JSON documents, per-image JSON
sidecars, texts and lists. Each reading is scored on

* coverage: the share of the folder's image, volume, mask and DICOM files it explains;
* the description's hints (core.datasets.layouts.hints): the task it asks for, the formats,
  files, sheets and columns it names (or names as the label: ``details["described"]``);
* a small prior in reader order (the more specific reader first); of a label table's targets,
  the one a reader would pick (``details["preferred"]``) has the prior of the label-table reader
  it replaces.

Degenerate readings are never accepted: a diagnosis with fewer than two classes, classes that
are only container or mask folder names, or one class per case folder. When two readings are
close and disagree (task or annotation source), or the best explains less than half of the
files, the result says so (``details["interpretation"]["ambiguous"]``): registration then asks
the user to pick one (Datasets page, CLI ``--interpretation N``) instead of guessing, and the
choice is kept in the datacard so every later scan reads the folder the same way.

May import: core.datasets.layouts.* (this is the top of the package, with dispatch).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.datasets.layouts.common import split_of_name, ungroup_shared_folders
from core.datasets.layouts.hints import Hints, read_hints
from core.datasets.layouts.inventory import (Inventory, is_mask_folder, is_mask_path,
                                              take_inventory)
from core.datasets.layouts.known_formats import describe, recognised
from core.datasets.layouts.readers import LABEL_TABLE_PRIOR, PRIOR, READERS, reading_formats
from core.datasets.layouts.types import ScanError, ScanResult, entries
from core.datasets.layouts.target_list import distinct_targets, is_target_pair

GENERIC_CLASSES = {"images", "image", "imgs", "img", "data", "dataset", "scans", "scan",
                   "files", "nifti", "nii", "dicom", "png", "jpg", "jpeg", "raw", "volumes",
                   "masks", "mask", "labels", "label", "annotations", "annotation", "seg",
                   "segmentation", "segmentations", "gt", "ground_truth", "imagestr",
                   "labelstr", "imagests", "labelsts", "jpegimages", "imagesets", "case"}
LABEL_FIELD = re.compile(r"label|finding|diagnos|class|target|category|outcome|grade|dx", re.I)
RECORDS_PRIOR = 0.0   # the records reading's prior: an agreeing reader of its own wins a tie
SPLIT_NAMES = {"train", "training", "val", "valid", "validation", "test", "testing", "dev",
               "tr", "ts", "trainval", "holdout", "eval", "evaluation"}
# numbered pieces of a dataset: part1/part2, batch_3, images_001, shard-0003, p10/p11 (MIMIC)
SHARD = re.compile(r"^(?:.*[-_ ])?(part|batch|shard|chunk|fold|images?|imgs?|data|dataset|"
                   r"volumes?|vol|disk|disc|cd|dvd|dir|folder|zip|archive|download|set|subset|"
                   r"split|piece|p|s)"
                   r"[-_ ]?\d+$", re.I)
CLOSE = 0.05          # readings closer than this (and different) are put to the user
LOW_COVERAGE = 0.5    # a best reading explaining less than this is put to the user too
TASK_OF_LAYOUT = {"box_table": "detection", "image_mask_folders": "segmentation",
                  "report_table": "report_generation"}


@dataclass
class Reading:
    reader: str
    scan: ScanResult | None
    coverage: float = 0.0
    score: float = 0.0
    refused: str = ""          # why the reading is not acceptable (degenerate, error)

    @property
    def task(self) -> str:
        return TASK_OF_LAYOUT.get(self.scan.layout, "diagnosis") if self.scan else ""


IMAGE_KINDS = ("image", "tiff", "volume", "dicom")


def _explained(scan: ScanResult, inv: Inventory) -> int:
    """How many of the folder's image files (masks not counted) the reading uses as images,
    channels, slices or series instances."""
    used: set[str] = set()
    for s in scan.samples:
        refs = s.image if isinstance(s.image, list) else [s.image]
        used.update(str(ref).split("::")[0] for ref in refs)
        masks = s.extra.get("label_path")   # the mask (or structure masks) of the image
        used.update(str(m) for m in (masks if isinstance(masks, list) else [masks] if masks
                                     else []))
        used.update(str(f) for f in (s.extra.get("series_files") or []))
        used.update(str(f) for f in (s.extra.get("other_files") or []))
    count = 0
    root = str(inv.root)
    for ref in used:
        rel = os.path.relpath(ref, root).replace(os.sep, "/")
        folder = inv.folders.get("" if rel == "." else rel)
        if folder is not None and not os.path.isfile(ref):  # a folder of slices or a series
            count += sum(n for k, n in folder.items() if k in IMAGE_KINDS)
        elif not is_mask_path(rel):
            count += 1
    return count


def _degenerate(scan: ScanResult) -> str:
    if not scan.samples:
        return "no samples"
    if TASK_OF_LAYOUT.get(scan.layout, "diagnosis") != "diagnosis":
        return ""
    multi = any(s.labels is not None for s in scan.samples)
    if len(scan.classes) < (1 if multi else 2):
        return (f"only one class ({', '.join(scan.classes) or 'none'}) in all; diagnosis needs "
                "at least two classes")
    mask_folders = [c for c in scan.classes if is_mask_folder(c)]
    if scan.layout == "class_folders" and mask_folders:
        return (f"the folder {mask_folders[0]}/ holds masks, so the folders are images and "
                "masks, not classes")
    if all(c.lower() in GENERIC_CLASSES for c in scan.classes):
        return (f"the 'classes' {', '.join(scan.classes)} are folder names that hold images or "
                "masks, not labels")
    if len(scan.classes) > 10 and len(scan.samples) < 2 * len(scan.classes):
        return (f"{len(scan.classes)} classes for {len(scan.samples)} samples: one class per "
                "case folder is not a label")
    if all(c.lower() in SPLIT_NAMES or split_of_name(c) for c in scan.classes):
        return (f"the 'classes' {', '.join(scan.classes)} are the dataset's split (train/test), "
                "not labels")
    shards = [SHARD.match(c) for c in scan.classes]
    if len(scan.classes) >= 2 and all(shards) and \
            len({m.group(1).lower() for m in shards}) == 1:
        return (f"the 'classes' {', '.join(scan.classes[:4])} are numbered parts, shards or "
                "download pieces of the data, not labels")
    images = [s.image if isinstance(s.image, str) else "" for s in scan.samples[:2000]]
    masks = sum(is_mask_path(i) for i in images if i)
    if masks and masks >= 0.2 * len(images):
        return (f"{masks} of its images are mask files (named or stored as masks): the reading "
                "labels masks as if they were images")
    ids = [c for c in scan.classes if len(re.findall(r"\d", c)) >= 3]
    if len(scan.classes) >= 5 and len(ids) > 0.8 * len(scan.classes):
        return (f"{len(scan.classes)} 'classes' named like IDs ({', '.join(scan.classes[:3])}, "
                "...): these folders are cases or patients, not labels")
    return ""


def _attribute_label(scan: ScanResult, hints: Hints) -> str:
    """Why a reading whose label column is an acquisition or demographic attribute (sex, view,
    site, institute, scanner, dx_type) is refused, unless the description names that column."""
    from core.datasets.records.fields import ATTRIBUTE_NAME
    column = str(scan.details.get("label_column") or "")
    if column and ATTRIBUTE_NAME.match(column.strip()) and not hints.mentions(column):
        return (f"its label column {column!r} is an acquisition or demographic attribute, not "
                "a finding; name the column in the description to learn it")
    return ""


def _mentioned(scan: ScanResult, hints: Hints) -> bool:
    """The description names the reading's annotation file, sheet, column or folder."""
    d = scan.details
    names = [d.get("sheet"), d.get("label_column"), d.get("image_column"),
             d.get("mask_dir") and Path(d["mask_dir"]).name, d.get("annotation_dir"),
             d.get("table") and Path(str(d["table"])).name]
    names += [str(c) for c in (d.get("label_columns") or [])]
    return bool(d.get("described")) or any(n and hints.mentions(str(n)) for n in names) or \
        _column_named(scan, hints)


def _column_named(scan: ScanResult, hints: Hints) -> bool:
    """The description names the reading's label column itself: quoted, or unquoted when the
    name is distinctive (see _distinctive)."""
    d = scan.details
    columns = [str(c) for c in [d.get("label_column"), *(d.get("label_columns") or [])] if c]
    return any(hints.mentions(c) or _distinctive(c) and re.search(
        r"(?<!\w)" + re.escape(c) + r"(?!\w)", hints.text) for c in columns)


def _distinctive(column: str) -> bool:
    """A column name the description may name without quotes: an acronym (CDR, ISUP) or an
    identifier (case_csPCa, aclDiagnosis), never a plain word (Group, Finding)."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9]{1,9}", column) or
                re.search(r"[_\d]|[a-z][A-Z]", column))


def _score(reading: Reading, hints: Hints, inv: Inventory, prior: float,
           declared: set[str]) -> None:
    scan = reading.scan
    total = inv.count(*IMAGE_KINDS) + (inv.count("array") if scan.file_format in
                                   ("npz", "npy", "pt", "pck", "pkl", "h5", "hdf5") else 0)
    reading.coverage = min(1.0, _explained(scan, inv) / total) if total else 1.0
    task = reading.task
    wanted = {("detection" if t == "anomaly_detection" and scan.layout == "box_table" else
               "segmentation" if t == "anomaly_detection" else t) for t in declared}
    if hints.task == task or task in wanted:
        agree = 1.0
    elif task in hints.tasks:
        agree = 0.75
    elif not hints.task and not wanted:
        agree = 0.5
    else:
        agree = 0.0
    formats = reading_formats(reading.reader, scan)
    fmt = 1.0 if formats & hints.formats else 0.5 if not hints.formats or not formats else 0.0
    if formats & hints.shown:   # the folder shows a known format this reading stands for
        fmt = max(fmt, 0.75)
        scan.details["known_formats"] = describe(sorted(formats & hints.shown))
    mention = 1.0 if _mentioned(scan, hints) else 0.0
    table = scan.details.get("table")
    if table and hints.dismisses(Path(str(table)).name):
        mention = -2.0  # the description says this file is not the labels
    column = 0.05 if mention > 0 and _column_named(scan, hints) else 0.0
    reading.score = round(0.45 * reading.coverage + 0.25 * agree + 0.1 * fmt + 0.1 * mention
                          + 0.1 * prior + column, 4)


def read_all(root: Path, description: str = "", declared_tasks: list[str] | None = None
             ) -> tuple[list[Reading], Inventory]:
    """Every reader's reading of ``root`` (refused ones with their reason), best first."""
    inv = take_inventory(root)
    hints = read_hints(description)
    hints.shown = set(recognised(root))
    top_dirs, top_files = entries(root)
    readings: list[Reading] = []
    for name, reader in READERS:
        try:
            scan = reader(root, top_dirs, top_files, description)
        except ScanError as exc:
            readings.append(Reading(name, None, refused=str(exc)))
            continue
        if scan is None:
            continue
        ungroup_shared_folders(scan)
        reading = Reading(name, scan)
        reading.refused = _degenerate(scan) or _attribute_label(scan, hints)
        if not reading.refused:
            _score(reading, hints, inv, PRIOR[name], set(declared_tasks or []))
        readings.append(reading)
    from core.datasets.records.reading import read_targets
    for scan in read_targets(root, description):
        ungroup_shared_folders(scan)
        reading = Reading(f"records:{scan.details['target']}", scan)
        reading.refused = _degenerate(scan)
        recipe = scan.details.get("recipe") or {}
        label_named = recipe.get("role") in ("findings", "labels", "one_hot") or (
            recipe.get("role") == "class" and LABEL_FIELD.search(str(recipe.get("name"))))
        prior = LABEL_TABLE_PRIOR if scan.details.get("preferred") else \
            RECORDS_PRIOR + 0.25 * bool(label_named)
        if not reading.refused:
            _score(reading, hints, inv, prior, set(declared_tasks or []))
        readings.append(reading)
    _same_target(readings)
    _corroborated(readings)
    readings.sort(key=lambda r: (bool(r.refused) or r.scan is None, -r.score))
    return readings, inv


CORROBORATED = 0.1   # two independent sources giving one partition: worth a mention


def _partition(scan: ScanResult) -> dict[str, str] | None:
    """image -> label of a single-label diagnosis reading (None for any other reading)."""
    if any(s.labels is not None for s in scan.samples) or \
            not all(s.label in scan.classes for s in scan.samples):
        return None   # not a single-label class reading (boxes, masks, reports, multi-label)
    return {str(s.image): s.label for s in scan.samples if isinstance(s.image, str)}


def _corroborated(readings: list[Reading]) -> None:
    """Two diagnosis readings from different sources (class folders and a table's column) that
    split the same images the same way (one-to-one labels, e.g. ``Fractured/`` and
    ``fractured = 1``) confirm each other: both score a little higher, so that an unrelated
    field of the table (``hardware``) is a second target rather than a close call."""
    live = [r for r in readings if r.scan is not None and not r.refused]
    parts = {id(r): _partition(r.scan) for r in live}
    lifted: set[int] = set()
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            pa, pb = parts[id(a)], parts[id(b)]
            if not pa or not pb or a.reader.split("::")[0] == b.reader.split("::")[0] or \
                    len(pa) < 8 or pa.keys() != pb.keys():
                continue
            pairs = {(pa[k], pb[k]) for k in pa}
            if len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs}) >= 2:
                for r in (a, b):
                    if id(r) not in lifted:
                        r.score = round(r.score + CORROBORATED, 4)
                        lifted.add(id(r))
                        r.scan.details["corroborated_by"] = (b if r is a else a).reader


def _label_key(scan: ScanResult) -> tuple[str, str] | None:
    d = scan.details
    table, column = d.get("table"), d.get("label_column")
    return (os.path.realpath(str(table)), str(column)) if table and column else None


def _same_target(readings: list[Reading]) -> None:
    """A reader of its own and the records engine reading one table's one label column are
    one target: when they take the same images the reader is kept (its details are richer);
    when they do not (the records engine read each exam's sequences as one sample's channels),
    the records reading is kept. The other is listed as refused, saying why."""
    live = [r for r in readings if r.scan is not None and not r.refused]
    records = [r for r in live if r.reader.startswith("records:")]
    for old in (r for r in live if not r.reader.startswith("records:")):
        key = _label_key(old.scan)
        twin = next((r for r in records if not r.refused and key and
                     _label_key(r.scan) == key), None)
        if twin is None:
            continue
        same = len(twin.scan.samples) == len(old.scan.samples)
        dropped, kept = (twin, old) if same else (old, twin)
        dropped.refused = (f"reads the same table and label column as {kept.reader}"
                           + ("" if same else f", taking {len(dropped.scan.samples)} samples "
                              f"where it takes {len(kept.scan.samples)}"))


def _example_rows(scan: ScanResult, root: str, count: int = 3) -> list[str]:
    rows = []
    for s in scan.samples[:count]:
        image = s.image[0] if isinstance(s.image, list) else s.image
        rel = os.path.relpath(str(image).split("::")[0], root) + (
            "::" + str(image).split("::", 1)[1] if "::" in str(image) else "")
        if isinstance(s.extra.get("label_path"), list):   # one mask file per structure
            files = s.extra["label_path"]
            what = (f"{len(files)} structure masks " +
                    ", ".join(os.path.relpath(f, root) for f in files[:2]) +
                    (", ..." if len(files) > 2 else ""))
        elif s.extra.get("label_path"):
            what = "mask " + os.path.relpath(s.extra["label_path"], root)
        elif "boxes" in s.extra:
            what = f"{len(s.extra['boxes'])} box(es) {', '.join(sorted(set(s.extra['labels'])))}"
        elif "findings" in s.extra:
            what = "report: " + (s.extra.get("findings") or s.extra.get("impression") or "")[:60]
        else:
            what = ", ".join(s.label_list()) or "(no label)"
        rows.append(f"{rel} -> {what}")
    return rows


def source_of(reading: Reading) -> str:
    """Where the reading's annotations come from, in words."""
    d = reading.scan.details if reading.scan else {}
    if d.get("source"):
        return str(d["source"])
    if d.get("table"):
        sheet = f" (sheet {d['sheet']!r})" if d.get("sheet") else ""
        return f"{Path(str(d['table'])).name}{sheet}"
    if d.get("mask_dir"):
        return f"masks in {Path(d['mask_dir']).name}/"
    if d.get("variant"):
        return f"masks ({d['variant'].replace('_', ' ')})"
    if reading.scan and reading.scan.layout == "class_folders":
        return "class folders"
    if reading.scan and reading.scan.layout == "filename_labels":
        return "words in the file names"
    return reading.reader.replace("_", " ")


def summarise(readings: list[Reading], root: str) -> list[dict]:
    """The readings as the Datasets page and the CLI list them (numbered from 1)."""
    out = []
    for number, r in enumerate(readings, start=1):
        item = {"number": number, "reader": r.reader, "refused": r.refused}
        if r.scan is not None:
            item.update(task=r.task, layout=r.scan.layout, source=source_of(r),
                        classes=r.scan.classes[:12], num_samples=len(r.scan.samples),
                        coverage=round(r.coverage, 3), score=r.score,
                        patient_key=r.scan.group_source,
                        split="kept from the dataset" if r.scan.existing_split else "made here",
                        examples=_example_rows(r.scan, root))
        out.append(item)
    return out


def choose(readings: list[Reading], root: Path, choice: str | int | None = None
           ) -> ScanResult:
    """The chosen reading's ScanResult, its interpretation facts in ``details``."""
    viable = [r for r in readings if r.scan is not None and not r.refused]
    if not viable:
        errors = [r.refused for r in readings if r.scan is None and r.refused]
        if errors:
            raise ScanError(errors[0])
        refused = "; ".join(f"{r.reader}: {r.refused}" for r in readings if r.refused)
        raise ScanError(f"could not read the labels of {root}: "
                        f"{refused or 'no image files with annotations were found'}. Put each "
                        "class's images in a folder named after the class, add a label table "
                        "(CSV/XLSX with an image column and a label column), or say in the "
                        "description where the labels are (file, sheet, column, suffix, format)")
    picked, asked = viable[0], False
    if choice not in (None, ""):
        asked = True
        if isinstance(choice, int) or str(choice).isdigit():
            number = int(choice)
            if not 1 <= number <= len(readings) or readings[number - 1] not in viable:
                raise ScanError(f"interpretation {number} is not one of the acceptable "
                                f"readings (1..{len(readings)}, refused ones excluded)")
            picked = readings[number - 1]
        else:
            found = [r for r in viable if r.reader == choice]
            if not found:
                raise ScanError(f"the reading {choice!r} chosen for this dataset no longer fits "
                                f"the folder {root}; register it again and choose a reading")
            picked = found[0]
    best = viable[0]
    runner = next((r for r in viable[1:]   # a reading that confirms the best is no rival
                   if r.scan.details.get("corroborated_by") != best.reader), None)
    why = ""
    if best.coverage < LOW_COVERAGE:
        why = (f"the best reading explains only {best.coverage:.0%} of the files")
    elif runner and best.score - runner.score < CLOSE and not is_target_pair(best, runner) \
            and (runner.task != best.task or source_of(runner) != source_of(best)):
        why = (f"two readings are close: {source_of(best)} ({best.task}) and "
               f"{source_of(runner)} ({runner.task})")
    scan = picked.scan
    scan.details["interpretation"] = {
        "reader": picked.reader, "score": picked.score, "coverage": round(picked.coverage, 3),
        "source": source_of(picked), "ambiguous": bool(why) and not asked, "why": why,
        "chosen_by": "user" if asked else "score"}
    scan.details["interpretations"] = summarise(readings[:6], str(root))
    scan.details["targets"] = distinct_targets(picked, viable, str(root), _example_rows,
                                               source_of)
    return scan
