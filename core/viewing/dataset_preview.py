"""A dataset folder in the image preview: its scan (cached by folder and modification time),
its samples as ``SampleRef``, its classes, and ``class_thumbnails``: a few samples per class
rendered as small PNGs with their masks and boxes (cached in a small LRU).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanError
from core.viewing.display_volume import (FIXED_AXIS, PreviewError, _LRU, _read, _stamp,
                                         build_volume)
from core.viewing.overlays import display_boxes, mask_to_display
from core.viewing.slice_render import default_window_name, render_slice, window_for

THUMB_SIDE = 128
MAX_THUMBS_PER_CLASS = 8
MAX_THUMB_CLASSES = 12
THUMB_VOXELS = 1 << 20         # thumbnails read a volume, keep at most this many values


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
    mask_values: list[int] | None = None  # this mask's values of the labels, when not 1..N


def sample_ref(sample) -> SampleRef:
    """A core.datasets.layouts.dispatch Sample -> SampleRef (mask from ``extra['label_path']``,
    boxes from ``extra['boxes']``/``extra['labels']``, DICOM series files from
    ``extra['series_files']``)."""
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
                     if extra.get("boxes") else [],
                     mask_values=[int(v) for v in extra["label_values"]]
                     if extra.get("label_values") else None)


_SCANS = _LRU(max_items=4, max_bytes=1 << 62, size_of=lambda s: 0)


def dataset_scan(root: str | Path, description: str = "", interpretation: str = ""):
    """core.datasets.layouts.dispatch.scan_folder of a dataset folder, cached by folder and its
    modification time. Raises PreviewError (with the scanner's advice) when the folder cannot be
    scanned."""
    path = Path(root)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise PreviewError(f"dataset folder {path} does not exist on this server") from None
    try:
        return _SCANS.get(("scan", str(path), description, interpretation, stamp),
                          lambda: scan_folder(path, description, interpretation or None))
    except (ScanError, OSError, ValueError) as exc:
        raise PreviewError(f"cannot list the dataset's images: {exc}") from None


CASES = "Cases"


def mask_labels_of(scan, card_classes: Sequence[str] = ()) -> list[str] | None:
    """The label names of a segmentation dataset (its masks' values 1..N: the datacard's
    classes, else the scan's), or None for a dataset whose samples have classes. A mask
    dataset's samples carry no class of their own (the scanner calls each one a "case")."""
    samples = getattr(scan, "samples", None) or []
    masked = bool(samples) and all((s.extra or {}).get("label_path") for s in samples)
    if getattr(scan, "task", "") != "segmentation" and not masked:
        return None
    return [str(c) for c in (card_classes or getattr(scan, "classes", None) or [])]


def sample_groups(scan, card_classes: Sequence[str] = ()) -> dict[str, list[int]]:
    """Group name -> indices of its samples: one group per class, or every case in one group
    for a segmentation dataset."""
    if mask_labels_of(scan, card_classes) is not None:
        return {CASES: list(range(len(scan.samples)))}
    return class_groups(scan.samples)


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
                             box_class_names=class_names, max_side=size,
                             label_values=ref.mask_values)
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
    groups = sample_groups(scan, class_names)
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
