"""Batch 2, 3D generators: TotalSegmentator, CT-RATE and OASIS-1 (see ``batch2.py`` for the
documentation each follows). Volumes are tiny (at most 40 voxels a side) but in the real file
formats (NIfTI with one mask file per structure, NIfTI with the rescale and spacing in a
metadata table, big-endian Analyze 7.5 .hdr/.img pairs), and the label is drawn into the
voxels. Written from the datasets' public documentation only; no code of the app is
imported."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from .common import ball, mkdir, rng_for, save_nifti

# ============================================================================ TotalSegmentator

# (centre x, y, z in a 32 x 32 x 48 body grid, z = 0 at the pelvic floor; radii in voxels; HU)
TOTALSEG_STRUCTURES = {
    "urinary_bladder": ((16, 12, 5), (5, 4, 3), 10),
    "kidney_right": ((9, 21, 20), (3, 3, 5), 150),
    "kidney_left": ((23, 21, 21), (3, 3, 5), 150),
    "vertebrae_L1": ((16, 26, 22), (2.5, 2.5, 1.6), 500),
    "stomach": ((21, 12, 26), (4, 4, 4), 25),
    "liver": ((10, 14, 27), (7, 7, 5), 60),
    "spleen": ((24, 20, 27), (3, 4, 4), 50),
    "aorta": ((17, 22, 25), (1.8, 1.8, 17), 180),
    "lung_upper_lobe_right": ((9, 16, 40), (5, 7, 5), -850),
    "lung_upper_lobe_left": ((23, 16, 40), (5, 7, 5), -850),
}
_TS_STUDY = {  # study type -> (first z, step) of the 24-slice field of view in the body grid
    "ct thorax": (24, 1), "ct abdomen": (14, 1), "ct abdomen-pelvis": (0, 1),
    "ct thorax-abdomen-pelvis": (0, 2),
}


def make_totalsegmentator(out_dir: Path, seed: int = 0) -> Path:
    """TotalSegmentator dataset v2.0.1 (Wasserthal et al., Radiology: AI 2023; Zenodo
    doi:10.5281/zenodo.10047292): Totalsegmentator_dataset_v201/s####/ct.nii.gz with one binary
    mask per anatomical structure in s####/segmentations/<structure>.nii.gz (every structure's
    file is present, empty when the structure is outside the field of view), and meta.csv,
    semicolon-separated (image_id;age;gender;institute;study_type;split;manufacturer;
    scanner_model;kvp;pathology;pathology_location) with the official train/val/test split.
    Simplification: 10 of the 117 structures; routine scans of different body regions."""
    rng = rng_for(seed, "totalsegmentator")
    root = mkdir(Path(out_dir) / "Totalsegmentator_dataset_v201")
    ids = sorted(rng.choice(np.arange(0, 1430), 30, replace=False))
    full = (32, 32, 48)
    meta = []
    for k, i in enumerate(ids):
        case = f"s{i:04d}"
        study = str(rng.choice(list(_TS_STUDY), p=[0.25, 0.25, 0.3, 0.2]))
        z0, step = _TS_STUDY[study]
        hu = np.full(full, -1000.0)
        xx, yy = np.ogrid[: full[0], : full[1]]
        body = ((xx - 16) / 14.5) ** 2 + ((yy - 17) / 12) ** 2 <= 1
        hu[body] = -90  # subcutaneous fat
        inner = ((xx - 16) / 13) ** 2 + ((yy - 17) / 10.5) ** 2 <= 1
        hu[inner] = 35  # soft tissue
        masks = {}
        jit = rng.uniform(-1.5, 1.5, 3)
        scale = rng.uniform(0.85, 1.15)
        for name, (c, r, val) in TOTALSEG_STRUCTURES.items():
            cc = np.array(c, float) + (jit if name != "aorta" else [jit[0], 0, 0])
            rr = np.array(r, float) * (scale if name != "aorta" else [scale, scale, 1])
            m = ball(full, cc, rr) & np.broadcast_to(inner[..., None], full)
            masks[name] = m
        for name in ("lung_upper_lobe_right", "lung_upper_lobe_left"):  # lower lobes: air too
            c, r, _ = TOTALSEG_STRUCTURES[name]
            hu[ball(full, (c[0] + jit[0], c[1], c[2] - 6), (r[0], r[1], 5))
               & np.broadcast_to(inner[..., None], full) & (np.arange(48) >= 30)[None, None]] = -850
        for name, m in masks.items():
            hu[m] = TOTALSEG_STRUCTURES[name][2]
        hu += rng.normal(0, 10, full)
        zs = slice(z0, z0 + 24 * step, step)
        spacing = (1.5, 1.5, 1.5 * step)
        origin = (-24.0, -24.0, -float(z0) * 1.5 - 400)
        save_nifti(root / case / "ct.nii.gz", hu[:, :, zs].round().astype(np.int16),
                   spacing=spacing, origin=origin)
        for name, m in masks.items():
            save_nifti(root / case / "segmentations" / f"{name}.nii.gz",
                       m[:, :, zs].astype(np.uint8), spacing=spacing, origin=origin)
        split = "train" if k % 20 < 14 else ("val" if k % 20 < 17 else "test")
        patho = str(rng.choice(["no_pathology", "tumor", "inflammation", "vascular", "trauma"],
                               p=[0.45, 0.25, 0.15, 0.1, 0.05]))
        meta.append([case, int(rng.integers(20, 90)), str(rng.choice(["m", "f"])),
                     str(rng.choice(list("ABCDEFGH"))), study, split,
                     str(rng.choice(["siemens", "ge", "philips", "toshiba"])),
                     str(rng.choice(["somatom definition as+", "sensation 64", "revolution ct"])),
                     int(rng.choice([100, 120, 140])), patho,
                     "" if patho == "no_pathology" else str(rng.choice(["liver", "kidney", "lung",
                                                                         "bone", "colon"]))])
    with open(root / "meta.csv", "w", newline="") as fh:
        w = csv.writer(fh, delimiter=";")
        w.writerow(["image_id", "age", "gender", "institute", "study_type", "split",
                    "manufacturer", "scanner_model", "kvp", "pathology", "pathology_location"])
        w.writerows(meta)
    return root


# ============================================================================ CT-RATE

CTRATE_ABNORMALITIES = [
    "Medical material", "Arterial wall calcification", "Cardiomegaly", "Pericardial effusion",
    "Coronary artery wall calcification", "Hiatal hernia", "Lymphadenopathy", "Emphysema",
    "Atelectasis", "Lung nodule", "Lung opacity", "Pulmonary fibrotic sequela",
    "Pleural effusion", "Mosaic attenuation pattern", "Peribronchial thickening",
    "Consolidation", "Bronchiectasis", "Interlobular septal thickening"]
_CTR_DRAWN = ["Medical material", "Arterial wall calcification", "Cardiomegaly", "Emphysema",
              "Lung nodule", "Pleural effusion", "Consolidation"]
_CTR_TEXT = {
    "Medical material": "A pacemaker lead is seen extending into the right heart.",
    "Arterial wall calcification": "Atherosclerotic calcifications are observed in the wall of "
                                   "the thoracic aorta.",
    "Cardiomegaly": "The heart is enlarged; cardiothoracic ratio is increased.",
    "Emphysema": "Centrilobular and paraseptal emphysematous changes are present in both lungs.",
    "Lung nodule": "A {d} mm solid nodule is seen in the {lobe}.",
    "Pleural effusion": "Pleural effusion is present on the {side} side, reaching a thickness of "
                        "{t} mm.",
    "Consolidation": "Consolidation with air bronchograms is observed in the {lobe}.",
}
_CTR_IMPR = {"Medical material": "Pacemaker.", "Arterial wall calcification":
             "Atherosclerotic changes.", "Cardiomegaly": "Cardiomegaly.",
             "Emphysema": "Emphysema.", "Lung nodule": "Pulmonary nodule; follow-up recommended.",
             "Pleural effusion": "Pleural effusion.", "Consolidation":
             "Consolidation, likely pneumonia."}


def _ct_chest(rng, findings, shape=(32, 32, 24)):
    """HU volume (x, y, z) of a chest CT with the named findings drawn in."""
    hu = np.full(shape, -1000.0)
    xx, yy = np.ogrid[: shape[0], : shape[1]]
    body = ((xx - 16) / 15) ** 2 + ((yy - 16) / 11) ** 2 <= 1
    hu[body] = 40
    lungs = np.zeros(shape[:2], bool)
    for cx in (9, 23):
        lungs |= ((xx - cx) / 5.5) ** 2 + ((yy - 15) / 8.5) ** 2 <= 1
    lung3 = np.broadcast_to(lungs[..., None], shape).copy()
    hu[lung3] = -920 if "Emphysema" in findings else -850
    if "Emphysema" in findings:  # bullae
        for _ in range(5):
            c = (rng.choice([9, 23]) + rng.uniform(-3, 3), rng.uniform(9, 21), rng.uniform(3, 21))
            hu[ball(shape, c, 1.8) & lung3] = -1000
    hr = 6.5 if "Cardiomegaly" in findings else 4.5
    heart = ball(shape, (16, 12, 8), (hr, hr * 0.9, 6))
    hu[heart] = 40
    aorta = ball(shape, (18, 20, 12), (1.8, 1.8, 14))
    hu[aorta] = 45
    hu[ball(shape, (16, 25, 12), (2, 2, 14))] = 600  # spine
    if "Arterial wall calcification" in findings:
        for z in range(2, 22, 4):
            hu[int(18 + 1.6), 20, z] = 900
    if "Medical material" in findings:
        for z in range(8, 22):
            hu[12 + z // 6, 12, z] = 2500
    if "Pleural effusion" in findings:
        side = 9 if rng.random() < 0.5 else 23
        eff = ball(shape, (side, 21, 12), (5, 3, 10)) & lung3
        hu[eff] = 10
    if "Lung nodule" in findings:
        c = (rng.choice([9, 23]) + rng.uniform(-2, 2), rng.uniform(10, 18), rng.uniform(6, 18))
        hu[ball(shape, c, 1.6)] = 30
    if "Consolidation" in findings:
        c = (rng.choice([9, 23]), rng.uniform(14, 19), rng.uniform(3, 10))
        hu[ball(shape, c, (3.5, 3.5, 4)) & lung3] = 20
    return hu + rng.normal(0, 15, shape)


def make_ct_rate(out_dir: Path, seed: int = 0) -> Path:
    """CT-RATE (Hamamci et al., arXiv:2403.17834; huggingface.co/datasets/ibrahimhamamci/
    CT-RATE): dataset/{train,valid}/<split>_<patient>/<split>_<patient>_<scan>/
    <split>_<patient>_<scan>_<reconstruction>.nii.gz (several scans a, b per patient and
    several reconstructions 1, 2 per scan), dataset/radiology_text_reports/{train,validation}_
    reports.csv (VolumeName, ClinicalInformation_EN, Technique_EN, Findings_EN,
    Impressions_EN), dataset/multi_abnormality_labels/{train,valid}_predicted_labels.csv
    (VolumeName + 18 abnormality columns of 0/1) and dataset/metadata/{train,validation}_
    metadata.csv. As in the first release, voxels are stored values (HU = value * RescaleSlope
    + RescaleIntercept) and the real spacing is in the metadata table (XYSpacing '[x, y]',
    ZSpacing), not in the NIfTI header. Simplification: a subset of the metadata columns."""
    rng = rng_for(seed, "ct_rate")
    root = mkdir(Path(out_dir) / "CT-RATE")
    ds = root / "dataset"
    files = {"train": ("train", "train", "train"), "valid": ("validation", "valid", "validation")}
    for split, n_pat in (("train", 14), ("valid", 5)):
        rep_rows, lab_rows, meta_rows = [], [], []
        pats = sorted(rng.choice(np.arange(1, 3000 if split == "train" else 1300), n_pat,
                                 replace=False))
        for p in pats:
            sex = str(rng.choice(["M", "F"]))
            age = int(rng.integers(25, 88))
            chronic = [f for f in ("Emphysema", "Arterial wall calcification", "Cardiomegaly",
                                   "Medical material") if rng.random() < 0.25]
            for scan in "ab"[: int(rng.choice([1, 2], p=[0.6, 0.4]))]:
                findings = sorted(set(chronic) | {f for f in ("Lung nodule", "Pleural effusion",
                                                              "Consolidation")
                                                  if rng.random() < 0.25})
                hu = _ct_chest(rng, findings)
                lobe = str(rng.choice(["right upper lobe", "left lower lobe", "right lower lobe",
                                       "left upper lobe"]))
                text = [_CTR_TEXT[f].format(d=int(rng.integers(5, 14)), lobe=lobe,
                                            side=str(rng.choice(["right", "left"])),
                                            t=int(rng.integers(8, 30))) for f in findings]
                base = ("Trachea and both main bronchi are open. Mediastinal structures were "
                        "evaluated as suboptimal since the examination was unenhanced. ")
                normal = "No mass or infiltrative lesion was detected in both lungs."
                if "Cardiomegaly" not in findings:
                    base += "Heart contour and size are normal. "
                findings_en = base + " ".join(text) + ("" if findings else " " + normal)
                impr = " ".join(_CTR_IMPR[f] for f in findings) or "No significant pathology."
                clin = str(rng.choice(["Cough.", "Shortness of breath.", "Fever, cough.",
                                       "Not given.", "Follow-up of known malignancy."]))
                for recon in range(1, int(rng.choice([1, 2], p=[0.5, 0.5])) + 1):
                    vname = f"{split}_{p}_{scan}_{recon}.nii.gz"
                    nz = 24 if recon == 1 else 16
                    vol = hu if recon == 1 else hu[:, :, np.linspace(0, 23, nz).round()
                                                   .astype(int)]  # thicker sections
                    stored = np.clip(vol + 1024, 0, None).round().astype(np.int16)
                    save_nifti(ds / split / f"{split}_{p}" / f"{split}_{p}_{scan}" / vname,
                               stored)  # spacing and rescale only in the metadata table
                    kernel = "BONE" if recon == 1 else "STANDARD"
                    xy = round(float(rng.uniform(0.6, 0.85)), 6)
                    rep_rows.append([vname, clin, "Non-contrast images were obtained in the "
                                     f"axial plane with a section thickness of "
                                     f"{1.0 if recon == 1 else 1.5} mm.", findings_en, impr])
                    lab_rows.append([vname] + [int(a in findings) for a in
                                               CTRATE_ABNORMALITIES])
                    meta_rows.append([vname, str(rng.choice(["SIEMENS", "PHILIPS", "GE"])),
                                      "CHEST", "Sensation 64", sex, f"{age:03d}Y", 350.0, kernel,
                                      "HFS", 512, 512, f"[{xy}, {xy}]",
                                      1.0 if recon == 1 else 1.5, -1024.0, 1.0, nz])
        rep_name, lab_name, meta_name = files[split]
        for folder, name, head, rows in (
                ("radiology_text_reports", f"{rep_name}_reports.csv",
                 ["VolumeName", "ClinicalInformation_EN", "Technique_EN", "Findings_EN",
                  "Impressions_EN"], rep_rows),
                ("multi_abnormality_labels", f"{lab_name}_predicted_labels.csv",
                 ["VolumeName"] + CTRATE_ABNORMALITIES, lab_rows),
                ("metadata", f"{meta_name}_metadata.csv",
                 ["VolumeName", "Manufacturer", "SeriesDescription", "ManufacturerModelName",
                  "PatientSex", "PatientAge", "ReconstructionDiameter", "ConvolutionKernel",
                  "PatientPosition", "Rows", "Columns", "XYSpacing", "ZSpacing",
                  "RescaleIntercept", "RescaleSlope", "NumberofSlices"], meta_rows)):
            with open(mkdir(ds / folder) / name, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(head)
                w.writerows(rows)
    return root


# ============================================================================ OASIS-1


def _save_analyze(path_hdr: Path, data: np.ndarray, zooms) -> None:
    """Analyze 7.5 .hdr/.img pair, big-endian int16 as the OASIS-1 files."""
    import nibabel as nib

    mkdir(path_hdr.parent)
    hdr = nib.AnalyzeHeader(endianness=">")
    hdr.set_data_dtype(np.int16)
    hdr.set_data_shape(data.shape)
    hdr.set_zooms(zooms)
    img = nib.AnalyzeImage(data.astype(np.int16), None, header=hdr)
    nib.save(img, str(path_hdr))


def _brain(rng, shape, atrophy):
    """T1-like brain (x, y, z) and its FAST tissue labels (1 CSF, 2 GM, 3 WM); ``atrophy`` in
    [0, 1] widens ventricles and sulci and thins the cortex."""
    c = np.array(shape) / 2
    r = np.array(shape) * 0.42
    head = ball(shape, c, r + 1.5)
    brain = ball(shape, c, r * (1 - 0.10 * atrophy))
    wm = ball(shape, c, r * (0.78 - 0.12 * atrophy))
    vent = (ball(shape, c + [-1.5, 0, 1], r * [0.10 + 0.16 * atrophy, 0.28 + 0.12 * atrophy,
                                              0.14 + 0.12 * atrophy])
            | ball(shape, c + [1.5, 0, 1], r * [0.10 + 0.16 * atrophy, 0.28 + 0.12 * atrophy,
                                                0.14 + 0.12 * atrophy]))
    seg = np.zeros(shape, np.uint8)
    seg[ball(shape, c, r)] = 1          # CSF in the widened sulci / subarachnoid space
    seg[brain] = 2                      # cortex
    seg[wm] = 3                         # white matter
    seg[vent] = 1                       # ventricles
    t1 = np.zeros(shape)
    t1[head] = 0.35                     # scalp
    t1[seg == 1] = 0.12
    t1[seg == 2] = 0.55
    t1[seg == 3] = 0.85
    t1 += rng.normal(0, 0.02, shape) * head
    return t1, seg


def make_oasis1(out_dir: Path, seed: int = 0) -> Path:
    """OASIS-1 cross-sectional MRI (Marcus et al., J Cogn Neurosci 2007; oasis-brains.org):
    disc<N>/OAS1_####_MR<k>/ with OAS1_####_MR<k>.txt (session facts), RAW/
    OAS1_####_MR<k>_mpr-<n>_anon.hdr/.img (individual T1 MPRAGE scans, sagittal, big-endian
    Analyze 7.5) + a preview GIF, PROCESSED/MPRAGE/SUBJ_111/..._mpr_n4_anon_sbj_111.hdr/.img,
    PROCESSED/MPRAGE/T88_111/..._t88_gfc.hdr/.img and _t88_masked_gfc.hdr/.img (atlas space),
    FSL_SEG/..._t88_masked_gfc_fseg.hdr/.img (1 CSF, 2 GM, 3 WM); and oasis_cross-sectional.csv
    (ID,M/F,Hand,Age,Educ,SES,MMSE,CDR,eTIV,nWBV,ASF,Delay): CDR 0 / 0.5 / 1 / 2, empty for
    subjects under 60, and MR2 rows (reliability rescans within 90 days) with only the
    imaging measures and Delay. Simplification: 2 of the 3-4 raw scans per session, 2 discs."""
    rng = rng_for(seed, "oasis1")
    root = mkdir(Path(out_dir) / "OASIS-1")
    plan = [None] * 14 + [0.0] * 17 + [0.5] * 11 + [1.0] * 6 + [2.0] * 2
    rng.shuffle(plan)
    subj = sorted(rng.choice(np.arange(1, 458), len(plan), replace=False))
    rescan = set(rng.choice(len(plan), 5, replace=False).tolist())
    rows = []
    raw_shape, t88_shape = (20, 32, 32), (22, 26, 22)
    for k, (sid, cdr) in enumerate(zip(subj, plan)):
        disc = f"disc{1 + k * 2 // len(plan)}"
        age = int(rng.integers(18, 60)) if cdr is None else int(rng.integers(62, 96))
        sex = str(rng.choice(["F", "M"], p=[0.6, 0.4]))
        # brain atrophy: mild with age, marked with dementia (CDR)
        atrophy = float(np.clip(0.3 * (age - 18) / 78 + 0.35 * (cdr or 0)
                                + rng.normal(0, 0.03), 0, 1))
        nwbv = 0.86 - 0.2 * atrophy + rng.normal(0, 0.005)
        etiv = int(rng.integers(1150, 1900) if sex == "M" else rng.integers(1100, 1700))
        asf = round(1755.0 / etiv, 3)
        educ = "" if cdr is None else int(rng.integers(1, 6))
        ses = "" if cdr is None else int(rng.integers(1, 6))
        mmse = "" if cdr is None else int(np.clip(30 - 4 * cdr - rng.integers(0, 3), 12, 30))
        cdr_s = "" if cdr is None else (str(int(cdr)) if cdr in (0.0, 1.0, 2.0) else "0.5")
        sessions = [1] + ([2] if k in rescan else [])
        for mr in sessions:
            sess = f"OAS1_{sid:04d}_MR{mr}"
            d = root / disc / sess
            t1, seg = _brain(rng, t88_shape, atrophy)
            for n in (1, 2):
                raw, _ = _brain(rng, raw_shape, atrophy)
                raw = (raw * 1400 + rng.normal(0, 20, raw_shape)).clip(0).round()
                _save_analyze(d / "RAW" / f"{sess}_mpr-{n}_anon.hdr", raw, (1.0, 1.0, 1.25))
                if n == 1:
                    mid = (raw[raw_shape[0] // 2] / max(raw.max(), 1) * 255).astype(np.uint8)
                    mkdir(d / "RAW")
                    Image.fromarray(mid).save(d / "RAW" / f"{sess}_mpr-1_anon_sag_66.gif")
            avg = (t1 * 1000).round()
            _save_analyze(d / "PROCESSED" / "MPRAGE" / "SUBJ_111" /
                          f"{sess}_mpr_n4_anon_sbj_111.hdr", avg, (1.0, 1.0, 1.0))
            t88 = d / "PROCESSED" / "MPRAGE" / "T88_111"
            _save_analyze(t88 / f"{sess}_mpr_n4_anon_111_t88_gfc.hdr", avg, (1.0, 1.0, 1.0))
            _save_analyze(t88 / f"{sess}_mpr_n4_anon_111_t88_masked_gfc.hdr",
                          avg * (seg > 0), (1.0, 1.0, 1.0))
            tra = (avg[:, :, t88_shape[2] // 2] / max(avg.max(), 1) * 255).astype(np.uint8)
            Image.fromarray(tra).save(t88 / f"{sess}_mpr_n4_anon_111_t88_gfc_tra_90.gif")
            _save_analyze(d / "FSL_SEG" / f"{sess}_mpr_n4_anon_111_t88_masked_gfc_fseg.hdr",
                          seg, (1.0, 1.0, 1.0))
            Image.fromarray((seg[:, :, t88_shape[2] // 2] * 80).astype(np.uint8)).save(
                d / "FSL_SEG" / f"{sess}_mpr_n4_anon_111_t88_masked_gfc_fseg_tra_90.gif")
            txt = [f"SESSION ID:      {sess}", f"AGE:             {age}",
                   f"M/F:             {'Female' if sex == 'F' else 'Male'}",
                   "HAND:            Right"]
            if mr == 1 and cdr is not None:
                txt += [f"EDUC:            {educ}", f"SES:             {ses}",
                        f"CDR:             {cdr_s}", f"MMSE:            {mmse}"]
            txt += [f"eTIV:            {etiv}", f"ASF:             {asf}",
                    f"nWBV:            {nwbv:.3f}", ""]
            for n in (1, 2):
                txt += [f"SCAN NUMBER:     mpr-{n}", "TYPE:            MPRAGE",
                        "Vox res (mm):    1.0 x 1.0 x 1.25", "Rect. Fov:       256/256",
                        "Orientation:     Sag", "TR (ms):         9.7", "TE (ms):         4.0",
                        "TI (ms):         20.0", "Flip:            10", ""]
            (d / f"{sess}.txt").write_text("\n".join(txt))
            if mr == 1:
                rows.append([sess, sex, "R", age, educ, ses, mmse, cdr_s, etiv, f"{nwbv:.3f}",
                             asf, "N/A"])
            else:
                rows.append([sess, sex, "R", age, "", "", "", "", etiv + int(rng.integers(-8, 9)),
                             f"{nwbv + rng.normal(0, 0.003):.3f}", asf, int(rng.integers(1, 90))])
    rows.sort(key=lambda r: (r[0].endswith("MR2"), r[0]))
    with open(root / "oasis_cross-sectional.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ID", "M/F", "Hand", "Age", "Educ", "SES", "MMSE", "CDR", "eTIV", "nWBV",
                    "ASF", "Delay"])
        w.writerows(rows)
    return root


__all__ = ["make_ct_rate", "make_oasis1", "make_totalsegmentator", "CTRATE_ABNORMALITIES",
           "TOTALSEG_STRUCTURES"]
