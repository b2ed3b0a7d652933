"""Batch 3, 2D generators: MURA, CVC-ClinicDB, MoNuSeg, NODE21, ODIR-5K and FracAtlas (see
``batch3.py`` for the documentation each follows). Each writes a small folder in the layout the
public dataset ships in and returns the dataset root. Written from the datasets' public
documentation only; no code of the app is imported."""
from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

from .common import (disk, ellipse, mkdir, rng_for, save_jpg, save_png, save_sitk, to_u8)


def _bar(shape, y0, x0, y1, x1, width) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    dy, dx = y1 - y0, x1 - x0
    L2 = dy * dy + dx * dx or 1e-6
    t = np.clip(((yy - y0) * dy + (xx - x0) * dx) / L2, 0, 1)
    d2 = (yy - (y0 + t * dy)) ** 2 + (xx - (x0 + t * dx)) ** 2
    return d2 <= (width / 2) ** 2


def _bone_xray(rng, h, w, abnormal: bool, hardware_p=0.3):
    """A long bone on a dark background; abnormal = a lucent fracture line with a step
    (or orthopaedic hardware, bright)."""
    img = np.full((h, w), 0.08, np.float32)
    soft = ellipse((h, w), h / 2, w / 2, h * 0.55, w * 0.3)
    img[soft] = 0.25
    ang = rng.uniform(-0.3, 0.3)
    y0, x0 = 2, w / 2 + rng.uniform(-6, 6)
    y1, x1 = h - 3, x0 + np.tan(ang) * (h - 5)
    bone = _bar((h, w), y0, x0, y1, x1, rng.uniform(7, 11))
    img[bone] = 0.75
    img[_bar((h, w), y0, x0, y1, x1, 3)] = 0.55  # medullary canal
    if abnormal:
        if rng.random() < hardware_p:
            img[_bar((h, w), h * 0.3, x0 - 1, h * 0.7, x0 + np.tan(ang) * h * 0.4, 2)] = 1.0
            for yy in (0.35, 0.5, 0.65):
                img[_bar((h, w), h * yy, x0 - 6, h * yy, x0 + 6, 1.5)] = 1.0
        else:
            yf = rng.uniform(0.35, 0.65) * h
            line = _bar((h, w), yf - 3, 0, yf + 3, w, 1.6) & bone
            img[line] = 0.15
            shift = int(rng.integers(2, 4))
            lower = np.zeros_like(bone)
            lower[int(yf):] = True
            img2 = img.copy()
            img2[:, shift:] = img[:, :-shift]
            img = np.where(lower, img2, img)
    img += rng.normal(0, 0.025, img.shape).astype(np.float32)
    return to_u8(img)


# ============================================================================ MURA

MURA_PARTS = ["XR_ELBOW", "XR_FINGER", "XR_FOREARM", "XR_HAND", "XR_HUMERUS", "XR_SHOULDER",
              "XR_WRIST"]


def make_mura(out_dir: Path, seed: int = 0) -> Path:
    """MURA v1.1 (Rajpurkar et al., arXiv:1712.06957; stanfordmlgroup.github.io/competitions/
    mura): MURA-v1.1/{train,valid}/XR_<PART>/patient#####/study<N>_{positive,negative}/
    image<K>.png, with header-less train_image_paths.csv / valid_image_paths.csv (one relative
    path per line) and train_labeled_studies.csv / valid_labeled_studies.csv ('<study path>/,
    1|0'). The label is per study (abnormal = positive = 1); a study has 1-4 views. Patients
    of the valid split do not occur in train. Simplification: 64 px grayscale PNGs, 7 body
    parts with a handful of studies each."""
    rng = rng_for(seed, "mura")
    base = Path(out_dir)
    root = mkdir(base / "MURA-v1.1")
    pid = int(rng.integers(1, 300))
    for split, n_pat in (("train", 22), ("valid", 8)):
        img_rows, study_rows = [], []
        for _ in range(n_pat):
            pid += int(rng.integers(1, 40))
            part = str(rng.choice(MURA_PARTS))
            for s in range(int(rng.choice([1, 1, 2]))):
                pos = bool(rng.random() < 0.45)
                sdir = f"MURA-v1.1/{split}/{part}/patient{pid:05d}/study{s + 1}_" \
                       f"{'positive' if pos else 'negative'}/"
                for k in range(int(rng.integers(1, 4))):
                    h, w = int(rng.integers(56, 72)), int(rng.integers(44, 60))
                    save_png(base / sdir / f"image{k + 1}.png", _bone_xray(rng, h, w, pos))
                    img_rows.append(sdir + f"image{k + 1}.png")
                study_rows.append((sdir, int(pos)))
        (root / f"{split}_image_paths.csv").write_text("".join(r + "\n" for r in img_rows))
        (root / f"{split}_labeled_studies.csv").write_text(
            "".join(f"{p},{y}\n" for p, y in study_rows))
    return root


# ============================================================================ CVC-ClinicDB

def make_cvc_clinicdb(out_dir: Path, seed: int = 0) -> Path:
    """CVC-ClinicDB (Bernal et al., Comput Med Imaging Graph 43:99, 2015;
    polyp.grand-challenge.org/CVCClinicDB): CVC-ClinicDB/Original/<n>.tif (RGB colonoscopy
    frames from 29 sequences, numbered 1..612 in sequence order) and CVC-ClinicDB/Ground Truth/
    <n>.tif (binary polyp mask, 0/255). Simplification: 64x48 frames (the originals are
    384x288), 42 frames from 7 sequences."""
    rng = rng_for(seed, "cvc_clinicdb")
    root = mkdir(Path(out_dir) / "CVC-ClinicDB")
    h, w = 48, 64
    n = 0
    for _seq in range(7):
        cy, cx = rng.uniform(14, 34), rng.uniform(16, 48)
        ry, rx = rng.uniform(5, 10), rng.uniform(6, 12)
        for _ in range(6):
            n += 1
            cy += rng.normal(0, 1.2)
            cx += rng.normal(0, 1.5)
            yy, xx = np.mgrid[:h, :w]
            r = np.hypot((yy - h / 2) / h, (xx - w / 2) / w)
            base = np.clip(0.8 - 1.1 * r, 0.05, 1)[..., None] * np.array([0.95, 0.55, 0.45])
            img = base + rng.normal(0, 0.02, (h, w, 3))
            for _f in range(3):  # mucosal folds
                fy = rng.uniform(5, h - 5)
                img[_bar((h, w), fy, 0, fy + rng.uniform(-8, 8), w, 1.5)] *= 0.75
            m = ellipse((h, w), cy, cx, ry, rx)
            shade = np.clip(1.0 - ((yy - cy + ry * 0.4) ** 2 + (xx - cx) ** 2) / (3 * ry * rx),
                            0.6, 1.0)
            img[m] = (np.array([0.98, 0.62, 0.58]) * shade[m][:, None] + 0.12)
            img[disk((h, w), cy - ry * 0.4, cx - rx * 0.3, 1.2) & m] = 1.0  # specular
            mkdir(root / "Original")
            mkdir(root / "Ground Truth")
            Image.fromarray(to_u8(img)).save(root / "Original" / f"{n}.tif")
            Image.fromarray((m * 255).astype(np.uint8)).save(root / "Ground Truth" / f"{n}.tif")
    return root


# ============================================================================ MoNuSeg

_ORGANS = {"18": "breast", "21": "prostate", "38": "lung", "49": "kidney", "50": "lung",
           "A7": "breast", "AR": "breast", "B0": "kidney", "CH": "prostate", "E2": "breast",
           "G9": "prostate", "HE": "kidney", "KB": "liver", "NH": "colon", "RD": "stomach"}


def _monuseg_xml(polys, mpp=0.252) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<Annotations MicronsPerPixel="{mpp:.6f}">',
           '<Annotation Id="1" Name="" ReadOnly="0" NameReadOnly="0" LineColorReadOnly="0" '
           'Incremental="0" Type="4" LineColor="65280" Visible="1" Selected="1" '
           'MarkupImagePath="" MacroName="">',
           '<Attributes>', '<Attribute Name="Description" Id="0" Value=""/>', '</Attributes>',
           '<Regions>', '<RegionAttributeHeaders>',
           '<AttributeHeader Id="9999" Name="Region" ColumnWidth="-1"/>',
           '<AttributeHeader Id="9997" Name="Length" ColumnWidth="-1"/>',
           '<AttributeHeader Id="9996" Name="Area" ColumnWidth="-1"/>',
           '<AttributeHeader Id="9998" Name="Text" ColumnWidth="-1"/>',
           '<AttributeHeader Id="1" Name="Description" ColumnWidth="-1"/>',
           '</RegionAttributeHeaders>']
    for i, pts in enumerate(polys, 1):
        x, y = pts[:, 0], pts[:, 1]
        area = 0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))
        length = float(np.sum(np.hypot(np.diff(x, append=x[0]), np.diff(y, append=y[0]))))
        out.append(f'<Region Id="{i}" Type="0" Zoom="0.5" Selected="0" ImageLocation="" '
                   f'ImageFocus="-1" Length="{length:.1f}" Area="{area:.1f}" '
                   f'LengthMicrons="{length * mpp:.1f}" AreaMicrons="{area * mpp * mpp:.1f}" '
                   f'Text="" NegativeROA="0" InputRegionId="0" Analyze="1" DisplayId="{i}">')
        out += ['<Attributes/>', '<Vertices>']
        out += [f'<Vertex X="{px:.6f}" Y="{py:.6f}" Z="0"/>' for px, py in pts]
        out += ['</Vertices>', '</Region>']
    out += ['</Regions>', '<Plots/>', '</Annotation>', '</Annotations>']
    return "\n".join(out) + "\n"


def make_monuseg(out_dir: Path, seed: int = 0) -> Path:
    """MoNuSeg 2018 (Kumar et al., IEEE TMI 36(7):1550, 2017 and TMI 39(5):1380, 2020;
    monuseg.grand-challenge.org/Data): 'MoNuSeg 2018 Training Data/Tissue Images/
    TCGA-<TSS>-<participant>-01Z-00-DX1.tif' (H&E RGB tiles at 40x) with Aperio ImageScope XML
    annotations in 'MoNuSeg 2018 Training Data/Annotations/<same stem>.xml' (one Region with
    Vertices per nucleus), and MoNuSegTestData/ holding the test tiles and their XML side by
    side. No mask images ship; masks are to be rasterised from the polygons. Simplification:
    64 px tiles (originals 1000 px), 24 training and 8 test tiles; the two downloads are put
    side by side in one MoNuSeg/ folder."""
    rng = rng_for(seed, "monuseg")
    base = Path(out_dir)
    root = mkdir(base / "MoNuSeg")
    tr = mkdir(root / "MoNuSeg 2018 Training Data")
    te = mkdir(root / "MoNuSegTestData")
    tss = sorted(_ORGANS)
    used = set()
    for split, n in (("train", 24), ("test", 8)):
        for _ in range(n):
            while True:
                stem = (f"TCGA-{rng.choice(tss)}-{int(rng.integers(0, 10**4)):04X}"
                        f"-01Z-00-DX1")
                if stem not in used:
                    used.add(stem)
                    break
            h = w = 64
            img = np.ones((h, w, 3)) * np.array([0.93, 0.75, 0.85])  # eosin pink stroma
            img += rng.normal(0, 0.03, (h, w, 3))
            polys = []
            for _k in range(int(rng.integers(10, 20))):
                cy, cx = rng.uniform(4, h - 4), rng.uniform(4, w - 4)
                ry, rx = rng.uniform(2, 4), rng.uniform(2, 4.5)
                a = rng.uniform(0, np.pi)
                t = np.linspace(0, 2 * np.pi, 14, endpoint=False)
                rr = 1 + rng.normal(0, 0.08, t.size)
                px = cx + rr * (rx * np.cos(t) * np.cos(a) - ry * np.sin(t) * np.sin(a))
                py = cy + rr * (rx * np.cos(t) * np.sin(a) + ry * np.sin(t) * np.cos(a))
                pts = np.stack([np.clip(px, 0, w - 1), np.clip(py, 0, h - 1)], 1)
                from PIL import ImageDraw

                mimg = Image.new("L", (w, h), 0)
                ImageDraw.Draw(mimg).polygon([tuple(p) for p in pts], fill=1)
                m = np.asarray(mimg, bool)
                img[m] = np.array([0.35, 0.25, 0.6]) + rng.normal(0, 0.04, (m.sum(), 3))
                polys.append(pts)
            d = tr if split == "train" else te
            if split == "train":
                mkdir(d / "Tissue Images")
                mkdir(d / "Annotations")
                Image.fromarray(to_u8(img)).save(d / "Tissue Images" / f"{stem}.tif")
                (d / "Annotations" / f"{stem}.xml").write_text(_monuseg_xml(polys))
            else:
                Image.fromarray(to_u8(img)).save(d / f"{stem}.tif")
                (d / f"{stem}.xml").write_text(_monuseg_xml(polys))
    return root


# ============================================================================ NODE21

def make_node21(out_dir: Path, seed: int = 0) -> Path:
    """NODE21 (Sogancioglu et al., 2021; node21.grand-challenge.org; Zenodo
    doi:10.5281/zenodo.5548363): cxr_images/proccessed_data/images/n####.mha (frontal chest
    radiographs, 16-bit, from JSRT/PadChest/ChestX-ray14/Open-I, cropped to the lungs and
    resized to 1024x1024) and cxr_images/proccessed_data/metadata.csv with one row per nodule
    box (img_name,x,y,width,height,label; label 1 nodule), images without nodules with one
    row of zeros and label 0. The folder name's spelling 'proccessed' is the release's.
    Simplification: 64 px images, 60 images, no original_data/ folder."""
    rng = rng_for(seed, "node21")
    root = mkdir(Path(out_dir) / "node21" / "cxr_images" / "proccessed_data")
    rows = []
    s = 64
    for i in range(60):
        name = f"n{i:04d}.mha"
        img = np.full((s, s), 0.55, np.float32)
        for cx in (0.3, 0.7):
            img[ellipse((s, s), s * 0.5, s * cx, s * 0.33, s * 0.17)] = 0.2
        img += rng.normal(0, 0.03, img.shape).astype(np.float32)
        k = int(rng.choice([0, 1, 2], p=[0.55, 0.35, 0.10]))
        if k == 0:
            rows.append((name, 0, 0, 0, 0, 0))
        for _ in range(k):
            r = rng.uniform(2, 4.5)
            cx = rng.uniform(0.2, 0.4) * s if rng.random() < 0.5 else rng.uniform(0.6, 0.8) * s
            cy = rng.uniform(0.3, 0.7) * s
            img[disk((s, s), cy, cx, r)] += 0.35
            rows.append((name, int(cx - r), int(cy - r), int(2 * r + 1), int(2 * r + 1), 1))
        arr = (np.clip(img, 0, 1) * 4095).round().astype(np.int16)[None]
        save_sitk(root / "images" / name, arr, spacing_xyz=(0.4, 0.4, 1.0))
    with open(root / "metadata.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["img_name", "x", "y", "width", "height", "label"])
        wr.writerows(rows)
    return root.parents[1]


# ============================================================================ ODIR-5K

ODIR_COLS = ["N", "D", "G", "C", "A", "H", "M", "O"]
_ODIR_KW = {"N": ["normal fundus"], "D": ["moderate non proliferative retinopathy",
                                          "mild nonproliferative retinopathy"],
            "G": ["glaucoma"], "C": ["cataract"], "A": ["dry age-related macular degeneration",
                                                        "wet age-related macular degeneration"],
            "H": ["hypertensive retinopathy"], "M": ["pathological myopia"],
            "O": ["drusen", "epiretinal membrane", "lens dust"]}


def _fundus(rng, findings: set, s=64):
    yy, xx = np.mgrid[:s, :s]
    r = np.hypot(yy - s / 2, xx - s / 2)
    img = np.zeros((s, s, 3))
    fov = r < s * 0.46
    img[fov] = np.array([0.75, 0.3, 0.12]) * (1 - 0.5 * (r[fov] / (s * 0.46)) ** 2)[:, None]
    dx = s * 0.68
    cup = 3 if "G" in findings else 1.5
    img[disk((s, s), s / 2, dx, 5)] = [0.98, 0.85, 0.6]
    img[disk((s, s), s / 2, dx, cup)] = [1.0, 0.97, 0.85]
    for a in (-0.5, 0.5, 2.6, 3.7):  # vessels
        m = _bar((s, s), s / 2, dx, s / 2 + 26 * np.sin(a), dx + 26 * np.cos(a), 1.3) & fov
        img[m] = [0.5, 0.08, 0.05] if "H" not in findings else [0.7, 0.15, 0.1]
    if "D" in findings:
        for _ in range(6):
            img[disk((s, s), *rng.uniform(15, 49, 2), 0.9) & fov] = [0.4, 0.02, 0.02]
    if "A" in findings or "O" in findings:
        for _ in range(5):
            img[disk((s, s), s / 2 + rng.normal(0, 3), s * 0.35 + rng.normal(0, 3), 1.1)] = \
                [0.95, 0.9, 0.4]
    if "M" in findings:
        img[ellipse((s, s), s / 2, dx - 4, 6, 4) & ~disk((s, s), s / 2, dx, 5)] = [0.9, 0.7, 0.5]
    if "C" in findings:
        img = img * 0.55 + 0.35 * fov[..., None]  # hazy media
    img += rng.normal(0, 0.02, img.shape) * fov[..., None]
    return to_u8(img)


def _deterministic_xlsx(path: Path) -> None:
    """Rewrite an openpyxl file with fixed zip dates and document times."""
    buf = io.BytesIO(path.read_bytes())
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:(created|modified)[^>]*>)[^<]*",
                              rb"\g<1>2019-03-01T00:00:00Z", data)
            zi = zipfile.ZipInfo(info.filename, date_time=(2019, 3, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(zi, data)
    path.write_bytes(out.getvalue())


def make_odir5k(out_dir: Path, seed: int = 0) -> Path:
    """ODIR-5K (Peking University International Competition on Ocular Disease Intelligent
    Recognition, 2019; odir2019.grand-challenge.org; Kaggle 'andrewmvd/ocular-disease-
    recognition-odir5k'): ODIR-5K/data.xlsx with one row per patient (ID, Patient Age, Patient
    Sex, Left-Fundus, Right-Fundus, Left-Diagnostic Keywords, Right-Diagnostic Keywords, N, D,
    G, C, A, H, M, O), the eight 0/1 disease columns at patient level (both eyes together);
    keywords per eye joined by a full-width comma '，'; ODIR-5K/Training Images/<ID>_left.jpg
    and <ID>_right.jpg; ODIR-5K/Testing Images/ unlabelled. Simplification: 64 px fundus
    photos, 45 patients."""
    from openpyxl import Workbook

    rng = rng_for(seed, "odir5k")
    root = mkdir(Path(out_dir) / "ODIR-5K")
    wb = Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    ws.append(["ID", "Patient Age", "Patient Sex", "Left-Fundus", "Right-Fundus",
               "Left-Diagnostic Keywords", "Right-Diagnostic Keywords", *ODIR_COLS])
    ids = sorted(rng.choice(np.arange(0, 4800), 45, replace=False))
    for pid in ids:
        eyes = {}
        for side in ("left", "right"):
            if rng.random() < 0.4:
                f = {"N"}
            else:
                f = set(rng.choice(ODIR_COLS[1:], int(rng.choice([1, 1, 2])), replace=False))
            eyes[side] = f
        allf = eyes["left"] | eyes["right"]
        labels = {c: int(c in allf) for c in ODIR_COLS}
        if allf - {"N"}:
            labels["N"] = 0
        kws = {}
        for side, f in eyes.items():
            kws[side] = "，".join(str(rng.choice(_ODIR_KW[c])) for c in sorted(f))
            save_jpg(root / "Training Images" / f"{pid}_{side}.jpg", _fundus(rng, f))
        ws.append([int(pid), int(rng.integers(30, 85)), str(rng.choice(["Male", "Female"])),
                   f"{pid}_left.jpg", f"{pid}_right.jpg", kws["left"], kws["right"],
                   *[labels[c] for c in ODIR_COLS]])
    for pid in range(4900, 4906):
        for side in ("left", "right"):
            save_jpg(root / "Testing Images" / f"{pid}_{side}.jpg",
                     _fundus(rng, {str(rng.choice(ODIR_COLS))}))
    wb.properties.creator = "openpyxl"
    wb.save(root / "data.xlsx")
    _deterministic_xlsx(root / "data.xlsx")
    return root


# ============================================================================ FracAtlas

_FA_COLS = ["image_id", "hand", "leg", "hip", "shoulder", "mixed", "hardware", "multiscan",
            "fractured", "fracture_count", "frontal", "lateral", "oblique"]


def make_fracatlas(out_dir: Path, seed: int = 0) -> Path:
    """FracAtlas (Abedeen et al., Sci Data 10:521, 2023; figshare doi:10.6084/m9.figshare.
    22363012): FracAtlas/images/{Fractured,Non_fractured}/IMG#######.jpg, FracAtlas/dataset.csv
    (image_id,hand,leg,hip,shoulder,mixed,hardware,multiscan,fractured,fracture_count,frontal,
    lateral,oblique; 0/1 flags), and for the fractured images FracAtlas/Annotations/COCO JSON/
    COCO_fracture_masks.json (polygon + bbox per fracture, category 'fractured'),
    Annotations/PASCAL VOC/<id>.xml and Annotations/YOLO/<id>.txt; Utilities/Fracture Split/
    {train,valid,test}.csv list fractured images only. Simplification: 64 px images, 60
    images, no Utilities/ scripts."""
    rng = rng_for(seed, "fracatlas")
    root = mkdir(Path(out_dir) / "FracAtlas")
    rows, coco_imgs, coco_anns = [], [], []
    ids = sorted(rng.choice(np.arange(0, 4083), 60, replace=False))
    fractured_ids = []
    for k, i in enumerate(ids):
        name = f"IMG{i:07d}.jpg"
        frac = bool(rng.random() < 0.4)
        part = str(rng.choice(["hand", "leg", "hip", "shoulder"], p=[0.35, 0.4, 0.15, 0.1]))
        hardware = int(rng.random() < 0.08)
        h, w = 64, 56
        img = _bone_xray(rng, h, w, False)
        box = None
        if frac:
            yf, xf = rng.uniform(0.35, 0.65) * h, w / 2 + rng.uniform(-3, 3)
            m = _bar((h, w), yf - 2, xf - 7, yf + 2, xf + 7, 1.5) & (img > 120)
            img[m] = 40
            ys, xs = np.nonzero(m) if m.any() else (np.array([int(yf)]), np.array([int(xf)]))
            box = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1),
                   int(ys.max() - ys.min() + 1)]
        if hardware:
            img[_bar((h, w), 10, w / 2, 50, w / 2, 2)] = 255
        sub = "Fractured" if frac else "Non_fractured"
        save_jpg(root / "images" / sub / name, np.repeat(img[..., None], 3, 2))
        flags = {c: 0 for c in _FA_COLS}
        flags.update(image_id=name, fractured=int(frac), fracture_count=int(frac),
                     hardware=hardware, frontal=1)
        flags[part] = 1
        rows.append([flags[c] for c in _FA_COLS])
        if frac:
            fractured_ids.append(name)
            iid = len(coco_imgs)
            coco_imgs.append({"id": iid, "file_name": name, "height": h, "width": w})
            x, y, bw, bh = box
            coco_anns.append({"id": len(coco_anns), "image_id": iid, "category_id": 0,
                              "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0,
                              "segmentation": [[x, y, x + bw, y, x + bw, y + bh, x, y + bh]]})
            vod = mkdir(root / "Annotations" / "PASCAL VOC")
            (vod / f"{name[:-4]}.xml").write_text(
                f"<annotation>\n\t<folder>Fractured</folder>\n\t<filename>{name}</filename>\n"
                f"\t<size>\n\t\t<width>{w}</width>\n\t\t<height>{h}</height>\n\t\t<depth>3"
                f"</depth>\n\t</size>\n\t<object>\n\t\t<name>fractured</name>\n\t\t<pose>"
                f"Unspecified</pose>\n\t\t<truncated>0</truncated>\n\t\t<difficult>0</difficult>"
                f"\n\t\t<bndbox>\n\t\t\t<xmin>{x}</xmin>\n\t\t\t<ymin>{y}</ymin>\n\t\t\t<xmax>"
                f"{x + bw}</xmax>\n\t\t\t<ymax>{y + bh}</ymax>\n\t\t</bndbox>\n\t</object>\n"
                f"</annotation>\n")
            yod = mkdir(root / "Annotations" / "YOLO")
            (yod / f"{name[:-4]}.txt").write_text(
                f"0 {(x + bw / 2) / w:.6f} {(y + bh / 2) / h:.6f} {bw / w:.6f} {bh / h:.6f}\n")
    with open(root / "dataset.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(_FA_COLS)
        wr.writerows(rows)
    coco = {"info": {"description": "FracAtlas", "version": "1.0"},
            "images": coco_imgs, "annotations": coco_anns,
            "categories": [{"id": 0, "name": "fractured", "supercategory": "fracture"}]}
    mkdir(root / "Annotations" / "COCO JSON")
    (root / "Annotations" / "COCO JSON" / "COCO_fracture_masks.json").write_text(
        json.dumps(coco))
    sp = mkdir(root / "Utilities" / "Fracture Split")
    n = len(fractured_ids)
    for split, sl in (("train", slice(0, int(n * 0.7))), ("valid", slice(int(n * 0.7),
                                                                          int(n * 0.8))),
                      ("test", slice(int(n * 0.8), n))):
        (sp / f"{split}.csv").write_text("image_id\n" + "".join(
            f"{x}\n" for x in fractured_ids[sl]))
    return root
