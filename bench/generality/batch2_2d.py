"""Batch 2, 2D generators (first part): Kermany chest X-ray pneumonia, APTOS 2019, PadChest and
SIIM-ACR Pneumothorax (DRIVE, CBIS-DDSM and DeepLesion are in ``batch2_2d_more.py``). Each writes a small folder in the layout the
public dataset ships in (see ``batch2.py`` for the documentation each follows) and returns the
dataset root. Written from the datasets' public documentation only; no code of the app is
imported."""
from __future__ import annotations

import csv
import datetime as _dt
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from .common import (chest_background, disk, ellipse, mkdir, rng_for, save_dicom_cr, save_jpg,
                     save_png, to_u8)


def _uuid(rng) -> str:
    return str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63))))


def _line(img_shape, y0, x0, y1, x1, width=1.0) -> np.ndarray:
    """Mask of a thick straight segment."""
    yy, xx = np.mgrid[: img_shape[0], : img_shape[1]]
    dy, dx = y1 - y0, x1 - x0
    L2 = dy * dy + dx * dx or 1e-6
    t = np.clip(((yy - y0) * dy + (xx - x0) * dx) / L2, 0, 1)
    d2 = (yy - (y0 + t * dy)) ** 2 + (xx - (x0 + t * dx)) ** 2
    return d2 <= (width / 2) ** 2 + 0.25


# ============================================================================ Kermany CXR

def _pediatric_cxr(rng, kind, h, w):
    img = chest_background(rng, 64)
    img = np.asarray(Image.fromarray(to_u8(img)).resize((w, h), Image.BILINEAR), np.float32) / 255
    if kind == "bacteria":  # dense lobar consolidation, one side
        cx = (0.30 if rng.random() < 0.5 else 0.70) * w
        cy = rng.uniform(0.45, 0.70) * h
        m = ellipse((h, w), cy, cx, rng.uniform(0.12, 0.18) * h, rng.uniform(0.09, 0.13) * w)
        img[m] = np.clip(img[m] + 0.45 + rng.normal(0, 0.03, m.sum()), 0, 1)
    elif kind == "virus":  # bilateral perihilar streaky interstitial pattern
        for side in (0.38, 0.62):
            for _ in range(6):
                a = rng.uniform(-1.2, 1.2)
                y0, x0 = 0.5 * h, side * w
                m = _line((h, w), y0, x0, y0 + 14 * np.sin(a), x0 + (1 if side > 0.5 else -1)
                          * 14 * abs(np.cos(a)), 1.0)
                img[m] = np.clip(img[m] + 0.22, 0, 1)
        img[ellipse((h, w), 0.5 * h, 0.5 * w, 0.3 * h, 0.4 * w)] += 0.06
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    return to_u8(img)


_DS_STORE = b"\x00\x00\x00\x01Bud1" + b"\x00" * 2036 + b"\x10\x0c"
_APPLEDOUBLE = (b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02"
                b"\x00\x00\x00\t\x00\x00\x00\x32\x00\x00\x00\x20\x00\x00\x00\x02\x00\x00\x00\x52"
                + b"\x00" * 134)


def make_kermany_pneumonia(out_dir: Path, seed: int = 0) -> Path:
    """Chest X-Ray Images (Pneumonia), Kermany et al. 2018, as on Kaggle
    (paultimothymooney/chest-xray-pneumonia): chest_xray/{train,test,val}/{NORMAL,PNEUMONIA}/
    with NORMAL 'IM-####-####.jpeg' / 'NORMAL2-IM-####-####.jpeg' (patient number, image
    number) and PNEUMONIA 'person<P>_bacteria_<K>.jpeg' / 'person<P>_virus_<K>.jpeg'.
    Grayscale JPEGs of varying size (a few saved as RGB). The archive was zipped on a Mac, so
    .DS_Store files and a __MACOSX/ folder of '._<name>' AppleDouble stubs come along.
    Simplification: the duplicate chest_xray/chest_xray/ copy inside the Kaggle archive is left
    out."""
    rng = rng_for(seed, "kermany_pneumonia")
    root = mkdir(Path(out_dir) / "chest_xray")
    plan = {"train": (18, 18, 18), "test": (10, 7, 7), "val": (4, 2, 2)}  # normal, bact, virus
    normal_pids = iter(sorted(rng.choice(np.arange(1, 1500), 60, replace=False)))
    person_ids = iter(sorted(rng.choice(np.arange(1, 1950), 60, replace=False)))
    counter = {"bacteria": int(rng.integers(1, 50)), "virus": int(rng.integers(1, 50))}
    stubs = []
    for split, (n_norm, n_bac, n_vir) in plan.items():
        left = n_norm
        while left > 0:  # NORMAL: 1-2 images per patient
            pid = next(normal_pids)
            prefix = "NORMAL2-" if rng.random() < 0.4 else ""
            for k in range(min(left, int(rng.choice([1, 2], p=[0.7, 0.3])))):
                left -= 1
                name = f"{prefix}IM-{pid:04d}-{k + 1:04d}.jpeg"
                h, w = int(rng.integers(52, 70)), int(rng.integers(60, 80))
                img = _pediatric_cxr(rng, "normal", h, w)
                if rng.random() < 0.1:
                    img = np.repeat(img[..., None], 3, axis=2)
                save_jpg(root / split / "NORMAL" / name, img)
                stubs.append((split, "NORMAL", name))
        for kind, n in (("bacteria", n_bac), ("virus", n_vir)):
            left = n
            while left > 0:
                pid = next(person_ids)
                for _ in range(min(left, int(rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1])))):
                    left -= 1
                    counter[kind] += int(rng.integers(1, 9))
                    name = f"person{pid}_{kind}_{counter[kind]}.jpeg"
                    h, w = int(rng.integers(52, 70)), int(rng.integers(60, 80))
                    img = _pediatric_cxr(rng, kind, h, w)
                    if rng.random() < 0.1:
                        img = np.repeat(img[..., None], 3, axis=2)
                    save_jpg(root / split / "PNEUMONIA" / name, img)
                    stubs.append((split, "PNEUMONIA", name))
    for split in plan:
        (root / split / ".DS_Store").write_bytes(_DS_STORE)
        for cls in ("NORMAL", "PNEUMONIA"):
            (root / split / cls / ".DS_Store").write_bytes(_DS_STORE)
    (root / ".DS_Store").write_bytes(_DS_STORE)
    for i in sorted(rng.choice(len(stubs), 12, replace=False)):
        split, cls, name = stubs[i]
        p = mkdir(root / "__MACOSX" / "chest_xray" / split / cls) / f"._{name}"
        p.write_bytes(_APPLEDOUBLE)
    return root


# ============================================================================ APTOS 2019

APTOS_GRADES = {0: 34, 1: 12, 2: 22, 3: 9, 4: 13}


def _fundus(rng, grade, h, w):
    img = np.zeros((h, w, 3), np.float32)
    cy, cx = h / 2, w / 2
    r = min(h, w) * rng.uniform(0.46, 0.52)
    fov = disk((h, w), cy, cx, r)
    yy, xx = np.mgrid[:h, :w]
    shade = 1 - 0.35 * np.sqrt(((yy - cy) ** 2 + (xx - cx) ** 2)) / r
    base = np.array([0.78, 0.36, 0.16]) + rng.normal(0, 0.03, 3)
    img[fov] = (base[None] * shade[fov][:, None])
    side = 1 if rng.random() < 0.5 else -1
    dy, dx = cy + rng.uniform(-2, 2), cx + side * r * 0.45
    img[disk((h, w), dy, dx, r * 0.14)] = [0.98, 0.85, 0.55]  # optic disc
    for a in np.linspace(0.4, 2 * np.pi - 0.4, 5) + rng.uniform(-0.2, 0.2):  # vessels
        m = _line((h, w), dy, dx, dy + np.sin(a) * r * 0.9, dx - side * abs(np.cos(a)) * r * 0.9
                  if abs(a - np.pi) < 1.4 else dx + np.cos(a) * r * 0.9, 1.2) & fov
        img[m] = [0.55, 0.12, 0.08]
    inner = lambda: (cy + rng.uniform(-0.6, 0.6) * r, cx + rng.uniform(-0.6, 0.6) * r)  # noqa: E731
    n_ma = {0: 0, 1: int(rng.integers(2, 5)), 2: 6, 3: 8, 4: 8}[grade]
    for _ in range(n_ma):  # microaneurysms: tiny dark red dots
        y, x = inner()
        img[disk((h, w), y, x, 0.9)] = [0.45, 0.02, 0.02]
    if grade >= 2:  # hard exudates: yellow
        for _ in range(int(rng.integers(3, 7))):
            y, x = inner()
            img[disk((h, w), y, x, 1.1)] = [0.98, 0.92, 0.35]
    if grade >= 3:  # blot haemorrhages in all quadrants
        for qy in (-1, 1):
            for qx in (-1, 1):
                y, x = cy + qy * rng.uniform(0.2, 0.6) * r, cx + qx * rng.uniform(0.2, 0.6) * r
                img[disk((h, w), y, x, rng.uniform(2.0, 3.0))] = [0.35, 0.02, 0.02]
    if grade == 4:  # neovascularisation at the disc + preretinal haemorrhage
        for _ in range(6):
            a = rng.uniform(0, 2 * np.pi)
            m = _line((h, w), dy, dx, dy + 6 * np.sin(a), dx + 6 * np.cos(a), 0.8)
            img[m] = [0.7, 0.05, 0.1]
        y, x = cy + r * 0.5, cx - side * r * 0.1
        img[ellipse((h, w), y, x, 3, 6) & fov] = [0.4, 0.0, 0.0]
    img[fov] += rng.normal(0, 0.015, (fov.sum(), 3))
    img[~fov] = 0.0
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


def make_aptos2019(out_dir: Path, seed: int = 0) -> Path:
    """APTOS 2019 Blindness Detection (Kaggle competition 'aptos2019-blindness-detection'):
    train.csv (id_code,diagnosis with 0 No DR, 1 Mild, 2 Moderate, 3 Severe, 4 Proliferative
    DR), test.csv (id_code only), sample_submission.csv, train_images/<id_code>.png and
    test_images/<id_code>.png. id_code is 12 hex digits; fundus photos of varying size with
    black borders. No patient identifiers."""
    rng = rng_for(seed, "aptos2019")
    root = mkdir(Path(out_dir) / "aptos2019-blindness-detection")

    def new_id():
        return "".join(rng.choice(list("0123456789abcdef"), 12))

    train = []
    for g, n in APTOS_GRADES.items():
        for _ in range(n):
            cid = new_id()
            h = int(rng.integers(48, 64))
            w = int(h * rng.choice([1.0, 1.33, 1.5]))
            save_png(root / "train_images" / f"{cid}.png", _fundus(rng, g, h, w))
            train.append((cid, g))
    test = []
    for _ in range(15):
        cid = new_id()
        h = int(rng.integers(48, 64))
        save_png(root / "test_images" / f"{cid}.png",
                 _fundus(rng, int(rng.integers(0, 5)), h, int(h * 1.33)))
        test.append(cid)
    with open(root / "train.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id_code", "diagnosis"])
        w.writerows(sorted(train))
    with open(root / "test.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id_code"])
        w.writerows([[c] for c in sorted(test)])
    with open(root / "sample_submission.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id_code", "diagnosis"])
        w.writerows([[c, 0] for c in sorted(test)])
    return root


# ============================================================================ PadChest

PADCHEST_LABELS = ["cardiomegaly", "pleural effusion", "pneumonia", "nodule"]
_PC_CUI = {"normal": "C1550457", "cardiomegaly": "C0018800", "pleural effusion": "C0032227",
           "pneumonia": "C0032285", "nodule": "C0028259"}
_PC_LOC = {"pleural effusion": ["loc left", "loc right", "loc bilateral"],
           "pneumonia": ["loc right lower lobe", "loc left lower lobe", "loc middle lobe"],
           "nodule": ["loc right upper lobe", "loc left upper lobe"], "cardiomegaly": []}
_PC_LOC_CUI = {"loc left": "C0443246", "loc right": "C0444532", "loc bilateral": "C0238767",
               "loc right lower lobe": "C0225758", "loc left lower lobe": "C0225760",
               "loc middle lobe": "C0225757", "loc right upper lobe": "C0225756",
               "loc left upper lobe": "C0225759"}
_PC_ES = {"normal": "sin hallazgos radiologicos significativos",
          "cardiomegaly": "cardiomegalia",
          "pleural effusion": "derrame pleural {loc}",
          "pneumonia": "consolidacion en {loc} compatible con neumonia",
          "nodule": "nodulo pulmonar en {loc}"}
_PC_ES_LOC = {"loc left": "izquierdo", "loc right": "derecho", "loc bilateral": "bilateral",
              "loc right lower lobe": "lobulo inferior derecho",
              "loc left lower lobe": "lobulo inferior izquierdo",
              "loc middle lobe": "lobulo medio", "loc right upper lobe": "lobulo superior derecho",
              "loc left upper lobe": "lobulo superior izquierdo"}


def _padchest_image(rng, findings, locs, lateral, size=64):
    if lateral:
        img = np.full((size, size), 0.5, np.float32)
        img[ellipse((size, size), 30, 32, 22, 18)] = 0.25  # lungs superimposed
        img[ellipse((size, size), 40, 22, 9, 8)] = 0.6     # heart, anterior
        img[:, 50:56] = 0.75                               # spine, posterior
        img += rng.normal(0, 0.03, img.shape).astype(np.float32)
    else:
        img = chest_background(rng, size)
    heart = (ellipse((size, size), 42, 33, 11, 16) if "cardiomegaly" in findings
             else ellipse((size, size), 42, 33, 8, 9))
    if not lateral:
        img[heart] = np.maximum(img[heart], 0.7)
    for f, loc in zip(findings, locs):
        if f == "pleural effusion":
            sides = {"loc left": [0.70], "loc right": [0.30], "loc bilateral": [0.30, 0.70]}[loc]
            for s in sides:
                x0 = int(size * s - 9)
                for y in range(int(size * 0.70), int(size * 0.84)):  # meniscus
                    img[y, x0: x0 + 18] = 0.82
        elif f == "pneumonia":
            s = 0.70 if "left" in loc else 0.30
            m = ellipse((size, size), size * 0.62, size * s, 6, 5)
            img[m] = np.clip(img[m] + 0.35 + rng.normal(0, 0.05, m.sum()), 0, 1)
        elif f == "nodule":
            s = 0.70 if "left" in loc else 0.30
            img[disk((size, size), size * rng.uniform(0.30, 0.40), size * s, 2.2)] = 0.95
    return np.clip(img, 0, 1)


def make_padchest(out_dir: Path, seed: int = 0) -> Path:
    """PadChest (BIMCV, Bustos et al., Med Image Anal 2020): the label table
    PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv (ImageID, ImageDir, ..., PatientID,
    Projection, Report in Spanish, MethodLabel, Labels as a Python-style list string such as
    "['pleural effusion', 'cardiomegaly']", Localizations, LabelsLocalizationsBySentence,
    labelCUIS, LocalizationsCUIS) and 16-bit grayscale PNGs in numbered folders (<ImageDir>/,
    one per unzipped archive 0.zip..54.zip). PA/AP and lateral views; several studies per
    patient. Simplification: 3 image folders, 4 findings plus 'normal'."""
    rng = rng_for(seed, "padchest")
    root = mkdir(Path(out_dir) / "PadChest")
    header = ["ImageID", "ImageDir", "StudyDate_DICOM", "StudyID", "PatientID", "PatientBirth",
              "PatientSex_DICOM", "ViewPosition_DICOM", "Projection", "MethodProjection",
              "Pediatric", "Modality_DICOM", "Manufacturer_DICOM",
              "PhotometricInterpretation_DICOM", "PixelRepresentation_DICOM",
              "PixelAspectRatio_DICOM", "SpatialResolution_DICOM", "BitsStored_DICOM",
              "WindowCenter_DICOM", "WindowWidth_DICOM", "Rows_DICOM", "Columns_DICOM",
              "XRayTubeCurrent_DICOM", "Exposure_DICOM", "ExposureInuAs_DICOM", "ExposureTime",
              "RelativeXRayExposure_DICOM", "ReportID", "Report", "MethodLabel", "Labels",
              "Localizations", "LabelsLocalizationsBySentence", "labelCUIS", "LocalizationsCUIS"]
    rows = []

    def digits(n):
        return str(int(rng.integers(1, 10))) + "".join(str(int(d)) for d in rng.integers(0, 10, n - 1))

    def np_list(xs):  # numpy-array style, as the CUI columns are written
        return "[" + " ".join(f"'{x}'" for x in xs) + "]" if xs else "[]"

    for _p in range(32):
        pid = digits(36)
        birth = float(rng.integers(1925, 1990))
        sex = str(rng.choice(["M", "F"]))
        chronic = [f for f in ("cardiomegaly", "nodule") if rng.random() < 0.25]
        date = _dt.date(2009, 1, 1) + _dt.timedelta(days=int(rng.integers(0, 2900)))
        for _s in range(int(rng.choice([1, 2, 3], p=[0.55, 0.3, 0.15]))):
            date += _dt.timedelta(days=int(rng.integers(20, 400)))
            study = digits(38)
            findings = sorted(set(chronic) | {f for f in ("pleural effusion", "pneumonia")
                                              if rng.random() < 0.25})
            locs = [str(rng.choice(_PC_LOC[f])) if _PC_LOC[f] else "" for f in findings]
            labels = findings or ["normal"]
            views = ["PA", "L"] if rng.random() < 0.45 else [str(rng.choice(["PA", "AP"],
                                                                             p=[0.7, 0.3]))]
            sentences = ([[f] + ([lo] if lo else []) for f, lo in zip(findings, locs)]
                         or [["normal"]])
            report = " . ".join(_PC_ES[f].format(loc=_PC_ES_LOC.get(lo, ""))
                                for f, lo in zip(findings, locs)) if findings else _PC_ES["normal"]
            report += " ."
            loc_list = [lo for lo in locs if lo]
            for view in views:
                if rng.random() < 0.5:
                    image_id = f"{digits(45)}_{int(rng.integers(0, 10)):02d}-" \
                               f"{int(rng.integers(0, 200)):03d}-{int(rng.integers(0, 200)):03d}.png"
                else:
                    image_id = f"{study}_" + "".join(
                        rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789"), 6)) + ".png"
                img_dir = int(rng.integers(0, 3))
                arr = _padchest_image(rng, findings, locs, view == "L")
                a16 = (arr * 4095).round().astype(np.uint16)
                mkdir(root / str(img_dir))
                Image.fromarray(a16).save(root / str(img_dir) / image_id)
                vp = {"PA": "POSTEROANTERIOR", "AP": "ANTEROPOSTERIOR", "L": "LATERAL"}[view]
                manu = str(rng.choice(["PhilipsMedicalSystems", "ImagingDynamicsCompanyLtd"]))
                rows.append([
                    image_id, img_dir, date.strftime("%Y%m%d"), study, pid, birth, sex, vp, view,
                    "Manual review of DICOM fields", "No",
                    "CR" if manu.startswith("Philips") else "DX", manu, "MONOCHROME2", 0, "None",
                    0.139 if manu.startswith("Philips") else 0.1, 12, 2048.0, 4096.0,
                    int(rng.integers(2000, 3000)), int(rng.integers(2000, 3000)),
                    int(rng.integers(100, 500)), int(rng.integers(2, 20)),
                    int(rng.integers(2000, 20000)), int(rng.integers(5, 50)), "None",
                    digits(10), report, str(rng.choice(["Physician", "RNN_model"], p=[.27, .73])),
                    str(labels), str(loc_list), str(sentences),
                    np_list([_PC_CUI[x] for x in labels]),
                    np_list([_PC_LOC_CUI[x] for x in loc_list])])
    order = rng.permutation(len(rows))
    with open(root / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", "w",
              newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows([rows[i] for i in order])
    return root


# ============================================================================ SIIM-ACR

def siim_mask2rle(mask: np.ndarray) -> str:
    """The SIIM-ACR 'mask_functions.py' encoding: pixels run column-major (the mask is
    transposed before flattening), each run is '<start> <length>' where start is counted from
    the end of the previous run (relative), not from the image origin."""
    flat = (mask.T.reshape(-1) > 0).astype(np.int8)
    diff = np.diff(np.concatenate([[0], flat, [0]]))
    starts = np.nonzero(diff == 1)[0]
    ends = np.nonzero(diff == -1)[0]
    out, prev_end = [], 0
    for s, e in zip(starts, ends):
        out += [str(int(s - prev_end)), str(int(e - s))]
        prev_end = e
    return " ".join(out)


def make_siim_acr_ptx(out_dir: Path, seed: int = 0) -> Path:
    """SIIM-ACR Pneumothorax Segmentation (Kaggle 2019, stage 1 data as downloaded with the
    competition's GCP script and mirrored on Kaggle): dicom-images-train/<StudyInstanceUID>/
    <SeriesInstanceUID>/<SOPInstanceUID>.dcm, dicom-images-test/ (unlabelled) and
    train-rle.csv with the header 'ImageId, EncodedPixels' (note the space), ImageId =
    SOPInstanceUID, ' -1' for no pneumothorax, one row per pneumothorax otherwise, in the
    competition's relative column-major RLE. Simplification: pixel data is written
    uncompressed (the originals are JPEG baseline)."""
    rng = rng_for(seed, "siim_acr_ptx")
    root = mkdir(Path(out_dir) / "siim")
    size = 64
    org = "1.2.276.0.7230010.3.1"
    rows = []

    def uids():
        n = int(rng.integers(1000, 14000))
        ts = int(rng.integers(1517875000, 1517876000))
        frac = int(rng.integers(100000, 999999))
        return (f"{org}.2.8323329.{n}.{ts}.{frac}", f"{org}.3.8323329.{n}.{ts}.{frac - 1}",
                f"{org}.4.8323329.{n}.{ts}.{frac + 1}")

    def one(folder, positive):
        img = chest_background(rng, size)
        masks = []
        if positive:
            sides = [0.30, 0.70] if rng.random() < 0.15 else [float(rng.choice([0.30, 0.70]))]
            for s in sides:
                lung = ellipse((size, size), size * 0.52, size * s, size * 0.30, size * 0.16)
                cy = size * rng.uniform(0.26, 0.40)
                cx = size * (s + (-0.08 if s < 0.5 else 0.08))
                ptx = ellipse((size, size), cy, cx, rng.uniform(6, 11), rng.uniform(3, 6)) & lung
                img[ptx] = 0.05  # no lung markings
                edge = ptx & ~np.roll(ptx, 1 if s < 0.5 else -1, axis=1)
                img[np.roll(edge, 1 if s < 0.5 else -1, axis=1)] = 0.85  # visceral pleural line
                masks.append(ptx)
        img += rng.normal(0, 0.01, img.shape).astype(np.float32)
        st, se, sop = uids()
        save_dicom_cr(root / folder / st / se / f"{sop}.dcm", to_u8(img), patient_id=_uuid(rng),
                      study_uid=st, series_uid=se, sop_uid=sop, sex=str(rng.choice(["M", "F"])),
                      age=str(int(rng.integers(18, 85))), view=str(rng.choice(["PA", "AP"])))
        return sop, masks

    for i in range(72):
        sop, masks = one("dicom-images-train", positive=rng.random() < 0.38)
        if not masks:
            rows.append(f"{sop}, -1")
        for m in masks:
            rows.append(f"{sop}, {siim_mask2rle(m.astype(np.uint8) * 255)}")
    for _ in range(10):
        one("dicom-images-test", positive=rng.random() < 0.3)
    order = rng.permutation(len(rows))
    (root / "train-rle.csv").write_text("ImageId, EncodedPixels\n" +
                                        "\n".join(rows[i] for i in order) + "\n")
    return root


__all__ = ["make_aptos2019", "make_kermany_pneumonia", "make_padchest", "make_siim_acr_ptx",
           "siim_mask2rle", "APTOS_GRADES", "PADCHEST_LABELS"]
