"""Boxes given as a centre and a diameter (LUNA16's ``annotations.csv``: ``seriesuid, coordX,
coordY, coordZ, diameter_mm``), keyed by the volume's file stem.

* Columns: a centre per axis (``coordX``, ``x``, ``center_x``, ``x_mm``, ``world_x``) and a
  diameter (``diameter_mm``, ``diameter``, ``diam``, ``size``) or a radius; an id column that
  names the volumes by stem (a series UID with dots is a stem, not a name with a suffix). A
  table of centres without a size (LUNA16's ``candidates.csv``, class 0/1) is no box table.
* Coordinates of a 3D volume are patient/world millimetres when the column names say so
  (coord, world, mm) and they fall inside the volumes at least as often as read as voxel
  indices (else voxel indices). World points become continuous voxel indices through each
  volume's own header geometry (origin, spacing, direction; SimpleITK reads only the header,
  never the voxels): ``index = (direction * spacing)^-1 (point - origin)``, in ITK index order,
  which is the axis order core.imaging.image_io.read_image returns ((C, x, y, z)).
* Box = centre ± radius per axis, in the detection index's corner convention (voxel ``i``
  spans ``[i, i + 1)``, so a voxel centre is ``i + 0.5``), clipped to the volume; a diameter
  in mm is divided by each axis's spacing. Voxel-index and 2D pixel centres are used as given
  (with a diameter in voxels or pixels unless its name says mm).
* Volumes with no row are negatives (no finding); rows outside their volume are reported.

May import: core.datasets.layouts (box_encodings, common, inventory, tables, types).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from core.datasets.layouts.box_encodings import group_column, label_column
from core.datasets.layouts.common import FileMatcher, split_of_name
from core.datasets.layouts.inventory import is_mask_path, stem_of_name
from core.datasets.layouts.tables import read_table
from core.datasets.layouts.types import image_suffix

AXES = ("x", "y", "z")
CENTRE = {a: re.compile(rf"^(?:coord|cent(?:er|re)|world|pos(?:ition)?)?[_ ]?{a}"
                        rf"(?:[_ ]?(?:mm|world|coord|cent(?:er|re)))?$", re.I) for a in AXES}
DIAMETER = re.compile(r"^(?:diameter|diam|size)(?:[_ ]?\(?mm\)?)?$|^d_?mm$", re.I)
RADIUS = re.compile(r"^radius(?:[_ ]?\(?mm\)?)?$|^r_?mm$", re.I)
WORLD_NAME = re.compile(r"coord|world|mm", re.I)
VOLUMES = (".mhd", ".mha", ".nrrd", ".nii", ".nii.gz", ".hdr")


def _columns(columns: list[str]) -> tuple[list[str], str, bool] | None:
    """(centre columns x, y[, z], size column, whether it is a radius), or None."""
    centre = []
    for axis in AXES:
        found = next((c for c in columns if CENTRE[axis].match(c.strip())), None)
        if found is None:
            break
        centre.append(found)
    size = next((c for c in columns if DIAMETER.match(c.strip())), None)
    radius = next((c for c in columns if RADIUS.match(c.strip())), None)
    if len(centre) < 2 or not (size or radius):
        return None
    return centre, size or radius, size is None


def geometry(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(origin, spacing, direction matrix, size) of a volume from its header only."""
    import SimpleITK as sitk
    try:
        reader = sitk.ImageFileReader()
        reader.SetFileName(str(path))
        reader.ReadImageInformation()
    except RuntimeError:
        return None
    dim = reader.GetDimension()
    return (np.array(reader.GetOrigin(), float), np.array(reader.GetSpacing(), float),
            np.array(reader.GetDirection(), float).reshape(dim, dim),
            np.array(reader.GetSize(), float))


def _stems(images: list[Path], root: Path) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for path in images:
        if not is_mask_path(path.relative_to(root)):
            out.setdefault(stem_of_name(path.name).lower(), []).append(path)
    return out


def _finder(stems: dict[str, list[Path]], matcher: FileMatcher):
    def find(value) -> Path | None:
        text = str(value or "").strip()
        hits = stems.get(text.lower())
        if hits:
            return hits[0] if len(hits) == 1 else None
        return matcher.find(text) if text else None
    return find


def _index(point: np.ndarray, geo) -> np.ndarray:
    origin, spacing, direction, _ = geo
    return np.linalg.solve(direction * spacing[None, :], point - origin)


def _inside(index: np.ndarray, geo) -> bool:
    return bool(np.all(index >= -0.5) and np.all(index <= geo[3] - 0.5))


def centre_boxes(table: Path, matcher: FileMatcher, images: list[Path], root: Path,
                 skipped: list[str]) -> dict | None:
    """The boxes of a centre + diameter table (see the module docstring), in the shape
    core.datasets.layouts.boxes.boxes_result takes, or None."""
    try:
        columns, rows = read_table(table)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = _columns(columns) if rows else None
    if found is None:
        return None
    centre_cols, size_col, is_radius = found
    find = _finder(_stems(images, root), matcher)
    probe = rows[:2000]
    hits = {c: sum(find(r.get(c)) is not None for r in probe) for c in columns
            if c not in centre_cols and c != size_col}
    id_col = max(hits, key=lambda c: hits[c]) if hits else None
    if id_col is None or hits[id_col] < 0.8 * len(probe):
        return None
    parsed = []   # (line, path, centre, size, row)
    for number, row in enumerate(rows, start=2):
        path = find(row.get(id_col))
        try:
            values = [float(row.get(c, "")) for c in centre_cols]
            size = float(row.get(size_col, "")) * (2.0 if is_radius else 1.0)
        except (TypeError, ValueError):
            if path is not None:
                skipped.append(f"{table.name} line {number}: centre or {size_col} is not a "
                               "number; row ignored")
            continue
        parsed.append((number, path, np.array(values), size, row))
    volumes = {p for _, p, c, _, _ in parsed if p is not None and len(c) == 3
               and image_suffix(p.name) in VOLUMES}
    geo = {p: g for p in sorted(volumes) if (g := geometry(p)) is not None and len(g[0]) == 3}
    in_world = sum(_inside(_index(c, geo[p]), geo[p]) for _, p, c, _, _ in parsed if p in geo)
    in_voxel = sum(_inside(c, geo[p]) for _, p, c, _, _ in parsed if p in geo)
    hinted = any(WORLD_NAME.search(c) for c in [*centre_cols, size_col])
    world = bool(geo) and (in_world > in_voxel or (hinted and in_world >= in_voxel))
    mm = world or bool(re.search(r"mm", size_col, re.I))
    label_col = label_column(columns)
    group_col = group_column(columns, rows, {id_col, *centre_cols, size_col})
    file_split = split_of_name(table.name)
    per_image: dict[Path, dict] = {}
    unmatched = 0
    for number, path, centre, size, row in parsed:
        if path is None:
            unmatched += 1
            continue
        entry = per_image.setdefault(path, {"boxes": [], "labels": [], "split": file_split})
        entry.setdefault("group", str(row.get(group_col) or "").strip() if group_col
                         else str(row.get(id_col)).strip())
        g = geo.get(path)
        if g is not None:
            index = (_index(centre, g) if world else centre) + (0.5 if world else 0.0)
            step = np.linalg.norm(np.linalg.inv(g[2] * g[1][None, :]), axis=1) if mm else \
                np.ones(3)
            half = size / 2 * step
            upper = g[3]
        else:   # no header geometry (a 2D image): pixel coordinates as given
            centre = centre if image_suffix(path.name) in VOLUMES else centre[:2]
            index, half, upper = centre, np.full(len(centre), size / 2), None
        if size <= 0 or (upper is not None and not (np.all(index >= 0) and
                                                    np.all(index <= upper))):
            skipped.append(f"{table.name} line {number}: centre {centre.tolist()} "
                           f"({'world mm' if world else 'voxels'}) with {size_col} {size} lies "
                           f"outside {path.name} or has no size; dropped")
            continue
        low, high = index - half, index + half
        if upper is not None:
            low, high = np.clip(low, 0, upper), np.clip(high, 0, upper)
        entry["boxes"].append([round(float(v), 4) for v in [*low, *high]])
        entry["labels"].append(str(row.get(label_col) or "lesion").strip() if label_col
                               else "lesion")
    if not any(e["boxes"] for e in per_image.values()):
        return None
    if unmatched:
        skipped.append(f"{unmatched} rows of {table.name} name no existing image")
    kinds = {image_suffix(p.name) for p in per_image}
    for path in sorted(p for ps in _stems(images, root).values() for p in ps):
        if path not in per_image and image_suffix(path.name) in kinds:
            per_image[path] = {"boxes": [], "labels": [], "split": file_split,  # no finding
                               "group": "" if group_col else stem_of_name(path.name)}
    return {"images": per_image, "details": {
        "format": "csv_centre_diameter", "table": str(table), "image_column": id_col,
        "centre_columns": centre_cols, "size_column": size_col,
        "coordinates": "world mm (each volume's header geometry)" if world else
        "voxels" if geo else "pixels", "three_d": bool(geo),
        "label_column": label_col, "split_column": None,
        "patient_column": group_col or id_col}}
