"""Datasets stored in HDF5 (h5py): one file per split with ``x``/``y`` arrays split over two
files (PatchCamelyon's ``<base>_x.h5`` + ``<base>_y.h5``, labels shaped (N, 1, 1, 1)), and one
file with ``train/images`` + ``train/labels`` groups. Elements are referenced as
``<file>::<key>[i]`` and read one at a time; the index and the dataset reader take them."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from core.datasets.indexing import write_diagnosis_index
from core.datasets.layouts.arrays import element_ref_ok
from core.datasets.layouts.dispatch import scan_folder
from core.imaging.image_io import read_image
from tests.conftest import tree_digest


def _pcam(root: Path) -> Path:
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 24), ("valid", 8), ("test", 8)):
        y = (np.arange(n) % 2).astype(np.uint8)
        x = rng.integers(0, 120, (n, 16, 16, 3), dtype=np.uint8)
        x[y == 1, 4:12, 4:12, :] = 230
        with h5py.File(root / f"patches_{split}_x.h5", "w") as f:
            f.create_dataset("x", data=x)
        with h5py.File(root / f"patches_{split}_y.h5", "w") as f:
            f.create_dataset("y", data=y.reshape(n, 1, 1, 1))
    return root


def test_x_and_y_in_two_hdf5_files_per_split(tmp_path):
    root = _pcam(tmp_path / "pcam")
    before = tree_digest(root)
    scan = scan_folder(root, "H&E lymph node patches; label 0 normal, 1 tumour.")
    assert scan.layout == "array_npz" and scan.file_format == "h5" and scan.dimension == "2D"
    assert scan.classes == ["normal", "tumour"] and len(scan.samples) == 40
    assert {s.split for s in scan.samples} == {"train", "val", "test"}
    first = next(s for s in scan.samples if s.split == "train" and s.label == "tumour")
    assert first.image.endswith("patches_train_x.h5::x[1]") and element_ref_ok(first.image)
    array, _ = read_image(first.image)
    assert array.shape == (3, 16, 16) and array.max() == 230
    summary = write_diagnosis_index(scan, tmp_path / "Datapath")
    train = json.loads((tmp_path / "Datapath" / "train.json").read_text())
    assert summary and any(k.endswith("::x[1]") for k in train)
    assert tree_digest(root) == before   # nothing written in the dataset folder


def test_groups_per_split_in_one_hdf5_file(tmp_path):
    root = tmp_path / "one"
    root.mkdir()
    rng = np.random.default_rng(1)
    with h5py.File(root / "data.h5", "w") as f:
        for split, n in (("train", 20), ("test", 6)):
            f.create_dataset(f"{split}/images", data=rng.integers(0, 255, (n, 8, 8, 8),
                                                                  dtype=np.uint8))
            f.create_dataset(f"{split}/labels", data=np.arange(n) % 3)
    scan = scan_folder(root, "")
    assert scan.dimension == "3D" and scan.classes == ["0", "1", "2"]
    assert len(scan.samples) == 26 and {s.split for s in scan.samples} == {"train", "test"}
    assert read_image(scan.samples[0].image)[0].shape == (1, 8, 8, 8)
