"""One image reader for every template: an index image reference -> a channel-first array.

An index ``image_path`` (and a ``label_path``) may be any of these references:

* an image file: NIfTI (``.nii``/``.nii.gz``, nibabel through MONAI), NRRD/MHA/MHD (SimpleITK),
  PNG/JPEG/BMP/TIFF (PIL through MONAI), a DICOM file (pydicom; any suffix or none);
* a folder of 2D slices forming one 3D image: DICOM slices are ordered by their position along
  the slice normal (``ImagePositionPatient`` projected on the normal of
  ``ImageOrientationPatient``), never by file name; PNG/JPEG/... slices in natural-number order
  of their names (``slice_2`` before ``slice_10``);
* a series manifest ``<SeriesInstanceUID>.series.json``: ``{"series_instance_uid": ...,
  "files": [DICOM paths ordered by position]}`` (relative paths are relative to the manifest);
* an array file ``.npy``/``.npz``/``.pt``, or an element of one: ``file.npz::key[i]``,
  ``file.npz::key``, ``file.npy::[i]``, ``file.pt::[i]``;
* a pickled array ``.pck``/``.pkl``/``.pickle`` (and its elements), read ONLY when the caller
  passes ``allow_pickle=True``: unpickling runs code from the file;
* a list of any of these (or its JSON text, as a dict-keyed index must store it): channels in
  that fixed order (e.g. MRI sequences), stacked along the channel axis.

``read_image`` returns ``(array, meta)``: a float32 array ``(C, *spatial)`` in MONAI's axis order
(the first spatial axis is the image column, x; a stacked volume's slices are the last axis)
and a small dict with ``format``, ``spatial_shape``, and where the format has them ``affine``
(RAS, like MONAI's readers) and ``spacing`` (mm per spatial axis). ``ImageRefReader`` is the same
reader as a MONAI ``ImageReader``, so templates keep ``LoadImage``/``LoadImaged(reader=...)``.

Arrays without a channel axis get one. A stored array's layout is read this way: ``(H, W)`` one
channel; ``(H, W, 3|4)`` colour channels last; ``(1, H, W)`` one channel first; any other 3D
array a one-channel volume (``(4, H, W)`` is 4 slices); 4D: channels first when the first axis
has at most 4 entries, else channels last when the last has. Arrays keep their stored axis
order (no transpose).
"""
from __future__ import annotations

import json
import os
import pickle
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

RASTER_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
NIFTI_SUFFIXES = (".nii", ".nii.gz")
ITK_SUFFIXES = (".nrrd", ".nhdr", ".mha", ".mhd")
DICOM_SUFFIXES = (".dcm", ".dicom", ".ima")
PICKLE_SUFFIXES = (".pck", ".pkl", ".pickle")
ARRAY_SUFFIXES = (".npy", ".npz", ".pt", ".pth") + PICKLE_SUFFIXES
MANIFEST_SUFFIX = ".series.json"
# suffixes that are certainly not DICOM: a suffix-less or unknown file is probed for DICOM
NOT_DICOM_SUFFIXES = RASTER_SUFFIXES + NIFTI_SUFFIXES + ITK_SUFFIXES + ARRAY_SUFFIXES + (
    ".json", ".csv", ".tsv", ".txt", ".md", ".xlsx", ".xls", ".xml", ".html", ".pdf", ".zip",
    ".gz", ".raw", ".py", ".yaml", ".yml", ".log", ".ini")
ELEMENT_RE = re.compile(r"^(?P<file>.+?\.(?:npz|npy|pt|pth|pck|pkl|pickle))::"
                        r"(?P<key>[^\[\]]*)(?:\[(?P<index>-?\d+)\])?$", re.IGNORECASE)
PICKLE_REFUSED = ("{ref}: unpickling a file runs code stored in it, so pickled images are "
                  "read only for registered local datasets whose dataloader sets "
                  "ALLOW_PICKLE = True (read_image(..., allow_pickle=True)). Convert the "
                  "arrays to .npy/.npz to avoid this.")
_CACHE_BYTES = 1 << 30  # whole arrays kept per process for element refs (npz keys, .pt, pickles)


class ImageReadError(ValueError):
    """An image reference cannot be read; the message names the reference and what to do."""


def suffix_of(path: str | os.PathLike) -> str:
    name = Path(path).name.lower()
    if name.endswith(".nii.gz"):
        return ".nii.gz"
    if name.endswith(MANIFEST_SUFFIX):
        return MANIFEST_SUFFIX
    return os.path.splitext(name)[1]


def natural_key(path: Path) -> list:
    """``slice_2`` before ``slice_10``: digit runs compare as numbers."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.name)]


def is_dicom_file(path: Path) -> bool:
    """A DICOM suffix, or any other not-obviously-other file whose preamble says DICM."""
    suffix = suffix_of(path)
    if suffix in DICOM_SUFFIXES:
        return True
    if suffix in NOT_DICOM_SUFFIXES or path.name.startswith(".") or \
            path.name.upper() == "DICOMDIR":  # a DICOMDIR indexes files; it holds no image
        return False
    from pydicom.misc import is_dicom
    try:
        return is_dicom(str(path))
    except OSError:
        return False


def parse_ref(ref: Any) -> str | list[str]:
    """A path, a list of paths (channels) or a JSON list in a string -> str or list of str."""
    if isinstance(ref, (list, tuple)):
        if not ref:
            raise ImageReadError("an empty list of channel files is not an image")
        return [str(r) for r in ref] if len(ref) > 1 else str(ref[0])
    text = str(ref)
    if text.startswith("[") and text.endswith("]"):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and items and all(isinstance(i, str) for i in items):
            return items if len(items) > 1 else items[0]
    return text


def ref_files(ref: Any) -> list[Path]:
    """The files (or folders) a reference depends on: what must exist for it to be readable."""
    parsed = parse_ref(ref)
    if isinstance(parsed, list):
        return [p for r in parsed for p in ref_files(r)]
    match = ELEMENT_RE.match(parsed)
    return [Path(match.group("file") if match else parsed)]


def ref_exists(ref: Any) -> bool:
    """Whether every file a reference names exists (an element ref: its array file)."""
    return all(p.exists() for p in ref_files(ref))


# ----------------------------------------------------------------------------- array layout

def _channel_rule(shape: Sequence[int]) -> str:
    """How a stored array holds channels: "none" (add one), "first" or "last"."""
    if len(shape) == 2:
        return "none"
    if len(shape) == 3:
        if shape[-1] in (3, 4) and min(shape[:2]) > 4:
            return "last"
        if shape[0] == 1:
            return "first"
        return "none"
    if len(shape) == 4:
        if shape[0] <= 4:
            return "first"
        if shape[-1] <= 4:
            return "last"
    return "invalid"


def array_layout(shape: Sequence[int], ref: str = "") -> tuple[list[int], int]:
    """(spatial shape, channels) of a stored array shape, by the rule in the module docstring."""
    rule = _channel_rule(shape)
    if rule == "invalid":
        raise ImageReadError(f"{ref}: an array of shape {tuple(shape)} is not a 2D or 3D image "
                             "(expected (H, W), (H, W, 3), (1, H, W), (D, H, W) or "
                             "(C, D, H, W))")
    shape = [int(s) for s in shape]
    if rule == "none":
        return shape, 1
    return (shape[1:], shape[0]) if rule == "first" else (shape[:-1], shape[-1])


def array_channels_first(arr: np.ndarray, ref: str = "") -> np.ndarray:
    """Stored array -> (C, *spatial) by the layout rule in the module docstring."""
    array_layout(arr.shape, ref)  # raises for shapes that are no image
    rule = _channel_rule(arr.shape)
    return arr[None] if rule == "none" else arr if rule == "first" else np.moveaxis(arr, -1, 0)


def _nbytes(value: Any) -> int:
    """Memory an object loaded from an array file holds (a memory map: none)."""
    if isinstance(value, np.memmap):
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):  # a torch tensor
        return int(value.element_size() * value.nelement())
    return 0


class _ArrayCache:
    """Loaded array files (and npz members) for element refs, by (file, modification time[,
    key]); least recently used out first, at most ``max_items`` entries (open files) and
    ``limit`` bytes: many refs into one large array file load it once per process."""

    def __init__(self, limit: int = _CACHE_BYTES, max_items: int = 32):
        self.limit, self.max_items = limit, max_items
        self.items: OrderedDict = OrderedDict()
        self.size = 0

    def get(self, key: tuple, load):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key][0]
        value = load()
        nbytes = _nbytes(value)
        if nbytes <= self.limit:
            while self.items and (self.size + nbytes > self.limit or
                                  len(self.items) >= self.max_items):
                _, (_, old) = self.items.popitem(last=False)
                self.size -= old
            self.items[key] = (value, nbytes)
            self.size += nbytes
        return value


_ARRAYS = _ArrayCache()
_NO_CACHE = _ArrayCache(limit=-1)  # stores nothing: whole-file refs are read once each


def _to_numpy(value: Any, ref: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise ImageReadError(f"{ref}: holds Python objects, not an image array")
        return value
    try:
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().float().numpy() if value.dtype == torch.bfloat16 \
                else value.detach().cpu().numpy()
    except ImportError:  # pragma: no cover - torch is a template dependency
        pass
    if isinstance(value, (list, tuple)) and value and all(np.isscalar(v) for v in value):
        return np.asarray(value)
    raise ImageReadError(f"{ref}: holds a {type(value).__name__}, not an image array; name an "
                         "array in it as file::key or file::key[index]")


def _load_container(path: Path, allow_pickle: bool, ref: str, cache: bool) -> Any:
    """The object stored in an array file: ndarray (npy, memory-mapped), NpzFile, tensor or
    dict/list of them (pt, pickle). ``cache``: keep it for further element refs."""
    suffix = suffix_of(path)
    if suffix in PICKLE_SUFFIXES and not allow_pickle:
        raise ImageReadError(PICKLE_REFUSED.format(ref=ref))
    if not path.is_file():
        raise FileNotFoundError(f"{ref}: {path} does not exist")
    stamp = (str(path), path.stat().st_mtime_ns)
    store = _ARRAYS if cache else _NO_CACHE
    if suffix == ".npy":
        def load():
            try:
                return np.load(path, mmap_mode="r", allow_pickle=False)
            except ValueError as exc:
                raise ImageReadError(f"{ref}: {path.name} holds pickled Python objects, not "
                                     "a plain array; save it with allow_pickle=False") from exc
        return store.get(stamp, load)
    if suffix == ".npz":
        return store.get(stamp, lambda: np.load(path, allow_pickle=False))
    if suffix in (".pt", ".pth"):
        import torch

        def load_pt():
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:
                raise ImageReadError(f"{ref}: not a tensor file torch.load(weights_only=True) "
                                     f"accepts ({type(exc).__name__}: {str(exc)[:160]})") from exc
        return store.get(stamp, load_pt)

    def load_pickle():
        with open(path, "rb") as handle:
            try:
                return pickle.load(handle)  # noqa: S301 - allowed only for registered datasets
            except Exception as exc:
                raise ImageReadError(f"{ref}: cannot be unpickled ({type(exc).__name__}: "
                                     f"{str(exc)[:160]})") from exc
    return store.get(stamp, load_pickle)


def _select(container: Any, key: str, index: str | None, ref: str, stamp: tuple,
            store: _ArrayCache) -> np.ndarray:
    """container[key][index] as an ndarray (npz members loaded once into ``store``)."""
    value = container
    if key:
        try:
            if isinstance(container, np.lib.npyio.NpzFile):
                value = store.get((*stamp, key), lambda: container[key])
            elif isinstance(container, (list, tuple)):
                value = container[int(key)]
            else:
                value = container[key]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            keys = list(getattr(container, "keys", lambda: [])())[:10]
            raise ImageReadError(f"{ref}: no array {key!r} in the file (keys: {keys})") from exc
    elif isinstance(container, np.lib.npyio.NpzFile) or isinstance(container, dict):
        keys = list(container.keys())
        if len(keys) != 1:
            raise ImageReadError(f"{ref}: the file holds {len(keys)} arrays {keys[:10]}; name "
                                 "one as file::key or file::key[index]")
        value = store.get((*stamp, keys[0]), lambda: container[keys[0]]) \
            if isinstance(container, np.lib.npyio.NpzFile) else container[keys[0]]
    if index is not None:
        try:
            value = value[int(index)]
        except (IndexError, TypeError) as exc:
            length = len(value) if hasattr(value, "__len__") else "no"
            raise ImageReadError(f"{ref}: index {index} is out of range ({length} "
                                 "elements)") from exc
    return _to_numpy(value, ref)


def _read_array_ref(ref: str, allow_pickle: bool) -> tuple[np.ndarray, dict]:
    """An array file, or an element of one (whose file stays cached for the next element)."""
    match = ELEMENT_RE.match(ref)
    path = Path(match.group("file") if match else ref)
    key = match.group("key").strip() if match else ""
    index = match.group("index") if match else None
    container = _load_container(path, allow_pickle, ref, cache=bool(match))
    stamp = (str(path), path.stat().st_mtime_ns)
    arr = _select(container, key, index, ref, stamp, _ARRAYS if match else _NO_CACHE)
    arr = array_channels_first(np.asarray(arr), ref)
    return arr, {"format": suffix_of(path).lstrip(".")}


# ----------------------------------------------------------------------------- DICOM

def slice_order(positions: Sequence[Sequence[float] | None],
                orientations: Sequence[Sequence[float] | None],
                instance_numbers: Sequence[Any] | None = None,
                names: Sequence[str] | None = None) -> tuple[list[int], dict]:
    """Order of the slices of one series along the slice normal.

    Each slice's ``ImagePositionPatient`` is projected on the normal (row direction x column
    direction of ``ImageOrientationPatient``); slices are sorted by that distance, ascending.
    Without positions on every slice, ``InstanceNumber`` orders them (recorded in the result).
    Returns (order, {"ordered_by", "step" (vector first->next slice, mm), "slice_spacing",
    "uniform"}). Raises ImageReadError for mixed orientations or two slices at one position
    (a 4D or multi-echo series)."""
    n = len(positions)
    names = list(names) if names is not None else [str(i) for i in range(n)]
    if n == 1:
        return [0], {"ordered_by": "single", "step": None, "slice_spacing": None,
                     "uniform": True}
    if all(p is not None and len(p) == 3 for p in positions) and \
            all(o is not None and len(o) == 6 for o in orientations):
        iop = np.asarray(orientations, dtype=float)
        if np.abs(iop - iop[0]).max() > 1e-3:
            other = names[int(np.abs(iop - iop[0]).max(1).argmax())]
            raise ImageReadError(f"slices of one series have different orientations (e.g. "
                                 f"{names[0]} and {other}): not one volume")
        normal = np.cross(iop[0, :3], iop[0, 3:])
        ipp = np.asarray(positions, dtype=float)
        distance = ipp @ normal
        order = [int(i) for i in np.argsort(distance, kind="stable")]
        gaps = np.diff(distance[order])
        if (gaps < 1e-3).any():
            first = int(np.argmax(gaps < 1e-3))
            raise ImageReadError(
                f"{int((gaps < 1e-3).sum()) + 1} slices share a position (e.g. "
                f"{names[order[first]]} and {names[order[first + 1]]}): a series with several "
                "images per position (time points, echoes, b-values) is not one 3D volume")
        step = (ipp[order[-1]] - ipp[order[0]]) / (n - 1)
        spacing = float(np.linalg.norm(step))
        uniform = bool(np.abs(gaps - gaps.mean()).max() <= 0.01 * max(gaps.mean(), 1e-6) + 1e-3)
        return order, {"ordered_by": "position", "step": step.tolist(),
                       "slice_spacing": spacing, "uniform": uniform}
    numbers = list(instance_numbers or [])
    try:
        values = [int(float(v)) for v in numbers] if len(numbers) == n else []
    except (TypeError, ValueError):
        values = []
    if values and len(set(values)) == n:
        order = sorted(range(n), key=lambda i: values[i])
        return order, {"ordered_by": "instance_number", "step": None, "slice_spacing": None,
                       "uniform": True}
    raise ImageReadError("cannot order the slices: they lack ImagePositionPatient/"
                         "ImageOrientationPatient and distinct InstanceNumbers (file names are "
                         f"never used), e.g. {names[0]}")


def _floats(value: Any) -> list[float] | None:
    try:
        return [float(v) for v in value] if value is not None else None
    except (TypeError, ValueError):
        return None


def dicom_pixels(ds: Any, ref: str = "") -> np.ndarray:
    """Pixel values in modality units (rescale slope/intercept or the modality LUT applied: HU
    for CT); MONOCHROME1 inverted so that larger always means brighter; palette colour
    expanded to RGB. Returns pydicom's layout: (rows, cols[, samples]) or (frames, rows, ...)."""
    from pydicom.pixels import apply_color_lut, apply_modality_lut
    try:
        arr = ds.pixel_array
    except Exception as exc:
        syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
        raise ImageReadError(f"{ref}: DICOM pixel data cannot be decoded "
                             f"({type(exc).__name__}: {str(exc)[:160]}); transfer syntax "
                             f"{getattr(syntax, 'name', syntax)}. Compressed DICOM needs "
                             "pylibjpeg / pylibjpeg-openjpeg / pylibjpeg-rle") from exc
    photometric = str(getattr(ds, "PhotometricInterpretation", "MONOCHROME2")).upper()
    if photometric == "PALETTE COLOR":
        return apply_color_lut(arr, ds).astype(np.float32)
    if int(getattr(ds, "SamplesPerPixel", 1)) != 1:
        return arr.astype(np.float32)
    out = np.asarray(apply_modality_lut(arr, ds), dtype=np.float32)
    if photometric == "MONOCHROME1":
        bits = int(getattr(ds, "BitsStored", 8 * arr.dtype.itemsize))
        signed = int(getattr(ds, "PixelRepresentation", 0)) == 1
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        ends = np.asarray(apply_modality_lut(np.asarray([lo, hi], dtype=arr.dtype), ds),
                          dtype=np.float64)
        out = (ends.min() + ends.max() - out).astype(np.float32)
    return out


def _dicom_affine(ipp, iop, pixel_spacing, step) -> np.ndarray | None:
    """RAS affine for array axes (column, row, slice), as MONAI's DICOM reader builds it."""
    if ipp is None or iop is None or len(ipp) != 3 or len(iop) != 6:
        return None
    row_sp, col_sp = (pixel_spacing or [1.0, 1.0])[:2]
    row_dir, col_dir = np.asarray(iop[:3]), np.asarray(iop[3:])
    lps = np.eye(4)
    lps[:3, 0] = row_dir * col_sp   # along a row: next column
    lps[:3, 1] = col_dir * row_sp   # along a column: next row
    lps[:3, 2] = np.asarray(step) if step is not None else np.cross(row_dir, col_dir)
    lps[:3, 3] = ipp
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


def _dicom_to_channels_first(pixels: np.ndarray, frames: int, samples: int) -> np.ndarray:
    """pydicom layout -> (C, cols, rows[, frames])."""
    if frames > 1:  # (F, R, C[, S])
        arr = pixels if samples > 1 else pixels[..., None]
        return np.transpose(arr, (3, 2, 1, 0))
    arr = pixels if samples > 1 else pixels[..., None]  # (R, C, S)
    return np.transpose(arr, (2, 1, 0))


def _read_dicom_file(path: Path) -> tuple[np.ndarray, dict]:
    import pydicom
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as exc:
        raise ImageReadError(f"{path}: not a readable DICOM file ({type(exc).__name__}: "
                             f"{str(exc)[:160]})") from exc
    if "PixelData" not in ds and "FloatPixelData" not in ds and "DoubleFloatPixelData" not in ds:
        raise ImageReadError(f"{path}: a DICOM file without pixel data "
                             f"({getattr(ds, 'Modality', '?')} {getattr(ds, 'SOPClassUID', '')})")
    frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
    samples = int(getattr(ds, "SamplesPerPixel", 1) or 1)
    pixels = dicom_pixels(ds, str(path))
    if str(getattr(ds, "PhotometricInterpretation", "")).upper() == "PALETTE COLOR":
        samples = 3
    arr = _dicom_to_channels_first(pixels, frames, samples)
    pixel_spacing = _floats(getattr(ds, "PixelSpacing", None))
    spacing = [pixel_spacing[1], pixel_spacing[0]] if pixel_spacing else None
    step = None
    if frames > 1 and spacing:
        between = getattr(ds, "SpacingBetweenSlices", None) or getattr(ds, "SliceThickness", None)
        spacing.append(float(between) if between else 1.0)
    iop = _floats(getattr(ds, "ImageOrientationPatient", None))
    if frames > 1 and iop and spacing:
        step = (np.cross(iop[:3], iop[3:]) * spacing[2]).tolist()
    meta = {"format": "dicom", "modality": str(getattr(ds, "Modality", "")),
            "photometric": str(getattr(ds, "PhotometricInterpretation", ""))}
    affine = _dicom_affine(_floats(getattr(ds, "ImagePositionPatient", None)), iop,
                           pixel_spacing, step)
    if affine is not None:
        meta["affine"] = affine
    if spacing:
        meta["spacing"] = spacing
    return arr, meta


def read_dicom_series(files: Sequence[str | os.PathLike], ref: str = "",
                      expected_uid: str | None = None,
                      images_only: bool = False) -> tuple[np.ndarray, dict]:
    """DICOM files of one series -> (C, cols, rows, slices), slices ordered by position.
    ``images_only`` drops files without pixel data (reports, presentation states beside the
    slices of a folder) instead of failing on them."""
    import pydicom
    paths = [Path(f) for f in files]
    datasets = []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{ref}: series file {path} does not exist")
        try:
            datasets.append(pydicom.dcmread(str(path)))
        except Exception as exc:
            raise ImageReadError(f"{ref}: {path} is not a readable DICOM file "
                                 f"({type(exc).__name__}: {str(exc)[:120]})") from exc
    if images_only:
        kept = [(p, ds) for p, ds in zip(paths, datasets) if "PixelData" in ds]
        paths, datasets = [p for p, _ in kept], [ds for _, ds in kept]
    if not paths:
        raise ImageReadError(f"{ref}: no DICOM image files")
    uids = {str(getattr(ds, "SeriesInstanceUID", "")) for ds in datasets}
    if len(uids) > 1:
        raise ImageReadError(
            f"{ref}: the files belong to {len(uids)} DICOM series ({', '.join(sorted(uids)[:3])}"
            "...); a 3D image is one series. Index each series as its own "
            "<SeriesInstanceUID>.series.json manifest (the Data Engineer's DICOM layout does)")
    if expected_uid and uids != {expected_uid}:
        raise ImageReadError(f"{ref}: the files are series {uids.pop()}, the manifest names "
                             f"{expected_uid}")
    order, geometry = slice_order(
        [_floats(getattr(ds, "ImagePositionPatient", None)) for ds in datasets],
        [_floats(getattr(ds, "ImageOrientationPatient", None)) for ds in datasets],
        [getattr(ds, "InstanceNumber", None) for ds in datasets],
        [p.name for p in paths])
    datasets = [datasets[i] for i in order]
    paths = [paths[i] for i in order]
    shapes = {(int(ds.Rows), int(ds.Columns)) for ds in datasets}
    if len(shapes) > 1:
        raise ImageReadError(f"{ref}: slices of the series have different sizes {sorted(shapes)}")
    if any(int(getattr(ds, "NumberOfFrames", 1) or 1) > 1 for ds in datasets):
        raise ImageReadError(f"{ref}: a series of multi-frame files is not one 3D volume; "
                             "index each file on its own")
    slices = [dicom_pixels(ds, str(p)) for ds, p in zip(datasets, paths)]
    if len({s.shape for s in slices}) > 1:
        raise ImageReadError(f"{ref}: slices have different sample layouts")
    stack = np.stack(slices, axis=0)  # (S, R, C[, samples])
    stack = stack if stack.ndim == 4 else stack[..., None]
    arr = np.transpose(stack, (3, 2, 1, 0))  # (samples, C, R, S)
    first = datasets[0]
    pixel_spacing = _floats(getattr(first, "PixelSpacing", None))
    iop = _floats(getattr(first, "ImageOrientationPatient", None))
    step = geometry["step"]
    if step is None and iop is not None:
        thickness = float(getattr(first, "SliceThickness", 0) or 0) or 1.0
        step = (np.cross(iop[:3], iop[3:]) * thickness).tolist()
    spacing = None
    if pixel_spacing:
        spacing = [pixel_spacing[1], pixel_spacing[0],
                   geometry["slice_spacing"] or float(getattr(first, "SliceThickness", 0) or 1.0)]
    meta = {"format": "dicom_series", "modality": str(getattr(first, "Modality", "")),
            "series_instance_uid": uids.pop(), "num_slices": len(slices),
            "slice_order": geometry["ordered_by"], "uniform_spacing": geometry["uniform"],
            "stacked_slices": True}
    affine = _dicom_affine(_floats(getattr(first, "ImagePositionPatient", None)), iop,
                           pixel_spacing, step)
    if affine is not None:
        meta["affine"] = affine
    if spacing:
        meta["spacing"] = spacing
    return arr, meta


def read_manifest(path: Path) -> tuple[list[Path], str | None]:
    """The ordered files and series UID of a ``*.series.json`` manifest."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ImageReadError(f"{path}: not a readable series manifest ({exc})") from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not files:
        raise ImageReadError(f"{path}: a series manifest needs a non-empty \"files\" list")
    resolved = [Path(f) if Path(f).is_absolute() else path.parent / f for f in files]
    return resolved, manifest.get("series_instance_uid")


# ----------------------------------------------------------------------------- other formats

_MONAI_READERS: dict = {}


def _monai_reader(name: str):
    if name not in _MONAI_READERS:
        from monai.data import NibabelReader, PILReader
        _MONAI_READERS[name] = {"nibabel": NibabelReader, "pil": PILReader}[name]()
    return _MONAI_READERS[name]


def _via_monai(name: str, path: Path, fmt: str) -> tuple[np.ndarray, dict]:
    """NIfTI and raster files through MONAI's own readers (their axis order and affine)."""
    reader = _monai_reader(name)
    try:
        arr, meta = reader.get_data(reader.read(str(path)))
    except Exception as exc:
        raise ImageReadError(f"{path}: cannot be read as {fmt} ({type(exc).__name__}: "
                             f"{str(exc)[:160]})") from exc
    channel = meta.get("original_channel_dim")
    arr = np.asarray(arr)
    arr = arr[None] if channel is None or (isinstance(channel, float) and np.isnan(channel)) \
        else np.moveaxis(arr, int(channel), 0)
    out = {"format": fmt}
    if meta.get("affine") is not None:
        from monai.data.utils import affine_to_spacing
        affine = np.asarray(meta["affine"], dtype=np.float64)
        out["affine"] = affine
        out["spacing"] = [float(s) for s in affine_to_spacing(affine, r=arr.ndim - 1)]
    return arr, out


def _read_itk(path: Path) -> tuple[np.ndarray, dict]:
    """NRRD / MHA / MHD with SimpleITK: array (C, x, y[, z]) and the RAS affine."""
    import SimpleITK as sitk
    try:
        image = sitk.ReadImage(str(path))
    except RuntimeError as exc:
        raise ImageReadError(f"{path}: SimpleITK cannot read it ({str(exc).strip()[:200]})") \
            from exc
    arr = sitk.GetArrayFromImage(image)  # (z, y, x[, components])
    dims = image.GetDimension()
    if image.GetNumberOfComponentsPerPixel() > 1:
        arr = np.moveaxis(arr, -1, 0)
        arr = np.transpose(arr, (0, *range(dims, 0, -1)))
    else:
        arr = np.transpose(arr, tuple(range(dims - 1, -1, -1)))[None]
    direction = np.asarray(image.GetDirection()).reshape(dims, dims)
    lps = np.eye(dims + 1)
    lps[:dims, :dims] = direction * np.asarray(image.GetSpacing())[None, :]
    lps[:dims, dims] = image.GetOrigin()
    flip = np.eye(dims + 1)
    flip[0, 0] = flip[1, 1] = -1.0
    return arr, {"format": suffix_of(path).lstrip("."), "affine": flip @ lps,
                 "spacing": [float(s) for s in image.GetSpacing()]}


def _read_file(path: Path) -> tuple[np.ndarray, dict]:
    suffix = suffix_of(path)
    if suffix in NIFTI_SUFFIXES:
        return _via_monai("nibabel", path, "nifti")
    if suffix in RASTER_SUFFIXES:
        return _via_monai("pil", path, suffix.lstrip(".").replace("jpeg", "jpg"))
    if suffix in ITK_SUFFIXES:
        return _read_itk(path)
    if is_dicom_file(path):
        return _read_dicom_file(path)
    raise ImageReadError(f"{path}: unsupported image format {suffix or '(no suffix)'}; "
                         "supported: NIfTI, NRRD/MHA, PNG/JPEG/BMP/TIFF, DICOM, .npy/.npz/.pt, "
                         "a folder of slices, a *.series.json manifest")


def _read_folder(folder: Path) -> tuple[np.ndarray, dict]:
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    raster = sorted((p for p in files if suffix_of(p) in RASTER_SUFFIXES), key=natural_key)
    if raster:
        slices = [_via_monai("pil", p, "slice")[0] for p in raster]
        if len({s.shape[0] for s in slices}) > 1:  # gray and colour slices mixed: all gray
            slices = [s[:3].mean(0, keepdims=True) for s in slices]
        shapes = {s.shape for s in slices}
        if len(shapes) > 1:
            raise ImageReadError(f"{folder}: slices have different sizes {sorted(shapes)[:3]}")
        return np.stack(slices, axis=-1), {"format": "slices", "num_slices": len(slices),
                                           "stacked_slices": True}
    dicoms = [p for p in files if is_dicom_file(p)]
    if dicoms:
        return read_dicom_series(dicoms, str(folder), images_only=True)
    raise ImageReadError(f"no image slices in folder {folder} (PNG/JPEG/BMP/TIFF or DICOM files)")


def _read_one(ref: str, allow_pickle: bool) -> tuple[np.ndarray, dict]:
    if ELEMENT_RE.match(ref):
        return _read_array_ref(ref, allow_pickle)
    path = Path(ref).expanduser()
    suffix = suffix_of(path)
    if suffix in PICKLE_SUFFIXES and not allow_pickle:
        raise ImageReadError(PICKLE_REFUSED.format(ref=ref))
    if not path.exists():
        raise FileNotFoundError(f"image {ref} does not exist")
    if path.is_dir():
        return _read_folder(path)
    if suffix == MANIFEST_SUFFIX:
        files, uid = read_manifest(path)
        return read_dicom_series(files, ref, uid)
    if suffix in ARRAY_SUFFIXES:
        return _read_array_ref(ref, allow_pickle)
    return _read_file(path)


def read_image(ref: Any, allow_pickle: bool = False) -> tuple[np.ndarray, dict]:
    """Read an index image reference (see the module docstring) -> (float32 array (C,
    *spatial), meta). Channel lists are stacked on the channel axis; their spatial shapes must
    agree. Raises FileNotFoundError for a missing file and ImageReadError for anything else."""
    parsed = parse_ref(ref)
    if isinstance(parsed, list):
        parts = [_read_one(r, allow_pickle) for r in parsed]
        shapes = [a.shape[1:] for a, _ in parts]
        if len(set(shapes)) > 1:
            raise ImageReadError("channel files have different sizes: "
                                 + ", ".join(f"{Path(r).name} {tuple(s)}"
                                             for r, s in zip(parsed, shapes)))
        arr = np.concatenate([a for a, _ in parts], axis=0)
        meta = dict(parts[0][1])
        meta["channels_from"] = len(parsed)
    else:
        arr, meta = _read_one(parsed, allow_pickle)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    meta["spatial_shape"] = list(arr.shape[1:])
    meta["ref"] = parsed if isinstance(parsed, str) else json.dumps(parsed)
    return arr, meta


# ----------------------------------------------------------------------------- MONAI reader

try:
    from monai.data import ImageReader as _MonaiImageReader
except ImportError:  # pragma: no cover - every template environment has MONAI
    _MonaiImageReader = object  # type: ignore[assignment,misc]


class ImageRefReader(_MonaiImageReader):  # type: ignore[misc,valid-type]
    """``read_image`` as a MONAI reader: ``LoadImage(reader=ImageRefReader(allow_pickle))``.
    A sequence of names is one image whose channels are those files (MONAI's convention);
    the array comes channel-first with ``original_channel_dim`` 0 and the RAS affine."""

    def __init__(self, allow_pickle: bool = False):
        super().__init__()
        self.allow_pickle = allow_pickle

    def verify_suffix(self, filename) -> bool:
        names = [filename] if isinstance(filename, (str, os.PathLike)) else list(filename)
        for name in names:
            text = str(name)
            if ELEMENT_RE.match(text) or Path(text).is_dir():
                continue
            suffix = suffix_of(text)
            if suffix not in (RASTER_SUFFIXES + NIFTI_SUFFIXES + ITK_SUFFIXES + DICOM_SUFFIXES
                              + ARRAY_SUFFIXES + (MANIFEST_SUFFIX,)) and \
                    not is_dicom_file(Path(text)):
                return False
        return True

    def read(self, data, **kwargs):
        names = [data] if isinstance(data, (str, os.PathLike)) else list(data)
        return [str(n) for n in names]

    def get_data(self, img) -> tuple[np.ndarray, dict]:
        arr, meta = read_image(img, allow_pickle=self.allow_pickle)
        out = {k: v for k, v in meta.items() if k not in ("affine", "spacing", "ref")}
        out.update({"original_channel_dim": 0, "spatial_shape": np.asarray(arr.shape[1:]),
                    "image_ref": meta["ref"]})
        if "affine" in meta:
            out["affine"] = np.asarray(meta["affine"], dtype=np.float64)
            out["original_affine"] = out["affine"].copy()
            out["space"] = "RAS"
        if "spacing" in meta:
            out["spacing"] = np.asarray(meta["spacing"], dtype=np.float64)
        return arr, out
