"""Report-generation datasets of M3Bench-lite, in the folder layouts of the real collections;
every report states what the image shows (each sentence in one of two wordings):

* CT-RATE: nested case folders ``dataset/<split>/<split>_<patient>/<split>_<patient>_<scan>/
  <split>_<patient>_<scan>_<reconstruction>.nii.gz`` (several scans per patient, several
  reconstructions per scan sharing one report) and ``train.json`` / ``test.json``, lists of
  ``{"image_path" (relative to the dataset folder), "finding", "impression"}``. Findings: a lung
  nodule (right or left), bilateral pleural effusions, an enlarged heart.
* RadGenome-Brain: ``images/<case>.nii.gz`` (brain MRI) and ``reports_train.json`` /
  ``reports_test.json``, lists of ``{"image" (file name), "finding", "impression"}``; signal and
  wording from :mod:`core.demo.reports`.
* IU-Xray: ``images/images_normalized/<uid>_IM-<nnnn>-<mmmm>.dcm.png`` (a frontal and a lateral
  view per study) and one CSV ``indiana_reports.csv`` with ``uid, filename, projection, MeSH,
  Problems, indication, comparison, findings, impression``; a few studies have no findings text.

Synthetic, seeded, small; not patient data.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.ndimage import gaussian_filter

from core.demo.writers import (finish, pick, prepare, save_nifti, save_png, scaled, to_uint8,
                               write_csv, write_json)
from core.demo.chest_xray import _ellipse, _smooth_noise
from core.demo.reports import brain_report, brain_volume, chest_image, chest_report
from core.demo.segmentation import _blob


# ------------------------------------------------------------------------------------ CT-RATE
def chest_ct_findings(rng: np.random.Generator) -> dict:
    return {"nodule": pick(rng, ["right", "left"]) if rng.random() < 0.5 else None,
            "effusion": bool(rng.random() < 0.35), "cardiomegaly": bool(rng.random() < 0.35)}


def chest_ct_volume(rng: np.random.Generator, found: dict, shape=(40, 40, 24)) -> np.ndarray:
    """Chest CT in HU, array axes x, y, z in RAS order (x grows towards the patient's right,
    y anteriorly, z upwards)."""
    nx, ny, nz = shape
    cx, cy = nx / 2 + rng.uniform(-1, 1), ny / 2 + rng.uniform(-1, 1)
    hu = np.full(shape, -1000.0)
    body = np.broadcast_to(_ellipse(nx, ny, cx, cy, nx * 0.46, ny * 0.38)[..., None], shape)
    hu[body] = 35.0
    lungs = {}
    for side, sign in (("right", 1), ("left", -1)):
        lung = _blob(shape, (cx + sign * nx * 0.2, cy + 1, nz * 0.5),
                     (nx * 0.15, ny * 0.27, nz * 0.55), rng, wobble=0.08) & body
        lungs[side] = lung
        hu[lung] = -860.0
    heart_r = nx * (rng.uniform(0.2, 0.23) if found["cardiomegaly"] else rng.uniform(0.11, 0.13))
    heart = _blob(shape, (cx - 2, cy + ny * 0.12, nz * 0.4), (heart_r, heart_r * 0.8, nz * 0.3),
                  rng, wobble=0.05) & body
    hu[heart] = 45.0
    if found["effusion"]:
        yy = np.ogrid[0:nx, 0:ny, 0:nz][1]
        for lung in lungs.values():
            hu[lung & (yy < cy - ny * rng.uniform(0.1, 0.14))] = 15.0       # dependent fluid
    if found["nodule"]:
        zs, ys, xs = np.nonzero(lungs[found["nodule"]].transpose(2, 1, 0))
        i = int(rng.integers(0, len(zs)))
        nodule = _blob(shape, (xs[i], ys[i], zs[i]), (3.4, 3.4, 2.6), rng, wobble=0.1)
        hu[nodule & lungs[found["nodule"]]] = 40.0
    hu[np.broadcast_to(_ellipse(nx, ny, cx, cy - ny * 0.3, 3, 3)[..., None], shape)] = 450.0
    return hu


def chest_ct_report(rng: np.random.Generator, found: dict) -> tuple[str, str]:
    heart = pick(rng, ["The heart is enlarged.", "Cardiomegaly is present."]
                 if found["cardiomegaly"] else ["Heart size is normal.",
                                                "The heart is normal in size."])
    lung = (pick(rng, [f"A solid nodule is seen in the {found['nodule']} lung.",
                       f"There is a {found['nodule']} pulmonary nodule."])
            if found["nodule"] else pick(rng, ["No pulmonary nodule is seen.",
                                               "The lungs show no nodules."]))
    pleura = pick(rng, ["Bilateral pleural effusions are present.",
                        "There is fluid in both pleural spaces."]
                  if found["effusion"] else ["No pleural effusion.",
                                             "The pleural spaces are clear."])
    finding = " ".join([heart, lung, pleura, "Mediastinal structures are unremarkable."])
    parts = []
    if found["nodule"]:
        parts.append(f"{found['nodule'].capitalize()} pulmonary nodule; follow-up CT advised.")
    if found["effusion"]:
        parts.append("Bilateral pleural effusions.")
    if found["cardiomegaly"]:
        parts.append("Cardiomegaly.")
    impression = " ".join(parts) or pick(rng, ["No acute findings in the chest.",
                                               "Normal chest CT."])
    return finding, impression


def make_ct_rate(out_dir: str | Path, scale: float = 1.0, seed: int = 301) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "CT-RATE", "scale": scale, "seed": seed, "v": 2}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    lists: dict[str, list] = {"train": [], "valid": []}
    for split, n_patients in (("train", scaled(72, scale, 3)), ("valid", scaled(18, scale, 2))):
        for p in range(1, n_patients + 1):
            for scan in "ab"[: int(rng.choice([1, 2], p=[0.65, 0.35]))]:
                found = chest_ct_findings(rng)
                hu = chest_ct_volume(rng, found)
                finding, impression = chest_ct_report(rng, found)
                for recon in range(1, int(rng.choice([1, 2], p=[0.6, 0.4])) + 1):
                    stem = f"{split}_{p}_{scan}_{recon}"
                    rel = f"dataset/{split}/{split}_{p}/{split}_{p}_{scan}/{stem}.nii.gz"
                    volume = gaussian_filter(hu, 0.6) if recon == 1 else hu
                    volume = volume + rng.normal(0, 10 if recon == 1 else 25, hu.shape)
                    save_nifti(np.round(volume), (7.5, 7.5, 12.0), out / rel, np.int16)
                    lists[split].append({"image_path": rel, "finding": finding,
                                         "impression": impression})
    write_json(out / "train.json", lists["train"])
    write_json(out / "test.json", lists["valid"])
    return finish(out, spec)


# ---------------------------------------------------------------------------- RadGenome-Brain
def make_radgenome_brain(out_dir: str | Path, scale: float = 1.0, seed: int = 302) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "RadGenome-Brain", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    rows = []
    n = scaled(130, scale, 5)
    for k in range(1, n + 1):
        lesion = ((pick(rng, ["small", "large"]), pick(rng, ["right", "left"]))
                  if rng.random() < 0.65 else None)
        name = f"RG_{k:05d}.nii.gz"
        save_nifti(brain_volume(rng, lesion, 32), (6.0, 6.0, 6.0), out / "images" / name,
                   np.float32)
        finding, impression = brain_report(rng, lesion)
        rows.append({"image": name, "finding": finding, "impression": impression})
    n_test = max(1, round(n * 0.2))
    write_json(out / "reports_train.json", rows[n_test:])
    write_json(out / "reports_test.json", rows[:n_test])
    return finish(out, spec)


# ------------------------------------------------------------------------------------ IU-Xray
def lateral_image(rng: np.random.Generator, opacity, cardiomegaly: bool, effusion: bool,
                  size: int = 64) -> np.ndarray:
    """A lateral chest radiograph-like view: one superimposed lung field, the heart anterior,
    fluid in the posterior costophrenic angle; an opacity shows without its side."""
    h = w = size
    cy, cx = h * (0.52 + rng.uniform(-0.03, 0.03)), w * (0.5 + rng.uniform(-0.03, 0.03))
    img = np.full((h, w), 0.08, np.float32)
    img[_ellipse(h, w, cy, cx, h * 0.46, w * 0.36)] = 0.55
    lung = _ellipse(h, w, cy - h * 0.04, cx, h * 0.33, w * 0.26)
    img[lung] = 0.24
    heart_r = w * (0.2 if cardiomegaly else 0.13) * rng.uniform(0.95, 1.05)
    img[_ellipse(h, w, cy + h * 0.12, cx - w * 0.12, h * 0.16, heart_r) & lung] = 0.5
    yy, xx = np.mgrid[0:h, 0:w]
    if effusion:
        img[lung & (yy > cy + h * 0.14) & (xx > cx)] = 0.52
    if opacity:
        sigma = h * (0.05 if opacity[0] == "small" else 0.1)
        oy, ox = cy - h * rng.uniform(0.0, 0.15), cx + w * rng.uniform(-0.08, 0.08)
        img += 0.4 * np.exp(-((yy - oy) ** 2 + (xx - ox) ** 2) / (2 * sigma ** 2)) * lung
    img += 0.04 * _smooth_noise(rng, size, 8) + rng.normal(0, 0.025, (h, w))
    return to_uint8(img * rng.uniform(0.9, 1.1))


def make_iu_xray(out_dir: str | Path, scale: float = 1.0, seed: int = 303) -> Path:
    out = Path(out_dir)
    spec = {"dataset": "IU-Xray", "scale": scale, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    rows = []
    image_no = 1
    for uid in range(1, scaled(110, scale, 4) + 1):
        opacity = ((pick(rng, ["small", "large"]), pick(rng, ["right", "left"]))
                   if rng.random() < 0.55 else None)
        cardiomegaly, effusion = bool(rng.random() < 0.35), bool(rng.random() < 0.3)
        findings, impression = chest_report(rng, opacity, cardiomegaly, effusion)
        if rng.random() < 0.04:
            findings = ""                                     # as in the real collection
        mesh = "; ".join([m for m, on in (("Opacity", opacity), ("Cardiomegaly", cardiomegaly),
                                          ("Pleural Effusion", effusion)) if on]) or "normal"
        indication = pick(rng, ["Cough.", "Chest pain.", "Shortness of breath.", "XXXX"])
        comparison = pick(rng, ["None.", "XXXX"])
        for projection in ("Frontal", "Lateral"):
            name = f"{uid}_IM-{image_no:04d}-{1001 + 1000 * (projection == 'Lateral')}.dcm.png"
            pixels = (chest_image(rng, opacity, cardiomegaly, effusion, 64)
                      if projection == "Frontal" else
                      lateral_image(rng, opacity, cardiomegaly, effusion, 64))
            save_png(pixels, out / "images" / "images_normalized" / name)
            rows.append({"uid": uid, "filename": name, "projection": projection, "MeSH": mesh,
                         "Problems": mesh.split(";")[0], "indication": indication,
                         "comparison": comparison, "findings": findings,
                         "impression": impression})
        image_no += int(rng.integers(1, 4))
    write_csv(out / "indiana_reports.csv", list(rows[0]), rows)
    return finish(out, spec)
