"""The grid and the files of the interactive viewer (``viewer_data`` builds what it is sent):
an image reference's stored layout mapped to the preview's display grid (the closest canonical,
RAS, voxel order with the true affine, from nibabel's ``as_closest_canonical``; without an
affine, the stored layout with the stored spacing), values in the smallest exact type, and
gzip NIfTI files of them.
"""
from __future__ import annotations

import gzip
import math
import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.viewing.display_volume import ARRAY_FORMATS, _orientation

GZIP_LEVEL = 1                 # fast; CT and masks still shrink a lot
SCL_OFFSET = 112               # byte offset of scl_slope, scl_inter in a NIfTI-1 header


# ----------------------------------------------------------------------------- the grid

@dataclass
class Grid:
    stored_shape: tuple[int, ...]
    stride: int
    ornt: np.ndarray | None       # stored axis -> display axis when there is no affine
    affine: np.ndarray | None     # stored voxel -> mm (RAS), when stored
    spacing: tuple[float, ...]    # per stored axis (1.0 when not stored)

    def to_display(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A stored-layout array (2 or 3 axes) -> (display-grid (X, Y, Z) array, its affine)."""
        import nibabel as nib
        from nibabel.orientations import apply_orientation
        s = self.stride
        strided = values[(slice(None, None, s),) * values.ndim]
        if self.affine is not None:
            scaled = self.affine @ np.diag([s, s, s, 1.0])
            canonical = nib.as_closest_canonical(nib.Nifti1Image(strided, scaled))
            return np.asanyarray(canonical.dataobj), canonical.affine
        if strided.ndim == 2:
            strided = strided[..., None]
        data = apply_orientation(strided, self.ornt)
        spacing = [1.0, 1.0, 1.0]
        for axis in range(3):
            step = s if axis < len(self.stored_shape) else 1
            stored = self.spacing[axis] if axis < len(self.spacing) else 1.0
            spacing[int(self.ornt[axis, 0])] = stored * step
        return data, np.diag(spacing + [1.0])


def grid_of(meta: dict, stored_shape: Sequence[int], stride: int) -> Grid:
    fmt = str(meta.get("format", ""))
    ornt, oriented_by = _orientation(meta, len(stored_shape), fmt in ARRAY_FORMATS)
    spacing = [float(s) for s in (meta.get("spacing") or [])][:len(stored_shape)]
    if len(spacing) != len(stored_shape) or not all(s > 0 for s in spacing):
        spacing = [1.0] * len(stored_shape)
    affine = np.asarray(meta["affine"], dtype=float) if oriented_by == "affine" else None
    return Grid(tuple(int(n) for n in stored_shape), stride, None if affine is not None
                 else ornt, affine, tuple(spacing))


def main_axis(meta: dict, stored_shape: Sequence[int]) -> int:
    """The display axis along which the stored slices are stacked (2 = axial for 2D)."""
    if len(stored_shape) < 3:
        return 2
    fmt = str(meta.get("format", ""))
    ornt, _ = _orientation(meta, 3, fmt in ARRAY_FORMATS)
    slice_axis = 0 if fmt in ARRAY_FORMATS else 2
    return int(ornt[slice_axis, 0])


# ----------------------------------------------------------------------------- values

def compact(values: np.ndarray) -> np.ndarray:
    """The values in the smallest of uint8 / int16 that holds each of them exactly, else
    float32 (non-finite values become 0)."""
    values = np.asarray(values)
    if values.dtype.kind in "ui" and values.dtype.itemsize <= 2:
        lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    else:
        values = np.asarray(values, dtype=np.float32)
        if not np.isfinite(values).all():
            values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        lo, hi = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
        flat = values.reshape(-1)
        step = 1 << 22
        if not all(np.array_equal(part, np.floor(part))
                   for part in (flat[i:i + step] for i in range(0, flat.size, step))):
            return values
    if 0 <= lo and hi <= 255:
        return values.astype(np.uint8)
    if -32768 <= lo and hi <= 32767:
        return values.astype(np.int16)
    return values.astype(np.float32)


def nifti_gz(data: np.ndarray, affine: np.ndarray) -> bytes:
    """A NIfTI-1 file (gzip level GZIP_LEVEL) of ``data`` with ``affine`` as its sform and
    qform, values unscaled (scl_slope 1, scl_inter 0 written explicitly: nibabel writes NaN,
    which Niivue's ROI statistics read as an offset of 1)."""
    import nibabel as nib
    image = nib.Nifti1Image(np.ascontiguousarray(data), affine)
    image.set_sform(affine, code=1)
    image.set_qform(affine, code=1)
    raw = bytearray(image.to_bytes())
    struct.pack_into("<ff" if raw[0] == 92 else ">ff", raw, SCL_OFFSET, 1.0, 0.0)
    return gzip.compress(bytes(raw), compresslevel=GZIP_LEVEL, mtime=0)


def rgb24(channels: np.ndarray) -> np.ndarray:
    """(3, ...) values -> a NIfTI RGB24 array of the same spatial shape."""
    top = float(channels.max()) if channels.size else 0.0
    scale = 255.0 / top if top > 255 else (255.0 if top <= 1.0 else 1.0)
    scaled = np.rint(np.clip(channels * scale, 0, 255)).astype(np.uint8)
    out = np.empty(channels.shape[1:], dtype=[("R", "u1"), ("G", "u1"), ("B", "u1")])
    out["R"], out["G"], out["B"] = scaled[0], scaled[1], scaled[2]
    return out


def stride_for(stored_shape: Sequence[int], itemsize: int, max_bytes: int) -> int:
    factor = 1
    while itemsize * math.prod(math.ceil(n / factor) for n in stored_shape) > max_bytes:
        factor += 1
    return factor


def present_values(labels: np.ndarray) -> list[int]:
    """The label values > 0 in a label volume (counted, not sorted: fast on big volumes)."""
    if not labels.size:
        return []
    counts = np.bincount(np.clip(labels.reshape(-1), 0, None).astype(np.int64))
    return [int(v) for v in np.nonzero(counts)[0] if v > 0]


def focus_of(labels: np.ndarray) -> tuple[float, float, float] | None:
    """The centre of a label volume's foreground as fractions of each axis (where the
    crosshair starts: on the mask), or None when it is empty."""
    fractions = []
    for axis in range(3):
        other = tuple(a for a in range(3) if a != axis)
        counts = np.count_nonzero(labels, axis=other) if labels.ndim == 3 else None
        if counts is None or not counts.any():
            return None
        centre = float(np.average(np.arange(counts.size), weights=counts))
        fractions.append((centre + 0.5) / counts.size)
    return tuple(fractions)  # type: ignore[return-value]
