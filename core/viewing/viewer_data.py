"""What the interactive image viewer (``components/viewer``: a Streamlit component around the
WebGL viewer Niivue) is sent: an image and its label layers (a mask, a model's prediction, the
boxes of a detection index) as gzip NIfTI volumes on one grid, with what the viewer shows
beside them (window presets, label names and colours, spacing). No UI here; the page calls
``pages/viewer_widget.py``.

* The grid (``viewer_volumes``) is the preview's display grid: a volume with an affine is
  reoriented to the closest canonical (RAS) voxel order with nibabel's ``as_closest_canonical``
  and keeps its true voxel-to-mm affine, so the viewer shows it in patient orientation with the
  stored spacing (three orthogonal views, aspect ratio right); without an affine (arrays, 2D
  images) the stored layout is kept and the stored spacing (or 1 mm) is used.
* Values are sent in the smallest type that holds them exactly (uint8, int16 - CT in HU - or
  float32), at full resolution when the image is at most ``MAX_VIEWER_BYTES`` (a 512 x 512 x
  300 CT is), else downsampled by an integer stride.
* Masks and predictions are label volumes (values 1..N) on the same grid; boxes become a label
  volume of their outlines. The viewer toggles every label of every layer on its own.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from core.viewing.display_volume import (MAX_CHANNELS, PreviewError, image_layout,
                                         _channel_names, _channel_stats, _is_hu, _read)
from core.viewing.overlays import boxes_on_grid, stored_labels
from core.viewing.slice_render import (AUTO, FULL_RANGE, WINDOW_PRESETS, box_color, hex_color,
                                       label_color, label_name, preset_for_anatomy)
from core.viewing.viewer_volumes import (Grid, compact, focus_of, grid_of, main_axis, nifti_gz,
                                         present_values, rgb24, stride_for)

MAX_VIEWER_BYTES = 160 << 20   # image values sent to the browser, uncompressed
MAX_SENT_BYTES = 150 << 20     # every volume of one view, compressed (a message is <= 200 MB)


@dataclass
class ViewerLabel:
    value: int
    name: str
    color: str                  # hex


@dataclass
class ViewerLayer:
    key: str                    # "mask", "prediction", "boxes"
    title: str
    nifti: bytes                # .nii.gz on the image's grid
    labels: list[ViewerLabel]
    opacity: float = 0.45


@dataclass
class ViewerPayload:
    image: bytes                          # .nii.gz
    name: str
    shape: tuple[int, int, int]           # voxels sent, display (RAS) axis order
    spacing: tuple[float, float, float]   # mm per voxel sent, display axis order
    stored_shape: tuple[int, ...]
    stored_spacing: tuple[float, ...] | None  # from the file, per stored axis; None: not stored
    is_3d: bool
    rgb: bool
    hu: bool
    oriented: bool                        # patient orientation known (an affine was stored)
    stride: int
    window: tuple[float, float]           # (width, level) shown first
    presets: list[tuple[str, float, float]]  # (name, width, level)
    preset: str                           # the preset shown first
    main_axis: int                        # display axis the stored slices are stacked along
    modality: str = ""
    channel: int = 0                      # the channel shown
    channel_names: list[str] = field(default_factory=list)  # of the image as stored
    focus: tuple[float, float, float] | None = None  # where the crosshair starts (0-1 per axis)
    layers: list[ViewerLayer] = field(default_factory=list)
    key: str = ""                         # digest of everything sent

    @property
    def downsampled(self) -> bool:
        return self.stride > 1

    @property
    def sent_bytes(self) -> int:
        return len(self.image) + sum(len(layer.nifti) for layer in self.layers)

    def meta(self, height: int = 560) -> dict:
        """The JSON part of the component's arguments (the volumes go as bytes beside it)."""
        return {
            "key": self.key, "name": self.name, "is3d": self.is_3d, "rgb": self.rgb,
            "hu": self.hu, "unit": "HU" if self.hu else "", "oriented": self.oriented,
            "shape": list(self.shape), "spacing": [round(s, 4) for s in self.spacing],
            "window": [float(self.window[0]), float(self.window[1])],
            "presets": [{"name": n, "width": float(w), "level": float(lv)}
                        for n, w, lv in self.presets],
            "preset": self.preset, "mainAxis": self.main_axis, "height": int(height),
            "focus": list(self.focus) if self.focus else None,
            "layers": [{"key": layer.key, "title": layer.title, "opacity": layer.opacity,
                        "labels": [vars(lbl) for lbl in layer.labels]}
                       for layer in self.layers]}

    def component_args(self, height: int = 560) -> dict:
        """Keyword arguments for the component: ``meta`` plus one bytes argument per volume
        (Streamlit sends bytes arguments as binary)."""
        args: dict[str, Any] = {"meta": self.meta(height), "image": self.image}
        for layer in self.layers:
            args[f"layer_{layer.key}"] = layer.nifti
        return args


def _windows(sample: np.ndarray, hu: bool, anatomy: str) -> tuple[list, str, tuple]:
    """Presets (CT ones for HU), the one shown first and its (width, level)."""
    lo, hi, vmin, vmax = _channel_stats(np.asarray(sample, dtype=np.float32))
    auto = (max(hi - lo, 1e-6), (hi + lo) / 2)
    full = (max(vmax - vmin, 1e-6), (vmax + vmin) / 2)
    presets = [(n, w, lv) for n, (w, lv) in WINDOW_PRESETS.items()] if hu else []
    presets += [(AUTO, *auto), (FULL_RANGE, *full)]
    name = preset_for_anatomy(anatomy) if hu else AUTO
    window = next((w, lv) for n, w, lv in presets if n == name)
    return presets, name, window


# ----------------------------------------------------------------------------- labels

PREDICTION_COLOURS = 8  # a prediction shown beside its mask: label k in palette colour k + 8


def label_entries(values: Sequence[int], class_names: Sequence[str] = (),
                  label_values: Sequence[int] | None = None,
                  colour_offset: int = 0) -> list[ViewerLabel]:
    """Names and colours of the label values present in a mask, named and coloured as the
    static view does (``slice_render.label_name``, ``label_color``); ``colour_offset`` shifts
    the colours (a prediction beside its ground truth, so the two are told apart)."""
    present = [int(v) for v in values if int(v) > 0]
    return [ViewerLabel(v, label_name(v, class_names, label_values, present),
                        hex_color(label_color(v + colour_offset))) for v in present]


def _label_layer(key: str, title: str, labels_stored: np.ndarray, grid: Grid,
                 class_names: Sequence[str], label_values: Sequence[int] | None,
                 opacity: float, colour_offset: int = 0) -> tuple[ViewerLayer, np.ndarray]:
    """The layer and its labels on the display grid."""
    data, affine = grid.to_display(labels_stored)
    values = present_values(data)
    data = data.astype(np.uint8 if not values or max(values) <= 255 else np.int16)
    labels = label_entries(values, class_names, label_values, colour_offset)
    return ViewerLayer(key, title, nifti_gz(data, affine), labels, opacity), data


@dataclass(frozen=True)
class BoxSet:
    """Boxes shown as one layer: ``boxes`` in stored voxel corners ``[x0, y0, x1, y1]`` /
    ``[x0, y0, z0, x1, y1, z1]`` with a class name each; ``suffix`` is added to every label's
    name ("box", "predicted"); ``colour_offset`` shifts the colours (predictions beside the
    ground truth)."""
    key: str
    title: str
    boxes: Sequence[Sequence[float]]
    labels: Sequence[str] = ()
    suffix: str = "box"
    colour_offset: int = 0


def _boxes_layer(box_set: BoxSet, class_names: Sequence[str], grid: Grid,
                 shape: tuple[int, int, int], affine: np.ndarray) -> ViewerLayer | None:
    """Box outlines (drawn on every axial plane a box crosses) as a label volume: one label
    per box class, coloured as in the static view."""
    if grid.ornt is not None:
        ornt = grid.ornt
    else:
        from nibabel.orientations import io_orientation
        ornt = io_orientation(grid.affine)
    boxes, box_labels = box_set.boxes, box_set.labels
    shown = boxes_on_grid(boxes, ornt, grid.stride, shape, len(grid.stored_shape))
    if not shown:
        return None
    label_of = [str(box_labels[i]) if i < len(box_labels) else "box" for i in range(len(boxes))]
    names = list(dict.fromkeys(label_of[i] for i, _ in shown))
    volume = np.zeros(shape, np.uint8)
    width = max(1, round(min(shape[0], shape[1]) / 256))
    for index, box in shown:
        value = names.index(label_of[index]) + 1
        x0, y0, z0 = (int(max(0, math.floor(v))) for v in box[:3])
        x1, y1, z1 = (int(min(n, math.ceil(v))) for v, n in zip(box[3:], shape))
        if x1 <= x0 or y1 <= y0 or z1 <= z0:
            continue
        w = max(1, min(width, (x1 - x0) // 2, (y1 - y0) // 2))
        for xs, ys in ((slice(x0, x1), slice(y0, y0 + w)), (slice(x0, x1), slice(y1 - w, y1)),
                       (slice(x0, x0 + w), slice(y0, y1)), (slice(x1 - w, x1), slice(y0, y1))):
            volume[xs, ys, z0:z1] = value
    labels = [ViewerLabel(i + 1, f"{name} ({box_set.suffix})",
                          hex_color(box_color(name, class_names, box_set.colour_offset)))
              for i, name in enumerate(names)]
    return ViewerLayer(box_set.key, box_set.title, nifti_gz(volume, affine), labels, 0.9)


# ----------------------------------------------------------------------------- payloads

def _finish(payload: ViewerPayload) -> ViewerPayload:
    digest = hashlib.sha1(payload.image)
    for layer in payload.layers:
        digest.update(layer.key.encode())
        digest.update(layer.nifti)
        digest.update(repr([vars(lbl) for lbl in layer.labels]).encode())
    payload.key = digest.hexdigest()[:16]
    return payload


def build_payload(arr: np.ndarray, meta: dict, *, ref: Any = "", name: str = "",
                  modality: str = "",
                  channel: int = 0, anatomy: str = "",
                  masks: Sequence[tuple[str, str, np.ndarray, Sequence[int] | None]] = (),
                  class_names: Sequence[str] = (), boxes: Sequence[Sequence[float]] = (),
                  box_labels: Sequence[str] = (), box_sets: Sequence[BoxSet] = (),
                  max_bytes: int = MAX_VIEWER_BYTES,
                  max_sent: int = MAX_SENT_BYTES) -> ViewerPayload:
    """A viewer payload from ``read_image``'s ``(array (C, *spatial), meta)``.

    ``masks``: (key, title, labels in the stored layout (``overlays.stored_labels``), per-file
    label values or None) for each label layer; ``channel``: the channel shown (a
    multi-sequence MRI, a 4D series); ``boxes``/``box_labels``: a dataset's boxes (one
    "Boxes" layer); ``box_sets``: further box layers (a model's test image: true and predicted
    boxes). Raises PreviewError for what cannot be shown."""
    box_sets = ([BoxSet("boxes", "Boxes", boxes, box_labels)] if len(boxes) else []) \
        + list(box_sets)
    arr, meta, rgb = image_layout(arr, meta, name)
    fmt = str(meta.get("format", ""))
    spatial = list(arr.shape[1:])
    if rgb:
        values = arr[:3]
        itemsize = 3
    else:
        values = compact(arr[min(max(int(channel), 0), arr.shape[0] - 1)])
        itemsize = values.dtype.itemsize
    stride = stride_for(spatial, itemsize, max_bytes)
    stored_spacing = [float(s) for s in (meta.get("spacing") or [])][:len(spatial)]
    has_spacing = len(stored_spacing) == len(spatial) and all(s > 0 for s in stored_spacing)
    while True:
        grid = grid_of(meta, spatial, stride)
        if rgb:
            data, affine = grid.to_display(rgb24(values))
        else:
            data, affine = grid.to_display(values)
        shape = tuple(int(n) for n in data.shape)
        layers, focus = [], None
        for number, (key, title, labels, label_values) in enumerate(masks):
            layer, shown = _label_layer(key, title, labels, grid, class_names, label_values,
                                        0.45 if number == 0 else 0.55,
                                        PREDICTION_COLOURS if number else 0)
            layers.append(layer)
            focus = focus or (focus_of(shown) if len(spatial) == 3 else None)
        for box_set in box_sets:
            layer = _boxes_layer(box_set, class_names, grid, shape, affine)
            if layer is not None:
                layers.append(layer)
        image = nifti_gz(data, affine)
        total = len(image) + sum(len(layer.nifti) for layer in layers)
        if total <= max_sent or min(shape[:len(spatial)]) <= 16:
            break
        stride += 1
    modality = str(meta.get("modality") or modality or "")
    if rgb:
        hu, presets, preset, window = False, [], "", (255.0, 127.5)
    else:
        step = max(1, math.ceil((data.size / (1 << 22)) ** (1 / 3)))
        sample = data[::step, ::step, ::step]
        hu = _is_hu(modality, fmt, float(sample.min()), float(sample.max()))
        presets, preset, window = _windows(sample, hu, anatomy)
    spacing = tuple(float(np.linalg.norm(affine[:3, i])) for i in range(3))
    return _finish(ViewerPayload(
        image=image, name=name, shape=shape, spacing=spacing,  # type: ignore[arg-type]
        stored_shape=tuple(spatial), stored_spacing=tuple(stored_spacing) if has_spacing
        else None, is_3d=len(spatial) == 3, rgb=rgb, hu=hu,
        oriented=grid.affine is not None, stride=stride, window=window, presets=presets,
        preset=preset, main_axis=main_axis(meta, spatial), modality=modality,
        channel=0 if rgb else min(max(int(channel), 0), arr.shape[0] - 1),
        channel_names=["RGB"] if rgb else _channel_names(ref, min(arr.shape[0], MAX_CHANNELS),
                                                         fmt),
        focus=focus, layers=layers))


def volume_payload(ref: Any, *, allow_pickle: bool = False, modality: str = "",
                   series_files: Sequence[str] | None = None, channel: int = 0,
                   anatomy: str = "", mask_ref: Any = None,
                   mask_values: Sequence[int] | None = None, class_names: Sequence[str] = (),
                   boxes: Sequence[Sequence[float]] = (), box_labels: Sequence[str] = (),
                   box_sets: Sequence[BoxSet] = (),
                   max_bytes: int = MAX_VIEWER_BYTES) -> tuple[ViewerPayload, str]:
    """The payload of an image reference with its mask and boxes, and a warning ("" when
    none) when the mask could not be overlaid. Raises PreviewError for the image."""
    arr, meta = _read(ref, allow_pickle, series_files)
    name = str(meta.get("ref", ref))
    masks, warning = [], ""
    if mask_ref:
        try:
            spatial = tuple(arr.shape[1:])
            spatial = spatial[:2] if len(spatial) == 3 and spatial[2] == 1 else spatial
            labels = stored_labels(_read(mask_ref, allow_pickle, None)[0], spatial,
                                   str(mask_ref))
            masks.append(("mask", "Mask", labels, mask_values))
        except PreviewError as exc:
            warning = str(exc)
    payload = build_payload(arr, meta, ref=ref, name=name.rsplit("/", 1)[-1], modality=modality,
                            channel=channel, anatomy=anatomy, masks=masks,
                            class_names=class_names, boxes=boxes, box_labels=box_labels,
                            box_sets=box_sets, max_bytes=max_bytes)
    return payload, warning


def arrays_payload(image: np.ndarray, *, spacing: Sequence[float] | None = None,
                   affine: np.ndarray | None = None, mask: np.ndarray | None = None,
                   prediction: np.ndarray | None = None, class_names: Sequence[str] = (),
                   modality: str = "", name: str = "image",
                   max_bytes: int = MAX_VIEWER_BYTES) -> ViewerPayload:
    """The payload of an image held in memory (the Models page's prediction): ``image`` is
    (X, Y) or (X, Y, Z) in MONAI's axis order (x first, as ``read_image`` gives it), ``mask``
    (ground truth) and ``prediction`` label arrays on the same grid (values 1..N =
    ``class_names``). ``affine`` (voxel -> RAS mm) orients a volume; without one the volume
    keeps its stored layout with ``spacing`` (or 1 mm)."""
    image = np.asarray(image)
    if image.ndim not in (2, 3):
        raise PreviewError(f"{name}: an array of shape {list(image.shape)} is not a 2D or 3D "
                           "image")
    meta: dict[str, Any] = {"format": "nifti" if image.ndim == 3 else "png"}
    if spacing is not None and len(spacing) == image.ndim:
        meta["spacing"] = [float(s) for s in spacing]
    if affine is not None and image.ndim == 3:
        meta["affine"] = np.asarray(affine, dtype=float)
    masks = []
    for key, title, labels in (("mask", "Mask", mask), ("prediction", "Prediction", prediction)):
        if labels is not None:
            labels = np.asarray(labels)
            if labels.shape != image.shape:
                raise PreviewError(f"{title.lower()} of shape {list(labels.shape)} is not on "
                                   f"the image's grid {list(image.shape)}")
            masks.append((key, title, np.clip(np.rint(labels), 0, 32767).astype(np.int16),
                          None))
    return build_payload(image[None].astype(np.float32, copy=False), meta, name=name,
                         modality=modality, masks=masks, class_names=class_names,
                         max_bytes=max_bytes)
