"""What the Models page's try-it panel shows of a prediction (``inference.Prediction``), as plain
data (no UI): the slice to show first, the size of each predicted class (ml / mm², voxels /
pixels without a spacing), and the boxes above a score that cross a slice.

Images, masks and boxes are on the upload's own grid, MONAI axis order (x first); a volume is
shown one slice (last axis) at a time.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def depth_of(image: np.ndarray) -> int:
    """Slices along the last axis: the third axis of a volume, 1 for a 2D image."""
    return image.shape[2] if image.ndim == 3 else 1


def middle_slice(image: np.ndarray) -> np.ndarray:
    """The middle slice of a volume; an image as it is."""
    return image[..., image.shape[2] // 2] if image.ndim == 3 else image


def busiest_slice(mask: np.ndarray, depth: int) -> int:
    """The slice with the most foreground (0 for a 2D mask)."""
    return int(np.argmax((mask > 0).reshape(-1, depth).sum(0))) if depth > 1 else 0


def mask_sizes(mask: np.ndarray, spacing: Sequence[float] | None,
               n_classes: int) -> tuple[str, list[float]]:
    """(unit, size of classes 1..n_classes): ml for volumes and mm² for images when the upload
    has a spacing, else voxels / pixels; rounded to 2 decimals."""
    voxel = float(np.prod(spacing)) if spacing and len(spacing) == mask.ndim else None
    unit = ("ml" if mask.ndim == 3 else "mm²") if voxel else ("voxels" if mask.ndim == 3
                                                               else "pixels")
    scale = (voxel / 1000.0 if mask.ndim == 3 else voxel) if voxel else 1.0
    return unit, [round(float((mask == c).sum()) * scale, 2) for c in range(1, n_classes + 1)]


def boxes_at_least(boxes: Sequence[dict], threshold: float) -> list[dict]:
    """The predicted boxes with a score of at least ``threshold``."""
    return [b for b in boxes if b["score"] >= threshold]


def first_box_slice(boxes: Sequence[dict], dims: int, depth: int) -> int:
    """The slice through the centre of the first box of a volume (the middle one without
    boxes, or for an image), clipped to the slices there are."""
    default = int(round((boxes[0]["box"][2] + boxes[0]["box"][5]) / 2)) if boxes and dims == 3 \
        else depth // 2
    return min(max(default, 0), depth - 1)


def box_corners_on_slice(boxes: Sequence[dict], dims: int,
                         index: int) -> list[tuple[dict, tuple[float, float, float, float]]]:
    """(box, (x0, y0, x1, y1)) in pixels for the boxes that cross slice ``index`` of a volume
    (every box of an image); boxes are corners ``[x0, y0, x1, y1]`` or
    ``[x0, y0, z0, x1, y1, z1]``."""
    out = []
    for b in boxes:
        box = b["box"]
        if dims == 3 and not box[2] <= index + 0.5 <= box[5]:
            continue
        x0, y0 = box[0], box[1]
        x1, y1 = (box[3], box[4]) if dims == 3 else (box[2], box[3])
        out.append((b, (x0, y0, x1, y1)))
    return out
