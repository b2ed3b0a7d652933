"""Batch 3, volume / ITK-format generators: CAMUS, STOIC2021, ISLES 2022 and CHAOS (see
``batch3.py`` for the documentation each follows). Tiny images in the real file formats
(MetaImage .mhd/.raw and .mha, BIDS NIfTI with JSON sidecars, DICOM slices with PNG ground
truth per slice); the label is drawn into the voxels. Written from the datasets' public
documentation only; no code of the app is imported."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .common import ball, ellipse, mkdir, rng_for, save_nifti, save_png, save_sitk, uid

# ============================================================================ CAMUS


def _echo(rng, view, phase, h=48, w=40):
    """Apical view: a cone, LV cavity (1), myocardium ring (2), left atrium (3)."""
    yy, xx = np.mgrid[:h, :w]
    ang = np.abs(np.arctan2(xx - w / 2, yy + 1e-3))
    cone = (ang < 0.6) & (yy < h - 1)
    lab = np.zeros((h, w), np.uint8)
    s = 1.0 if phase == "ED" else 0.78
    cx = w / 2 + (2 if view == "4CH" else 0)
    epi = ellipse((h, w), h * 0.38, cx, h * 0.30 * (0.9 + 0.1 * s), w * 0.22)
    endo = ellipse((h, w), h * 0.40, cx, h * 0.26 * s, w * 0.15 * s)
    la = ellipse((h, w), h * 0.82, cx, h * 0.12 * (1.25 - 0.25 * s), w * 0.14)
    lab[epi] = 2
    lab[endo] = 1
    lab[la & ~epi] = 3
    img = np.where(cone, 0.25, 0.0) + rng.normal(0, 0.05, (h, w))
    img[lab == 2] = 0.75
    img[(lab == 1) | (lab == 3)] = 0.08
    img = np.clip(img * cone * rng.gamma(4, 0.25, (h, w)), 0, 1)  # speckle
    lab[~cone] = 0
    return (img * 255).astype(np.uint8), lab


def make_camus(out_dir: Path, seed: int = 0) -> Path:
    """CAMUS (Leclerc et al., IEEE TMI 38(9):2198, 2019; humanheart-project.creatis.insa-lyon.fr
    /database/#collection/6373703d73e9f0047faa1bc8, original 2019 release): training/
    patient####/ with patient####_{2CH,4CH}_{ED,ES}.mhd/.raw (one 2D apical frame, MetaImage
    with a third dimension of 1), the matching _gt.mhd/.raw (0 background, 1 LV endocardium,
    2 LV epicardium i.e. myocardium, 3 left atrium), _{2CH,4CH}_sequence.mhd/.raw (the half
    cycle) and Info_2CH.cfg / Info_4CH.cfg ('ED: 1', 'ES: 14', 'NbFrame', 'Sex', 'Age',
    'ImageQuality', 'LVedv', 'LVesv', 'LVef'); testing/patient####/ has no _gt files.
    Simplification: 48x40 frames, 11 training and 3 testing patients, sequences of 4 frames."""
    rng = rng_for(seed, "camus")
    root = mkdir(Path(out_dir) / "CAMUS")
    for split, pids in (("training", range(1, 12)), ("testing", range(451, 454))):
        for p in pids:
            name = f"patient{p:04d}"
            d = mkdir(root / split / name)
            sex, age = str(rng.choice(["M", "F"])), int(rng.integers(25, 90))
            q = str(rng.choice(["Good", "Medium", "Poor"], p=[0.4, 0.45, 0.15]))
            for view in ("2CH", "4CH"):
                nb = 4
                frames = []
                for ph in ("ED", "ES"):
                    img, lab = _echo(rng, view, ph)
                    sp = (0.308, 0.154, 1.0)
                    save_sitk(d / f"{name}_{view}_{ph}.mhd", img[None], spacing_xyz=sp)
                    if split == "training":
                        save_sitk(d / f"{name}_{view}_{ph}_gt.mhd", lab[None], spacing_xyz=sp)
                    frames.append(img)
                seq = np.stack([frames[0], frames[0], frames[1], frames[1]])
                save_sitk(d / f"{name}_{view}_sequence.mhd", seq, spacing_xyz=(0.308, 0.154, 1))
                edv = float(rng.uniform(70, 200))
                ef = float(rng.uniform(25, 70))
                (d / f"Info_{view}.cfg").write_text(
                    f"ED: 1\nES: {nb}\nNbFrame: {nb}\nSex: {sex}\nAge: {age}\nImageQuality: {q}\n"
                    f"LVedv: {edv:.2f}\nLVesv: {edv * (1 - ef / 100):.2f}\nLVef: {ef:.2f}\n")
    return root


# ============================================================================ STOIC2021


def make_stoic2021(out_dir: Path, seed: int = 0) -> Path:
    """STOIC2021 training set (Revel et al., Radiology 301(1):E361, 2021; stoic2021.grand-
    challenge.org; AWS open data 'stoic2021-training'): data/mha/<PatientID>.mha (chest CT in
    HU, int16, integer PatientIDs) and metadata/reference.csv 'PatientID,probCOVID,probSevere'
    with 0/1 values: probCOVID = RT-PCR positive, probSevere = intubation or death at one
    month (only ever 1 for COVID-positive patients). Age and sex are in the .mha header
    (PatientAge '065Y', PatientSex). Simplification: 32x32x20 volumes, 40 patients."""
    import SimpleITK as sitk

    rng = rng_for(seed, "stoic2021")
    root = mkdir(Path(out_dir) / "stoic2021-training")
    ids = sorted(int(i) for i in rng.choice(np.arange(1, 11000), 40, replace=False))
    rows = ["PatientID,probCOVID,probSevere"]
    shape = (20, 32, 32)  # z, y, x
    for pid in ids:
        covid = int(rng.random() < 0.6)
        severe = int(covid and rng.random() < 0.4)
        v = np.full(shape, -1000.0)
        body = ball(shape, (10, 16, 16), (14, 13, 15))
        v[body] = 40
        lungs = ball(shape, (10, 15, 10), (9, 9, 5)) | ball(shape, (10, 15, 22), (9, 9, 5))
        v[lungs] = -860
        if covid:  # peripheral ground-glass, extensive and consolidating when severe
            n = 8 if severe else 3
            for _ in range(n):
                c = (rng.uniform(4, 16), rng.uniform(9, 22), float(rng.choice([7, 25])))
                m = ball(shape, c, rng.uniform(2, 3.5)) & lungs
                v[m] = -150 if severe else -550
        v += rng.normal(0, 15, shape)
        img = sitk.GetImageFromArray(v.round().astype(np.int16))
        img.SetSpacing((1.2, 1.2, 5.0))
        img.SetOrigin((-19.2, -19.2, -100.0))
        img.SetMetaData("PatientAge", f"{int(rng.choice([35, 45, 55, 65, 75, 85])):03d}Y")
        img.SetMetaData("PatientSex", str(rng.choice(["M", "F"])))
        mkdir(root / "data" / "mha")
        sitk.WriteImage(img, str(root / "data" / "mha" / f"{pid}.mha"), useCompression=False)
        rows.append(f"{pid},{covid},{severe}")
    mkdir(root / "metadata")
    (root / "metadata" / "reference.csv").write_text("\n".join(rows) + "\n")
    return root


# ============================================================================ ISLES 2022


def make_isles2022(out_dir: Path, seed: int = 0) -> Path:
    """ISLES 2022 (Hernandez Petzsche et al., Sci Data 9:762, 2022; isles22.grand-challenge.org
    ; Zenodo doi:10.5281/zenodo.7153326), BIDS: ISLES-2022/dataset_description.json,
    participants.tsv, sub-strokecase####/ses-0001/dwi/sub-strokecase####_ses-0001_{dwi,adc}
    .nii.gz (+ .json), sub-strokecase####/ses-0001/anat/sub-strokecase####_ses-0001_FLAIR
    .nii.gz (+ .json; its own, finer grid), and the infarct masks in derivatives/
    sub-strokecase####/ses-0001/sub-strokecase####_ses-0001_msk.nii.gz (0/1, on the DWI grid).
    Simplification: 24x28x12 DWI grids, 40 cases, a minimal participants.tsv."""
    rng = rng_for(seed, "isles2022")
    root = mkdir(Path(out_dir) / "ISLES-2022")
    (root / "dataset_description.json").write_text(json.dumps(
        {"Name": "ISLES 2022", "BIDSVersion": "1.6.0", "License": "CC BY-SA 4.0",
         "Authors": ["ISLES 2022 organisers"]}, indent=4))
    parts = ["participant_id"]
    shape = (24, 28, 12)  # x, y, z
    for i in range(1, 41):
        sub = f"sub-strokecase{i:04d}"
        parts.append(sub)
        brain = ball(shape, (12, 14, 6), (10, 12, 5.5))
        c = (rng.uniform(6, 18), rng.uniform(6, 22), rng.uniform(3, 9))
        lesion = ball(shape, c, rng.uniform(1.2, 3.5, 3)) & brain
        dwi = np.where(brain, 300.0, 0) + rng.normal(0, 12, shape)
        dwi[lesion] = 800
        adc = np.where(brain, 800.0, 0) + rng.normal(0, 20, shape)
        adc[lesion] = 400
        ses = root / sub / "ses-0001"
        sp = (2.0, 2.0, 2.0)
        save_nifti(ses / "dwi" / f"{sub}_ses-0001_dwi.nii.gz", np.clip(dwi, 0, None)
                   .astype(np.int16), spacing=sp)
        save_nifti(ses / "dwi" / f"{sub}_ses-0001_adc.nii.gz", np.clip(adc, 0, None)
                   .astype(np.int16), spacing=sp)
        fl = np.repeat(np.repeat(np.where(brain, 200.0, 0), 2, 0), 2, 1)
        fl[np.repeat(np.repeat(lesion, 2, 0), 2, 1)] = 260 if rng.random() < 0.6 else 200
        fl += rng.normal(0, 8, fl.shape)
        save_nifti(ses / "anat" / f"{sub}_ses-0001_FLAIR.nii.gz",
                   np.clip(fl, 0, None).astype(np.int16), spacing=(1.0, 1.0, 2.0))
        for rel, mod in (("dwi", "dwi"), ("dwi", "adc"), ("anat", "FLAIR")):
            (ses / rel / f"{sub}_ses-0001_{mod}.json").write_text(json.dumps(
                {"Modality": "MR", "MagneticFieldStrength": float(rng.choice([1.5, 3.0])),
                 "Manufacturer": str(rng.choice(["Siemens", "Philips"]))}, indent=4))
        save_nifti(root / "derivatives" / sub / "ses-0001" / f"{sub}_ses-0001_msk.nii.gz",
                   lesion.astype(np.uint8), spacing=sp)
    (root / "participants.tsv").write_text("\n".join(parts) + "\n")
    return root


# ============================================================================ CHAOS

CHAOS_MR_VALUES = {"liver": 63, "right kidney": 126, "left kidney": 189, "spleen": 252}
_CHAOS_CT_IDS = [1, 2, 5, 6, 8, 10, 14, 16, 18, 19, 21, 22, 23, 24, 25]
_CHAOS_MR_IDS = [1, 2, 3, 5, 8, 10, 13, 15, 19, 20, 21, 22, 31, 32, 33]


def _dicom_slice(path: Path, pix: np.ndarray, *, modality, patient_id, study_uid, series_uid,
                 sop_uid, z, inst, spacing, thick, intercept, desc) -> None:
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian

    mkdir(path.parent)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = ("1.2.840.10008.5.1.4.1.1.2" if modality == "CT"
                                    else "1.2.840.10008.5.1.4.1.1.4")
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = sop_uid
    ds.Modality = modality
    ds.PatientID = patient_id
    ds.PatientName = "anonymous"
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.SeriesDescription = desc
    ds.SeriesNumber = 4 if modality == "MR" else 2
    ds.InstanceNumber = inst
    ds.ImagePositionPatient = [-100.0, -100.0, float(z)]
    ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
    ds.SliceLocation = float(z)
    ds.SliceThickness = thick
    ds.PixelSpacing = [spacing, spacing]
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = pix.shape
    ds.BitsAllocated = 16
    ds.BitsStored = 12 if modality == "MR" else 16
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = 0
    if modality == "CT":
        ds.RescaleIntercept = intercept
        ds.RescaleSlope = 1
    ds.PixelData = pix.astype(np.uint16).tobytes()
    ds.save_as(str(path), enforce_file_format=True)


def make_chaos(out_dir: Path, seed: int = 0) -> Path:
    """CHAOS Combined (CT-MR) Healthy Abdominal Organ Segmentation, training set (Kavur et al.,
    Med Image Anal 69:101950, 2021; chaos.grand-challenge.org/Data; Zenodo
    doi:10.5281/zenodo.3431873): CHAOS_Train_Sets/Train_Sets/CT/<id>/DICOM_anon/
    i####,0000b.dcm with one PNG per slice in CT/<id>/Ground/liver_GT_###.png (liver only,
    0/255), and Train_Sets/MR/<id>/T2SPIR/DICOM_anon/IMG-####-#####.dcm with
    T2SPIR/Ground/IMG-####-#####.png (liver 63, right kidney 126, left kidney 189, spleen 252;
    the four ranges 55-70, 110-135, 175-200, 240-255 in the organisers' words). Simplification:
    32 px slices, 8 slices per series, 15 CT and 15 MR patients, no T1DUAL sequences."""
    rng = rng_for(seed, "chaos")
    root = mkdir(Path(out_dir) / "CHAOS_Train_Sets" / "Train_Sets")
    s, nz = 32, 8

    def organs(z):
        return {"liver": ellipse((s, s), 14, 10, 7, 7 - abs(z - 3)),
                "right kidney": ellipse((s, s), 22, 9, 3, 2.5) if 3 <= z <= 6 else None,
                "left kidney": ellipse((s, s), 22, 23, 3, 2.5) if 2 <= z <= 5 else None,
                "spleen": ellipse((s, s), 14, 24, 4, 3) if z <= 4 else None}

    for mod, ids in (("CT", _CHAOS_CT_IDS), ("MR", _CHAOS_MR_IDS)):
        for p in ids:
            study, series = uid("1.2.826.0.1.3680043.8.498", rng), uid("1.2.826.0.1.3680043.8"
                                                                       ".498", rng)
            base = root / mod / str(p) / ("T2SPIR" if mod == "MR" else "")
            shift = rng.integers(-2, 3, 2)
            for z in range(nz):
                body = ellipse((s, s), 16, 16, 13, 15)
                o = organs(z)
                if mod == "CT":
                    img = np.where(body, 40.0, -1000.0)
                    vals = {"liver": 60, "right kidney": 160, "left kidney": 160, "spleen": 50}
                else:
                    img = np.where(body, 300.0, 0.0)
                    vals = {"liver": 420, "right kidney": 900, "left kidney": 900,
                            "spleen": 1100}
                gt = np.zeros((s, s), np.uint8)
                for name, m in o.items():
                    if m is None:
                        continue
                    m = np.roll(m, tuple(shift), (0, 1))
                    img[m] = vals[name]
                    if mod == "CT":
                        if name == "liver":
                            gt[m] = 255
                    else:
                        gt[m] = CHAOS_MR_VALUES[name]
                img += rng.normal(0, 10, img.shape)
                kw = dict(modality=mod, patient_id=f"CHAOS-{mod}-{p}", study_uid=study,
                          series_uid=series, sop_uid=uid("1.2.826.0.1.3680043.8.498", rng),
                          inst=z + 1, spacing=1.4 if mod == "MR" else 0.7,
                          thick=6.0 if mod == "MR" else 3.0)
                if mod == "CT":
                    _dicom_slice(base / "DICOM_anon" / f"i{z:04d},0000b.dcm",
                                 np.clip(img + 1024, 0, 4095), z=-3.0 * z, intercept=-1024,
                                 desc="ABDOMEN PORTAL", **kw)
                    save_png(base / "Ground" / f"liver_GT_{z:03d}.png", gt)
                else:
                    stem = f"IMG-{int(p) + 1:04d}-{z + 1:05d}"
                    _dicom_slice(base / "DICOM_anon" / f"{stem}.dcm", np.clip(img, 0, 4095),
                                 z=-6.0 * z, intercept=0, desc="T2SPIR", **kw)
                    save_png(base / "Ground" / f"{stem}.png", gt)
    return root.parent
