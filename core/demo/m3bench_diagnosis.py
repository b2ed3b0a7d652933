"""Diagnosis datasets of M3Bench-lite, in the folder layouts of the real collections:

* ADNI: ``tensors/<Image Data ID>.pt`` (torch float32 volumes, axes z, y, x) and an ADNI
  collection CSV (``Image Data ID, Subject, Group, Sex, Age, Visit, ...``), Group in {CN, MCI,
  AD}; one to three visits per subject. Signal: ventricles and sulcal CSF widen with atrophy
  (CN < MCI < AD).
* KneeMRI: ``volumes/<examId>-<seriesNo>.pck`` (pickled uint16 NumPy volumes, axes slice, row,
  column: sagittal knee) and ``metadata.csv`` (``examId, seriesNo, aclDiagnosis, kneeLR, roi*,
  volumeFilename``), aclDiagnosis 0 = healthy, 1 = partial tear, 2 = complete rupture; healthy
  knees are the majority. Signal: the dark ligament band in the notch is intact, thinned and
  interrupted with oedema, or absent with a fluid pool.
* CC-CCII: ``<class>/<patient id>/<scan id>/<NNNN>.png`` for classes NCP, CP, Normal (axial
  slices of one CT scan per scan folder; some patients have two scans). Signal from
  :func:`core.demo.diagnosis.ct_volume`.
* CT-Kidney: four class folders ``Cyst``, ``Normal``, ``Stone``, ``Tumor`` of RGB JPEG axial CT
  slices named ``<Class>- (<k>).jpg``, no patient IDs. Signal: a dark round cyst, a bulging
  heterogeneous tumour or a tiny very bright stone in one kidney.

Synthetic, seeded, small enough to train on two CPU cores in minutes; not patient data.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from core.demo.writers import (finish, pick, prepare, save_png, scaled, to_uint8, write_csv)
from core.demo.chest_xray import _ellipse
from core.demo.diagnosis import ct_volume
from core.demo.segmentation import _smooth

ADNI_GROUPS = ("CN", "MCI", "AD")
ADNI_SHAPE = (32, 40, 32)   # z, y, x
KNEE_SHAPE = (16, 48, 48)   # sagittal slices, rows (superior -> inferior), columns (ant -> post)
KIDNEY_CLASSES = ("Cyst", "Normal", "Stone", "Tumor")


def _ellipsoid(shape, center, radii) -> np.ndarray:
    grids = np.ogrid[tuple(slice(0, s) for s in shape)]
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grids, center, radii)) <= 1.0


# --------------------------------------------------------------------------------------- ADNI
def adni_volume(rng: np.random.Generator, atrophy: float, anatomy: dict) -> np.ndarray:
    """T1-like brain (z, y, x): scalp, skull, CSF, grey and white matter; ``atrophy`` >= 1 widens
    the ventricles and the CSF between brain and skull."""
    shape = ADNI_SHAPE
    c = anatomy["center"] + rng.normal(0, 0.3, 3)
    r = anatomy["radii"]
    vol = np.zeros(shape, np.float32)
    vol[_ellipsoid(shape, c, r)] = 0.65                     # scalp
    vol[_ellipsoid(shape, c, r * 0.92)] = 0.08              # skull
    vol[_ellipsoid(shape, c, r * 0.86)] = 0.18              # CSF
    shrink = 1.0 - 0.045 * (atrophy - 1.0)
    brain = _ellipsoid(shape, c, r * 0.84 * shrink)
    vol[brain] = 0.5                                        # cortex
    wm = _ellipsoid(shape, c, r * 0.66 * shrink)
    vol[wm] = 0.85                                          # white matter
    fold = _smooth(rng, shape, 1.2) > 1.1                   # sulci
    vol[fold & brain & ~wm] = 0.2
    for sign in (-1, 1):                                    # lateral ventricles
        grow = atrophy ** 0.8 * anatomy["ventricle_scale"]
        centre = c + [0.5, -1.0, sign * (2.0 + 0.6 * (atrophy - 1.0))]
        radii = np.array([2.4, 5.5, 1.4]) * grow
        vol[_ellipsoid(shape, centre, radii) & brain] = 0.18
    bias = 1 + 0.08 * _smooth(rng, shape, 6)
    vol = (vol + rng.normal(0, 0.035, shape)) * bias
    return np.clip(vol, 0, None).astype(np.float32) * rng.uniform(600, 1400)


def make_adni(out_dir: str | Path, scale: float = 1.0, seed: int = 101) -> Path:
    import torch

    out = Path(out_dir)
    spec = {"dataset": "ADNI", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    rows = []
    image_id = 40000
    per_group = {"CN": scaled(22, scale, 3), "MCI": scaled(22, scale, 3),
                 "AD": scaled(20, scale, 3)}
    base_atrophy = {"CN": (1.0, 0.1), "MCI": (1.45, 0.12), "AD": (1.9, 0.14)}
    site, subjects = 2, set()
    for group in ADNI_GROUPS:
        for k in range(per_group[group]):
            site = 2 + (site * 7 + k) % 140
            subject = f"{site:03d}_S_{int(rng.integers(100, 9999)):04d}"
            while subject in subjects:
                subject = f"{site:03d}_S_{int(rng.integers(100, 9999)):04d}"
            subjects.add(subject)
            sex, age = pick(rng, ["M", "F"]), int(rng.integers(58, 90))
            anatomy = {"center": np.array(ADNI_SHAPE) / 2 + rng.normal(0, 0.6, 3),
                       "radii": np.array([13.0, 17.0, 13.0]) * rng.uniform(0.94, 1.04),
                       "ventricle_scale": rng.uniform(0.9, 1.1)}
            atrophy = max(0.8, rng.normal(*base_atrophy[group]))
            visits = ["sc", "m06", "m12"][: int(rng.choice([1, 2, 3], p=[0.3, 0.45, 0.25]))]
            for v, visit in enumerate(visits):
                image_id += int(rng.integers(3, 400))
                ident = f"I{image_id}"
                grown = atrophy + (0.05 * v if group != "CN" else 0.0)
                tensor = torch.from_numpy(adni_volume(rng, grown, anatomy))
                (out / "tensors").mkdir(exist_ok=True)
                torch.save(tensor, out / "tensors" / f"{ident}.pt")
                rows.append({"Image Data ID": ident, "Subject": subject, "Group": group,
                             "Sex": sex, "Age": age + v // 2, "Visit": visit, "Modality": "MRI",
                             "Description": "MPRAGE", "Type": "Original",
                             "Acq Date": f"{2006 + v // 2}/{(k % 12) + 1}/{(v * 9) % 28 + 1}",
                             "Format": "PT", "Downloaded": ""})
    order = rng.permutation(len(rows))
    write_csv(out / "ADNI1_Complete_1Yr_1.5T.csv", list(rows[0]), [rows[i] for i in order])
    return finish(out, spec)


# ------------------------------------------------------------------------------------ KneeMRI
def knee_volume(rng: np.random.Generator, code: int) -> np.ndarray:
    """Sagittal proton-density-like knee: bright marrow in femur and tibia, grey soft tissue, and
    in the central slices the anterior cruciate ligament as a dark oblique band (code 0), thinned
    and interrupted with bright oedema (1), or missing with a fluid pool (2)."""
    n_sl, h, w = KNEE_SHAPE
    vol = np.zeros(KNEE_SHAPE, np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    femur_c = (h * rng.uniform(0.24, 0.3), w * rng.uniform(0.45, 0.55))
    tibia_top = h * rng.uniform(0.56, 0.62)
    notch = n_sl // 2 + int(rng.integers(-1, 2))
    start = np.array([femur_c[0] + h * 0.12, femur_c[1] + w * 0.12])   # posterior femur
    end = np.array([tibia_top + 1.5, femur_c[1] - w * 0.16])            # anterior tibia
    for s in range(n_sl):
        img = np.full((h, w), 0.42, np.float32)
        img[_ellipse(h, w, h / 2, w / 2, h * 0.62, w * 0.47) == 0] = 0.05
        femur = _ellipse(h, w, femur_c[0], femur_c[1], h * 0.2, w * 0.24)
        img[femur] = 0.9
        tibia = (yy > tibia_top) & (np.abs(xx - femur_c[1]) < w * 0.25)
        img[tibia] = 0.85
        cartilage = (_ellipse(h, w, femur_c[0], femur_c[1], h * 0.22, w * 0.26) & ~femur) | \
            ((yy > tibia_top - 1.5) & (yy <= tibia_top) & (np.abs(xx - femur_c[1]) < w * 0.25))
        img[cartilage] = 0.6
        if abs(s - notch) <= 3:                                # the intercondylar notch
            t = np.clip(((yy - start[0]) * (end[0] - start[0]) + (xx - start[1]) *
                         (end[1] - start[1])) / np.sum((end - start) ** 2), 0, 1)
            dist = np.hypot(yy - (start[0] + t * (end[0] - start[0])),
                            xx - (start[1] + t * (end[1] - start[1])))
            between = (t > 0.02) & (t < 0.98)
            if code == 0:
                img[(dist < 2.2) & between] = 0.08
            elif code == 1:
                gap = (t > 0.45) & (t < 0.62)
                img[(dist < 1.1) & between & ~gap] = 0.08
                mid = start + 0.53 * (end - start)
                img[np.hypot(yy - mid[0], xx - mid[1]) < 2.6] = 0.78
            else:
                mid = start + rng.uniform(0.4, 0.6) * (end - start)
                img[np.hypot(yy - mid[0], xx - mid[1]) < 5.0] = 0.95
                img[(dist < 1.6) & (t > 0.9) & (t < 0.98)] = 0.1     # tibial stump
        vol[s] = img
    vol += 0.04 * _smooth(rng, KNEE_SHAPE, 2) + rng.normal(0, 0.03, KNEE_SHAPE)
    scale = rng.uniform(1800, 3200)
    return (np.clip(vol, 0, None) * scale).astype(np.uint16)


def make_knee_mri(out_dir: str | Path, scale: float = 1.0, seed: int = 102) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "KneeMRI", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    counts = {0: scaled(60, scale, 3), 1: scaled(28, scale, 3), 2: scaled(24, scale, 3)}
    codes = [c for c, n in counts.items() for _ in range(n)]
    codes = [codes[i] for i in rng.permutation(len(codes))]
    rows = []
    exam = 329000
    (out / "volumes").mkdir(exist_ok=True)
    for code in codes:
        exam += int(rng.integers(20, 900))
        series = int(rng.integers(4, 12))
        name = f"{exam}-{series}.pck"
        volume = knee_volume(rng, code)
        with open(out / "volumes" / name, "wb") as handle:
            pickle.dump(volume, handle, protocol=4)
        rows.append({"examId": exam, "seriesNo": series, "aclDiagnosis": code,
                     "kneeLR": int(rng.integers(0, 2)), "roiX": int(rng.integers(20, 28)),
                     "roiY": int(rng.integers(18, 26)), "roiZ": KNEE_SHAPE[0] // 2 - 3,
                     "roiHeight": 14, "roiWidth": 16, "roiDepth": 7, "volumeFilename": name})
    write_csv(out / "metadata.csv", list(rows[0]), rows)
    return finish(out, spec)


# ------------------------------------------------------------------------------------ CC-CCII
def make_cc_ccii(out_dir: str | Path, scale: float = 1.0, seed: int = 103) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "CC-CCII", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    patient, scan_id = 0, 1000
    for label in ("NCP", "CP", "Normal"):
        for _ in range(scaled(28, scale, 2)):
            patient += int(rng.integers(1, 4))
            for _scan in range(int(rng.choice([1, 2], p=[0.7, 0.3]))):
                scan_id += int(rng.integers(1, 30))
                folder = out / label / str(patient) / str(scan_id)
                volume = to_uint8(ct_volume(rng, label, depth=16, size=48))
                for z, plane in enumerate(volume):
                    save_png(plane, folder / f"{z:04d}.png")
    return finish(out, spec)


# ---------------------------------------------------------------------------------- CT-Kidney
def kidney_slice(rng: np.random.Generator, kind: str, size: int = 64) -> np.ndarray:
    """Axial contrast CT slice through both kidneys, soft-tissue window, in [0, 1]."""
    h = w = size
    cy, cx = h * (0.5 + rng.uniform(-0.03, 0.03)), w * (0.5 + rng.uniform(-0.03, 0.03))
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w), np.float32)
    img[_ellipse(h, w, cy, cx, h * 0.36, w * 0.46)] = 0.25                 # fat
    inner = _ellipse(h, w, cy, cx, h * 0.32, w * 0.42)
    img[inner] = 0.45                                                       # muscle, bowel
    img[_ellipse(h, w, cy - h * 0.08, cx - w * 0.2, h * 0.16, w * 0.16) & inner] = 0.55  # liver
    img[_ellipse(h, w, cy + h * 0.2, cx, h * 0.07, w * 0.07)] = 0.95        # vertebra
    img[_ellipse(h, w, cy + h * 0.06, cx + w * 0.03, h * 0.035, w * 0.035)] = 0.8  # aorta
    kidneys = []
    for sign in (-1, 1):
        ky, kx = cy + h * 0.12, cx + sign * w * rng.uniform(0.22, 0.26)
        ry, rx = h * rng.uniform(0.12, 0.14), w * rng.uniform(0.085, 0.1)
        kidney = _ellipse(h, w, ky, kx, ry, rx)
        img[kidney] = 0.72                                                  # enhancing cortex
        img[_ellipse(h, w, ky, kx - sign * rx * 0.3, ry * 0.45, rx * 0.3)] = 0.5  # sinus
        kidneys.append((kidney, ky, kx, ry, rx))
    kidney, ky, kx, ry, rx = kidneys[int(rng.integers(0, 2))]
    oy, ox = ky + rng.uniform(-0.4, 0.4) * ry, kx + rng.uniform(-0.3, 0.3) * rx
    if kind == "Cyst":
        r = rng.uniform(3.5, 5.0)
        img[np.hypot(yy - oy, xx - ox) < r] = 0.22
    elif kind == "Tumor":
        r = rng.uniform(6.0, 8.0)
        mass = np.hypot(yy - oy, xx - ox) < r
        img[mass] = 0.5 + 0.15 * np.clip(_smooth(rng, (h, w), 1.0), -1.5, 1.5)[mass]
    elif kind == "Stone":
        r = rng.uniform(1.8, 2.6)
        img[np.hypot(yy - oy, xx - ox) < r] = 1.0
    img += 0.03 * _smooth(rng, (h, w), 3) + rng.normal(0, 0.025, (h, w))
    return np.clip(img * rng.uniform(0.92, 1.08), 0, 1)


def make_ct_kidney(out_dir: str | Path, scale: float = 1.0, seed: int = 104) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "CT-Kidney", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    counts = {"Cyst": 30, "Normal": 36, "Stone": 27, "Tumor": 27}
    for kind in KIDNEY_CLASSES:
        for k in range(1, scaled(counts[kind], scale, 3) + 1):
            save_png(to_uint8(kidney_slice(rng, kind)), out / kind / f"{kind}- ({k}).jpg",
                     rgb=True, quality=92)
    return finish(out, spec)
