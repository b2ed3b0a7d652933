"""Encodings public datasets use that the records reading must understand without a reader of
their own (each folder here is invented; the generality check in bench/generality has the
public layouts): captions in three split folders with headerless tab-separated tables, the
sequences of one exam as channels, a label kept in a part of the file names, mask folders named
in camel case, mask values named by the description (not 1..N, or listed in order), box rows
whose class another table gives, and folders that every image shares never taken as cases."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.mask_labels import label_names
from core.datasets.layouts.types import ScanError


def _png(path: Path, value: int, size: int = 24) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(value)
    Image.fromarray(rng.integers(0, 255, (size, size), dtype=np.uint8)).save(path)


def _csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_captions_in_split_folders_are_one_source_and_no_shared_folder_is_a_case(tmp_path):
    words = ["axial ct of the chest showing a nodule", "x-ray of the left knee, no fracture",
             "mri of the brain with a small lesion in the white matter"]
    k = 0
    for split, n in (("train", 12), ("validation", 4), ("test", 4)):
        lines, tags = [], []
        for _ in range(n):
            _png(tmp_path / "pack" / split / "radiology" / "images" / f"PIC_{k:05d}.jpg", k)
            lines.append(f"PIC_{k:05d}\t {words[k % 3]}")
            tags.append(f"PIC_{k:05d}\t{['ct', 'xray', 'mri'][k % 3]}")
            k += 1
        folder = tmp_path / "pack" / split / "radiology"
        (folder / "captions.txt").write_text("\n".join(lines) + "\n")
        (folder / "keywords.txt").write_text("\n".join(tags) + "\n")
    scan = scan_folder(tmp_path / "pack", "")
    report = [t for t in scan.details["targets"] if t["task"] == "report_generation"]
    assert report and report[0]["num_samples"] == 20, scan.details["targets"]
    assert report[0]["split"] == "kept from the dataset"
    # the first line is data (an id of the body's shape), not a header
    modality = [t for t in scan.details["targets"] if t["task"] == "diagnosis"]
    assert modality and sorted(modality[0]["classes"]) == ["ct", "mri", "xray"]
    assert report[0]["num_groups"] == 20   # radiology/images is shared: one group per image


def _volume(path: Path, shape, spacing, value: float) -> None:
    import SimpleITK as sitk
    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(np.full(shape, value, np.float32))
    image.SetSpacing(spacing)
    sitk.WriteImage(image, str(path))


def test_the_sequences_of_one_exam_are_one_sample_with_channels(tmp_path):
    rows = []
    for p in range(10):
        for s in range(1 + (p % 3 == 0)):
            stem = f"{700 + p}_{9000 + 10 * p + s}"
            folder = tmp_path / "mri" / f"fold{p % 2}" / str(700 + p)
            _volume(folder / f"{stem}_t2w.mha", (6, 16, 16), (0.5, 0.5, 3.0), p)
            _volume(folder / f"{stem}_adc.mha", (6, 8, 8), (1.0, 1.0, 3.0), p)
            _volume(folder / f"{stem}_sag.mha", (16, 16, 6), (3.0, 0.5, 0.5), p)
            rows.append({"patient_id": 700 + p, "study_id": 9000 + 10 * p + s,
                         "significant": "YES" if p % 2 else "NO"})
    _csv(tmp_path / "mri" / "labels" / "marksheet.csv", rows)
    scan = scan_folder(tmp_path / "mri", "Prostate MRI exams; 'significant' says whether each "
                                         "exam has significant cancer.")
    target = next(t for t in scan.details["targets"] if "significant" in t["id"])
    assert target["num_samples"] == len(rows) and target["coverage"] == 1.0, target
    images = [s.image for s in scan.samples]
    assert all(isinstance(i, list) and [Path(p).name.split("_")[-1] for p in i]
               == ["adc.mha", "t2w.mha"] for i in images), images[:2]   # sag left out
    assert len({s.group for s in scan.samples}) == 10


def test_a_label_in_a_part_of_the_file_names_the_description_explains(tmp_path):
    root = tmp_path / "tb"
    for i in range(16):
        _png(root / "Set" / "PNG" / f"CXRSET_{i:04d}_{i % 2}.png", i)
        _png(root / "Set" / "ManualMask" / "leftMask" / f"CXRSET_{i:04d}_{i % 2}.png", 100 + i)
    scan = scan_folder(root, "Screening chest X-rays. The last digit of the file name is the "
                             "reading (0 normal, 1 tuberculosis).")
    assert scan.task == "diagnosis" and sorted(scan.classes) == ["normal", "tuberculosis"]
    assert len(scan.samples) == 16   # the masks under ManualMask/leftMask are not images
    # without the description, a digit at the end of a name is never a label
    with pytest.raises(ScanError):
        scan_folder(root, "Screening chest X-rays.")


def test_mask_values_named_by_the_description(tmp_path):
    import nibabel as nib
    masks = []
    for i in range(3):
        data = np.zeros((8, 8, 4), np.uint8)
        data[1:3, 1:3, 1] = 1
        data[4:6, 4:6, 2] = 2
        data[6:8, 0:2, 3] = 4          # value 3 is never used (BraTS-like)
        masks.append(tmp_path / f"case{i}_seg.nii.gz")
        nib.save(nib.Nifti1Image(data, np.eye(4)), str(masks[-1]))
    names, facts = label_names(tmp_path, "Glioma MRI with the tumour segmentation "
                               "(1 necrotic core, 2 edema, 4 enhancing tumour).", masks)
    assert names == ["necrotic core", "edema", "enhancing tumour"]
    assert facts["label_values"] == [1, 2, 4]
    for m in masks:                     # three values 1..3 and three structures listed
        data = np.asarray(nib.load(str(m)).dataobj)
        data[data == 4] = 3
        nib.save(nib.Nifti1Image(data, np.eye(4)), str(m))
    names, facts = label_names(tmp_path, "Cine MRI; the frames have manual contours of the "
                               "right ventricle, myocardium and left ventricle.", masks)
    assert names == ["right ventricle", "myocardium", "left ventricle"]
    assert "in the order listed" in facts["label_source"]
    names, _ = label_names(tmp_path, "Echo frames. Cardiologists outlined the left ventricle, "
                           "myocardium and left atrium.", masks)
    assert names == ["left ventricle", "myocardium", "left atrium"]


def test_boxes_without_a_class_column_take_the_class_another_table_gives(tmp_path):
    root = tmp_path / "boxes"
    boxes, info = [], []
    for i in range(24):
        pid = f"a{i:03d}ff"
        _png(root / "train_images" / f"{pid}.png", i, 64)
        sick = i % 3 == 0
        boxes.append({"patientId": pid, "x": 10 if sick else "", "y": 12 if sick else "",
                      "width": 20 if sick else "", "height": 18 if sick else "",
                      "Target": int(sick)})
        info.append({"patientId": pid, "class": "Consolidation" if sick else
                     ("Normal" if i % 2 else "Other opacity")})
    _csv(root / "train_labels.csv", boxes)
    _csv(root / "class_info.csv", info)
    for i in range(6):
        _png(root / "test_images" / f"t{i:03d}.png", 50 + i, 64)
    scan = scan_folder(root, "Chest X-rays; consolidations are boxed.")
    assert scan.task == "anomaly_detection" and scan.classes == ["Consolidation"]
    refused = {r["reader"]: r.get("refused", "") for r in scan.details["interpretations"]}
    assert "split" in refused.get("class_folders", "split")   # train_images/test_images


def test_analyze_volumes_are_read_and_patient_owned_fields_are_no_patient_key(tmp_path):
    """Analyze 7.5 pairs (.hdr + .img, OASIS-1's RAW scans) are one volume each; a table's
    PatientSex is about the patient, never the patient key (it would put everyone in two
    groups)."""
    import nibabel as nib
    from core.imaging.image_io import read_image

    rows = []
    for i in range(12):
        data = np.full((6, 6, 4), i, np.int16)
        folder = tmp_path / "mr" / f"SUBJ_{i:04d}_MR1"
        folder.mkdir(parents=True)
        nib.save(nib.AnalyzeImage(data, np.diag([1.0, 1.0, 1.25, 1.0])),
                 str(folder / f"SUBJ_{i:04d}_MR1_mpr.hdr"))
        rows.append({"ID": f"SUBJ_{i:04d}_MR1", "PatientSex": "F" if i % 2 else "M",
                     "Group": "Demented" if i % 3 == 0 else "Nondemented"})
    _csv(tmp_path / "mr" / "clinical.csv", rows)
    arr, meta = read_image(str(tmp_path / "mr" / "SUBJ_0003_MR1" / "SUBJ_0003_MR1_mpr.hdr"))
    assert arr.shape == (1, 6, 6, 4) and float(arr.max()) == 3.0
    scan = scan_folder(tmp_path / "mr", "Brain MRI; Group is the diagnosis.")
    assert scan.dimension == "3D" and len(scan.samples) == 12
    assert sorted(scan.classes) == ["Demented", "Nondemented"]
    assert len({s.group for s in scan.samples}) == 12, scan.group_source


def test_known_formats_are_data_files_that_name_and_recognise_a_folder(tmp_path):
    """Every core/datasets/formats/*.json parses; a description word and a folder's files both
    name the format, and the card's reading says which format it stands for."""
    from core.datasets.layouts.known_formats import (formats_named, load_formats,
                                                      recognised)
    formats = load_formats()
    assert {"voc", "yolo", "coco", "msd", "nnunet", "luna16", "totalsegmentator"} <= set(formats)
    assert all(f.get("name") and "readings" in f and "signature" in f for f in formats.values())
    assert "yolo" in formats_named("Exported in YOLO format") and not formats_named("plain")
    root = tmp_path / "voc"
    for i in range(6):
        _png(root / "JPEGImages" / f"f{i}.png", i, 48)
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        objects = "" if i % 3 == 0 else (
            "<object><name>polyp</name><bndbox><xmin>4</xmin><ymin>5</ymin><xmax>20</xmax>"
            "<ymax>22</ymax></bndbox></object>")
        (root / "Annotations" / f"f{i}.xml").write_text(
            f"<annotation><filename>f{i}.png</filename><size><width>48</width><height>48"
            f"</height></size>{objects}</annotation>")
    assert recognised(root) == ["voc"]
    scan = scan_folder(root, "Colonoscopy frames with polyps boxed.")
    assert [f["key"] for f in scan.details["known_formats"]] == ["voc"]


def test_image_and_ground_truth_folders_of_any_name_and_one_named_finding(tmp_path):
    """``Original/`` beside ``Ground Truth/`` (same file names) are images and their masks,
    not two classes; a binary mask takes the one finding the description names."""
    root = tmp_path / "frames"
    for i in range(10):
        _png(root / "Original" / f"{i}.png", i, 32)
        mask = np.zeros((32, 32), np.uint8)
        mask[8:16, 8:16] = 255
        (root / "Ground Truth").mkdir(parents=True, exist_ok=True)
        Image.fromarray(mask).save(root / "Ground Truth" / f"{i}.png")
    scan = scan_folder(root, "Colonoscopy frames, each showing a polyp outlined by hand.")
    assert scan.task == "segmentation" and scan.classes == ["polyp"]
    assert all("Original" in s.image for s in scan.samples)


def test_one_image_folder_beside_annotation_folders_holds_the_classes(tmp_path):
    """``images/Fractured``, ``images/Non_fractured`` beside ``Annotations/`` and
    ``Utilities/``: the class folders are found below images/, and a table's columns named for
    the body part imaged (hand, leg) are no findings, nor is a count that is 0/1 here."""
    root = tmp_path / "atlas"
    rows = []
    for i in range(24):
        label = "Fractured" if i % 2 else "Non_fractured"
        _png(root / "images" / label / f"IMG{i:05d}.jpg", i, 32)
        rows.append({"image_id": f"IMG{i:05d}.jpg", "hand": i % 3 == 0 and 1 or 0,
                     "leg": int(i % 3 == 1), "hardware": int(i % 4 == 0),
                     "fracture_count": i % 2, "fractured": i % 2})
    (root / "Annotations" / "VOC").mkdir(parents=True)
    (root / "Utilities").mkdir()
    _csv(root / "dataset.csv", rows)
    scan = scan_folder(root, "Radiographs of fractured and intact bones.")
    kinds = {(t["task"], tuple(sorted(t["classes"]))) for t in scan.details["targets"]}
    assert ("diagnosis", ("Fractured", "Non_fractured")) in kinds, kinds
    names = {t.get("name") for t in scan.details["targets"]}
    assert not names & {"hand", "leg", "fracture_count"}, names   # attributes, a count
    # the folders and the 'fractured' column split the images alike: they confirm each other,
    # so the unrelated 'hardware' column is a second target, not a question for the user
    assert not scan.details["interpretation"]["ambiguous"], scan.details["interpretation"]
    assert sorted(scan.classes) == ["Fractured", "Non_fractured"]
    assert "hardware" in names
    assert all(len({s.group for s in scan.samples}) > 3 for _ in [0])   # no class "cases"


def test_a_box_table_beside_deep_images_with_a_presence_flag_and_2d_metaimages(tmp_path):
    """NODE21-like: ``data/processed/metadata.csv`` beside ``data/processed/images/*.mha``
    (2D MetaImage), boxes in x, y, width, height with a 0/1 ``label`` flag (0 0 0 0 for no
    nodule): a 2D detection of the finding the description names, not of class '1'."""
    import SimpleITK as sitk
    folder = tmp_path / "nod" / "data" / "processed"
    rows = []
    for i in range(12):
        (folder / "images").mkdir(parents=True, exist_ok=True)
        sitk.WriteImage(sitk.GetImageFromArray(np.full((32, 32), i, np.int16)),
                        str(folder / "images" / f"n{i:04d}.mha"))
        box = (8, 9, 6, 6) if i % 3 else (0, 0, 0, 0)
        rows.append({"img_name": f"n{i:04d}.mha", "x": box[0], "y": box[1], "width": box[2],
                     "height": box[3], "label": int(bool(i % 3))})
    _csv(folder / "metadata.csv", rows)
    scan = scan_folder(tmp_path / "nod", "Chest radiographs; lung nodules are boxed.")
    assert scan.task == "anomaly_detection" and scan.classes == ["nodule"]
    assert scan.dimension == "2D" and len(scan.samples) == 12
