"""Batch 5, 3D generators: PDDCA (head and neck CT, NRRD) and Duke Breast Cancer MRI (DICOM
series + box spreadsheet) (see ``batch5.py`` for the documentation each follows). Tiny volumes
in the real layouts, the label drawn into the voxels. Written from the datasets' public
documentation only; no code of the app is imported."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .batch4_common import save_dicom, save_xlsx
from .batch5_common import write_table
from .common import ball, ellipse, mkdir, rng_for, uid

# ============================================================================ PDDCA

def _save_nrrd(path: Path, vol_zyx: np.ndarray, spacing_xyz, origin_xyz) -> None:
    """A gzip-encoded NRRD (space left-posterior-superior) from a (z, y, x) array."""
    import SimpleITK as sitk

    mkdir(path.parent)
    img = sitk.GetImageFromArray(vol_zyx)
    img.SetSpacing(tuple(float(s) for s in spacing_xyz))
    img.SetOrigin(tuple(float(o) for o in origin_xyz))
    sitk.WriteImage(img, str(path), useCompression=True)


PDDCA_STRUCTURES = ["BrainStem", "Chiasm", "Mandible", "OpticNerve_L", "OpticNerve_R",
                    "Parotid_L", "Parotid_R", "Submandibular_L", "Submandibular_R"]


def _pddca_volume(rng, shape=(24, 32, 32)):
    """(z, y, x) head-and-neck CT in HU (z from the neck up to the orbits, y anterior to
    posterior, x from the patient's right to left) and one binary mask per structure: a U-shaped
    mandible, submandibular glands inside it, fatty parotids behind the rami, a brainstem in its
    CSF ring, optic nerves in orbital fat meeting at the chiasm."""
    nz, ny, nx = shape
    v = np.full(shape, -1000.0)
    masks = {s: np.zeros(shape, bool) for s in PDDCA_STRUCTURES}
    j = rng.normal(0, 0.7, 2)
    for z in range(nz):
        head = ellipse((ny, nx), ny / 2 + j[0], nx / 2 + j[1], 14 - max(0, 8 - z) * 0.5, 13)
        v[z][head] = 40
        if z >= 12:  # skull
            v[z][head & ~ellipse((ny, nx), ny / 2 + j[0], nx / 2 + j[1], 12, 11)] = 750
    c = np.array([0, ny / 2 + j[0], nx / 2 + j[1]])
    zz, yy, xx = np.mgrid[:nz, :ny, :nx]
    ring = ((yy - (c[1] - 3)) / 9) ** 2 + ((xx - c[2]) / 9) ** 2
    masks["Mandible"] = (zz >= 2) & (zz <= 8) & (ring <= 1) & (ring >= 0.55) & (yy < c[1] + 2)
    for side, sx in (("R", -1), ("L", 1)):  # image x grows to the patient's left
        masks[f"Submandibular_{side}"] = ball(shape, (3.5, c[1] - 3, c[2] + sx * 5), (1.6, 2, 2))
        masks[f"Parotid_{side}"] = ball(shape, (9, c[1] + 3, c[2] + sx * 9), (3, 3.5, 2.2))
        y0, x0 = c[1] - 10, c[2] + sx * 6
        t = np.linspace(0, 1, 12)
        for tt in t:
            masks[f"OpticNerve_{side}"] |= ball(shape, (19, y0 + tt * 6, x0 - sx * tt * 5),
                                                (0.8, 0.9, 0.9))
        v[ball(shape, (19, y0, x0), (2, 3, 3))] = -90  # orbital fat
    masks["Chiasm"] = ball(shape, (19.5, c[1] - 3.5, c[2]), (0.8, 1.0, 2.0))
    masks["BrainStem"] = ball(shape, (15, c[1] + 4, c[2]), (5.5, 2.5, 2.5))
    v[ball(shape, (15, c[1] + 4, c[2]), (6.5, 3.5, 3.5))] = 5  # CSF around it
    v[ball(shape, (19.5, c[1] - 3.5, c[2]), (1.5, 2, 3))] = 5
    hu = {"Mandible": 900, "Submandibular_L": 70, "Submandibular_R": 70, "Parotid_L": -15,
          "Parotid_R": -15, "OpticNerve_L": 35, "OpticNerve_R": 35, "Chiasm": 35,
          "BrainStem": 32}
    for s in PDDCA_STRUCTURES:
        v[masks[s]] = hu[s]
    v += rng.normal(0, 12, shape)
    return np.clip(v, -1024, 3071).round().astype(np.int16), masks


def make_pddca(out_dir: Path, seed: int = 0) -> Path:
    """PDDCA, Public Domain Database for Computational Anatomy v1.4.1 (MICCAI 2015 Head and Neck
    Auto-Segmentation Challenge; Raudaschl et al., Med Phys 44:2020, 2017; imagenglab.com
    PDDCA page): one folder per patient (0522c####/) with img.nrrd (CT, int16 HU, gzip NRRD)
    and structures/<name>.nrrd, one binary NRRD per structure on the CT's grid: BrainStem,
    Chiasm, Mandible, OpticNerve_L, OpticNerve_R, Parotid_L, Parotid_R, Submandibular_L,
    Submandibular_R; not every patient has every structure (the file is missing where it was not
    delineated). Simplifications: 24 x 32 x 32 voxels of 4 x 3 x 3 mm (the originals are ~120
    slices of 512x512), 30 patients in one folder, the landmark (.fcsv) files left out."""
    rng = rng_for(seed, "pddca")
    root = mkdir(Path(out_dir) / "PDDCA-1.4.1")
    ids = sorted(int(i) for i in rng.choice(np.arange(1, 900), 30, replace=False))
    for k, i in enumerate(ids):
        case = root / f"0522c{i:04d}"
        vol, masks = _pddca_volume(rng)
        origin = (-48.0 + rng.normal(0, 2), -60.0 + rng.normal(0, 2), -80.0 - 4.0 * k)
        spacing = (3.0, 3.0, 4.0)
        _save_nrrd(case / "img.nrrd", vol, spacing, origin)
        missing = set()
        if k % 4 == 1:
            missing |= {"Chiasm", "OpticNerve_L", "OpticNerve_R"}
        if k % 9 == 4:
            missing.add(str(rng.choice(["Submandibular_L", "Submandibular_R"])))
        for s in PDDCA_STRUCTURES:
            if s not in missing:
                _save_nrrd(case / "structures" / f"{s}.nrrd", masks[s].astype(np.uint8),
                          spacing, origin)
    return root


# ============================================================================ Duke breast MRI

DUKE_BOX_COLS = ["Patient ID", "Start Row", "End Row", "Start Column", "End Column",
                 "Start Slice", "End Slice"]
_DUKE_SERIES = {"GE": ["ax t1", "ax dyn pre", "ax dyn 1st pass"],
                "SIEMENS": ["t1_fl3d_tra_nonfs", "ax 3d dyn pre", "ax 3d dyn 1st pass"]}


def _duke_volumes(rng, shape=(12, 32, 32)):
    """(z, y, x) prone axial breast MRI: two breasts hanging anteriorly (low rows), chest wall
    behind. Returns T1 (fat bright), pre-contrast fat-saturated T1 (fat dark, tumour grey) and
    1st post-contrast (tumour strongly enhancing), plus the tumour mask."""
    nz, ny, nx = shape
    zz, yy, xx = np.mgrid[:nz, :ny, :nx]
    breasts = np.zeros(shape, bool)
    for cx in (nx * 0.28, nx * 0.72):
        breasts |= (((yy - ny * 0.42) / (ny * 0.36)) ** 2 + ((xx - cx) / (nx * 0.2)) ** 2 +
                    ((zz - nz / 2) / (nz * 0.55)) ** 2 <= 1) & (yy <= ny * 0.45)
    chest = yy > ny * 0.5
    gland = breasts & (rng.random(shape) < 0.35)
    side = float(rng.choice([0.28, 0.72]))
    tc = (nz / 2 + rng.uniform(-2, 2), ny * rng.uniform(0.2, 0.32), nx * side + rng.uniform(-2, 2))
    tumour = ball(shape, tc, (rng.uniform(1.6, 2.6), rng.uniform(2, 3.5), rng.uniform(2, 3.5)))
    tumour &= breasts
    t1 = np.where(breasts, 900.0, 0) + np.where(chest, 500, 0)
    t1[gland] = 400
    t1[tumour] = 380
    pre = np.where(breasts, 150.0, 0) + np.where(chest, 350, 0)
    pre[gland] = 300
    pre[tumour] = 320
    post = pre.copy()
    post[gland] = 380
    post[tumour] = 1100
    out = []
    for v in (t1, pre, post):
        v = v + rng.normal(0, 20, shape) * (v > 0)
        out.append(np.clip(v, 0, 4095).round().astype(np.uint16))
    return out, tumour


def make_duke_breast_mri(out_dir: Path, seed: int = 0) -> Path:
    """Duke-Breast-Cancer-MRI (TCIA, doi:10.7937/TCIA.e3sv-re93; Saha et al., Br J Cancer 119:
    508, 2018; sites.duke.edu/mazurowski breast-cancer-mri-dataset page): the NBIA download
    manifest-<n>/Duke-Breast-Cancer-MRI/Breast_MRI_###/<study date>-NA-<study description>-
    <5 digits>/<series number>.000000-<series description>-<5 digits>/1-##.dcm with
    manifest-<n>/metadata.csv (one row per series), and the supplementary spreadsheets
    Annotation_Boxes.xlsx ('Patient ID, Start Row, End Row, Start Column, End Column, Start
    Slice, End Slice': one tumour box per patient in 1-based pixel row/column and slice numbers
    of the dynamic series) and Clinical_and_Other_Features.xlsx (three header rows: group,
    name, value coding). Each patient: a non-fat-saturated T1 series, the pre-contrast and the
    first post-contrast fat-saturated dynamic series (all with invasive cancer). Series
    descriptions differ by scanner. Simplifications: 12 slices of 32x32 per series (the
    originals ~160 of 512x512), only the first of the 3-4 post-contrast phases, 30 patients, the
    file-path mapping spreadsheet left out, a subset of clinical columns."""
    rng = rng_for(seed, "duke_breast_mri")
    root = mkdir(Path(out_dir) / "Duke-Breast-Cancer-MRI")
    manifest = root / "manifest-1607053360376"
    ids = sorted(int(i) for i in rng.choice(np.arange(1, 923), 30, replace=False))
    boxes, meta, clinical = [], [], []
    for pnum in ids:
        pid = f"Breast_MRI_{pnum:03d}"
        vendor = "GE" if rng.random() < 0.6 else "SIEMENS"
        vols, tumour = _duke_volumes(rng)
        study = uid("1.3.6.1.4.1.14519.5.2.1", rng)
        sdesc = str(rng.choice(["MRI BREAST BILATERAL WWO", "BREASTROUTINE", "MRI BREAST W  WO"]))
        sfolder = f"01-01-1990-NA-{sdesc}-{int(rng.integers(10000, 99999))}"
        for num, desc, vol in zip((2, 3, 4), _DUKE_SERIES[vendor], vols):
            series = uid("1.3.6.1.4.1.14519.5.2.1", rng)
            folder = f"{num}.000000-{desc}-{series[-5:]}"
            for z in range(vol.shape[0]):
                save_dicom(manifest / "Duke-Breast-Cancer-MRI" / pid / sfolder / folder /
                           f"1-{z + 1:02d}.dcm", vol[z], modality="MR", patient_id=pid,
                           study_uid=study, series_uid=series, sop_uid=f"{series}.{z + 1}",
                           bits_stored=12, InstanceNumber=z + 1, SeriesNumber=num,
                           SeriesDescription=desc, StudyDescription=sdesc, Manufacturer=vendor,
                           ImagePositionPatient=[-160.0, -160.0, -30.0 + 5.0 * z],
                           ImageOrientationPatient=[1, 0, 0, 0, 1, 0], PixelSpacing=[10.0, 10.0],
                           SliceThickness=5.0, PatientPosition="FFP",
                           MagneticFieldStrength=1.5 if vendor == "GE" else 3.0)
            loc = "\\".join([".", "Duke-Breast-Cancer-MRI", pid, sfolder, folder])
            meta.append([series, "Duke-Breast-Cancer-MRI", "NO", "", pid, study, sdesc,
                         "01-01-1990", desc, vendor, "MR", "MR Image Storage",
                         "1.2.840.10008.5.1.4.1.1.4", vol.shape[0],
                         f"{vol.shape[0] * 2.3:.2f} KB", loc, "2020-12-03T19:36:51.237"])
        zs, ys, xs = np.nonzero(tumour)
        boxes.append([pid, int(ys.min()) + 1, int(ys.max()) + 1, int(xs.min()) + 1,
                      int(xs.max()) + 1, int(zs.min()) + 1, int(zs.max()) + 1])
        er = int(rng.random() < 0.7)
        clinical.append([pid, int(rng.integers(-10, 60)), 0 if vendor == "GE" else 2,
                         1.5 if vendor == "GE" else 3, int(rng.integers(0, 3)), er,
                         er if rng.random() < 0.8 else 1 - er, int(rng.random() < 0.2),
                         int(rng.integers(0, 4)), int(rng.integers(1, 4))])
    save_xlsx(root / "Annotation_Boxes.xlsx", "Sheet1", [DUKE_BOX_COLS, *boxes])
    save_xlsx(root / "Clinical_and_Other_Features.xlsx", "data", [
        ["", "MRI Technical Information", "", "", "Demographics", "Tumor Characteristics", "",
         "", "", ""],
        ["Patient ID", "Days to MRI (From the Date of Diagnosis)", "Manufacturer",
         "Field Strength (Tesla)", "Menopause (at diagnosis)", "ER", "PR", "HER2",
         "Mol Subtype", "Nottingham grade"],
        ["", "", "{0 = GE, 1 = MPS, 2 = Siemens}", "", "{0 = pre, 1 = post, 2 = N/A}",
         "{0 = neg, 1 = pos}", "{0 = neg, 1 = pos}", "{0 = neg, 1 = pos}",
         "{0 = luminal-like, 1 = ER/PR pos, HER2 pos, 2 = her2, 3 = trip neg}",
         "{1 = low, 2 = intermediate, 3 = high}"],
        *clinical])
    write_table(manifest / "metadata.csv", [
        "Series UID", "Collection", "3rd Party Analysis", "Data Description URI", "Subject ID",
        "Study UID", "Study Description", "Study Date", "Series Description", "Manufacturer",
        "Modality", "SOP Class Name", "SOP Class UID", "Number of Images", "File Size",
        "File Location", "Download Timestamp"], meta)
    return root
