"""Image preview: any image reference an index can hold -> slices on screen, with window/level,
mask overlays and boxes. No UI here (the page is ``pages/preview.py``).

* ``load_volume(ref)`` reads through ``core.imaging.image_io.read_image`` (NIfTI,
  NRRD/MHA, PNG/JPEG, DICOM files, folders of DICOM or PNG slices, series manifests,
  ``file.npz::key[i]``, ``.npy``) and keeps a *display volume*: float32 ``(C, X, Y, Z)`` in
  RAS voxel order (reoriented with nibabel from the image's affine; without one, in the stored
  order), downsampled by an integer stride so that it holds at most ``MAX_DISPLAY_VOXELS``.
  A 2D image is a volume of one axial slice.
* Views: ``axial`` (fixed z), ``coronal`` (fixed y), ``sagittal`` (fixed x), drawn in the
  radiological convention (patient's right on the viewer's left, anterior / superior at the
  top); pixels are resampled to the voxel spacing so the aspect ratio is true.
* Windows: CT presets in Hounsfield units (``WINDOW_PRESETS``), an automatic window from the
  volume's 0.5-99.5 percentiles (MRI, X-ray, anything not in HU), the full range, or manual.
* Masks (labels 1..N) overlay in ``PALETTE`` colours (label k always gets the same colour) at a
  chosen opacity; boxes from a detection index entry (``[x0, y0, x1, y1]`` or ``[x0, y0, z0,
  x1, y1, z1]``, stored voxel units) are drawn on the slices they cross.
* ``class_thumbnails`` renders a few samples per class of a scanned dataset as small PNGs.

Memory is bounded: a few display volumes, scans and thumbnails are cached (by path and
modification time) in small LRU caches.
"""
from __future__ import annotations

import io
import math
import os
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from core.imaging.image_io import (ImageReadError, parse_ref, read_dicom_series,
                                          read_image, ref_files)
from core.datasets.layouts.types import ScanError
from core.datasets.layouts.dispatch import scan_folder

MAX_DISPLAY_VOXELS = 1 << 24   # values kept per display volume, all channels (64 MB float32)
MAX_CHANNELS = 16              # channels (sequences, time points) kept for display
MAX_SIDE = 512                 # longest side of a rendered slice, pixels
THUMB_SIDE = 128
MAX_THUMBS_PER_CLASS = 8
MAX_THUMB_CLASSES = 12
THUMB_VOXELS = 1 << 20         # thumbnails read a volume, keep at most this many values
MAX_FOLDER_FILES = 4000        # a folder of slices with more files is refused (not one series)
MAX_READ_BYTES = 4 << 30       # files of one image larger than this (on disk) are refused
AXES = ("axial", "coronal", "sagittal")
FIXED_AXIS = {"axial": 2, "coronal": 1, "sagittal": 0}  # the RAS axis a view holds fixed

WINDOW_PRESETS: dict[str, tuple[float, float]] = {  # name: (width, level), Hounsfield units
    "CT lung": (1500.0, -600.0),
    "CT mediastinum": (350.0, 50.0),
    "CT soft tissue / abdomen": (400.0, 40.0),
    "CT bone": (2000.0, 500.0),
    "CT brain": (80.0, 40.0),
}
AUTO = "Auto (0.5-99.5 percentile)"
FULL_RANGE = "Full range"
MANUAL = "Manual"

# label k -> PALETTE[(k - 1) % len]: distinct, readable on grey (Trubetskoy's distinct colours)
PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (255, 225, 25), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
    (0, 128, 128), (220, 190, 255), (170, 110, 40), (128, 0, 0), (170, 255, 195),
    (128, 128, 0))
ARRAY_FORMATS = ("npy", "npz", "pt", "pth", "pck", "pkl", "pickle")
RASTER_FORMATS = ("png", "jpg", "bmp", "tif", "tiff", "slice", "slices")


class PreviewError(ValueError):
    """The image cannot be shown; the message names the reference and what to do."""


# ----------------------------------------------------------------------------- small LRU

class _LRU:
    """A thread-safe least-recently-used cache bounded by entries and by bytes."""

    def __init__(self, max_items: int, max_bytes: int, size_of: Callable[[Any], int]):
        self.max_items, self.max_bytes, self.size_of = max_items, max_bytes, size_of
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.lock = threading.Lock()

    def get(self, key, make):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                self.hits += 1
                return self.items[key][0]
        value = make()
        size = self.size_of(value)
        with self.lock:
            if key not in self.items and size <= self.max_bytes:
                while self.items and (len(self.items) >= self.max_items or
                                      self.bytes + size > self.max_bytes):
                    _, (_, old) = self.items.popitem(last=False)
                    self.bytes -= old
                self.items[key] = (value, size)
                self.bytes += size
        return value

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.bytes = 0
            self.hits = 0


def _stamp(ref: Any, series_files: Sequence[str] | None = None) -> tuple:
    """(path, mtime_ns) of every file a reference depends on; PreviewError when one is
    missing (so a changed file is re-read and a missing one says so)."""
    paths = [Path(p) for p in series_files] if series_files else ref_files(ref)
    out = []
    for path in paths:
        try:
            out.append((str(path), path.stat().st_mtime_ns))
        except FileNotFoundError:
            raise PreviewError(f"{path} does not exist. Check the path: it must name a file or "
                               "folder on this server (the machine running M3Builder).") from None
        except OSError as exc:
            raise PreviewError(f"{path} cannot be read ({exc.strerror or exc}). Give the app "
                               "read access to it.") from None
    return tuple(out)


# ----------------------------------------------------------------------------- display volume

@dataclass
class DisplayVolume:
    data: np.ndarray                    # float32 (C, X, Y, Z), RAS voxel order when oriented
    spacing: tuple[float, float, float]  # per display axis, after downsampling
    ornt: np.ndarray                    # nibabel orientation: stored axis -> display axis
    stride: tuple[int, ...]             # downsampling per stored axis
    stored_shape: tuple[int, ...]       # spatial shape as read (2 or 3 axes)
    is_3d: bool
    rgb: bool
    fmt: str
    modality: str
    hu: bool                            # values are Hounsfield units (CT)
    oriented_by: str                    # "affine" or "stored order"
    has_spacing: bool
    channel_names: list[str]
    channels_total: int
    ref: str
    slice_axis: int                     # stored axis of the slices (0 for arrays, else 2)
    affine: np.ndarray | None = None    # the stored image's RAS affine (voxel -> mm), if any
    stats: list[tuple[float, float, float, float]] = field(default_factory=list)
    #                                     per channel: (p0.5, p99.5, min, max)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.data.shape[1:])  # type: ignore[return-value]

    @property
    def downsampled(self) -> bool:
        return any(s > 1 for s in self.stride)

    def n_slices(self, axis: str) -> int:
        return self.shape[FIXED_AXIS[axis]]

    @property
    def default_axis(self) -> str:
        """The view along the stored slices (the acquisition plane), axial for 2D."""
        if not self.is_3d:
            return "axial"
        target = int(self.ornt[self.slice_axis, 0])
        return next(a for a, f in FIXED_AXIS.items() if f == target)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


def _implied_ornt(ndim_stored: int, array_format: bool) -> np.ndarray:
    """Orientation for data without an affine, chosen so that the axial view shows the stored
    image as stored: rows = the image's rows, columns = its columns. Raster/DICOM arrays are
    (column, row[, slice]); arrays (.npy/.npz/.pt) are (row, column) or (slice, row, column)."""
    if array_format and ndim_stored == 3:
        return np.array([[2, 1], [1, -1], [0, -1]], dtype=float)
    if array_format:
        return np.array([[1, -1], [0, -1], [2, 1]], dtype=float)
    return np.array([[0, -1], [1, -1], [2, 1]], dtype=float)


def _orientation(meta: dict, stored_ndim: int, array_format: bool) -> tuple[np.ndarray, str]:
    affine = meta.get("affine")
    if stored_ndim == 3 and affine is not None:
        affine = np.asarray(affine, dtype=float)
        if affine.shape == (4, 4) and np.isfinite(affine).all() and \
                abs(np.linalg.det(affine[:3, :3])) > 1e-12:
            from nibabel.orientations import io_orientation
            return io_orientation(affine), "affine"
    return _implied_ornt(stored_ndim, array_format), "stored order"


def _stride(spatial: Sequence[int], channels: int, limit: int) -> int:
    factor = 1
    while channels * math.prod(math.ceil(n / factor) for n in spatial) > limit:
        factor += 1
    return factor


def _to_display(arr: np.ndarray, stride: int, ornt: np.ndarray) -> np.ndarray:
    """(C, *stored spatial) -> (C, X, Y, Z): strided, given a z axis when 2D, reoriented."""
    from nibabel.orientations import apply_orientation
    arr = arr[(slice(None),) + (slice(None, None, stride),) * (arr.ndim - 1)]
    if arr.ndim == 3:
        arr = arr[..., None]
    return np.ascontiguousarray(np.stack([apply_orientation(c, ornt) for c in arr]))


def _channel_stats(channel: np.ndarray) -> tuple[float, float, float, float]:
    flat = channel.ravel()
    if flat.size > 1_000_000:
        flat = flat[:: flat.size // 1_000_000 + 1]
    flat = flat[np.isfinite(flat)]
    if not flat.size:
        return 0.0, 1.0, 0.0, 1.0
    lo, hi = np.percentile(flat, [0.5, 99.5])
    return float(lo), float(hi), float(flat.min()), float(flat.max())


def _check_size(ref: Any, series_files: Sequence[str] | None) -> None:
    """Refuse what would take unbounded time or memory to read for a preview: a folder with
    more than MAX_FOLDER_FILES files (a dataset root typed by mistake) or files over
    MAX_READ_BYTES."""
    paths = [Path(p) for p in series_files] if series_files else ref_files(ref)
    total = 0
    for path in paths:
        if path.is_dir():
            count = 0
            with os.scandir(path) as entries:
                for entry in entries:
                    count += entry.is_file()
                    if count > MAX_FOLDER_FILES:
                        raise PreviewError(
                            f"{path} holds more than {MAX_FOLDER_FILES} files: a folder is read "
                            "as the slices of one 3D image. Give one image file, or the folder "
                            "of one series.")
        elif path.is_file():
            total += path.stat().st_size
    if total > MAX_READ_BYTES:
        raise PreviewError(f"{ref}: {total / 2**30:.1f} GiB on disk, more than the preview reads "
                           f"({MAX_READ_BYTES / 2**30:.0f} GiB)")


def _read(ref: Any, allow_pickle: bool, series_files: Sequence[str] | None):
    shown = ref if isinstance(ref, str) else str(parse_ref(ref))
    try:
        _check_size(ref, series_files)
    except OSError as exc:
        raise PreviewError(f"{shown}: cannot be read ({exc.strerror or exc})") from None
    try:
        if series_files:
            return read_dicom_series(list(series_files), shown, images_only=True)
        return read_image(ref, allow_pickle=allow_pickle)
    except FileNotFoundError as exc:
        raise PreviewError(f"{exc}. Check the path: it must name a file or folder on this "
                           "server.") from None
    except ImageReadError as exc:
        raise PreviewError(str(exc)) from None
    except MemoryError:
        raise PreviewError(f"{shown}: too large to load for preview on this server") from None
    except Exception as exc:  # noqa: BLE001 - a reader's own error, shown to the user
        raise PreviewError(f"{shown}: cannot be read as an image ({type(exc).__name__}: "
                           f"{str(exc)[:200]})") from None


def _channel_names(ref: Any, count: int, fmt: str) -> list[str]:
    parsed = parse_ref(ref) if ref else ""
    if isinstance(parsed, list) and len(parsed) == count:
        return [Path(p).name for p in parsed]
    if count == 1:
        return ["image"]
    kind = "volume" if fmt in ("nifti", "nrrd", "mha", "mhd") else "channel"
    return [f"{kind} {i + 1}" for i in range(count)]


def _is_hu(modality: str, fmt: str, vmin: float, vmax: float) -> bool:
    if modality.upper() == "CT":
        return vmin < -100
    if modality or fmt in RASTER_FORMATS:
        return False
    return -3100 <= vmin <= -900 and vmax >= 200  # air at -1000 (or padding at -2048/-3024)


def build_volume(arr: np.ndarray, meta: dict, ref: Any = "", modality: str = "",
                 max_voxels: int = MAX_DISPLAY_VOXELS) -> DisplayVolume:
    """A display volume from ``read_image``'s ``(array, meta)``."""
    if arr.ndim not in (3, 4):
        raise PreviewError(f"{ref}: an array of shape {arr.shape[1:]} is not a 2D or 3D image")
    fmt = str(meta.get("format", ""))
    spatial = list(arr.shape[1:])
    if len(spatial) == 3 and spatial[2] == 1:  # a 2D image stored with one slice
        arr, spatial = arr[..., 0], spatial[:2]
        meta = {k: v for k, v in meta.items() if k != "affine"}
        if meta.get("spacing"):
            meta["spacing"] = list(meta["spacing"])[:2]
    channels_total = int(arr.shape[0])
    photometric = str(meta.get("photometric", "")).upper()
    rgb = channels_total in (3, 4) and len(spatial) == 2 and (
        fmt in RASTER_FORMATS or (fmt == "dicom" and photometric not in ("", "MONOCHROME1",
                                                                           "MONOCHROME2")))
    arr = arr[:3] if rgb else arr[:MAX_CHANNELS]
    array_format = fmt in ARRAY_FORMATS
    ornt, oriented_by = _orientation(meta, len(spatial), array_format)
    factor = _stride(spatial, arr.shape[0], max_voxels)
    data = _to_display(np.asarray(arr, dtype=np.float32), factor, ornt).astype(np.float32)
    stored_spacing = [float(s) for s in (meta.get("spacing") or [])][:len(spatial)]
    has_spacing = len(stored_spacing) == len(spatial) and all(s > 0 for s in stored_spacing)
    stored_spacing = stored_spacing if has_spacing else [1.0] * len(spatial)
    stored_spacing = stored_spacing + [1.0] * (3 - len(stored_spacing))
    spacing = [1.0, 1.0, 1.0]
    for axis in range(3):
        step = factor if axis < len(spatial) else 1
        spacing[int(ornt[axis, 0])] = stored_spacing[axis] * step
    stats = [_channel_stats(c) for c in data]
    modality = str(meta.get("modality") or modality or "")
    hu = not rgb and _is_hu(modality, fmt, stats[0][2], stats[0][3])
    return DisplayVolume(
        data=data, spacing=tuple(spacing), ornt=ornt,
        stride=tuple([factor] * len(spatial)), stored_shape=tuple(spatial),
        is_3d=len(spatial) == 3, rgb=rgb, fmt=fmt, modality=modality, hu=hu,
        oriented_by=oriented_by, has_spacing=has_spacing,
        channel_names=["RGB"] if rgb else _channel_names(ref, data.shape[0], fmt),
        channels_total=channels_total, ref=str(meta.get("ref", ref)),
        slice_axis=0 if array_format and len(spatial) == 3 else 2,
        affine=np.asarray(meta["affine"], dtype=float) if meta.get("affine") is not None
        else None, stats=stats)


_VOLUMES = _LRU(max_items=3, max_bytes=3 * MAX_DISPLAY_VOXELS * 4 + (64 << 20),
                size_of=lambda v: v.nbytes)


def load_volume(ref: Any, allow_pickle: bool = False, modality: str = "",
                series_files: Sequence[str] | None = None,
                max_voxels: int = MAX_DISPLAY_VOXELS) -> DisplayVolume:
    """The display volume of an image reference (cached by path and modification time).
    ``series_files``: the ordered DICOM files of one series sharing its folder with others.
    Raises PreviewError with a message for the user."""
    if ref is None or (isinstance(ref, str) and not ref.strip()):
        raise PreviewError("no image given: type the path of an image file or folder")
    ref = os.path.expanduser(ref.strip()) if isinstance(ref, str) else ref
    key = ("volume", str(ref), bool(allow_pickle), modality, max_voxels,
           _stamp(ref, series_files))
    return _VOLUMES.get(key, lambda: build_volume(*_read(ref, allow_pickle, series_files),
                                                  ref=ref, modality=modality,
                                                  max_voxels=max_voxels))


# ----------------------------------------------------------------------------- masks, boxes

def mask_to_display(arr: np.ndarray, volume: DisplayVolume, ref: str = "") -> np.ndarray:
    """A label array as read (C, *stored spatial) -> int16 (X, Y, Z) on the volume's grid.
    One-hot masks (several channels) become label k + 1 where channel k is set."""
    spatial = tuple(arr.shape[1:])
    if len(spatial) == 3 and spatial[2] == 1 and len(volume.stored_shape) == 2:
        arr, spatial = arr[..., 0], spatial[:2]
    if spatial != volume.stored_shape:
        raise PreviewError(f"mask {ref} has shape {list(spatial)}, the image "
                           f"{list(volume.stored_shape)}: they do not belong together, so no "
                           "overlay is drawn")
    if arr.shape[0] > 1 and all(np.array_equal(arr[0], c) for c in arr[1:]):
        arr = arr[:1]  # a grey mask saved as RGB
    if arr.shape[0] > 1:
        labels = np.where(arr.max(0) > 0.5, arr.argmax(0) + 1, 0)
    else:
        labels = np.rint(np.nan_to_num(arr[0]))
    labels = np.clip(labels, 0, np.iinfo(np.int16).max).astype(np.int16)
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


def display_boxes(boxes: Sequence[Sequence[float]], volume: DisplayVolume) -> list[list[float]]:
    """Boxes in stored voxel corners ``[x0, y0, x1, y1]`` / ``[x0, y0, z0, x1, y1, z1]`` ->
    ``[lo0, lo1, lo2, hi0, hi1, hi2]`` on the display grid (a 2D box spans the one slice)."""
    out = []
    n_stored = len(volume.stored_shape)
    stride = volume.stride[0]
    for box in boxes or []:
        values = [float(v) for v in box]
        half = len(values) // 2
        if len(values) not in (4, 6) or half < n_stored:
            continue
        lo, hi = values[:n_stored], values[half:half + n_stored]
        if n_stored == 2:
            lo, hi = lo + [0.0], hi + [1.0]
        shape = volume.shape
        new_lo, new_hi = [0.0] * 3, [0.0] * 3
        for axis in range(3):
            target, flip = int(volume.ornt[axis, 0]), volume.ornt[axis, 1]
            step = stride if axis < n_stored else 1
            a, b = lo[axis] / step, hi[axis] / step
            if flip < 0:
                a, b = shape[target] - b, shape[target] - a
            new_lo[target], new_hi[target] = a, b
        out.append(new_lo + new_hi)
    return out


def _view_axes(axis: str) -> tuple[int, int, int]:
    fixed = FIXED_AXIS[axis]
    u, v = [a for a in range(3) if a != fixed]
    return fixed, u, v


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


# ----------------------------------------------------------------------------- slices, windows

def extract_slice(data: np.ndarray, axis: str, index: int) -> np.ndarray:
    """Slice ``index`` of a display-grid array ``(X, Y, Z)`` as rows x columns on screen:
    radiological convention (patient's right on the left; anterior, superior at the top)."""
    if axis not in FIXED_AXIS:
        raise PreviewError(f"unknown view {axis!r}; use one of {', '.join(AXES)}")
    fixed = FIXED_AXIS[axis]
    count = data.shape[fixed]
    if not 0 <= index < count:
        raise PreviewError(f"slice {index} is out of range: the {axis} view has {count} "
                           f"slices (0-{count - 1})")
    plane = np.take(data, index, axis=fixed)  # (U, V)
    return plane.T[::-1, ::-1]


def slice_pixel_mm(volume: DisplayVolume, axis: str) -> tuple[float, float]:
    """(row height, column width) of a slice's pixels in mm (voxel units without spacing)."""
    _, u, v = _view_axes(axis)
    return volume.spacing[v], volume.spacing[u]


def apply_window(values: np.ndarray, width: float, level: float) -> np.ndarray:
    """Linear window: ``level - width/2`` -> 0, ``level + width/2`` -> 255, clipped, uint8."""
    width = max(float(width), 1e-6)
    low = float(level) - width / 2
    scaled = (np.asarray(values, dtype=np.float64) - low) / width * 255.0
    return np.rint(np.clip(np.nan_to_num(scaled), 0, 255)).astype(np.uint8)


def window_choices(volume: DisplayVolume) -> list[str]:
    """Window names for the volume: CT presets only for Hounsfield units."""
    presets = list(WINDOW_PRESETS) if volume.hu else []
    return presets + [AUTO, FULL_RANGE, MANUAL]


def default_window_name(volume: DisplayVolume, anatomy: str = "") -> str:
    if not volume.hu:
        return AUTO
    text = anatomy.lower()
    if any(w in text for w in ("lung", "chest", "thorax", "thoracic")):
        return "CT lung"
    if any(w in text for w in ("brain", "head", "cranial")):
        return "CT brain"
    return "CT soft tissue / abdomen"


def window_for(volume: DisplayVolume, name: str, channel: int = 0) -> tuple[float, float]:
    """(width, level) of a named window for the volume (MANUAL starts from the auto window)."""
    if name in WINDOW_PRESETS:
        return WINDOW_PRESETS[name]
    lo, hi, vmin, vmax = volume.stats[min(channel, len(volume.stats) - 1)]
    if name == FULL_RANGE:
        lo, hi = vmin, vmax
    if hi <= lo:
        hi = lo + 1.0
    return hi - lo, (hi + lo) / 2


def auto_window(values: np.ndarray, low_pct: float = 0.5,
                high_pct: float = 99.5) -> tuple[float, float]:
    """(width, level) spanning the given percentiles of ``values`` (MRI, X-ray)."""
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [low_pct, high_pct])
    if hi <= lo:
        hi = lo + 1.0
    return float(hi - lo), float((hi + lo) / 2)


# ----------------------------------------------------------------------------- rendering

def label_color(value: int) -> tuple[int, int, int]:
    return PALETTE[(int(value) - 1) % len(PALETTE)]


def hex_color(rgb: Sequence[int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def label_name(value: int, class_names: Sequence[str] = ()) -> str:
    return str(class_names[value - 1]) if 0 < value <= len(class_names) else f"label {value}"


def box_color(label: str, class_names: Sequence[str] = ()) -> tuple[int, int, int]:
    names = list(class_names)
    index = names.index(label) if label in names else sum(map(ord, str(label)))
    return PALETTE[index % len(PALETTE)]


def overlay_mask(rgb: np.ndarray, labels: np.ndarray, opacity: float) -> np.ndarray:
    """Blend label colours into an (H, W, 3) uint8 image where ``labels > 0``; pixels with
    label 0 are returned unchanged."""
    out = rgb.copy()
    alpha = float(np.clip(opacity, 0.0, 1.0))
    for value in mask_labels(labels):
        where = labels == value
        colour = np.asarray(label_color(value), dtype=np.float64)
        out[where] = np.rint((1 - alpha) * rgb[where] + alpha * colour).astype(np.uint8)
    return out


@dataclass
class LegendItem:
    value: int
    name: str
    color: str          # hex
    in_slice: bool


@dataclass
class RenderedSlice:
    image: np.ndarray                 # (H, W, 3) uint8 as shown
    labels: np.ndarray | None         # (H, W) mask on the shown pixels, when overlaid
    legend: list[LegendItem]
    boxes: list[dict]                 # boxes drawn: label and rectangle in shown pixels
    pixel_mm: tuple[float, float]     # (row, column) size of a slice pixel before resampling

    def png(self) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(self.image, mode="RGB").save(buffer, format="PNG", optimize=True)
        return buffer.getvalue()


def _shown_size(rows: int, cols: int, pixel_mm: tuple[float, float],
                max_side: int | None) -> tuple[int, int]:
    """(height, width) with square pixels in mm, longest side ``max_side`` when given."""
    unit = min(pixel_mm)
    height, width = rows * pixel_mm[0] / unit, cols * pixel_mm[1] / unit
    if max_side:
        scale = max_side / max(height, width)
        height, width = height * scale, width * scale
    return max(1, int(round(height))), max(1, int(round(width)))


def render_slice(volume: DisplayVolume, axis: str, index: int,
                 window: tuple[float, float] | None = None, channel: int = 0,
                 mask: np.ndarray | None = None, opacity: float = 0.4,
                 class_names: Sequence[str] = (), boxes: Sequence[Sequence[float]] = (),
                 box_labels: Sequence[str] = (), box_class_names: Sequence[str] = (),
                 max_side: int | None = MAX_SIDE) -> RenderedSlice:
    """One slice as an RGB image: windowed, resampled to true aspect, mask blended in, boxes
    (display-grid boxes from ``display_boxes``) drawn. ``window`` is (width, level)."""
    if volume.rgb:
        planes = [extract_slice(volume.data[c], axis, index) for c in range(3)]
        top = max(s[3] for s in volume.stats)
        scale = 255.0 / top if top > 255 else (255.0 if top <= 1.0 else 1.0)
        rgb = np.rint(np.clip(np.stack(planes, -1) * scale, 0, 255)).astype(np.uint8)
    else:
        channel = min(max(int(channel), 0), volume.data.shape[0] - 1)
        width, level = window or window_for(volume, AUTO, channel)
        grey = apply_window(extract_slice(volume.data[channel], axis, index), width, level)
        rgb = np.repeat(grey[..., None], 3, axis=-1)
    rows, cols = rgb.shape[:2]
    pixel_mm = slice_pixel_mm(volume, axis)
    height, width_px = _shown_size(rows, cols, pixel_mm, max_side)
    if (height, width_px) != (rows, cols):
        rgb = np.asarray(Image.fromarray(rgb, mode="RGB").resize(
            (width_px, height), Image.Resampling.BILINEAR))
    shown_labels, legend = None, []
    if mask is not None:
        plane = extract_slice(mask, axis, index)
        if (height, width_px) != plane.shape:
            plane = np.asarray(Image.fromarray(plane.astype(np.int32), mode="I").resize(
                (width_px, height), Image.Resampling.NEAREST)).astype(np.int16)
        shown_labels = plane
        rgb = overlay_mask(rgb, plane, opacity)
        in_slice = set(mask_labels(plane))
        legend = [LegendItem(v, label_name(v, class_names), hex_color(label_color(v)),
                             v in in_slice) for v in mask_labels(mask)]
    drawn: list[dict] = []
    on_slice = boxes_on_slice(boxes, volume, axis, index) if len(boxes) else []
    if on_slice:
        image = Image.fromarray(rgb, mode="RGB")
        draw = ImageDraw.Draw(image)
        sy, sx = height / rows, width_px / cols
        for number, (r0, c0, r1, c1) in on_slice:
            label = str(box_labels[number]) if number < len(box_labels) else "box"
            colour = box_color(label, box_class_names)
            rect = [c0 * sx, r0 * sy, max(c0 * sx, c1 * sx - 1), max(r0 * sy, r1 * sy - 1)]
            draw.rectangle(rect, outline=colour, width=2)
            draw.text((rect[0] + 2, max(0.0, rect[1] - 11)), label, fill=colour)
            drawn.append({"label": label, "rect": [round(x, 1) for x in rect],
                          "color": hex_color(colour)})
        rgb = np.asarray(image)
    return RenderedSlice(np.ascontiguousarray(rgb), shown_labels, legend, drawn, pixel_mm)


# ----------------------------------------------------------------------------- datasets

@dataclass
class SampleRef:
    """What the preview needs of one scanned sample."""
    image: Any                          # the image reference (str or list of channel files)
    name: str
    labels: list[str]
    series_files: list[str] | None = None
    mask: str | None = None
    boxes: list[list[float]] = field(default_factory=list)
    box_labels: list[str] = field(default_factory=list)


def sample_ref(sample) -> SampleRef:
    """A core.datasets.layouts.dispatch Sample -> SampleRef (mask from ``extra['label_path']``, boxes from
    ``extra['boxes']``/``extra['labels']``, DICOM series files from ``extra['series_files']``)."""
    image = sample.image
    first = image[0] if isinstance(image, list) else image
    extra = sample.extra or {}
    name = Path(str(first)).name + (f" (+{len(image) - 1} channels)"
                                    if isinstance(image, list) and len(image) > 1 else "")
    return SampleRef(image=image, name=name, labels=list(sample.label_list()),
                     series_files=list(extra["series_files"]) if extra.get("series_files")
                     else None, mask=extra.get("label_path") or None,
                     boxes=[list(b) for b in extra.get("boxes") or []],
                     box_labels=[str(x) for x in extra.get("labels") or []]
                     if extra.get("boxes") else [])


_SCANS = _LRU(max_items=4, max_bytes=1 << 62, size_of=lambda s: 0)


def dataset_scan(root: str | Path, description: str = ""):
    """core.datasets.layouts.dispatch.scan_folder of a dataset folder, cached by folder and its modification time.
    Raises PreviewError (with the scanner's advice) when the folder cannot be scanned."""
    path = Path(root)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise PreviewError(f"dataset folder {path} does not exist on this server") from None
    try:
        return _SCANS.get(("scan", str(path), description, stamp),
                          lambda: scan_folder(path, description))
    except (ScanError, OSError, ValueError) as exc:
        raise PreviewError(f"cannot list the dataset's images: {exc}") from None


def class_groups(samples: Sequence) -> dict[str, list[int]]:
    """Class -> indices of its samples (multi-label: every label; no label: 'no label')."""
    groups: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        for label in sample.label_list() or ["no label"]:
            groups.setdefault(str(label), []).append(i)
    return groups


_THUMBS = _LRU(max_items=512, max_bytes=32 << 20, size_of=len)


def thumbnail(ref: SampleRef, size: int = THUMB_SIDE, allow_pickle: bool = False,
              modality: str = "", class_names: Sequence[str] = ()) -> bytes:
    """A small PNG of a sample (middle slice, or the slice with most mask / the first box),
    with its mask and boxes; cached by path and modification time. Raises PreviewError."""
    size = int(min(max(size, 32), 256))
    stamp = _stamp(ref.image, ref.series_files) + (_stamp(ref.mask) if ref.mask else ())
    key = ("thumb", str(ref.image), size, allow_pickle, modality, tuple(class_names),
           str(ref.boxes), stamp)

    def make() -> bytes:
        arr, meta = _read(ref.image, allow_pickle, ref.series_files)
        volume = build_volume(arr, meta, ref.image, modality, max_voxels=THUMB_VOXELS)
        del arr
        mask = None
        if ref.mask:
            try:
                mask = mask_to_display(_read(ref.mask, allow_pickle, None)[0], volume, ref.mask)
            except PreviewError:
                mask = None
        boxes = display_boxes(ref.boxes, volume)
        axis = volume.default_axis
        fixed = FIXED_AXIS[axis]
        index = volume.n_slices(axis) // 2
        if mask is not None and mask.any():
            other = tuple(a for a in range(3) if a != fixed)
            index = int(np.argmax((mask > 0).sum(axis=other)))
        elif boxes:
            index = int(min(max((boxes[0][fixed] + boxes[0][fixed + 3]) / 2, 0),
                            volume.n_slices(axis) - 1))
        name = default_window_name(volume)
        shown = render_slice(volume, axis, index, window_for(volume, name), mask=mask,
                             class_names=class_names, boxes=boxes, box_labels=ref.box_labels,
                             box_class_names=class_names, max_side=size)
        return shown.png()
    return _THUMBS.get(key, make)


@dataclass
class Thumb:
    name: str
    png: bytes | None
    error: str = ""


@dataclass
class ClassThumbs:
    name: str
    count: int
    thumbs: list[Thumb]


def class_thumbnails(scan, per_class: int = 4, max_classes: int = MAX_THUMB_CLASSES,
                     size: int = THUMB_SIDE, allow_pickle: bool = False, modality: str = "",
                     class_names: Sequence[str] = (), seed: int = 0) -> list[ClassThumbs]:
    """A few samples per class (seeded choice) as thumbnails; at most ``max_classes`` classes
    (the largest) and ``per_class`` (<= MAX_THUMBS_PER_CLASS) each. An unreadable sample gets
    its error instead of an image."""
    per_class = int(min(max(per_class, 1), MAX_THUMBS_PER_CLASS))
    groups = class_groups(scan.samples)
    chosen = sorted(groups, key=lambda c: (-len(groups[c]), c))[:max(1, int(max_classes))]
    out = []
    for name in sorted(chosen):
        indices = groups[name]
        picks = sorted(random.Random(f"{seed}:{name}").sample(indices,
                                                              min(per_class, len(indices))))
        thumbs = []
        for i in picks:
            ref = sample_ref(scan.samples[i])
            try:
                thumbs.append(Thumb(ref.name, thumbnail(ref, size, allow_pickle, modality,
                                                        class_names)))
            except PreviewError as exc:
                thumbs.append(Thumb(ref.name, None, str(exc)))
        out.append(ClassThumbs(name, len(indices), thumbs))
    return out
