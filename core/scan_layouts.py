"""Layouts beyond class folders and label tables, recognised deterministically:

* ``image_mask_folders`` (segmentation): sibling folders of images and masks (images/masks,
  img/label, imagesTr/labelsTr, Training/{img,label}, segmentation_masks), paired by name;
  several files per case (``case_001_t1``, ``case_001_t2``, nnU-Net's ``_0000``) are channels of
  one image, in sorted order. Label names from ``labels.json`` (a list: position i is mask value
  i+1, or a {value: name} object), a Decathlon/nnU-Net ``dataset.json``, else ``label_1..``.
* ``box_table`` (detection): a CSV with an image column and box columns (x, y, w, h[, z, d]) or
  corners (x0, y0, x1, y1[, z0, z1]); a row without a box marks a negative image.
* ``report_table`` / ``report_json`` (report generation): a CSV with findings and impression
  columns and an image column, or JSON lists of {image, finding(s), impression}; files named
  ``*train*`` / ``*test*`` keep their split.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from core.scan_tables import _file_keys, _read

IMAGE_DIRS = ("images", "imagestr", "img", "image", "imgs", "volumes")
MASK_DIRS = ("masks", "labelstr", "label", "labels", "mask", "segmentation_masks",
             "segmentations", "seg", "gt")
CHANNEL_SUFFIX = re.compile(r"[_-](?:\d{4}|t1c?e?|t1gd|t2|flair|adc|dwi|pd|ct|pet|ch\d+)$", re.I)


def _stem(path: Path) -> str:
    return path.name.split(".")[0]


def _find_pair(root: Path) -> tuple[Path, Path] | None:
    for parent in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
        subdirs = {p.name.lower(): p for p in parent.iterdir() if p.is_dir()}
        image_dir = next((subdirs[n] for n in IMAGE_DIRS if n in subdirs), None)
        mask_dir = next((subdirs[n] for n in MASK_DIRS if n in subdirs), None)
        if image_dir and mask_dir and image_dir != mask_dir:
            return image_dir, mask_dir
    return None


def label_names(root: Path, max_value: int | None = None) -> list[str]:
    for path in [root / "labels.json", *sorted(root.glob("*/labels.json")), root / "dataset.json"]:
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if path.name == "dataset.json" and isinstance(data, dict):
            data = data.get("labels", {})
            if all(isinstance(v, (int, str)) and str(v).isdigit() for v in data.values()):
                data = {str(v): k for k, v in data.items()}  # nnU-Net v2: {name: value}
        if isinstance(data, dict):
            values = {int(k): v for k, v in data.items() if str(k).isdigit() and int(k) > 0}
            return [values[v] for v in sorted(values)]
        if isinstance(data, list):
            return [str(x) for x in data]
    return [f"label_{i}" for i in range(1, (max_value or 1) + 1)]


def scan_image_masks(root: Path, images: list[Path]) -> dict | None:
    pair = _find_pair(root)
    if pair is None:
        return None
    image_dir, mask_dir = pair
    masks = {_stem(p): p for p in images if mask_dir in p.parents}
    cases: dict[str, list[Path]] = {}
    unpaired = []
    for path in sorted(p for p in images if image_dir in p.parents):
        stem = _stem(path)
        key = stem if stem in masks else CHANNEL_SUFFIX.sub("", stem)
        key = re.sub(r"_img$|_image$", "", key) if key not in masks else key
        if key in masks:
            cases.setdefault(key, []).append(path)
        else:
            unpaired.append(path)
    if not cases:
        return None
    return {"image_dir": str(image_dir), "mask_dir": str(mask_dir), "labels": label_names(root),
            "cases": [(key, files, masks[key]) for key, files in sorted(cases.items())],
            "unpaired": [str(p) for p in unpaired]}


BOX_SETS = [("x", "y", "w", "h"), ("x0", "y0", "x1", "y1"), ("xmin", "ymin", "xmax", "ymax")]


def scan_box_table(root: Path, images: list[Path]) -> dict | None:
    keys = _file_keys(images, root)
    for table in sorted(root.glob("*.csv")):
        columns, rows = _read(table)
        lower = {c.lower(): c for c in columns}
        box = next((b for b in BOX_SETS if all(k in lower for k in b)), None)
        if box is None or not rows:
            continue
        image_col = max(columns, key=lambda c: sum(str(r.get(c, "")).lower() in keys for r in rows))
        if sum(str(r.get(image_col, "")).lower() in keys for r in rows) < 0.8 * len(rows):
            continue
        three_d = "z" in lower or "z0" in lower or "zmin" in lower
        label_col = next((lower[c] for c in ("label", "class", "finding", "category") if c in lower),
                         None)
        per_image: dict[Path, dict] = {}
        for r in rows:
            path = keys.get(str(r.get(image_col, "")).lower())
            if path is None:
                continue
            entry = per_image.setdefault(path, {"boxes": [], "labels": []})
            raw = [r.get(lower[k], "") for k in box]
            if any(str(v).strip() == "" for v in raw):
                continue  # a negative image
            a, b, c, d = (float(v) for v in raw)
            if box[2] == "w":
                corners = [a, b, a + c, b + d]
                if three_d:
                    z, depth = float(r[lower["z"]]), float(r[lower["d"]])
                    corners = [a, b, z, a + c, b + d, z + depth]
            else:
                corners = [a, b, c, d]
                if three_d:
                    corners = [a, b, float(r[lower.get("z0", "zmin")]), c, d,
                               float(r[lower.get("z1", "zmax")])]
            entry["boxes"].append(corners)
            entry["labels"].append(str(r.get(label_col, "lesion") or "lesion") if label_col
                                   else "lesion")
        return {"table": str(table), "image_column": image_col, "three_d": three_d,
                "images": per_image}
    return None


def _report_text(row: dict, *names: str) -> str:
    lower = {k.lower(): v for k, v in row.items()}
    return next((str(lower[n]).strip() for n in names if lower.get(n)), "")


def scan_reports(root: Path, images: list[Path]) -> dict | None:
    keys = _file_keys(images, root)
    entries = []
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not (isinstance(data, list) and data and isinstance(data[0], dict)):
            continue
        split = "test" if "test" in path.stem.lower() else "train" if "train" in path.stem.lower() \
            else ""
        for row in data:
            image = _report_text(row, "image_path", "image", "image_id", "filename", "file")
            found = keys.get(image.lower()) or keys.get(Path(image).name.lower())
            if found and (_report_text(row, "findings", "finding") or
                          _report_text(row, "impression")):
                entries.append((found, _report_text(row, "findings", "finding"),
                                _report_text(row, "impression"), split))
    for path in sorted(root.glob("*.csv")):
        columns, rows = _read(path)
        lower = {c.lower() for c in columns}
        if not ({"findings", "finding"} & lower and "impression" in lower):
            continue
        for row in rows:
            image = next((str(v).strip() for v in row.values() if str(v).strip().lower() in keys),
                         "")
            if image:
                entries.append((keys[image.lower()], _report_text(row, "findings", "finding"),
                                _report_text(row, "impression"), ""))
    return {"entries": entries} if entries else None
