"""Table cells that hold structured values as text: a list of box dicts written by Python or
as JSON (SIIM-FISABIO-RSNA's ``"[{'x': 789.3, 'y': 582.9, 'width': 1026.6, 'height': 1917.3}]"``)
becomes a list of COCO-like boxes, so that the field reads as annotations. Parsed with
``ast.literal_eval`` only: no code runs.

May import: nothing of the project.
"""
from __future__ import annotations

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
