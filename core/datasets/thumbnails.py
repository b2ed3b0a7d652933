"""Small PNG thumbnails of a few images per class, for the registration form's review step.

Bounded: at most ``per_class`` images for each of the first ``max_classes`` classes, read within
``seconds``; an image that cannot be read is counted and skipped (registration's validation
reports it properly). Raster files are read with PIL (orientation as stored); everything else
through the templates' reader (``core.imaging.image_io.read_image``), showing the middle
slice of a volume (a DICOM series sharing its folder with others: from its own files).
Pickled arrays are read only when the dataset is trusted. Nothing is written; the thumbnails
stay in memory and are never sent anywhere else.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from core.datasets.layouts.types import Sample, ScanResult
from core.imaging.dicom import read_dicom_series
from core.imaging.image_io import read_image
from core.imaging.refs import ELEMENT_RE, RASTER_SUFFIXES, ref_files, ref_items, suffix_of

ALL_IMAGES = "images"  # the group name when a dataset has no classes (reports)


@dataclass
class Thumbnails:
    by_class: dict[str, list[bytes]] = field(default_factory=dict)  # PNG bytes
    unreadable: int = 0
    timed_out: bool = False


def _to_uint8(arr: np.ndarray) -> np.ndarray:
    arr = np.nan_to_num(arr.astype(np.float32))
    lo, hi = np.percentile(arr, [1, 99]) if arr.size else (0.0, 1.0)
    if hi <= lo:
        lo, hi = float(arr.min()), float(arr.max())
    if hi <= lo:
        return np.zeros(arr.shape, dtype=np.uint8)
    return (np.clip((arr - lo) / (hi - lo), 0, 1) * 255).astype(np.uint8)


def _raster(path: str, size: int) -> Image.Image:
    with Image.open(path) as im:
        im.draft("L", (size, size))  # JPEG: decode at a reduced size
        if im.mode in ("RGB", "RGBA", "P", "CMYK", "YCbCr"):
            out = im.convert("RGB")
        elif im.mode in ("L", "LA", "1"):
            out = im.convert("L")
        else:  # 16-bit and float images: window to the 1st-99th percentile
            out = Image.fromarray(_to_uint8(np.asarray(im)))
    out.thumbnail((size, size))
    return out


def _other(ref, size: int, allow_pickle: bool, series_files=None) -> Image.Image:
    if series_files:  # one series of a folder holding several: its own files only
        arr, _meta = read_dicom_series([str(f) for f in series_files], str(ref),
                                       images_only=True)
    else:
        arr, _meta = read_image(ref, allow_pickle=allow_pickle)  # (C, *spatial), x before y
    if arr.ndim >= 4:  # a volume: its middle slice along the last axis
        arr = arr[..., arr.shape[-1] // 2]
    if arr.ndim == 3 and arr.shape[0] == 3:
        rgb = np.stack([_to_uint8(c) for c in arr], axis=-1)
        plane = np.transpose(rgb, (1, 0, 2))
    else:
        plane = _to_uint8(arr[0] if arr.ndim == 3 else arr).T
    out = Image.fromarray(np.ascontiguousarray(plane))
    out.thumbnail((size, size))
    return out


def thumbnail_png(ref, size: int = 96, allow_pickle: bool = False,
                  series_files=None) -> bytes:
    """A PNG thumbnail of an image reference (any form an index holds; a list of channels
    shows its first). ``series_files``: the DICOM files of one series sharing its folder.
    Raises ImageReadError (naming a missing file) or the reader's error."""
    first = ref_items(ref)[0]
    if not series_files:
        ref_files(first)  # a missing file (an element's array file, a slice) is named
    if suffix_of(first) in RASTER_SUFFIXES and not ELEMENT_RE.match(first):
        image = _raster(first, size)
    else:
        image = _other(first, size, allow_pickle, series_files)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _thumb(sample: Sample, size: int, allow_pickle: bool) -> bytes:
    return thumbnail_png(sample.image, size, allow_pickle, sample.extra.get("series_files"))


def _spread(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def class_thumbnails(scan: ScanResult, per_class: int = 3, max_classes: int = 12,
                     size: int = 96, seconds: float = 10.0,
                     allow_pickle: bool = False) -> Thumbnails:
    """Up to ``per_class`` thumbnails for each of the first ``max_classes`` classes."""
    groups: dict[str, list[Sample]] = {}
    for label in scan.classes[:max_classes]:
        groups[label] = [s for s in scan.samples if label in s.label_list()]
    if not any(groups.values()):  # no per-image classes (reports, masks): any images
        groups = {ALL_IMAGES: scan.samples}
    out = Thumbnails()
    deadline = time.monotonic() + seconds
    for label, samples in groups.items():
        shown: list[bytes] = []
        for sample in _spread(samples, per_class * 2):  # a spare for each unreadable one
            if len(shown) >= per_class:
                break
            if time.monotonic() > deadline:
                out.timed_out = True
                break
            try:
                shown.append(_thumb(sample, size, allow_pickle))
            except Exception:  # unreadable: validation names the file and the fix
                out.unreadable += 1
        out.by_class[label] = shown
    return out
