"""Registration validation: clear errors naming what and where, nothing written for an invalid
dataset (neither in the home nor in the dataset folder), the report written next to the
datacard for a valid one, bounded stratified decoding, and `crew register`'s summary."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.datasets.registration import register_dataset
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.validation import Limits, stratified_order, validate
from crew.cli import main as cli_main
from tests.conftest import tree_digest


def png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array.astype(np.uint8)).save(path)


def diagnosis_folder(root: Path, classes=("normal", "pneumonia"), patients: int = 4,
                     views: int = 2) -> Path:
    pid = 0
    for label in classes:
        for _ in range(patients):
            for v in range(views):
                png(root / label / f"patient{pid:03d}_{v}.png", np.full((8, 8), pid * 9 + v))
            pid += 1
    return root


def segmentation_folder(root: Path, cases: int = 6, labels=("lung", "heart")) -> Path:
    for i in range(cases):
        image = np.full((16, 16), 30 + i)
        mask = np.zeros((16, 16))
        mask[2:6, 2:6] = 1
        mask[8:12, 8:12] = 2
        png(root / "images" / f"patient{i:02d}.png", image)
        png(root / "masks" / f"patient{i:02d}.png", mask)
    (root / "labels.json").write_text(json.dumps(list(labels)))
    return root


def written(settings) -> list[str]:
    return sorted(p.name for p in settings.datacards_dir.iterdir())


def register(settings, store, folder, name="Data", description=""):
    before = tree_digest(folder) if Path(folder).exists() else None
    result = register_dataset(settings, store, str(folder), name, description)
    if before is not None:
        assert tree_digest(folder) == before  # the dataset folder is never written
    return result


# ----------------------------------------------------------------------------- invalid

@pytest.mark.parametrize("make,expected", [
    (lambda p: p.mkdir(), "no image files were found"),
    (lambda p: None, "does not exist"),
    (lambda p: diagnosis_folder(p, classes=("normal",)), "at least two"),
])
def test_unusable_folders_are_refused_and_nothing_is_written(settings, store, tmp_path, make,
                                                             expected):
    folder = tmp_path / "data"
    make(folder)
    result = register(settings, store, folder)
    assert result["status"] == "invalid" and expected in result["errors"][0]
    assert result["datacard_path"] is None and result["validation_path"] is None
    assert written(settings) == [] and store.datacards() == []


def test_corrupt_image_named_with_its_path(settings, store, tmp_path):
    folder = diagnosis_folder(tmp_path / "data")
    (folder / "pneumonia" / "patient005_1.png").write_bytes(b"\x89PNG broken")
    result = register(settings, store, folder)
    assert result["status"] == "invalid"
    error = next(e for e in result["errors"] if "cannot be read as images" in e)
    assert "pneumonia/patient005_1.png" in error
    assert written(settings) == []


def test_mask_with_an_undeclared_value(settings, store, tmp_path):
    folder = segmentation_folder(tmp_path / "seg")
    bad = np.zeros((16, 16))
    bad[3:5, 3:5] = 255  # a 0/255 mask, but labels.json declares values 1 and 2 only
    png(folder / "masks" / "patient03.png", bad)
    result = register(settings, store, folder)
    assert result["status"] == "invalid"
    error = next(e for e in result["errors"] if "not declared" in e)
    assert "masks/patient03.png holds [255]" in error and "1 = lung, 2 = heart" in error
    assert written(settings) == []


def test_mask_with_the_wrong_shape(settings, store, tmp_path):
    folder = segmentation_folder(tmp_path / "seg")
    png(folder / "masks" / "patient02.png", np.zeros((12, 16)))
    result = register(settings, store, folder)
    assert result["status"] == "invalid"
    error = next(e for e in result["errors"] if "geometry" in e)
    assert "patient02.png" in error
    assert written(settings) == []


def test_declared_label_absent_from_every_mask(settings, store, tmp_path):
    folder = segmentation_folder(tmp_path / "seg", labels=("lung", "heart", "spine"))
    result = register(settings, store, folder)
    assert result["status"] == "invalid"
    assert any("never appear in any mask: 3 (spine)" in e for e in result["errors"])


def test_class_with_one_patient_and_cross_label_duplicates(settings, store, tmp_path):
    folder = diagnosis_folder(tmp_path / "data")
    for v in range(3):  # a third class, all from one patient
        png(folder / "covid" / f"patient900_{v}.png", np.full((8, 8), 200 + v))
    result = register(settings, store, folder)
    assert any("'covid': all 3 images come from one patient (patient900)" in e
               for e in result["errors"])
    folder2 = diagnosis_folder(tmp_path / "dup")
    same = np.full((8, 8), 0)
    png(folder2 / "pneumonia" / "patient777_0.png", same)  # identical to normal/patient000_0
    result = register(settings, store, folder2, name="Dup")
    assert any("identical images carry different labels" in e and "patient777_0.png" in e
               for e in result["errors"])
    assert written(settings) == []


# ----------------------------------------------------------------------------- valid

def test_valid_dataset_writes_card_and_report_in_the_home(settings, store, tmp_path):
    folder = diagnosis_folder(tmp_path / "data", patients=6)
    result = register(settings, store, folder, "Chest", "Chest X-rays. Max 8 per class.")
    assert result["status"] == "registered", result
    assert written(settings) == ["Chest.json", "Chest.validation.json"]
    report = json.loads(Path(result["validation_path"]).read_text())
    assert Path(result["validation_path"]).parent == settings.datacards_dir
    assert report["valid"] and report["errors"] == []
    assert report["counts"]["patients"] == 12
    assert report["counts"]["classes"]["normal"] == {"images": 12, "patients": 6}
    assert report["checked"]["decoded"] == 24 and report["checked"]["files_missing"] == 0
    preview = report["split_preview"]
    assert preview["caps"]["per_class"] == 8
    for label in ("normal", "pneumonia"):
        assert preview["images"]["train"][label] + preview["images"]["test"][label] <= 8
        assert preview["patients"]["train"][label] >= 1 and preview["patients"]["test"][label] >= 1
    assert store.datacards()[0]["name"] == "Chest"


def test_decoding_is_bounded_and_stratified_by_class(tmp_path):
    folder = diagnosis_folder(tmp_path / "data", classes=("a", "b", "c"), patients=10)
    scan = scan_folder(folder)
    order = stratified_order(scan.samples, 6)
    assert sorted(s.label for s in order) == ["a", "a", "b", "b", "c", "c"]
    (folder / "c" / "patient029_1.png").write_bytes(b"junk")  # past the decoded sample
    v = validate(scan, limits=Limits(decode=6, headers=100))
    assert v.checked["decoded"] == 6 and v.checked["headers_read"] == 54
    assert "6 of 60 images decoded in full" in v.checked["how"]
    assert any("patient029_1.png" in e for e in v.errors)  # its header gave it away
    v = validate(scan, limits=Limits(decode=6, headers=10))
    assert v.checked["only_existence_checked"] == 44
    assert "44 only checked to exist" in v.checked["how"]


def test_cli_register_prints_a_readable_summary_and_json(tmp_path, capsys):
    folder = diagnosis_folder(tmp_path / "data", patients=5)
    home = tmp_path / "home"
    assert cli_main(["register", str(folder), "--name", "CLI data", "--home", str(home),
                     "--description", "Use at most 12 samples for training and 4 for testing, "
                                      "keep classes balanced."]) == 0
    text = capsys.readouterr().out
    assert text.startswith("CLI data: registered (diagnosis)")
    assert "validation report:" in text and "CLI_data.validation.json" in text
    assert "normal" in text and "split preview" in text.lower()
    assert "caps from the description: train 12, test 4, balanced" in text
    assert "Checked: 20 of 20 images decoded in full" in text
    bad = tmp_path / "missing"
    assert cli_main(["register", str(bad), "--name", "Bad", "--home", str(home), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "invalid" and "does not exist" in data["errors"][0]
    assert cli_main(["register", str(bad), "--name", "Bad", "--home", str(home)]) == 1
    text = capsys.readouterr().out
    assert "Bad: INVALID" in text and "nothing was written" in text and str(bad) in text
    assert sorted(p.name for p in (home / "datacards").iterdir()) == [
        "CLI_data.json", "CLI_data.validation.json"]
