"""Table cells that hold shapes as text become lists of COCO-like boxes, so that the field
reads as annotations:

* a list of box dicts written by Python or as JSON (SIIM-FISABIO-RSNA's
  ``"[{'x': 789.3, 'y': 582.9, 'width': 1026.6, 'height': 1917.3}]"``), parsed with
  ``ast.literal_eval`` only (no code runs);
* shapes as ``;``-separated runs of numbers (object-CXR's ``"1 39 36 47 44;2 55 26 53 28 50
  30"``: a type code — rectangle, ellipse, polygon — then corner or outline points): each
  shape's box is the bounding box of its points, a leading code (an odd count) left out.

May import: nothing of the project.
"""
from __future__ import annotations

import re

BOX_KEYS = (("x", "y", "width", "height"), ("x", "y", "w", "h"),
            ("xmin", "ymin", "xmax", "ymax"), ("x1", "y1", "x2", "y2"))
MAX_CELL = 100_000


def _as_box(item: dict) -> dict | None:
    """A box dict in COCO's form (``bbox`` x, y, w, h; its class kept as ``category``)."""
    lower = {str(k).lower(): v for k, v in item.items()}
    for keys in BOX_KEYS:
        if all(k in lower for k in keys):
            try:
                a, b, c, d = (float(lower[k]) for k in keys)
            except (TypeError, ValueError):
                return None
            w, h = (c, d) if keys[2] in ("width", "w") else (c - a, d - b)
            name = lower.get("label", lower.get("class", lower.get("category")))
            return {"bbox": [a, b, w, h], **({"category": str(name)} if name else {})}
    return None


def boxes_in_cells(rows: list[dict]) -> list[dict]:
    """Table cells holding a list of box dicts as Python or JSON text (SIIM-FISABIO-RSNA's
    ``"[{'x': 789.3, 'y': 582.9, 'width': 1026.6, 'height': 1917.3}]"``) become lists of
    COCO-like boxes, so that the field reads as annotations; literal_eval only (no code)."""
    import ast
    columns = {k for r in rows[:200] for k, v in r.items()
               if isinstance(v, str) and v.lstrip().startswith("[{")}
    for column in columns:
        for row in rows:
            cell = row.get(column)
            if not isinstance(cell, str) or not cell.strip():
                row[column] = [] if isinstance(cell, str) else cell
                continue
            if len(cell) > MAX_CELL or not cell.lstrip().startswith("[{"):
                continue
            try:
                items = ast.literal_eval(cell)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(items, list) and all(isinstance(i, dict) for i in items):
                boxes = [_as_box(i) for i in items]
                if all(boxes):
                    row[column] = boxes
    return rows


SHAPES = re.compile(r"^\s*-?\d+(?:\.\d+)?(?:[ ,]+-?\d+(?:\.\d+)?){3,}"
                    r"(?:\s*;\s*-?\d+(?:\.\d+)?(?:[ ,]+-?\d+(?:\.\d+)?){3,})*\s*;?\s*$")
MIN_SHAPE_ROWS = 0.5   # share of a column's rows that must hold shapes (half of them, at least)
RUN_NAME = re.compile(r"encoded|rle|run|pixels|mask|segment", re.I)


def _shape_boxes(cell: str) -> list[dict] | None:
    boxes = []
    for part in (p for p in cell.split(";") if p.strip()):
        numbers = [float(n) for n in re.split(r"[ ,]+", part.strip())]
        if len(numbers) % 2:
            numbers = numbers[1:]   # a leading shape code
        if len(numbers) < 4:
            return None
        xs, ys = numbers[0::2], numbers[1::2]
        w, h = max(xs) - min(xs), max(ys) - min(ys)
        if w <= 0 or h <= 0:
            return None
        boxes.append({"bbox": [min(xs), min(ys), w, h]})
    return boxes


def shapes_in_cells(rows: list[dict]) -> list[dict]:
    """Columns whose filled cells are mostly ``;``-separated number runs become box lists
    (empty cells: no box); other columns are left as they are."""
    if not rows:
        return rows
    for column in list(rows[0]):
        if RUN_NAME.search(str(column)):
            continue   # run-length masks (EncodedPixels) are numbers too: not shapes
        cells = [r.get(column) for r in rows[:500]]
        filled = [c for c in cells if isinstance(c, str) and c.strip()]
        if not filled or not all(SHAPES.match(c) for c in filled):
            continue
        several = sum(";" in c for c in filled)
        short = all(len(re.split(r"[ ,]+", p.strip())) <= 5 for c in filled
                    for p in c.split(";") if p.strip())
        if not (several >= 1 or short) or len(filled) < MIN_SHAPE_ROWS * len(cells) * 0.5:
            continue   # long even runs in one part each: run-length pairs, not shapes
        parsed = [(_shape_boxes(r[column]) if isinstance(r.get(column), str) and
                   r[column].strip() else []) for r in rows]
        if any(p is None for p in parsed):
            continue
        for row, boxes in zip(rows, parsed):
            row[column] = boxes
    return rows
