"""Batch 4, more 2D generators: IDRiD (segmentation part), HC18 and BCCD (see ``batch4.py`` for
the documentation each follows). Each writes a small folder in the layout the public dataset
ships in and returns the dataset root. Written from the datasets' public documentation only;
no code of the app is imported."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from .batch4_common import seg_line
from .common import disk, ellipse, mkdir, rng_for, save_jpg, save_png, to_u8

# ============================================================================ IDRiD

IDRID_LESIONS = {  # folder, file suffix, class name
    "MA": ("1. Microaneurysms", "microaneurysms"),
    "HE": ("2. Haemorrhages", "haemorrhages"),
    "EX": ("3. Hard Exudates", "hard exudates"),
    "SE": ("4. Soft Exudates", "soft exudates"),
    "OD": ("5. Optic Disc", "optic disc"),
}


def _idrid_fundus(rng, h=43, w=64):
    """A fundus photo cropped top and bottom like IDRiD's 4288x2848 frames, with its masks:
    microaneurysms (single dark-red dots), haemorrhages (dark-red blots), hard exudates (small
    bright-yellow flecks), soft exudates (pale fluffy patches, about half the images), optic
    disc (bright ellipse)."""
    yy, xx = np.mgrid[:h, :w]
    fov = (yy - h / 2) ** 2 + (xx - w / 2) ** 2 <= (w * 0.46) ** 2
    img = np.zeros((h, w, 3)) + np.array([0.75, 0.33, 0.12])
    img *= (1 - 0.35 * np.hypot((yy - h / 2) / h, (xx - w / 2) / w))[..., None]
    right = bool(rng.random() < 0.5)
    odx, ody = (w * 0.72 if right else w * 0.28), h / 2 + rng.normal(0, 1.5)
    mac = disk((h, w), h / 2, w - odx, 3.5)
    img[mac] *= 0.7
    for a in (-0.9, -0.4, 0.4, 0.9):  # vessel arcades
        tx = w / 2 + (w * 0.25 if not right else -w * 0.25)
        img[seg_line((h, w), ody, odx, ody + np.sin(a) * h * 0.5, tx, 1.0)] = [0.5, 0.1, 0.05]
    masks = {k: np.zeros((h, w), bool) for k in IDRID_LESIONS}
    masks["OD"] = ellipse((h, w), ody, odx, 4.5, 4.0)
    img[masks["OD"]] = [0.98, 0.9, 0.55]
    away = fov & ~ellipse((h, w), ody, odx, 7, 7)
    cand = np.argwhere(away)

    def spot(k, r, colour, n):
        for y, x in cand[rng.choice(len(cand), n, replace=False)]:
            m = disk((h, w), y, x, r) & fov if r > 0.6 else (yy == y) & (xx == x)
            masks[k] |= m
            img[m] = colour

    spot("MA", 0.5, [0.45, 0.04, 0.03], int(rng.integers(3, 9)))
    n_he = 0 if rng.random() < 0.04 else int(rng.integers(1, 5))
    if n_he:
        spot("HE", rng.uniform(1.2, 2.2), [0.38, 0.03, 0.02], n_he)
    spot("EX", 1.0, [1.0, 0.92, 0.3], int(rng.integers(2, 7)))
    if rng.random() < 0.5:
        spot("SE", 2.2, [0.93, 0.86, 0.74], int(rng.integers(1, 3)))
    img += rng.normal(0, 0.015, img.shape)
    img *= fov[..., None]
    return to_u8(img), masks


def make_idrid_seg(out_dir: Path, seed: int = 0) -> Path:
    """IDRiD, part A. Segmentation (Porwal et al., Data 3(3):25, 2018 and Med Image Anal
    59:101561, 2020; IEEE DataPort doi:10.21227/H25W98; idrid.grand-challenge.org): 'A.
    Segmentation/1. Original Images/{a. Training Set,b. Testing Set}/IDRiD_NN.jpg' (training
    01-54, testing 55-81) and '2. All Segmentation Groundtruths/{a. Training Set,b. Testing
    Set}/{1. Microaneurysms,2. Haemorrhages,3. Hard Exudates,4. Soft Exudates,5. Optic
    Disc}/IDRiD_NN_{MA,HE,EX,SE,OD}.tif', one binary mask per lesion type and image, drawn in
    red (RGB TIFF, lesion = (255, 0, 0), so 76 when read as grey); a mask file is missing when
    the image has no such lesion (soft exudates in about half the images, haemorrhages in one);
    CC-BY-4.0.txt and LICENSE.txt beside the folders. Simplifications: 64x43 images (the
    originals are 4288x2848), 30 training and 15 testing images (IDRiD_01-30 and 55-69)."""
    rng = rng_for(seed, "idrid_seg")
    root = mkdir(Path(out_dir) / "A. Segmentation")
    for split, nums in (("a. Training Set", range(1, 31)), ("b. Testing Set", range(55, 70))):
        for n in nums:
            img, masks = _idrid_fundus(rng)
            save_jpg(root / "1. Original Images" / split / f"IDRiD_{n:02d}.jpg", img)
            for k, (folder, _name) in IDRID_LESIONS.items():
                if not masks[k].any():
                    continue
                rgb = np.zeros(masks[k].shape + (3,), np.uint8)
                rgb[masks[k], 0] = 255
                d = mkdir(root / "2. All Segmentation Groundtruths" / split / folder)
                Image.fromarray(rgb).save(d / f"IDRiD_{n:02d}_{k}.tif")
    lic = ("This work is licensed under the Creative Commons Attribution 4.0 International "
           "License. To view a copy of this license, visit http://creativecommons.org/licenses/"
           "by/4.0/.\n\nIndian Diabetic Retinopathy Image Dataset (IDRiD). Prasanna Porwal, "
           "Samiksha Pachade, Manesh Kokare. IEEE Dataport, 2018.\n")
    (root / "CC-BY-4.0.txt").write_text(lic)
    (root / "LICENSE.txt").write_text(lic)
    return root


# ============================================================================ HC18


def _hc18_frame(rng, h=43, w=64):
    """A fetal-head ultrasound frame: speckle in a sector, a bright skull ellipse with a
    midline echo; returns the image, the one-pixel ellipse outline and the semi-axes."""
    yy, xx = np.mgrid[:h, :w]
    cy, cx = h / 2 + rng.normal(0, 2), w / 2 + rng.normal(0, 4)
    a = min(rng.uniform(9, 19), w / 2 - 3)
    b = min(a * rng.uniform(0.72, 0.88), h / 2 - 2)
    th = rng.uniform(-0.6, 0.6)
    u = (xx - cx) * np.cos(th) + (yy - cy) * np.sin(th)
    v = -(xx - cx) * np.sin(th) + (yy - cy) * np.cos(th)
    r = np.sqrt((u / a) ** 2 + (v / b) ** 2)
    sector = np.abs(np.arctan2(xx - w / 2, yy + h * 0.6)) < 0.75
    img = sector * rng.gamma(2.0, 0.08, (h, w))
    img[r < 1] = 0.18 + rng.gamma(2.0, 0.04, (r < 1).sum())
    skull = np.abs(r - 1) < 1.2 / min(a, b)
    img[skull] = 0.9
    img[(np.abs(v) < 0.6) & (r < 0.8)] = 0.6  # midline echo
    filled = r <= 1
    inner = np.zeros_like(filled)
    inner[1:-1, 1:-1] = (filled[1:-1, 1:-1] & filled[:-2, 1:-1] & filled[2:, 1:-1]
                         & filled[1:-1, :-2] & filled[1:-1, 2:])
    outline = filled & ~inner
    return to_u8(np.clip(img, 0, 1)), outline, a, b


def make_hc18(out_dir: Path, seed: int = 0) -> Path:
    """HC18, automated measurement of fetal head circumference (van den Heuvel et al., PLoS ONE
    13(8):e0200412, 2018; hc18.grand-challenge.org; Zenodo doi:10.5281/zenodo.1327317):
    training_set/NNN_HC.png (2D ultrasound of the standard plane, 800x540) with
    NNN_HC_Annotation.png (the head's ellipse drawn as a thin white outline on black, not a
    filled mask), a second or third image of a subject as NNN_2HC.png / NNN_3HC.png (+
    _Annotation), training_set_pixel_size_and_HC.csv ('filename,pixel size(mm),head
    circumference (mm)'); test_set/NNN_HC.png without annotations (numbered from 000 again,
    so file names repeat across the two folders) and test_set_pixel_size.csv ('filename,pixel
    size(mm)'). Simplifications: 64x43 frames (pixel sizes scaled to match), 42 subjects with
    49 annotated images, 10 test images."""
    rng = rng_for(seed, "hc18")
    root = mkdir(Path(out_dir) / "HC18")
    rows = []
    for n in range(42):
        for k in range(1, {24: 3, 7: 2, 11: 2, 19: 2, 28: 2, 33: 2}.get(n, 1) + 1):
            stem = f"{n:03d}_HC" if k == 1 else f"{n:03d}_{k}HC"
            img, outline, a, b = _hc18_frame(rng)
            perim = np.pi * (3 * (a + b) - np.sqrt((3 * a + b) * (a + 3 * b)))
            hc = rng.uniform(50, 340)
            px = hc / perim
            save_png(root / "training_set" / f"{stem}.png", img)
            save_png(root / "training_set" / f"{stem}_Annotation.png",
                     (outline * 255).astype(np.uint8))
            rows.append([f"{stem}.png", repr(round(float(px), 12)), f"{hc:.2f}"])
    with open(root / "training_set_pixel_size_and_HC.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(["filename", "pixel size(mm)", "head circumference (mm)"])
        wr.writerows(rows)
    test = ["filename,pixel size(mm)"]
    for n in range(10):
        img, _o, _a, _b = _hc18_frame(rng)
        save_png(root / "test_set" / f"{n:03d}_HC.png", img)
        test.append(f"{n:03d}_HC.png,{repr(round(float(rng.uniform(0.8, 4.0)), 12))}")
    (root / "test_set_pixel_size.csv").write_text("\n".join(test) + "\n")
    return root


# ============================================================================ BCCD

BCCD_CLASSES = ["WBC", "RBC", "Platelets"]


def _bccd_smear(rng, h=48, w=64):
    """A Giemsa-stained smear: pink RBC discs with pale centres, usually one WBC with a
    lobulated purple nucleus, a few small purple platelets. Returns image and objects
    (name, xmin, ymin, xmax, ymax, truncated) in 1-based VOC pixel coordinates."""
    img = np.zeros((h, w, 3)) + np.array([0.93, 0.86, 0.84])
    objs = []

    def box(name, cy, cx, r):
        x0, y0, x1, y1 = cx - r, cy - r, cx + r, cy + r
        tr = int(x0 < 1 or y0 < 1 or x1 > w or y1 > h)
        objs.append((name, int(max(1, round(x0))), int(max(1, round(y0))),
                     int(min(w, round(x1))), int(min(h, round(y1))), tr))

    for _ in range(int(rng.integers(8, 15))):
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(4.3, 5.5)
        img[disk((h, w), cy, cx, r)] = [0.86, 0.52, 0.52]
        img[disk((h, w), cy, cx, r * 0.4)] = [0.9, 0.68, 0.66]
        box("RBC", cy, cx, r)
    for _ in range(int(rng.choice([0, 1, 1, 1, 1, 1, 2]))):
        cy, cx, r = rng.uniform(8, h - 8), rng.uniform(8, w - 8), rng.uniform(7.5, 10)
        img[disk((h, w), cy, cx, r)] = [0.8, 0.72, 0.86]
        for _k in range(3):
            img[disk((h, w), cy + rng.uniform(-3, 3), cx + rng.uniform(-3, 3),
                     r * 0.35)] = [0.42, 0.2, 0.58]
        box("WBC", cy, cx, r)
    for _ in range(int(rng.choice([0, 0, 1, 1, 2, 3]))):
        cy, cx, r = rng.uniform(2, h - 2), rng.uniform(2, w - 2), rng.uniform(1.4, 2.0)
        img[disk((h, w), cy, cx, r)] = [0.5, 0.3, 0.62]
        box("Platelets", cy, cx, r)
    img += rng.normal(0, 0.015, img.shape)
    return to_u8(img), objs


# the released XMLs keep the absolute folder of the annotator's own machine (a Raspberry Pi
# account there); any absolute path that does not exist here plays the same part
ANNOTATOR_DIR = "/media/pi/detection_dataset"


def _voc_xml(name, w, h, objs) -> str:
    out = ["<annotation>", "\t<folder>JPEGImages</folder>", f"\t<filename>{name}</filename>",
           f"\t<path>{ANNOTATOR_DIR}/JPEGImages/{name}</path>", "\t<source>",
           "\t\t<database>Unknown</database>", "\t</source>", "\t<size>",
           f"\t\t<width>{w}</width>", f"\t\t<height>{h}</height>", "\t\t<depth>3</depth>",
           "\t</size>", "\t<segmented>0</segmented>"]
    for cls, x0, y0, x1, y1, tr in objs:
        out += ["\t<object>", f"\t\t<name>{cls}</name>", "\t\t<pose>Unspecified</pose>",
                f"\t\t<truncated>{tr}</truncated>", "\t\t<difficult>0</difficult>",
                "\t\t<bndbox>", f"\t\t\t<xmin>{x0}</xmin>", f"\t\t\t<ymin>{y0}</ymin>",
                f"\t\t\t<xmax>{x1}</xmax>", f"\t\t\t<ymax>{y1}</ymax>", "\t\t</bndbox>",
                "\t</object>"]
    return "\n".join(out + ["</annotation>"]) + "\n"


def make_bccd(out_dir: Path, seed: int = 0) -> Path:
    """BCCD, blood cell count and detection (github.com/Shenggan/BCCD_Dataset, MIT; images and
    labels from cosmicad/dataset and akshaylamba/all_CELL_data, re-organised into Pascal VOC):
    BCCD_Dataset/BCCD/JPEGImages/BloodImage_00XYZ.jpg (640x480 smears, numbers with gaps),
    BCCD/Annotations/BloodImage_00XYZ.xml (VOC boxes, classes RBC, WBC, Platelets; truncated
    flags at the border), BCCD/ImageSets/Main/{train,val,trainval,test}.txt (stems), and at
    the top README.md, LICENSE, example.jpg (a picture with drawn boxes, not a sample) and
    test.csv, which despite its name lists every box of every image with the columns in the
    order 'filename,cell_type,xmin,xmax,ymin,ymax'. Simplifications: 64x48 images, 60 of
    them, no helper scripts (split.py, export.py, plot.py)."""
    rng = rng_for(seed, "bccd")
    root = mkdir(Path(out_dir) / "BCCD_Dataset")
    voc = mkdir(root / "BCCD")
    nums = sorted(int(n) for n in rng.choice(np.arange(0, 411), 60, replace=False))
    rows, first = [], None
    for n in nums:
        name = f"BloodImage_{n:05d}.jpg"
        img, objs = _bccd_smear(rng)
        save_jpg(voc / "JPEGImages" / name, img)
        mkdir(voc / "Annotations")
        (voc / "Annotations" / f"{name[:-4]}.xml").write_text(_voc_xml(name, 64, 48, objs))
        rows += [[name, c, x0, x1, y0, y1] for c, x0, y0, x1, y1, _t in objs]
        if first is None:
            first = (img.copy(), objs)
    stems = [f"BloodImage_{n:05d}" for n in nums]
    order = rng.permutation(len(stems))
    test = sorted(stems[i] for i in order[:15])
    trainval = sorted(stems[i] for i in order[15:])
    val = sorted(trainval[i] for i in rng.choice(len(trainval), 11, replace=False))
    train = [s for s in trainval if s not in val]
    sets = mkdir(voc / "ImageSets" / "Main")
    for fname, lst in (("train", train), ("val", val), ("trainval", trainval), ("test", test)):
        (sets / f"{fname}.txt").write_text("".join(s + "\n" for s in lst))
    with open(root / "test.csv", "w", newline="") as fh:
        wr = csv.writer(fh, lineterminator="\n")
        wr.writerow(["filename", "cell_type", "xmin", "xmax", "ymin", "ymax"])
        wr.writerows(rows)
    ex, objs = first
    colours = {"RBC": [255, 0, 0], "WBC": [0, 0, 255], "Platelets": [0, 200, 0]}
    for c, x0, y0, x1, y1, _t in objs:
        ex[y0 - 1, x0 - 1:x1] = ex[y1 - 1, x0 - 1:x1] = colours[c]
        ex[y0 - 1:y1, x0 - 1] = ex[y0 - 1:y1, x1 - 1] = colours[c]
    save_jpg(root / "example.jpg", ex)
    (root / "README.md").write_text(
        "# BCCD Dataset\n\nBCCD Dataset is a small-scale dataset for blood cells detection.\n\n"
        "The original dataset is re-organized into VOC format. BCCD Dataset is under MIT "
        "licence.\n\nWe have three kind of labels :\n\n* RBC (Red Blood Cell)\n* WBC (White "
        "Blood Cell)\n* Platelets\n\nThe structure of the `BCCD`: Annotations/ (VOC .xml), "
        "ImageSets/Main/ (test.txt, train.txt, trainval.txt, val.txt), JPEGImages/.\n")
    (root / "LICENSE").write_text("MIT License\n\nCopyright (c) 2017 Shenggan\n\nPermission is "
                                  "hereby granted, free of charge, to any person obtaining a "
                                  "copy of this software and associated documentation files.\n")
    return root
