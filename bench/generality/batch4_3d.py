"""Batch 4, DICOM-series generators: RSNA 2022 Cervical Spine Fracture Detection and the
RSNA-MICCAI Brain Tumor Radiogenomic Classification (see ``batch4.py`` for the documentation
each follows). Tiny CT / MR series in the real folder layouts, the label drawn into the voxels.
Written from the datasets' public documentation only; no code of the app is imported."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .batch4_common import save_dicom, save_nii, seg_line
from .common import ball, disk, ellipse, mkdir, rng_for, uid

# ============================================================================ RSNA C-spine

CSPINE_LEVELS = [("C1", 0, 2), ("C2", 2, 6), ("C3", 6, 9), ("C4", 9, 12), ("C5", 12, 15),
                 ("C6", 15, 18), ("C7", 18, 21), ("T1", 21, 24)]  # name, first z, end z
CSPINE_VERTEBRAE = [n for n, _a, _b in CSPINE_LEVELS[:7]]


def _cspine_slice(rng, level, fractured, s=32):
    """Axial neck CT slice in HU and its vertebra mask: soft tissue, airway, vertebral body
    (cortex + cancellous bone; C1 a ring with the dens), canal and posterior arch. A fracture
    is a lucent line across the bone with a one-pixel step."""
    img = np.where(ellipse((s, s), 16, 16, 13, 14), 40.0, -1000.0)
    img[disk((s, s), 8.5, 16, 2.2)] = -900
    arch = disk((s, s), 21.5, 16, 4.0) & ~disk((s, s), 21.5, 16, 2.4)
    arch |= seg_line((s, s), 24.5, 16, 28, 16, 1.5)
    if level == "C1":
        body = ellipse((s, s), 16, 16, 3.6, 5.0) & ~ellipse((s, s), 16, 16, 2.4, 3.8)
        bone = body | arch
        img[bone] = 650
        img[disk((s, s), 15.2, 16, 1.3)] = 600  # dens of C2 inside the ring
    else:
        body = ellipse((s, s), 15.5, 16, 3.5, 4.6)
        bone = body | arch
        img[bone] = 700
        img[ellipse((s, s), 15.5, 16, 2.4, 3.4)] = 250
    img[disk((s, s), 21.5, 16, 2.4)] = 25  # cord in the canal
    box = None
    if fractured:
        a = rng.uniform(-0.8, 0.8)
        cy, cx = (15.5, 16) if rng.random() < 0.75 else (21.5, 16 + float(rng.choice([-3, 3])))
        line = seg_line((s, s), cy - 5 * np.cos(a), cx - 5 * np.sin(a), cy + 5 * np.cos(a),
                        cx + 5 * np.sin(a), 1.1) & bone
        img[line] = 60
        half = bone & (np.mgrid[:s, :s][1] > cx)
        img[np.roll(half, 1, 0) & ~half] = 700
        ys, xs = np.nonzero(line)
        if len(ys):
            box = (float(xs.min()) - 0.5, float(ys.min()) - 0.5, float(xs.max() - xs.min() + 2),
                   float(ys.max() - ys.min() + 2))
    img += rng.normal(0, 15, img.shape)
    return img, bone, box


def make_rsna_cspine(out_dir: Path, seed: int = 0) -> Path:
    """RSNA 2022 Cervical Spine Fracture Detection (Kaggle 'rsna-2022-cervical-spine-fracture-
    detection'; Lin et al., Radiology: AI 5(5):e230034, 2023; RSNA AI-Challenge-Data wiki):
    train.csv ('StudyInstanceUID,patient_overall,C1,...,C7', 0/1 per study, patient_overall
    = any), train_images/<StudyInstanceUID>/<n>.dcm (axial CT, one file per slice named by
    its instance number; in some studies instance 1 is the lowest slice, so only
    ImagePositionPatient gives the head-to-foot order; some studies signed, some unsigned
    with RescaleIntercept -1024), train_bounding_boxes.csv ('StudyInstanceUID,x,y,width,
    height,slice_number', fracture boxes for a subset of the positive studies),
    segmentations/<StudyInstanceUID>.nii (vertebra label maps for a few studies: 1-7 C1-C7,
    8-19 T1-T12; the array is stored (x, y, z) with y and z reversed, so it matches the
    instance-ordered stack after [:, ::-1, ::-1].transpose(2, 1, 0)), test.csv
    ('row_id,StudyInstanceUID,prediction_type'), an unlabelled test_images/ of 3 studies and
    sample_submission.csv ('row_id,fractured'). Simplifications: 24 slices of 32x32 (5 mm
    slices reaching C1 to T1; the originals are 200-700 thin slices of 512x512, partly JPEG
    lossless compressed, here uncompressed), 36 training studies."""
    rng = rng_for(seed, "rsna_cspine")
    root = mkdir(Path(out_dir) / "rsna-2022-cervical-spine-fracture-detection")
    nums = [int(n) for n in rng.choice(np.arange(1000, 32000), 39, replace=False)]
    rows, box_rows, test_rows = [], [], []
    seg_done = 0
    for k, n in enumerate(nums):
        test = k >= 36
        study = f"1.2.826.0.1.3680043.{n}"
        frac = {v: 0 for v in CSPINE_VERTEBRAE}
        if not test and rng.random() < 0.47:
            p = np.array([0.08, 0.2, 0.08, 0.09, 0.13, 0.18, 0.24])
            for v in rng.choice(CSPINE_VERTEBRAE, int(rng.choice([1, 1, 2])), replace=False,
                                p=p / p.sum()):
                frac[str(v)] = 1
        reverse = bool(rng.random() < 0.2)
        signed = bool(rng.random() < 0.25)
        with_seg = (not test and not reverse and seg_done < 6 and k % 5 == 0)
        series = uid("1.2.826.0.1.3680043", rng)
        vol_lab = np.zeros((24, 32, 32), np.uint8)
        frac_slices = {v: set(int(z) for z in rng.choice(
            np.arange(a, b), min(2, b - a), replace=False)) for v, a, b in CSPINE_LEVELS[:7]}
        for lab, (level, a, b) in enumerate(CSPINE_LEVELS, 1):
            for z in range(a, b):
                f = bool(frac.get(level)) and z in frac_slices[level]
                img, bone, box = _cspine_slice(rng, level, f)
                vol_lab[z][bone] = lab
                inst = 24 - z if reverse else z + 1
                hu = np.clip(img, -1024, 3071)
                pix = hu.round().astype(np.int16) if signed else \
                    (hu + 1024).round().astype(np.uint16)
                sub = "test_images" if test else "train_images"
                save_dicom(root / sub / study / f"{inst}.dcm", pix, modality="CT",
                           patient_id=str(n), study_uid=study, series_uid=series,
                           sop_uid=f"{study}.1.{inst}", InstanceNumber=inst,
                           ImagePositionPatient=[-80.0, -80.0, -5.0 * z + 0.0],
                           ImageOrientationPatient=[1, 0, 0, 0, 1, 0], SliceThickness=5.0,
                           PixelSpacing=[5.0, 5.0], RescaleIntercept=0 if signed else -1024,
                           RescaleSlope=1, WindowCenter="500", WindowWidth="2000",
                           BodyPartExamined="CSPINE")
                if f and box is not None and not test and k % 3 != 2:
                    box_rows.append([study, *(round(v, 1) for v in box), inst])
        if test:
            for t in ["patient_overall", *CSPINE_VERTEBRAE]:
                test_rows.append([f"{study}_{t}", study, t])
            continue
        rows.append([study, int(any(frac.values())), *[frac[v] for v in CSPINE_VERTEBRAE]])
        if with_seg:
            seg_done += 1
            stored = vol_lab.transpose(2, 1, 0)[:, ::-1, ::-1]
            aff = np.array([[-5.0, 0, 0, 80.0], [0, 5.0, 0, -80.0], [0, 0, 5.0, -115.0],
                            [0, 0, 0, 1]])
            save_nii(root / "segmentations" / f"{study}.nii", np.ascontiguousarray(stored), aff)
    for name, header, data in (
            ("train.csv", ["StudyInstanceUID", "patient_overall", *CSPINE_VERTEBRAE], rows),
            ("train_bounding_boxes.csv", ["StudyInstanceUID", "x", "y", "width", "height",
                                          "slice_number"], box_rows),
            ("test.csv", ["row_id", "StudyInstanceUID", "prediction_type"], test_rows),
            ("sample_submission.csv", ["row_id", "fractured"],
             [[r[0], 0.5] for r in test_rows])):
        with open(root / name, "w", newline="") as fh:
            wr = csv.writer(fh, lineterminator="\n")
            wr.writerow(header)
            wr.writerows(data)
    return root


# ============================================================================ RSNA-MICCAI MGMT

MGMT_SEQUENCES = ["FLAIR", "T1w", "T1wCE", "T2w"]
_MGMT_CONTRAST = {  # brain, csf, edema, tumour, enhancing, necrosis
    "FLAIR": (400, 100, 820, 650, 650, 480),
    "T1w": (520, 150, 400, 340, 340, 200),
    "T1wCE": (520, 150, 400, 340, 950, 200),
    "T2w": (400, 900, 800, 700, 700, 880),
}


def _mgmt_volumes(rng, methylated, shape=(28, 32, 28)):
    """(z, y, x) phantoms per sequence. Methylated: a solid, homogeneously enhancing tumour with
    little oedema; unmethylated: ring enhancement around a necrotic core with wide oedema
    (drawn so a model can learn it; the real MGMT status is barely visible on MRI)."""
    c = (shape[0] / 2, shape[1] / 2, shape[2] / 2)
    brain = ball(shape, c, (12, 14, 11.5))
    csf = ball(shape, (c[0] + 1, c[1], c[2] - 2.5), (4, 6, 1.2)) | ball(
        shape, (c[0] + 1, c[1], c[2] + 2.5), (4, 6, 1.2))
    side = float(rng.choice([-1, 1]))
    tc = (c[0] + rng.uniform(-4, 4), c[1] + rng.uniform(-5, 5), c[2] + side * rng.uniform(5, 7))
    r = rng.uniform(3.0, 4.5)
    tumour = ball(shape, tc, r) & brain
    edema = ball(shape, tc, r + (1.5 if methylated else rng.uniform(3.5, 5))) & brain & ~tumour
    necro = ball(shape, tc, r * 0.6) & tumour if not methylated else np.zeros(shape, bool)
    enh = tumour & ~necro if methylated else tumour & ~ball(shape, tc, r - 1.2)
    out = {}
    for seq, (b, cs, ed, tu, en, ne) in _MGMT_CONTRAST.items():
        v = np.where(brain, float(b), 0.0)
        v[csf] = cs
        v[edema] = ed
        v[tumour] = tu
        v[enh] = en
        v[necro] = ne
        v += rng.normal(0, 12, shape) * brain
        out[seq] = np.clip(v, 0, 4095).round().astype(np.uint16)
    return out


def _mgmt_series(root, case, seq, vol, rng, study):
    """Write one sequence as Image-<k>.dcm slices in a random plane (axial, sagittal or
    coronal), every 2nd or 3rd voxel plane, sometimes with blank slices at one end."""
    plane = str(rng.choice(["AX", "SAG", "COR"], p=[0.5, 0.3, 0.2]))
    step = int(rng.choice([2, 3]))
    sp = 6.0
    if plane == "AX":
        idx = range(0, vol.shape[0], step)
        sl = [vol[i][::-1] for i in idx]
        iop, pos = [1, 0, 0, 0, 1, 0], [[-84.0, -96.0, -84.0 + i * sp] for i in idx]
    elif plane == "SAG":
        idx = range(0, vol.shape[2], step)
        sl = [vol[::-1, :, i] for i in idx]
        iop, pos = [0, 1, 0, 0, 0, -1], [[-84.0 + i * sp, -96.0, 84.0] for i in idx]
    else:
        idx = range(0, vol.shape[1], step)
        sl = [vol[::-1, i, :] for i in idx]
        iop, pos = [1, 0, 0, 0, 0, -1], [[-84.0, -96.0 + i * sp, 84.0] for i in idx]
    if rng.random() < 0.3:
        sl = [np.zeros_like(sl[0])] + sl + [np.zeros_like(sl[0])]
        d = np.subtract(pos[1], pos[0])
        pos = [list(np.subtract(pos[0], d))] + pos + [list(np.add(pos[-1], d))]
    series = uid("1.2.826.0.1.3680043.8.498", rng)
    for k, (img, p) in enumerate(zip(sl, pos), 1):
        save_dicom(root / case / seq / f"Image-{k}.dcm", np.ascontiguousarray(img),
                   modality="MR", patient_id=case, study_uid=study, series_uid=series,
                   sop_uid=f"{series}.{k}", bits_stored=12, InstanceNumber=k,
                   SeriesDescription=seq, ImageOrientationPatient=iop,
                   ImagePositionPatient=[float(x) for x in p], PixelSpacing=[sp, sp],
                   SliceThickness=float(sp * step), MRAcquisitionType="2D")


def make_rsna_mgmt(out_dir: Path, seed: int = 0) -> Path:
    """RSNA-MICCAI Brain Tumor Radiogenomic Classification (Kaggle 'rsna-miccai-brain-tumor-
    radiogenomic-classification', 2021; Baid et al., arXiv:2107.02314, task 2): train/<5-digit
    BraTS21ID>/{FLAIR,T1w,T1wCE,T2w}/Image-<k>.dcm (one DICOM series per sequence, k from 1
    with no zero padding, planes differing between sequences and cases: axial, sagittal or
    coronal; some series start or end with blank slices), train_labels.csv ('BraTS21ID,
    MGMT_value' where the id is written WITHOUT the zero padding of the folder names, 0/1 =
    MGMT promoter methylated), an unlabelled test/ and sample_submission.csv ('BraTS21ID,
    MGMT_value', 0.5). Simplifications: 6 mm voxels, 10-18 slices of at most 32 px per series,
    36 training and 4 test cases, no PNG copies; the MGMT status is drawn as solid versus
    ring-enhancing tumour with wide oedema."""
    rng = rng_for(seed, "rsna_mgmt")
    root = mkdir(Path(out_dir) / "rsna-miccai-brain-tumor-radiogenomic-classification")
    ids = sorted(int(i) for i in rng.choice(np.arange(0, 1011), 40, replace=False))
    test_ids = sorted(int(i) for i in rng.choice(ids, 4, replace=False))
    labels = []
    for bid in ids:
        test = bid in test_ids
        methylated = int(rng.random() < 0.52)
        vols = _mgmt_volumes(rng, bool(methylated))
        study = uid("1.2.826.0.1.3680043.8.498", rng)
        for seq in MGMT_SEQUENCES:
            _mgmt_series(root / ("test" if test else "train"), f"{bid:05d}", seq, vols[seq],
                         rng, study)
        if not test:
            labels.append(f"{bid},{methylated}")
    (root / "train_labels.csv").write_text("BraTS21ID,MGMT_value\n" + "\n".join(labels) + "\n")
    (root / "sample_submission.csv").write_text(
        "BraTS21ID,MGMT_value\n" + "".join(f"{b},0.5\n" for b in test_ids))
    return root
