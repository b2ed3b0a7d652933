"""Box tables in the encodings public detection datasets use besides pixel columns
(core.datasets.layouts.boxes), and what they share with it.

* **A box in one cell** (DeepLesion's ``DL_info.csv``: ``Bounding_boxes`` = ``"x1, y1, x2,
  y2"``): a column named like a box (box, bbox, roi, rect) whose cells hold 4 numbers (3D: 6),
  several boxes separated by ``;`` or ``|`` or written as ``[[..], [..]]``; corners unless the
  column says sizes (``xywh``, ``width``) or the numbers cannot be corners. Other columns of
  numbers (RECIST end points, diameters) are not boxes. One row per box; an empty cell marks a
  negative image.
* **File names joined from a folder and a file** (``000001_01_01_109.png`` naming
  ``Images_png/000001_01_01/109.png``): a name that matches no image is tried with one of its
  last ``_`` joins made a folder separator (``find_image``). The unlisted slices of a series
  folder whose key slice the table names are that slice's context (``extra["other_files"]``).
* **Coded split columns**: a column whose name lists the splits (``Train_Val_Test``) holding
  codes 1, 2, 3 (or 0, 1, 2) in that order, or a split column of split names.
* **The class of the boxes**: a class column, else the one finding the description names
  (``described_finding``: "lung nodule CT scans" -> nodule), else ``lesion``.

World-millimetre boxes with a diameter (LUNA16) are read by core.datasets.layouts.box_world.

May import: core.datasets.layouts (common, label_table_columns, tables, types).
"""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.common import SPLIT_COLUMNS, FileMatcher, split_cell, split_of_name
from core.datasets.layouts.tables import read_table
from core.datasets.layouts.types import IMAGE_SUFFIXES, image_suffix

LABEL_COLUMNS = ("label", "class", "finding", "category", "class_name", "label_name")
BOX_COLUMN = re.compile(r"box|roi\b|rect", re.I)
SIZED_NAME = re.compile(r"xywh|width|\bw\b|size", re.I)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
SPLIT_WORDS = re.compile(r"train(?:ing)?|val(?:id(?:ation)?)?|dev|test(?:ing)?", re.I)
# findings a description may name for the boxes (singular names); more than one: none is used

# --------------------------------------------------------------------------- shared
def find_image(matcher: FileMatcher, value: object) -> Path | None:
    """The image a cell names; a file name that names none is tried as ``<folder>/<file>``
    with one of its ``_`` (from the last) as the separator (DeepLesion's ``000001_01_01_109.png``
    is ``000001_01_01/109.png``)."""
    found = matcher.find(value)
    text = str(value or "").strip()
    if found is not None or "_" not in text or "/" in text or "\\" in text or \
            image_suffix(text) not in IMAGE_SUFFIXES:
        return found
    cut = len(text)
    for _ in range(4):
        cut = text.rfind("_", 0, cut)
        if cut <= 0:
            break
        joined = text[:cut] + "/" + text[cut + 1:]
        found = matcher.find(joined)   # it must be that folder's file, not any file so named
        if found is not None and found.as_posix().lower().endswith("/" + joined.lower()):
            return found
    return None


def coded_split(columns: list[str], rows: list[dict]) -> tuple[str | None, dict[str, str]]:
    """(split column, {cell: train/val/test}): a split column of split names, or a column whose
    name lists the splits in order (``Train_Val_Test``) holding codes 1.. (or 0..)."""
    lower = {c.strip().lower(): c for c in columns}
    probe = rows[:5000]
    for name in SPLIT_COLUMNS:
        if name in lower:
            values = {str(r.get(lower[name], "")).strip() for r in probe}
            mapping = {v: split_cell(v) for v in values if split_cell(v)}
            if mapping:
                return lower[name], mapping
    for column in columns:
        words = [split_of_name(w) for w in SPLIT_WORDS.findall(column)]
        if len(words) < 2 or len(set(words)) != len(words) or "" in words:
            continue
        values = {str(r.get(column, "")).strip() for r in probe} - {""}
        if values and all(split_cell(v) for v in values):
            return column, {v: split_cell(v) for v in values}
        if not values or not all(v.lstrip("-").isdigit() for v in values):
            continue
        codes = sorted(int(v) for v in values)
        base = 1 if codes[0] >= 1 else 0
        if codes[0] >= 0 and codes[-1] - base < len(words):
            return column, {v: words[int(v) - base] for v in values}
    return None, {}


PATIENT_COLUMN = re.compile(r"patient|subject|participant|\bpid\b|case", re.I)
NOT_PATIENT_KEY = re.compile(r"age|sex|gender|weight|height|birth|position|name|size", re.I)


def group_column(columns: list[str], rows: list[dict], exclude: set[str]) -> str | None:
    """The table's patient column (``Patient_index``), if it has one: named like a patient
    key, not a fact about the patient, with more than one value."""
    probe = rows[:3000]
    named = [c for c in columns if c not in exclude and PATIENT_COLUMN.search(c)
             and not NOT_PATIENT_KEY.search(c)
             and len({str(r.get(c, "")) for r in probe}) > 1]
    named.sort(key=lambda c: not re.search(r"id\b|key|no\b|number|code|index", c, re.I))
    return named[0] if named else None


def label_column(columns: list[str]) -> str | None:
    lower = {c.strip().lower(): c for c in columns}
    return next((lower[c] for c in LABEL_COLUMNS if c in lower), None)


# --------------------------------------------------------------------------- one-cell boxes
def _cell_groups(cell: str) -> list[list[float]] | None:
    """The boxes a cell holds as lists of numbers ([] for an empty cell), None if unreadable."""
    text = str(cell or "").strip()
    if not text or text.lower() in ("nan", "none", "[]"):
        return []
    if text.count("[") > 1:
        parts = re.findall(r"\[([^\[\]]*)\]", text)
    else:
        parts = [p for p in re.split(r"\s*[;|]\s*", text.strip("[]() ")) if p.strip()]
    groups = [[float(v) for v in NUMBER.findall(p)] for p in parts]
    if not groups or any(len(g) not in (4, 6) for g in groups) or \
            len({len(g) for g in groups}) > 1:
        return None
    return groups


def _box_cell_column(columns: list[str], rows: list[dict]) -> tuple[str, bool] | None:
    """(column, sized) of a column of one-cell boxes, or None."""
    probe = rows[:2000]
    for column in columns:
        if not BOX_COLUMN.search(column):
            continue
        cells = [str(r.get(column, "") or "").strip() for r in probe]
        filled = [c for c in cells if c]
        parsed = [_cell_groups(c) for c in filled]
        good = [g for g in parsed if g]
        if not filled or len(good) < 0.8 * len(filled):
            continue
        boxes = [b for g in good for b in g]
        half = len(boxes[0]) // 2
        corners = sum(all(b[i + half] > b[i] for i in range(half)) for b in boxes)
        sized = bool(SIZED_NAME.search(column)) or corners < 0.95 * len(boxes)
        return column, sized
    return None


def _with_context(per_image: dict, images: list[Path], joined: int) -> int:
    """Unlisted images in the series folders the table names slices of (by joined names) are
    those slices' context: ``other_files`` of the listed slice of their folder."""
    if not joined:
        return 0
    listed_in: dict[Path, list[Path]] = {}
    for path in per_image:
        listed_in.setdefault(path.parent, []).append(path)
    count = 0
    for image in images:
        owners = listed_in.get(image.parent)
        if owners and image not in per_image:
            per_image[owners[0]].setdefault("other_files", []).append(str(image))
            count += 1
    return count


def cell_boxes(table: Path, matcher: FileMatcher, images: list[Path],
               skipped: list[str]) -> dict | None:
    """The boxes of a table with one-cell boxes (see the module docstring), in the shape
    core.datasets.layouts.boxes.boxes_result takes, or None."""
    try:
        columns, rows = read_table(table)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = _box_cell_column(columns, rows) if rows else None
    if found is None:
        return None
    box_col, sized = found
    probe = rows[:2000]
    hits = {c: sum(find_image(matcher, r.get(c)) is not None for r in probe)
            for c in columns if c != box_col}
    image_col = max(hits, key=lambda c: hits[c]) if hits else None
    if image_col is None or hits[image_col] < 0.8 * len(probe):
        return None
    label_col = label_column(columns)
    split_col, split_of = coded_split(columns, rows)
    group_col = group_column(columns, rows, {image_col, box_col, split_col or ""})
    file_split = split_of_name(table.name)
    per_image: dict[Path, dict] = {}
    unmatched = joined = 0
    for number, row in enumerate(rows, start=2):
        path = find_image(matcher, row.get(image_col))
        if path is None:
            unmatched += 1
            continue
        joined += matcher.find(row.get(image_col)) is None
        split = split_of.get(str(row.get(split_col, "")).strip(), "") if split_col else ""
        entry = per_image.setdefault(path, {"boxes": [], "labels": [], "split": ""})
        entry["split"] = entry["split"] or split or file_split
        if group_col and str(row.get(group_col) or "").strip():
            entry.setdefault("group", str(row[group_col]).strip())
        groups = _cell_groups(row.get(box_col, ""))
        if groups is None:
            skipped.append(f"{table.name} line {number}: {box_col} {row.get(box_col)!r} is no "
                           "box (4 or 6 numbers); row ignored")
            continue
        for values in groups:
            half = len(values) // 2
            box = values[:half] + ([s + e for s, e in zip(values[:half], values[half:])]
                                   if sized else values[half:])
            if any(box[i + half] <= box[i] for i in range(half)):
                skipped.append(f"{table.name} line {number}: box {values} has no extent; "
                               "dropped")
                continue
            entry["boxes"].append([round(v, 4) for v in box])
            entry["labels"].append(str(row.get(label_col) or "lesion").strip() if label_col
                                   else "lesion")
    if not any(e["boxes"] for e in per_image.values()):
        return None
    if unmatched:
        skipped.append(f"{unmatched} rows of {table.name} name no existing image")
    context = _with_context(per_image, images, joined)
    three_d = any(len(b) == 6 for e in per_image.values() for b in e["boxes"])
    details = {"format": "csv_box_cell", "table": str(table), "image_column": image_col,
               "box_column": box_col, "box_form": "x, y, w, h" if sized else "x1, y1, x2, y2",
               "three_d": three_d, "label_column": label_col, "split_column": split_col,
               "patient_column": group_col}
    if joined:
        details["joined_names"] = (f"{joined} names are <folder>_<file> "
                                   "(the last part the file in the folder the rest names)")
    if context:
        details["context_slices"] = (f"{context} unlisted slices sit in the series folders of "
                                     "listed key slices: their context, not samples")
    return {"images": per_image, "details": details}
