"""Record-style layout families whose annotations are JSON records or per-study text files,
written the way public sets ship them:

* COCO instances (``make_coco_polygons``): colonoscopy frames ``train/<id>.jpg`` and
  ``val/<id>.jpg`` (64x64 RGB, Kvasir-like 25-character names) and
  ``annotations/instances_train.json`` / ``instances_val.json`` with ``info``, ``licenses``,
  ``images`` (id, file_name, width, height), ``annotations`` (id, image_id, category_id 1,
  polygon ``segmentation`` [[x1, y1, ...]], ``area``, ``bbox`` [x, y, w, h], ``iscrowd`` 0) and
  ``categories`` [{id 1, name polyp, supercategory lesion}]. Frames without polyp are listed in
  ``images`` with no annotation. Signal: a pale shaded dome (the polygon) on red mucosa.
* JSON Lines reports (``make_jsonl_reports``): MIMIC-CXR-JPG-like ``files/p10/p10000032/
  s50414267/<dicom_id>.jpg`` (dicom_id five dash-joined 8-hex groups) and one ``reports.jsonl``,
  one record per study: ``subject_id``, ``study_id`` (ints), ``dicom_id``, ``image_path``,
  ``view_position``, ``findings``, ``impression``; one to three studies per subject. The words
  follow what is drawn (opacity side and size, cardiomegaly, effusions).
* Per-study report text (``make_study_reports_txt``): IU X-ray/OpenI-like
  ``reports/CXR1234.txt`` (``COMPARISON:``, ``INDICATION:``, ``FINDINGS:``, ``IMPRESSION:``)
  with ``images/CXR1234_frontal.png`` and, for every third study, ``CXR1234_lateral.png``;
  ``studies.csv`` (``study_id, patient_id, study_date``) says whose study it is (some patients
  have two).

``cxr`` draws the chest radiographs of these and of the CheXpert family: frontal
(``core.demo.reports.chest_image``) or lateral, with opacity, cardiomegaly and effusion.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from core.demo.families_common import (disc, group_sizes, random_id, save_rgb, smooth_field,
                                       unique_ids)
from core.demo.chest_xray import _ellipse, _smooth_noise
from core.demo.reports import chest_image, chest_report
from core.demo.writers import finish, pick, prepare, save_png, scaled, write_csv, write_json

HEX = "0123456789abcdef"
COCO_SIZE = 64
POLYP = "polyp"


# ----------------------------------------------------------------------- chest radiographs
def lateral_image(rng: np.random.Generator, opacity, cardiomegaly: bool, effusion: bool,
                  size: int = 64) -> np.ndarray:
    """A lateral chest radiograph-like image: one lung field, the heart in front (image right),
    dense posterior costophrenic angle (a bright band at the bottom) with an effusion."""
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = h * (0.52 + rng.uniform(-0.03, 0.03)), w * (0.5 + rng.uniform(-0.03, 0.03))
    img = np.full((h, w), 0.08, np.float32)
    img[_ellipse(h, w, cy, cx, h * 0.46, w * 0.38)] = 0.55
    lung = _ellipse(h, w, cy - h * 0.04, cx - w * 0.02, h * rng.uniform(0.31, 0.35),
                    w * rng.uniform(0.26, 0.29))
    img[lung] = 0.24
    if effusion:
        img[lung & (yy > cy + h * rng.uniform(0.12, 0.16))] = 0.52
    rx = w * (rng.uniform(0.17, 0.2) if cardiomegaly else rng.uniform(0.09, 0.11))
    img[_ellipse(h, w, cy + h * 0.1, cx + w * 0.14, h * 0.15, rx)] = 0.62
    if opacity:
        ys, xs = np.nonzero(lung & (yy < cy + h * 0.08))
        i = rng.integers(0, len(ys))
        sigma = h * (0.055 if opacity[0] == "small" else 0.11)
        img += 0.4 * np.exp(-((yy - ys[i]) ** 2 + (xx - xs[i]) ** 2) / (2 * sigma ** 2)) * lung
    img[(np.abs(xx - (cx - w * 0.3)) < 1.5) & (yy > h * 0.2)] += 0.2               # the spine
    img += 0.04 * _smooth_noise(rng, size, 8) + rng.normal(0, 0.025, (h, w))
    img = img * rng.uniform(0.9, 1.1) + rng.uniform(-0.04, 0.04)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def cxr(rng: np.random.Generator, opacity, cardiomegaly: bool, effusion: bool, lateral: bool,
        size: int = 64) -> np.ndarray:
    if lateral:
        return lateral_image(rng, opacity, cardiomegaly, effusion, size)
    return chest_image(rng, opacity, cardiomegaly, effusion, size)


# ------------------------------------------------------------------------------------ COCO
def coco_counts(n: int) -> list[int]:
    """Polyps per frame: every sixth frame none, every seventh two."""
    return [0 if k % 6 == 2 else 2 if k % 7 == 4 else 1 for k in range(n)]


def coco_split(k: int) -> str:
    return "val" if k % 6 == 5 else "train"


def coco_split_counts(n: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in range(n):
        out[coco_split(k)] = out.get(coco_split(k), 0) + 1
    return out


def polyp_frame(rng: np.random.Generator, count: int, size: int = COCO_SIZE):
    """(H, W, 3) floats in [0, 1] and each polyp's outline as [(x, y), ...] (pixel corners)."""
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w]
    folds = np.sin(xx * rng.uniform(0.15, 0.3) + yy * rng.uniform(0.1, 0.25)
                   + 2.0 * smooth_field(rng, h, w, 8))
    shade = 0.72 + 0.1 * folds + 0.08 * smooth_field(rng, h, w, 5)
    img = shade[..., None] * (np.array([0.78, 0.34, 0.28]) * rng.uniform(0.9, 1.1, 3))
    img[disc(h, w, h * rng.uniform(0.3, 0.7), w * rng.uniform(0.3, 0.7), h * 0.1, w * 0.09)] \
        *= 0.35                                               # dark lumen
    outlines, centres = [], []
    for _ in range(count * 40):
        if len(outlines) == count:
            break
        r = rng.uniform(6.0, 10.0)
        cy, cx = rng.uniform(r + 4, h - r - 4), rng.uniform(r + 4, w - r - 4)
        if any(math.hypot(cy - py, cx - px) < r + pr + 4 for py, px, pr in centres):
            continue
        angles = np.sort(rng.uniform(0, 2 * np.pi, 12)) if rng.random() < 0.3 else \
            np.linspace(0, 2 * np.pi, 14, endpoint=False) + rng.uniform(0, 0.4)
        radius = r * rng.uniform(0.8, 1.15, len(angles))
        outline = [(float(cx + rr * math.cos(a)), float(cy + rr * math.sin(a)))
                   for a, rr in zip(angles, radius)]
        canvas = Image.new("L", (w, h), 0)
        ImageDraw.Draw(canvas).polygon(outline, fill=1)
        dome = np.asarray(canvas, bool)
        rim = disc(h, w, cy, cx, r * 1.3, r * 1.3) & ~dome
        img[rim] *= 0.6
        light = 1.0 - 0.35 * ((yy - cy + r * 0.4) ** 2 + (xx - cx + r * 0.4) ** 2) / (2 * r * r)
        colour = np.array([0.98, 0.72, 0.6]) * rng.uniform(0.92, 1.05)
        img[dome] = (colour * np.clip(light, 0.6, 1.0)[..., None])[dome]
        img[np.hypot(yy - (cy - r * 0.35), xx - (cx - r * 0.35)) < 1.2] = 1.0
        outlines.append(outline)
        centres.append((cy, cx, r))
    for _ in range(int(rng.integers(2, 5))):                   # glints on the mucosa
        img[np.hypot(yy - rng.uniform(0, h), xx - rng.uniform(0, w)) < 1.0] = 1.0
    field = np.hypot((yy - h / 2) / (h * 0.62), (xx - w / 2) / (w * 0.62))
    img *= np.clip(1.25 - field, 0, 1)[..., None]
    img[field > 0.98] = 0.0
    return np.clip(img + rng.normal(0, 0.02, img.shape), 0, 1), outlines


def _polygon_area(points) -> float:
    xs, ys = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    return float(abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1))) / 2)


def make_coco_polygons(out_dir: str | Path, seed: int = 0, n: int = 120,
                       scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 24)
    spec = {"family": "coco_polygons", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    sets = {s: {"info": {"description": "Colonoscopy polyps", "version": "1.0", "year": 2023,
                         "contributor": "endoscopy unit", "date_created": "2023/04/01"},
                "licenses": [{"id": 1, "name": "CC BY 4.0",
                              "url": "https://creativecommons.org/licenses/by/4.0/"}],
                "images": [], "annotations": [],
                "categories": [{"id": 1, "name": POLYP, "supercategory": "lesion"}]}
            for s in ("train", "val")}
    ann_id = 1
    for k, count in enumerate(coco_counts(n)):
        split = coco_split(k)
        name = f"cju{random_id(rng, 22)}.jpg"
        pixels, outlines = polyp_frame(rng, count)
        save_rgb(pixels, out / split / name, quality=95)
        sets[split]["images"].append({"id": k + 1, "file_name": name, "width": COCO_SIZE,
                                      "height": COCO_SIZE, "license": 1,
                                      "date_captured": ""})
        for outline in outlines:
            pts = [(min(max(x, 0.0), COCO_SIZE), min(max(y, 0.0), COCO_SIZE))
                   for x, y in outline]
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            sets[split]["annotations"].append({
                "id": ann_id, "image_id": k + 1, "category_id": 1,
                "segmentation": [[round(v, 1) for p in pts for v in p]],
                "area": round(_polygon_area(pts), 1),
                "bbox": [round(min(xs), 1), round(min(ys), 1), round(max(xs) - min(xs), 1),
                         round(max(ys) - min(ys), 1)], "iscrowd": 0})
            ann_id += 1
    for split, data in sets.items():
        write_json(out / "annotations" / f"instances_{split}.json", data)
    return finish(out, spec)


# ------------------------------------------------------------------------ report findings
def draw_findings(rng: np.random.Generator):
    opacity = ((pick(rng, ["small", "large"]), pick(rng, ["right", "left"]))
               if rng.random() < 0.5 else None)
    return opacity, bool(rng.random() < 0.35), bool(rng.random() < 0.3)


# ---------------------------------------------------------------------- JSON Lines reports
JSONL_GROUPS = (1, 2, 3, 2)                  # studies per subject, cycled


def make_jsonl_reports(out_dir: str | Path, seed: int = 0, n: int = 200,
                       scale: float = 1.0) -> Path:
    """``n`` studies, one frontal JPEG and one report each."""
    out = Path(out_dir)
    n = scaled(n, scale, 48)
    spec = {"family": "jsonl_reports", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = group_sizes(n, JSONL_GROUPS)
    subjects = unique_ids(rng, len(groups), 10000000, 19999999)
    studies = iter(unique_ids(rng, n, 50000000, 59999999))
    lines = []
    for subject, count in zip(subjects, groups):
        for _ in range(count):
            study = next(studies)
            dicom = "-".join(random_id(rng, 8, HEX) for _ in range(5))
            rel = f"files/p{str(subject)[:2]}/p{subject}/s{study}/{dicom}.jpg"
            opacity, cardiomegaly, effusion = draw_findings(rng)
            save_png(cxr(rng, opacity, cardiomegaly, effusion, False), out / rel, quality=90)
            findings, impression = chest_report(rng, opacity, cardiomegaly, effusion)
            lines.append(json.dumps({"subject_id": subject, "study_id": study,
                                     "dicom_id": dicom, "image_path": rel,
                                     "view_position": pick(rng, ["PA", "AP"]),
                                     "findings": findings, "impression": impression}))
    (out / "reports.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return finish(out, spec)


# ------------------------------------------------------------------ per-study report .txt
IU_GROUPS = (1, 2, 1, 1, 2, 1)               # studies per patient, cycled
IU_INDICATIONS = ["Cough and fever.", "Chest pain.", "Shortness of breath.",
                  "Preoperative evaluation.", "XXXX-year-old male with dyspnea.",
                  "Follow-up of pneumonia."]


def iu_counts(n: int) -> dict:
    return {"studies": n, "images": n + sum(1 for k in range(n) if k % 3 == 1),
            "patients": len(group_sizes(n, IU_GROUPS))}


def make_study_reports_txt(out_dir: str | Path, seed: int = 0, n: int = 160,
                           scale: float = 1.0) -> Path:
    """``n`` studies; every third has a lateral view as well."""
    out = Path(out_dir)
    n = scaled(n, scale, 40)
    spec = {"family": "study_reports_txt", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = group_sizes(n, IU_GROUPS)
    study_ids = iter(unique_ids(rng, n, 1, 4000))
    rows, k = [], 0
    for patient, count in zip(unique_ids(rng, len(groups), 1, 99999), groups):
        for _ in range(count):
            study = f"CXR{next(study_ids)}"
            opacity, cardiomegaly, effusion = draw_findings(rng)
            for view in ("frontal", "lateral")[: 2 if k % 3 == 1 else 1]:
                save_png(cxr(rng, opacity, cardiomegaly, effusion, view == "lateral"),
                         out / "images" / f"{study}_{view}.png")
            findings, impression = chest_report(rng, opacity, cardiomegaly, effusion)
            text = (f"COMPARISON: {pick(rng, ['None.', 'XXXX', 'Chest radiographs XXXX.'])}\n\n"
                    f"INDICATION: {pick(rng, IU_INDICATIONS)}\n\n"
                    f"FINDINGS: {findings}\n\nIMPRESSION: {impression}\n")
            (out / "reports").mkdir(parents=True, exist_ok=True)
            (out / "reports" / f"{study}.txt").write_text(text, encoding="utf-8")
            rows.append({"study_id": study, "patient_id": f"PT{patient:05d}",
                         "study_date": f"20{int(rng.integers(10, 16))}-"
                                       f"{int(rng.integers(1, 13)):02d}-"
                                       f"{int(rng.integers(1, 29)):02d}"})
            k += 1
    write_csv(out / "studies.csv", ["study_id", "patient_id", "study_date"], rows)
    return finish(out, spec)
