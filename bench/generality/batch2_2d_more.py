"""Batch 2, 2D generators (second part): DRIVE, CBIS-DDSM and DeepLesion. Each writes a small
folder in the layout the public dataset ships in (see ``batch2.py`` for the documentation each
follows) and returns the dataset root. Written from the datasets' public documentation only; no
code of the app is imported."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from .batch2_2d import _line
from .common import disk, ellipse, mkdir, rng_for


# ============================================================================ DRIVE

def _retina(rng, h, w, left_eye):
    img = np.zeros((h, w, 3), np.float32)
    cy, cx = h / 2, w / 2
    r = min(h, w) * 0.47
    fov = disk((h, w), cy, cx, r)
    yy, xx = np.mgrid[:h, :w]
    shade = 1 - 0.3 * np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) / r
    img[fov] = np.array([0.80, 0.42, 0.20])[None] * shade[fov][:, None]
    dx = cx + (-1 if left_eye else 1) * r * 0.55
    dy = cy + rng.uniform(-2, 2)
    vessels = np.zeros((h, w), bool)

    def branch(y, x, ang, length, width, depth):
        nonlocal vessels
        steps = int(length)
        for _ in range(steps):
            ny, nx = y + np.sin(ang), x + np.cos(ang)
            vessels |= _line((h, w), y, x, ny, nx, width)
            y, x = ny, nx
            ang += rng.normal(0, 0.12)
        if depth > 0:
            for da in (-0.5, 0.5):
                branch(y, x, ang + da + rng.normal(0, 0.1), length * 0.7, max(width * 0.7, 0.8),
                       depth - 1)

    toward = 0.0 if left_eye else np.pi
    for a in (-1.1, -0.6, 0.6, 1.1):
        branch(dy, dx, toward + a + rng.normal(0, 0.1), rng.uniform(9, 13), 1.8, 2)
    vessels &= fov
    img[vessels] = [0.45, 0.12, 0.07]
    img[disk((h, w), dy, dx, r * 0.13) & fov] = [0.98, 0.86, 0.62]
    img[fov] += rng.normal(0, 0.02, (fov.sum(), 3))
    img[~fov] = 0
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8), vessels, fov


def make_drive(out_dir: Path, seed: int = 0) -> Path:
    """DRIVE: Digital Retinal Images for Vessel Extraction (Staal et al., IEEE TMI 2004),
    original release: DRIVE/training/{images/NN_training.tif, 1st_manual/NN_manual1.gif,
    mask/NN_training_mask.gif} for NN = 21..40 and DRIVE/test/{images/NN_test.tif,
    1st_manual/NN_manual1.gif, 2nd_manual/NN_manual2.gif, mask/NN_test_mask.gif} for
    NN = 01..20. RGB TIFFs (565 x 584 in the original), vessel and field-of-view masks as
    0/255 GIFs. One image per subject."""
    rng = rng_for(seed, "drive")
    root = mkdir(Path(out_dir) / "DRIVE")
    h, w = 66, 64
    for split, nums in (("training", range(21, 41)), ("test", range(1, 21))):
        for n in nums:
            img, ves, fov = _retina(rng, h, w, left_eye=bool(rng.random() < 0.5))
            stem = f"{n:02d}_{split}"
            mkdir(root / split / "images")
            Image.fromarray(img).save(root / split / "images" / f"{stem}.tif")
            mkdir(root / split / "mask")
            Image.fromarray((fov * 255).astype(np.uint8)).save(
                root / split / "mask" / f"{stem}_mask.gif")
            mkdir(root / split / "1st_manual")
            Image.fromarray((ves * 255).astype(np.uint8)).save(
                root / split / "1st_manual" / f"{n:02d}_manual1.gif")
            if split == "test":  # a second observer: a few thin vessels missed / added
                ves2 = ves & ~(rng.random(ves.shape) < 0.08)
                mkdir(root / split / "2nd_manual")
                Image.fromarray((ves2 * 255).astype(np.uint8)).save(
                    root / split / "2nd_manual" / f"{n:02d}_manual2.gif")
    return root


# ============================================================================ CBIS-DDSM

def save_dicom_mg(path: Path, pixels: np.ndarray, *, patient_id: str, study_uid: str,
                  series_uid: str, sop_uid: str, series_desc: str, laterality: str,
                  view: str) -> None:
    """A single-frame MONOCHROME2 secondary-capture mammogram like the CBIS-DDSM files
    (16-bit for full and cropped images, 8-bit 0/255 for ROI masks)."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian

    mkdir(path.parent)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.7"  # Secondary Capture
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = sop_uid
    ds.StudyDate = "20160720"
    ds.SeriesDate = "20160720"
    ds.StudyTime = ""
    ds.AccessionNumber = ""
    ds.Modality = "MG"
    ds.ConversionType = "WSD"
    ds.ReferringPhysicianName = ""
    ds.SeriesDescription = series_desc
    ds.PatientName = patient_id
    ds.PatientID = patient_id
    ds.PatientBirthDate = ""
    ds.PatientSex = ""
    ds.BodyPartExamined = "BREAST"
    ds.Laterality = laterality
    ds.ImageLaterality = laterality
    ds.ViewPosition = view
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.StudyID = "DDSM"
    ds.SeriesNumber = 1
    ds.InstanceNumber = 1
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = pixels.shape
    bits = 16 if pixels.dtype == np.uint16 else 8
    ds.BitsAllocated = bits
    ds.BitsStored = bits
    ds.HighBit = bits - 1
    ds.PixelRepresentation = 0
    ds.PixelData = pixels.tobytes()
    ds.save_as(str(path), enforce_file_format=True)


_MASS_SHAPES_B = ["OVAL", "ROUND", "LOBULATED"]
_MASS_SHAPES_M = ["IRREGULAR", "IRREGULAR-ARCHITECTURAL_DISTORTION", "LOBULATED"]
_MASS_MARG_B = ["CIRCUMSCRIBED", "OBSCURED", "MICROLOBULATED"]
_MASS_MARG_M = ["SPICULATED", "ILL_DEFINED", "SPICULATED"]
_CALC_TYPE_B = ["PUNCTATE", "LUCENT_CENTER", "VASCULAR", "ROUND_AND_REGULAR"]
_CALC_TYPE_M = ["PLEOMORPHIC", "FINE_LINEAR_BRANCHING", "AMORPHOUS"]
_CALC_DIST_B = ["SCATTERED", "REGIONAL", "DIFFUSELY_SCATTERED"]
_CALC_DIST_M = ["CLUSTERED", "SEGMENTAL", "LINEAR"]


def _mammo(rng, side, kind, malignant, view, h=64, w=40):
    img = np.full((h, w), 0.04, np.float32)
    wall_x = 0 if side == "LEFT" else w - 1
    breast = ellipse((h, w), h / 2, wall_x, h * 0.46, w * 0.9)
    img[breast] = 0.38 + 0.06 * rng.standard_normal(breast.sum())
    if view == "MLO":  # pectoral muscle wedge at the top, chest-wall side
        yy, xx = np.mgrid[:h, :w]
        dist = xx if side == "LEFT" else (w - 1 - xx)
        img[(dist + yy * 0.6 < 14) & breast] = 0.7
    cy = rng.uniform(0.35, 0.65) * h
    cx = abs(wall_x - rng.uniform(0.35, 0.6) * w)
    roi = np.zeros((h, w), bool)
    if kind == "mass":
        if malignant:  # irregular, spiculated
            roi = ellipse((h, w), cy, cx, 4.5, 4.0)
            img[roi] = 0.85
            for _ in range(7):
                a = rng.uniform(0, 2 * np.pi)
                sp = _line((h, w), cy, cx, cy + 9 * np.sin(a), cx + 9 * np.cos(a), 0.8) & breast
                img[sp] = 0.75
                roi |= sp & disk((h, w), cy, cx, 6.5)
        else:  # round / oval, circumscribed
            roi = ellipse((h, w), cy, cx, rng.uniform(3.5, 5), rng.uniform(4, 6))
            img[roi] = 0.72
    else:
        roi = ellipse((h, w), cy, cx, 5.5, 5.5)
        n = int(rng.integers(8, 14)) if malignant else int(rng.integers(3, 5))
        for _ in range(n):
            y, x = cy + rng.uniform(-4, 4), cx + rng.uniform(-4, 4)
            if malignant:  # fine pleomorphic specks, clustered
                img[disk((h, w), y, x, 0.6)] = 1.0
            else:  # coarse, scattered
                img[disk((h, w), y + rng.uniform(-3, 3), x, 1.4)] = 0.95
    img = np.clip(img + rng.normal(0, 0.01, img.shape), 0, 1)
    return (img * 65535).round().astype(np.uint16), roi & breast


def make_cbis_ddsm(out_dir: Path, seed: int = 0) -> Path:
    """CBIS-DDSM (Lee et al., Sci Data 2017; TCIA doi:10.7937/K9/TCIA.2016.7O02S9CY) as the
    TCIA download with classic directory names writes it, matching the paths in the case
    description tables: CBIS-DDSM/<Mass|Calc>-<Training|Test>_P_#####_<LEFT|RIGHT>_<CC|MLO>/
    <StudyUID>/<SeriesUID>/000000.dcm (full mammogram) and ..._<abnormality id>/<StudyUID>/
    <SeriesUID>/000000.dcm (cropped) + 000001.dcm (ROI mask), plus
    mass_case_description_{train,test}_set.csv and calc_case_description_{train,test}_set.csv
    (pathology MALIGNANT / BENIGN / BENIGN_WITHOUT_CALLBACK; 'breast_density' in the mass
    tables but 'breast density' in the calc tables; some mask paths end in a newline inside
    the quotes, as in the published tables). Each lesion is seen in the CC and the MLO view."""
    rng = rng_for(seed, "cbis_ddsm")
    root = mkdir(Path(out_dir) / "CBIS-DDSM")
    top = root / "CBIS-DDSM"

    def u():
        return "1.3.6.1.4.1.9590.100.1.2." + "".join(
            str(int(d)) for d in rng.integers(0, 10, 39)).lstrip("0")

    tables = {}
    pids = iter(sorted(rng.choice(np.arange(1, 2000), 80, replace=False)))
    plan = [("mass", "Training", 14), ("mass", "Test", 5), ("calc", "Training", 8),
            ("calc", "Test", 4)]
    for kind, split, n_lesions in plan:
        rows = []
        for _ in range(n_lesions):
            pid = f"P_{next(pids):05d}"
            side = str(rng.choice(["LEFT", "RIGHT"]))
            path_r = rng.random()
            malignant = path_r < 0.45
            pathology = "MALIGNANT" if malignant else (
                "BENIGN_WITHOUT_CALLBACK" if path_r > 0.85 else "BENIGN")
            density = int(rng.integers(1, 5))
            subtlety = int(rng.integers(2, 6))
            assessment = int(rng.choice([4, 5])) if malignant else int(rng.choice([2, 3, 4]))
            if kind == "mass":
                shape = str(rng.choice(_MASS_SHAPES_M if malignant else _MASS_SHAPES_B))
                margin = str(rng.choice(_MASS_MARG_M if malignant else _MASS_MARG_B))
            else:
                shape = str(rng.choice(_CALC_TYPE_M if malignant else _CALC_TYPE_B))
                margin = str(rng.choice(_CALC_DIST_M if malignant else _CALC_DIST_B))
            prefix = f"{'Mass' if kind == 'mass' else 'Calc'}-{split}"
            for view in ("CC", "MLO"):
                full_id = f"{prefix}_{pid}_{side}_{view}"
                img, roi = _mammo(rng, side, kind, malignant, view)
                st, se = u(), u()
                full_rel = f"{full_id}/{st}/{se}/000000.dcm"
                save_dicom_mg(top / full_rel, img, patient_id=full_id, study_uid=st,
                              series_uid=se, sop_uid=u(), series_desc="full mammogram images",
                              laterality=side[0], view=view)
                roi_id = f"{full_id}_1"
                st2, se2 = u(), u()
                ys, xs = np.nonzero(roi)
                crop = img[max(ys.min() - 3, 0): ys.max() + 4, max(xs.min() - 3, 0): xs.max() + 4]
                crop_rel = f"{roi_id}/{st2}/{se2}/000000.dcm"
                mask_rel = f"{roi_id}/{st2}/{se2}/000001.dcm"
                save_dicom_mg(top / crop_rel, np.ascontiguousarray(crop), patient_id=roi_id,
                              study_uid=st2, series_uid=se2, sop_uid=u(),
                              series_desc="cropped images", laterality=side[0], view=view)
                save_dicom_mg(top / mask_rel, (roi * 255).astype(np.uint8), patient_id=roi_id,
                              study_uid=st2, series_uid=se2, sop_uid=u(),
                              series_desc="ROI mask images", laterality=side[0], view=view)
                nl = "\n" if rng.random() < 0.3 else ""
                rows.append([pid, density, side, view, 1, "mass" if kind == "mass" else
                             "calcification", shape, margin, assessment, pathology, subtlety,
                             full_rel, crop_rel, mask_rel + nl])
        tables[(kind, split)] = rows
    for (kind, split), rows in tables.items():
        if kind == "mass":
            head = ["patient_id", "breast_density", "left or right breast", "image view",
                    "abnormality id", "abnormality type", "mass shape", "mass margins",
                    "assessment", "pathology", "subtlety", "image file path",
                    "cropped image file path", "ROI mask file path"]
        else:
            head = ["patient_id", "breast density", "left or right breast", "image view",
                    "abnormality id", "abnormality type", "calc type", "calc distribution",
                    "assessment", "pathology", "subtlety", "image file path",
                    "cropped image file path", "ROI mask file path"]
        name = f"{kind}_case_description_{'train' if split == 'Training' else 'test'}_set.csv"
        with open(root / name, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(head)
            w.writerows(sorted(rows, key=lambda r: (r[0], r[2], r[3])))
    return root


# ============================================================================ DeepLesion

DL_TYPES = {1: "bone", 2: "abdomen", 3: "mediastinum", 4: "liver", 5: "lung", 6: "kidney",
            7: "soft tissue", 8: "pelvis"}
_DL_WINDOWS = {5: "-1350, 150", 3: "-175, 275"}


def _ct_slice(rng, lesion_type, size=64):
    hu = np.full((size, size), -1024.0)
    body = ellipse((size, size), 32, 32, 24, 29)
    hu[body] = 40
    if lesion_type in (3, 5):  # chest level: lungs, mediastinum
        for cx in (19, 45):
            hu[ellipse((size, size), 30, cx, 15, 9)] = -820
    else:  # abdomen level: liver on the left of the image, kidneys posterior
        hu[ellipse((size, size), 28, 20, 12, 10)] = 60
        for cx in (22, 42):
            hu[ellipse((size, size), 42, cx, 5, 3.5)] = 150
    hu[disk((size, size), 50, 32, 4)] = 700  # vertebra
    hu += rng.normal(0, 12, hu.shape)
    return hu


def _dl_center(rng, t):
    return {1: (50, 32 + rng.uniform(-8, 8)), 2: (36 + rng.uniform(-4, 4), 34 + rng.uniform(-6, 6)),
            3: (30 + rng.uniform(-5, 5), 32 + rng.uniform(-2, 2)),
            4: (28 + rng.uniform(-4, 4), 20 + rng.uniform(-3, 3)),
            5: (30 + rng.uniform(-6, 6), float(rng.choice([19, 45])) + rng.uniform(-3, 3)),
            6: (42, float(rng.choice([22, 42]))),
            7: (32 + rng.uniform(-8, 8), float(rng.choice([6, 58]))),
            8: (40 + rng.uniform(-4, 4), 32 + rng.uniform(-8, 8))}[t]


def make_deeplesion(out_dir: Path, seed: int = 0) -> Path:
    """DeepLesion (NIH Clinical Center; Yan et al., J Med Imaging 2018; nihcc.app.box.com/v/
    DeepLesion): Images_png/<patient>_<study>_<series>/<slice>.png (16-bit, HU = value - 32768)
    holding the key slice and its neighbours, and DL_info.csv with one row per lesion:
    File_name (<patient>_<study>_<series>_<slice>.png), Patient_index, Study_index, Series_ID,
    Key_slice_index, Measurement_coordinates (RECIST end points), Bounding_boxes ('x1, y1, x2,
    y2' in pixels), Lesion_diameters_Pixel_, Normalized_lesion_location, Coarse_lesion_type
    (1-8, -1 = not labelled, the whole training split), Possibly_noisy, Slice_range,
    Spacing_mm_px_, Image_size, DICOM_windows, Patient_gender, Patient_age, Train_Val_Test
    (1 train, 2 validation, 3 test). Several studies per patient; some key slices carry two
    lesions. Simplification: 5 slices per series, no Key_slices_png/ preview folder."""
    rng = rng_for(seed, "deeplesion")
    root = mkdir(Path(out_dir) / "DeepLesion")
    rows = []
    patients = sorted(rng.choice(np.arange(1, 4428), 34, replace=False))
    for k, p in enumerate(patients):
        split = 1 if k % 20 < 14 else (2 if k % 20 < 17 else 3)  # patient-wise 70/15/15
        sex = str(rng.choice(["M", "F"]))
        age0 = int(rng.integers(25, 85))
        n_studies = int(rng.choice([1, 2], p=[0.6, 0.4]))
        home_type = int(rng.integers(1, 9))
        for s in range(1, n_studies + 1):
            series = int(rng.integers(1, 4))
            folder = f"{p:06d}_{s:02d}_{series:02d}"
            key = int(rng.integers(20, 150))
            spacing = float(np.round(rng.uniform(0.6, 0.95), 6))
            thick = float(rng.choice([1.25, 2.5, 5.0]))
            n_les = 2 if rng.random() < 0.1 else 1
            lesions = []
            for j in range(n_les):
                t = home_type if j == 0 else int(rng.integers(1, 9))
                if (t in (3, 5)) != (home_type in (3, 5)):  # same body level as the first
                    t = home_type
                lesions.append((t, _dl_center(rng, t), rng.uniform(3.0, 6.0), rng.uniform(0.6, 0.9),
                                float(rng.choice([-1, 1]))))
            lesion_level = lesions[0][0]
            for sl in range(key - 2, key + 3):
                hu = _ct_slice(rng, lesion_level)
                for t, (cy, cx), r, ratio, sign in lesions:
                    rr = r * (1 - 0.2 * abs(sl - key))
                    m = ellipse(hu.shape, cy, cx, rr * ratio, rr)
                    hu[m] = (-10 if sign < 0 else 140) + rng.normal(0, 8, m.sum())
                png = np.clip(hu + 32768, 0, 65535).round().astype(np.uint16)
                mkdir(root / "Images_png" / folder)
                Image.fromarray(png).save(root / "Images_png" / folder / f"{sl:03d}.png")
            for t, (cy, cx), r, ratio, sign in lesions:
                long_d, short_d = 2 * r, 2 * r * ratio
                meas = [cx - r, cy, cx + r, cy, cx, cy - r * ratio, cx, cy + r * ratio]
                box = np.clip([cx - r - 2, cy - r * ratio - 2, cx + r + 2, cy + r * ratio + 2],
                              0, 63).tolist()
                rows.append([
                    f"{folder}_{key:03d}.png", int(p), s, series, key,
                    ", ".join(f"{v:.3f}" for v in meas), ", ".join(f"{v:.3f}" for v in box),
                    f"{long_d:.3f}, {short_d:.3f}",
                    f"{cx / 64:.5f}, {cy / 64:.5f}, {rng.uniform(0.2, 0.8):.5f}",
                    -1 if split == 1 else t, int(rng.random() < 0.04),
                    f"{key - 2}, {key + 2}", f"{spacing}, {spacing}, {thick}", "64, 64",
                    _DL_WINDOWS.get(t, "-175, 275"), sex, age0 + s - 1, split])
    with open(root / "DL_info.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["File_name", "Patient_index", "Study_index", "Series_ID", "Key_slice_index",
                    "Measurement_coordinates", "Bounding_boxes", "Lesion_diameters_Pixel_",
                    "Normalized_lesion_location", "Coarse_lesion_type", "Possibly_noisy",
                    "Slice_range", "Spacing_mm_px_", "Image_size", "DICOM_windows",
                    "Patient_gender", "Patient_age", "Train_Val_Test"])
        w.writerows(rows)
    return root


__all__ = ["make_cbis_ddsm", "make_deeplesion", "make_drive", "DL_TYPES"]
