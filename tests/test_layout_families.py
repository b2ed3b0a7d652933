"""Layout families (core.demo.layout_families): every generator writes its folder the way the
public datasets ship it, readable with the field's own libraries (PIL, ElementTree, PyYAML,
openpyxl, NumPy, nibabel, SimpleITK, pydicom), with the counts, classes, splits and patient
groupings its expected reading states; cards validate; the bench lists them as a suite of their
own. Nothing here scans: the reading is asserted by later tests of the scanner."""
from __future__ import annotations

import csv
import hashlib
import json
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
import yaml
from PIL import Image

from core.datasets.datacards import TASK_ALIASES, parse_datacard
from core.demo import layout_families as lf
from core.demo.families_labels import make_medmnist_npz, read_xlsx
from core.demo.families_masks import read_nrrd_fields
from core.demo.families_reports import read_report

FAM = lf.BY_NAME


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Path]:
    data = tmp_path_factory.mktemp("layout-families")
    out = {}
    for family in lf.FAMILIES:
        started = time.perf_counter()
        out[family.key] = family.generate(data / family.folder)
        seconds = time.perf_counter() - started
        assert seconds < 10, f"{family.key} took {seconds:.1f} s"
        assert out[family.key] == data / family.folder
    return out


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _groups(family: lf.Family, root: Path, samples: list[str]) -> int:
    return len({family.patient_of(root, s) for s in samples})


# ------------------------------------------------------------------------------ registry
def test_registry_cards_and_readings_are_consistent(tmp_path):
    assert len(lf.FAMILIES) == 12
    for attr in ("key", "name", "folder"):
        assert len({getattr(f, attr) for f in lf.FAMILIES}) == 12, attr
    for f in lf.FAMILIES:
        card = parse_datacard(f.datacard_fields(tmp_path / f.folder))
        assert card.name == f.name and card.tasks == [f.reading.task], f.key
        assert TASK_ALIASES[f.tasks[0]] == f.reading.task
        assert card.dimension == f.dimension and card.classes == list(f.reading.classes)
        assert f.reading.template in ("diagnosis", "segmentation", "detection",
                                      "report_generation")
        assert bool(f.reading.classes) == (f.reading.template != "report_generation")
        assert f.request and f.description and len(f.description) > 200
        if f.reading.split:
            assert sum(f.reading.split.values()) == f.reading.n_samples, f.key
    # the descriptions say where the labels are, in ordinary words
    words = {"pascal_voc": "Annotations/", "yolo": "labels/train", "json_sidecar": "'diagnosis'",
             "study_reports": "report.txt", "multisheet_xlsx": "second sheet, 'Labels'",
             "tiff_masks": "_mask.tif (255 = tumour", "slicer_seg": "Segment0_LabelValue",
             "filename_tokens": "in the file name", "medmnist_npz": "0 = malignant",
             "chest_xray_names": "the folder is the label", "nnunet_raw": "dataset.json",
             "tcia_dicom": "clinical_data.csv"}
    for key, phrase in words.items():
        assert phrase in FAM[key].description, key


def test_bench_lists_the_families_as_a_suite_of_their_own():
    from bench.m3bench_lite.suite import DATASETS, FAMILIES, select

    assert len(DATASETS) == 14 and len(FAMILIES) == 12
    assert not {d.folder for d in DATASETS} & {d.folder for d in FAMILIES}
    assert not {d.name for d in DATASETS} & {d.name for d in FAMILIES}
    assert select(None, suite="paper") == DATASETS
    assert select(None, suite="layout-families") == FAMILIES
    assert select(None) == DATASETS + FAMILIES                       # m3bench-lite: all 26
    chosen = select("pascal_voc, LGG-MRI-TIFF,breastmnist ultrasound", suite="layout-families")
    assert [d.paper_name for d in chosen] == ["pascal_voc", "tiff_masks", "medmnist_npz"]
    with pytest.raises(ValueError, match="no layout-families suite dataset"):
        select("ADNI", suite="layout-families")
    with pytest.raises(ValueError, match="unknown suite"):
        select(None, suite="nope")
    by_key = {d.paper_name: d for d in FAMILIES}
    assert by_key["pascal_voc"].floor.text() == "map50 >= 0.5"
    assert by_key["yolo"].template == "detection"
    assert by_key["study_reports"].floor.text() == "rouge_l > baseline_rouge_l"
    assert by_key["tcia_dicom"].floor.text() == "auc >= 0.75"
    for d in FAMILIES:
        assert d.datacard("/nowhere").tasks == [d.task]


# ------------------------------------------------------------------------------- boxes
def test_pascal_voc(roots):
    root, reading = roots["pascal_voc"], FAM["pascal_voc"].reading
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == \
        ["Annotations", "ImageSets", "JPEGImages"]
    main = root / "ImageSets" / "Main"
    sets = {s: main.joinpath(f"{s}.txt").read_text().split()
            for s in ("train", "val", "test", "trainval")}
    assert {s: len(sets[s]) for s in ("train", "val", "test")} == reading.split
    assert set(sets["trainval"]) == set(sets["train"]) | set(sets["val"])
    assert not set(sets["train"]) & set(sets["test"])
    images = sorted(root.glob("JPEGImages/*.jpg"))
    assert len(images) == reading.n_samples == len(set().union(*sets.values()))
    negatives, names = 0, set()
    for image in images:
        ann = ET.parse(root / "Annotations" / f"{image.stem}.xml").getroot()
        assert ann.tag == "annotation" and ann.findtext("filename") == image.name
        with Image.open(image) as img:
            assert img.format == "JPEG" and img.mode == "RGB"
            assert img.size == (int(ann.findtext("size/width")), int(ann.findtext("size/height")))
        objects = ann.findall("object")
        negatives += not objects
        for obj in objects:
            names.add(obj.findtext("name"))
            x0, y0, x1, y1 = (int(obj.findtext(f"bndbox/{t}"))
                              for t in ("xmin", "ymin", "xmax", "ymax"))
            assert 1 <= x0 < x1 <= img.size[0] and 1 <= y0 < y1 <= img.size[1]
    assert names == set(reading.classes) and 5 <= negatives <= reading.n_samples // 4
    for line in main.joinpath("polyp_train.txt").read_text().splitlines():
        stem, flag = line.split()
        has = bool(ET.parse(root / "Annotations" / f"{stem}.xml").getroot().findall("object"))
        assert flag == ("1" if has else "-1")


def test_yolo(roots):
    root, family = roots["yolo"], FAM["yolo"]
    data = yaml.safe_load((root / "data.yaml").read_text())
    assert data["nc"] == 1 and data["names"] == {0: "nodule"}
    assert (root / data["train"]).is_dir() and (root / data["val"]).is_dir()
    samples, empty, patients = [], 0, {}
    for split in ("train", "val"):
        for image in sorted((root / "images" / split).glob("*.png")):
            with Image.open(image) as img:
                assert img.mode == "L" and img.size == (96, 96)
            lines = (root / "labels" / split / f"{image.stem}.txt").read_text().splitlines()
            empty += not lines
            for line in lines:
                cls, *box = line.split()
                cx, cy, w, h = map(float, box)
                assert cls == "0" and 0 < w < 0.3 and 0 < h < 0.3
                assert w / 2 <= cx <= 1 - w / 2 and h / 2 <= cy <= 1 - h / 2
            sample = str(image.relative_to(root))
            samples.append(sample)
            patients.setdefault(split, set()).add(family.patient_of(root, sample))
    assert len(list(root.glob("labels/*/*.txt"))) == len(samples) == family.reading.n_samples
    assert Counter(s.split("/")[1] for s in samples) == family.reading.split
    assert not patients["train"] & patients["val"]
    assert _groups(family, root, samples) == family.reading.n_groups < len(samples)
    assert 0.2 * len(samples) <= empty <= 0.4 * len(samples)


# ------------------------------------------------------------------------------ labels
def test_json_sidecar(roots):
    root, family = roots["json_sidecar"], FAM["json_sidecar"]
    images = sorted((root / "data").glob("*.png"))
    assert len(images) == len(list((root / "data").glob("*.json"))) == family.reading.n_samples
    diagnoses = Counter()
    for image in images:
        meta = json.loads(image.with_suffix(".json").read_text())
        assert meta["isic_id"] == image.stem and meta["patient_id"].startswith("IP_")
        assert meta["benign_malignant"] == ("malignant" if meta["diagnosis"] == "melanoma"
                                            else "benign")
        diagnoses[meta["diagnosis"]] += 1
        with Image.open(image) as img:
            assert img.mode == "RGB" and img.size == (96, 96)
    assert set(diagnoses) == set(family.reading.classes) and diagnoses["melanoma"] == 40
    samples = [str(p.relative_to(root)) for p in images]
    assert _groups(family, root, samples) == family.reading.n_groups < len(samples)


def test_study_reports(roots):
    root, reading = roots["study_reports"], FAM["study_reports"].reading
    studies = sorted((root / "studies").iterdir())
    assert len(studies) == reading.n_samples
    impressions = set()
    for study in studies:
        assert sorted(p.name for p in study.iterdir()) == ["image.png", "report.txt"]
        assert study.name.startswith("s") and study.name[1:].isdigit()
        text = (study / "report.txt").read_text()
        assert "FINAL REPORT" in text and "INDICATION:" in text
        assert text.index("FINDINGS:") < text.index("IMPRESSION:")
        report = read_report(study / "report.txt")
        assert report["findings"].endswith("No pneumothorax.") and report["impression"]
        impressions.add(report["impression"])
        with Image.open(study / "image.png") as img:
            assert img.mode == "L" and img.size == (64, 64)
    assert len(impressions) > 10


def test_multisheet_xlsx(roots, tmp_path):
    root, family = roots["multisheet_xlsx"], FAM["multisheet_xlsx"]
    from openpyxl import load_workbook

    wb = load_workbook(root / "labels.xlsx")
    assert wb.sheetnames == ["README", "Labels"]
    notes = [r[0] for r in wb["README"].iter_rows(values_only=True)]
    assert len(notes) > 4 and any("Labels" in (n or "") for n in notes)
    names, rows = read_xlsx(root)
    assert list(rows[0]) == ["Image", "PatientID", "Eye", "Age", "Finding"]
    assert len(rows) == family.reading.n_samples == len(list((root / "images").glob("*.jpg")))
    assert {r["Finding"] for r in rows} == set(family.reading.classes)
    for r in rows:
        assert (root / "images" / r["Image"]).is_file() and r["Image"].startswith(r["PatientID"])
    samples = [f"images/{r['Image']}" for r in rows]
    assert _groups(family, root, samples) == family.reading.n_groups == \
        len({r["PatientID"] for r in rows})
    again = family.generate(tmp_path / "again")          # same bytes (fixed zip timestamps)
    assert _digest(again) == _digest(root)


def test_medmnist_npz(roots, tmp_path):
    root, reading = roots["medmnist_npz"], FAM["medmnist_npz"].reading
    with np.load(root / "breastmnist.npz") as data:
        assert sorted(data.files) == sorted(f"{s}_{k}" for s in ("train", "val", "test")
                                            for k in ("images", "labels"))
        for split, count in reading.split.items():
            images, labels = data[f"{split}_images"], data[f"{split}_labels"]
            assert images.shape == (count, 28, 28) and images.dtype == np.uint8
            assert labels.shape == (count, 1) and labels.dtype == np.uint8
            assert set(np.unique(labels)) == {0, 1}
    pneumonia = make_medmnist_npz(tmp_path / "pn", n=20, flag="pneumoniamnist")
    with np.load(pneumonia / "pneumoniamnist.npz") as data:
        assert data["train_images"].shape == (14, 28, 28) and data["test_labels"].shape == (4, 1)


def test_chest_xray_names(roots):
    root, family = roots["chest_xray_names"], FAM["chest_xray_names"]
    assert sorted(p.name for p in (root / "chest_xray").iterdir()) == \
        [".DS_Store", "test", "train", "val"]
    images = sorted((root / "chest_xray").rglob("*.jpeg"))
    assert len(images) == family.reading.n_samples
    samples = [str(p.relative_to(root)) for p in images]
    assert {Path(s).parts[2] for s in samples} == set(family.reading.classes)
    assert Counter(Path(s).parts[1] for s in samples) == family.reading.split
    sides: dict[str, set] = {}
    for s in samples:
        sides.setdefault(Path(s).parts[1], set()).add(family.patient_of(root, s))
    assert not sides["train"] & sides["test"] and not sides["train"] & sides["val"]
    assert _groups(family, root, samples) == family.reading.n_groups < len(samples)
    names = [p.name for p in images]
    assert any(n.startswith("NORMAL2-IM-") for n in names)
    assert any("_virus_" in n for n in names) and any("_bacteria_" in n for n in names)
    modes, sizes = Counter(), set()
    for image in images:
        with Image.open(image) as img:
            assert img.format == "JPEG"
            modes[img.mode] += 1
            sizes.add(img.size)
    assert modes["L"] > modes["RGB"] > 0 and len(sizes) > 5


# ------------------------------------------------------------------------------- masks
def test_tiff_masks(roots):
    root, family = roots["tiff_masks"], FAM["tiff_masks"]
    base = root / "kaggle_3m"
    masks = sorted(base.glob("*/*_mask.tif"))
    images = sorted(p for p in base.glob("*/*.tif") if not p.name.endswith("_mask.tif"))
    assert len(images) == len(masks) == family.reading.n_samples
    with_tumour = 0
    for image in images:
        mask_path = image.with_name(f"{image.stem}_mask.tif")
        with Image.open(image) as img, Image.open(mask_path) as mask:
            assert img.format == mask.format == "TIFF"
            assert img.mode == "RGB" and mask.mode == "L" and img.size == mask.size
            values = set(np.unique(np.asarray(mask)))
        assert values <= {0, 255}
        with_tumour += 255 in values
        assert image.stem.startswith(image.parent.name + "_")
    assert 0.25 * len(images) < with_tumour < 0.75 * len(images)
    samples = [str(p.relative_to(root)) for p in images]
    patients = {family.patient_of(root, s) for s in samples}
    assert len(patients) == family.reading.n_groups
    assert {r["Patient"] for r in _rows(base / "data.csv")} == patients
    assert (base / "README.md").is_file()
    depths = Counter(p.parent.name for p in images)
    assert max(depths.values()) >= 10          # slice numbers need natural sorting (_10 > _9)


def test_slicer_seg(roots):
    root, reading = roots["slicer_seg"], FAM["slicer_seg"].reading
    cases = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(cases) == reading.n_samples
    first_segment = Counter()
    for case in cases:
        assert sorted(p.name for p in case.iterdir()) == sorted([f"{case.name}.nrrd",
                                                                  "Segmentation.seg.nrrd"])
        image = sitk.ReadImage(str(case / f"{case.name}.nrrd"))
        reader = sitk.ImageFileReader()
        reader.SetFileName(str(case / "Segmentation.seg.nrrd"))
        seg = reader.Execute()
        assert image.GetPixelIDTypeAsString() == "16-bit signed integer"
        assert seg.GetPixelIDTypeAsString() == "8-bit unsigned integer"
        assert image.GetSize() == seg.GetSize() and image.GetOrigin() == seg.GetOrigin()
        assert image.GetSpacing() == seg.GetSpacing() == (1.0, 1.0, 2.5)
        header = read_nrrd_fields(case / "Segmentation.seg.nrrd")
        assert header["space"] == "left-posterior-superior"
        value_of = {}
        for k in range(2):
            assert reader.GetMetaData(f"Segment{k}_Name") == header[f"Segment{k}_Name"]
            assert header[f"Segment{k}_Layer"] == "0"
            assert header[f"Segment{k}_ID"] == f"Segment_{k + 1}"
            value_of[header[f"Segment{k}_Name"]] = int(header[f"Segment{k}_LabelValue"])
        first_segment[header["Segment0_Name"]] += 1
        assert set(value_of) == set(reading.classes)
        labels = sitk.GetArrayFromImage(seg)
        counts = {name: int((labels == v).sum()) for name, v in value_of.items()}
        assert set(np.unique(labels)) == {0, 1, 2}
        assert counts["liver"] > counts["tumor"] > 50, case.name    # names, not values, tell
        hu = sitk.GetArrayFromImage(image)
        assert hu[labels == value_of["tumor"]].mean() < hu[labels == value_of["liver"]].mean()
    assert first_segment["tumor"] == reading.n_samples // 4 and first_segment["liver"] > 0


def test_nnunet_raw(roots):
    root, reading = roots["nnunet_raw"], FAM["nnunet_raw"].reading
    meta = json.loads((root / "dataset.json").read_text())
    assert meta["channel_names"] == {"0": "T2", "1": "ADC"}
    assert meta["labels"] == {"background": 0, "prostate": 1, "lesion": 2}
    assert meta["numTraining"] == reading.n_samples and meta["file_ending"] == ".nii.gz"
    labels = sorted((root / "labelsTr").glob("*.nii.gz"))
    assert len(labels) == reading.n_samples
    with_lesion = 0
    for label in labels:
        case = label.name[: -len(".nii.gz")]
        seg = nib.load(label)
        values = set(np.unique(np.asarray(seg.dataobj)))
        assert values <= {0, 1, 2} and 1 in values
        with_lesion += 2 in values
        for channel in ("0000", "0001"):
            img = nib.load(root / "imagesTr" / f"{case}_{channel}.nii.gz")
            assert img.shape == seg.shape and np.allclose(img.affine, seg.affine)
    assert with_lesion == reading.n_samples * 4 // 5
    assert len(list((root / "imagesTr").glob("*.nii.gz"))) == 2 * reading.n_samples
    assert len(list((root / "imagesTs").glob("*.nii.gz"))) == 2 * reading.unlabelled
    assert not (root / "labelsTs").exists()


# ----------------------------------------------------------------------------- volumes
def test_filename_tokens(roots):
    root, family = roots["filename_tokens"], FAM["filename_tokens"]
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["scans"]
    scans = sorted((root / "scans").glob("*.nii.gz"))
    assert len(scans) == family.reading.n_samples
    tokens = Counter()
    for scan in scans:
        subject, group, sequence, *rest = scan.name[: -len(".nii.gz")].split("_")
        assert subject.startswith("sub") and sequence == "T1" and rest in ([], ["m12"])
        tokens[group] += 1
        img = nib.load(scan)
        assert img.shape == (32, 40, 32) and img.get_data_dtype() == np.int16
    assert set(tokens) == set(family.reading.classes) and min(tokens.values()) > 15
    samples = [str(p.relative_to(root)) for p in scans]
    assert _groups(family, root, samples) == family.reading.n_groups < len(samples)


def test_tcia_dicom(roots):
    root, family = roots["tcia_dicom"], FAM["tcia_dicom"]
    clinical = _rows(root / "clinical_data.csv")
    assert len(clinical) == family.reading.n_samples
    assert {r["Diagnosis"] for r in clinical} == set(family.reading.classes)
    manifest = next(root.glob("manifest-*"))
    series_rows = _rows(manifest / "metadata.csv")
    scouts = [r for r in series_rows if r["Series Description"] == "SCOUT"]
    assert len(series_rows) == len(clinical) + len(scouts) and scouts
    axial = []
    for row in series_rows:
        folder = manifest / row["File Location"]
        files = sorted(folder.glob("*.dcm"))
        assert len(files) == int(row["Number of Images"]) and files
        ds = pydicom.dcmread(files[0])
        assert ds.PatientID == row["Subject ID"] == folder.parts[-3]
        assert ds.SeriesInstanceUID == row["Series UID"] and ds.Modality == "CT"
        assert ds.pixel_array.dtype == np.uint16 and float(ds.RescaleIntercept) == -1024
        if row["Series Description"] != "SCOUT":
            assert len(files) == 16 and files[0].name == "1-01.dcm"
            z = [float(pydicom.dcmread(f, stop_before_pixels=True).ImagePositionPatient[2])
                 for f in files]
            assert len(set(z)) == 16
            axial.append(str(folder.relative_to(root)))
    assert {r["PatientID"] for r in clinical} == {family.patient_of(root, s) for s in axial}
    assert _groups(family, root, axial) == family.reading.n_groups


# ------------------------------------------------------------------------ reproducibility
def test_seeded_idempotent_and_scaled(roots, tmp_path):
    for key in ("pascal_voc", "medmnist_npz", "slicer_seg"):
        again = FAM[key].generate(tmp_path / key)
        assert _digest(again) == _digest(roots[key]), key
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "pascal_voc").rglob("*")}
    FAM["pascal_voc"].generate(tmp_path / "pascal_voc")           # complete: left alone
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "pascal_voc").rglob("*")} == before
    other = FAM["pascal_voc"].generate(tmp_path / "other_seed", seed=1)
    assert _digest(other) != _digest(roots["pascal_voc"])
    small = FAM["yolo"].generate(tmp_path / "small", scale=0.1)
    assert len(list(small.glob("images/*/*.png"))) == 12
