"""Batch 5, 2D generators: ISIC 2020 (SIIM-ISIC Melanoma Classification), RFMiD, object-CXR
and Harvard FairVLMed (see ``batch5.py`` for the documentation each follows). Each writes a
small folder in the layout the public dataset ships in and returns the dataset root. Written
from the datasets' public documentation only; no code of the app is imported."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .batch4_common import seg_line
from .batch5_common import save_dicom_rgb, save_npz, write_table
from .common import chest_background, disk, ellipse, mkdir, rng_for, save_jpg, save_png, to_u8, uid

# ============================================================================ ISIC 2020

ISIC_COLS = ["image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge",
             "diagnosis", "benign_malignant", "target"]
ISIC_SITES = ["torso", "torso", "lower extremity", "upper extremity", "head/neck",
              "palms/soles", "oral/genital", ""]
ISIC_BENIGN_DX = ["unknown"] * 8 + ["nevus"] * 3 + [
    "seborrheic keratosis", "lentigo NOS", "lichenoid keratosis", "solar lentigo",
    "cafe-au-lait macule", "atypical melanocytic proliferation"]


def _isic_lesion(rng, malignant, h=48, w=64):
    """Dermoscopy look-alike: skin, a few hairs, and a lesion: melanoma = large, asymmetric,
    several colours (dark brown, black, blue-grey veil), irregular border; benign = small,
    round, even light brown."""
    skin = np.array([0.88, 0.70, 0.60]) + rng.normal(0, 0.03, 3)
    img = np.ones((h, w, 3)) * skin + rng.normal(0, 0.015, (h, w, 3))
    cy, cx = h / 2 + rng.uniform(-4, 4), w / 2 + rng.uniform(-6, 6)
    if malignant:
        m = np.zeros((h, w), bool)
        for _ in range(5):
            m |= ellipse((h, w), cy + rng.uniform(-6, 6), cx + rng.uniform(-8, 8),
                         rng.uniform(5, 10), rng.uniform(5, 12))
        img[m] = [0.35, 0.20, 0.14]
        img[m & ellipse((h, w), cy + rng.uniform(-4, 4), cx + rng.uniform(-4, 4), 5, 6)] = \
            [0.12, 0.08, 0.08]
        img[m & (rng.random((h, w)) < 0.25)] = [0.35, 0.40, 0.55]
    else:
        r = rng.uniform(5, 8)
        m = ellipse((h, w), cy, cx, r, r * rng.uniform(0.9, 1.15))
        img[m] = [0.62, 0.42, 0.30] + rng.normal(0, 0.03, 3)
    for _ in range(int(rng.integers(0, 4))):  # hairs
        y0, x0 = rng.uniform(0, h), rng.uniform(0, w)
        a = rng.uniform(0, np.pi)
        img[seg_line((h, w), y0, x0, y0 + 30 * np.sin(a), x0 + 30 * np.cos(a), 0.7)] = 0.15
    return to_u8(img)


def make_isic2020(out_dir: Path, seed: int = 0) -> Path:
    """SIIM-ISIC Melanoma Classification 2020 (Kaggle 'siim-isic-melanoma-classification';
    Rotemberg et al., Sci Data 8:34, 2021; ISIC 2020 challenge dataset, doi:10.34970/2020-ds01):
    train.csv ('image_name,patient_id,sex,age_approx,anatom_site_general_challenge,diagnosis,
    benign_malignant,target'; target 1 = melanoma, diagnosis mostly 'unknown' for benign
    lesions, sex/age/site sometimes empty; patient ids 'IP_#######', several images per
    patient), every image twice: train/ISIC_#######.dcm (DICOM with the patient id, sex, age
    and site in the header) and jpeg/train/ISIC_#######.jpg; unlabelled test/ + jpeg/test/ with
    test.csv (no diagnosis/benign_malignant/target) and sample_submission.csv
    ('image_name,target'). Simplifications: 48x64 images (the originals are up to 6000x4000);
    DICOM pixels uncompressed RGB (JPEG-compressed in the release); the tfrecords/ folder left
    out; melanoma enriched to about a quarter of the images (1.8% in the release); 60 training
    images of 14 patients, 6 test images."""
    rng = rng_for(seed, "isic2020")
    root = mkdir(Path(out_dir) / "siim-isic-melanoma-classification")
    names = sorted(int(n) for n in rng.choice(np.arange(15000, 9999999), 66, replace=False))
    rng.shuffle(names)
    per_patient = [6, 5, 4, 5, 3, 4, 6, 4, 5, 3, 4, 5, 3, 3, 2, 2, 2]  # 14 train + 3 test
    mel_patients = {0, 2, 3, 5, 7, 9, 11, 12}
    rows, test_rows = [], []
    k = 0
    for p, n_img in enumerate(per_patient):
        test = p >= 14
        pid = f"IP_{int(rng.integers(1000000, 9999999))}"
        sex = "" if rng.random() < 0.03 else str(rng.choice(["male", "female"]))
        age = "" if rng.random() < 0.03 else f"{float(rng.integers(4, 18) * 5):.1f}"
        n_mel = 0 if (test or p not in mel_patients) else int(rng.choice([1, 2, 2, 3]))
        study = uid("1.3.6.1.4.1.5962.99.1", rng)
        for j in range(n_img):
            name = f"ISIC_{names[k]:07d}"
            k += 1
            mal = j < n_mel
            site = str(rng.choice(ISIC_SITES))
            dx = "melanoma" if mal else str(rng.choice(ISIC_BENIGN_DX))
            img = _isic_lesion(rng, mal if not test else bool(rng.random() < 0.3))
            sub = "test" if test else "train"
            save_jpg(root / "jpeg" / sub / f"{name}.jpg", img)
            save_dicom_rgb(root / sub / f"{name}.dcm", img, patient_id=pid, study_uid=study,
                           series_uid=f"{study}.{j + 1}", sop_uid=f"{study}.{j + 1}.1",
                           PatientSex={"male": "M", "female": "F"}.get(sex, ""),
                           PatientAge=f"{int(float(age)):03d}Y" if age else "",
                           BodyPartExamined=site.upper().replace("/", " ")[:16],
                           StudyDescription="Dermoscopy", ImageType=["ORIGINAL", "PRIMARY"])
            if test:
                test_rows.append([name, pid, sex, age, site])
            else:
                rows.append([name, pid, sex, age, site, dx, "malignant" if mal else "benign",
                             int(mal)])
    write_table(root / "train.csv", ISIC_COLS, rows)
    write_table(root / "test.csv", ISIC_COLS[:5], test_rows)
    write_table(root / "sample_submission.csv", ["image_name", "target"],
                [[r[0], 0] for r in test_rows])
    return root


# ============================================================================ RFMiD

RFMID_COLS = ["DR", "ARMD", "MH", "DN", "MYA", "BRVO", "TSLN", "ERM", "LS", "MS", "CSR", "ODC",
              "CRVO", "TV", "AH", "ODP", "ODE", "ST", "AION", "PT", "RT", "RS", "CRS", "EDN",
              "RPEC", "MHL", "RP", "CWS", "CB", "ODPM", "PRH", "MNF", "HR", "CRAO", "TD", "CME",
              "PTCR", "CF", "VH", "MCA", "VS", "BRAO", "PLQ", "HPED", "CL"]
RFMID_PRESENT = ["DR", "ARMD", "MH", "DN", "MYA", "ODC"]  # the conditions drawn here


def _rfmid_fundus(rng, found: set, s=64):
    """Colour fundus: orange-red field, optic disc, vessel arcades. DR: red dots and blots with
    yellow exudates; ARMD: pigment clump and drusen at the macula; MH: the whole image hazy and
    washed out; DN: scattered yellow drusen; MYA: pale tessellated fundus with a peripapillary
    crescent; ODC: a large pale cup."""
    yy, xx = np.mgrid[:s, :s]
    r = np.hypot(yy - s / 2, xx - s / 2)
    fov = r < s * 0.47
    base = np.array([0.62, 0.50, 0.45]) if "MYA" in found else np.array([0.78, 0.32, 0.12])
    img = np.zeros((s, s, 3))
    img[fov] = base * (1 - 0.45 * (r[fov] / (s * 0.47)) ** 2)[:, None]
    dx, dy = s * (0.7 if rng.random() < 0.5 else 0.3), s / 2 + rng.normal(0, 1.5)
    mx = s - dx
    if "MYA" in found:
        for k in range(-3, 4):
            img[seg_line((s, s), 0, s / 2 + 7 * k, s, s / 2 + 7 * k + 10, 1.2) & fov] *= 0.75
        img[ellipse((s, s), dy, dx + (-5 if dx > s / 2 else 5), 6, 4)] = [0.95, 0.85, 0.75]
    for a in (-0.8, -0.35, 0.35, 0.8):
        tx = mx + (6 if dx > s / 2 else -6)
        img[seg_line((s, s), dy, dx, dy + np.sin(a) * 30, tx, 1.2) & fov] = [0.5, 0.1, 0.05]
    img[disk((s, s), dy, dx, 5)] = [0.98, 0.82, 0.55]
    img[disk((s, s), dy, dx, 3.8 if "ODC" in found else 1.5)] = [1.0, 0.97, 0.88]
    img[disk((s, s), s / 2, mx, 3)] *= 0.75
    cand = np.argwhere(fov & (r < s * 0.4) & ~disk((s, s), dy, dx, 7))
    if "DR" in found:
        for y, x in cand[rng.choice(len(cand), 7, replace=False)]:
            img[disk((s, s), y, x, rng.uniform(0.6, 1.6))] = [0.35, 0.03, 0.02]
        for y, x in cand[rng.choice(len(cand), 4, replace=False)]:
            img[disk((s, s), y, x, 0.9)] = [1.0, 0.92, 0.35]
    if "DN" in found:
        for y, x in cand[rng.choice(len(cand), 10, replace=False)]:
            img[disk((s, s), y, x, 0.8)] = [0.95, 0.88, 0.45]
    if "ARMD" in found:
        img[disk((s, s), s / 2 + 1, mx, 2.5)] = [0.25, 0.15, 0.08]
        for _ in range(5):
            img[disk((s, s), s / 2 + rng.normal(0, 3), mx + rng.normal(0, 3), 1.0)] = \
                [0.95, 0.9, 0.5]
    img += rng.normal(0, 0.015, img.shape) * fov[..., None]
    if "MH" in found:
        img = img * 0.45 + 0.4 * fov[..., None]
    return to_u8(img)


def make_rfmid(out_dir: Path, seed: int = 0) -> Path:
    """RFMiD, Retinal Fundus Multi-disease Image Dataset (Pachade et al., Data 6(2):14, 2021;
    IEEE DataPort doi:10.21227/s3g7-st65; RIADD challenge, ISBI 2021), as the Kaggle copy
    unpacks: Training_Set/Training_Set/{Training/<ID>.png, RFMiD_Training_Labels.csv},
    Evaluation_Set/Evaluation_Set/{Validation/<ID>.png, RFMiD_Validation_Labels.csv},
    Test_Set/Test_Set/{Test/<ID>.png, RFMiD_Testing_Labels.csv}. Each CSV: 'ID,Disease_Risk,
    DR,ARMD,MH,...,CL' (45 conditions, 0/1; Disease_Risk = any), one row per image; the IDs
    restart at 1 in every set, so the same file name (1.png) is a different image in each.
    Simplifications: 64 px images (the originals are 2144x1424 to 4288x2848), 40 + 12 + 12
    images, and only 6 of the 45 conditions occur (DR, ARMD, MH, DN, MYA, ODC); the other
    columns are all 0, as rare conditions are in any small subset."""
    rng = rng_for(seed, "rfmid")
    root = mkdir(Path(out_dir) / "RFMiD")
    sets = [("Training_Set", "Training", "RFMiD_Training_Labels.csv", 40),
            ("Evaluation_Set", "Validation", "RFMiD_Validation_Labels.csv", 12),
            ("Test_Set", "Test", "RFMiD_Testing_Labels.csv", 12)]
    for top, sub, csv_name, n in sets:
        base = root / top / top
        rows = []
        n_normal = max(2, n // 6)
        firsts = [None] * n_normal + [RFMID_PRESENT[k % 6] for k in range(n - n_normal)]
        rng.shuffle(firsts)
        for i, first in enumerate(firsts, 1):
            found = set() if first is None else {first}
            if first is not None and rng.random() < 0.3:
                found.add(str(rng.choice(RFMID_PRESENT)))
            save_png(base / sub / f"{i}.png", _rfmid_fundus(rng, found))
            rows.append([i, int(bool(found)), *[int(c in found) for c in RFMID_COLS]])
        write_table(base / csv_name, ["ID", "Disease_Risk", *RFMID_COLS], rows)
    return root


# ============================================================================ object-CXR

def _object_cxr(rng, positive, size=64):
    """A chest film; a positive one has 1-3 foreign objects in the lung fields: a button or
    coin (ellipse), a badge or clip (rectangle) or a necklace/wire (polygon), all metal-bright.
    Returns the image and the annotation string 'TYPE x1 y1 x2 y2;...'."""
    img = chest_background(rng, size)
    annos = []
    for _ in range(int(rng.choice([1, 1, 2, 3])) if positive else 0):
        kind = int(rng.choice([0, 1, 1, 2]))
        cx = float(rng.choice([0.3, 0.7])) * size + rng.normal(0, 3)
        cy = rng.uniform(0.35, 0.75) * size
        if kind == 2:  # polygon: a chain arc
            pts = [(cx + 8 * np.cos(t), cy - 6 + 6 * np.sin(t)) for t in np.linspace(0.3, 2.8, 6)]
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                img[seg_line((size, size), y0, x0, y1, x1, 1.0)] = 0.98
            coords = " ".join(f"{int(round(x))} {int(round(y))}" for x, y in pts)
            annos.append(f"2 {coords}")
            continue
        ry, rx = rng.uniform(2, 3.5), rng.uniform(2, 3.5)
        if kind == 1:
            img[ellipse((size, size), cy, cx, ry, rx)] = 0.97
        else:
            img[int(cy - ry): int(cy + ry) + 1, int(cx - rx): int(cx + rx) + 1] = 0.96
        x1, y1 = int(np.floor(cx - rx)), int(np.floor(cy - ry))
        annos.append(f"{kind} {x1} {y1} {int(np.ceil(cx + rx))} {int(np.ceil(cy + ry))}")
    return to_u8(img), ";".join(annos)


def make_object_cxr(out_dir: Path, seed: int = 0) -> Path:
    """object-CXR, automatic detection of foreign objects on chest X-rays (JF Healthcare, MIDL
    2020 challenge; github.com/jfhealthcare/object-CXR README): train/#####.jpg and
    dev/#####.jpg (the zips train.zip and dev.zip unpacked), train.csv and dev.csv with header
    'image_name,annotation'; the annotation is ';'-separated objects 'ANNO_TYPE_IDX x1 y1 x2 y2'
    with type 0 rectangle and 1 ellipse (upper-left and lower-right corners) or '2 x1 y1 x2 y2
    ... xn yn' for a polygon; an image without foreign objects has an empty annotation (the
    ',' kept). Half the images have objects. Simplifications: 64 px JPEGs (the originals are
    ~2000 px of varying size), 40 training and 10 dev images; the withheld test set is absent
    as in the public download."""
    rng = rng_for(seed, "object_cxr")
    root = mkdir(Path(out_dir) / "object-CXR")
    for sub, count, first in (("train", 40, 1), ("dev", 10, 8001)):
        rows = []
        flags = [True] * (count // 2) + [False] * (count - count // 2)
        rng.shuffle(flags)
        for k, pos in enumerate(flags):
            name = f"{first + k:05d}.jpg"
            img, anno = _object_cxr(rng, pos)
            save_jpg(root / sub / name, img)
            rows.append([name, anno])
        write_table(root / f"{sub}.csv", ["image_name", "annotation"], rows)
    return root


# ============================================================================ FairVLMed

_RACE = ["asian", "black", "white"]
_ETH = {0: "non-hispanic", 1: "hispanic", -1: "unknown"}
_LANG = {0: "english", 1: "spanish", 2: "other", -1: "unknown"}
_MARITAL = {0: "marriage or partnered", 1: "single", 2: "divorced", 3: "widowed",
            4: "legally separated", -1: "unknown"}


def _slo(rng, cd, notch, ppa, h=64, w=50):
    """SLO fundus (grey): optic disc with a cup of the given cup-to-disc ratio (a rim notch
    inferiorly when notched), peripapillary atrophy when present, vessel arcades."""
    img = np.full((h, w), 0.35) + rng.normal(0, 0.03, (h, w))
    dy, dx = h * 0.5 + rng.normal(0, 1), w * 0.62
    for a in (-0.7, -0.25, 0.25, 0.7):
        img[seg_line((h, w), dy, dx, dy + 30 * np.sin(a), dx - 30 * np.cos(a), 1.0)] = 0.18
    if ppa:
        img[ellipse((h, w), dy, dx, 8.5, 8.5)] = 0.75
    img[ellipse((h, w), dy, dx, 6.5, 6)] = 0.6
    img[ellipse((h, w), dy, dx, 6.5 * cd, 6 * cd)] = 0.9
    if notch:
        img[ellipse((h, w), dy + 5.5, dx, 1.5, 1.5)] = 0.9
    return to_u8(img)


def _note(rng, age, sex, g):
    """A de-identified glaucoma clinic note, the summary, and the findings drawn."""
    cd = round(float(rng.uniform(0.7, 0.9) if g else rng.uniform(0.2, 0.45)), 2)
    notch, ppa = bool(g and rng.random() < 0.6), bool(rng.random() < (0.5 if g else 0.15))
    iop = (int(rng.integers(21, 30)), int(rng.integers(20, 28))) if g else \
        (int(rng.integers(12, 19)), int(rng.integers(12, 19)))
    who = f"{age} y/o {'female' if sex == 0 else 'male'}"
    if g:
        med = str(rng.choice(["latanoprost qhs OU", "timolol bid OU", "dorzolamide-timolol OU"]))
        note = (f"{who} here for glaucoma follow up. On {med}. IOP {iop[0]}/{iop[1]}. "
                f"Gonio: open angles OU. Disc: C/D {cd} OU{', inferior notching' if notch else ''}"
                f"{', peripapillary atrophy' if ppa else ''}. HVF 24-2: "
                f"{rng.choice(['superior arcuate defect', 'inferior nasal step'])}. OCT RNFL "
                "thinning inferiorly. A/P: primary open angle glaucoma, "
                f"{rng.choice(['moderate', 'severe'])} stage. Continue drops, RTC 3 months.")
        summ = (f"Primary open angle glaucoma with C/D {cd}, elevated IOP and visual field "
                "loss; continue treatment.")
    else:
        why = str(rng.choice(["family history", "large discs on screening",
                              "a disc photo on screening"]))
        note = (f"{who} referred as glaucoma suspect ({why}). IOP {iop[0]}/{iop[1]}. Disc: C/D "
                f"{cd} OU, healthy rims{', mild peripapillary atrophy' if ppa else ''}. HVF full "
                "OU. OCT RNFL within normal limits. A/P: no glaucoma at this time, observe, RTC "
                "1 year.")
        summ = f"No glaucoma: C/D {cd}, normal IOP, full fields; yearly follow up."
    return note, summ, cd, notch, ppa


def make_fairvlmed(out_dir: Path, seed: int = 0) -> Path:
    """Harvard-FairVLMed (Luo et al., FairCLIP, CVPR 2024; github.com/Harvard-Ophthalmology-
    AI-Lab/FairCLIP README): FairVLMed/{Training,Validation,Testing}/data_#####.npz, one per
    subject, each with slo_fundus (the SLO fundus image), md (visual field mean deviation), tds
    (52 total deviation values), age, gender (0 female, 1 male), race (0 Asian, 1 Black, 2
    White), ethnicity, language, maritalstatus (-1 unknown), glaucoma (0/1) and note (the
    de-identified clinical note, a 0-d string array); data_summary.csv (filename, demographics
    as words, note, gpt4_summary, glaucoma 'yes'/'no', use 'training'/'validation'/'test'),
    gpt-4_summarized_notes.csv and original_notes.csv. Simplifications: 64x50 SLO images (the
    originals are 664x512), 35 + 5 + 10 subjects; the column names of the two notes tables are
    inferred from the lab's loaders (first column the file name, last the text)."""
    rng = rng_for(seed, "fairvlmed")
    root = mkdir(Path(out_dir) / "FairVLMed")
    summary, gpt, orig = [], [], []
    for sub, use, first, n in (("Training", "training", 1, 35),
                               ("Validation", "validation", 7001, 5),
                               ("Testing", "test", 8001, 10)):
        for k in range(n):
            fname = f"data_{first + k:05d}.npz"
            g = int(rng.random() < 0.5)
            age = int(rng.integers(40, 88))
            sex, race = int(rng.integers(0, 2)), int(rng.integers(0, 3))
            eth, lang = int(rng.choice([0, 0, 0, 1, -1])), int(rng.choice([0, 0, 0, 1, 2, -1]))
            mar = int(rng.choice([0, 0, 1, 2, 3, 4, -1]))
            note, summ, cd, notch, ppa = _note(rng, age, sex, g)
            md = float(rng.uniform(-14, -4) if g else rng.uniform(-2, 1))
            tds = np.round(rng.normal(md, 2.0, 52), 2)
            save_npz(root / sub / fname, slo_fundus=_slo(rng, cd, notch, ppa),
                     md=np.float64(round(md, 2)), tds=tds, age=np.float64(age),
                     gender=np.int64(sex), race=np.int64(race), ethnicity=np.int64(eth),
                     language=np.int64(lang), maritalstatus=np.int64(mar),
                     glaucoma=np.int64(g), note=np.array(note))
            summary.append([fname, age, ["female", "male"][sex], _RACE[race], _ETH[eth],
                            _LANG[lang], _MARITAL[mar], note, summ, ["no", "yes"][g], use])
            gpt.append([fname, note, summ])
            orig.append([fname, note])
    write_table(root / "data_summary.csv", ["filename", "age", "gender", "race", "ethnicity",
                                            "language", "maritalstatus", "note", "gpt4_summary",
                                            "glaucoma", "use"], summary)
    write_table(root / "gpt-4_summarized_notes.csv",
                ["File Name", "Original Note", "Summarized Note"], gpt)
    write_table(root / "original_notes.csv", ["File Name", "Original Note"], orig)
    return root
