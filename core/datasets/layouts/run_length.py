"""Run-length encoded masks (the Kaggle "EncodedPixels" family): parsing a cell, decoding it
onto an image grid, and telling from the data which of the encodings in use a table holds.

A cell is ``start length start length ...`` (``-1`` or empty: no finding). Encodings differ in

* **absolute vs relative** starts: absolute starts count pixels from the image origin (1-indexed
  by convention: Carvana, Airbus, UW-Madison, HuBMAP; 0-indexed when a start of 0 occurs);
  relative starts (SIIM-ACR's ``mask_functions.py``) count from the end of the previous run,
  the first from pixel 0. Absolute starts increase along a row and never fall inside the
  previous run; a row where they do is relative.
* **row- vs column-major** pixel order. The order whose decoded masks are compact blobs (fewer
  pieces, shorter outline per area) wins. On a square image the two orders are transposes of
  each other (equally compact), so the image decides: the order whose masks differ more from
  the pixels around them. When neither tells, the usual Kaggle order (column-major: top to
  bottom, then left to right) is taken and said to be a guess. A description that says
  "row-major"/"column-major" (or "relative"/"absolute") decides instead.

May import: nothing of the project (numpy and scipy only).
"""
from __future__ import annotations

import math
import re

import numpy as np

EMPTY = {"", "-1", "nan", "none", "null", "[]"}
ORDERS = {"row-major": "C", "column-major": "F"}
SAMPLE_MASKS = 24        # masks decoded both ways to choose the order
TIE = 0.05               # relative difference below which two orders are equally compact
CONTRAST_MARGIN = 1.25   # one order's edge contrast must beat the other's by this factor


class RunLengthError(ValueError):
    """A cell that is not run-length pairs, or runs that leave the image; says why."""


def is_empty(cell: object) -> bool:
    return str(cell if cell is not None else "").strip().lower() in EMPTY


def parse_runs(cell: object) -> np.ndarray:
    """(n, 2) int array of (start, length) pairs; empty for no finding. RunLengthError."""
    text = str(cell if cell is not None else "").strip()
    if text.lower() in EMPTY:
        return np.zeros((0, 2), np.int64)
    tokens = text.replace(",", " ").split()
    if not all(re.fullmatch(r"\d+", t) for t in tokens):
        bad = next(t for t in tokens if not re.fullmatch(r"\d+", t))
        raise RunLengthError(f"{bad!r} is not a whole number")
    if len(tokens) % 2:
        raise RunLengthError(f"{len(tokens)} numbers; runs are pairs 'start length'")
    pairs = np.asarray(tokens, np.int64).reshape(-1, 2)
    if (pairs[:, 1] <= 0).any():
        raise RunLengthError("a run of length 0")
    return pairs


def absolute_possible(pairs: np.ndarray) -> bool:
    """Whether the pairs can be absolute: each start at or after the previous run's end."""
    if len(pairs) < 2:
        return True
    ends = pairs[:-1, 0] + pairs[:-1, 1]
    return bool((pairs[1:, 0] >= ends).all())


def decode(runs: list[np.ndarray], shape: tuple[int, int], encoding: dict) -> np.ndarray:
    """The union of ``runs`` (one array of pairs per region) as a bool (rows, columns) mask.
    ``encoding``: {"relative": bool, "first_index": 0|1, "order": "row-major"|"column-major"}.
    Raises RunLengthError when a run leaves the image."""
    rows, cols = shape
    total = rows * cols
    flat = np.zeros(total, bool)
    for pairs in runs:
        if not len(pairs):
            continue
        if encoding.get("relative"):
            starts = np.cumsum(pairs[:, 0]) + np.concatenate([[0], np.cumsum(pairs[:-1, 1])])
        else:
            starts = pairs[:, 0] - int(encoding.get("first_index", 1))
        ends = starts + pairs[:, 1]
        if starts.min() < 0 or ends.max() > total:
            raise RunLengthError(f"a run ends at pixel {int(ends.max())} (or starts before the "
                                 f"first) but the image has {rows} x {cols} = {total} pixels")
        edges = np.zeros(total + 1, np.int64)
        np.add.at(edges, starts, 1)
        np.add.at(edges, ends, -1)
        flat |= np.cumsum(edges[:-1]) > 0
    if encoding.get("order") == "row-major":
        return flat.reshape(rows, cols)
    return flat.reshape(cols, rows).T


def _cost(mask: np.ndarray) -> float:
    """How little the mask looks like blobs: its pieces times its outline per area."""
    from scipy import ndimage
    area = int(mask.sum())
    if not area:
        return 0.0
    outline = int(np.count_nonzero(np.diff(mask, axis=0))) + \
        int(np.count_nonzero(np.diff(mask, axis=1)))
    pieces = int(ndimage.label(mask)[1])
    return math.log(pieces * max(outline, 1) / math.sqrt(area))


def _contrast(mask: np.ndarray, image: np.ndarray) -> float | None:
    """How far the pixels under the mask differ from a thin ring around it (in image SDs)."""
    from scipy import ndimage
    if image.shape[:2] != mask.shape or not mask.any():
        return None
    gray = image.astype(np.float64)
    if gray.ndim == 3:
        gray = gray.mean(axis=2)
    ring = ndimage.binary_dilation(mask, iterations=3) & ~mask
    if not ring.any():
        return None
    return abs(gray[mask].mean() - gray[ring].mean()) / (gray.std() + 1e-6)


def said_encoding(description: str) -> dict:
    """What a description says about the encoding ("column-major", "relative" starts)."""
    text = (description or "").lower()
    said = {}
    if re.search(r"row[- ]major|row[- ]wise|left to right,? then top to bottom", text):
        said["order"] = "row-major"
    elif re.search(r"column[- ]major|column[- ]wise|top to bottom,? then left to right", text):
        said["order"] = "column-major"
    if re.search(r"\brelative (?:starts?|offsets?|rle|run)", text):
        said["relative"] = True
    elif re.search(r"\babsolute (?:starts?|positions?|rle|run)", text):
        said["relative"] = False
    return said


def choose_encoding(cells: list[np.ndarray], samples: list[tuple[list[np.ndarray],
                                                                   tuple[int, int], object]],
                    description: str = "") -> dict:
    """The encoding of a table's cells (see the module doc). ``cells``: the parsed pairs of
    every non-empty cell; ``samples``: (runs of one mask, its image's (rows, columns), a
    callable giving the image's pixels or None) for a few masks. Returns the encoding with
    ``how`` saying how each part was decided."""
    said = said_encoding(description)
    multi = [p for p in cells if len(p) > 1]
    if "relative" in said:
        relative, how = said["relative"], "the description says so"
    elif any(not absolute_possible(p) for p in multi):
        relative, how = True, ("starts fall before the previous run's end in "
                               f"{sum(not absolute_possible(p) for p in multi)} of {len(multi)} "
                               "multi-run cells, so each start is an offset from the previous "
                               "run's end")
    else:
        relative, how = False, ("starts always increase past the previous run" if multi else
                                "one run per cell: absolute assumed")
    first = 0 if relative or any(len(p) and p[0, 0] == 0 for p in cells) else 1
    encoding = {"relative": relative, "first_index": first, "starts_by": how}
    if "order" in said:
        return {**encoding, "order": said["order"], "order_by": "the description says so",
                "guess": False}
    costs = {o: 0.0 for o in ORDERS}
    contrast = {o: [] for o in ORDERS}
    tried = 0
    for runs, shape, pixels in samples[:SAMPLE_MASKS]:
        try:
            masks = {o: decode(runs, shape, {**encoding, "order": o}) for o in ORDERS}
        except RunLengthError:
            continue
        tried += 1
        for order, mask in masks.items():
            costs[order] += _cost(mask)
        if shape[0] == shape[1] and pixels is not None:
            image = pixels()
            for order, mask in masks.items():
                if image is not None and (c := _contrast(mask, image)) is not None:
                    contrast[order].append(c)
    row, col = costs["row-major"], costs["column-major"]
    if tried and abs(row - col) > TIE * max(abs(row), abs(col), 1.0):
        order = "row-major" if row < col else "column-major"
        return {**encoding, "order": order, "guess": False,
                "order_by": f"masks decoded {order} are compact blobs ({tried} decoded both "
                            "ways; the other order gives stripes)"}
    means = {o: float(np.mean(v)) if v else 0.0 for o, v in contrast.items()}
    best = max(means, key=means.get)
    other = means["row-major" if best == "column-major" else "column-major"]
    if means[best] > 0 and means[best] >= CONTRAST_MARGIN * other:
        return {**encoding, "order": best, "guess": False,
                "order_by": f"square images: masks decoded {best} differ more from the pixels "
                            f"around them ({means[best]:.2f} vs {other:.2f} image SDs over "
                            f"{len(contrast[best])} images)"}
    return {**encoding, "order": "column-major", "guess": True,
            "order_by": "neither order fits better: the usual Kaggle order (column-major, top "
                        "to bottom then left to right) is a guess; say 'row-major' in the "
                        "description if the masks come out transposed"}


def describe_encoding(encoding: dict) -> str:
    """One phrase: "relative, column-major" / "absolute 1-indexed, row-major (a guess)"."""
    starts = "relative" if encoding.get("relative") else \
        f"absolute {encoding.get('first_index', 1)}-indexed"
    return f"{starts}, {encoding.get('order')}" + (" (a guess)" if encoding.get("guess") else "")
