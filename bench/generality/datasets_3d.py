"""3D generators: LUNA16, BraTS 2021, ACDC and PI-CAI (see ``cases.py`` for the
documentation each follows). Volumes are tiny (8-40 voxels a side) but in the real formats,
with the real spacing conventions, and the label is drawn into the voxels."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .common import ball, disk, mkdir, rng_for, save_nifti, save_sitk

# ============================================================================ LUNA16


def make_luna16(out_dir: Path, seed: int = 0) -> Path:
    """LUNA16 (luna16.grand-challenge.org/Data): subset0..subset9/<seriesuid>.mhd + .raw
    (MET_SHORT, HU), annotations.csv (seriesuid,coordX,coordY,coordZ,diameter_mm, world mm)
    and candidates.csv (seriesuid,coordX,coordY,coordZ,class). Scans without a nodule have
    no row in annotations.csv. One scan per LIDC patient."""
    rng = rng_for(seed, "luna16")
    root = mkdir(Path(out_dir) / "LUNA16")
    shape = (20, 40, 40)  # z, y, x
    ann, cand = [], []
    n_scans = 36
    for i in range(n_scans):
        suid = "1.3.6.1.4.1.14519.5.2.1.6279.6001." + "".join(
            str(int(d)) for d in rng.integers(0, 10, 36)).lstrip("0")[:30]
        sx = float(np.round(rng.uniform(0.65, 0.85), 6))
        sz = float(rng.choice([1.25, 2.0, 2.5]))
        origin = np.array([-rng.uniform(140, 200), -rng.uniform(150, 220), -rng.uniform(250, 350)])
        vol = np.full(shape, -1000, np.int16)
        zz, yy, xx = np.ogrid[: shape[0], : shape[1], : shape[2]]
        body = ((yy - 20) / 18.5) ** 2 + ((xx - 20) / 19.5) ** 2 <= 1
        vol[np.broadcast_to(body, shape)] = 40
        lungs = np.zeros(shape[1:], bool)
        for cx in (11, 29):
            lungs |= ((np.arange(40)[:, None] - 20) / 14) ** 2 + ((np.arange(40)[None] - cx) / 7.5) ** 2 <= 1
        vol[:, lungs] = -850
        vol = (vol + rng.normal(0, 20, shape)).astype(np.int16)
        n_nod = 0 if i % 3 == 2 else int(rng.choice([1, 2], p=[0.7, 0.3]))
        used = []
        for _ in range(n_nod):
            for _try in range(20):
                cz, cy = rng.uniform(5, shape[0] - 5), rng.uniform(12, 28)
                cx = rng.choice([11, 29]) + rng.uniform(-3, 3)
                if all(abs(cx - u[2]) + abs(cy - u[1]) > 10 for u in used):
                    break
            diam = float(np.round(rng.uniform(4.5, 9.0), 8))
            r = diam / 2
            m = ball(shape, (cz, cy, cx), (r / sz, r / sx, r / sx))
            vol[m] = (30 + rng.normal(0, 15, m.sum())).astype(np.int16)
            used.append((cz, cy, cx))
            world = origin + np.array([cx, cy, cz]) * np.array([sx, sx, sz])
            ann.append([suid, *np.round(world, 8).tolist(), diam])
            cand.append([suid, *np.round(world + rng.normal(0, 0.8, 3), 2).tolist(), 1])
        for _ in range(3):  # false-positive candidates (vessels)
            p = origin + np.array([rng.uniform(5, 35), rng.uniform(5, 35), rng.uniform(2, 18)]) * \
                np.array([sx, sx, sz])
            cand.append([suid, *np.round(p, 2).tolist(), 0])
        save_sitk(root / f"subset{i % 2}" / f"{suid}.mhd", vol, (sx, sx, sz), origin)
    with open(root / "annotations.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seriesuid", "coordX", "coordY", "coordZ", "diameter_mm"])
        w.writerows(ann)
    with open(root / "candidates.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seriesuid", "coordX", "coordY", "coordZ", "class"])
        w.writerows(cand)
    return root


# ============================================================================ BraTS 2021


def make_brats2021(out_dir: Path, seed: int = 0) -> Path:
    """BraTS 2021 Task 1 training data (RSNA-ASNR-MICCAI): BraTS2021_Training_Data/
    BraTS2021_#####/BraTS2021_#####_{flair,t1,t1ce,t2,seg}.nii.gz, 1 mm isotropic, seg labels
    0 background, 1 necrotic tumour core (NCR), 2 peritumoral edema (ED), 4 GD-enhancing
    tumour (ET); label 3 is unused."""
    rng = rng_for(seed, "brats2021")
    root = mkdir(Path(out_dir) / "BraTS2021_Training_Data")
    shape = (24, 24, 20)  # x, y, z
    ids = sorted(rng.choice(np.arange(0, 1700), 40, replace=False))
    for cid in ids:
        case = f"BraTS2021_{cid:05d}"
        brain = ball(shape, (12, 12, 10), (10, 11, 8.5))
        c = (rng.uniform(8, 16), rng.uniform(8, 16), rng.uniform(7, 13))
        r_ed, r_et = rng.uniform(4.5, 6), rng.uniform(2.6, 3.4)
        edema = ball(shape, c, (r_ed, r_ed * rng.uniform(0.85, 1.1), r_ed * 0.8)) & brain
        enh = ball(shape, c, r_et) & brain
        nec = ball(shape, c, r_et - 1.3) & brain
        seg = np.zeros(shape, np.uint8)
        seg[edema] = 2
        seg[enh] = 4
        seg[nec] = 1
        base = {"t1": 0.55, "t1ce": 0.55, "t2": 0.45, "flair": 0.45}
        tissue = {
            "t1": {1: 0.25, 2: 0.45, 4: 0.5},
            "t1ce": {1: 0.2, 2: 0.5, 4: 1.0},
            "t2": {1: 0.9, 2: 0.85, 4: 0.6},
            "flair": {1: 0.5, 2: 1.0, 4: 0.7},
        }
        for seq in ("flair", "t1", "t1ce", "t2"):
            v = np.zeros(shape)
            v[brain] = base[seq]
            for lab, val in tissue[seq].items():
                v[seg == lab] = val
            v = v + brain * rng.normal(0, 0.04, shape)
            save_nifti(root / case / f"{case}_{seq}.nii.gz", (np.clip(v, 0, None) * 1000)
                       .astype(np.int16), spacing=(-1.0, -1.0, 1.0), origin=(0.0, 239.0, 0.0))
        save_nifti(root / case / f"{case}_seg.nii.gz", seg, spacing=(-1.0, -1.0, 1.0),
                   origin=(0.0, 239.0, 0.0))
    return root


# ============================================================================ ACDC

ACDC_GROUPS = ["NOR", "MINF", "DCM", "HCM", "RV"]


def _acdc_frame(rng, group, phase, shape):
    """One short-axis stack (x, y, z): 1 RV cavity, 2 LV myocardium, 3 LV cavity."""
    lv_r = {"NOR": 5.0, "MINF": 6.0, "DCM": 7.5, "HCM": 4.0, "RV": 5.0}[group]
    wall = {"NOR": 2.0, "MINF": 1.6, "DCM": 1.4, "HCM": 3.6, "RV": 2.0}[group]
    rv_r = {"NOR": 5.0, "MINF": 5.0, "DCM": 5.0, "HCM": 4.5, "RV": 8.0}[group]
    squeeze = {"NOR": 0.65, "MINF": 0.9, "DCM": 0.9, "HCM": 0.55, "RV": 0.7}[group]
    if phase == "ES":
        lv_r *= squeeze
        rv_r *= squeeze
        wall *= 1.25
    img = np.zeros(shape, np.float32) + 0.1
    gt = np.zeros(shape, np.uint8)
    cx, cy = shape[0] / 2 + 2, shape[1] / 2
    for z in range(shape[2]):
        taper = 1.0 - 0.45 * (z / max(shape[2] - 1, 1))  # base -> apex
        lv = disk(shape[:2], cx, cy, lv_r * taper)
        myo = disk(shape[:2], cx, cy, (lv_r + wall) * taper) & ~lv
        rv = disk(shape[:2], cx - (lv_r + wall + rv_r * 0.6) * taper, cy, rv_r * taper) & ~(lv | myo)
        sl = img[:, :, z]
        sl[rv] = 0.8
        sl[myo] = 0.3
        sl[lv] = 0.9
        g = gt[:, :, z]
        g[rv], g[myo], g[lv] = 1, 2, 3
    img += rng.normal(0, 0.04, shape)
    return (np.clip(img, 0, 1) * 255).astype(np.int16), gt


def make_acdc(out_dir: Path, seed: int = 0) -> Path:
    """ACDC (Automated Cardiac Diagnosis Challenge, MICCAI 2017; humanheart-project.creatis.
    insa-lyon.fr): database/{training,testing}/patient###/ with Info.cfg (ED, ES, Group, Height,
    NbFrame, Weight), patient###_4d.nii.gz, patient###_frame##.nii.gz and
    patient###_frame##_gt.nii.gz for the ED and ES frames (0 bg, 1 RV, 2 MYO, 3 LV)."""
    rng = rng_for(seed, "acdc")
    root = mkdir(Path(out_dir) / "ACDC")
    (root / "MANDATORY_CITATION.md").write_text(
        "# Mandatory citation\n\nO. Bernard et al., \"Deep Learning Techniques for Automatic MRI "
        "Cardiac Multi-structures Segmentation and Diagnosis: Is the Problem Solved?\", IEEE TMI "
        "37(11), 2018.\n")
    shape = (32, 32, 8)
    spacing = (1.5625, 1.5625, 10.0)
    plan = [("training", range(1, 26)), ("testing", range(101, 108))]
    for split, pids in plan:
        for j, p in enumerate(pids):
            group = ACDC_GROUPS[j % 5]
            pdir = mkdir(root / "database" / split / f"patient{p:03d}")
            nframes = int(rng.choice([10, 12, 15]))
            ed, es = 1, int(rng.integers(nframes // 3, nframes // 2 + 2))
            frames = []
            for t in range(1, nframes + 1):
                phase = "ED" if t == ed else ("ES" if t == es else None)
                ph = phase or ("ES" if abs(t - es) < abs(t - ed) else "ED")
                img, gt = _acdc_frame(rng, group, ph, shape)
                frames.append(img)
                if phase:
                    stem = f"patient{p:03d}_frame{t:02d}"
                    save_nifti(pdir / f"{stem}.nii.gz", img, spacing=spacing)
                    save_nifti(pdir / f"{stem}_gt.nii.gz", gt, spacing=spacing)
            save_nifti(pdir / f"patient{p:03d}_4d.nii.gz", np.stack(frames, axis=-1),
                       spacing=spacing)
            (pdir / "Info.cfg").write_text(
                f"ED: {ed}\nES: {es}\nGroup: {group}\n"
                f"Height: {rng.uniform(150, 195):.1f}\nNbFrame: {nframes}\n"
                f"Weight: {rng.uniform(50, 110):.1f}\n")
    return root


# ============================================================================ PI-CAI


def make_picai(out_dir: Path, seed: int = 0) -> Path:
    """PI-CAI Public Training and Development Dataset (zenodo.org/record/6624726 images,
    github.com/DIAGNijmegen/picai_labels): picai_public_images_fold#/<patient_id>/
    <patient_id>_<study_id>_{t2w,adc,hbv,cor,sag}.mha and
    picai_labels/clinical_information/marksheet.csv with case_csPCa YES/NO.
    Some patients have two studies."""
    rng = rng_for(seed, "picai")
    root = mkdir(Path(out_dir) / "picai")
    rows = []
    study = 1000000
    pid = 10000
    n_studies = 0
    while n_studies < 40:
        n = 2 if rng.random() < 0.15 and n_studies < 39 else 1
        age = int(rng.integers(50, 80))
        for k in range(n):
            sid = study
            study += 1
            n_studies += 1
            isup = int(rng.choice([0, 1, 2, 3, 4, 5], p=[0.4, 0.2, 0.2, 0.1, 0.05, 0.05]))
            pos = isup >= 2
            fold = pid % 2
            d = root / f"picai_public_images_fold{fold}" / str(pid)
            # t2w: 0.5 x 0.5 x 3 mm; adc/hbv: 2 x 2 x 3 mm; cor/sag: own orientation.
            gland_c = (6, 16, 16)
            lesion_c = (rng.uniform(4, 8), rng.uniform(19, 22), rng.uniform(10, 22))
            t2 = np.full((12, 32, 32), 300.0)
            t2[ball(t2.shape, gland_c, (5, 9, 11))] = 500
            pz = ball(t2.shape, gland_c, (5, 9, 11)) & (np.arange(32)[None, :, None] > 18)
            t2[pz] = 800
            lesion = ball(t2.shape, lesion_c, (1.6, 3.2, 3.2))
            if pos:
                t2[lesion] = 350
            t2 += rng.normal(0, 25, t2.shape)
            low = np.full((12, 16, 16), 1500.0)
            lesion_low = ball(low.shape, (lesion_c[0], lesion_c[1] / 2, lesion_c[2] / 2),
                              (1.6, 1.8, 1.8))
            adc = low.copy()
            hbv = np.full_like(low, 8.0)
            if pos:
                adc[lesion_low] = 700
                hbv[lesion_low] = 30
            adc += rng.normal(0, 60, adc.shape)
            hbv += rng.normal(0, 1.5, hbv.shape)
            org = (-40.0, -30.0, -20.0)
            stem = f"{pid}_{sid}"
            save_sitk(d / f"{stem}_t2w.mha", t2.astype(np.int16), (0.5, 0.5, 3.0), org)
            save_sitk(d / f"{stem}_adc.mha", adc.astype(np.int16), (2.0, 2.0, 3.0), org)
            save_sitk(d / f"{stem}_hbv.mha", hbv.astype(np.float32), (2.0, 2.0, 3.0), org)
            cor = np.transpose(t2, (1, 0, 2))[::2].copy()
            save_sitk(d / f"{stem}_cor.mha", cor.astype(np.int16), (0.5, 3.0, 1.0), org,
                      direction=(1, 0, 0, 0, 0, 1, 0, -1, 0))
            sag = np.transpose(t2, (2, 1, 0))[::2].copy()
            save_sitk(d / f"{stem}_sag.mha", sag.astype(np.int16), (3.0, 0.5, 1.0), org,
                      direction=(0, 0, -1, 1, 0, 0, 0, -1, 0))
            gs = {0: "0+0", 1: "3+3", 2: "3+4", 3: "4+3", 4: "4+4", 5: "4+5"}[isup]
            rows.append([pid, sid, f"{2012 + int(rng.integers(0, 10))}-0{int(rng.integers(1, 10))}"
                         f"-{int(rng.integers(10, 29))}", age + k,
                         round(float(rng.uniform(2, 25)), 1), round(float(rng.uniform(0.05, 0.5)), 2),
                         int(rng.integers(20, 120)),
                         str(rng.choice(["SysBx", "MRBx", "SysBx+MRBx"])) if isup or rng.random() < .5 else "",
                         gs if (isup or rng.random() < 0.5) else "", str(isup) if isup else "0",
                         isup, "YES" if pos else "NO", str(rng.choice(["RUMC", "PCNN", "ZGT"]))])
        pid += 1
    lab = mkdir(root / "picai_labels" / "clinical_information")
    with open(lab / "marksheet.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["patient_id", "study_id", "mri_date", "patient_age", "psa", "psad",
                    "prostate_volume", "histopath_type", "lesion_GS", "lesion_ISUP", "case_ISUP",
                    "case_csPCa", "center"])
        w.writerows(rows)
    return root
