"""Detection layouts (layout ``box_table``, task ``anomaly_detection``); boxes are indexed in
corner format ``[x0, y0, x1, y1]`` (3D ``[x0, y0, z0, x1, y1, z1]``), pixel/voxel units.

* ``details["format"] == "csv"``: a CSV with an image column and one row per box: ``x, y, w, h``
  (3D ``+ z, d``), or corners ``x0, y0, x1, y1`` / ``x1, y1, x2, y2`` / ``xmin, ymin, xmax,
  ymax`` (3D with the matching z columns); a row with empty box cells marks a negative image; an
  optional label column (label, class, finding, category) and split column (split, subset).
* ``details["format"] == "coco_json"``: COCO-style JSON (``images`` with ``file_name``,
  ``annotations`` with ``bbox`` ``[x, y, w, h]`` and ``category_id``, ``categories``); several
  files (``train.json``, ``instances_val.json``) keep their split; an image without annotations
  is a negative.

Boxes with no extent (width or height <= 0) are dropped and reported in ``skipped``. Boxes
written in one cell, file names joined from a folder and a file, coded split columns
(core.datasets.layouts.box_encodings) and centres with a diameter in world millimetres
(core.datasets.layouts.box_world) are read too. Boxes without a class column are named by
another table that names exactly the boxed images, else by the one finding the description
names, else ``lesion``.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts.box_encodings import LABEL_COLUMNS, cell_boxes, find_image
from core.datasets.layouts.box_world import centre_boxes
from core.datasets.layouts.common import (SPLIT_COLUMNS, FileMatcher, build_result, candidate_files,
                                          common_parent, group_for, group_source, held_out_splits,
                                          load_json, split_cell, split_of_name)
from core.datasets.layouts.tables import described_finding, read_table
from core.datasets.layouts.types import Sample

# (x0, y0, x1 or w, y1 or h), z columns (start, end or depth), whether the third is a size
BOX_SETS = [(("x", "y", "w", "h"), ("z", "d"), True),
            (("x", "y", "width", "height"), ("z", "depth"), True),
            (("x0", "y0", "x1", "y1"), ("z0", "z1"), False),
            (("x1", "y1", "x2", "y2"), ("z1", "z2"), False),
            (("xmin", "ymin", "xmax", "ymax"), ("zmin", "zmax"), False)]



CLASS_WORD = re.compile(r"(?:^|[_\s])(?:type|class|category|label|finding|kind)s?$", re.I)


def _named_class_column(rows: list[dict], columns: list[str]) -> str | None:
    """A column named for the boxes' class (BCCD's ``cell_type``: RBC, WBC, Platelets): its
    name ends in type/class/category/label, its values are a few names, not numbers."""
    for column in columns:
        if not CLASS_WORD.search(column.strip()):
            continue
        values = {str(r.get(column, "")).strip() for r in rows[:5000]} - {""}
        if 1 <= len(values) <= 60 and not all(v.replace(".", "", 1).isdigit() for v in values):
            return column
    return None


def _corners(values: list[float], sized: bool) -> list[float]:
    """[x0, y0, (z0,) x1, y1, (z1)] from starts + sizes or from corners."""
    half = len(values) // 2
    starts, ends = values[:half], values[half:]
    if sized:
        ends = [s + e for s, e in zip(starts, ends)]
    return [round(v, 4) for v in starts + ends]


def _reorder(xy: list[float], z: list[float]) -> list[float]:
    """(x0, y0, x1, y1) + (z0, z1) -> (x0, y0, z0, x1, y1, z1)."""
    return [xy[0], xy[1], z[0], xy[2], xy[3], z[1]]


def _box_columns(columns: list[str]):
    lower = {c.strip().lower(): c for c in columns}
    for names, z_names, sized in BOX_SETS:
        if all(n in lower for n in names):
            three_d = all(n in lower for n in z_names)
            return ([lower[n] for n in names], [lower[n] for n in z_names] if three_d else [],
                    sized)
    return None


def _entry(per_image: dict, path: Path, split: str) -> dict:
    entry = per_image.setdefault(path, {"boxes": [], "labels": [], "split": split})
    if split and not entry["split"]:
        entry["split"] = split
    return entry


def _csv_boxes(table: Path, matcher: FileMatcher, skipped: list[str]) -> dict | None:
    try:
        columns, rows = read_table(table)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = _box_columns(columns)
    if found is None or not rows:
        return None
    box_cols, z_cols, sized = found
    hits = {c: sum(find_image(matcher, r.get(c)) is not None for r in rows[:2000])
            for c in columns}
    image_col = max(columns, key=lambda c: hits[c])
    if hits[image_col] < 0.8 * min(len(rows), 2000):
        return None
    lower = {c.strip().lower(): c for c in columns}
    label_col = next((lower[c] for c in LABEL_COLUMNS if c in lower), None) or \
        _named_class_column(rows, [c for c in columns if c != image_col and c not in box_cols])
    if label_col and {str(r.get(label_col, "")).strip() for r in rows[:5000]} <= \
            {"0", "1", "0.0", "1.0", ""}:
        label_col = None   # a 0/1 presence flag (NODE21's label), not the boxes' class name
    split_col = next((lower[c] for c in SPLIT_COLUMNS if c in lower), None)
    file_split = split_of_name(table.name)
    per_image: dict[Path, dict] = {}
    unmatched = 0
    for number, row in enumerate(rows, start=2):
        path = find_image(matcher, row.get(image_col))
        if path is None:
            unmatched += 1
            continue
        split = (split_cell(row.get(split_col, "")) if split_col else "") or file_split
        entry = _entry(per_image, path, split)
        raw = [row.get(c, "") for c in box_cols] + [row.get(c, "") for c in z_cols]
        if all(str(v or "").strip() == "" for v in raw):
            continue  # a negative image
        try:
            values = [float(v) for v in raw]
        except (TypeError, ValueError):
            skipped.append(f"{table.name} line {number}: box {raw} is not numeric; row ignored")
            continue
        xy = _corners(values[:4], sized)
        box = _reorder(xy, _corners(values[4:], sized)) if z_cols else xy
        half = len(box) // 2
        if any(box[i + half] <= box[i] for i in range(half)):
            skipped.append(f"{table.name} line {number}: box {raw} has no extent; dropped")
            continue
        entry["boxes"].append(box)
        entry["labels"].append(str(row.get(label_col) or "lesion").strip() if label_col
                               else "lesion")
    if unmatched:
        skipped.append(f"{unmatched} rows of {table.name} name no existing image")
    return {"images": per_image, "details": {"format": "csv", "table": str(table),
                                             "image_column": image_col, "three_d": bool(z_cols),
                                             "label_column": label_col,
                                             "split_column": split_col}}


def _name_boxes(found: dict, table: Path, tables: list[Path], matcher: FileMatcher) -> None:
    """Boxes with no class column: the class another table of the folder gives exactly the
    images with boxes (RSNA's ``stage_2_detailed_class_info.csv`` says 'Lung Opacity' for each
    boxed image and something else for the others) names them, instead of 'lesion'."""
    per_image = found["images"]
    boxed = {p for p, e in per_image.items() if e["boxes"]}
    if not boxed or len(boxed) == len(per_image):
        return
    for other in tables:
        if other == table:
            continue
        try:
            columns, rows = read_table(other)
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        rows = rows[:20_000]
        hits = {c: sum(find_image(matcher, r.get(c)) is not None for r in rows[:500])
                for c in columns}
        if not columns or max(hits.values()) < 0.8 * min(len(rows), 500):
            continue
        image_col = max(columns, key=lambda c: hits[c])
        for column in columns:
            if column == image_col:
                continue
            value_of = {}
            for r in rows:
                path = find_image(matcher, r.get(image_col))
                if path is not None and path in per_image:
                    value_of[path] = str(r.get(column) or "").strip()
            values = Counter(value_of.get(p, "") for p in boxed)
            name, count = values.most_common(1)[0]
            others = [value_of.get(p, "") for p in per_image if p not in boxed]
            if name and re.search(r"[A-Za-z]", name) and count >= 0.9 * len(boxed) and \
                    others.count(name) <= 0.1 * len(others) and len(set(value_of.values())) <= 10:
                for e in per_image.values():
                    e["labels"] = [name for _ in e["labels"]]
                found["details"]["class_from"] = f"{other.name} column {column!r}"
                return


def _name_from_description(found: dict, description: str) -> None:
    """Boxes no class column or other table names: the one finding the description names
    ("Lung nodule CT scans" -> nodule), else they stay 'lesion'."""
    name = described_finding(description)
    if name and "class_from" not in found["details"]:
        for e in found["images"].values():
            e["labels"] = [name for _ in e["labels"]]
        found["details"]["class_from"] = f"the description ({name!r})"


def _is_coco(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("images"), list) and \
        isinstance(data.get("annotations"), list) and \
        any(isinstance(a, dict) and "bbox" in a for a in data["annotations"][:50])


def _coco_boxes(files: list[tuple[Path, dict]], matcher: FileMatcher,
                skipped: list[str]) -> dict:
    per_image: dict[Path, dict] = {}
    categories: dict = {}
    for path, data in files:
        split = split_of_name(path.name)
        for cat in data.get("categories") or []:
            if isinstance(cat, dict) and "id" in cat:
                categories.setdefault(cat["id"], str(cat.get("name", cat["id"])))
        by_id: dict = {}
        for image in data["images"]:
            if not isinstance(image, dict):
                continue
            found = matcher.find(image.get("file_name") or image.get("path"))
            if found is None:
                skipped.append(f"{path.name}: image {image.get('file_name')!r} not found; "
                               "its boxes are ignored")
                continue
            by_id[image.get("id")] = _entry(per_image, found, split)
        for ann in data["annotations"]:
            entry = by_id.get(ann.get("image_id")) if isinstance(ann, dict) else None
            if entry is None:
                continue
            bbox = ann.get("bbox") or []
            try:
                values = [float(v) for v in bbox]
            except (TypeError, ValueError):
                values = []
            if len(values) not in (4, 6):
                skipped.append(f"{path.name}: annotation {ann.get('id')} has bbox {bbox!r}, not "
                               "[x, y, w, h]; dropped")
                continue
            box = _corners(values, True)  # [x, y, w, h] or [x, y, z, w, h, d]
            half = len(box) // 2
            if any(box[i + half] <= box[i] for i in range(half)):
                skipped.append(f"{path.name}: annotation {ann.get('id')} bbox {bbox} has no "
                               "extent; dropped")
                continue
            entry["boxes"].append(box)
            entry["labels"].append(categories.get(ann.get("category_id"),
                                                  str(ann.get("category_id", "lesion"))))
    three_d = any(len(b) == 6 for e in per_image.values() for b in e["boxes"])
    return {"images": per_image, "details": {
        "format": "coco_json", "table": str(files[0][0]),
        "annotation_files": [str(p) for p, _ in files], "image_column": "file_name",
        "three_d": three_d, "categories": [categories[k] for k in sorted(categories, key=str)]}}


def boxes_result(root: Path, found: dict, images: list[Path], skipped: list[str]):
    """The detection ScanResult of ``found`` = {"images": {path: {"boxes", "labels", "split"}},
    "details": {..., "table", "three_d"}} (shared by the CSV, COCO, VOC, YOLO and labelme
    readers)."""
    per_image = found["images"]
    if not per_image:
        return None
    mapping = held_out_splits([e["split"] for e in per_image.values()])
    samples, sources = [], []
    base = common_parent(list(per_image), root)
    keyed = found["details"].get("patient_column")
    for path, entry in sorted(per_image.items()):
        group, source = group_for(path, base)
        if entry.get("group"):   # a patient (or scan) column of the table
            group, source = entry["group"], f"table column {keyed!r}"
        sources.append(source)
        extra = {"boxes": entry["boxes"], "labels": entry["labels"]}
        if entry.get("other_files"):   # context slices of a key slice, read on purpose
            extra["other_files"] = entry["other_files"]
        samples.append(Sample(str(path), "positive" if entry["boxes"] else "negative", group,
                              mapping.get(entry["split"], entry["split"]), extra=extra))
    listed = set(per_image) | {Path(f) for e in per_image.values()
                               for f in e.get("other_files", ())}
    skipped.extend(f"{p}: not listed in {Path(found['details']['table']).name}" for p in images
                   if p not in listed)
    names = sorted({lbl for e in per_image.values() for lbl in e["labels"]})
    details = found["details"]
    return build_result(root, "box_table", "anomaly_detection", samples, len(images), details,
                        names, skipped[:5000], group_source(sources), three_d=details["three_d"]
                        or None)


def _tables_near_images(root: Path, images: list[Path], description: str) -> list[Path]:
    """The CSV files to try: candidate_files, then those in the folder holding every image and
    the folders above it up to ``root`` (``cxr_images/processed_data/metadata.csv`` beside
    ``cxr_images/processed_data/images/``)."""
    found = candidate_files(root, (".csv",), description)
    folder = common_parent(images[:5000], root)
    while folder != root and root in folder.parents:
        found += [p for p in sorted(folder.glob("*.csv")) if p.is_file() and p not in found]
        folder = folder.parent
    return found


def scan_boxes(root: Path, images: list[Path], description: str = ""):
    """ScanResult for a box CSV or COCO-style JSON (the first that matches), or None."""
    tables = _tables_near_images(root, images, description) if images else []
    if not images or not (tables or candidate_files(root, (".json",), description)):
        return None
    matcher = FileMatcher(images, root)
    for table in tables:
        skipped: list[str] = []
        found = _csv_boxes(table, matcher, skipped) or \
            cell_boxes(table, matcher, images, skipped) or \
            centre_boxes(table, matcher, images, root, skipped)
        if found:
            if not found["details"]["label_column"]:
                _name_boxes(found, table, tables, matcher)
                _name_from_description(found, description)
            return boxes_result(root, found, images, skipped)
    coco = []
    for path in candidate_files(root, (".json",), description):
        data = load_json(path)
        if _is_coco(data):
            coco.append((path, data))
    if coco:
        skipped = []
        return boxes_result(root, _coco_boxes(coco, matcher, skipped), images, skipped)
    return None
