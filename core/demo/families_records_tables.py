"""Record-style layout families whose labels sit in a table (or a JSON mapping) beside the images,
written the way public sets ship them:

* CheXpert-v1.0-small (``make_chexpert_table``): ``CheXpert-v1.0-small/train.csv`` and
  ``valid.csv`` (``Path, Sex, Age, Frontal/Lateral, AP/PA`` and the 14 observations, each
  ``1.0`` / ``0.0`` / ``-1.0`` (uncertain) / blank (not mentioned); valid.csv has 0/1 only),
  ``Path`` repeating the root folder's name (``CheXpert-v1.0-small/train/patient00001/study1/
  view1_frontal.jpg``); labels are per study, repeated on every view row; valid patients are
  numbered from patient64541. Signal: Pleural Effusion = dense (bright) lung bases, a band at
  the bottom; Cardiomegaly = a wide, bright central heart; drawn independently.
* Pairs table (``make_pairs_table``): thyroid ultrasound ``scans/<32 hex>.png`` and 0/255
  masks ``annotations/<uuid>.png`` whose names have nothing in common; ``pairs.csv``
  (``image, mask, patient``, rows shuffled) says which mask belongs to which image and whose
  frame it is (two to four frames per patient). Signal: a dark oval nodule with a bright rim.
* labels.json + .npy (``make_labels_json_npy``): head CT ``volumes/CT_<8 hex>.npy`` (int16 HU,
  (16, 32, 32), z first), ``labels.json`` {stem: haemorrhage | normal} and ``patients.csv``
  (``scan, patient_id, age, sex``); some patients have a follow-up scan. Signal: a hyperdense
  (~75 HU) blob or crescent in the brain.
* LGG kaggle_3m with clinical table (``make_masks_and_clinical``): ``kaggle_3m/<case>/<case>_<k>
  .tif`` (RGB: pre-contrast, FLAIR, post-contrast) and ``<case>_<k>_mask.tif`` (0/255), case =
  ``TCGA_<site>_<patient>_<date>``, and ``kaggle_3m/data.csv`` with one row per patient in the
  real file's columns and numeric codes (floats, some blanks; ``neoplasm_histologic_grade``
  1.0 = G2, 2.0 = G3, blank for a few patients). Signal: the tumour is bright on FLAIR; a G3
  tumour is heterogeneous on FLAIR with a ring-enhancing rim and dark core after contrast,
  a G2 tumour homogeneous and not enhancing.

The chest radiographs (frontal and lateral) are drawn by ``families_records_json.cxr``.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from core.demo.chest_xray import _ellipse
from core.demo.families_common import group_sizes, random_id, smooth_field, unique_ids
from core.demo.families_records_json import HEX, cxr
from core.demo.segmentation import _blob, _smooth
from core.demo.writers import finish, pick, prepare, save_png, scaled, write_csv, write_json



# ------------------------------------------------------------------------------- CheXpert
CHEXPERT = "CheXpert-v1.0-small"
OBSERVATIONS = ["No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity",
                "Lung Lesion", "Edema", "Consolidation", "Pneumonia", "Atelectasis",
                "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
                "Support Devices"]
CHEXPERT_COLUMNS = ["Path", "Sex", "Age", "Frontal/Lateral", "AP/PA"] + OBSERVATIONS
EFFUSION_CODES = ("1.0", "0.0", "", "1.0", "-1.0", "0.0", "", "1.0", "", "0.0")   # per study
CARDIO_CODES = ("", "1.0", "0.0", "", "1.0", "-1.0", "", "0.0", "1.0")           # (coprime)
CHEXPERT_STUDIES = (1, 2, 1, 3, 1, 2)          # studies per training patient, cycled


def chexpert_plan(n_patients: int) -> list[dict]:
    """One row per image, fixed by the patient count: split, patient, study, view, lateral and
    the Pleural Effusion / Cardiomegaly codes (per study, repeated on each view)."""
    n_valid = max(4, round(n_patients * 0.12))
    n_train = n_patients - n_valid
    rows, s = [], 0
    for p in range(n_patients):
        valid = p >= n_train
        patient = f"patient{(64541 + p - n_train) if valid else p + 1:05d}"
        for study in range(1, 1 + (1 if valid else CHEXPERT_STUDIES[p % 6])):
            eff, card = EFFUSION_CODES[s % 10], CARDIO_CODES[s % 9]
            if valid:                                    # valid.csv: 0/1 only
                eff, card = ("1.0" if eff == "1.0" else "0.0"), ("1.0" if card == "1.0" else "0.0")
            for view in range(1, 3 if s % 4 == 1 else 2):
                rows.append({"split": "valid" if valid else "train", "patient": patient,
                             "study": f"study{study}", "view": view, "lateral": view == 2,
                             "Pleural Effusion": eff, "Cardiomegaly": card})
            s += 1
    return rows


def chexpert_counts(n_patients: int, finding: str) -> dict:
    """What a reading of one finding gives: rows without an uncertain (-1.0) code, blank taken
    as absent. {"n", "split", "classes", "patients"}."""
    rows = [r for r in chexpert_plan(n_patients) if r[finding] != "-1.0"]
    split: dict[str, int] = {}
    classes: dict[str, int] = {}
    for r in rows:
        key = "val" if r["split"] == "valid" else "train"
        split[key] = split.get(key, 0) + 1
        name = finding if r[finding] == "1.0" else f"No {finding}"
        classes[name] = classes.get(name, 0) + 1
    return {"n": len(rows), "split": split, "classes": classes,
            "patients": len({r["patient"] for r in rows})}


def make_chexpert_table(out_dir: str | Path, seed: int = 0, n: int = 120,
                        scale: float = 1.0) -> Path:
    """``n`` patients (CheXpert's unit), several studies and views each."""
    out = Path(out_dir)
    n = scaled(n, scale, 24)
    spec = {"family": "chexpert_table", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    tables: dict[str, list[dict]] = {"train": [], "valid": []}
    people: dict[str, tuple[str, int]] = {}
    study_state: dict[tuple[str, str], dict] = {}
    for r in chexpert_plan(n):
        sex, age = people.setdefault(r["patient"], (pick(rng, ["Male", "Female"]),
                                                    int(rng.integers(20, 86))))
        key = (r["patient"], r["study"])
        if key not in study_state:                       # findings drawn once per study
            codes = {o: "" for o in OBSERVATIONS}
            codes["Pleural Effusion"], codes["Cardiomegaly"] = r["Pleural Effusion"], \
                r["Cardiomegaly"]
            drawn = {f: codes[f] == "1.0" or (codes[f] == "-1.0" and rng.random() < 0.5)
                     for f in ("Pleural Effusion", "Cardiomegaly")}
            opacity = ((pick(rng, ["small", "large"]), pick(rng, ["right", "left"]))
                       if rng.random() < 0.3 else None)
            if opacity:
                codes["Lung Opacity"] = "1.0"
            for other in ("Edema", "Atelectasis", "Support Devices", "Pneumonia", "Fracture"):
                u = rng.random()
                codes[other] = "1.0" if u < 0.12 else "-1.0" if u < 0.17 else \
                    "0.0" if u < 0.25 else ""
            if drawn["Cardiomegaly"] and rng.random() < 0.4:
                codes["Enlarged Cardiomediastinum"] = "1.0"
            if r["split"] == "valid":
                codes = {o: "1.0" if v == "1.0" else "0.0" for o, v in codes.items()}
            if not any(v == "1.0" for o, v in codes.items() if o != "Support Devices"):
                codes["No Finding"] = "1.0"
            study_state[key] = {"codes": codes, "drawn": drawn, "opacity": opacity,
                                "age": age + int(key[1][5:]) - 1}
        state = study_state[key]
        name = f"view{r['view']}_{'lateral' if r['lateral'] else 'frontal'}.jpg"
        rel = f"{CHEXPERT}/{r['split']}/{r['patient']}/{r['study']}/{name}"
        pixels = cxr(rng, state["opacity"], state["drawn"]["Cardiomegaly"],
                     state["drawn"]["Pleural Effusion"], r["lateral"])
        save_png(pixels, out / rel, quality=90)
        tables[r["split"]].append({
            "Path": rel, "Sex": sex, "Age": state["age"],
            "Frontal/Lateral": "Lateral" if r["lateral"] else "Frontal",
            "AP/PA": "" if r["lateral"] else pick(rng, ["AP", "AP", "PA"]), **state["codes"]})
    for split, rows in tables.items():
        write_csv(out / CHEXPERT / f"{split}.csv", CHEXPERT_COLUMNS, rows)
    return finish(out, spec)


# ------------------------------------------------------------------------------ pairs table
PAIR_GROUPS = (2, 3, 4, 3)                   # frames per patient, cycled


def thyroid_frame(rng: np.random.Generator, lesion: bool, size: int = 64):
    """(B-mode frame uint8, mask uint8 0/255): speckled gland between neck muscles, a dark oval
    nodule with a thin bright halo."""
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w]
    tissue = 0.32 + 0.18 * (yy > h * 0.06) + 0.06 * smooth_field(rng, h, w, 9)
    gland = _ellipse(h, w, h * 0.55, w * 0.5, h * 0.3, w * 0.42)
    tissue = np.where(gland, tissue + 0.12, tissue * 0.8)
    mask = np.zeros((h, w), bool)
    if lesion:
        cy, cx = h * rng.uniform(0.45, 0.65), w * rng.uniform(0.32, 0.68)
        ry, rx = h * rng.uniform(0.1, 0.17), w * rng.uniform(0.12, 0.2)
        mask = _blob((h, w), (cy, cx), (ry, rx), rng, wobble=0.25)
        ring = _blob((h, w), (cy, cx), (ry + 2, rx + 2), rng, wobble=0.0) & ~mask
        tissue = np.where(ring, 0.85, tissue)
        tissue = np.where(mask, 0.12 + 0.04 * smooth_field(rng, h, w, 4), tissue)
        tissue[(yy > cy + ry) & (np.abs(xx - cx) < rx * 0.7)] *= 1.25   # enhancement behind
    speckle = rng.rayleigh(0.5, (h, w)) / 0.63
    img = np.clip(tissue * speckle * rng.uniform(0.85, 1.15), 0, 1)
    return (img * 255).round().astype(np.uint8), mask.astype(np.uint8) * 255


def pairs_counts(n: int) -> dict:
    groups = group_sizes(n, PAIR_GROUPS)
    return {"n": n, "patients": len(groups),
            "empty": sum(1 for k in range(n) if k % 9 == 7)}


def make_pairs_table(out_dir: str | Path, seed: int = 0, n: int = 300,
                     scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 48)
    spec = {"family": "pairs_table", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = group_sizes(n, PAIR_GROUPS)
    patients = unique_ids(rng, len(groups), 1, 1000)
    rows, k = [], 0
    for patient, frames in zip(patients, groups):
        for _ in range(frames):
            image = f"scans/{random_id(rng, 32, HEX)}.png"
            mask = "annotations/" + "-".join(random_id(rng, m, HEX) for m in (8, 4, 4, 4, 12)) \
                + ".png"
            pixels, outline = thyroid_frame(rng, lesion=k % 9 != 7)
            save_png(pixels, out / image)
            save_png(outline, out / mask)
            rows.append({"image": image, "mask": mask, "patient": patient})
            k += 1
    write_csv(out / "pairs.csv", ["image", "mask", "patient"],
              [rows[i] for i in rng.permutation(len(rows))])
    return finish(out, spec)


# ------------------------------------------------------------------- head CT, labels.json
HEAD_SHAPE = (16, 32, 32)
HEAD_GROUPS = (1, 2, 1, 1, 2)                 # scans per patient, cycled


def head_ct(rng: np.random.Generator, bleed: bool, shape=HEAD_SHAPE) -> np.ndarray:
    """int16 HU, (z, y, x): air, skull, brain ~35 HU, ventricles ~8 HU; a haemorrhage is a
    ~75 HU blob in the parenchyma or a crescent under the skull."""
    d, h, w = shape
    c = (d / 2 + rng.uniform(-0.5, 0.5), h / 2 + rng.uniform(-1, 1), w / 2 + rng.uniform(-1, 1))
    radii = (d * 0.62, h * 0.44, w * 0.38)
    head = _blob(shape, c, radii, rng, wobble=0.02)
    brain = _blob(shape, c, [r - 1.6 for r in radii], rng, wobble=0.02)
    hu = np.where(head, 900.0, -1000.0)
    hu[brain] = 35.0
    for sign in (-1, 1):
        hu[_blob(shape, (c[0], c[1] - 1, c[2] + sign * 2.2), (d * 0.25, h * 0.12, w * 0.05),
                 rng, 0.1) & brain] = 8.0
    if bleed:
        if rng.random() < 0.6:                   # intraparenchymal
            zs, ys, xs = np.nonzero(brain & (hu > 20))
            i = int(rng.integers(0, len(zs)))
            r = rng.uniform(3.0, 4.5)
            blood = _blob(shape, (zs[i], ys[i], xs[i]), (r * 0.6, r, r), rng, 0.2) & brain
        else:                                    # subdural crescent along one side
            inner = _blob(shape, c, [r - 3.6 for r in radii], rng, wobble=0.02)
            side = np.zeros(shape, bool)
            half = slice(0, w // 2) if rng.random() < 0.5 else slice(w // 2, w)
            side[:, :, half] = True
            blood = brain & ~inner & side
        hu[blood] = 75.0
    hu += 4 * _smooth(rng, shape, 1.0) * brain + rng.normal(0, 3, shape) * head
    return np.round(hu).astype(np.int16)


def head_counts(n: int) -> dict:
    groups = group_sizes(n, HEAD_GROUPS)
    bleed = sum(size for g, size in enumerate(groups) if g % 5 in (0, 2, 3))
    return {"n": n, "patients": len(groups),
            "classes": {"haemorrhage": bleed, "normal": n - bleed}}


def make_labels_json_npy(out_dir: str | Path, seed: int = 0, n: int = 160,
                         scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 36)
    spec = {"family": "labels_json_npy", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    groups = group_sizes(n, HEAD_GROUPS)
    labels, rows = {}, []
    for g, scans in enumerate(groups):
        patient = f"ID_{random_id(rng, 10, HEX)}"
        bleed = g % 5 in (0, 2, 3)
        age, sex = int(rng.integers(18, 92)), pick(rng, ["M", "F"])
        for _ in range(scans):
            stem = f"CT_{random_id(rng, 8, HEX)}"
            (out / "volumes").mkdir(parents=True, exist_ok=True)
            np.save(out / "volumes" / f"{stem}.npy", head_ct(rng, bleed))
            labels[stem] = "haemorrhage" if bleed else "normal"
            rows.append({"scan": stem, "patient_id": patient, "age": age, "sex": sex})
    write_json(out / "labels.json", labels)
    write_csv(out / "patients.csv", ["scan", "patient_id", "age", "sex"], rows)
    return finish(out, spec)


# ------------------------------------------------------------- LGG kaggle_3m + data.csv
LGG3_SIZE = 64
LGG3_SLICES = (6, 8, 5, 7)                    # slices per case, cycled
LGG_COLUMNS = ["Patient", "RNASeqCluster", "MethylationCluster", "miRNACluster", "CNCluster",
               "RPPACluster", "OncosignCluster", "COCCluster", "histological_type",
               "neoplasm_histologic_grade", "tumor_tissue_site", "laterality",
               "tumor_location", "gender", "age_at_initial_pathologic", "race", "ethnicity",
               "death01"]


def lgg_grade(g: int) -> str:
    """The grade code of the g-th patient: 1.0 (G2) or 2.0 (G3), blank for every 13th."""
    return "" if g % 13 == 6 else "2.0" if g % 2 else "1.0"


def lgg_counts(n: int) -> dict:
    depths = group_sizes(n, LGG3_SLICES)
    graded = [(d, lgg_grade(g)) for g, d in enumerate(depths) if lgg_grade(g)]
    return {"n": n, "patients": len(depths), "graded": sum(d for d, _ in graded),
            "graded_patients": len(graded),
            "classes": {"G2": sum(d for d, c in graded if c == "1.0"),
                        "G3": sum(d for d, c in graded if c == "2.0")}}


def lgg_grade_case(rng: np.random.Generator, depth: int, grade3: bool, size: int = LGG3_SIZE):
    """(depth, H, W, 3) uint8 slices and (depth, H, W) uint8 0/255 masks; the tumour spans
    most slices."""
    shape = (depth, size, size)
    c = (depth / 2 + rng.uniform(-0.3, 0.3), size / 2 + rng.uniform(-2, 2),
         size / 2 + rng.uniform(-2, 2))
    head_r = (depth * 0.7, size * 0.42, size * 0.36)
    head = _blob(shape, c, head_r, rng, wobble=0.02)
    brain = _blob(shape, c, [r * 0.86 for r in head_r], rng, wobble=0.03)
    wm = _blob(shape, c, [r * 0.6 for r in head_r], rng, wobble=0.2) & brain
    side = 1 if rng.random() < 0.5 else -1
    tc = (c[0] + rng.uniform(-0.5, 0.5), c[1] + rng.uniform(-6, 6), c[2] + side * size * 0.14)
    radii = (depth * rng.uniform(0.4, 0.5), size * rng.uniform(0.11, 0.17),
             size * rng.uniform(0.11, 0.17))
    tumour = _blob(shape, tc, radii, rng, wobble=0.3) & brain
    core = _blob(shape, tc, [r * 0.55 for r in radii], rng, wobble=0.2) & tumour
    texture = _smooth(rng, shape, 1.0)
    channels = []
    for k, levels in enumerate(((0.6, 0.42, 0.52), (0.3, 0.5, 0.4), (0.65, 0.45, 0.55))):
        vol = np.zeros(shape, np.float32)
        vol[head], vol[brain], vol[wm] = levels
        if k == 1:                                 # FLAIR: bright tumour
            vol[tumour] = 0.85 + (0.12 * texture[tumour] if grade3 else 0.0)
        elif k == 2:                               # post-contrast: G3 rim enhances, core dark
            vol[tumour] = 0.95 if grade3 else 0.5
            if grade3:
                vol[core] = 0.2
        else:
            vol[tumour] = 0.35 if grade3 else 0.45
        vol += 0.04 * _smooth(rng, shape, 2.0) * head + rng.normal(0, 0.02, shape)
        channels.append(np.clip(vol * rng.uniform(0.9, 1.08), 0, 1))
    pixels = (np.stack(channels, -1) * 255).round().astype(np.uint8)
    return pixels, tumour.astype(np.uint8) * 255


def _code(rng: np.random.Generator, values: range, blank: float = 0.0) -> str:
    return "" if rng.random() < blank else f"{float(rng.choice(list(values))):.1f}"


def make_masks_and_clinical(out_dir: str | Path, seed: int = 0, n: int = 680,
                            scale: float = 1.0) -> Path:
    """``n`` slices in cases of five to eight slices."""
    out = Path(out_dir)
    n = scaled(n, scale, 160)
    spec = {"family": "masks_and_clinical", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    root = out / "kaggle_3m"
    depths = group_sizes(n, LGG3_SLICES)
    rows = []
    for g, (patient, depth) in enumerate(zip(unique_ids(rng, len(depths), 1000, 9999), depths)):
        site = pick(rng, ["CS", "DU", "EZ", "FG", "HT"])
        date = f"{int(rng.integers(1992, 2002))}{int(rng.integers(1, 13)):02d}" \
               f"{int(rng.integers(1, 29)):02d}"
        case = f"TCGA_{site}_{patient}_{date}"
        grade = lgg_grade(g)
        grade3 = grade == "2.0" if grade else bool(rng.random() < 0.5)
        pixels, masks = lgg_grade_case(rng, depth, grade3)
        (root / case).mkdir(parents=True, exist_ok=True)
        for k in range(depth):
            Image.fromarray(pixels[k], mode="RGB").save(root / case / f"{case}_{k + 1}.tif")
            Image.fromarray(masks[k], mode="L").save(root / case / f"{case}_{k + 1}_mask.tif")
        rows.append({"Patient": f"TCGA_{site}_{patient}",
                     "RNASeqCluster": _code(rng, range(1, 7), 0.2),
                     "MethylationCluster": _code(rng, range(1, 6), 0.05),
                     "miRNACluster": str(int(rng.integers(1, 5))),
                     "CNCluster": _code(rng, range(1, 4), 0.03),
                     "RPPACluster": _code(rng, range(1, 7), 0.35),
                     "OncosignCluster": _code(rng, range(1, 4), 0.1),
                     "COCCluster": str(int(rng.integers(1, 4))),
                     "histological_type": _code(rng, range(1, 4), 0.02),
                     "neoplasm_histologic_grade": grade, "tumor_tissue_site": "1.0",
                     "laterality": _code(rng, range(1, 4), 0.03),
                     "tumor_location": _code(rng, range(1, 7), 0.05),
                     "gender": _code(rng, range(1, 3)),
                     "age_at_initial_pathologic": f"{float(rng.integers(20, 76)):.1f}",
                     "race": _code(rng, [3, 3, 3, 2, 1], 0.05),
                     "ethnicity": _code(rng, [2, 2, 2, 1], 0.1),
                     "death01": _code(rng, [0, 0, 1], 0.01)})
    write_csv(root / "data.csv", LGG_COLUMNS, rows)
    return finish(out, spec)


