"""Layout families for 2D classification, written the way public sets ship them:

* JSON sidecar (``make_json_sidecar``): ISIC-archive-like dermoscopy, ``data/ISIC_NNNNNNN.png``
  with ``data/ISIC_NNNNNNN.json`` beside it (``isic_id, patient_id, lesion_id, diagnosis``
  (melanoma | nevus), ``benign_malignant``, ``age_approx``, ``sex``, ``anatom_site_general``,
  ``diagnosis_confirm_type``, ``image_type``); some patients have two or three images. Signal:
  melanomas are larger, irregular and multicoloured (black patches, blue-grey veil), naevi small,
  round and evenly brown; hairs on both.
* Multi-sheet spreadsheet (``make_multisheet_xlsx``): fundus photographs ``images/P0012_OD.jpg``
  (right eye) / ``_OS.jpg`` (left eye) and ``labels.xlsx`` whose first sheet ``README`` is prose
  and second sheet ``Labels`` has ``Image, PatientID, Eye, Age, Finding`` (``No DR`` |
  ``Referable DR``); most patients have both eyes. Signal: red haemorrhages and yellow exudates.
* MedMNIST (``make_medmnist_npz``): one ``<flag>.npz`` with ``train_images, train_labels,
  val_images, val_labels, test_images, test_labels`` (uint8, images (N, 28, 28), labels (N, 1)).
  ``breastmnist`` (default): breast ultrasound, 0 = malignant, 1 = normal or benign;
  ``pneumoniamnist``: chest X-ray, 0 = normal, 1 = pneumonia.
* Kermany chest X-ray names (``make_chest_xray_names``): ``chest_xray/{train,val,test}/
  {NORMAL,PNEUMONIA}/`` with ``IM-0119-0001.jpeg`` / ``NORMAL2-IM-0381-0001.jpeg`` (patient 0119,
  image 1) and ``person12_bacteria_47.jpeg`` / ``person30_virus_69.jpeg`` (patient 12 or 30,
  running image number); several images per patient, the split is patient-disjoint, frame sizes
  vary, a few JPEGs are RGB, and macOS left ``.DS_Store`` files. Signal: patchy opacities and a
  lobar consolidation in pneumonia.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import datetime
import io
import json
import re
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

from core.demo.chest_xray import chest_image
from core.demo.families_common import (disc, freeze_zip, group_sizes, save_rgb, smooth_field,
                                       unique_ids)
from core.demo.writers import finish, pick, prepare, scaled

FIXED_TIME = "2023-04-01T09:00:00Z"


def _hairs(rng: np.random.Generator, img: np.ndarray, count: int) -> None:
    h, w, _ = img.shape
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(count):
        y0, x0, angle = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(0, np.pi)
        bend = rng.uniform(-0.01, 0.01)
        along = (xx - x0) * np.cos(angle) + (yy - y0) * np.sin(angle)
        across = -(xx - x0) * np.sin(angle) + (yy - y0) * np.cos(angle) - bend * along ** 2
        img[(np.abs(across) < 0.6) & (np.abs(along) < rng.uniform(15, 40))] *= 0.35


# ---------------------------------------------------------------------------- JSON sidecars
def dermoscopy_image(rng: np.random.Generator, melanoma: bool, size: int = 96) -> np.ndarray:
    h = w = size
    skin = np.array([0.88, 0.68, 0.58]) * rng.uniform(0.9, 1.05, 3)
    img = skin * (1 + 0.05 * smooth_field(rng, h, w, 10))[..., None]
    cy, cx = h / 2 + rng.uniform(-8, 8), w / 2 + rng.uniform(-8, 8)
    if melanoma:
        r = rng.uniform(20, 28)
        lesion = disc(h, w, cy, cx, r * rng.uniform(0.7, 1.0), r * rng.uniform(0.8, 1.0),
                      0.5 * smooth_field(rng, h, w, 7))
        colour = np.array([0.42, 0.26, 0.17])
    else:
        r = rng.uniform(11, 18)
        lesion = disc(h, w, cy, cx, r * rng.uniform(0.85, 1.0), r * rng.uniform(0.85, 1.0),
                      0.05 * smooth_field(rng, h, w, 12))
        colour = np.array([0.58, 0.38, 0.25])
    soft = gaussian_filter(lesion.astype(np.float32), 1.0 if melanoma else 0.7)
    tone = colour * rng.uniform(0.9, 1.1) * (1 + 0.06 * smooth_field(rng, h, w, 4))[..., None]
    img = img * (1 - soft[..., None]) + tone * soft[..., None]
    if melanoma:                       # black blotches and a blue-grey veil, off-centre
        dark = lesion & (smooth_field(rng, h, w, 6) > 0.4)
        img[dark] = np.array([0.13, 0.09, 0.08]) * rng.uniform(0.8, 1.2)
        veil = lesion & (smooth_field(rng, h, w, 8) > 0.7)
        img[veil] = 0.5 * img[veil] + 0.5 * np.array([0.45, 0.5, 0.62])
    _hairs(rng, img, int(rng.integers(0, 5)))
    if rng.random() < 0.5:             # the round field of a contact dermatoscope
        img[~disc(h, w, h / 2, w / 2, h * 0.56, w * 0.56)] = 0.02
    return np.clip(img + rng.normal(0, 0.015, img.shape), 0, 1)


SITES = ["posterior torso", "anterior torso", "lower extremity", "upper extremity", "head/neck"]


def make_json_sidecar(out_dir: str | Path, seed: int = 0, n: int = 100,
                      scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 8)
    spec = {"family": "json_sidecar", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = group_sizes(n)
    patients = unique_ids(rng, len(groups), 1000000, 9999999)
    isic = unique_ids(rng, n, 0, 80000)
    lesions = unique_ids(rng, n, 1000000, 9999999)
    k = 0
    for g, (patient, members) in enumerate(zip(patients, groups)):
        age, sex = int(rng.integers(5, 17)) * 5, pick(rng, ["male", "female"])
        for _ in range(members):
            melanoma = k % 5 in (1, 3)                       # 40% melanoma
            ident = f"ISIC_{isic[k]:07d}"
            save_rgb(dermoscopy_image(rng, melanoma), out / "data" / f"{ident}.png")
            meta = {"isic_id": ident, "patient_id": f"IP_{patient}",
                    "lesion_id": f"IL_{lesions[k]}",
                    "diagnosis": "melanoma" if melanoma else "nevus",
                    "benign_malignant": "malignant" if melanoma else "benign",
                    "age_approx": age, "sex": sex, "anatom_site_general": pick(rng, SITES),
                    "diagnosis_confirm_type": "histopathology" if melanoma or rng.random() < 0.3
                    else "serial imaging showing no change", "image_type": "dermoscopic"}
            (out / "data" / f"{ident}.json").write_text(json.dumps(meta, indent=2) + "\n")
            k += 1
    return finish(out, spec)


def read_json_sidecar(root: Path) -> dict[str, dict]:
    return {f"data/{p.stem}.png": json.loads(p.read_text())
            for p in sorted((root / "data").glob("*.json"))}


# ----------------------------------------------------------------------- multi-sheet xlsx
def fundus_image(rng: np.random.Generator, dr: bool, right_eye: bool,
                 size: int = 96) -> np.ndarray:
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = h / 2, w / 2
    radial = np.hypot(yy - cy, xx - cx) / (h * 0.46)
    retina = np.array([0.82, 0.36, 0.14]) * rng.uniform(0.85, 1.1, 3)
    img = retina * np.clip(1.1 - 0.45 * radial ** 2 + 0.05 * smooth_field(rng, h, w, 10),
                           0, 1)[..., None]
    side = 1 if right_eye else -1                 # the disc sits nasally
    dy, dx = cy + rng.uniform(-4, 4), cx + side * w * rng.uniform(0.24, 0.3)
    img[disc(h, w, cy + rng.uniform(-3, 3), cx - side * w * 0.06, h * 0.08, w * 0.08)] *= 0.7
    for k in range(4):                            # vessels arching from the disc
        heading = (np.pi if side > 0 else 0.0) + (-1) ** k * rng.uniform(0.5, 1.1)
        y, x, width = dy, dx, rng.uniform(0.9, 1.4)
        vessel = np.zeros((h, w), bool)
        for _ in range(60):
            heading += rng.normal(0, 0.08) - 0.02 * (-1) ** k * side
            y, x = y + np.sin(heading), x + np.cos(heading)
            y0, x0 = max(int(y) - 2, 0), max(int(x) - 2, 0)
            vessel[y0:y0 + 5, x0:x0 + 5] |= np.hypot(yy[y0:y0 + 5, x0:x0 + 5] - y,
                                                     xx[y0:y0 + 5, x0:x0 + 5] - x) < width
        img[vessel] = np.array([0.55, 0.12, 0.07])
    img[disc(h, w, dy, dx, h * 0.075, w * 0.075)] = np.array([1.0, 0.86, 0.58])
    if dr:
        for _ in range(int(rng.integers(5, 12))):      # haemorrhages and microaneurysms
            r, a = rng.uniform(0.05, 0.4) * h, rng.uniform(0, 2 * np.pi)
            spot = np.hypot(yy - cy - r * np.sin(a), xx - cx - r * np.cos(a))
            img[spot < rng.uniform(1.2, 3.0)] = np.array([0.4, 0.05, 0.04])
        for _ in range(int(rng.integers(3, 9))):       # hard exudates
            r, a = rng.uniform(0.05, 0.35) * h, rng.uniform(0, 2 * np.pi)
            spot = np.hypot(yy - cy - r * np.sin(a), xx - cx - r * np.cos(a))
            img[spot < rng.uniform(1.2, 2.4)] = np.array([1.0, 0.92, 0.45])
    img[radial > 1.0] = 0.0
    return np.clip(img + rng.normal(0, 0.015, img.shape), 0, 1)


README_ROWS = [
    "Diabetic retinopathy screening photographs - label sheet",
    "",
    "One colour fundus photograph per eye, 45-degree field, centred on the macula.",
    ("Images are in the images/ folder; the file name is PatientID_OD (right eye) or "
     "PatientID_OS (left eye)."),
    "The grades are on the sheet 'Labels' (one row per image).",
    ("Finding: 'No DR' = no or mild non-proliferative retinopathy; 'Referable DR' = moderate "
     "or worse, or any exudates near the macula."),
    "Grading: two certified graders, disagreements adjudicated by a retina specialist.",
    "Contact: reading centre, screening programme.",
]


def _fixed_core_xml(name: str, data: bytes) -> bytes:
    if name != "docProps/core.xml":
        return data
    text = re.sub(r"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)",
                  lambda m: m.group(1) + FIXED_TIME + m.group(3), data.decode("utf-8"))
    return text.encode("utf-8")


def xlsx_patients(n: int) -> list[int]:
    """Eyes per patient: mostly both, every fourth patient one."""
    return group_sizes(n, (2, 2, 2, 1))


def make_multisheet_xlsx(out_dir: str | Path, seed: int = 0, n: int = 100,
                         scale: float = 1.0) -> Path:
    from openpyxl import Workbook

    out = Path(out_dir)
    n = scaled(n, scale, 8)
    spec = {"family": "multisheet_xlsx", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = xlsx_patients(n)
    patients = unique_ids(rng, len(groups), 10, 9999)
    rows = []
    for g, (patient, eyes) in enumerate(zip(patients, groups)):
        dr_patient = g % 5 in (0, 2)                            # 40% of patients
        age = int(rng.integers(35, 80))
        for eye in ("OD", "OS")[:eyes]:
            dr = dr_patient if rng.random() < 0.85 else not dr_patient
            name = f"P{patient:04d}_{eye}.jpg"
            save_rgb(fundus_image(rng, dr, eye == "OD"), out / "images" / name, quality=93)
            rows.append([name, f"P{patient:04d}", eye, age, "Referable DR" if dr else "No DR"])
    wb = Workbook()
    wb.properties.creator = "Reading centre"
    wb.properties.created = datetime.datetime(2023, 4, 1, 9, 0, 0)
    notes = wb.active
    notes.title = "README"
    for text in README_ROWS:
        notes.append([text])
    notes.column_dimensions["A"].width = 100
    labels = wb.create_sheet("Labels")
    labels.append(["Image", "PatientID", "Eye", "Age", "Finding"])
    for row in rows:
        labels.append(row)
    wb.save(out / "labels.xlsx")
    freeze_zip(out / "labels.xlsx", _fixed_core_xml)
    return finish(out, spec)


def read_xlsx(root: Path) -> tuple[list[str], list[dict]]:
    """(sheet names, rows of the 'Labels' sheet as dicts)."""
    from openpyxl import load_workbook

    wb = load_workbook(root / "labels.xlsx", read_only=True)
    sheet = list(wb["Labels"].iter_rows(values_only=True))
    names = wb.sheetnames
    wb.close()
    return names, [dict(zip(sheet[0], r)) for r in sheet[1:]]


# -------------------------------------------------------------------------------- MedMNIST
MEDMNIST = {"breastmnist": ("malignant", "normal or benign"),
            "pneumoniamnist": ("normal", "pneumonia")}


def breast_ultrasound(rng: np.random.Generator, kind: str, size: int = 56) -> np.ndarray:
    """B-mode-like breast ultrasound in [0, 1]: speckle, skin line, tissue layers; a benign mass
    is an oval, wider-than-tall, smooth hypoechoic lesion with brighter tissue behind it, a
    malignant one irregular, taller than wide, with an acoustic shadow below."""
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w]
    layers = 0.25 + 0.25 * (yy > h * 0.08) + 0.15 * np.sin(yy / h * 6 + smooth_field(rng, h, w,
                                                                                       8))
    img = layers * (1 - 0.35 * (yy > h * 0.85))
    if kind != "normal":
        cy, cx = h * rng.uniform(0.4, 0.6), w * rng.uniform(0.35, 0.65)
        if kind == "malignant":
            ry, rx = h * rng.uniform(0.13, 0.2), w * rng.uniform(0.1, 0.15)
            mass = disc(h, w, cy, cx, ry, rx, 0.6 * smooth_field(rng, h, w, 3))
            img[(yy > cy) & (np.abs(xx - cx) < rx * 0.8)] *= 0.45          # shadow
        else:
            ry, rx = h * rng.uniform(0.08, 0.12), w * rng.uniform(0.15, 0.22)
            mass = disc(h, w, cy, cx, ry, rx, 0.05 * smooth_field(rng, h, w, 8))
            img[(yy > cy + ry) & (np.abs(xx - cx) < rx * 0.8)] *= 1.4      # enhancement
        img[mass] = 0.08
    speckle = rng.rayleigh(0.5, (h, w)) / 0.63
    return np.clip(gaussian_filter(img * speckle, 0.6) * rng.uniform(0.85, 1.15), 0, 1)


def medmnist_split(n: int) -> dict[str, int]:
    n_train, n_val = round(n * 0.7), max(1, round(n * 0.1))
    return {"train": n_train, "val": n_val, "test": n - n_train - n_val}


def medmnist_image(rng: np.random.Generator, flag: str, label: int) -> np.ndarray:
    if flag == "breastmnist":
        kind = "malignant" if label == 0 else pick(rng, ["benign", "benign", "normal"])
        pixels = (breast_ultrasound(rng, kind) * 255).astype(np.uint8)
    else:
        pixels = chest_image(rng, pneumonia=bool(label), size=56)
    return np.asarray(Image.fromarray(pixels, mode="L").resize((28, 28), Image.BILINEAR))


def make_medmnist_npz(out_dir: str | Path, seed: int = 0, n: int = 120, scale: float = 1.0,
                      flag: str = "breastmnist") -> Path:
    if flag not in MEDMNIST:
        raise ValueError(f"flag must be one of {', '.join(MEDMNIST)}")
    out = Path(out_dir)
    n = scaled(n, scale, 10)
    spec = {"family": "medmnist_npz", "flag": flag, "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, count in medmnist_split(n).items():
        labels = np.array([(k % 5 in (1, 3)) == (flag == "pneumoniamnist") for k in
                           range(count)], np.uint8)                  # 40% of the first class
        labels = 1 - labels if flag == "breastmnist" else labels
        labels = labels[rng.permutation(count)]
        arrays[f"{split}_images"] = np.stack([medmnist_image(rng, flag, int(v)) for v in labels])
        arrays[f"{split}_labels"] = labels.reshape(-1, 1)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    (out / f"{flag}.npz").write_bytes(buffer.getvalue())
    freeze_zip(out / f"{flag}.npz")
    return finish(out, spec)


# ------------------------------------------------------------------- Kermany chest X-rays
def chest_xray_patients(n: int) -> dict[str, list[int]]:
    """Images per patient and class: 40% NORMAL, 60% PNEUMONIA."""
    n_normal = round(n * 0.4)
    return {"NORMAL": group_sizes(n_normal, (1, 2, 1, 3)),
            "PNEUMONIA": group_sizes(n - n_normal, (2, 1, 3, 1, 2))}


def chest_xray_split(index: int) -> str:
    """Patient-level split: the first patient of each class goes to val, every fourth to test."""
    return "val" if index == 0 else "test" if index % 4 == 2 else "train"


def paediatric_chest(rng: np.random.Generator, pneumonia: bool, size: int) -> np.ndarray:
    """A chest radiograph (core.demo.chest_xray); pneumonia adds a lobar consolidation, a dense
    patch in one lung, on top of the patchy opacities."""
    pixels = chest_image(rng, pneumonia=pneumonia, size=size).astype(np.float32)
    if pneumonia:
        yy, xx = np.mgrid[0:size, 0:size]
        side = 1 if rng.random() < 0.5 else -1
        cy = size * (0.5 + rng.uniform(-0.15, 0.2))
        cx = size * (0.5 + side * rng.uniform(0.15, 0.23))
        sigma = size * rng.uniform(0.07, 0.1)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma ** 2))
        pixels += 255 * rng.uniform(0.2, 0.28) * blob
    return np.clip(pixels, 0, 255).astype(np.uint8)


def make_chest_xray_names(out_dir: str | Path, seed: int = 0, n: int = 120,
                          scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 12)
    spec = {"family": "chest_xray_names", "n": n, "seed": seed, "v": 2}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    root = out / "chest_xray"
    running = 1
    for label, groups in chest_xray_patients(n).items():
        ids = sorted(unique_ids(rng, len(groups), 1, 1500))
        for p, (patient, count) in enumerate(zip(ids, groups)):
            folder = root / chest_xray_split(p) / label
            folder.mkdir(parents=True, exist_ok=True)
            kind = pick(rng, ["bacteria", "bacteria", "virus"])
            prefix = "NORMAL2-" if label == "NORMAL" and p % 3 == 1 else ""
            for k in range(1, count + 1):
                if label == "NORMAL":
                    name = f"{prefix}IM-{patient:04d}-{k:04d}.jpeg"
                else:
                    running += int(rng.integers(1, 4))
                    name = f"person{patient}_{kind}_{running}.jpeg"
                side = int(rng.choice([96, 112, 128]))
                pixels = paediatric_chest(rng, label == "PNEUMONIA", side)
                pixels = pixels[: side - int(rng.integers(0, 17))]          # landscape frames
                img = Image.fromarray(pixels, mode="L")
                img = img.convert("RGB") if rng.random() < 0.1 else img
                img.save(folder / name, quality=90)
    for folder in (root, root / "train"):
        (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(24))
    return finish(out, spec)


def chest_xray_patient(name: str) -> str:
    """The patient in a Kermany file name: IM-0119-0001 -> 0119, person12_virus_3 -> person12."""
    match = re.match(r"(?:NORMAL2-)?IM-(\d+)-\d+", name)
    return f"IM-{match.group(1)}" if match else name.split("_")[0]
