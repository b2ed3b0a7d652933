"""Demo diagnosis datasets beyond the 2D chest X-ray set (core.demo.chest_xray):

* ``make_ct_scan_folders_demo``: a CC-CCII-like 3D chest CT set — class folders (``NCP``,
  ``CP``, ``Normal``), one sub-folder per scan holding its axial slices as PNG
  (``patient0007_scan1/slice_000.png``). NCP scans carry several faint peripheral ground-glass
  opacities, CP scans one dense consolidation, Normal none.
* ``make_multilabel_xray_demo``: an NIH-ChestX-ray-like 2D multi-label set — ``images/`` and a
  ``labels.csv`` with ``Image Index``, ``Finding Labels`` ("Effusion|Nodule", "No Finding") and
  ``Patient ID``.

Synthetic, learnable by a small network on CPU in minutes; not patient data.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

from core.demo.chest_xray import _ellipse, chest_image


def _ball(shape, center, radii) -> np.ndarray:
    zz, yy, xx = np.ogrid[:shape[0], :shape[1], :shape[2]]
    return (((zz - center[0]) / radii[0]) ** 2 + ((yy - center[1]) / radii[1]) ** 2
            + ((xx - center[2]) / radii[2]) ** 2)


def ct_volume(rng: np.random.Generator, kind: str, depth: int = 24, size: int = 64) -> np.ndarray:
    """A chest-CT-like volume in [0, 1] (air 0, lung ~0.1, soft tissue ~0.5)."""
    vol = np.zeros((depth, size, size), np.float32)
    body = _ellipse(size, size, size / 2, size / 2, size * 0.42, size * 0.47)
    lungs = [_ellipse(size, size, size * 0.47, size / 2 + s * size * 0.2, size * 0.28,
                      size * 0.15) for s in (-1, 1)]
    for z in range(depth):
        vol[z][body] = 0.5
        for lung in lungs:
            vol[z][lung] = 0.1
    lung_mask = np.broadcast_to(lungs[0] | lungs[1], vol.shape)
    if kind in ("NCP", "CP"):
        zs, ys, xs = np.nonzero(lung_mask)
        count = rng.integers(3, 6) if kind == "NCP" else 1
        for _ in range(count):
            i = rng.integers(0, len(zs))
            if kind == "NCP":  # faint, larger, peripheral ground glass
                radii, gain = (rng.uniform(3, 5), rng.uniform(4, 7), rng.uniform(4, 7)), 0.4
            else:              # one dense consolidation
                radii, gain = (rng.uniform(3, 5), rng.uniform(5, 8), rng.uniform(5, 8)), 0.6
            d = _ball(vol.shape, (zs[i], ys[i], xs[i]), radii)
            vol += gain * np.exp(-d) * lung_mask
    vol += rng.normal(0, 0.03, vol.shape).astype(np.float32)
    return np.clip(vol * rng.uniform(0.9, 1.1), 0, 1)


def make_ct_scan_folders_demo(out_dir: str | Path, scans_per_class: int = 60, seed: int = 0,
                              depth: int = 24, size: int = 64) -> Path:
    out = Path(out_dir)
    marker = out / ".m3b_demo.json"
    spec = {"scans_per_class": scans_per_class, "seed": seed, "depth": depth, "size": size,
            "lesions": 2}  # v2: brighter lesions (a default plan reaches accuracy 0.97, not 0.69)
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return out
    rng = np.random.default_rng(seed)
    patient = 0
    for label in ("NCP", "CP", "Normal"):
        for _ in range(scans_per_class):
            patient += 1
            scan = out / label / f"patient{patient:04d}_scan1"
            scan.mkdir(parents=True, exist_ok=True)
            vol = (ct_volume(rng, label, depth, size) * 255).astype(np.uint8)
            for z, plane in enumerate(vol):
                Image.fromarray(plane, mode="L").save(scan / f"slice_{z:03d}.png")
    marker.write_text(json.dumps(spec))
    return out


FINDINGS = ("Effusion", "Nodule", "Cardiomegaly")


def xray_with_findings(rng: np.random.Generator, findings: list[str], size: int = 96) -> np.ndarray:
    img = chest_image(rng, pneumonia=False, size=size).astype(np.float32) / 255
    yy, xx = np.mgrid[0:size, 0:size]
    if "Effusion" in findings:      # fluid level: brighten a costophrenic base
        side = rng.choice([-1, 1])
        base = (yy > size * rng.uniform(0.66, 0.74)) & (np.abs(xx - size / 2 - side * size * 0.19)
                                                         < size * 0.15)
        img[base] = np.maximum(img[base], rng.uniform(0.5, 0.6))
    if "Nodule" in findings:        # a small round bright spot in a lung
        cy, cx = size * rng.uniform(0.3, 0.55), size / 2 + rng.choice([-1, 1]) * size * 0.2
        img += 0.35 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * rng.uniform(2, 3) ** 2))
    if "Cardiomegaly" in findings:  # a wide heart shadow
        heart = _ellipse(size, size, size * 0.6, size * 0.52, size * 0.2, size * 0.2)
        img[heart] = np.maximum(img[heart], 0.62)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def make_multilabel_xray_demo(out_dir: str | Path, n_images: int = 360, seed: int = 0,
                              size: int = 96) -> Path:
    out = Path(out_dir)
    marker = out / ".m3b_demo.json"
    spec = {"n_images": n_images, "seed": seed, "size": size}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return out
    rng = np.random.default_rng(seed)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n_images):
        findings = [f for f in FINDINGS if rng.random() < 0.3]
        patient = i // 2 + 1
        name = f"{patient:05d}_{i % 2:03d}.png"
        Image.fromarray(xray_with_findings(rng, findings, size),
                        mode="L").save(out / "images" / name)
        rows.append({"Image Index": name, "Finding Labels": "|".join(findings) or "No Finding",
                     "Patient ID": patient})
    with open(out / "labels.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    marker.write_text(json.dumps(spec))
    return out
