"""Layout families with masks, written the way public segmentation sets ship them:

* TIFF slices with 0/255 masks (``make_tiff_masks``): the Kaggle LGG brain MRI layout,
  ``kaggle_3m/<case>/<case>_<k>.tif`` (RGB: pre-contrast, FLAIR, post-contrast) with
  ``<case>_<k>_mask.tif`` (uint8, 255 = tumour) in the same folder, case folders named
  ``TCGA_<site>_<patient>_<date>``, plus ``kaggle_3m/data.csv`` (patient-level genomic clusters
  and grade, keyed by ``Patient`` = ``TCGA_<site>_<patient>``) and ``kaggle_3m/README.md``.
  Slice numbers run 1..N (natural order). Signal: the glioma is bright on FLAIR.
* 3D Slicer segmentations (``make_slicer_seg``): ``case_NN/case_NN.nrrd`` (CT, short, LPS) and
  ``case_NN/Segmentation.seg.nrrd`` (unsigned char label map in the same geometry) whose header
  carries Slicer's segment fields (``Segment0_Name:=liver``, ``Segment0_LabelValue:=1``,
  ``Segment0_Layer:=0``, ``Segment0_ID``, ``_Color``, ``_Extent``, ``_Tags``, ...). In every
  fourth case the tumour is Segment0 with label value 1 and the liver value 2: names, not
  values, say which is which. Signal: a hypodense tumour in an enhancing liver.
* nnU-Net v2 raw (``make_nnunet_raw``): ``imagesTr/prostate_NNN_0000.nii.gz`` (T2) and
  ``_0001`` (ADC), ``labelsTr/prostate_NNN.nii.gz``, unlabelled ``imagesTs/`` and
  ``dataset.json`` (``channel_names``, ``labels`` {background: 0, prostate: 1, lesion: 2},
  ``numTraining``, ``file_ending``). Signal: the lesion is dark on T2 *and* on ADC; benign
  nodules are dark on T2 only.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
from PIL import Image

from core.demo.families_common import group_sizes, unique_ids
from core.demo.segmentation import _blob, _smooth
from core.demo.writers import finish, pick, prepare, save_nifti, scaled, write_csv, write_json

LGG_SIZE = 96
LGG_SLICES = (10, 12, 8, 10)          # slices per case, cycled


# --------------------------------------------------------------------------- LGG TIFF slices
def lgg_case(rng: np.random.Generator, depth: int, size: int = LGG_SIZE):
    """(depth, H, W, 3) uint8 slices and (depth, H, W) uint8 masks (0/255)."""
    shape = (depth, size, size)
    c = (depth / 2 + rng.uniform(-0.5, 0.5), size / 2 + rng.uniform(-2, 2),
         size / 2 + rng.uniform(-2, 2))
    head_r = (depth * 0.62, size * 0.42, size * 0.36)
    head = _blob(shape, c, head_r, rng, wobble=0.02)
    brain = _blob(shape, c, [r * 0.86 for r in head_r], rng, wobble=0.03)
    wm = _blob(shape, c, [r * 0.6 for r in head_r], rng, wobble=0.2) & brain
    csf = _blob(shape, (c[0], c[1] - 3, c[2]), (depth * 0.35, size * 0.08, size * 0.05), rng,
                0.1) & brain
    tumour = np.zeros(shape, bool)
    if rng.random() < 0.9:
        zs, ys, xs = np.nonzero(wm)
        i = int(rng.integers(0, len(zs)))
        radii = (rng.uniform(1.6, 2.8), rng.uniform(8, 15), rng.uniform(8, 15))
        tumour = _blob(shape, (zs[i], ys[i], xs[i]), radii, rng, wobble=0.3) & brain
    channels = []
    for levels in ((0.6, 0.42, 0.52, 0.12, 0.3), (0.3, 0.5, 0.4, 0.08, 0.88),
                   (0.65, 0.45, 0.55, 0.15, 0.4)):    # scalp, grey, white, CSF, tumour
        vol = np.zeros(shape, np.float32)
        vol[head], vol[brain], vol[wm], vol[csf], vol[tumour] = levels
        vol += 0.04 * _smooth(rng, shape, 2.0) * head + rng.normal(0, 0.02, shape)
        channels.append(np.clip(vol * rng.uniform(0.85, 1.1), 0, 1))
    pixels = (np.stack(channels, -1) * 255).round().astype(np.uint8)
    return pixels, tumour.astype(np.uint8) * 255


def make_tiff_masks(out_dir: str | Path, seed: int = 0, n: int = 100,
                    scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 16)
    spec = {"family": "tiff_masks", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    root = out / "kaggle_3m"
    depths = group_sizes(n, LGG_SLICES)
    rows = []
    for patient, depth in zip(unique_ids(rng, len(depths), 1000, 9999), depths):
        site = pick(rng, ["CS", "DU", "EZ", "FG", "HT"])
        date = f"{int(rng.integers(1992, 2002))}{int(rng.integers(1, 13)):02d}" \
               f"{int(rng.integers(1, 29)):02d}"
        case = f"TCGA_{site}_{patient}_{date}"
        pixels, masks = lgg_case(rng, depth)
        (root / case).mkdir(parents=True, exist_ok=True)
        for k in range(depth):
            Image.fromarray(pixels[k], mode="RGB").save(root / case / f"{case}_{k + 1}.tif")
            Image.fromarray(masks[k], mode="L").save(root / case / f"{case}_{k + 1}_mask.tif")
        rows.append({"Patient": f"TCGA_{site}_{patient}",
                     "RNASeqCluster": pick(rng, ["1", "2", "3", "4", ""]),
                     "MethylationCluster": pick(rng, ["1", "2", "4", "5", ""]),
                     "miRNACluster": pick(rng, ["1", "2", "3", "4"]),
                     "CNCluster": pick(rng, ["1", "2", "3"]),
                     "COCCluster": pick(rng, ["1", "2", "3"]),
                     "OncosignCluster": pick(rng, ["1", "2", "3", ""]),
                     "tumor_tissue_site": "1", "neoplasm_histologic_grade": pick(rng, ["1", "2"]),
                     "gender": pick(rng, ["1", "2"]),
                     "age_at_initial_pathologic": int(rng.integers(20, 75)),
                     "race": pick(rng, ["3", "3", "2", ""]), "ethnicity": pick(rng, ["2", ""]),
                     "death01": pick(rng, ["0", "0", "1"])})
    write_csv(root / "data.csv", list(rows[0]), rows)
    (root / "README.md").write_text(
        "Brain MRI images together with manual FLAIR abnormality segmentation masks.\n"
        "Each folder is one patient (TCGA case); images are 3-channel slices (pre-contrast, "
        "FLAIR, post-contrast), masks are single-channel.\n")
    return finish(out, spec)


# ------------------------------------------------------------------- 3D Slicer seg.nrrd
SLICER_SHAPE = (40, 40, 28)           # x (towards the patient's left), y (posterior), z
SLICER_SPACING = (1.0, 1.0, 2.5)
SEGMENTS = {"liver": ("0.866667 0.509804 0.396078", "SCT^10200004^Liver"),
            "tumor": ("0.564706 0.933333 0.564706", "SCT^108369006^Neoplasm")}


def _origin(shape) -> list[float]:
    """LPS position of the first voxel: the volume centred on the origin."""
    return [-s * n / 2 for s, n in zip(SLICER_SPACING, shape)]


def _nrrd(path: Path, array: np.ndarray, kind: str, fields: list[str]) -> None:
    """A gzip NRRD as 3D Slicer writes it: LPS space, x fastest, extra ``key:=value`` lines."""
    nx, ny, nz = array.shape
    origin = _origin(array.shape)
    sx, sy, sz = SLICER_SPACING
    header = ["NRRD0004", "# Complete NRRD file format specification at:",
              "# http://teem.sourceforge.net/nrrd/format.html", f"type: {kind}",
              "dimension: 3", "space: left-posterior-superior", f"sizes: {nx} {ny} {nz}",
              f"space directions: ({sx:g},0,0) (0,{sy:g},0) (0,0,{sz:g})",
              "kinds: domain domain domain", "endian: little", "encoding: gzip",
              "space origin: ({:g},{:g},{:g})".format(*origin)] + fields
    raw = np.ascontiguousarray(array.transpose(2, 1, 0)).tobytes()
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        handle.write(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\n".join(header) + "\n\n").encode("ascii") + buffer.getvalue())


def _segment_fields(order: list[str], labels: np.ndarray, values: dict[str, int]) -> list[str]:
    nx, ny, nz = labels.shape
    fields = []
    for k, name in enumerate(order):
        idx = np.nonzero(labels == values[name])
        extent = " ".join(f"{int(a.min())} {int(a.max())}" for a in idx) if idx[0].size \
            else f"0 {nx - 1} 0 {ny - 1} 0 {nz - 1}"
        colour, code = SEGMENTS[name]
        fields += [f"Segment{k}_Color:={colour}", f"Segment{k}_ColorAutoGenerated:=0",
                   f"Segment{k}_Extent:={extent}", f"Segment{k}_ID:=Segment_{k + 1}",
                   f"Segment{k}_LabelValue:={values[name]}", f"Segment{k}_Layer:=0",
                   f"Segment{k}_Name:={name}", f"Segment{k}_NameAutoGenerated:=0",
                   (f"Segment{k}_Tags:=Segmentation.Status:completed|TerminologyEntry:"
                    "Segmentation category and type - 3D Slicer General Anatomy list~SCT^"
                    f"123037004^Anatomical Structure~{code}~^^~Anatomic codes - DICOM master "
                    "list~^^~^^|")]
    (sx, sy, sz), (ox, oy, oz) = SLICER_SPACING, _origin(labels.shape)
    geometry = ";".join(f"{v:g}" for v in (-sx, 0, 0, -ox, 0, -sy, 0, -oy, 0, 0, sz, oz,
                                           0, 0, 0, 1))          # IJK to RAS, row by row
    fields += ["Segmentation_ContainedRepresentationNames:=Binary labelmap|Closed surface|",
               ("Segmentation_ConversionParameters:=Collapse labelmaps|1|Merge the labelmaps "
                "into as few shared labelmaps as possible.&Reference image geometry|"
                f"{geometry};0;{nx - 1};0;{ny - 1};0;{nz - 1};|Image geometry description "
                "string.&Smoothing factor|0.5|Smoothing factor.&"),
               "Segmentation_MasterRepresentation:=Binary labelmap",
               "Segmentation_ReferenceImageExtentOffset:=0 0 0"]
    return fields


def liver_case(rng: np.random.Generator, shape=SLICER_SHAPE):
    """(HU volume int16, liver mask, tumour mask), axes x (patient's left), y (posterior), z."""
    nx, ny, nz = shape
    cx, cy = nx / 2 + rng.uniform(-1, 1), ny / 2 + rng.uniform(-1, 1)
    grids = np.ogrid[0:nx, 0:ny, 0:nz]
    body = ((grids[0] - cx) / (nx * 0.46)) ** 2 + ((grids[1] - cy) / (ny * 0.38)) ** 2 <= 1
    body = np.broadcast_to(body, shape)
    hu = np.where(body, 40.0, -1000.0) + 8 * _smooth(rng, shape, 2)
    hu[np.broadcast_to(np.hypot(grids[0] - cx, grids[1] - cy - ny * 0.28) < 3.5, shape)] = 500.0
    liver = _blob(shape, (cx - nx * 0.18, cy - ny * 0.02, nz * 0.55),
                  (nx * 0.22, ny * 0.26, nz * 0.42), rng, wobble=0.15) & body
    hu[liver] = 105.0 + 6 * _smooth(rng, shape, 1.5)[liver]
    tumour = np.zeros(shape, bool)
    for _ in range(int(rng.choice([1, 1, 2]))):
        xs, ys, zs = np.nonzero(_blob(shape, (cx - nx * 0.18, cy, nz * 0.55),
                                      (nx * 0.13, ny * 0.16, nz * 0.25), rng, 0.0) & liver)
        i = int(rng.integers(0, len(xs)))
        r = rng.uniform(3.5, 5.5)
        tumour |= _blob(shape, (xs[i], ys[i], zs[i]), (r, r, r * 0.5), rng, wobble=0.25) & liver
    hu[tumour] = 45.0 + 6 * _smooth(rng, shape, 1.0)[tumour]
    hu += rng.normal(0, 12, shape) * body
    return np.round(hu).astype(np.int16), liver & ~tumour, tumour


def make_slicer_seg(out_dir: str | Path, seed: int = 0, n: int = 20,
                    scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 4)
    spec = {"family": "slicer_seg", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for k in range(1, n + 1):
        case = f"case_{k:02d}"
        hu, liver, tumour = liver_case(rng)
        order = ["tumor", "liver"] if k % 4 == 0 else ["liver", "tumor"]
        values = {name: v for v, name in enumerate(order, start=1)}
        labels = np.zeros(hu.shape, np.uint8)
        labels[liver], labels[tumour] = values["liver"], values["tumor"]
        _nrrd(out / case / f"{case}.nrrd", hu, "short", [])
        _nrrd(out / case / "Segmentation.seg.nrrd", labels, "unsigned char",
              _segment_fields(order, labels, values))
    return finish(out, spec)


def read_nrrd_fields(path: Path) -> dict[str, str]:
    """The header of an NRRD file: standard ``key: value`` and Slicer's ``key:=value``."""
    head = path.read_bytes().split(b"\n\n", 1)[0].decode("ascii")
    fields = {}
    for line in head.splitlines()[1:]:
        if line.startswith("#"):
            continue
        key, _sep, value = line.partition(":=") if ":=" in line else line.partition(": ")
        fields[key] = value
    return fields


# ------------------------------------------------------------------------ nnU-Net v2 raw
NNUNET_SHAPE = (40, 40, 20)
NNUNET_SPACING = (1.5, 1.5, 3.0)


def prostate_case(rng: np.random.Generator, lesion: bool, shape=NNUNET_SHAPE):
    """(T2 int16, ADC int16 in 1e-6 mm^2/s, label map uint8: 1 prostate, 2 lesion)."""
    nx, ny, nz = shape
    c = (nx / 2 + rng.uniform(-1.5, 1.5), ny / 2 + rng.uniform(-1.5, 1.5), nz / 2)
    t2 = np.zeros(shape, np.float32)
    adc = np.zeros(shape, np.float32)
    body = _blob(shape, c, (nx * 0.47, ny * 0.4, nz * 0.8), rng, wobble=0.02)
    t2[body], adc[body] = 0.35, 1.5
    bladder = _blob(shape, (c[0], c[1] + ny * 0.22, c[2] + nz * 0.3), (7, 5, 5), rng, 0.1)
    t2[bladder & body], adc[bladder & body] = 0.95, 2.9
    rectum = _blob(shape, (c[0], c[1] - ny * 0.25, c[2]), (4, 3, nz * 0.5), rng, 0.1)
    t2[rectum & body], adc[rectum & body] = 0.12, 1.0
    gland = _blob(shape, c, (rng.uniform(7, 9), rng.uniform(5.5, 7), rng.uniform(3.5, 4.5)), rng,
                  wobble=0.15) & body
    t2[gland], adc[gland] = 0.6, 1.6
    spots = np.nonzero(gland)
    decoy_or_lesion = []
    for kind in (["lesion"] if lesion else []) + (["decoy"] if rng.random() < 0.5 else []):
        i = int(rng.integers(0, len(spots[0])))
        r = rng.uniform(2.5, 3.5)
        blob = _blob(shape, [a[i] for a in spots], (r, r, r * 0.6), rng, 0.2) & gland
        decoy_or_lesion.append((kind, blob))
    labels = gland.astype(np.uint8)
    for kind, blob in decoy_or_lesion:
        t2[blob] = 0.22
        if kind == "lesion":
            adc[blob], labels[blob] = 0.65, 2
    t2 = (t2 + 0.03 * _smooth(rng, shape, 1.5) + rng.normal(0, 0.02, shape)) * 1200
    adc = (adc + rng.normal(0, 0.08, shape)) * body * 1000
    return np.clip(t2, 0, None).astype(np.int16), np.clip(adc, 0, None).astype(np.int16), labels


def make_nnunet_raw(out_dir: str | Path, seed: int = 0, n: int = 20, scale: float = 1.0,
                    n_test: int = 4) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 4)
    spec = {"family": "nnunet_raw", "n": n, "n_test": n_test, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for k in range(1, n + n_test + 1):
        training = k <= n
        t2, adc, labels = prostate_case(rng, lesion=k % 5 != 0)
        folder = out / ("imagesTr" if training else "imagesTs")
        save_nifti(t2, NNUNET_SPACING, folder / f"prostate_{k:03d}_0000.nii.gz", np.int16)
        save_nifti(adc, NNUNET_SPACING, folder / f"prostate_{k:03d}_0001.nii.gz", np.int16)
        if training:
            save_nifti(labels, NNUNET_SPACING, out / "labelsTr" / f"prostate_{k:03d}.nii.gz",
                       np.uint8)
    write_json(out / "dataset.json", {
        "channel_names": {"0": "T2", "1": "ADC"},
        "labels": {"background": 0, "prostate": 1, "lesion": 2},
        "numTraining": n, "file_ending": ".nii.gz", "name": "ProstateLesion",
        "description": "Prostate gland and suspicious lesion, biparametric MRI (T2w + ADC)",
        "reference": "synthetic", "licence": "CC-BY-SA 4.0", "release": "1.0"})
    return finish(out, spec)
