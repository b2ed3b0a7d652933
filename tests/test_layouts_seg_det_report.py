"""Segmentation, detection and report-generation folder layouts: each recognised from tiny
synthetic files (NIfTI via nibabel, PNG via Pillow) with the right task, layout, classes,
channels and kept split; one dataset of each task indexed and passed through the index gate."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image

from core.datasets.layouts.mask_labels import labels_from_description
from core.datasets.layouts.types import ScanError
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.indexing import write_index
from core.planning.tasks import check_index, template_for
from core.jobs.workspace import JobWorkspace


def nifti(path: Path, shape=(6, 6, 4), value: int = 0, dtype=np.int16) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.zeros(shape, dtype)
    if value:
        data[1:3, 1:3, 1:2] = value
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(path))
    return path


def png(path: Path, size=(8, 8), value: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.zeros(size, np.uint8)
    data[2:4, 2:4] = value
    Image.fromarray(data).save(path)
    return path


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def indexed(scan, tmp_path: Path, name: str = "job") -> tuple[dict, list, list]:
    """Write the index through the task dispatcher and pass the index gate."""
    template = template_for(scan.task, scan.layout)
    ws = JobWorkspace(tmp_path / name).ensure()
    summary = write_index(scan, ws.datapath, template, 0.25, 0, True)
    gate = check_index(ws, template)
    assert gate.ok, gate.message()
    train = json.loads((ws.datapath / "train.json").read_text())
    test = json.loads((ws.datapath / "test.json").read_text())
    return summary, train, test


# ------------------------------------------------------------------ segmentation

@pytest.mark.parametrize("image_dir,mask_dir,fmt", [
    ("images", "masks", "png"), ("img", "labels", "png"), ("image", "segmentation_masks", "nii"),
])
def test_sibling_folders_pair_by_name(tmp_path, image_dir, mask_dir, fmt):
    for i in range(5):
        if fmt == "png":
            png(tmp_path / image_dir / f"case_{i:03d}.png", value=90)
            png(tmp_path / mask_dir / f"case_{i:03d}.png", value=1 + i % 2)
        else:
            nifti(tmp_path / image_dir / f"case_{i:03d}.nii.gz", value=300)
            nifti(tmp_path / mask_dir / f"case_{i:03d}.nii.gz", value=1, dtype=np.uint8)
    png(tmp_path / image_dir / "orphan.png") if fmt == "png" else \
        nifti(tmp_path / image_dir / "orphan.nii.gz")
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task) == ("image_mask_folders", "segmentation")
    assert scan.details["variant"] == "sibling_folders" and len(scan.samples) == 5
    assert scan.dimension == ("2D" if fmt == "png" else "3D")
    assert all(Path(s.extra["label_path"]).parent.name == mask_dir for s in scan.samples)
    assert all(Path(s.image).name.split(".")[0] == Path(s.extra["label_path"]).name.split(".")[0]
               for s in scan.samples)
    assert any("orphan" in r and "no mask" in r for r in scan.skipped)
    # no label file: names come from the values in the masks
    assert scan.details["label_source"] == "mask values"
    assert scan.classes == (["label_1", "label_2"] if fmt == "png" else ["label_1"])


def test_nnunet_channels_dataset_json_and_unlabeled_test_images(tmp_path):
    for i in range(4):
        for ch in range(2):
            nifti(tmp_path / "imagesTr" / f"prostate_{i:02d}_{ch:04d}.nii.gz", value=100 + ch)
        nifti(tmp_path / "labelsTr" / f"prostate_{i:02d}.nii.gz", value=2, dtype=np.uint8)
    nifti(tmp_path / "imagesTs" / "prostate_90_0000.nii.gz")
    nifti(tmp_path / "imagesTs" / "prostate_90_0001.nii.gz")
    (tmp_path / "dataset.json").write_text(json.dumps({
        "channel_names": {"0": "T2", "1": "ADC"}, "labels": {"background": 0, "PZ": 1, "TZ": 2},
        "numTraining": 4, "file_ending": ".nii.gz"}))
    scan = scan_folder(tmp_path)
    assert scan.layout == "image_mask_folders" and scan.details["variant"] == "nnunet"
    assert scan.classes == ["PZ", "TZ"] and scan.details["label_source"] == "dataset.json"
    assert scan.details["channels"] == 2 and scan.details["channel_names"] == ["T2", "ADC"]
    assert all(isinstance(s.image, list) and [Path(p).name[-11:-7] for p in s.image] ==
               ["0000", "0001"] for s in scan.samples)
    assert not scan.existing_split and scan.details["unlabeled"] == 2
    assert sum("unlabeled" in r for r in scan.skipped) == 2


def test_decathlon_4d_images_old_dataset_json_form(tmp_path):
    training = []
    for i in range(4):
        nifti(tmp_path / "imagesTr" / f"prostate_{i:02d}.nii.gz", shape=(6, 6, 4, 2), value=9)
        nifti(tmp_path / "labelsTr" / f"prostate_{i:02d}.nii.gz", value=1, dtype=np.uint8)
        training.append({"image": f"./imagesTr/prostate_{i:02d}.nii.gz",
                         "label": f"./labelsTr/prostate_{i:02d}.nii.gz"})
    (tmp_path / "dataset.json").write_text(json.dumps({
        "modality": {"0": "T2", "1": "ADC"}, "labels": {"0": "background", "1": "PZ", "2": "TZ"},
        "training": training, "test": []}))
    scan = scan_folder(tmp_path)
    assert scan.layout == "image_mask_folders" and scan.classes == ["PZ", "TZ"]
    assert scan.details["channels"] == 2 and scan.details["channel_names"] == ["T2", "ADC"]
    assert len(scan.samples) == 4 and not scan.skipped  # 4D image, 3D mask: same grid


def test_btcv_training_testing_unlabeled_and_old_dataset_json(tmp_path):
    names = {"0": "background", "1": "spleen", "2": "rkid", "3": "lkid"}
    (tmp_path / "dataset_0.json").write_text(json.dumps({"labels": names, "training": []}))
    for i in range(1, 6):
        nifti(tmp_path / "Training" / "img" / f"img{i:04d}.nii.gz", value=50)
        nifti(tmp_path / "Training" / "label" / f"label{i:04d}.nii.gz", value=3, dtype=np.uint8)
    for i in range(61, 64):
        nifti(tmp_path / "Testing" / "img" / f"img{i:04d}.nii.gz", value=50)
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task, scan.dimension) == ("image_mask_folders", "segmentation", "3D")
    assert scan.classes == ["spleen", "rkid", "lkid"]
    assert len(scan.samples) == 5 and not scan.existing_split
    assert all("Training" in s.image for s in scan.samples)
    assert all(Path(s.image).name[3:] == Path(s.extra["label_path"]).name[5:]
               for s in scan.samples)  # img0003 <-> label0003
    unlabeled = [r for r in scan.skipped if "unlabeled" in r]
    assert len(unlabeled) == 3 and all("Testing" in r for r in unlabeled)
    summary, train, test = indexed(scan, tmp_path)
    assert summary["split_method"] != "kept_from_dataset"
    assert len(train) + len(test) == 5 and test
    assert all(e["labels"] == ["spleen", "rkid", "lkid"] for e in train + test)


def test_labelled_train_and_test_folders_keep_their_split(tmp_path):
    for split, n in (("train", 4), ("test", 2)):
        for i in range(n):
            png(tmp_path / split / "images" / f"{split}{i}.png", value=80)
            png(tmp_path / split / "masks" / f"{split}{i}_mask.png", value=1)
    (tmp_path / "labels.json").write_text(json.dumps({"polyp": 1}))
    scan = scan_folder(tmp_path)
    assert scan.layout == "image_mask_folders" and scan.existing_split
    assert scan.classes == ["polyp"] and scan.details["label_source"] == "labels.json"
    assert sorted(s.split for s in scan.samples) == ["test"] * 2 + ["train"] * 4
    summary, train, test = indexed(scan, tmp_path)
    assert summary["split_method"] == "kept_from_dataset" and len(test) == 2
    assert all("/test/" in e["image_path"] for e in test)


@pytest.mark.parametrize("labels_file,expected", [
    (["liver", "spleen"], ["liver", "spleen"]),
    (["background", "liver", "spleen"], ["liver", "spleen"]),
    ({"1": "liver", "2": "spleen"}, ["liver", "spleen"]),
    ({"liver": 1, "spleen": 2, "background": 0}, ["liver", "spleen"]),
])
def test_label_names_from_labels_json_forms(tmp_path, labels_file, expected):
    for i in range(3):
        png(tmp_path / "images" / f"c{i}.png")
        png(tmp_path / "masks" / f"c{i}.png", value=2)
    (tmp_path / "labels.json").write_text(json.dumps(labels_file))
    assert scan_folder(tmp_path).classes == expected


def test_label_names_from_the_description(tmp_path):
    for i in range(3):
        nifti(tmp_path / "images" / f"c{i}.nii.gz")
        nifti(tmp_path / "masks" / f"c{i}.nii.gz", value=2, dtype=np.uint8)
    scan = scan_folder(tmp_path, "Abdominal CT, 1.5 mm slices. Labels: 1 liver, 2 spleen.")
    assert scan.classes == ["liver", "spleen"] and scan.details["label_source"] == "description"
    assert scan_folder(tmp_path, "no names here").classes == ["label_1", "label_2"]


@pytest.mark.parametrize("text,expected", [
    ("labels: 1 liver, 2 spleen", ["liver", "spleen"]),
    ("Mask values: 0 = background, 1 = kidney, 2 = tumor. 3 mm slices.", ["kidney", "tumor"]),
    ("label values: liver=1, pancreas=3", ["liver", "label_2", "pancreas"]),
    ("Classes: lung and heart.", ["lung", "heart"]),
    ("images/, masks/, labels.json; 20 cases", None),
])
def test_description_label_parser(text, expected):
    assert labels_from_description(text) == expected


def test_suffix_masks_in_the_same_folder(tmp_path):
    for i in range(4):
        png(tmp_path / "data" / f"lesion{i}.png", value=120)
        png(tmp_path / "data" / f"lesion{i}_seg.png", value=1)
    png(tmp_path / "data" / "unlabelled.png")
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task) == ("image_mask_folders", "segmentation")
    assert scan.details["variant"] == "suffix_masks" and len(scan.samples) == 4
    assert all(s.extra["label_path"].endswith("_seg.png") and not s.image.endswith("_seg.png")
               for s in scan.samples)
    assert any("unlabelled.png" in r for r in scan.skipped)


def make_brats(root: Path, n: int = 5, missing: dict | None = None) -> list[str]:
    sequences = ["t1", "t1ce", "t2", "flair"]
    for i in range(n):
        case = root / f"BraTS2021_{i:05d}"
        for seq in sequences:
            if (missing or {}).get(i) != seq:
                nifti(case / f"{case.name}_{seq}.nii.gz", value=200)
        nifti(case / f"{case.name}_seg.nii.gz", value=4, dtype=np.uint8)
    return sorted(sequences)


def test_brats_case_folders_with_a_missing_sequence(tmp_path):
    order = make_brats(tmp_path / "BraTS2021_TrainingData", 6, missing={2: "t1ce"})
    scan = scan_folder(tmp_path, "BraTS-style glioma MRI. Labels: 1 necrosis, 2 edema, "
                                 "4 enhancing tumour.")
    assert (scan.layout, scan.task) == ("image_mask_folders", "segmentation")
    assert scan.details["variant"] == "case_folders"
    assert scan.details["channel_names"] == order == ["flair", "t1", "t1ce", "t2"]
    assert len(scan.samples) == 5
    for sample in scan.samples:  # same sequence order in every case
        assert [Path(p).name.rsplit("_", 1)[1].split(".")[0] for p in sample.image] == order
        assert Path(sample.extra["label_path"]).parent == Path(sample.image[0]).parent
    reason = next(r for r in scan.skipped if "BraTS2021_00002" in r)
    assert "missing sequence(s) t1ce" in reason
    assert scan.classes == ["necrosis", "edema", "label_3", "enhancing tumour"]
    # the case folder below the folder all cases share is the patient
    assert {s.group for s in scan.samples} == {f"BraTS2021_{i:05d}" for i in (0, 1, 3, 4, 5)}
    summary, train, test = indexed(scan, tmp_path / "out")
    assert all(isinstance(e["image_path"], list) and len(e["image_path"]) == 4
               for e in train + test)
    assert summary["num_train"] + summary["num_test"] == 5


def test_case_table_beside_masks_does_not_hide_them(tmp_path):
    """BraTS ships name_mapping.csv (Grade HGG/LGG per case): the masks make it a segmentation
    set unless the description asks for classification only."""
    make_brats(tmp_path, 4)
    write_csv(tmp_path / "name_mapping.csv", ["Grade", "BraTS_2020_subject_ID"],
              [{"Grade": ["HGG", "LGG"][i % 2], "BraTS_2020_subject_ID": f"BraTS2021_{i:05d}"}
               for i in range(4)])
    assert scan_folder(tmp_path).layout == "image_mask_folders"
    assert scan_folder(tmp_path, "Glioma grade classification, HGG versus LGG.").layout != \
        "image_mask_folders"


def test_mask_with_another_grid_is_skipped(tmp_path):
    for i in range(4):
        nifti(tmp_path / "images" / f"case{i}.nii.gz", shape=(6, 6, 4))
        nifti(tmp_path / "masks" / f"case{i}.nii.gz", shape=(6, 6, 5 if i == 1 else 4), value=1,
              dtype=np.uint8)
    scan = scan_folder(tmp_path)
    assert len(scan.samples) == 3 and scan.details["geometry_checked"] == 4
    reason = next(r for r in scan.skipped if "case1" in r)
    assert "differs from image shape" in reason and "(6, 6, 5)" in reason


def test_bids_names_pair_by_subject(tmp_path):
    # VerSe: sub-verse004_ct.nii.gz + sub-verse004_seg-vert_msk.nii.gz
    for i in range(4):
        nifti(tmp_path / "images" / f"sub-verse{i:03d}_ct.nii.gz", value=300)
        nifti(tmp_path / "masks" / f"sub-verse{i:03d}_seg-vert_msk.nii.gz", value=1,
              dtype=np.uint8)
    nifti(tmp_path / "images" / "sub-verse999_ct.nii.gz")
    scan = scan_folder(tmp_path)
    assert (scan.layout, len(scan.samples)) == ("image_mask_folders", 4)
    assert all(Path(s.image).name.split("_")[0] == Path(s.extra["label_path"]).name.split("_")[0]
               for s in scan.samples)
    assert {s.group for s in scan.samples} == {f"subverse{i:03d}" for i in range(4)}
    assert any("sub-verse999" in r and "no mask" in r for r in scan.skipped)


def test_masks_that_match_no_image_name_raise_with_advice(tmp_path):
    for i in range(3):
        png(tmp_path / "images" / f"a{i}.png")
        png(tmp_path / "masks" / f"zz{i}x.png", value=1)
    with pytest.raises(ScanError, match="no mask file name matches an image"):
        scan_folder(tmp_path)


# ------------------------------------------------------------------ detection

def test_coco_json_with_negatives_and_kept_split(tmp_path):
    categories = [{"id": 1, "name": "nodule"}, {"id": 2, "name": "mass"}]
    for split, count in (("train", 4), ("test", 2)):
        images, annotations = [], []
        for i in range(count):
            name = f"{split}_{i}.png"
            png(tmp_path / "images" / name)
            images.append({"id": i + 1, "file_name": name, "width": 8, "height": 8})
            if i:  # image 0 of each split has no box: a negative
                annotations.append({"id": 10 * i, "image_id": i + 1, "bbox": [1, 2, 3, 4],
                                    "category_id": 1 + i % 2})
        annotations.append({"id": 99, "image_id": 2, "bbox": [1, 1, 0, 3], "category_id": 1})
        (tmp_path / f"instances_{split}.json").write_text(json.dumps(
            {"images": images, "annotations": annotations, "categories": categories}))
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task) == ("box_table", "anomaly_detection")
    assert scan.details["format"] == "coco_json" and scan.existing_split
    assert scan.classes == ["mass", "nodule"] and scan.dimension == "2D"
    by_name = {Path(s.image).name: s for s in scan.samples}
    negative = by_name["train_0.png"]
    assert negative.label == "negative" and negative.extra["boxes"] == []
    assert by_name["train_1.png"].extra["boxes"] == [[1.0, 2.0, 4.0, 6.0]]
    assert by_name["train_1.png"].extra["labels"] == ["mass"]
    assert {s.split for s in scan.samples} == {"train", "test"}
    assert sum("no extent" in r for r in scan.skipped) == 2
    summary, train, test = indexed(scan, tmp_path / "out")
    assert summary["split_method"] == "kept_from_dataset" and len(test) == 2
    label_dict = json.loads((tmp_path / "out" / "job" / "Datapath" / "label_dict.json").read_text())
    assert label_dict == {"mass": 0, "nodule": 1}


@pytest.mark.parametrize("columns,make_box", [
    (["image", "x", "y", "w", "h", "label"], lambda b: dict(zip("xywh", b))),
    (["image", "x1", "y1", "x2", "y2", "label"],
     lambda b: {"x1": b[0], "y1": b[1], "x2": b[0] + b[2], "y2": b[1] + b[3]}),
    (["filename", "xmin", "ymin", "xmax", "ymax", "class"],
     lambda b: {"xmin": b[0], "ymin": b[1], "xmax": b[0] + b[2], "ymax": b[1] + b[3]}),
])
def test_box_tables_xywh_and_corners_with_negatives(tmp_path, columns, make_box):
    rows = []
    for i in range(5):
        name = f"patient{i:03d}_1.png"
        png(tmp_path / "images" / name)
        box = make_box([2, 3, 4, 2]) if i % 2 else {c: "" for c in columns[1:5]}
        rows.append({columns[0]: name, **box, columns[5]: "nodule" if i % 2 else ""})
    write_csv(tmp_path / "boxes.csv", columns, rows)
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task, scan.details["format"]) == ("box_table", "anomaly_detection",
                                                               "csv")
    assert scan.classes == ["nodule"] and scan.class_counts == {"negative": 3, "positive": 2}
    positive = next(s for s in scan.samples if s.label == "positive")
    assert positive.extra["boxes"] == [[2.0, 3.0, 6.0, 5.0]]


def test_3d_corner_box_table_with_split_column(tmp_path):
    rows = []
    for i in range(6):
        name = f"case{i}.nii.gz"
        nifti(tmp_path / "volumes" / name)
        split = "test" if i >= 4 else "train"
        rows.append({"image": name, "xmin": 1, "ymin": 1, "zmin": 0, "xmax": 3, "ymax": 4,
                     "zmax": 2, "label": "nodule", "split": split})
    rows.append({"image": "case0.nii.gz", "xmin": 2, "ymin": 2, "zmin": 1, "xmax": 2,
                 "ymax": 4, "zmax": 3, "label": "nodule", "split": "train"})
    write_csv(tmp_path / "boxes.csv", list(rows[0]), rows)
    scan = scan_folder(tmp_path)
    assert scan.layout == "box_table" and scan.dimension == "3D" and scan.details["three_d"]
    assert scan.existing_split and sum(s.split == "test" for s in scan.samples) == 2
    assert scan.samples[0].extra["boxes"] == [[1.0, 1.0, 0.0, 3.0, 4.0, 2.0]]
    assert any("no extent" in r for r in scan.skipped)
    summary, _, test = indexed(scan, tmp_path / "out")
    assert summary["split_method"] == "kept_from_dataset" and len(test) == 2


# ------------------------------------------------------------------ reports

def test_iu_xray_two_tables_joined_and_grouped_by_report(tmp_path):
    reports, projections = [], []
    for uid in range(1, 9):
        reports.append({"uid": uid, "MeSH": "normal", "findings": f"Finding number {uid}.",
                        "impression": "No acute disease." if uid % 3 else ""})
        for view, projection in ((4001, "Frontal"), (2001, "Lateral")):
            name = f"{uid}_IM-{uid:04d}-{view}.dcm.png"
            png(tmp_path / "images" / "images_normalized" / name)
            projections.append({"uid": uid, "filename": name, "projection": projection})
    reports.append({"uid": 99, "MeSH": "", "findings": "", "impression": ""})
    projections.append({"uid": 99, "filename": "99_IM-0099-1.dcm.png", "projection": "Frontal"})
    png(tmp_path / "images" / "images_normalized" / "99_IM-0099-1.dcm.png")
    write_csv(tmp_path / "indiana_reports.csv", list(reports[0]), reports)
    write_csv(tmp_path / "indiana_projections.csv", list(projections[0]), projections)
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task) == ("report_table", "report_generation")
    assert scan.details["format"] == "csv_join" and scan.details["join_column"] == "uid"
    assert len(scan.samples) == 16 and len({s.group for s in scan.samples}) == 8
    assert scan.group_source == "report key"
    first = next(s for s in scan.samples if Path(s.image).name.startswith("3_"))
    assert first.extra == {"findings": "Finding number 3.", "impression": ""}
    assert any("99_IM" in r and "missing or empty" in r for r in scan.skipped)
    _, train, test = indexed(scan, tmp_path / "out")
    split = json.loads((tmp_path / "out" / "job" / "Datapath" / "split.json").read_text())
    assert not set(split["train_groups"]) & set(split["test_groups"])
    by_uid = {}
    for side, entries in (("train", train), ("test", test)):
        for e in entries:
            by_uid.setdefault(Path(e["image_path"]).name.split("_")[0], set()).add(side)
    assert all(len(sides) == 1 for sides in by_uid.values()) and len(by_uid) == 8


@pytest.mark.parametrize("form", ["json", "csv"])
def test_ct_rate_nested_case_folders_keep_the_split(tmp_path, form):
    """M3Bench's JSON lists (train/test) and CT-RATE's own CSVs (train/validation reports with
    VolumeName, Findings_EN, Impressions_EN; the validation set is the held-out set)."""
    held_out = "test" if form == "json" else "valid"
    rows = {"train": [], held_out: []}
    for split, patients in (("train", 4), (held_out, 2)):
        for p in range(1, patients + 1):
            for scan_id in "ab":
                name = f"{split}_{p}_{scan_id}_1.nii.gz"
                nifti(tmp_path / "dataset" / split / f"{split}_{p}" / f"{split}_{p}_{scan_id}" /
                      name)
                rows[split].append({"image_path": f"{split}_{p}/{split}_{p}_{scan_id}/{name}",
                                    "finding": f"Nodule in scan {scan_id}.",
                                    "impression": "Pulmonary nodule."})
    for split, entries in rows.items():
        if form == "json":
            (tmp_path / f"{split}.json").write_text(json.dumps(entries))
        else:
            table = [{"VolumeName": Path(e["image_path"]).name, "Technique_EN": "Helical CT.",
                      "Findings_EN": e["finding"], "Impressions_EN": e["impression"]}
                     for e in entries]
            name = "train_reports.csv" if split == "train" else "validation_reports.csv"
            write_csv(tmp_path / name, list(table[0]), table)
    scan = scan_folder(tmp_path)
    assert (scan.layout, scan.task, scan.dimension) == ("report_table", "report_generation", "3D")
    assert scan.details["format"] == form and scan.existing_split
    assert len(scan.samples) == 12 and sum(s.split == "test" for s in scan.samples) == 4
    assert scan.group_source == "case folder"
    assert len({s.group for s in scan.samples}) == 6  # two scans of one patient share a group
    assert scan.samples[0].extra["impression"] == "Pulmonary nodule."
    summary, _, test = indexed(scan, tmp_path / "out")
    assert summary["split_method"] == "kept_from_dataset" and len(test) == 4


def test_radgenome_reports_train_test_json(tmp_path):
    entries = {"train": [], "test": []}
    for i in range(6):
        split = "test" if i < 2 else "train"
        nifti(tmp_path / "images" / f"brain_{i}.nii.gz")
        entries[split].append({"image": f"images/brain_{i}.nii.gz", "finding": f"Lesion {i}.",
                               "impression": "Lesion."})
    entries["train"].append({"image": "images/missing.nii.gz", "finding": "x", "impression": "y"})
    for split, rows in entries.items():
        (tmp_path / f"reports_{split}.json").write_text(json.dumps(rows))
    scan = scan_folder(tmp_path)
    assert scan.layout == "report_table" and scan.existing_split
    assert sorted(s.split for s in scan.samples) == ["test"] * 2 + ["train"] * 4
    assert any("missing.nii.gz" in r and "not found" in r for r in scan.skipped)


def test_r2gen_annotation_object_with_image_lists_and_valid_only_split(tmp_path):
    data = {"train": [], "val": []}
    for k in range(6):
        study = f"CXR{k}_IM-{k:04d}"
        for view in ("0.png", "1.png"):  # the same file names in every study folder
            png(tmp_path / "images" / study / view)
        data["train" if k < 4 else "val"].append(
            {"id": study, "report": f"Heart size normal, study {k}.",
             "image_path": [f"{study}/0.png", f"{study}/1.png"], "split": ""})
    (tmp_path / "annotation.json").write_text(json.dumps(data))
    scan = scan_folder(tmp_path)
    assert scan.layout == "report_table" and len(scan.samples) == 12
    assert scan.existing_split and sum(s.split == "test" for s in scan.samples) == 4
    assert scan.details["splits_mapped"] == {"val": "test"}
    assert len({s.group for s in scan.samples}) == 6
    assert all(s.extra["findings"].startswith("Heart size") for s in scan.samples)


# ------------------------------------------------------------------ demos scan as before

def test_demo_datasets_keep_their_layouts(tmp_path):
    from core.demo import detection as demo_detection, reports as demo_reports, \
        segmentation as demo_segmentation
    cases = [
        (demo_segmentation.make_ct_organ_demo_3d, {"n_cases": 3}, "image_mask_folders", 3,
         ["liver", "spleen"]),
        (demo_segmentation.make_mri_multichannel_demo_3d, {"n_cases": 2}, "image_mask_folders",
         2, ["lesion"]),
        (demo_detection.make_nodule_detection_demo_2d, {"n": 6, "size": 64}, "box_table", 6,
         None),
        (demo_reports.make_report_demo_2d, {"n": 5}, "report_table", 5, []),
        (demo_reports.make_report_demo_3d, {"n": 5, "size": 16}, "report_table", 5, []),
    ]
    for k, (build, kwargs, layout, count, classes) in enumerate(cases):
        scan = scan_folder(build(tmp_path / f"demo{k}", **kwargs))
        assert (scan.layout, len(scan.samples), scan.skipped) == (layout, count, []), build
        if classes is not None:
            assert scan.classes == classes
    mri = scan_folder(tmp_path / "demo1")
    assert [Path(p).name[-9:] for p in mri.samples[0].image] == ["t1.nii.gz", "t2.nii.gz"]
    assert scan_folder(tmp_path / "demo4").existing_split
