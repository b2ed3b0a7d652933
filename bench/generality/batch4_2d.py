"""Batch 4, 2D radiograph generators: RSNA Screening Mammography, SIIM-FISABIO-RSNA COVID-19
and the COVID-19 Radiography Database (see ``batch4.py`` for the documentation each follows).
Each writes a small folder in the layout the public dataset ships in and returns the dataset
root. Written from the datasets' public documentation only; no code of the app is imported."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .batch4_common import hex12, save_dicom, save_xlsx, seg_line
from .common import chest_background, disk, ellipse, mkdir, rng_for, save_png, to_u8, uid

# ============================================================================ RSNA mammography

RSNA_MAMMO_COLS = ["site_id", "patient_id", "image_id", "laterality", "view", "age", "cancer",
                   "biopsy", "invasive", "BIRADS", "implant", "density", "machine_id",
                   "difficult_negative_case"]


def _mammo(rng, lat, view, finding, implant, h=64, w=48):
    """Breast on the chest-wall side (left edge for L, right edge for R after flipping), a
    pectoral triangle on MLO; finding: None, 'cancer' (spiculated dense mass with radiating
    strands and a few microcalcifications) or 'benign' (oval circumscribed mass)."""
    yy, xx = np.mgrid[:h, :w]
    breast = ((yy - h / 2) / (h * 0.46)) ** 2 + (xx / (w * 0.82)) ** 2 <= 1
    img = np.where(breast, 0.35, 0.0)
    dens = rng.uniform(0.05, 0.25)
    for _ in range(10):  # fibroglandular tissue
        c = (rng.uniform(h * 0.2, h * 0.8), rng.uniform(2, w * 0.55))
        img[ellipse((h, w), *c, rng.uniform(3, 8), rng.uniform(3, 7)) & breast] += dens
    if view == "MLO":
        img[(xx < (h * 0.45 - yy) * 0.6) & breast] = 0.7
    if implant:
        img[ellipse((h, w), h * 0.5, w * 0.22, h * 0.2, w * 0.18)] = 0.95
    if finding:
        cy, cx = rng.uniform(h * 0.3, h * 0.7), rng.uniform(w * 0.2, w * 0.5)
        if finding == "cancer":
            img[disk((h, w), cy, cx, rng.uniform(2.5, 3.5))] = 0.9
            for a in rng.uniform(0, 2 * np.pi, 8):
                ln = rng.uniform(5, 8)
                img[seg_line((h, w), cy, cx, cy + ln * np.sin(a), cx + ln * np.cos(a), 0.8)
                    & breast] = 0.8
            for _ in range(4):
                img[int(cy + rng.integers(-4, 5)) % h, int(cx + rng.integers(-4, 5)) % w] = 1.0
        else:
            img[ellipse((h, w), cy, cx, rng.uniform(2.5, 4), rng.uniform(3, 5))] = 0.75
    img = (img + rng.normal(0, 0.02, img.shape)) * breast
    if lat == "R":
        img = img[:, ::-1]
    return np.clip(img, 0, 1)


def make_rsna_mammo(out_dir: Path, seed: int = 0) -> Path:
    """RSNA Screening Mammography Breast Cancer Detection (Kaggle 'rsna-breast-cancer-
    detection', 2022-23; RSNA AI-Challenge-Data wiki): train.csv with one row per image
    (site_id,patient_id,image_id,laterality,view,age,cancer,biopsy,invasive,BIRADS,implant,
    density,machine_id,difficult_negative_case), train_images/<patient_id>/<image_id>.dcm
    (usually but not always 4 images per patient: L/R x CC/MLO, sometimes an extra view), an
    unlabelled test_images/ with test.csv (site_id,patient_id,image_id,laterality,view,age,
    implant,machine_id,prediction_id = '<patient_id>_<laterality>') and sample_submission.csv
    (prediction_id,cancer). `cancer` is per breast (both views of that breast carry it);
    biopsy/invasive/BIRADS/difficult_negative_case are training-only extras, BIRADS and density
    are empty for many rows, age is a float with gaps. Images are MG DICOM, some MONOCHROME1
    (site 2 here), 12-bit in 16-bit words. Simplifications: 64x48 images (the originals are
    ~3000x2500, mostly JPEG 2000 compressed; here uncompressed), 18 training patients enriched
    for cancer (real prevalence ~2%), 2 test patients. The cancer is drawn as a spiculated mass
    with microcalcifications, biopsied benign findings as circumscribed oval masses."""
    rng = rng_for(seed, "rsna_mammo")
    root = mkdir(Path(out_dir) / "rsna-breast-cancer-detection")
    pids = sorted(int(p) for p in rng.choice(np.arange(10006, 65534), 20, replace=False))
    machines = {1: [21, 29, 48, 49, 93, 170, 190, 197, 210, 216], 2: [29, 48]}
    rows, test_rows = [], []
    for k, pid in enumerate(pids):
        test = k >= 18
        site = int(rng.choice([1, 2]))
        machine = int(rng.choice(machines[site]))
        age = "" if rng.random() < 0.05 else f"{float(rng.integers(40, 85)):.1f}"
        implant = int(rng.random() < 0.06)
        density = "" if rng.random() < 0.3 else str(rng.choice(list("ABCD")))
        cancer_side = str(rng.choice(["L", "R"])) if (not test and rng.random() < 0.45) else ""
        benign_side = ""
        if not cancer_side and rng.random() < 0.3:
            benign_side = str(rng.choice(["L", "R"]))
        views = [("L", "CC"), ("L", "MLO"), ("R", "CC"), ("R", "MLO")]
        if rng.random() < 0.2:
            views.append((str(rng.choice(["L", "R"])), str(rng.choice(["ML", "LM", "AT"]))))
        study, series = uid("1.2.840.10009.1.2.3", rng), uid("1.2.840.10009.1.2.3", rng)
        for lat, view in views:
            image_id = int(rng.integers(10**5, 2**31 - 1))
            cancer = int(lat == cancer_side)
            finding = "cancer" if cancer else ("benign" if lat == benign_side else None)
            img = _mammo(rng, lat, view if view != "ML" else "MLO", finding, implant)
            stored = (img * 4095).round().astype(np.uint16)
            phot = "MONOCHROME1" if site == 2 else "MONOCHROME2"
            if phot == "MONOCHROME1":
                stored = (4095 - stored).astype(np.uint16)
            sub = "test_images" if test else "train_images"
            save_dicom(root / sub / str(pid) / f"{image_id}.dcm", stored, modality="MG",
                       patient_id=str(pid), study_uid=study, series_uid=series,
                       sop_uid=f"{study}.{image_id}", photometric=phot, bits_stored=12,
                       ImageLaterality=lat, ViewPosition=view, BodyPartExamined="BREAST",
                       WindowCenter="2047", WindowWidth="4095", PixelSpacing=[0.94, 0.94],
                       VOILUTFunction="SIGMOID" if site == 2 else "LINEAR")
            if test:
                test_rows.append([site, pid, image_id, lat, view, age, implant, machine,
                                  f"{pid}_{lat}"])
                continue
            biopsy = int(cancer or lat == benign_side)
            invasive = int(cancer and rng.random() < 0.7)
            if site == 2:
                birads = ""
            else:
                birads = "0.0" if (cancer or lat == benign_side) else str(rng.choice(
                    ["1.0", "2.0", ""]))
            difficult = "True" if (lat == benign_side) else "False"
            rows.append([site, pid, image_id, lat, view, age, cancer, biopsy, invasive, birads,
                         implant, density, machine, difficult])
    with open(root / "train.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(RSNA_MAMMO_COLS)
        wr.writerows(rows)
    with open(root / "test.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(["site_id", "patient_id", "image_id", "laterality", "view", "age",
                     "implant", "machine_id", "prediction_id"])
        wr.writerows(test_rows)
    preds = sorted({r[-1] for r in test_rows})
    (root / "sample_submission.csv").write_text(
        "prediction_id,cancer\n" + "".join(f"{p},0.021\n" for p in preds))
    return root


# ============================================================================ SIIM COVID-19

SIIM_STUDY_COLS = ["Negative for Pneumonia", "Typical Appearance", "Indeterminate Appearance",
                   "Atypical Appearance"]


def _siim_cxr(rng, klass, size=64):
    """A chest film; returns (image in [0,1], list of boxes x, y, w, h). Typical: bilateral
    peripheral lower-zone ground glass; indeterminate: one faint unilateral patch; atypical:
    one dense lobar consolidation with air bronchograms; negative: clear lungs."""
    img = chest_background(rng, size)
    boxes = []
    patches = {"Typical Appearance": [(0.66, 0.2), (0.66, 0.8)],
               "Indeterminate Appearance": [(0.55, float(rng.choice([0.25, 0.75])))],
               "Atypical Appearance": [(0.42, float(rng.choice([0.3, 0.7])))]}.get(klass, [])
    for fy, fx in patches:
        cy, cx = size * fy + rng.normal(0, 2), size * fx + rng.normal(0, 1.5)
        ry, rx = rng.uniform(6, 10), rng.uniform(4, 6)
        m = ellipse((size, size), cy, cx, ry, rx)
        if klass == "Atypical Appearance":
            img[m] = 0.72
            img[seg_line((size, size), cy - ry * 0.6, cx, cy + ry * 0.6, cx + 1, 0.8) & m] = 0.3
        else:
            img[m] += 0.28 if klass == "Typical Appearance" else 0.18
        ys, xs = np.nonzero(m)
        x0, y0 = xs.min() + rng.uniform(-0.5, 0.5), ys.min() + rng.uniform(-0.5, 0.5)
        boxes.append((x0, y0, xs.max() - x0 + 1 + rng.uniform(0, 1),
                      ys.max() - y0 + 1 + rng.uniform(0, 1)))
    img += rng.normal(0, 0.015, img.shape)
    return np.clip(img, 0, 1), boxes


def _siim_dicom(path, img, rng, patient, study, series, image_id):
    phot = "MONOCHROME1" if rng.random() < 0.25 else "MONOCHROME2"
    bits = int(rng.choice([10, 12, 12, 14]))
    stored = (img * (2 ** bits - 1)).round().astype(np.uint16)
    if phot == "MONOCHROME1":
        stored = (2 ** bits - 1 - stored).astype(np.uint16)
    save_dicom(path, stored, modality=str(rng.choice(["DX", "CR"])), patient_id=patient,
               study_uid=study, series_uid=series, sop_uid=image_id, photometric=phot,
               bits_stored=bits, BodyPartExamined="CHEST", PatientSex=str(rng.choice(["M", "F"])))


def make_siim_covid(out_dir: Path, seed: int = 0) -> Path:
    """SIIM-FISABIO-RSNA COVID-19 Detection (Kaggle 'siim-covid19-detection', 2021; data from
    BIMCV-COVID19+ and MIDRC-RICORD): train/<StudyInstanceUID>/<SeriesInstanceUID>/<image
    id>.dcm where every id is a 12-hex-digit hash (also in the DICOM StudyInstanceUID and
    SOPInstanceUID tags; the patient is only in the DICOM PatientID, and a patient can have
    several studies); train_study_level.csv ('<study>_study' + one-hot 'Negative for
    Pneumonia','Typical Appearance','Indeterminate Appearance','Atypical Appearance');
    train_image_level.csv (id '<image>_image', boxes as a Python-literal string
    "[{'x': .., 'y': .., 'width': .., 'height': ..}]" or empty, label as 'opacity 1 x1 y1 x2 y2
    ...' or 'none 1 0 0 1 1', StudyInstanceUID); some studies hold more than one image (the
    extra images usually without boxes); unlabelled test/ and sample_submission.csv
    (id,PredictionString with '_study' and '_image' rows). DICOMs are DX or CR, 10-14 bit,
    some MONOCHROME1. Simplifications: 64 px images with box coordinates in that grid (the
    originals are ~2500-4000 px), 56 training studies, 4 test studies."""
    rng = rng_for(seed, "siim_covid")
    root = mkdir(Path(out_dir) / "siim-covid19-detection")
    klasses = (["Negative for Pneumonia"] * 15 + ["Typical Appearance"] * 21
               + ["Indeterminate Appearance"] * 11 + ["Atypical Appearance"] * 9)
    rng.shuffle(klasses)
    study_rows, image_rows = [], []
    patient = hex12(rng)
    for k, klass in enumerate(klasses):
        if rng.random() > 0.15:  # most patients have one study
            patient = hex12(rng)
        study = hex12(rng)
        study_rows.append([f"{study}_study", *[int(c == klass) for c in SIIM_STUDY_COLS]])
        n_img = 2 if k % 17 == 5 else 1
        for j in range(n_img):
            series, image_id = hex12(rng), hex12(rng)
            img, boxes = _siim_cxr(rng, klass if j == 0 else "Negative for Pneumonia")
            if klass == "Typical Appearance" and j == 0 and rng.random() < 0.1:
                boxes = []  # a typical study whose image got no box, as happens
            _siim_dicom(root / "train" / study / series / f"{image_id}.dcm", img, rng,
                        patient, study, series, image_id)
            if boxes:
                bstr = "[" + ", ".join(f"{{'x': {x:.5f}, 'y': {y:.5f}, 'width': {w:.5f}, "
                                       f"'height': {h:.5f}}}" for x, y, w, h in boxes) + "]"
                label = " ".join(f"opacity 1 {x:.5f} {y:.5f} {x + w:.5f} {y + h:.5f}"
                                 for x, y, w, h in boxes)
            else:
                bstr, label = "", "none 1 0 0 1 1"
            image_rows.append([f"{image_id}_image", bstr, label, study])
    with open(root / "train_study_level.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(["id", *SIIM_STUDY_COLS])
        wr.writerows(study_rows)
    with open(root / "train_image_level.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(["id", "boxes", "label", "StudyInstanceUID"])
        wr.writerows(image_rows)
    sub = ["id,PredictionString"]
    for _ in range(4):
        study, series, image_id, patient = hex12(rng), hex12(rng), hex12(rng), hex12(rng)
        img, _b = _siim_cxr(rng, str(rng.choice(SIIM_STUDY_COLS)))
        _siim_dicom(root / "test" / study / series / f"{image_id}.dcm", img, rng, patient,
                    study, series, image_id)
        sub += [f"{study}_study,negative 1 0 0 1 1", f"{image_id}_image,none 1 0 0 1 1"]
    (root / "sample_submission.csv").write_text("\n".join(sub) + "\n")
    return root


# ============================================================================ COVID-19 Radiography

COVID_RAD_CLASSES = ["COVID", "Lung_Opacity", "Normal", "Viral Pneumonia"]
_COVID_RAD_N = {"COVID": 17, "Lung_Opacity": 18, "Normal": 23, "Viral Pneumonia": 12}
_COVID_RAD_URL = {
    "COVID": ["https://bimcv.cipf.es/bimcv-projects/bimcv-covid19/#1590858128006-9e640421-6711",
              "https://github.com/ml-workgroup/covid-19-image-repository/tree/master/png",
              "https://sirm.org/category/senza-categoria/covid-19/",
              "https://github.com/armiro/COVID-CXNet"],
    "Lung_Opacity": ["https://www.kaggle.com/c/rsna-pneumonia-detection-challenge/data"],
    "Normal": ["https://www.kaggle.com/c/rsna-pneumonia-detection-challenge/data",
               "https://www.kaggle.com/paultimothymooney/chest-xray-pneumonia"],
    "Viral Pneumonia": ["https://www.kaggle.com/paultimothymooney/chest-xray-pneumonia"],
}


def _covid_rad_cxr(rng, klass, size=64):
    """COVID: bilateral peripheral lower-zone haze; Lung_Opacity: one dense lobar
    consolidation; Viral Pneumonia: a small (paediatric) chest with perihilar streaks;
    Normal: clear lungs. Returns the image and the lung mask."""
    if klass == "Viral Pneumonia":
        img = np.zeros((size, size), np.float32)
        small = chest_background(rng, int(size * 0.8))
        o = (size - small.shape[0]) // 2
        img[o:o + small.shape[0], o:o + small.shape[0]] = small
        lungs = np.zeros((size, size), bool)
        lungs[o:o + small.shape[0], o:o + small.shape[0]] = small < 0.35
        for s in (-1, 1):
            for a in (-0.5, 0.0, 0.5):
                img[seg_line((size, size), size * 0.5, size * 0.5 + s * 4, size * (0.5 + 0.25
                             * np.sin(a)), size * 0.5 + s * 16, 1.0) & lungs] += 0.22
    else:
        img = chest_background(rng, size)
        lungs = img < 0.35
        if klass == "COVID":
            for fx in (0.2, 0.8):
                img[ellipse((size, size), size * 0.68, size * fx, 8, 5) & lungs] += 0.25
        elif klass == "Lung_Opacity":
            img[ellipse((size, size), size * rng.uniform(0.4, 0.65), size * float(
                rng.choice([0.28, 0.72])), 7, 5) & lungs] = 0.7
    img += rng.normal(0, 0.015, img.shape)
    return np.clip(img, 0, 1), lungs


def make_covid_radiography(out_dir: Path, seed: int = 0) -> Path:
    """COVID-19 Radiography Database (Chowdhury et al., IEEE Access 8:132665, 2020; Rahman et
    al., Comput Biol Med 132:104319, 2021; Kaggle 'tawsifurrahman/covid19-radiography-
    database', the release with lung masks): COVID-19_Radiography_Dataset/{COVID,Lung_Opacity,
    Normal,Viral Pneumonia}/images/<class>-<n>.png ('Viral Pneumonia-1.png' with a space) and
    <class>/masks/<class>-<n>.png (lung masks, 0/255, at 256 px while the images are 299 px:
    the masks are lung fields, not the label), one <class>.metadata.xlsx per class at the top
    ('FILE NAME', 'FORMAT', 'SIZE', 'URL' of the source collection) and README.md.txt. The
    class is only in the folder (and file) name. Simplifications: 64 px images and 48 px
    masks, 70 images, a few RGB PNGs among the grayscale ones as in the download."""
    from PIL import Image

    rng = rng_for(seed, "covid_radiography")
    root = mkdir(Path(out_dir) / "COVID-19_Radiography_Dataset")
    for klass in COVID_RAD_CLASSES:
        meta = [["FILE NAME", "FORMAT", "SIZE", "URL"]]
        for n in range(1, _COVID_RAD_N[klass] + 1):
            img, lungs = _covid_rad_cxr(rng, klass)
            arr = to_u8(img)
            if rng.random() < 0.1:
                arr = np.repeat(arr[..., None], 3, 2)
            save_png(root / klass / "images" / f"{klass}-{n}.png", arr)
            m = Image.fromarray((lungs * 255).astype(np.uint8)).resize((48, 48), Image.NEAREST)
            save_png(root / klass / "masks" / f"{klass}-{n}.png", np.asarray(m))
            meta.append([f"{klass}-{n}", "PNG", "256*256",
                         str(rng.choice(_COVID_RAD_URL[klass]))])
        save_xlsx(root / f"{klass}.metadata.xlsx", "Sheet1", meta)
    (root / "README.md.txt").write_text(
        "COVID-19 CHEST X-RAY DATABASE\n\nA team of researchers from Qatar University, Doha, "
        "Qatar, and the University of Dhaka, Bangladesh along with their collaborators from "
        "Pakistan and Malaysia in collaboration with medical doctors have created a database "
        "of chest X-ray images for COVID-19 positive cases along with Normal, Lung Opacity "
        "(Non-COVID lung infection) and Viral Pneumonia images.\n\nCOVID-19 data, Normal "
        "images, Lung opacity images and Viral Pneumonia images are in one folder each, with "
        "the images in images/ and the lung masks in masks/.\n\nPlease cite: M.E.H. Chowdhury "
        "et al., IEEE Access 2020; T. Rahman et al., Computers in Biology and Medicine "
        "2021.\n")
    return root
