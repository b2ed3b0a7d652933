"""YOLO detection (layout ``box_table``, ``details["format"] == "yolo_txt"``): one text file per
image with one line per box, ``class cx cy w h`` normalised to the image size (a polygon line,
``class x1 y1 x2 y2 …``, gives its bounding box), in a ``labels/`` tree parallel to ``images/``
(``images/train/x.png`` ↔ ``labels/train/x.txt``) or beside the image. An empty file, or no file
for an image of a split that has label files, means "no object" (a negative).

Class names come from ``data.yaml`` / ``dataset.yaml`` (``names``: a list or {index: name}),
else ``classes.txt`` / ``obj.names`` (one per line), else the datacard description
("classes: 0 nodule, 1 mass"), else ``class_<index>``. Splits come from the folder names
(``train``, ``val``, ``test``). Boxes are converted to pixel corners ``[x0, y0, x1, y1]`` with
the image size read from its header.

May import: core.datasets.layouts.boxes, .common, .inventory, .mask_labels, .types.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from core.datasets.layouts.boxes import boxes_result
from core.datasets.layouts.common import split_of_path
from core.datasets.layouts import links
from core.datasets.layouts.inventory import stem_of_name, take_inventory
from core.datasets.layouts.mask_labels import labels_from_description
from core.datasets.layouts.types import all_images

NUMBER_LINE = re.compile(r"^\s*\d+(?:\s+-?\d*\.?\d+(?:e-?\d+)?){4,}\s*$", re.I)
MAX_LABEL_BYTES = 1_000_000


def _class_names(root: Path, description: str) -> tuple[dict[int, str], str]:
    for path in links.kept(sorted(root.glob("*.y*ml")) + sorted(root.glob("*/*.y*ml"))):
        try:
            data = yaml.safe_load(path.read_text(errors="replace")[:1_000_000])
        except (OSError, yaml.YAMLError):
            continue
        names = data.get("names") if isinstance(data, dict) else None
        if isinstance(names, list):
            return {i: str(n) for i, n in enumerate(names)}, path.name
        if isinstance(names, dict):
            try:
                return {int(k): str(v) for k, v in names.items()}, path.name
            except (TypeError, ValueError):
                continue
    for name in ("classes.txt", "obj.names", "classes.names"):
        for path in links.kept([root / name, *sorted(root.glob(f"*/{name}"))]):
            if path.is_file():
                lines = [x.strip() for x in path.read_text(errors="replace").splitlines()]
                return {i: n for i, n in enumerate(x for x in lines if x)}, path.name
    named = labels_from_description(description)
    if named:  # "classes: 1 nodule, 2 mass" names values from 1; YOLO counts from 0
        return {i: n for i, n in enumerate(named)}, "description"
    return {}, ""


def _label_file(image: Path, root: Path, texts: set[Path]) -> Path | None:
    """The label text of ``image``: in the parallel labels/ tree, or beside it."""
    stem = stem_of_name(image.name)
    parts = list(image.relative_to(root).parent.parts)
    for i, part in enumerate(parts):
        if part.lower() in ("images", "image", "imgs", "img"):
            swapped = parts[:i] + ["labels"] + parts[i + 1:]
            candidate = root.joinpath(*swapped, stem + ".txt")
            if candidate in texts:
                return candidate
    beside = image.with_name(stem + ".txt")
    return beside if beside in texts else None


def _read_lines(path: Path) -> list[list[float]] | None:
    """The numeric rows of a YOLO label file, or None when it is not one (prose, a report)."""
    try:
        if path.stat().st_size > MAX_LABEL_BYTES:
            return None
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return None
    if not all(NUMBER_LINE.match(x) for x in lines):
        return None
    return [[float(v) for v in x.split()] for x in lines]


def _image_size(path: Path) -> tuple[int, int] | None:
    from PIL import Image  # header only: the pixels are not decoded
    try:
        with Image.open(path) as img:
            return img.size
    except (OSError, ValueError):
        return None


def scan_yolo(root: Path, top_dirs, top_files, description: str = ""):
    """ScanResult for YOLO label files, or None."""
    inv = take_inventory(root)
    texts = set(inv.files("text"))
    if not texts:
        return None
    images = [p for p in all_images(root) if p.suffix.lower() in
              (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")]
    pairs = [(img, _label_file(img, root, texts)) for img in images]
    labelled = [(img, txt) for img, txt in pairs if txt is not None]
    if len(labelled) < max(2, 0.3 * len(images)):
        return None
    names, names_source = _class_names(root, description)
    with_files = {img.parent for img, _ in labelled}
    per_image: dict[Path, dict] = {}
    skipped: list[str] = []
    numeric = 0
    for img, txt in pairs:
        if txt is None:
            if img.parent in with_files:  # YOLO: no label file = background image
                per_image[img] = {"boxes": [], "labels": [], "split": split_of_path(img, root)}
            continue
        rows = _read_lines(txt)
        if rows is None:
            continue
        numeric += 1
        size = _image_size(img) if rows else (0, 0)
        if size is None:
            skipped.append(f"{img}: not a readable image; its labels in {txt.name} not used")
            continue
        entry = per_image.setdefault(img, {"boxes": [], "labels": [],
                                           "split": split_of_path(img, root)})
        width, height = size
        for row in rows:
            cls, coords = int(row[0]), row[1:]
            if len(coords) == 4:
                cx, cy, w, h = coords
                x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
            else:
                xs, ys = coords[0::2], coords[1::2]
                x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
            box = [max(0.0, x0) * width, max(0.0, y0) * height, min(1.0, x1) * width,
                   min(1.0, y1) * height]
            if box[2] <= box[0] or box[3] <= box[1]:
                skipped.append(f"{txt}: a box of class {cls} has no extent; dropped")
                continue
            entry["boxes"].append([round(v, 2) for v in box])
            entry["labels"].append(names.get(cls, f"class_{cls}"))
    if numeric < max(2, 0.5 * len(labelled)) or not per_image:
        return None  # the texts are not YOLO labels (reports, notes)
    label_dir = labelled[0][1].parent
    details = {"format": "yolo_txt", "table": str(labelled[0][1]), "three_d": False,
               "class_names_from": names_source or "class indices (no data.yaml)",
               "annotation_dir": label_dir.name,
               "source": f"YOLO label files in {label_dir.relative_to(root)}/"}
    return boxes_result(root, {"images": per_image, "details": details}, images, skipped)
