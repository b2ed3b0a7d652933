"""Masks and boxes of the image preview on a display volume's grid: a label image (or one-hot
mask) resampled and reoriented like its image, the labels it holds, and boxes in stored voxel
corners mapped to the display grid and to the slices they cross.

Masks (labels 1..N) and boxes from a detection index entry (``[x0, y0, x1, y1]`` or ``[x0, y0,
z0, x1, y1, z1]``, stored voxel units) are drawn by ``slice_render.render_slice``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from core.viewing.display_volume import (MAX_DISPLAY_VOXELS, DisplayVolume, PreviewError, _LRU,
                                         _read, _stamp, _to_display, _view_axes)


def stored_labels(arr: np.ndarray, stored_shape: tuple[int, ...], ref: str = "") -> np.ndarray:
    """A label array as read (C, *stored spatial) -> int16 labels in the stored layout, for an
    image of spatial shape ``stored_shape``. One-hot masks (several channels) become label
    k + 1 where channel k is set. Raises PreviewError when the mask is on another grid."""
    spatial = tuple(arr.shape[1:])
    if len(spatial) == 3 and spatial[2] == 1 and len(stored_shape) == 2:
        arr, spatial = arr[..., 0], spatial[:2]
    if spatial != tuple(stored_shape):
        raise PreviewError(f"mask {ref} has shape {list(spatial)}, the image "
                           f"{list(stored_shape)}: they do not belong together, so no "
                           "overlay is drawn")
    if arr.shape[0] > 1 and all(np.array_equal(arr[0], c) for c in arr[1:]):
        arr = arr[:1]  # a grey mask saved as RGB
    if arr.shape[0] > 1:
        labels = np.where(arr.max(0) > 0.5, arr.argmax(0) + 1, 0)
    else:
        labels = arr[0]
        if labels.dtype.kind == "f":
            labels = np.rint(labels if np.isfinite(labels).all() else np.nan_to_num(labels))
    return np.clip(labels, 0, np.iinfo(np.int16).max).astype(np.int16)


def mask_to_display(arr: np.ndarray, volume: DisplayVolume, ref: str = "") -> np.ndarray:
    """A label array as read (C, *stored spatial) -> int16 (X, Y, Z) on the volume's grid."""
    labels = stored_labels(arr, volume.stored_shape, ref)
    return _to_display(labels[None], volume.stride[0], volume.ornt)[0]


_MASKS = _LRU(max_items=3, max_bytes=3 * MAX_DISPLAY_VOXELS * 2 + (16 << 20),
              size_of=lambda m: int(m.nbytes))


def load_mask(ref: Any, volume: DisplayVolume, allow_pickle: bool = False) -> np.ndarray:
    """The mask of a sample on the volume's display grid (cached). Raises PreviewError."""
    key = ("mask", str(ref), volume.ref, volume.stride, volume.ornt.tobytes(), _stamp(ref))

    def make():
        arr, _ = _read(ref, allow_pickle, None)
        return mask_to_display(arr, volume, str(ref))
    return _MASKS.get(key, make)


def mask_labels(mask: np.ndarray | None) -> list[int]:
    return [] if mask is None else [int(v) for v in np.unique(mask) if v > 0]


def boxes_on_grid(boxes: Sequence[Sequence[float]], ornt: np.ndarray, stride: int,
                  shape: Sequence[int], n_stored: int) -> list[tuple[int, list[float]]]:
    """(box number, ``[lo0, lo1, lo2, hi0, hi1, hi2]``) on a display grid of ``shape`` for the
    boxes in stored voxel corners ``[x0, y0, x1, y1]`` / ``[x0, y0, z0, x1, y1, z1]`` (a 2D box
    spans the one slice); ``ornt`` maps stored axes to display axes, ``stride`` is the
    downsampling. Boxes of the wrong length are left out."""
    out = []
    for number, box in enumerate(boxes or []):
        values = [float(v) for v in box]
        half = len(values) // 2
        if len(values) not in (4, 6) or half < n_stored:
            continue
        lo, hi = values[:n_stored], values[half:half + n_stored]
        if n_stored == 2:
            lo, hi = lo + [0.0], hi + [1.0]
        new_lo, new_hi = [0.0] * 3, [0.0] * 3
        for axis in range(3):
            target, flip = int(ornt[axis, 0]), ornt[axis, 1]
            step = stride if axis < n_stored else 1
            a, b = lo[axis] / step, hi[axis] / step
            if flip < 0:
                a, b = shape[target] - b, shape[target] - a
            new_lo[target], new_hi[target] = a, b
        out.append((number, new_lo + new_hi))
    return out


def display_boxes(boxes: Sequence[Sequence[float]], volume: DisplayVolume) -> list[list[float]]:
    """Boxes in stored voxel corners -> ``[lo0, lo1, lo2, hi0, hi1, hi2]`` on the display grid
    of a display volume (see ``boxes_on_grid``)."""
    return [box for _, box in boxes_on_grid(boxes, volume.ornt, volume.stride[0], volume.shape,
                                            len(volume.stored_shape))]


def boxes_on_slice(boxes: Sequence[Sequence[float]], volume: DisplayVolume, axis: str,
                   index: int) -> list[tuple[int, tuple[float, float, float, float]]]:
    """(box number, (row0, col0, row1, col1)) in slice pixels for the display boxes that cross
    slice ``index`` of the view."""
    fixed, u, v = _view_axes(axis)
    shape = volume.shape
    out = []
    for number, box in enumerate(boxes):
        lo, hi = box[:3], box[3:]
        if not (lo[fixed] < index + 1 and hi[fixed] > index):
            continue
        out.append((number, (shape[v] - hi[v], shape[u] - hi[u],
                             shape[v] - lo[v], shape[u] - lo[u])))
    return out

