"""Labels that belong to more than one image, as public datasets ship them (each folder here is
invented; bench/generality has the public layouts): a header-less table naming study folders
whose radiographs share the study's label, a study folder named for its reading, the two
views a record names in two fields as one sample, label lists joined by a full-width comma, and
patient folders below body-part folders as the grouping."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.study_folders import IMAGES, SCAN, folder_reading
from core.datasets.records.reading import scan_with_recipe
from core.datasets.records.recipe import Recipe


def _png(path: Path, value: int, size: tuple[int, int] = (24, 24)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(value)
    Image.fromarray(rng.integers(0, 255, size[::-1], dtype=np.uint8)).save(path)


def _studies(root: Path, header_less: bool = True, named: bool = False) -> int:
    """``<split>/<part>/patientNNN/studyK[_positive|_negative]/imageJ.png`` and a header-less
    ``<split>_studies.csv`` of ``<study folder>/,1|0``; returns the number of images."""
    images, k = 0, 0
    for split, patients in (("train", range(12)), ("valid", range(12, 16))):
        lines = []
        for p in patients:
            for s in range(2):
                label = (p + s) % 2
                suffix = ("_positive" if label else "_negative") if named else ""
                part = ["XR_HAND", "XR_KNEE"][p % 2]
                study = f"{split}/{part}/patient{p:03d}/study{s + 1}{suffix}"
                for j in range(1 + (p + s) % 3):
                    _png(root / study / f"image{j + 1}.png", k, (24 + 4 * j, 24))
                    k += 1
                    images += 1
                lines.append(f"{study}/,{label}")
        text = "\n".join(lines) + "\n"
        (root / f"{split}_studies.csv").write_text(text if header_less else "path,label\n" + text)
    return images


def test_a_table_naming_study_folders_labels_each_image_of_the_study(tmp_path):
    n = _studies(tmp_path / "xr")
    scan = scan_folder(tmp_path / "xr", "Hand and knee radiographs; each study is normal or "
                                         "abnormal.")
    assert scan.task == "diagnosis" and scan.dimension == "2D"
    assert sorted(scan.classes) == ["abnormal", "normal"], scan.classes   # named, not column_2
    assert len(scan.samples) == n
    assert all(Path(s.image).is_file() for s in scan.samples)   # images, not slice folders
    assert scan.details["recipe"]["folders"] == IMAGES
    # grouped by the patient folder below the body-part folder; the split folders are kept
    groups = {s.group for s in scan.samples}
    assert len(groups) == 16 and all(g.startswith("patient") for g in groups)
    assert {s.split for s in scan.samples} == {"train", "test"}


def test_a_study_folder_named_for_its_reading_is_a_label_without_a_description(tmp_path):
    n = _studies(tmp_path / "xr", named=True)
    for table in (tmp_path / "xr").glob("*.csv"):
        table.unlink()
    scan = scan_folder(tmp_path / "xr", "")
    assert sorted(scan.classes) == ["negative", "positive"] and len(scan.samples) == n


def test_folders_of_slices_stay_scans(tmp_path):
    members = {}
    for i in range(3):
        folder = tmp_path / f"s{i}"
        members[folder] = [folder / f"slice_{n}.png" for n in range(3)]
    assert folder_reading(list(members), members, "") == SCAN
    studies = {tmp_path / f"study{i}": [tmp_path / f"study{i}" / "a.png"] for i in range(3)}
    assert folder_reading(list(studies), studies, "") == IMAGES
    plain = {tmp_path / f"c{i}": [tmp_path / f"c{i}" / "a.png"] for i in range(3)}
    assert folder_reading(list(plain), plain, "chest CT volumes") == SCAN
    assert folder_reading(list(plain), plain, "knee radiographs") == IMAGES


def test_two_views_a_row_names_are_one_sample_and_full_width_commas_split_labels(tmp_path):
    root = tmp_path / "fundus"
    rows = []
    for i in range(24):
        _png(root / "Training Images" / f"{i}_left.jpg", 2 * i)
        _png(root / "Training Images" / f"{i}_right.jpg", 2 * i + 1, (28, 26))
        rows.append({"ID": str(i), "Left-Fundus": f"{i}_left.jpg",
                     "Right-Fundus": f"{i}_right.jpg",
                     "Left-Keywords": ["normal fundus", "cataract，glaucoma", "drusen"][i % 3],
                     "N": int(i % 3 == 0), "C": int(i % 3 == 1), "G": int(i % 3 == 1),
                     "A": int(i % 3 == 2)})
    for i in range(6):
        _png(root / "Testing Images" / f"{100 + i}_left.jpg", 200 + i)
    with open(root / "data.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    scan = scan_folder(root, "Colour fundus photographs of both eyes, labelled per patient.")
    targets = {t["name"]: t for t in scan.details["targets"]}
    findings = targets["findings"]
    assert findings["num_samples"] == 24 and sorted(findings["classes"]) == ["A", "C", "G", "N"]
    assert findings["recipe"]["extra_image_fields"] == ["Right-Fundus"]
    keywords = targets["Left-Keywords"]
    assert "cataract" in keywords["classes"] and "glaucoma" in keywords["classes"]
    assert not any("，" in c for c in keywords["classes"])
    # applied: each sample is the two views, left first, grouped by the row's ID
    chosen = scan_with_recipe(root, Recipe.from_json(findings["recipe"]))
    assert len(chosen.samples) == 24 and chosen.details["channels"] == ["Left-Fundus",
                                                                        "Right-Fundus"]
    first = chosen.samples[0]
    assert isinstance(first.image, list) and len(first.image) == 2
    assert first.image[0].endswith("_left.jpg") and first.image[1].endswith("_right.jpg")
    assert len({s.group for s in chosen.samples}) == 24


def test_recipe_keeps_views_and_folder_reading_through_json():
    recipe = Recipe("t.csv", "left", "class", ["dx"], extra_image_fields=["right"],
                    folders=IMAGES)
    back = Recipe.from_json(recipe.to_json())
    assert back.extra_image_fields == ["right"] and back.folders == IMAGES
    try:
        Recipe.from_json({**recipe.to_json(), "folders": "volume"})
    except ValueError as exc:
        assert "folders" in str(exc)
    else:
        raise AssertionError("an unknown folders value must be refused")


def test_an_id_without_its_zero_padding_names_a_case_folder_of_series(tmp_path):
    """RSNA-MICCAI style: ``train/00012/{FLAIR,T2w}/`` DICOM series, labels by ``CaseID`` 12;
    the series are the channels of one sample, read onto the first one's grid."""
    import random

    from core.imaging.image_io import read_image
    from tests.test_layout_dicom import write_series
    rng = random.Random(3)
    root = tmp_path / "brain"
    rows = ["CaseID,MGMT_value"]
    for n in range(8):
        case = root / "train" / f"{n * 3 + 1:05d}"
        write_series(case / "FLAIR", list(range(0, 6)), f"P{n}", "flair", rng)
        write_series(case / "T2w", list(range(2, 9)), f"P{n}", "t2", rng)   # another slab
        for k, path in enumerate(sorted(case.rglob("IM*"))):
            path.rename(path.with_name(f"Image-{k}.dcm"))
        rows.append(f"{n * 3 + 1},{n % 2}")
    (root / "train_labels.csv").write_text("\n".join(rows) + "\n")
    scan = scan_folder(root, "Brain MRI, four sequences per case; MGMT_value is the label.")
    assert scan.task == "diagnosis" and scan.dimension == "3D"
    assert len(scan.samples) == 8 and scan.details["channels"] == ["flair", "t2w"]
    first = scan.samples[0]
    assert [Path(p).name for p in first.image] == ["FLAIR", "T2w"]
    array, meta = read_image(first.image)
    assert array.shape[0] == 2 and meta["resampled_channels"] == ["T2w"]


def test_a_session_naming_several_processed_versions_keeps_one(tmp_path):
    """OASIS-1 style: the session id names the raw runs, the registered brain and its tissue
    segmentation (Analyze .hdr/.img, headers alike); one version per session is the sample,
    the same for every session, and the others are read and left out (not unexplained)."""
    import nibabel as nib

    root = tmp_path / "brains"
    rows = ["ID,CDR"]
    for n in range(10):
        sid = f"SUBJ_{n:04d}_MR1"
        session = root / "disc1" / sid
        for rel, value in ((f"RAW/{sid}_mpr-1_anon", 1), (f"RAW/{sid}_mpr-2_anon", 2),
                           (f"PROCESSED/T88_111/{sid}_t88_masked_gfc", 3),
                           (f"FSL_SEG/{sid}_t88_masked_gfc_fseg", 4)):
            path = session / f"{rel}.hdr"
            path.parent.mkdir(parents=True, exist_ok=True)
            data = np.full((6, 6, 4), value + 10 * n, np.int16)
            nib.save(nib.AnalyzeImage(data, np.eye(4)), str(path))
        rows.append(f"{sid},{[0, 0.5][n % 2]}")
    (root / "sessions.csv").write_text("\n".join(rows) + "\n")
    scan = scan_folder(root, "Brain MRI; CDR: 0 none, 0.5 very mild dementia.")
    assert scan.task == "diagnosis" and len(scan.samples) == 10
    assert all("t88_masked_gfc.hdr" in s.image and "fseg" not in s.image for s in scan.samples)
    assert scan.details["recipe"]["variant"] == "PROCESSED/T#_#/*_t#_masked_gfc.hdr"
    assert len(scan.samples[0].extra["other_files"]) == 3
    assert sorted(scan.classes) == ["0", "0.5"]


def test_analyze_headers_alike_are_not_duplicates(tmp_path):
    import nibabel as nib

    from core.datasets.duplicates import exact_duplicates
    from core.datasets.layouts.types import Sample
    samples = []
    for n in range(3):
        path = tmp_path / f"s{n}.hdr"
        nib.save(nib.AnalyzeImage(np.full((4, 4, 2), n, np.int16), np.eye(4)), str(path))
        samples.append(Sample(str(path), "a", f"p{n}"))
    copy = tmp_path / "copy.hdr"
    nib.save(nib.AnalyzeImage(np.full((4, 4, 2), 1, np.int16), np.eye(4)), str(copy))
    samples.append(Sample(str(copy), "b", "p9"))
    groups, _, _ = exact_duplicates(samples, 100)
    assert [sorted(Path(s.image).name for s in g) for g in groups] == [["copy.hdr", "s1.hdr"]]


def test_one_image_stored_in_two_formats_is_one_sample(tmp_path):
    """SIIM-ISIC 2020 style: ``train/ISIC_x.dcm`` and ``jpeg/train/ISIC_x.jpg`` are the same
    image; the table's ``image_name`` names both, and one sample is read (the original)."""
    import pydicom
    from pydicom.data import get_testdata_file
    root = tmp_path / "isic"
    template = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    rows = ["image_name,patient_id,target"]
    for i in range(12):
        name = f"ISIC_{1000 + i}"
        (root / "train").mkdir(parents=True, exist_ok=True)
        template.save_as(root / "train" / f"{name}.dcm")
        _png(root / "jpeg" / "train" / f"{name}.jpg", i)
        rows.append(f"{name},IP_{i // 2},{i % 2}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    scan = scan_folder(root, "Dermoscopy images; target 1 is melanoma.")
    assert len(scan.samples) == 12 and all(s.image.endswith(".dcm") for s in scan.samples)
    assert all(s.extra["other_files"][0].endswith(".jpg") for s in scan.samples)
    assert len({s.group for s in scan.samples}) == 6


def test_ids_that_restart_in_each_split_are_read_beside_their_own_table(tmp_path):
    """RFMiD style: ``Training_Set/Training_Set/{RFMiD_Training_Labels.csv, Training/1.png}``
    and the same for the evaluation and test sets, ids 1..n in each: ``1`` is the image beside
    the table it is listed in; the three tables are one source with their splits."""
    root = tmp_path / "fundus"
    k = 0
    for folder, table, images, n in (("Training_Set", "RFMiD_Training_Labels", "Training", 16),
                                     ("Evaluation_Set", "RFMiD_Validation_Labels",
                                      "Validation", 6),
                                     ("Test_Set", "RFMiD_Testing_Labels", "Test", 6)):
        base = root / folder / folder
        rows = ["ID,Disease_Risk,DR,MH,ODC"]
        for i in range(1, n + 1):
            _png(base / images / f"{i}.png", k)
            k += 1
            flags = [i % 3 > 0, i % 3 == 1, i % 3 == 2, i % 4 == 0]
            rows.append(",".join([str(i), *(str(int(f)) for f in flags)]))
        (base / f"{table}.csv").write_text("\n".join(rows) + "\n")
    scan = scan_folder(root, "Fundus photographs; several conditions can be present in one image.")
    findings = next(t for t in scan.details["targets"] if t["name"] == "findings")
    assert findings["num_samples"] == 28 and findings["split"] == "kept from the dataset"
    chosen = scan_with_recipe(root, Recipe.from_json(findings["recipe"]))
    by_name = {(Path(s.image).parent.name, Path(s.image).name): s for s in chosen.samples}
    assert len(by_name) == 28   # 1.png of each set is its own sample
    assert by_name[("Training", "1.png")].split == "train"
    assert by_name[("Test", "1.png")].split == "test"
