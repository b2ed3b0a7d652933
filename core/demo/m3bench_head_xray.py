"""M3Bench-lite segmentation stand-ins of the head and the chest X-ray: INSTANCE2022-like
intracranial haemorrhage CT, L2R-OASIS-like brain MRI parcellation, ChestX-Det10-like X-ray
findings (synthetic, learnable on CPU, laid out as the real collections ship).

May import: core.demo and third-party libraries."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.demo.writers import finish, prepare, save_nifti, save_png, scaled, to_uint8, write_json
from core.demo.segmentation import _blob, _smooth, xray_case


# ------------------------------------------------------------------------------- INSTANCE2022
def head_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    nx, ny, nz = shape
    c = (nx / 2 + rng.uniform(-1, 1), ny / 2 + rng.uniform(-1, 1), nz / 2)
    head_r = (nx * 0.42, ny * 0.46, nz * 0.62)
    hu = np.full(shape, -1000.0)
    head = _blob(shape, c, head_r, rng, wobble=0.03)
    hu[head] = 30.0                                                        # scalp
    skull = _blob(shape, c, [r * 0.93 for r in head_r], rng, wobble=0.0)
    hu[skull] = 900.0
    brain = _blob(shape, c, [r * 0.82 for r in head_r], rng, wobble=0.04)
    hu[brain] = 38.0 + 4 * _smooth(rng, shape, 1.5)[brain]                 # grey/white matter
    for sign in (-1, 1):                                                   # ventricles
        v = _blob(shape, (c[0] + sign * 2.2, c[1] + 1, c[2]), (1.8, 6.0, 1.5), rng, 0.1)
        hu[v & brain] = 8.0
    mask = np.zeros(shape, np.uint8)
    for _ in range(int(rng.integers(1, 3))):
        zs, ys, xs = np.nonzero(brain.transpose(2, 1, 0))
        i = int(rng.integers(0, len(zs)))
        radii = (rng.uniform(2.5, 6), rng.uniform(2.5, 6), rng.uniform(0.8, 1.8))
        bleed = _blob(shape, (xs[i], ys[i], zs[i]), radii, rng, wobble=0.3) & brain
        hu[bleed] = rng.uniform(62, 80) + 3 * _smooth(rng, shape, 1.0)[bleed]
        mask[bleed] = 1
    hu += rng.normal(0, 4, shape) * head
    return hu, mask


def make_instance2022(out_dir: str | Path, scale: float = 1.0, seed: int = 202) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "INSTANCE2022", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for i in range(1, scaled(20, scale, 4) + 1):
        shape = (int(rng.integers(60, 65)), int(rng.integers(60, 65)), int(rng.integers(18, 23)))
        spacing = (round(rng.uniform(2.6, 2.9), 3),) * 2 + (5.0,)
        hu, mask = head_case(rng, shape)
        save_nifti(np.round(hu), spacing, out / "images" / f"{i:03d}.nii.gz", np.int16)
        save_nifti(mask, spacing, out / "masks" / f"{i:03d}.nii.gz", np.uint8)
    write_json(out / "labels.json", ["intracranial haemorrhage"])
    return finish(out, spec)


# ------------------------------------------------------------------------------- ChestX-Det10
def chestx_case(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Chest X-ray with 0-2 findings: 1 = pleural effusion (dense lung base with a meniscus),
    2 = mass (a round dense opacity in a lung)."""
    pixels, organs = xray_case(rng, size)
    img = pixels.astype(np.float32) / 255
    lungs = organs == 1
    mask = np.zeros((size, size), np.uint8)
    yy, xx = np.mgrid[0:size, 0:size]
    findings = [f for f in ("effusion", "mass") if rng.random() < 0.55]
    if "effusion" in findings:
        half = xx < size / 2 if rng.random() < 0.5 else xx >= size / 2
        rows = np.nonzero((lungs & half).any(1))[0]
        level = rows.min() + (rows.max() - rows.min()) * rng.uniform(0.62, 0.75)
        meniscus = level - 0.004 * size * (np.abs(xx - size / 2) - size * 0.15)
        fluid = lungs & half & (yy > meniscus)
        img[fluid] = rng.uniform(0.55, 0.62) + 0.02 * rng.normal(size=fluid.sum())
        mask[fluid] = 1
    if "mass" in findings:
        ys, xs = np.nonzero(lungs & (mask == 0))
        i = int(rng.integers(0, len(ys)))
        r = size * rng.uniform(0.06, 0.09)
        blob = (np.hypot(yy - ys[i], xx - xs[i]) < r) & lungs
        img[blob] += rng.uniform(0.28, 0.36)
        mask[blob] = 2
    return to_uint8(img), mask


def make_chestx_det10(out_dir: str | Path, scale: float = 1.0, seed: int = 204) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "ChestX-Det10", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    ident = 36000
    for _ in range(scaled(70, scale, 4)):
        ident += int(rng.integers(1, 40))
        img, mask = chestx_case(rng, 96)
        save_png(img, out / "images" / f"{ident}.png")
        save_png(mask, out / "masks" / f"{ident}.png")
    write_json(out / "labels.json", ["Effusion", "Mass"])
    return finish(out, spec)


# ---------------------------------------------------------------------------------- L2R-OASIS
OASIS_LABELS = ("cortex", "subcortical grey matter", "white matter", "CSF")


def oasis_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    """Skull-stripped, affinely aligned T1 brain; mask 1 cortex, 2 subcortical grey matter,
    3 white matter, 4 CSF (ventricles and sulci)."""
    c = [n / 2 + rng.uniform(-0.8, 0.8) for n in shape]
    r = [n * 0.43 * rng.uniform(0.96, 1.03) for n in shape]
    brain = _blob(shape, c, r, rng, wobble=0.05)
    mask = np.zeros(shape, np.uint8)
    mask[brain] = 4                                                        # outer CSF
    cortex = _blob(shape, c, [x * 0.93 for x in r], rng, wobble=0.08) & brain
    mask[cortex] = 1
    wm = _blob(shape, c, [x * 0.72 for x in r], rng, wobble=0.25) & cortex
    mask[wm] = 3
    sulci = (_smooth(rng, shape, 1.0) > 1.3) & cortex & ~wm
    mask[sulci] = 4
    for sign in (-1, 1):
        deep = _blob(shape, (c[0] + sign * r[0] * 0.22, c[1] + r[1] * 0.05, c[2]),
                     (r[0] * 0.14, r[1] * 0.18, r[2] * 0.16), rng, wobble=0.15)
        mask[deep & wm] = 2
        vent = _blob(shape, (c[0] + sign * r[0] * 0.08, c[1] + r[1] * 0.1, c[2] + r[2] * 0.1),
                     (r[0] * 0.06, r[1] * 0.3 * rng.uniform(0.8, 1.3), r[2] * 0.1), rng, 0.1)
        mask[vent & wm] = 4
    level = {0: 0.0, 1: 0.55, 2: 0.72, 3: 0.95, 4: 0.22}
    t1 = np.vectorize(level.get)(mask).astype(np.float32)
    bias = np.clip(1 + 0.06 * _smooth(rng, shape, 6), 0.8, 1.2)
    t1 = (t1 + rng.normal(0, 0.035, shape)) * bias * brain
    return np.clip(t1, 0, None) * rng.uniform(80, 160), mask


def make_l2r_oasis(out_dir: str | Path, scale: float = 1.0, seed: int = 206) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "L2R-OASIS", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for i in range(1, scaled(16, scale, 4) + 1):
        image, mask = oasis_case(rng, (40, 48, 40))
        name = f"OASIS_{i:04d}_0000.nii.gz"
        save_nifti(image, (3.6, 3.6, 3.6), out / "images" / name, np.float32)
        save_nifti(mask, (3.6, 3.6, 3.6), out / "masks" / name, np.uint8)
    write_json(out / "labels.json", list(OASIS_LABELS))
    return finish(out, spec)
