"""2D generators: NIH ChestX-ray14, RSNA Pneumonia Detection, Montgomery County TB,
HAM10000, BUSI and ROCO. Each writes a small folder in the layout the public dataset ships in
(see ``cases.py`` for the documentation each follows) and returns the dataset root."""
from __future__ import annotations

import csv
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from .common import (chest_background, disk, ellipse, mkdir, rng_for, save_dicom_cr, save_jpg,
                     save_png, to_u8, uid)

# ============================================================================ NIH ChestX-ray14

NIH_FINDINGS = ["Atelectasis", "Cardiomegaly", "Effusion", "Nodule"]


def _draw_cxr_findings(rng, findings, size=64):
    img = chest_background(rng, size)
    boxes = {}
    if "Cardiomegaly" in findings:
        m = ellipse(img.shape, size * 0.66, size * 0.52, size * 0.16, size * 0.24)
    else:
        m = ellipse(img.shape, size * 0.66, size * 0.52, size * 0.12, size * 0.12)
    img[m] = np.maximum(img[m], 0.7)
    ys, xs = np.nonzero(m)
    boxes["Cardiomegaly"] = (xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)
    if "Effusion" in findings:
        side = rng.integers(0, 2)
        x0 = int(size * (0.16 if side == 0 else 0.56))
        img[int(size * 0.70): int(size * 0.82), x0: x0 + int(size * 0.28)] = 0.8
    if "Nodule" in findings:
        cy = rng.uniform(0.32, 0.55) * size
        cx = (rng.choice([0.28, 0.72]) + rng.uniform(-0.05, 0.05)) * size
        r = rng.uniform(2.5, 3.5)
        img[disk(img.shape, cy, cx, r)] = 0.95
        boxes["Nodule"] = (cx - r, cy - r, 2 * r, 2 * r)
    if "Atelectasis" in findings:
        y = int(rng.uniform(0.30, 0.42) * size)
        x0 = int(size * (0.16 if rng.integers(0, 2) == 0 else 0.58))
        img[y: y + 3, x0: x0 + int(size * 0.26)] = 0.75
    return to_u8(img), boxes


def make_nih_cxr14(out_dir: Path, seed: int = 0) -> Path:
    """NIH ChestX-ray14 as on Kaggle (nih-chest-xrays/data): images_00N/images/*.png,
    Data_Entry_2017.csv ('Finding Labels' joined by '|', 'No Finding' for none),
    BBox_List_2017.csv, train_val_list.txt / test_list.txt (patient-wise official split)."""
    rng = rng_for(seed, "nih_cxr14")
    root = mkdir(Path(out_dir) / "nih-chest-xrays")
    rows, bbox_rows, test_names, trainval_names = [], [], [], []
    n_patients = 40
    pids = sorted(rng.choice(np.arange(1, 30000), n_patients, replace=False))
    for k, pid in enumerate(pids):
        n_img = int(rng.choice([1, 2, 3, 4], p=[0.35, 0.3, 0.2, 0.15]))
        age = int(rng.integers(18, 85))
        sex = str(rng.choice(["M", "F"]))
        is_test = k % 5 == 4
        chronic = [f for f in NIH_FINDINGS if rng.random() < 0.22]
        for fu in range(n_img):
            findings = sorted({f for f in chronic if rng.random() < 0.8}
                              | {f for f in NIH_FINDINGS if rng.random() < 0.08})
            name = f"{pid:08d}_{fu:03d}.png"
            img, boxes = _draw_cxr_findings(rng, findings)
            folder = "images_001" if k < n_patients // 2 else "images_002"
            save_png(root / folder / "images" / name, img)
            view = str(rng.choice(["PA", "AP"], p=[0.6, 0.4]))
            w, h = (int(rng.choice([2500, 2992, 3056])), int(rng.choice([2048, 2991, 2544])))
            rows.append([name, "|".join(findings) if findings else "No Finding", fu, pid,
                         age + fu // 2, sex, view, w, h, 0.143, 0.143])
            (test_names if is_test else trainval_names).append(name)
            for f in findings:
                if f in ("Nodule", "Cardiomegaly") and len(bbox_rows) < 8 and rng.random() < 0.5:
                    x, y, bw, bh = boxes[f]
                    bbox_rows.append([name, f, float(x), float(y), float(bw), float(bh)])
    # The published header is unquoted, so 'OriginalImage[Width,Height]' spans two columns,
    # and every row ends in a trailing comma.
    with open(root / "Data_Entry_2017.csv", "w", newline="") as fh:
        fh.write("Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,"
                 "View Position,OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],\n")
        for r in rows:
            fh.write(",".join(str(v) for v in r) + ",\n")
    with open(root / "BBox_List_2017.csv", "w", newline="") as fh:
        fh.write("Image Index,Finding Label,Bbox [x,y,w,h],,,\n")
        for r in bbox_rows:
            fh.write(",".join(str(v) for v in r) + ",,,\n")
    (root / "train_val_list.txt").write_text("\n".join(trainval_names) + "\n")
    (root / "test_list.txt").write_text("\n".join(test_names) + "\n")
    return root


# ============================================================================ RSNA Pneumonia

def make_rsna_pneumonia(out_dir: Path, seed: int = 0) -> Path:
    """RSNA Pneumonia Detection Challenge (Kaggle, stage 2): stage_2_train_images/<patientId>.dcm,
    stage_2_train_labels.csv (patientId,x,y,width,height,Target; one row per box, empty box
    for Target 0), stage_2_detailed_class_info.csv (patientId,class), unlabelled
    stage_2_test_images/ and stage_2_sample_submission.csv."""
    rng = rng_for(seed, "rsna_pneumonia")
    root = mkdir(Path(out_dir) / "rsna-pneumonia-detection-challenge")
    size = 64
    label_rows, class_rows = [], []
    kinds = ["Lung Opacity"] * 32 + ["Normal"] * 24 + ["No Lung Opacity / Not Normal"] * 24
    rng.shuffle(kinds)

    def one(pid: str, kind: str, folder: str):
        img = chest_background(rng, size)
        boxes = []
        if kind == "Lung Opacity":
            for _ in range(int(rng.choice([1, 2], p=[0.55, 0.45]))):
                side = 0.30 if not boxes else 0.70
                if not boxes and rng.random() < 0.5:
                    side = 0.70
                cy, cx = rng.uniform(0.40, 0.62) * size, (side + rng.uniform(-0.03, 0.03)) * size
                ry, rx = rng.uniform(6, 9), rng.uniform(4, 6)
                m = ellipse(img.shape, cy, cx, ry, rx)
                img[m] = np.clip(img[m] + 0.38 + rng.normal(0, 0.04, m.sum()), 0, 1)
                ys, xs = np.nonzero(m)
                boxes.append((float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1),
                              float(ys.max() - ys.min() + 1)))
        elif kind == "No Lung Opacity / Not Normal":
            # something abnormal but not an opacity: a tube line / widened mediastinum
            x = int(size * 0.5 + rng.integers(-2, 3))
            img[4: int(size * 0.6), x: x + 1] = 1.0
        study, series = uid("1.2.276.0.7230010.3.1.2", rng), uid("1.2.276.0.7230010.3.1.3", rng)
        save_dicom_cr(root / folder / f"{pid}.dcm", to_u8(img), patient_id=pid, study_uid=study,
                      series_uid=series, sop_uid=uid("1.2.276.0.7230010.3.1.4", rng),
                      sex=str(rng.choice(["M", "F"])), age=str(int(rng.integers(20, 80))),
                      view=str(rng.choice(["PA", "AP"])))
        return boxes

    for kind in kinds:
        pid = str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63))))
        boxes = one(pid, kind, "stage_2_train_images")
        if boxes:
            for b in boxes:
                label_rows.append([pid, *b, 1])
                class_rows.append([pid, kind])
        else:
            label_rows.append([pid, "", "", "", "", 0])
            class_rows.append([pid, kind])
    test_ids = []
    for _ in range(10):
        pid = str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63))))
        one(pid, str(rng.choice(["Lung Opacity", "Normal"])), "stage_2_test_images")
        test_ids.append(pid)
    with open(root / "stage_2_train_labels.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["patientId", "x", "y", "width", "height", "Target"])
        w.writerows(label_rows)
    with open(root / "stage_2_detailed_class_info.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["patientId", "class"])
        w.writerows(class_rows)
    with open(root / "stage_2_sample_submission.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["patientId", "PredictionString"])
        w.writerows([[p, "0.5 0 0 100 100"] for p in test_ids])
    return root


# ============================================================================ Montgomery TB

def make_montgomery_tb(out_dir: Path, seed: int = 0) -> Path:
    """NLM Montgomery County chest X-ray set: MontgomerySet/CXR_png/MCUCXR_####_L.png (L = 0
    normal, 1 tuberculosis), ClinicalReadings/<same stem>.txt (sex, age, reading),
    ManualMask/leftMask/ and ManualMask/rightMask/ lung masks (0/255 PNG)."""
    rng = rng_for(seed, "montgomery_tb")
    root = mkdir(Path(out_dir) / "MontgomerySet")
    size = 64
    labels = [0] * 34 + [1] * 26
    rng.shuffle(labels)
    numbers = sorted(rng.choice(np.arange(1, 400), len(labels), replace=False))
    tb_readings = ["right upper lobe infiltrate with cavitation, TB",
                   "bilateral upper lobe fibronodular opacities, active TB",
                   "left apical cavity and infiltrate, consistent with tuberculosis",
                   "Calcified granuloma right upper zone; patchy infiltrate, TB positive"]
    for num, lab in zip(numbers, labels):
        stem = f"MCUCXR_{num:04d}_{lab}"
        img = chest_background(rng, size)
        left = ellipse(img.shape, size * 0.52, size * 0.30, size * 0.30, size * 0.16)
        right = ellipse(img.shape, size * 0.52, size * 0.70, size * 0.30, size * 0.16)
        if lab == 1:
            for _ in range(int(rng.integers(1, 3))):
                cx = (rng.choice([0.30, 0.70]) + rng.uniform(-0.04, 0.04)) * size
                cy = rng.uniform(0.28, 0.40) * size
                m = ellipse(img.shape, cy, cx, rng.uniform(4, 7), rng.uniform(4, 6))
                img[m] = np.clip(img[m] + 0.3 + rng.normal(0, 0.08, m.sum()), 0, 1)
                img[disk(img.shape, cy, cx, 1.6)] = 0.15  # cavity
        save_png(root / "CXR_png" / f"{stem}.png", to_u8(img))
        save_png(root / "ManualMask" / "leftMask" / f"{stem}.png", (left * 255).astype(np.uint8))
        save_png(root / "ManualMask" / "rightMask" / f"{stem}.png", (right * 255).astype(np.uint8))
        sex = str(rng.choice(["M", "F"]))
        age = int(rng.integers(10, 80))
        reading = "normal" if lab == 0 else str(rng.choice(tb_readings))
        (mkdir(root / "ClinicalReadings") / f"{stem}.txt").write_text(
            f"Patient's Sex: {sex}\nPatient's Age: {age:03d}Y\n\n{reading}\n")
    return root


# ============================================================================ HAM10000

HAM_DX = {"nv": 38, "mel": 16, "bkl": 15, "bcc": 12, "akiec": 10, "vasc": 8, "df": 8}
HAM_SITES = ["back", "lower extremity", "trunk", "upper extremity", "abdomen", "face", "chest",
             "foot", "scalp", "neck", "hand", "ear", "unknown"]


def _draw_lesion(rng, dx, w=64, h=48):
    skin = np.array([0.86, 0.68, 0.58]) + rng.normal(0, 0.03, 3)
    img = np.ones((h, w, 3)) * skin + rng.normal(0, 0.02, (h, w, 3))
    cy, cx = h / 2 + rng.uniform(-3, 3), w / 2 + rng.uniform(-4, 4)
    if dx == "nv":  # round, even brown
        m = ellipse((h, w), cy, cx, rng.uniform(9, 12), rng.uniform(9, 12))
        img[m] = [0.52, 0.33, 0.22]
    elif dx == "mel":  # large, irregular, dark with blue-black patches
        m = np.zeros((h, w), bool)
        for _ in range(4):
            m |= ellipse((h, w), cy + rng.uniform(-5, 5), cx + rng.uniform(-7, 7),
                         rng.uniform(6, 10), rng.uniform(6, 12))
        img[m] = [0.25, 0.15, 0.12]
        img[m & (rng.random((h, w)) < 0.3)] = [0.2, 0.22, 0.38]
    elif dx == "bkl":  # light brown, waxy, speckled
        m = ellipse((h, w), cy, cx, rng.uniform(8, 11), rng.uniform(10, 14))
        img[m] = [0.70, 0.52, 0.38]
        img[m & (rng.random((h, w)) < 0.25)] = [0.55, 0.40, 0.30]
    elif dx == "bcc":  # pink, pearly with fine vessels
        m = ellipse((h, w), cy, cx, rng.uniform(8, 11), rng.uniform(8, 11))
        img[m] = [0.93, 0.62, 0.66]
        for _ in range(3):
            y = int(cy + rng.uniform(-6, 6))
            img[y, int(cx - 6): int(cx + 6)] = [0.75, 0.15, 0.2]
    elif dx == "akiec":  # red scaly patch
        m = ellipse((h, w), cy, cx, rng.uniform(8, 12), rng.uniform(10, 14))
        img[m] = [0.85, 0.40, 0.35]
        img[m & (rng.random((h, w)) < 0.35)] = [0.95, 0.9, 0.85]
    elif dx == "vasc":  # small purple-red round
        m = ellipse((h, w), cy, cx, rng.uniform(5, 7), rng.uniform(5, 7))
        img[m] = [0.6, 0.1, 0.3]
    elif dx == "df":  # brown ring, white centre
        m = ellipse((h, w), cy, cx, rng.uniform(8, 10), rng.uniform(8, 10))
        img[m] = [0.6, 0.42, 0.32]
        img[ellipse((h, w), cy, cx, 3.5, 3.5)] = [0.95, 0.92, 0.9]
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def make_ham10000(out_dir: Path, seed: int = 0) -> Path:
    """HAM10000 as on Harvard Dataverse / Kaggle (skin-cancer-mnist-ham10000):
    HAM10000_metadata.csv (lesion_id,image_id,dx,dx_type,age,sex,localization),
    HAM10000_images_part_1/ and _part_2/ with ISIC_#######.jpg, plus Kaggle's hmnist_8_8_L.csv
    (pixels + label code) that ships beside them. Several images per lesion."""
    rng = rng_for(seed, "ham10000")
    root = mkdir(Path(out_dir) / "skin-cancer-mnist-ham10000")
    rows, hm_rows = [], []
    img_ids = iter(sorted(rng.choice(np.arange(24306, 34321), 200, replace=False)))
    les_ids = iter(sorted(rng.choice(np.arange(0, 7500), 200, replace=False)))
    hm_code = {"akiec": 0, "bcc": 1, "bkl": 2, "df": 3, "nv": 4, "vasc": 5, "mel": 6}
    for dx, n_images in HAM_DX.items():
        left = n_images
        while left > 0:
            k = min(left, int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2])))
            left -= k
            lesion = f"HAM_{next(les_ids):07d}"
            dx_type = ("histo" if dx in ("mel", "bcc", "akiec") else
                       str(rng.choice(["follow_up", "consensus", "histo", "confocal"],
                                      p=[0.5, 0.3, 0.15, 0.05])))
            age = float(rng.integers(1, 18) * 5)
            sex = str(rng.choice(["male", "female"], p=[0.54, 0.46]))
            site = str(rng.choice(HAM_SITES))
            for _ in range(k):
                iid = f"ISIC_{next(img_ids):07d}"
                img = _draw_lesion(rng, dx)
                part = "HAM10000_images_part_1" if int(iid[5:]) < 29306 else "HAM10000_images_part_2"
                save_jpg(root / part / f"{iid}.jpg", img)
                rows.append([lesion, iid, dx, dx_type, age, sex, site])
                small = np.asarray(Image.fromarray(img).convert("L").resize((8, 8))).ravel()
                hm_rows.append([*small.tolist(), hm_code[dx]])
    order = rng.permutation(len(rows))
    with open(root / "HAM10000_metadata.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization"])
        w.writerows([rows[i] for i in order])
    with open(root / "hmnist_8_8_L.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"pixel{i:04d}" for i in range(64)] + ["label"])
        w.writerows([hm_rows[i] for i in order])
    return root


# ============================================================================ BUSI

def make_busi(out_dir: Path, seed: int = 0) -> Path:
    """Breast Ultrasound Images Dataset (Al-Dhabyani et al. 2020, Kaggle
    'breast-ultrasound-images-dataset'): Dataset_BUSI_with_GT/{benign,malignant,normal}/
    '<class> (N).png' with '<class> (N)_mask.png' (and '_mask_1.png' for a second lesion);
    normal images have all-black masks. No patient identifiers."""
    rng = rng_for(seed, "busi")
    root = mkdir(Path(out_dir) / "Dataset_BUSI_with_GT")
    for cls, n in (("benign", 40), ("malignant", 25), ("normal", 20)):
        for i in range(1, n + 1):
            h, w = int(rng.integers(56, 72)), int(rng.integers(60, 80))
            img = 0.45 + 0.18 * rng.standard_normal((h, w))
            img[: int(h * 0.2)] += 0.15  # bright skin/subcutis layer
            masks = []
            if cls != "normal":
                for j in range(2 if (cls == "benign" and rng.random() < 0.1) else 1):
                    cy, cx = rng.uniform(0.4, 0.7) * h, rng.uniform(0.3, 0.7) * w
                    if cls == "benign":  # smooth, wider-than-tall, hypoechoic
                        m = ellipse((h, w), cy, cx, rng.uniform(5, 8), rng.uniform(9, 13))
                    else:  # irregular, taller-than-wide, posterior shadow
                        m = ellipse((h, w), cy, cx, rng.uniform(8, 11), rng.uniform(6, 8))
                        for _ in range(6):
                            a = rng.uniform(0, 2 * np.pi)
                            m |= disk((h, w), cy + 9 * np.sin(a), cx + 8 * np.cos(a), 2.2)
                        ys, xs = np.nonzero(m)
                        img[ys.max():, xs.min(): xs.max()] *= 0.5
                    img[m] = 0.08 + 0.05 * rng.standard_normal(m.sum())
                    masks.append(m)
            rgb = np.repeat(to_u8(img)[..., None], 3, axis=2)
            base = root / cls / f"{cls} ({i})"
            save_png(base.with_name(base.name + ".png"), rgb)
            if not masks:
                masks = [np.zeros((h, w), bool)]
            for j, m in enumerate(masks):
                suffix = "_mask.png" if j == 0 else f"_mask_{j}.png"
                save_png(base.with_name(base.name + suffix), (m * 255).astype(np.uint8))
    return root


# ============================================================================ ROCO

ROCO_MODALITIES = {
    "ct": ["Axial computed tomography scan of the {site} showing {finding}.",
           "Contrast-enhanced CT of the {site} demonstrating {finding}."],
    "xray": ["Anteroposterior radiograph of the {site} showing {finding}.",
             "Plain X-ray of the {site} revealing {finding}."],
    "mri": ["Axial T2-weighted MRI of the {site} showing {finding}.",
            "Magnetic resonance imaging of the {site} demonstrates {finding}."],
    "us": ["Ultrasound of the {site} showing {finding}.",
           "Transabdominal ultrasound image of the {site} with {finding}."],
}
ROCO_SITES = {"ct": ["chest", "abdomen", "pelvis"], "xray": ["chest", "knee", "hip"],
              "mri": ["brain", "spine", "knee"], "us": ["liver", "kidney", "thyroid"]}


def _draw_roco(rng, modality, abnormal, size=64):
    if modality == "ct":
        img = np.zeros((size, size)) + 0.05
        img[ellipse((size, size), 32, 32, 24, 28)] = 0.45
        img[ellipse((size, size), 32, 32, 20, 24)] = 0.35
    elif modality == "xray":
        img = np.zeros((size, size)) + 0.15
        img[:, 20:44] = 0.55
        img[28:36, :] = 0.75
    elif modality == "mri":
        img = np.zeros((size, size))
        img[ellipse((size, size), 32, 32, 26, 22)] = 0.6
        img[ellipse((size, size), 32, 32, 8, 6)] = 0.9
    else:  # ultrasound fan
        yy, xx = np.mgrid[:size, :size]
        ang = np.abs(np.arctan2(xx - 32, yy + 4))
        img = np.where(ang < 0.6, 0.35 + 0.15 * rng.standard_normal((size, size)), 0.0)
    if abnormal:
        cy, cx = rng.uniform(22, 42), rng.uniform(22, 42)
        img[disk((size, size), cy, cx, rng.uniform(4, 6))] = 1.0 if modality != "us" else 0.02
    img = img + rng.normal(0, 0.02, img.shape)
    return to_u8(img)


def make_roco(out_dir: Path, seed: int = 0) -> Path:
    """ROCO (Radiology Objects in COntext, Pelka et al. 2018; github.com/razorx89/roco-dataset):
    data/{train,validation,test}/radiology/ with images/ROCO_#####.jpg, captions.txt
    ('ROCO_#####<TAB> caption'), keywords.txt, semtypes.txt, cuis.txt, dlinks.txt, licences.txt."""
    rng = rng_for(seed, "roco")
    root = mkdir(Path(out_dir) / "roco-dataset")
    ids = iter(sorted(rng.choice(np.arange(1, 81000), 200, replace=False)))
    findings_abn = ["a well-defined mass (arrow)", "a focal lesion", "a rounded nodule (arrowhead)"]
    findings_norm = ["no abnormality", "normal appearance", "no focal lesion"]
    for split, n in (("train", 60), ("validation", 15), ("test", 15)):
        d = mkdir(root / "data" / split / "radiology")
        caps, kws, sems, cuis, links, lic = [], [], [], [], [], []
        for _ in range(n):
            rid = f"ROCO_{next(ids):05d}"
            mod = str(rng.choice(list(ROCO_MODALITIES)))
            abnormal = bool(rng.random() < 0.55)
            site = str(rng.choice(ROCO_SITES[mod]))
            finding = str(rng.choice(findings_abn if abnormal else findings_norm))
            cap = str(rng.choice(ROCO_MODALITIES[mod])).format(site=site, finding=finding)
            save_jpg(d / "images" / f"{rid}.jpg", _draw_roco(rng, mod, abnormal))
            caps.append(f"{rid}\t {cap}")
            kws.append(f"{rid}\t" + "\t".join([mod, site] + (["mass"] if abnormal else [])))
            sems.append(f"{rid}\tT060\tT029")
            cuis.append(f"{rid}\tC0040405\tC0817096")
            pmc = f"PMC{int(rng.integers(1000000, 6000000))}"
            links.append(f"{rid}\t wget ftp://ftp.ncbi.nlm.nih.gov/pub/pmc/{pmc}.tar.gz\t"
                         f"{pmc}_{rid.lower()}.jpg")
            lic.append(f"{rid}\tCC BY")
        for name, lines in (("captions.txt", caps), ("keywords.txt", kws),
                            ("semtypes.txt", sems), ("cuis.txt", cuis), ("dlinks.txt", links),
                            ("licences.txt", lic)):
            (d / name).write_text("\n".join(lines) + "\n")
    return root
