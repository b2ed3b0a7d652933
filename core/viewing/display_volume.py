"""Display volumes for the image preview: any image reference an index can hold, read and kept
as a float32 ``(C, X, Y, Z)`` volume in RAS voxel order. No UI here (the page is
``pages/preview.py``); slices, windows and overlays are drawn by ``slice_render`` and
``overlays``.

* ``load_volume(ref)`` reads through ``core.imaging.image_io.read_image`` (NIfTI,
  NRRD/MHA, PNG/JPEG, DICOM files, folders of DICOM or PNG slices, series manifests,
  ``file.npz::key[i]``, ``.npy``) and keeps a *display volume*: float32 ``(C, X, Y, Z)`` in
  RAS voxel order (reoriented with nibabel from the image's affine; without one, in the stored
  order), downsampled by an integer stride so that it holds at most ``MAX_DISPLAY_VOXELS``.
  A 2D image is a volume of one axial slice.
* Views: ``axial`` (fixed z), ``coronal`` (fixed y), ``sagittal`` (fixed x) (``AXES``,
  ``FIXED_AXIS``).

Also here: ``PreviewError`` and the small LRU cache (keyed by path and modification time) that
the preview modules share, so that memory stays bounded.
"""
from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from core.imaging.dicom import read_dicom_series
from core.imaging.image_io import read_image
from core.imaging.refs import ELEMENT_RE, ImageReadError, parse_ref, ref_files, ref_items

MAX_DISPLAY_VOXELS = 1 << 24   # values kept per display volume, all channels (64 MB float32)
MAX_CHANNELS = 16              # channels (sequences, time points) kept for display
MAX_FOLDER_FILES = 4000        # a folder of slices with more files is refused (not one series)
MAX_READ_BYTES = 4 << 30       # files of one image larger than this (on disk) are refused
AXES = ("axial", "coronal", "sagittal")
FIXED_AXIS = {"axial": 2, "coronal": 1, "sagittal": 0}  # the RAS axis a view holds fixed
ARRAY_FORMATS = ("npy", "npz", "pt", "pth", "pck", "pkl", "pickle", "h5", "hdf5")
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


def _files(ref: Any, series_files: Sequence[str] | None, manifests: bool = False) -> list[Path]:
    """The files a preview reads (core.imaging.refs.ref_files, or the given series files);
    PreviewError naming a missing one. A folder is counted first: one with more than
    MAX_FOLDER_FILES files (a dataset root typed by mistake) is refused before it is listed."""
    if series_files:
        return [Path(p) for p in series_files]
    try:
        for item in ref_items(ref):
            path = Path(item).expanduser()
            if not ELEMENT_RE.match(item) and path.is_dir():
                _count_folder(path)
        return ref_files(ref, manifests=manifests)
    except FileNotFoundError as exc:
        raise PreviewError(f"{exc}. It must name a file or folder on this server (the machine "
                           "running M3Builder).") from None
    except ImageReadError as exc:
        raise PreviewError(str(exc)) from None
    except OSError as exc:
        raise PreviewError(f"{ref}: cannot be read ({exc.strerror or exc}). Give the app read "
                           "access to it.") from None


def _count_folder(path: Path) -> None:
    count = 0
    with os.scandir(path) as entries:
        for entry in entries:
            count += entry.is_file()
            if count > MAX_FOLDER_FILES:
                raise PreviewError(
                    f"{path} holds more than {MAX_FOLDER_FILES} files: a folder is read as the "
                    "slices of one 3D image. Give one image file, or the folder of one series.")


def _stamp(ref: Any, series_files: Sequence[str] | None = None) -> tuple:
    """(path, mtime_ns) of every file a reference reads (a series manifest too); PreviewError
    when one is missing (so a changed file is re-read and a missing one says so)."""
    out = []
    for path in _files(ref, series_files, manifests=True):
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
    stored_spacing: tuple[float, ...] | None = None  # from the file, per stored axis
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


def files_stamp(ref: Any, series_files: Sequence[str] | None = None) -> tuple:
    """(path, modification time) of every file an image reference reads: a cache key that
    changes when a file does. Raises PreviewError for a missing file."""
    return _stamp(ref, series_files)


def _number(value: float) -> str:
    return f"{value:.3g}"


def image_facts(stored_shape: Sequence[int], stored_spacing: Sequence[float] | None,
                oriented: bool, kind: str = "") -> str:
    """One line for a clinician: size, spacing and where it came from, the kind of image and
    how a volume is oriented."""
    is_3d = len(stored_shape) == 3
    unit = "voxels" if is_3d else "pixels"
    facts = [f"Size {' × '.join(str(int(n)) for n in stored_shape)} {unit}"]
    if stored_spacing:
        facts.append(f"{'Spacing' if is_3d else 'Pixel spacing'} "
                     f"{' × '.join(_number(s) for s in stored_spacing)} mm (from the file "
                     "header)")
    else:
        facts.append(f"No spacing stored in the file: shown with square {unit}")
    if kind:
        facts.append(kind)
    if is_3d:
        facts.append("shown in patient orientation from the file's affine (radiological: the "
                     "patient's right on the left)" if oriented else
                     "no orientation stored: axes shown in the stored order")
    return " · ".join(facts) + "."


def _check_size(ref: Any, series_files: Sequence[str] | None) -> None:
    """Refuse what would take unbounded time or memory to read for a preview: a folder with
    more than MAX_FOLDER_FILES files (a dataset root typed by mistake) or files (a series'
    slices, an array file an element points into) over MAX_READ_BYTES together."""
    total = sum(path.stat().st_size for path in _files(ref, series_files))
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


def image_layout(arr: np.ndarray, meta: dict, name: str) -> tuple[np.ndarray, dict, bool]:
    """``read_image``'s ``(array (C, *spatial), meta)`` as the viewers take it: a 2D image
    stored with one slice made 2D (its affine dropped, its spacing cut to two axes), and
    whether its channels are the colours of an RGB(A) picture. PreviewError when the array is
    not a 2D or 3D image."""
    if arr.ndim not in (3, 4):
        raise PreviewError(f"{name or 'the image'}: an array of shape {list(arr.shape[1:])} is "
                           "not a 2D or 3D image")
    fmt = str(meta.get("format", ""))
    spatial = list(arr.shape[1:])
    if len(spatial) == 3 and spatial[2] == 1:  # a 2D image stored with one slice
        arr, spatial = arr[..., 0], spatial[:2]
        meta = {k: v for k, v in meta.items() if k != "affine"}
        if meta.get("spacing"):
            meta["spacing"] = list(meta["spacing"])[:2]
    photometric = str(meta.get("photometric", "")).upper()
    rgb = arr.shape[0] in (3, 4) and len(spatial) == 2 and (
        fmt in RASTER_FORMATS or (fmt == "dicom" and photometric not in ("", "MONOCHROME1",
                                                                           "MONOCHROME2")))
    return arr, meta, rgb


def build_volume(arr: np.ndarray, meta: dict, ref: Any = "", modality: str = "",
                 max_voxels: int = MAX_DISPLAY_VOXELS) -> DisplayVolume:
    """A display volume from ``read_image``'s ``(array, meta)``."""
    arr, meta, rgb = image_layout(arr, meta, str(ref))
    fmt = str(meta.get("format", ""))
    spatial = list(arr.shape[1:])
    channels_total = int(arr.shape[0])
    arr = arr[:3] if rgb else arr[:MAX_CHANNELS]
    array_format = fmt in ARRAY_FORMATS
    ornt, oriented_by = _orientation(meta, len(spatial), array_format)
    factor = _stride(spatial, arr.shape[0], max_voxels)
    data = _to_display(np.asarray(arr, dtype=np.float32), factor, ornt).astype(np.float32)
    stored_spacing = [float(s) for s in (meta.get("spacing") or [])][:len(spatial)]
    has_spacing = len(stored_spacing) == len(spatial) and all(s > 0 for s in stored_spacing)
    file_spacing = tuple(stored_spacing) if has_spacing else None
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
        else None, stored_spacing=file_spacing, stats=stats)


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


def _view_axes(axis: str) -> tuple[int, int, int]:
    fixed = FIXED_AXIS[axis]
    u, v = [a for a in range(3) if a != fixed]
    return fixed, u, v

