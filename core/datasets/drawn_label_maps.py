"""Label maps drawn from annotations (core.datasets.layouts.drawn_masks: run-length encoded
masks in a table, outlines in Aperio/CVAT XML or labelme JSON), at index time, on each image's
grid, into the job's Datapath — never into the dataset folder.

``draw_label_map`` writes ``<Datapath>/labelmaps/<case>.png`` (core.datasets.label_maps names
the case, keeps the manifest and reuses a map whose sources are unchanged): the image's size is
read from its header, each class's runs or outlines are drawn (runs decoded with the encoding
the scan chose, outlines filled with ``skimage.draw``), and the classes merged with value i + 1
for ``labels[i]``, a smaller class over a larger one where they overlap. An image listed
without a finding gets an all-zero map.

``check_drawing`` is registration's check of such a sample (core.datasets.validation): its
annotation drawn on its image's grid, so a run past the last pixel or an outline outside the
image is reported with the file and the line or region, before any job.

May import: core.datasets.image_geometry, core.datasets.layouts.types,
core.datasets.layouts.run_length, .rle_tables, .polygon_files.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from core.datasets.image_geometry import Geometry, Unreadable, read_ref
from core.datasets.layouts.polygon_files import DrawingError, rasterise, read_drawing
from core.datasets.layouts.rle_tables import table_rows
from core.datasets.layouts.run_length import RunLengthError, decode
from core.datasets.layouts.types import Sample


class DrawnMaskError(ValueError):
    """An annotation that cannot be drawn on its image; the message names the file, the line or
    region, and what to do."""


def is_drawn_sample(sample: Sample) -> bool:
    return isinstance(sample.extra.get("drawing"), dict)


def _image(sample: Sample) -> str:
    return str(sample.image[0] if isinstance(sample.image, list) else sample.image)


def image_grid(image: str, geometry: Geometry | None = None) -> tuple[int, int]:
    """(rows, columns) of a 2D image, from ``geometry`` or its header."""
    if geometry is None:
        try:
            geometry, _ = read_ref(image, False, False)
        except Unreadable as exc:
            raise DrawnMaskError(f"{image}: cannot be read ({exc})") from exc
    if geometry is None or len(geometry.size) != 2:
        size = list(geometry.size) if geometry else "unknown"
        raise DrawnMaskError(f"{image}: size {size}; drawn annotations go on 2D images only")
    return int(geometry.size[1]), int(geometry.size[0])


def class_masks(drawing: dict, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """One bool mask per class of a sample's drawing on a (rows, columns) grid."""
    names = drawing.get("names") or {}
    try:
        if drawing["format"] == "rle_csv":
            return _runs(drawing, shape, names)
        regions = read_drawing(drawing["file"], drawing["format"]).get(drawing.get("key", ""))
        if regions is None:
            raise DrawnMaskError(f"{drawing['file']}: no longer holds image "
                                 f"{drawing.get('key')!r}; register the dataset again")
        return rasterise(regions, shape, names)
    except DrawingError as exc:
        raise DrawnMaskError(f"{exc}. Fix the outline or remove it") from None


def _runs(drawing: dict, shape: tuple[int, int], names: dict) -> dict[str, np.ndarray]:
    file = drawing["file"]
    lines = [n for found in drawing.get("lines", {}).values() for n in found]
    try:
        rows = table_rows(file, drawing["columns"], lines)
    except (RunLengthError, OSError) as exc:
        raise DrawnMaskError(f"{file}: {exc}") from None
    by_class: dict[str, list] = {}
    for line, cls, pairs, size in rows:
        if size and size != f"{shape[0]}x{shape[1]}":
            raise DrawnMaskError(f"{Path(file).name} line {line}: the table gives the image as "
                                 f"{size.replace('x', ' x ')} (height x width) but it is "
                                 f"{shape[0]} x {shape[1]}; fix the table or the image")
        if cls in names:
            by_class.setdefault(names[cls], []).append((line, pairs))
    out = {}
    for name, runs in by_class.items():
        try:
            out[name] = decode([p for _, p in runs], shape, drawing["encoding"])
        except RunLengthError as exc:
            which = ", ".join(str(n) for n, _ in runs[:4])
            order = drawing["encoding"].get("order")
            raise DrawnMaskError(f"{Path(file).name} line {which}: {exc} (read {order}). Check "
                                 "the runs belong to this image, or say the encoding in the "
                                 "description") from None
    return out


def merge(masks: dict[str, np.ndarray], value_of: dict[str, int], shape: tuple[int, int]
          ) -> tuple[np.ndarray, dict]:
    """The label map (larger classes first, smaller on top) and its facts."""
    merged = np.zeros(shape, np.uint8 if max(value_of.values(), default=0) < 256 else np.uint16)
    overlap = np.zeros(shape, bool)
    pixels = {}
    for name, mask in sorted(masks.items(), key=lambda kv: -int(kv[1].sum())):
        overlap |= mask & (merged > 0)
        merged[mask] = value_of[name]
        pixels[name] = int(mask.sum())
    return merged, {"overlap_voxels": int(np.count_nonzero(overlap)), "pixels": pixels,
                    "empty": not any(pixels.values())}


def draw_label_map(sample: Sample, value_of: dict[str, int], out_base: Path
                   ) -> tuple[Path, dict]:
    """Write one case's label map as ``out_base``.png; (its path, facts)."""
    from PIL import Image
    drawing = sample.extra["drawing"]
    shape = image_grid(_image(sample))
    merged, facts = merge(class_masks(drawing, shape), value_of, shape)
    path = out_base.parent / (out_base.name + ".png")
    Image.fromarray(merged).save(path)
    return path, facts


def drawn_signature(sample: Sample, value_of: dict[str, int]) -> str:
    """Changes when the annotation file, the image or what is drawn changes."""
    drawing = sample.extra["drawing"]
    parts = []
    for file in (drawing["file"], _image(sample)):
        st = os.stat(file)
        parts.append(f"{file}|{st.st_size}|{st.st_mtime_ns}")
    what = {k: v for k, v in drawing.items() if k != "file"}
    return hashlib.sha1(json.dumps([parts, what, value_of], sort_keys=True, default=str)
                        .encode()).hexdigest()


def manifest_facts(sample: Sample) -> dict:
    """What the manifest says a drawn case came from."""
    drawing = sample.extra["drawing"]
    facts = {"files": [drawing["file"]], "drawn_from": drawing["format"]}
    if drawing.get("encoding"):
        facts["encoding"] = {k: drawing["encoding"][k] for k in
                             ("relative", "first_index", "order") if k in drawing["encoding"]}
        facts["lines"] = drawing.get("lines", {})
    elif drawing.get("key"):
        facts["key"] = drawing["key"]
    return facts


def check_drawing(sample: Sample, labels: list[str], image: Geometry | None
                  ) -> tuple[list[tuple[str, str]], set[int], int]:
    """(problems as (kind, where), label values drawn, 1 when drawn) of a drawn sample."""
    try:
        shape = image_grid(_image(sample), image)
        masks = class_masks(sample.extra["drawing"], shape)
    except DrawnMaskError as exc:
        return [("drawing", str(exc))], set(), 0
    seen = {labels.index(n) + 1 for n, m in masks.items() if n in labels and m.any()}
    return [], seen, 1
