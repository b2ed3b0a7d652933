"""Masks drawn as outlines in annotation files, and drawing them onto an image grid.

Formats (``FORMATS``, each a reader ``path -> {image key: [Region]}`` or None when the file is
not of that format):

* ``aperio_xml``: Aperio ImageScope XML (MoNuSeg, MoNuSAC, many pathology sets), one file per
  image: ``<Annotations><Annotation Name=...><Attributes><Attribute Name=... Value=.../>
  <Regions><Region Type=... NegativeROA=... Text=...><Vertices><Vertex X= Y=/>``. A region's
  class is its layer's ``Name``, else the layer's attribute name (MoNuSAC: ``Epithelial``), else
  its ``Description`` value, else the region's ``Text``; "" when none names it. Type 1 is a
  rectangle and type 2 an ellipse (their vertices span them); ``NegativeROA="1"`` cuts a hole.
  The image key is "" (the file's own image).
* ``cvat_xml``: CVAT for images 1.1, one file for many images: ``<image name= width= height=>``
  holding ``<polygon label= points="x,y;x,y">``, ``<ellipse cx cy rx ry>`` and ``<mask rle=
  left top width height>`` (counts alternating background/foreground, row by row in its box).
  Boxes, lines and points are not areas and are left out. Keys are the image names.
* ``labelme_json``: labelme JSON with ``shapes`` of ``shape_type`` polygon (or rectangle,
  circle), ``label`` and ``points``; the key is its ``imagePath`` (or "").

Coordinates are pixels, x along the columns and y along the rows. ``rasterise`` fills each
region's pixels whose centres lie inside or on its outline (``skimage.draw``), one bool
mask per class.

May import: nothing of the project (numpy, skimage, defusedxml only).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

MAX_FILE_BYTES = 200_000_000
OUTSIDE_TOLERANCE = 1.5   # pixels a vertex may lie outside the image (drawing at the border)


class DrawingError(ValueError):
    """An annotation file or region that cannot be drawn; the message names it and says why."""


@dataclass
class Region:
    label: str                        # the class the file gives it ("" when none)
    kind: str                         # polygon | ellipse | mask
    points: list = field(default_factory=list)   # [(x, y), ...]; ellipse: its bounding box
    negative: bool = False            # a hole cut out of its class
    box: tuple = ()                   # mask: (left, top, width, height)
    counts: tuple = ()                # mask: run lengths, background first, row by row
    where: str = ""                   # "Annotation 1 Region 12", for messages


def _xml(path: Path):
    from defusedxml import ElementTree
    from defusedxml.common import DefusedXmlException
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return ElementTree.parse(str(path)).getroot()
    except (OSError, ElementTree.ParseError, DefusedXmlException, ValueError):
        return None


def _number(value, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DrawingError(f"{where}: {value!r} is not a coordinate") from None
    if not np.isfinite(number):
        raise DrawingError(f"{where}: {value!r} is not a coordinate")
    return number


def _layer_label(layer) -> str:
    if (layer.get("Name") or "").strip():
        return layer.get("Name").strip()
    attributes = layer.findall("./Attributes/Attribute")
    for attribute in attributes:
        if (attribute.get("Name") or "").strip() not in ("", "Description"):
            return attribute.get("Name").strip()
    for attribute in attributes:
        if (attribute.get("Name") or "") == "Description" and (attribute.get("Value") or
                                                               "").strip():
            return attribute.get("Value").strip()
    return ""


def read_aperio(path: Path) -> dict[str, list[Region]] | None:
    root = _xml(path)
    if root is None or root.tag != "Annotations" or root.find("./Annotation") is None:
        return None
    regions = []
    for i, layer in enumerate(root.findall("./Annotation"), start=1):
        label = _layer_label(layer)
        for region in layer.findall("./Regions/Region"):
            where = f"{path}: Annotation {layer.get('Id', i)} Region {region.get('Id', '?')}"
            points = [(_number(v.get("X"), where), _number(v.get("Y"), where))
                      for v in region.findall("./Vertices/Vertex")]
            kind, rtype = "polygon", (region.get("Type") or "0").strip()
            if rtype in ("1", "2") and len(points) >= 2:
                xs, ys = [p[0] for p in points], [p[1] for p in points]
                points = [(min(xs), min(ys)), (max(xs), min(ys)), (max(xs), max(ys)),
                          (min(xs), max(ys))]
                kind = "ellipse" if rtype == "2" else "polygon"
            regions.append(Region(label or (region.get("Text") or "").strip(), kind, points,
                                  (region.get("NegativeROA") or "0").strip() == "1",
                                  where=where))
    return {"": regions}


def _cvat_points(text: str, where: str) -> list[tuple[float, float]]:
    points = []
    for pair in (text or "").split(";"):
        if pair.strip():
            x, _, y = pair.partition(",")
            points.append((_number(x, where), _number(y, where)))
    return points


def read_cvat(path: Path) -> dict[str, list[Region]] | None:
    root = _xml(path)
    if root is None or root.tag != "annotations" or root.find("./image") is None:
        return None
    out: dict[str, list[Region]] = {}
    for image in root.findall("./image"):
        name = image.get("name") or image.get("id") or ""
        regions = out.setdefault(name, [])
        for k, shape in enumerate(image, start=1):
            where = f"{path}: image {name!r} {shape.tag} {k}"
            label = (shape.get("label") or "").strip()
            if shape.tag == "polygon":
                regions.append(Region(label, "polygon", _cvat_points(shape.get("points"), where),
                                      where=where))
            elif shape.tag == "ellipse":
                cx, cy = _number(shape.get("cx"), where), _number(shape.get("cy"), where)
                rx, ry = _number(shape.get("rx"), where), _number(shape.get("ry"), where)
                regions.append(Region(label, "ellipse", [(cx - rx, cy - ry), (cx + rx, cy + ry)],
                                      where=where))
            elif shape.tag == "mask":
                box = tuple(int(_number(shape.get(key), where))
                            for key in ("left", "top", "width", "height"))
                counts = tuple(int(_number(c, where))
                               for c in (shape.get("rle") or "").replace(",", " ").split())
                regions.append(Region(label, "mask", box=box, counts=counts, where=where))
    return out


def read_labelme(path: Path) -> dict[str, list[Region]] | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("shapes"), list):
        return None
    regions = []
    for k, shape in enumerate(data["shapes"], start=1):
        if not isinstance(shape, dict):
            continue
        kind = shape.get("shape_type") or "polygon"
        where = f"{path}: shape {k} ({shape.get('label')!r})"
        try:
            points = [(_number(p[0], where), _number(p[1], where)) for p in shape["points"]]
        except (KeyError, TypeError, IndexError):
            raise DrawingError(f"{where}: its points are not [[x, y], ...]") from None
        if kind == "rectangle" and len(points) == 2:
            (x0, y0), (x1, y1) = points
            points, kind = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)], "polygon"
        elif kind == "circle" and len(points) == 2:
            (cx, cy), (px, py) = points
            r = float(np.hypot(px - cx, py - cy))
            points, kind = [(cx - r, cy - r), (cx + r, cy + r)], "ellipse"
        elif kind != "polygon":
            continue   # lines, points, masks: not areas drawn as outlines
        regions.append(Region(str(shape.get("label") or "").strip(), kind, points, where=where))
    return {str(data.get("imagePath") or ""): regions}


FORMATS = {"aperio_xml": read_aperio, "cvat_xml": read_cvat, "labelme_json": read_labelme}
FORMAT_NAMES = {"aperio_xml": "Aperio ImageScope XML", "cvat_xml": "CVAT XML",
                "labelme_json": "labelme JSON"}


@lru_cache(maxsize=8)
def _read_cached(path: str, fmt: str, stamp: tuple) -> dict[str, list[Region]] | None:
    return FORMATS[fmt](Path(path))


def read_drawing(path: str | os.PathLike, fmt: str) -> dict[str, list[Region]]:
    """The regions of one annotation file by image key (kept while the file is unchanged: a
    CVAT file read once for all its images). Raises DrawingError."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DrawingError(f"{path}: cannot be read ({exc.strerror})") from exc
    found = _read_cached(str(path), fmt, (st.st_size, st.st_mtime_ns))
    if found is None:
        raise DrawingError(f"{path}: not a readable {FORMAT_NAMES.get(fmt, fmt)} file")
    return found


def is_area(region: Region) -> bool:
    return region.kind != "polygon" or len(region.points) >= 3


def _draw(region: Region, shape: tuple[int, int]) -> np.ndarray:
    from skimage import draw
    rows, cols = shape
    mask = np.zeros(shape, bool)
    if region.kind == "mask":
        left, top, width, height = region.box
        if sum(region.counts) != width * height:
            raise DrawingError(f"{region.where}: its rle counts add up to {sum(region.counts)} "
                               f"pixels but its box is {width} x {height}")
        values = np.repeat(np.arange(len(region.counts)) % 2 == 1, region.counts)
        patch = values.reshape(height, width)
        if left < 0 or top < 0 or left + width > cols or top + height > rows:
            raise DrawingError(f"{region.where}: its box lies outside the {cols} x {rows} "
                               "image")
        mask[top:top + height, left:left + width] = patch
        return mask
    xs = np.array([p[0] for p in region.points], float)
    ys = np.array([p[1] for p in region.points], float)
    if xs.min() < -OUTSIDE_TOLERANCE or ys.min() < -OUTSIDE_TOLERANCE or \
            xs.max() > cols - 1 + OUTSIDE_TOLERANCE or ys.max() > rows - 1 + OUTSIDE_TOLERANCE:
        raise DrawingError(f"{region.where}: reaches x {xs.max():.0f}, y {ys.max():.0f} (or "
                           f"below 0) but the image is {cols} wide and {rows} high; the "
                           "outline must be in the image's pixel coordinates")
    if region.kind == "ellipse":
        cy, cx = (ys.min() + ys.max()) / 2, (xs.min() + xs.max()) / 2
        rr, cc = draw.ellipse(cy, cx, max((ys.max() - ys.min()) / 2, 0.5),
                              max((xs.max() - xs.min()) / 2, 0.5), shape=shape)
    else:
        rr, cc = draw.polygon(ys, xs, shape=shape)
    mask[rr, cc] = True
    return mask


def rasterise(regions: list[Region], shape: tuple[int, int], names: dict[str, str]
              ) -> dict[str, np.ndarray]:
    """One bool (rows, columns) mask per class: ``names`` maps a region's label to its class
    (a label it lacks is left out). Holes are cut after every region is drawn. Raises
    DrawingError naming the region."""
    out: dict[str, np.ndarray] = {}
    for region in sorted((r for r in regions if is_area(r)), key=lambda r: r.negative):
        name = names.get(region.label)
        if name is None:
            continue
        drawn = _draw(region, shape)
        mask = out.setdefault(name, np.zeros(shape, bool))
        if region.negative:
            mask &= ~drawn
        else:
            mask |= drawn
    return out
