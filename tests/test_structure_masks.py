"""Datasets that ship one binary mask file per structure (TotalSegmentator case folders with
segmentations/<structure>.nii.gz; Montgomery leftMask/ + rightMask/; JSRT masks/<structure>/
GIFs) are read as segmentation whose labels are the structures, and indexed with one merged
label map per case in the job's Datapath, never in the dataset folder."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from core.datasets.indexing import write_list_index, write_test_index
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.mask_structures import scan_structure_masks, structure_name
from core.datasets.layouts.types import all_images
from core.datasets.validation import validate

SHAPE = (10, 9, 6)
AFFINE = np.diag([1.5, 1.5, 3.0, 1.0])
AFFINE[:3, 3] = [-7.0, 4.0, 120.0]
BLOCKS = {"liver": (slice(0, 4), slice(0, 4)), "spleen": (slice(6, 10), slice(0, 4)),
          "kidney": (slice(0, 4), slice(5, 9))}


def _nifti(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, AFFINE), str(path))


def _totalseg(root: Path, cases: int = 6, missing: tuple[str, str] = ("s0004", "spleen")):
    """s####/ct.nii.gz + s####/segmentations/<structure>.nii.gz; one case lacks one file and
    one case's kidney is out of view (an empty file)."""
    rng = np.random.default_rng(0)
    truth = {}
    for i in range(cases):
        case = f"s{i:04d}"
        _nifti(root / case / "ct.nii.gz", rng.integers(-100, 100, SHAPE).astype(np.int16))
        present = {}
        for name, (xs, ys) in BLOCKS.items():
            if (case, name) == missing:
                continue
            mask = np.zeros(SHAPE, np.uint8)
            if not (i == 2 and name == "kidney"):
                mask[xs, ys, i % 3: 4 + i % 3] = 1
            _nifti(root / case / "segmentations" / f"{name}.nii.gz", mask)
            present[name] = mask
        truth[case] = present
    (root / "meta.csv").write_text("image_id;age\n" + "".join(f"s{i:04d};50\n"
                                                            for i in range(cases)))
    return truth


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_totalsegmentator_case_folders_are_structures_merged_into_label_maps(tmp_path):
    root, datapath = tmp_path / "Totalsegmentator_dataset", tmp_path / "job" / "Datapath"
    truth = _totalseg(root)
    before = _listing(root)
    scan = scan_folder(root)
    assert scan.layout == "image_mask_folders" and scan.task == "segmentation"
    assert scan.dimension == "3D" and scan.classes == ["kidney", "liver", "spleen"]
    assert len(scan.samples) == 6 and scan.details["structure_masks"]
    assert scan.details["interpretation"]["reader"] == "structure_masks"
    short = next(s for s in scan.samples if s.extra["case"] == "s0004")
    assert short.extra["label_structures"] == ["kidney", "liver"]
    assert short.extra["structures_without_file"] == ["spleen"]
    assert {s.group for s in scan.samples} == set(truth)  # the case folder is the patient

    report = validate(scan)
    assert not report.errors, report.errors
    assert report.checked["masks_decoded"] > 0

    summary = write_list_index(scan, datapath, "segmentation", test_fraction=0.34, seed=1)
    assert summary["label_maps"]["label_maps"] == 6
    entries = (json.loads((datapath / "train.json").read_text())
               + json.loads((datapath / "test.json").read_text()))
    assert len(entries) == 6
    value = {name: i + 1 for i, name in enumerate(scan.classes)}
    for entry in entries:
        assert entry["labels"] == ["kidney", "liver", "spleen"]
        label_map = Path(entry["label_path"])
        assert label_map.parent == datapath / "labelmaps" and label_map.name.endswith(".nii.gz")
        case = Path(entry["image_path"]).parent.name
        img = nib.load(str(label_map))
        assert np.allclose(img.affine, AFFINE)  # the image's geometry
        data = np.asarray(img.dataobj)
        expected = np.zeros(SHAPE, np.uint8)
        for name, mask in truth[case].items():
            expected[mask > 0] = value[name]
        assert np.array_equal(data, expected)
        assert set(np.unique(data)) <= {0, 1, 2, 3}
    s4 = np.asarray(nib.load(str(datapath / "labelmaps" / "s0004.nii.gz")).dataobj)
    assert 3 not in s4 and 2 in s4          # spleen absent where its file is missing
    assert _listing(root) == before           # nothing written in the dataset folder

    test_only = write_test_index(scan, tmp_path / "external", "segmentation")
    assert test_only["num_test"] == 6
    assert all("/external/labelmaps/" in e["label_path"]
               for e in json.loads((tmp_path / "external" / "test.json").read_text()))


def test_labels_json_orders_the_structures(tmp_path):
    _totalseg(tmp_path / "ds")
    (tmp_path / "ds" / "labels.json").write_text(json.dumps(["spleen", "liver", "kidney"]))
    scan = scan_folder(tmp_path / "ds")
    assert scan.classes == ["spleen", "liver", "kidney"]
    sample = next(s for s in scan.samples if s.extra["case"] == "s0000")
    assert sample.extra["label_structures"] == ["spleen", "liver", "kidney"]


def _png(path: Path, array: np.ndarray, suffix: str = ".png") -> None:
    path = path.with_suffix(suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _montgomery(root: Path, count: int = 6, mask_suffix: str = ".png",
                folders=("ManualMask/leftMask", "ManualMask/rightMask")):
    truth = {}
    for i in range(count):
        stem = f"MCUCXR_{i + 1:04d}_{i % 2}"
        _png(root / "CXR_png" / stem, np.full((16, 12), 40 + i, np.uint8))
        left, right = np.zeros((16, 12), np.uint8), np.zeros((16, 12), np.uint8)
        left[2:14, 1:5], right[2:14, 7:11] = 255, 255
        _png(root / folders[0] / stem, left, mask_suffix)
        _png(root / folders[1] / stem, right, mask_suffix)
        truth[stem] = (left, right)
    return truth


def test_montgomery_mask_folders_are_structures_merged_into_png_label_maps(tmp_path):
    root, datapath = tmp_path / "MontgomerySet", tmp_path / "dp"
    truth = _montgomery(root)
    before = _listing(root)
    scan = scan_folder(root, "Lung masks of chest X-rays.")
    assert scan.task == "segmentation" and scan.dimension == "2D"
    assert scan.classes == ["left", "right"] and len(scan.samples) == 6
    assert scan.details["variant"] == "structure_folders"
    assert not validate(scan).errors
    write_list_index(scan, datapath, "segmentation", test_fraction=0.34, seed=0)
    entries = (json.loads((datapath / "train.json").read_text())
               + json.loads((datapath / "test.json").read_text()))
    for entry in entries:
        assert entry["label_path"].endswith(".png")
        data = np.asarray(Image.open(entry["label_path"]))
        left, right = truth[Path(entry["image_path"]).stem]
        assert np.array_equal(data, (left > 0) * 1 + (right > 0) * 2)
    assert _listing(root) == before


def test_jsrt_gif_masks_in_structure_folders_with_a_nested_structure(tmp_path):
    """JSRT/SCR: masks/<structure>/<id>.gif. A structure inside another (a lesion inside its
    lung) is drawn over it, and the index says where structures overlap."""
    root = tmp_path / "JSRT"
    for i in range(5):
        stem = f"JPCLN{i:03d}"
        _png(root / "images" / stem, np.full((16, 16), 90, np.uint8))
        lung, nodule = np.zeros((16, 16), np.uint8), np.zeros((16, 16), np.uint8)
        lung[2:14, 2:8] = 255
        nodule[5:7, 4:6] = 255
        _png(root / "masks" / "left lung" / stem, lung, ".gif")
        _png(root / "masks" / "nodule" / stem, nodule, ".gif")
    scan = scan_folder(root)
    assert scan.task == "segmentation" and scan.classes == ["left lung", "nodule"]
    assert not validate(scan).errors
    summary = write_list_index(scan, tmp_path / "dp", "segmentation", test_fraction=0.4)
    assert summary["label_maps"]["cases_with_overlap"] == 5 and "note" in summary["label_maps"]
    data = np.asarray(Image.open(tmp_path / "dp" / "labelmaps" / "JPCLN000.png"))
    assert data[5, 4] == 2 and data[3, 3] == 1 and data[0, 0] == 0


def test_validation_flags_a_structure_file_that_is_a_label_map(tmp_path):
    _totalseg(tmp_path / "ds")
    bad = np.zeros(SHAPE, np.uint8)
    bad[:2, :2, :2], bad[5:, 5:, :2] = 1, 2
    _nifti(tmp_path / "ds" / "s0001" / "segmentations" / "kidney.nii.gz", bad)
    errors = validate(scan_folder(tmp_path / "ds")).errors
    assert any("more than one foreground value" in e for e in errors), errors


def test_a_mask_per_case_in_a_subfolder_is_not_read_as_structures(tmp_path):
    for i in range(4):
        _nifti(tmp_path / f"case{i}" / "image.nii.gz", np.zeros(SHAPE, np.int16))
        _nifti(tmp_path / f"case{i}" / "masks" / f"case{i}.nii.gz", np.zeros(SHAPE, np.uint8))
    assert scan_structure_masks(tmp_path, all_images(tmp_path)) is None


def test_structure_names_drop_the_mask_word():
    assert structure_name("leftMask") == "left"
    assert structure_name("lung masks") == "lung"
    assert structure_name("left lung") == "left lung"
    assert structure_name("masks") == "masks"
    assert os.sep not in structure_name("heart")
