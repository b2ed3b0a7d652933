"""A display volume as a picture: slices in the radiological convention, window/level, label
colours and the rendered slice with its mask overlay and boxes.

* Views are drawn in the radiological convention (patient's right on the viewer's left,
  anterior / superior at the top); pixels are resampled to the voxel spacing so the aspect
  ratio is true.
* Windows: CT presets in Hounsfield units (``WINDOW_PRESETS``), an automatic window from the
  volume's 0.5-99.5 percentiles (MRI, X-ray, anything not in HU), the full range, or manual.
* Masks (labels 1..N) overlay in ``PALETTE`` colours (label k always gets the same colour) at a
  chosen opacity; boxes are drawn on the slices they cross.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from core.viewing.display_volume import (AXES, FIXED_AXIS, DisplayVolume, PreviewError,
                                         _view_axes)
from core.viewing.overlays import boxes_on_slice, mask_labels

MAX_SIDE = 512                 # longest side of a rendered slice, pixels

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
    return preset_for_anatomy(anatomy) if volume.hu else AUTO


def preset_for_anatomy(anatomy: str = "") -> str:
    """The CT window to show first for a dataset's anatomy (soft tissue when unknown)."""
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


def label_name(value: int, class_names: Sequence[str] = (),
               label_values: Sequence[int] | None = None, present: Sequence[int] = ()) -> str:
    """The name of mask value ``value``: ``class_names[value - 1]``; with ``label_values``
    (a mask numbered per file) the name whose value it is; a mask with one foreground value
    (``present``) and one class name (a binary mask stored as 255) gets that name."""
    names = list(class_names)
    if label_values:
        by_value = {int(v): names[i] for i, v in enumerate(label_values)
                    if i < len(names) and int(v) > 0}
        return str(by_value.get(int(value), f"label {value}"))
    foreground = [int(v) for v in present if int(v) > 0]
    if len(foreground) == 1 and len(names) == 1 and foreground[0] == int(value) > 1:
        return str(names[0])
    return str(names[value - 1]) if 0 < value <= len(names) else f"label {value}"


def box_color(label: str, class_names: Sequence[str] = (),
              offset: int = 0) -> tuple[int, int, int]:
    """A box class's colour; ``offset`` shifts it (predicted boxes beside the true ones)."""
    names = list(class_names)
    index = names.index(label) if label in names else sum(map(ord, str(label)))
    return PALETTE[(index + offset) % len(PALETTE)]


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


def resize_labels(plane: np.ndarray, height: int, width: int) -> np.ndarray:
    """A label plane resized to (height, width): enlarged with smooth edges (each label's
    area interpolated bilinearly, kept where it covers more than half a pixel), shrunk by
    nearest neighbour."""
    if plane.shape == (height, width):
        return plane
    values = mask_labels(plane)
    if not values or (height <= plane.shape[0] and width <= plane.shape[1]):
        return np.asarray(Image.fromarray(plane.astype(np.int32), mode="I").resize(
            (width, height), Image.Resampling.NEAREST)).astype(np.int16)
    out = np.zeros((height, width), np.int16)
    best = np.full((height, width), 0.5, np.float32)
    for value in values:
        cover = np.asarray(Image.fromarray((plane == value).astype(np.float32), mode="F")
                           .resize((width, height), Image.Resampling.BILINEAR))
        take = cover > best
        out[take] = value
        best = np.maximum(best, cover)
    return out


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
                 max_side: int | None = MAX_SIDE,
                 label_values: Sequence[int] | None = None) -> RenderedSlice:
    """One slice as an RGB image: windowed, resampled to true aspect (smoothly: bicubic when
    enlarged, so no pixel blocks), mask blended in with smooth edges, boxes (display-grid
    boxes from ``display_boxes``) drawn. ``window`` is (width, level); ``label_values``: the
    mask's values of ``class_names`` when they are not 1..N."""
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
        enlarged = height > rows or width_px > cols
        rgb = np.asarray(Image.fromarray(rgb, mode="RGB").resize(
            (width_px, height), Image.Resampling.BICUBIC if enlarged
            else Image.Resampling.BILINEAR))
    shown_labels, legend = None, []
    if mask is not None:
        plane = resize_labels(extract_slice(mask, axis, index), height, width_px)
        shown_labels = plane
        rgb = overlay_mask(rgb, plane, opacity)
        in_slice = set(mask_labels(plane))
        present = mask_labels(mask)
        legend = [LegendItem(v, label_name(v, class_names, label_values, present),
                             hex_color(label_color(v)), v in in_slice) for v in present]
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

