"""Synthetic datasets of the system-versus-expert bench, one per task, in the layouts public
sets ship in, deterministic by seed and sized by ``scale`` (1.0: the full bench on a 2-core CPU;
QUICK runs use about 0.15):

* ``make_xray_2d``: ``NORMAL/`` and ``PNEUMONIA/`` class folders of 8-bit PNG chest radiographs
  named ``patient<NNNNN>_<k>.png``, one to four images per patient (a patient's images share
  anatomy and disease severity, so only a split by patient measures generalisation). Signal:
  faint, textured opacities in the lung fields, weak in mild cases; both classes carry small
  dense nodules (calcified granulomas) as decoys.
* ``make_ct_3d``: ``COVID/`` and ``Normal/`` class folders of chest CT volumes in HU
  (``subj<NNN>_scan<k>.nii.gz``; some subjects have a follow-up scan). Signal: three to six
  diffuse ground-glass opacities (5-9 voxels, +200..+400 HU over lung at their centre) against
  small bright vessels in every scan. Fainter versions left ~40 training volumes at chance
  after 20 epochs for both the system and the expert.
* ``make_msd_liver``: a Medical Segmentation Decathlon task folder (``imagesTr/``,
  ``labelsTr/``, ``dataset.json`` with ``training`` pairs) of abdominal CT in HU; masks
  1 = liver, 2 = tumour (a hypodense blob inside the liver, 20-45 HU darker).

Synthetic, not patient data. The generators write only into the folder they are given (empty or
written by them before); each is idempotent (``core.demo.writers.prepare``).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.ndimage import gaussian_filter

from core.demo.chest_xray import _ellipse, _smooth_noise, chest_image
from core.demo.segmentation import _blob, ct_case
from core.demo.writers import finish, prepare, save_nifti, save_png, scaled, write_json

VERSION = 4


@dataclass(frozen=True)
class BenchDataset:
    """A generated dataset as the bench registers and requests it."""
    key: str            # "diagnosis_2d" | "diagnosis_3d" | "segmentation_3d"
    template: str       # the system template expected to train it
    path: Path
    name: str
    description: str
    request: str


# ------------------------------------------------------------------------------ 2D X-ray
def xray_image(rng: np.random.Generator, severity: float, size: int) -> np.ndarray:
    """A normal chest radiograph (core.demo's anatomy) plus, when ``severity`` > 0, faint
    textured opacities in the lungs; every image may carry small dense decoy nodules."""
    img = chest_image(rng, pneumonia=False, size=size).astype(np.float32) / 255.0
    h = w = size
    cy, cx = h * 0.48, w * 0.5
    lungs = (_ellipse(h, w, cy, cx - w * 0.19, h * 0.33, w * 0.15)
             | _ellipse(h, w, cy, cx + w * 0.19, h * 0.33, w * 0.15))
    ys, xs = np.nonzero(lungs)
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(int(rng.integers(0, 3))):          # decoys: small, dense, sharp
        i = int(rng.integers(0, len(ys)))
        r = rng.uniform(0.8, 1.6) * size / 96
        img += 0.12 * (((yy - ys[i]) ** 2 + (xx - xs[i]) ** 2) <= r * r)
    if severity > 0:
        for _ in range(int(rng.integers(1, 3))):
            i = int(rng.integers(0, len(ys)))
            sigma = rng.uniform(5.0, 9.0) * size / 96
            blob = np.exp(-((yy - ys[i]) ** 2 + (xx - xs[i]) ** 2) / (2 * sigma ** 2))
            texture = 0.6 + 0.4 * np.clip(_smooth_noise(rng, size, 4), -1, 1)
            img += blob * texture * severity * rng.uniform(0.7, 1.1) * lungs
    img += rng.normal(0, 0.035, img.shape)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def make_xray_2d(out_dir: str | Path, scale: float = 1.0, seed: int = 0) -> Path:
    out = Path(out_dir)
    size = 96 if scale >= 0.5 else 64
    patients = scaled(850, scale, 40)
    spec = {"family": "vs_expert_xray_2d", "patients": patients, "size": size, "seed": seed,
            "v": VERSION}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for p in range(1, patients + 1):
        sick = rng.random() < 0.45
        severity = float(rng.uniform(0.10, 0.30)) if sick else 0.0
        label = "PNEUMONIA" if sick else "NORMAL"
        for k in range(1, 1 + int(rng.choice([1, 2, 3, 4], p=[0.3, 0.35, 0.2, 0.15]))):
            save_png(xray_image(rng, severity, size), out / label / f"patient{p:05d}_{k}.png")
    return finish(out, spec)


# ------------------------------------------------------------------------------ 3D chest CT
def chest_ct(rng: np.random.Generator, covid: bool, shape: tuple[int, int, int]) -> np.ndarray:
    """A chest CT volume in HU, RAS voxel order (x, y, z)."""
    nx, ny, nz = shape
    cx, cy = nx / 2 + rng.uniform(-1.5, 1.5), ny / 2 + rng.uniform(-1.5, 1.5)
    body = _ellipse(nx, ny, cx, cy, nx * 0.46, ny * 0.40)[..., None]
    lungs = np.zeros((nx, ny, 1), bool)
    for side in (-1, 1):
        lungs[..., 0] |= _ellipse(nx, ny, cx + side * nx * 0.2, cy + ny * 0.02,
                                  nx * rng.uniform(0.13, 0.16), ny * rng.uniform(0.24, 0.29))
    z = np.arange(nz)[None, None, :]
    taper = np.abs(z - nz / 2) < nz * rng.uniform(0.40, 0.48)
    lungs = lungs & taper
    hu = np.where(body, 40.0, -1000.0) + np.zeros(shape)
    hu[np.broadcast_to(lungs, shape)] = -850.0
    lung_mask = np.broadcast_to(lungs, shape)
    zs, ys, xs = np.nonzero(lung_mask)
    grid = np.ogrid[:nx, :ny, :nz]
    for _ in range(int(rng.integers(4, 10))):          # vessels: small and bright
        i = int(rng.integers(0, len(zs)))
        d = sum(((g - c) / r) ** 2 for g, c, r in zip(grid, (zs[i], ys[i], xs[i]),
                                                      [rng.uniform(0.8, 1.5)] * 3))
        hu[(d <= 1) & lung_mask] = 60.0
    if covid:
        for _ in range(int(rng.integers(3, 7))):       # ground glass: diffuse, bilateral
            i = int(rng.integers(0, len(zs)))
            radii = (rng.uniform(5, 9), rng.uniform(5, 9), rng.uniform(3, 6))
            d = sum(((g - c) / r) ** 2 for g, c, r in zip(grid, (zs[i], ys[i], xs[i]), radii))
            hu += rng.uniform(200, 400) * np.exp(-d) * lung_mask
    hu += gaussian_filter(rng.normal(0, 1, shape), 1.0) * 30 + rng.normal(0, 20, shape)
    return np.round(hu * rng.uniform(0.97, 1.03))


def make_ct_3d(out_dir: str | Path, scale: float = 1.0, seed: int = 0) -> Path:
    out = Path(out_dir)
    subjects = scaled(120, scale, 24)
    side = 48 if scale >= 0.5 else 32
    shape = (side, side, side * 3 // 4)
    spec = {"family": "vs_expert_ct_3d", "subjects": subjects, "shape": shape, "seed": seed,
            "v": VERSION}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    spacing = (1.5 * 64 / side, 1.5 * 64 / side, 2.5 * 64 / side)
    for s in range(1, subjects + 1):
        covid = s % 2 == 0
        label = "COVID" if covid else "Normal"
        for k in range(1, 1 + (2 if rng.random() < 0.2 else 1)):
            save_nifti(chest_ct(rng, covid, shape), spacing,
                       out / label / f"subj{s:03d}_scan{k}.nii.gz", np.int16)
    return finish(out, spec)


# ------------------------------------------------------------------------------ MSD liver
def liver_tumour_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    """(HU volume, mask 1 liver / 2 tumour) in RAS voxel order."""
    hu, mask = ct_case(rng, shape, ("liver",))
    liver = mask == 1
    inner = gaussian_filter(liver.astype(np.float32), 2.0) > 0.95   # away from the edge
    spots = np.nonzero(inner if inner.any() else liver)
    i = int(rng.integers(0, len(spots[0])))
    r = rng.uniform(3.0, 6.0)
    tumour = _blob(shape, [a[i] for a in spots], (r, r, r * 0.6), rng, wobble=0.2) & liver
    hu[tumour] -= rng.uniform(20, 45)
    mask[tumour] = 2
    return np.round(hu), mask


def make_msd_liver(out_dir: str | Path, scale: float = 1.0, seed: int = 0) -> Path:
    out = Path(out_dir)
    n = scaled(32, scale, 12)
    shape = (64, 64, 32) if scale >= 0.5 else (48, 48, 24)
    spec = {"family": "vs_expert_msd_liver", "n": n, "shape": shape, "seed": seed, "v": VERSION}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    training = []
    for k in range(1, n + 1):
        hu, mask = liver_tumour_case(rng, shape)
        spacing = (round(float(rng.uniform(1.4, 1.7)), 3),) * 2 + (2.5,)
        name = f"liver_{k:03d}.nii.gz"
        save_nifti(hu, spacing, out / "imagesTr" / name, np.int16)
        save_nifti(mask, spacing, out / "labelsTr" / name, np.uint8)
        training.append({"image": f"./imagesTr/{name}", "label": f"./labelsTr/{name}"})
    write_json(out / "dataset.json", {
        "name": "Liver", "description": "Liver and liver tumour segmentation (synthetic)",
        "reference": "synthetic", "licence": "CC-BY-SA 4.0", "release": "1.0",
        "tensorImageSize": "3D", "modality": {"0": "CT"},
        "labels": {"0": "background", "1": "liver", "2": "tumour"},
        "numTraining": n, "numTest": 0, "training": training, "test": []})
    return finish(out, spec)


# ------------------------------------------------------------------------------ the suite
def bench_datasets(root: str | Path, scale: float = 1.0, seed: int = 0,
                   only: tuple[str, ...] | None = None) -> list[BenchDataset]:
    """Generate (or reuse) the three datasets under ``root``; ``only`` selects by key."""
    root = Path(root)
    specs = [
        ("diagnosis_2d", "diagnosis", make_xray_2d, "xray_2d", "Bench chest X-ray pneumonia",
         "Frontal chest X-ray images (2D, 8-bit grayscale PNG) for pneumonia versus normal "
         "classification. Two class folders, NORMAL and PNEUMONIA; file names start with the "
         "patient ID (patient00012_3.png) and most patients have several images, so splits "
         "must keep each patient on one side. Synthetic benchmark data.",
         "classify pneumonia versus normal on chest X-rays"),
        ("diagnosis_3d", "diagnosis", make_ct_3d, "ct_3d", "Bench chest CT COVID",
         "Chest CT volumes (3D NIfTI, Hounsfield units) for COVID-19 pneumonia versus normal "
         "classification. Two class folders, COVID and Normal; file names start with the "
         "subject ID (subj007_scan1.nii.gz) and some subjects have a follow-up scan. "
         "Synthetic benchmark data.",
         "classify COVID-19 versus normal on chest CT volumes"),
        ("segmentation_3d", "segmentation", make_msd_liver, "msd_liver", "Bench liver tumour CT",
         "Abdominal CT (3D NIfTI, Hounsfield units) in the Medical Segmentation Decathlon "
         "layout: imagesTr, labelsTr and dataset.json; masks 1 = liver, 2 = tumour. "
         "Synthetic benchmark data.",
         "segment the liver and liver tumours on abdominal CT"),
    ]
    out = []
    for key, template, make, folder, name, description, request in specs:
        if only and key not in only:
            continue
        path = make(root / folder, scale=scale, seed=seed)
        out.append(BenchDataset(key, template, path, name, description, request))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="folder to write the datasets into (never a dataset)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for ds in bench_datasets(args.root, args.scale, args.seed):
        files = sum(1 for p in ds.path.rglob("*") if p.is_file() and not p.name.startswith("."))
        print(f"{ds.key:<16} {files:>6} files  {ds.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
