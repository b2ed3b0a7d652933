"""Demo detection datasets (lung nodules as bounding boxes), synthetic and learnable on CPU:

* ``make_nodule_detection_demo_2d``: chest-X-ray-like 8-bit PNGs (``images/``, the style of
  :mod:`core.demo.chest_xray`) with 0-2 round bright "nodules" (radius 4-8 px) inside the lung
  fields, and a ChestX-Det-like ``boxes.csv`` with columns ``image, x, y, w, h, label`` (one row
  per box; x is the column, y the row of the top-left corner; a row with empty box columns marks
  a negative image).
* ``make_nodule_detection_demo_3d``: small chest-CT-like NIfTI volumes (``volumes/*.nii.gz``,
  int16 HU, array axes x, y, z, 1 mm voxels) with 0-2 spherical nodules (radius 3-5 voxels) and
  ``boxes.csv`` with ``image, x, y, z, w, h, d, label`` in voxel coordinates.

Boxes are corner boxes in MONAI's convention (pixel i spans [i, i + 1)). File names start with
the patient ID. Not patient data; fine to ship and to share.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

from core.demo.chest_xray import chest_image
from core.demo.diagnosis import ct_volume

NODULE = "nodule"


def _place(rng: np.random.Generator, count: int, centers, half_axes, size, radius_range) -> list:
    """Up to ``count`` non-overlapping (center, radius) pairs inside the given lung ellipses."""
    placed = []
    for _ in range(count * 20):
        if len(placed) == count:
            break
        lung = centers[rng.integers(0, len(centers))]
        r = rng.uniform(*radius_range)
        c = [lc + rng.uniform(-0.6, 0.6) * ha for lc, ha in zip(lung, half_axes)]
        if any(ci - r < 1 or ci + r > s - 1 for ci, s in zip(c, size)):
            continue
        if all(np.linalg.norm(np.subtract(c, pc)) > r + pr + 4 for pc, pr in placed):
            placed.append((c, r))
    return placed


def _blob(grid: list[np.ndarray], center, radius: float) -> np.ndarray:
    """A solid round nodule with a 1.5-pixel soft edge; ``grid`` holds pixel-centre coordinates."""
    dist = np.sqrt(sum((g - c) ** 2 for g, c in zip(grid, center)))
    return np.clip((radius - dist) / 1.5 + 0.5, 0.0, 1.0)


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _done(out: Path, spec: dict) -> bool:
    marker = out / ".m3b_demo.json"
    return marker.exists() and json.loads(marker.read_text()) == spec


def make_nodule_detection_demo_2d(out_dir: str | Path, n: int = 200, seed: int = 0,
                                  size: int = 128) -> Path:
    """``n`` images, about 30% without nodules; idempotent like the other demo builders."""
    out = Path(out_dir)
    spec = {"kind": "nodules_2d", "n": n, "seed": seed, "size": size, "version": 1}
    if _done(out, spec):
        return out
    rng = np.random.default_rng(seed)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    rr, cc = np.mgrid[0:size, 0:size] + 0.5
    lungs = [(size * 0.5 + s * size * 0.19, size * 0.47) for s in (-1, 1)]  # (x, y) centres
    for i in range(n):
        img = chest_image(rng, pneumonia=False, size=size).astype(np.float32) / 255
        count = int(rng.choice([0, 1, 2], p=[0.3, 0.45, 0.25]))
        nodules = _place(rng, count, lungs, (size * 0.13, size * 0.28), (size, size), (4.0, 8.0))
        name = f"patient{i // 2 + 1:04d}_{i % 2 + 1}.png"
        for (x, y), r in nodules:
            img += rng.uniform(0.28, 0.4) * _blob([cc, rr], (x, y), r)
            rows.append({"image": name, "x": round(x - r, 2), "y": round(y - r, 2),
                         "w": round(2 * r, 2), "h": round(2 * r, 2), "label": NODULE})
        if not nodules:
            rows.append({"image": name, "x": "", "y": "", "w": "", "h": "", "label": ""})
        Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="L").save(
            out / "images" / name)
    _write_csv(out / "boxes.csv", ["image", "x", "y", "w", "h", "label"], rows)
    (out / ".m3b_demo.json").write_text(json.dumps(spec))
    return out


def make_nodule_detection_demo_3d(out_dir: str | Path, n: int = 80, seed: int = 0,
                                  size: int = 48, depth: int = 32) -> Path:
    """``n`` volumes of size x size x depth voxels, about 30% without nodules."""
    import nibabel as nib
    out = Path(out_dir)
    spec = {"kind": "nodules_3d", "n": n, "seed": seed, "size": size, "depth": depth,
            "version": 1}
    if _done(out, spec):
        return out
    rng = np.random.default_rng(seed)
    (out / "volumes").mkdir(parents=True, exist_ok=True)
    rows = []
    grid = list(np.mgrid[0:size, 0:size, 0:depth] + 0.5)  # x, y, z voxel centres
    lungs = [(size * 0.5 + s * size * 0.2, size * 0.47, depth / 2) for s in (-1, 1)]
    for i in range(n):
        vol = ct_volume(rng, "Normal", depth, size).transpose(2, 1, 0)  # (z, y, x) -> (x, y, z)
        count = int(rng.choice([0, 1, 2], p=[0.3, 0.45, 0.25]))
        nodules = _place(rng, count, lungs, (size * 0.12, size * 0.22, depth * 0.3),
                         (size, size, depth), (3.0, 5.0))
        name = f"patient{i + 1:04d}.nii.gz"
        for center, r in nodules:
            vol = vol + rng.uniform(0.35, 0.45) * _blob(grid, center, r)
            rows.append({"image": name, **{k: round(c - r, 2) for k, c in zip("xyz", center)},
                         **{k: round(2 * r, 2) for k in "whd"}, "label": NODULE})
        if not nodules:
            rows.append({"image": name, **{k: "" for k in "xyzwhd"}, "label": ""})
        hu = np.interp(vol, [0.0, 0.1, 0.5, 1.0], [-1000.0, -850.0, 40.0, 400.0])
        nib.save(nib.Nifti1Image(hu.astype(np.int16), np.eye(4)), str(out / "volumes" / name))
    _write_csv(out / "boxes.csv", ["image", "x", "y", "z", "w", "h", "d", "label"], rows)
    (out / ".m3b_demo.json").write_text(json.dumps(spec))
    return out
