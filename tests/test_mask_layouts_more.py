"""Segmentation and detection layouts public datasets ship that the fourth generality batch
showed (each folder here is invented; bench/generality has the public layouts): a hand-drawn
annotation folder beside a field-of-view ``mask/`` folder, masks paired by their leading case
number, GIF masks; one mask folder per structure in a tree that mirrors the image tree;
``volume-N`` beside ``segmentation-N``; a class folder's ``images/`` and ``masks/``; a box
table's ``*_type`` class column; the drawn structure named from the description; and the
registration's fallback when the best reading cannot be split."""
from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.mask_labels import segmented_object


def _png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array.astype(np.uint8)).save(path)


def _disc(size: int, r: int, cx: int, cy: int) -> np.ndarray:
    y, x = np.mgrid[:size, :size]
    return ((x - cx) ** 2 + (y - cy) ** 2 <= r * r)


def test_drawn_annotations_beat_a_field_of_view_mask_folder(tmp_path):
    root = tmp_path / "RETINA"
    rng = np.random.default_rng(0)
    for split, numbers in (("training", range(21, 31)), ("test", range(1, 7))):
        for n in numbers:
            image = rng.integers(0, 120, (32, 32, 3))
            vessel = np.zeros((32, 32), bool)
            vessel[:, 10 + n % 5] = True
            image[vessel] = 200
            _png(root / split / "images" / f"{n:02d}_{split}.tif", image)
            # the label: GIF, named by the case number only
            (root / split / "1st_manual").mkdir(parents=True, exist_ok=True)
            Image.fromarray((vessel * 255).astype(np.uint8)).save(
                root / split / "1st_manual" / f"{n:02d}_manual1.gif")
            # the field of view: a big disc, in a folder plainly named mask/
            (root / split / "mask").mkdir(parents=True, exist_ok=True)
            Image.fromarray((_disc(32, 14, 16, 16) * 255).astype(np.uint8)).save(
                root / split / "mask" / f"{n:02d}_{split}_mask.gif")
    scan = scan_folder(root, "Fundus photographs with manual vessel segmentations. The mask "
                             "folder is only the field of view.")
    assert scan.task == "segmentation" and scan.classes == ["vessel"], scan.classes
    assert len(scan.samples) == 16
    assert all("1st_manual" in s.extra["label_path"] for s in scan.samples)
    assert all(Path(s.image).name.split("_")[0] == Path(s.extra["label_path"]).name.split("_")[0]
               for s in scan.samples)
    assert {s.split for s in scan.samples} == {"train", "test"}


def test_one_mask_folder_per_structure_in_a_mirrored_tree(tmp_path):
    root = tmp_path / "A. Segmentation"
    for split, numbers in (("a. Training Set", range(1, 11)), ("b. Testing Set", range(11, 15))):
        for n in numbers:
            _png(root / "1. Original Images" / split / f"EYE_{n:02d}.jpg",
                 np.full((24, 24, 3), 60 + n))
            gt = root / "2. All Segmentation Groundtruths" / split
            _png(gt / "1. Microaneurysms" / f"EYE_{n:02d}_MA.tif", _disc(24, 2, 5, 5) * 255)
            _png(gt / "2. Optic Disc" / f"EYE_{n:02d}_OD.tif", _disc(24, 5, 16, 16) * 255)
            if n % 3 == 0:   # a lesion type most images lack: no file for them
                _png(gt / "3. Soft Exudates" / f"EYE_{n:02d}_SE.tif", _disc(24, 3, 8, 16) * 255)
    scan = scan_folder(root, "")
    assert scan.task == "segmentation"
    assert sorted(scan.classes) == ["Microaneurysms", "Optic Disc", "Soft Exudates"]
    assert len(scan.samples) == 14
    assert {s.split for s in scan.samples} == {"train", "test"}
    third = next(s for s in scan.samples if Path(s.image).stem == "EYE_03")
    assert len(third.extra["label_path"]) == 3


def test_volume_and_segmentation_named_by_number_in_batch_folders(tmp_path):
    root = tmp_path / "LIVER"
    for n in range(6):
        folder = root / f"Training Batch {1 + n // 3}"
        folder.mkdir(parents=True, exist_ok=True)
        image = np.zeros((8, 8, 4), np.int16)
        mask = np.zeros((8, 8, 4), np.uint8)
        mask[2:6, 2:6] = 1
        mask[3, 3] = 2
        nib.save(nib.Nifti1Image(image, np.eye(4)), str(folder / f"volume-{n}.nii"))
        nib.save(nib.Nifti1Image(mask, np.eye(4)), str(folder / f"segmentation-{n}.nii"))
    scan = scan_folder(root, "Liver CT; labels: 1 liver, 2 tumour")
    assert scan.task == "segmentation" and scan.classes == ["liver", "tumour"]
    assert len(scan.samples) == 6
    assert all(Path(s.image).name.replace("volume", "segmentation") ==
               Path(s.extra["label_path"]).name for s in scan.samples)


def test_a_class_folders_images_and_masks_subfolders(tmp_path):
    root = tmp_path / "CXR"
    rng = np.random.default_rng(1)
    for c, name in enumerate(["COVID", "Normal", "Viral Pneumonia"]):
        for i in range(8):
            _png(root / name / "images" / f"{name}-{i + 1}.png", rng.integers(0, 255, (20, 20)))
            _png(root / name / "masks" / f"{name}-{i + 1}.png", _disc(20, 6, 10, 10) * 255)
    scan = scan_folder(root, "Chest X-rays of three classes, with lung masks.")
    assert scan.task == "diagnosis" and scan.dimension == "2D"
    assert scan.classes == ["COVID", "Normal", "Viral Pneumonia"]
    assert len(scan.samples) == 24 and all("/images/" in s.image for s in scan.samples)


def test_a_box_tables_type_column_names_the_classes(tmp_path):
    root = tmp_path / "CELLS"
    rows = []
    for i in range(12):
        _png(root / "JPEGImages" / f"Im{i:03d}.jpg", np.full((40, 40, 3), 90))
        for k, kind in enumerate(["RBC", "WBC", "Platelets"][: 1 + i % 3]):
            rows.append({"filename": f"Im{i:03d}.jpg", "cell_type": kind, "xmin": 2 + 10 * k,
                         "xmax": 9 + 10 * k, "ymin": 3, "ymax": 12})
    with open(root / "boxes.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    scan = scan_folder(root, "")
    assert scan.task == "anomaly_detection"
    assert sorted(scan.classes) == ["Platelets", "RBC", "WBC"]
    assert scan.details["label_column"] == "cell_type"


def test_the_drawn_structure_is_named_from_the_description():
    assert segmented_object("retinal photographs with manual vessel segmentations") == "vessel"
    assert segmented_object("The head is outlined with an ellipse.") == "head"
    assert segmented_object("CT with segmentations of the left ventricle") == "left ventricle"
    assert segmented_object("binary masks, 255 = tumour") == ""
    assert segmented_object("") == ""


def _mammo(tmp_path: Path) -> Path:
    root = tmp_path / "MAMMO"
    rows = []
    rng = np.random.default_rng(2)
    for p in range(20):
        for view in ("CC", "MLO"):
            name = f"{p}_{view}"
            _png(root / "images" / f"{name}.png", rng.integers(0, 255, (16, 16)))
            rows.append({"patient_id": f"P{p}", "image_id": name, "view": view,
                         "cancer": int(p % 4 == 0), "biopsy": int(p % 3 == 0),
                         "implant": int(p == 7)})   # one woman's images only
    with open(root / "train.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return root


def test_a_label_only_one_patient_has_is_left_out_of_a_multi_label_target(settings, store,
                                                                            tmp_path):
    from core.datasets.registration import register_dataset
    root = _mammo(tmp_path)
    scan = scan_folder(root, "")
    findings = next(t for t in scan.details["targets"] if t["name"] == "findings")
    assert "implant" not in findings["classes"]   # one patient: left out, and said so
    assert any("'implant' left out" in s for s in scan.skipped)
    result = register_dataset(settings, store, str(root), "mammo", "")
    assert result["status"] == "registered", result["errors"]


def test_registration_uses_the_next_target_when_the_best_fails_validation(settings, store,
                                                                           tmp_path,
                                                                           monkeypatch):
    import core.datasets.registration as registration
    root = _mammo(tmp_path)
    real = registration.validate
    best = scan_folder(root, "").details["target"]

    def failing_first(scan, *args, **kwargs):
        v = real(scan, *args, **kwargs)
        if scan.details.get("target") == best:
            v.errors.append("class 'x': all images come from one patient")
        return v

    monkeypatch.setattr(registration, "validate", failing_first)
    result = registration.register_dataset(settings, store, str(root), "mammo", "")
    assert result["status"] == "registered", result["errors"]
    assert f"the best reading ({best.split(':', 1)[-1]})" in result["warnings"][0] or \
        best in result["warnings"][0]
    assert "registered the next usable one" in result["warnings"][0]
    from core.datasets.catalog import find_entry
    card = find_entry(settings, "mammo").card
    assert card.targets[0]["id"] != best


def test_boxes_as_python_literals_in_a_cell_and_ids_with_a_kind_word(tmp_path):
    root = tmp_path / "COVIDBOX"
    rows = []
    for i in range(14):
        uid = f"{i:04x}ab12cd"
        _png(root / "train" / f"s{i}" / f"e{i}" / f"{uid}.png", np.full((32, 32), 40))
        boxes = "" if i % 3 == 0 else str([{"x": 4.0 + i, "y": 5.5, "width": 9.25,
                                            "height": 7.0}])
        rows.append({"id": f"{uid}_image", "boxes": boxes,
                     "label": "none 1 0 0 1 1" if not boxes else
                     f"opacity 1 {4 + i} 5.5 {13.25 + i} 12.5"})
    with open(root / "train_image_level.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    scan = scan_folder(root, "Chest radiographs; radiologists boxed the lung opacities.")
    assert scan.task == "anomaly_detection" and scan.classes == ["opacity"]
    assert len(scan.samples) == 14
    boxed = next(s for s in scan.samples if Path(s.image).stem == "0001ab12cd")
    assert boxed.extra["boxes"] == [[5.0, 5.5, 14.25, 12.5]]
    empty = next(s for s in scan.samples if Path(s.image).stem == "0000ab12cd")
    assert empty.extra["boxes"] == []


def test_a_structures_folder_of_per_organ_files_in_each_case(tmp_path):
    """PDDCA style: ``<case>/img.nrrd`` + ``<case>/structures/<organ>.nrrd``, an organ's file
    missing where it was not drawn."""
    import SimpleITK as sitk
    root = tmp_path / "HN"
    for n in range(6):
        case = root / f"0522c{n:04d}"
        (case / "structures").mkdir(parents=True)
        sitk.WriteImage(sitk.GetImageFromArray(np.zeros((4, 8, 8), np.int16)),
                        str(case / "img.nrrd"))
        for organ in ["BrainStem", "Mandible"] + (["Chiasm"] if n % 2 else []):
            mask = np.zeros((4, 8, 8), np.uint8)
            mask[1:3, 2:6, 2:6] = 1
            sitk.WriteImage(sitk.GetImageFromArray(mask), str(case / "structures" /
                                                               f"{organ}.nrrd"))
    scan = scan_folder(root, "")
    assert scan.task == "segmentation" and len(scan.samples) == 6
    assert sorted(scan.classes) == ["BrainStem", "Chiasm", "Mandible"]


def test_shapes_as_number_runs_in_a_cell_are_boxes_and_runs_are_not(tmp_path):
    from core.datasets.records.cell_values import shapes_in_cells
    rows = [{"image_name": "a.jpg", "annotation": "2 25 26 23 28 20 30;1 39 36 47 44"},
            {"image_name": "b.jpg", "annotation": "0 14 36 20 42"},
            {"image_name": "c.jpg", "annotation": ""}]
    out = shapes_in_cells([dict(r) for r in rows])
    assert out[0]["annotation"] == [{"bbox": [20.0, 26.0, 5.0, 4.0]},
                                    {"bbox": [39.0, 36.0, 8.0, 8.0]}]
    assert out[1]["annotation"] == [{"bbox": [14.0, 36.0, 6.0, 6.0]}]
    assert out[2]["annotation"] == []
    runs = [{"ImageId": "x", "EncodedPixels": "1 2 5 3 9 4 20 8 40 2"},
            {"ImageId": "y", "EncodedPixels": "-1"}]
    assert shapes_in_cells([dict(r) for r in runs]) == runs
    unnamed = [{"id": "x", "v": "101 20 300 12 420 9 600 30 811 2"}]   # one long even run
    assert shapes_in_cells([dict(r) for r in unnamed]) == unnamed
