"""Box tables in the encodings public detection datasets use (core.datasets.layouts.box_world,
core.datasets.layouts.box_encodings): LUNA16-like centres in world millimetres with a diameter,
converted through each volume's own header geometry, and DeepLesion-like boxes written in one
cell with file names joined from a folder and a file and a coded Train_Val_Test split. Every
folder is invented here (tiny .mhd/.raw volumes, 16-bit PNGs)."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from PIL import Image

from core.datasets.layouts.box_encodings import coded_split, find_image
from core.datasets.layouts.tables import described_finding
from core.datasets.layouts.common import FileMatcher
from core.datasets.layouts.dispatch import scan_folder
from core.imaging.image_io import read_image

SHAPE_XYZ = (30, 26, 12)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def volume(path: Path, blob_xyz, spacing, origin, radius_mm: float,
           direction=(1, 0, 0, 0, 1, 0, 0, 0, 1)) -> None:
    """A dark volume with a bright ball of ``radius_mm`` around voxel ``blob_xyz``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x, y, z = np.meshgrid(*(np.arange(n) for n in SHAPE_XYZ), indexing="ij")
    data = np.full(SHAPE_XYZ, -900, np.int16)
    if blob_xyz is not None:
        dist = sum(((a - c) * s) ** 2 for a, c, s in zip((x, y, z), blob_xyz, spacing))
        data[dist <= radius_mm ** 2] = 200
    image = sitk.GetImageFromArray(np.transpose(data, (2, 1, 0)))  # (z, y, x) for ITK
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    image.SetDirection([float(d) for d in direction])
    sitk.WriteImage(image, str(path), useCompression=False)


def luna_like(root: Path) -> dict[str, tuple]:
    """7 scans in two subset folders, non-zero origins, anisotropic spacing (scan 4 with its
    x and y axes flipped); scan 6 has no nodule (no row); annotations.csv in world mm and
    candidates.csv (class 0/1) beside it."""
    blobs, rows, candidates = {}, [], []
    for i in range(7):
        uid = f"1.3.6.1.4.1.14519.5.2.1.6279.6001.{1000 + i}"
        spacing = (0.7 + 0.02 * i, 0.7 + 0.02 * i, 2.5)
        origin = (-150.0 - i, -170.0 + 3 * i, -300.0 - 7 * i)
        blob = None if i == 6 else (8 + 2 * i, 7 + i, 3 + i % 5)
        flip = -1 if i == 4 else 1
        direction = (flip, 0, 0, 0, flip, 0, 0, 0, 1)
        volume(root / f"subset{i % 2}" / f"{uid}.mhd", blob, spacing, origin, 3.0, direction)
        blobs[uid] = (blob, spacing)
        if blob is not None:
            steps = [b * s * f for b, s, f in zip(blob, spacing, (flip, flip, 1))]
            world = [o + d for o, d in zip(origin, steps)]
            rows.append([uid, *world, 6.0])
            candidates.append([uid, *world, 1])
        candidates.append([uid, origin[0] + 5, origin[1] + 5, origin[2] + 5, 0])
    write_csv(root / "annotations.csv",
              ["seriesuid", "coordX", "coordY", "coordZ", "diameter_mm"], rows)
    write_csv(root / "candidates.csv", ["seriesuid", "coordX", "coordY", "coordZ", "class"],
              candidates)
    return blobs


def test_world_mm_centres_with_a_diameter_become_voxel_boxes_on_the_blob(tmp_path):
    root = tmp_path / "LUNA"
    blobs = luna_like(root)
    scan = scan_folder(root, "Lung nodule CT scans.")
    assert (scan.layout, scan.task, scan.dimension) == ("box_table", "anomaly_detection", "3D")
    assert scan.classes == ["nodule"] and len(scan.samples) == 7
    assert scan.details["table"].endswith("annotations.csv")
    assert scan.details["coordinates"].startswith("world mm")
    by_uid = {Path(s.image).name[: -len(".mhd")]: s for s in scan.samples}
    assert set(by_uid) == set(blobs)
    for uid, (blob, spacing) in blobs.items():
        sample = by_uid[uid]
        assert sample.group == uid
        if blob is None:
            assert sample.label == "negative" and sample.extra["boxes"] == []
            continue
        (box,) = sample.extra["boxes"]
        centre = [(box[i] + box[i + 3]) / 2 for i in range(3)]
        # voxel i spans [i, i + 1): the blob's voxel centre is the box centre less one half
        assert centre == pytest.approx([b + 0.5 for b in blob], abs=1e-3)
        assert [box[i + 3] - box[i] for i in range(3)] == pytest.approx(
            [6.0 / s for s in spacing], abs=1e-3)
        # the box lands on the blob in the array the templates read: (C, x, y, z)
        array, _ = read_image(sample.image)
        assert array.shape == (1, *SHAPE_XYZ)
        bright = np.argwhere(array[0] > 0)
        lo = [math.floor(v) for v in box[:3]]
        hi = [math.ceil(v) for v in box[3:]]
        inside = array[0, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] > 0
        assert inside.sum() == len(bright) > 0
        assert np.all(bright.mean(axis=0) == pytest.approx(blob, abs=0.5))


def test_a_centre_table_without_a_size_is_no_box_table(tmp_path):
    root = tmp_path / "LUNA"
    luna_like(root)
    (root / "annotations.csv").unlink()
    readings = [r["reader"] for r in scan_folder_readings(root)]
    assert "box_table" not in readings


def scan_folder_readings(root: Path) -> list[dict]:
    from core.datasets.layouts.interpret import read_all, summarise
    readings, _ = read_all(root, "")
    return summarise(readings, str(root))


def deeplesion_like(root: Path) -> dict[str, tuple]:
    """Images_png/<patient>_<study>_<series>/<slice>.png, 3 slices per series folder, and
    DL_info.csv naming the key slice <folder>_<slice>.png with its box in one cell."""
    expected = {}
    rows = []
    for k in range(12):
        patient = 10 + k // 2
        folder = f"{patient:06d}_{1 + k % 2:02d}_01"
        key = 40 + k
        split = 1 if k < 8 else (2 if k < 10 else 3)
        for sl in (key - 1, key, key + 1):
            (root / "Images_png" / folder).mkdir(parents=True, exist_ok=True)
            data = np.full((32, 32), 32768 - 1000, np.uint16)
            Image.fromarray(data).save(root / "Images_png" / folder / f"{sl:03d}.png")
        boxes = [[4.5 + k, 6.25, 12.5 + k, 15.0]]
        if k == 3:
            boxes.append([20.0, 20.0, 25.5, 28.0])
        name = f"{folder}_{key:03d}.png"
        for box in boxes:
            rows.append([name, patient, 1 + k % 2, 1, key,
                         "1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0",
                         ", ".join(f"{v:.3f}" for v in box), "8.1, 4.2", -1, split])
        expected[f"Images_png/{folder}/{key:03d}.png"] = (boxes, str(patient),
                                                           {1: "train", 2: "val", 3: "test"}[split])
    write_csv(root / "DL_info.csv",
              ["File_name", "Patient_index", "Study_index", "Series_ID", "Key_slice_index",
               "Measurement_coordinates", "Bounding_boxes", "Lesion_diameters_Pixel_",
               "Coarse_lesion_type", "Train_Val_Test"], rows)
    return expected


def test_one_cell_boxes_with_joined_file_names_and_a_coded_split(tmp_path):
    root = tmp_path / "DL"
    expected = deeplesion_like(root)
    scan = scan_folder(root, "CT slices with the lesions radiologists measured; each box is "
                             "in DL_info.csv.")
    assert (scan.layout, scan.task, scan.dimension) == ("box_table", "anomaly_detection", "2D")
    assert scan.classes == ["lesion"] and len(scan.samples) == 12
    assert scan.details["box_column"] == "Bounding_boxes"
    assert scan.details["split_column"] == "Train_Val_Test"
    assert scan.details["interpretation"]["coverage"] == 1.0   # the other slices: context
    assert scan.existing_split and scan.group_source == "table column 'Patient_index'"
    got = {Path(s.image).relative_to(root).as_posix(): s for s in scan.samples}
    assert set(got) == set(expected)
    held_out = {"train": "train", "val": "val", "test": "test"}
    for rel, (boxes, patient, split) in expected.items():
        sample = got[rel]
        assert sample.extra["boxes"] == [pytest.approx(b) for b in boxes]
        assert sample.extra["labels"] == ["lesion"] * len(boxes)
        assert sample.group == patient and sample.split == held_out[split]
        assert len(sample.extra["other_files"]) == 2


def test_joined_names_split_codes_and_finding_names():
    images = [Path(f"/d/Images_png/000001_01_01/{n}.png") for n in (109, 110)]
    matcher = FileMatcher(images, Path("/d"))
    assert find_image(matcher, "000001_01_01_109.png") == images[0]
    assert find_image(matcher, "000001_01_02_109.png") is None
    rows = [{"Train_Val_Test": v} for v in "1123"]
    assert coded_split(["File_name", "Train_Val_Test"], rows) == (
        "Train_Val_Test", {"1": "train", "2": "val", "3": "test"})
    assert coded_split(["subset"], [{"subset": "Training"}, {"subset": "testing"}]) == (
        "subset", {"Training": "train", "testing": "test"})
    assert described_finding("Lung nodule CT scans from LUNA16.") == "nodule"
    assert described_finding("DeepLesion CT slices with the lesions measured") == "lesion"
    assert described_finding("tumours and cysts") == ""
    assert described_finding("chest CT, body mass index recorded") == ""
