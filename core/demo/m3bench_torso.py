"""M3Bench-lite segmentation stand-ins of the torso (organ and anomaly), in the folder layouts of
the real collections (the head and chest X-ray ones are in m3bench_head_xray). Volumes are NIfTI
in physical units (CT in Hounsfield units), array axes x, y, z in RAS order unless a case is
stored LPS (as DICOM converters write it); masks share the image's geometry. ``labels.json``
lists the foreground names: position i is mask value i + 1.

* COVID19: ``images/`` + ``segmentation_masks/`` (``coronacases_NNN``, ``radiopaedia_*``), one
  label: ground-glass infection in the lungs.
* INSTANCE2022: ``images/NNN.nii.gz`` + ``masks/NNN.nii.gz``, non-contrast head CT (5 mm slices),
  one label: intracranial haemorrhage.
* MSD Pancreas: ``images/pancreas_NNN`` + ``masks/``, two labels: pancreas, pancreatic tumour.
* ChestX-Det10: ``images/<id>.png`` + ``masks/<id>.png`` (chest X-ray), labels Effusion, Mass.
* VerSe: ``images/sub-verseNNN_ct.nii.gz`` + ``masks/sub-verseNNN_seg-vert_msk.nii.gz`` (the
  VerSe file names), labels L1..L5; T12 with ribs above and the sacrum below are unlabelled.
* L2R-OASIS: ``images/OASIS_NNNN_0000.nii.gz`` + ``masks/`` (same names), skull-stripped T1
  brain, labels cortex, subcortical grey matter, white matter, CSF (OASIS "seg4").
* BTCV: ``Training/img/imgNNNN.nii.gz`` + ``Training/label/labelNNNN.nii.gz``,
  ``Testing/img/`` without labels, ``labels.json``: spleen, right kidney, left kidney, liver.

Synthetic, seeded, small; not patient data.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.demo.writers import (finish, prepare, save_nifti, scaled, write_json)
from core.demo.chest_xray import _ellipse
from core.demo.segmentation import _blob, _smooth


def _cyl(nx: int, ny: int, cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    """An in-plane ellipse (x, y) broadcastable over z."""
    return _ellipse(nx, ny, cx, cy, rx, ry)[..., None]


# ------------------------------------------------------------------------------------ COVID19
def covid_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    nx, ny, nz = shape
    cx, cy = nx / 2 + rng.uniform(-1.5, 1.5), ny / 2 + rng.uniform(-1.5, 1.5)
    hu = np.full(shape, -1000.0)
    body = np.broadcast_to(_cyl(nx, ny, cx, cy, nx * 0.46, ny * 0.38), shape)
    hu[body] = 40.0
    lungs = np.zeros(shape, bool)
    for sign in (-1, 1):
        lung = _blob(shape, (cx + sign * nx * 0.2, cy + ny * 0.02, nz * 0.5),
                     (nx * 0.16, ny * 0.28, nz * 0.55), rng, wobble=0.1)
        lungs |= lung & body
    hu[lungs] = -850.0 + 30 * _smooth(rng, shape, 1.5)[lungs]
    hu[np.broadcast_to(_cyl(nx, ny, cx, cy - ny * 0.3, 3.5, 3.5), shape) & body] = 420.0  # spine
    mask = np.zeros(shape, np.uint8)
    for _ in range(int(rng.integers(1, 5))):
        zs, ys, xs = np.nonzero(lungs.transpose(2, 1, 0))
        i = int(rng.integers(0, len(zs)))
        radii = (rng.uniform(3, 7), rng.uniform(3, 7), rng.uniform(2, 4))
        lesion = _blob(shape, (xs[i], ys[i], zs[i]), radii, rng, wobble=0.35) & lungs
        level = rng.uniform(-450, -200) if rng.random() < 0.7 else rng.uniform(-100, 20)
        hu[lesion] = level + 40 * _smooth(rng, shape, 1.0)[lesion]
        mask[lesion] = 1
    hu += rng.normal(0, 20, shape) * body
    return hu, mask


def make_covid19(out_dir: str | Path, scale: float = 1.0, seed: int = 201) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "COVID19", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    n = scaled(16, scale, 4)
    names = [f"coronacases_{i + 1:03d}" for i in range(n // 2)] + \
        [f"radiopaedia_{int(rng.integers(10, 99))}_{int(rng.integers(80000, 90000))}_{k}"
         for k in range(n - n // 2)]
    for name in names:
        shape = (int(rng.integers(56, 65)), int(rng.integers(52, 61)), int(rng.integers(26, 33)))
        spacing = (round(rng.uniform(1.1, 1.4), 3),) * 2 + (round(rng.uniform(2.0, 3.0), 2),)
        hu, mask = covid_case(rng, shape)
        lps = name.startswith("radiopaedia")
        save_nifti(np.round(hu), spacing, out / "images" / f"{name}.nii.gz", np.int16, lps)
        save_nifti(mask, spacing, out / "segmentation_masks" / f"{name}.nii.gz", np.uint8, lps)
    write_json(out / "labels.json", ["infection"])
    return finish(out, spec)


# ------------------------------------------------------------------------------- MSD Pancreas
def _abdomen(rng: np.random.Generator, shape):
    """Body, fat, muscle, spine, aorta; returns (hu, inner mask, centre, half-axes)."""
    nx, ny, nz = shape
    cx, cy = nx / 2 + rng.uniform(-1.5, 1.5), ny / 2 + rng.uniform(-1.5, 1.5)
    rx, ry = nx * rng.uniform(0.42, 0.46), ny * rng.uniform(0.34, 0.38)
    body = np.broadcast_to(_cyl(nx, ny, cx, cy, rx, ry), shape)
    inner = np.broadcast_to(_cyl(nx, ny, cx, cy, rx - 3, ry - 3), shape)
    hu = np.full(shape, -1000.0)
    hu[body] = -90.0
    hu[inner] = (35.0 + 8 * _smooth(rng, shape, 2))[inner]
    hu[np.broadcast_to(_cyl(nx, ny, cx, cy - ry * 0.7, 4, 4), shape) & inner] = 450.0
    hu[np.broadcast_to(_cyl(nx, ny, cx - 2, cy - ry * 0.38, 2.5, 2.5), shape) & inner] = 170.0
    return hu, body, inner, (cx, cy, rx, ry)


def pancreas_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    nx, ny, nz = shape
    hu, body, inner, (cx, cy, rx, ry) = _abdomen(rng, shape)
    liver = _blob(shape, (cx + rx * 0.45, cy + ry * 0.15, nz * 0.6),
                  (rx * 0.4, ry * 0.55, nz * 0.45), rng) & inner
    hu[liver] = 62.0
    # the pancreas: a tube from the head (patient right, near the duodenum) to the tail
    t = np.linspace(0, 1, 40)
    z0 = nz * rng.uniform(0.4, 0.55)
    path = np.stack([cx + rx * (0.25 - 0.75 * t), cy - ry * 0.1 + ry * 0.25 * np.sin(np.pi * t),
                     z0 + nz * 0.12 * t], 1)
    grids = np.ogrid[0:nx, 0:ny, 0:nz]
    dist = np.full(shape, np.inf)
    for (px, py, pz), radius in zip(path, np.linspace(4.2, 2.6, len(t))):
        d = np.sqrt((grids[0] - px) ** 2 + (grids[1] - py) ** 2 + ((grids[2] - pz) * 1.5) ** 2)
        dist = np.minimum(dist, d / radius)
    pancreas = (dist + 0.15 * _smooth(rng, shape, 1.5) <= 1.0) & inner
    halo = (dist <= 1.7) & inner & ~pancreas & ~liver
    hu[halo] = -70.0                                                       # peripancreatic fat
    hu[pancreas] = 105.0 + 6 * _smooth(rng, shape, 1.0)[pancreas]
    mask = np.zeros(shape, np.uint8)
    mask[pancreas] = 1
    px, py, pz = path[int(rng.integers(4, 30))]
    tumour = _blob(shape, (px, py, pz), (rng.uniform(2.5, 4), rng.uniform(2.5, 4),
                                         rng.uniform(1.5, 2.5)), rng, wobble=0.25)
    tumour &= pancreas | halo
    hu[tumour] = rng.uniform(15, 30) + 5 * _smooth(rng, shape, 1.0)[tumour]
    mask[tumour] = 2
    hu += rng.normal(0, 10, shape) * body
    return hu, mask


def make_msd_pancreas(out_dir: str | Path, scale: float = 1.0, seed: int = 203) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "MSD Pancreas", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    case = 0
    for _ in range(scaled(20, scale, 4)):
        case += int(rng.integers(1, 6))
        shape = (int(rng.integers(56, 65)), int(rng.integers(52, 61)), int(rng.integers(24, 31)))
        spacing = (round(rng.uniform(1.3, 1.6), 3),) * 2 + (2.5,)
        hu, mask = pancreas_case(rng, shape)
        save_nifti(np.round(hu), spacing, out / "images" / f"pancreas_{case:03d}.nii.gz",
                   np.int16, lps=case % 2 == 0)
        save_nifti(mask, spacing, out / "masks" / f"pancreas_{case:03d}.nii.gz", np.uint8,
                   lps=case % 2 == 0)
    write_json(out / "labels.json", ["pancreas", "pancreatic tumour"])
    return finish(out, spec)


# -------------------------------------------------------------------------------------- VerSe
VERTEBRAE = ("L1", "L2", "L3", "L4", "L5")


def spine_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    """Lumbar CT, z from the sacrum (bottom) to T12 with ribs (top); each vertebra is a body of
    cancellous bone in a cortical shell plus a posterior arch and spinous process, wider further
    down; discs between bodies; mask value k for L{k}."""
    nx, ny, nz = shape
    hu, body, inner, (cx, cy, rx, ry) = _abdomen(rng, shape)
    hu[inner] = (35.0 + 8 * _smooth(rng, shape, 2))[inner]   # redrawn below: spine, aorta
    bx, by = cx + rng.uniform(-1, 1), cy - ry * 0.25
    grids = np.ogrid[0:nx, 0:ny, 0:nz]
    hu[np.broadcast_to(_cyl(nx, ny, bx - 2, by + 9.0, 2.5, 2.5), shape) & inner] = 170.0
    mask = np.zeros(shape, np.uint8)
    z = rng.uniform(0.5, 2.0)
    sacrum = np.zeros(shape, bool)
    sacrum[..., : int(z) + 4] = _ellipse(nx, ny, bx, by - 1, 10.0, 6.5)[..., None]
    hu[sacrum & inner] = 380.0
    z += 4.0
    for k in range(len(VERTEBRAE)):                                         # L5 first
        value = len(VERTEBRAE) - k
        z += 1.4                                                            # the disc below
        height = rng.uniform(4.6, 5.2)
        half_w = 9.0 - 0.6 * k + rng.uniform(-0.2, 0.2)
        half_d = half_w * 0.6
        zc = z + height / 2
        slab = np.abs(grids[2] - zc) <= height / 2
        ellipse = ((grids[0] - bx) / half_w) ** 2 + ((grids[1] - by) / half_d) ** 2
        vbody = (ellipse <= 1.0) & slab
        ay = by - half_d - 2.0
        ring = (grids[0] - bx) ** 2 + (grids[1] - ay) ** 2
        arch = (ring <= 3.6 ** 2) & (ring > 1.8 ** 2) & (np.abs(grids[2] - zc) <= height / 2 - 0.5)
        spinous = (np.abs(grids[0] - bx) <= 1.2) & (grids[1] < ay - 3.0) & \
            (grids[1] > ay - 7.5) & (np.abs(grids[2] - zc) <= 1.6)
        vert = (vbody | arch | spinous) & inner
        hu[vert] = 230.0 + 20 * _smooth(rng, shape, 1.0)[vert]
        core_ = (((grids[0] - bx) / (half_w - 1.2)) ** 2 + ((grids[1] - by) / (half_d - 1.2)) ** 2
                 <= 1.0) & (np.abs(grids[2] - zc) <= height / 2 - 0.8)
        hu[vbody & ~core_ & inner] = 750.0                                  # cortical shell
        mask[vert] = value
        disc = (ellipse <= 1.0) & (grids[2] >= z - 1.4) & (grids[2] < z) & ~sacrum
        hu[disc & (mask == 0) & inner] = 90.0
        z += height
    if z + 1.4 < nz:                                                        # T12 with ribs
        zc = z + 1.4 + 2.5
        slab = np.abs(grids[2] - zc) <= 2.5
        t12 = (((grids[0] - bx) / 6.2) ** 2 + ((grids[1] - by) / 3.7) ** 2 <= 1.0) & slab
        ribs = (np.abs(np.hypot(grids[0] - cx, (grids[1] - cy) * rx / ry) - rx * 0.8) <= 1.3) \
            & (grids[1] < cy + ry * 0.3) & slab
        hu[(t12 | ribs) & inner] = 600.0
    hu += rng.normal(0, 12, shape) * body
    return hu, mask


def make_verse(out_dir: str | Path, scale: float = 1.0, seed: int = 205) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "VerSe", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    case = 3
    for _ in range(scaled(20, scale, 4)):
        case += int(rng.integers(1, 9))
        shape = (int(rng.integers(48, 53)), int(rng.integers(48, 53)), int(rng.integers(40, 44)))
        spacing = (round(rng.uniform(1.5, 1.7), 3),) * 2 + (3.0,)
        hu, mask = spine_case(rng, shape)
        stem = f"sub-verse{case:03d}"
        save_nifti(np.round(hu), spacing, out / "images" / f"{stem}_ct.nii.gz", np.int16,
                   lps=case % 3 == 0)
        save_nifti(mask, spacing, out / "masks" / f"{stem}_seg-vert_msk.nii.gz", np.uint8,
                   lps=case % 3 == 0)
    write_json(out / "labels.json", list(VERTEBRAE))
    return finish(out, spec)


# --------------------------------------------------------------------------------------- BTCV
BTCV_LABELS = ("spleen", "right kidney", "left kidney", "liver")


def btcv_case(rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    """Portal-venous abdominal CT: 1 spleen (left, posterior, high), 2 right kidney, 3 left
    kidney (posterior, beside the spine, lower), 4 liver (right, large)."""
    nx, ny, nz = shape
    hu, body, inner, (cx, cy, rx, ry) = _abdomen(rng, shape)
    mask = np.zeros(shape, np.uint8)
    jitter = lambda: rng.uniform(-0.05, 0.05)  # noqa: E731
    organs = [  # value, centre (fractions of the half-axes / depth), radii, HU
        (4, (0.42, 0.12, 0.62), (0.42, 0.58, 0.4), 62.0),
        (1, (-0.55, -0.3, 0.66), (0.2, 0.3, 0.25), 105.0),
        (2, (0.36, -0.5, 0.36), (0.12, 0.2, 0.28), 150.0),
        (3, (-0.36, -0.5, 0.4), (0.12, 0.2, 0.28), 150.0),
    ]
    for value, (fx, fy, fz), (sx, sy, sz), level in organs:
        centre = (cx + (fx + jitter()) * rx, cy + (fy + jitter()) * ry, (fz + jitter()) * nz)
        radii = [s * a * rng.uniform(0.88, 1.12) for s, a in zip((sx, sy, sz), (rx, ry, nz))]
        organ = _blob(shape, centre, radii, rng) & inner & (mask == 0)
        hu[organ] = level + 6 * _smooth(rng, shape, 1.5)[organ]
        mask[organ] = value
    hu += rng.normal(0, 12, shape) * body
    return hu, mask


def make_btcv(out_dir: str | Path, scale: float = 1.0, seed: int = 207) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "BTCV", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    n_train, n_test = scaled(18, scale, 4), scaled(4, scale, 1)
    for i in range(1, n_train + n_test + 1):
        shape = (int(rng.integers(52, 61)), int(rng.integers(48, 57)), int(rng.integers(26, 33)))
        spacing = (round(rng.uniform(1.4, 1.7), 3),) * 2 + (round(rng.uniform(2.5, 3.5), 2),)
        hu, mask = btcv_case(rng, shape)
        lps = i % 2 == 1
        if i <= n_train:
            save_nifti(np.round(hu), spacing, out / "Training" / "img" / f"img{i:04d}.nii.gz",
                       np.int16, lps)
            save_nifti(mask, spacing, out / "Training" / "label" / f"label{i:04d}.nii.gz",
                       np.uint8, lps)
        else:
            save_nifti(np.round(hu), spacing, out / "Testing" / "img" / f"img{i + 40:04d}.nii.gz",
                       np.int16, lps)
    write_json(out / "labels.json", list(BTCV_LABELS))
    return finish(out, spec)
