"""Label tables in every shape (CSV/TSV/XLSX/JSON/JSONL; names, paths, stems and IDs; label
columns, integer codes, one-hot columns, multi-label cells; patient and split columns; split
tables) and labels carried in file names. Tiny synthetic folders; every scan must be read-only
and must give an index the diagnosis gate accepts."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from core.jobs.gates import check_diagnosis_index
from core.datasets.indexing import write_diagnosis_index
from core.datasets.layouts.types import ScanError
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.tables import code_mapping
from core.jobs.workspace import JobWorkspace
from tests.conftest import tree_digest


def png(path: Path, value: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8), value, np.uint8)).save(path)
    return path


def write_csv(path: Path, rows: list[dict], delimiter: str = ",") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def index_ok(scan, tmp_path: Path) -> dict:
    """Write the diagnosis index for a scan and run the index gate on it."""
    ws = JobWorkspace(tmp_path / "job").ensure()
    summary = write_diagnosis_index(scan, ws.datapath)
    gate = check_diagnosis_index(ws)
    assert gate.ok, gate.message()
    return summary


def labels_of(scan) -> dict[str, list[str]]:
    return {Path(s.image).name: s.label_list() for s in scan.samples}


# --------------------------------------------------------------------------- label columns
def test_csv_names_labels_and_patients(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(12):
        png(data / "images" / f"img{i:03d}.png", i)
        rows.append({"Image Index": f"img{i:03d}.png", "Diagnosis": ["normal", "pneumonia"][i % 2],
                     "Patient ID": f"P{i // 2}", "Patient Age": 40 + i})
    write_csv(data / "labels.csv", rows)
    before = tree_digest(data)
    scan = scan_folder(data)
    assert scan.layout == "label_table" and scan.task == "diagnosis"
    assert scan.classes == ["normal", "pneumonia"] and scan.class_counts == {"normal": 6,
                                                                            "pneumonia": 6}
    assert scan.details["image_column"] == "Image Index"
    assert scan.details["label_column"] == "Diagnosis"
    assert scan.group_source == "table column 'Patient ID'"
    assert {s.group for s in scan.samples} == {f"P{i}" for i in range(6)}
    assert scan.dimension == "2D" and scan.file_format == "png" and not scan.existing_split
    summary = index_ok(scan, tmp_path)
    assert summary["num_train"] + summary["num_test"] == 12
    assert tree_digest(data) == before  # the scan and the index never write into the dataset


def test_tsv_relative_paths_and_description_names_the_label_column(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(10):
        png(data / "scans" / f"s{i}" / "frontal.png", i)  # the file name alone is ambiguous
        rows.append({"path": f"scans/s{i}/frontal.png", "category": "adult" if i < 5 else "child",
                     "outcome": ["benign", "malignant"][i % 2]})
    write_csv(data / "meta.tsv", rows, delimiter="\t")
    plain = scan_folder(data)
    assert plain.details["label_column"] == "category"   # first column named like a label
    described = scan_folder(data, "Lesion photos. label column: outcome (benign or malignant).")
    assert described.details["label_column"] == "outcome"
    assert described.classes == ["benign", "malignant"]
    assert {s.image: s.label for s in described.samples} == {
        str(data / "scans" / f"s{i}" / "frontal.png"): ["benign", "malignant"][i % 2]
        for i in range(10)}
    index_ok(described, tmp_path)


def test_xlsx_with_stems_and_a_foreign_path_prefix(tmp_path):
    data = tmp_path / "data"
    for i in range(8):
        png(data / "imgs" / f"case{i}.png", i)
    frame = pd.DataFrame({"File": [f"/old/server/export/imgs/case{i}.png" if i % 2 else f"case{i}"
                                   for i in range(8)],
                          "Label": ["tb", "normal"] * 4})
    frame.to_excel(data / "labels.xlsx", index=False)
    scan = scan_folder(data)
    assert scan.layout == "label_table" and scan.details["table"].endswith("labels.xlsx")
    assert len(scan.samples) == 8 and scan.classes == ["normal", "tb"]
    assert not scan.skipped
    index_ok(scan, tmp_path)


@pytest.mark.parametrize("form", ["records", "mapping", "jsonl", "split_lists"])
def test_json_tables(tmp_path, form):
    data = tmp_path / "data"
    names = [f"x{i}.png" for i in range(10)]
    for i, name in enumerate(names):
        png(data / name, i)
    labels = ["cyst" if i % 2 else "stone" for i in range(10)]
    if form == "records":
        (data / "labels.json").write_text(json.dumps(
            [{"image": n, "label": lbl} for n, lbl in zip(names, labels)]))
    elif form == "mapping":
        (data / "labels.json").write_text(json.dumps(dict(zip(names, labels))))
    elif form == "jsonl":
        (data / "labels.jsonl").write_text("\n".join(
            json.dumps({"file": n, "class": lbl}) for n, lbl in zip(names, labels)))
    else:
        (data / "labels.json").write_text(json.dumps({
            "train": [{"image": n, "label": lbl} for n, lbl in zip(names[:6], labels[:6])],
            "test": [{"image": n, "label": lbl} for n, lbl in zip(names[6:], labels[6:])]}))
    scan = scan_folder(data)
    assert scan.layout == "label_table"
    assert labels_of(scan) == {n: [lbl] for n, lbl in zip(names, labels)}
    assert scan.existing_split == (form == "split_lists")
    summary = index_ok(scan, tmp_path)
    if form == "split_lists":
        assert summary["split_method"] == "kept_from_dataset"
        assert (summary["num_train"], summary["num_test"]) == (6, 4)


def test_ids_matching_file_stems_by_token_run(tmp_path):
    """ADNI-style IDs (``I1001``) inside longer names, and a case ID naming two views."""
    data = tmp_path / "data"
    rows = []
    for i in range(6):
        png(data / "mri" / f"ADNI_002_S_{i:04d}_MR_MPRAGE_I{1001 + i}.png", i)
        rows.append({"Image Data ID": f"I{1001 + i}", "Subject": f"002_S_{i:04d}",
                     "Group": ["AD", "CN", "MCI"][i % 3]})
    rows.append({"Image Data ID": "I9999", "Subject": "002_S_9999", "Group": "AD"})
    png(data / "mri" / "ADNI_002_S_7777_MR_MPRAGE_I7777.png")
    write_csv(data / "adni.csv", rows)
    scan = scan_folder(data)
    assert scan.details["recipe"]["match"] == "id"  # rows name files by an ID in the stem
    assert scan.details["image_column"] == "Image Data ID"
    assert scan.classes == ["AD", "CN", "MCI"] and len(scan.samples) == 6
    assert scan.group_source == "table column 'Subject'"
    assert any("'I9999' names no image file" in s for s in scan.skipped)
    assert any("I7777.png: not listed in adni.csv" in s for s in scan.skipped)

    cases = tmp_path / "cases"
    rows = []
    for c in range(4):
        for view in ("view1", "view2"):
            png(cases / f"case{c}_{view}.png", c)
        rows.append({"case_id": f"case{c}", "finding": "fracture" if c % 2 else "normal"})
    write_csv(cases / "labels.csv", rows)
    scan = scan_folder(cases)
    assert len(scan.samples) == 8  # one row labels both views of its case
    assert labels_of(scan)["case1_view2.png"] == ["fracture"]
    index_ok(scan, tmp_path / "b")


def test_integer_codes_named_from_the_description(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(9):
        png(data / f"knee{i}.png", i)
        rows.append({"volumeFilename": f"knee{i}.png", "aclDiagnosis": str(i % 3), "roiX": i * 7})
    write_csv(data / "metadata.csv", rows)
    description = "aclDiagnosis: 0 = healthy, 1 = partial tear, 2 = complete rupture"
    scan = scan_folder(data, description)
    assert scan.classes == ["healthy", "partial tear", "complete rupture"]  # code order
    assert scan.details["recipe"]["values"] == {"0": "healthy", "1": "partial tear",
                                                "2": "complete rupture"}
    assert labels_of(scan)["knee4.png"] == ["partial tear"]
    plain = scan_folder(data)
    assert plain.classes == ["0", "1", "2"]
    assert plain.details["recipe"]["values"] == {"0": "0", "1": "1", "2": "2"}  # unnamed
    ws = JobWorkspace(tmp_path / "job").ensure()
    write_diagnosis_index(scan, ws.datapath)
    assert json.loads((ws.datapath / "label_dict.json").read_text()) == {
        "healthy": 0, "partial tear": 1, "complete rupture": 2}
    assert check_diagnosis_index(ws).ok


def test_code_mapping_phrasings():
    codes = ["0", "1", "2"]
    assert code_mapping("coded 0 for a healthy ligament, 1 for a partial tear and 2 for a "
                        "complete rupture", codes) == {"0": "healthy ligament",
                                                       "1": "partial tear",
                                                       "2": "complete rupture"}
    assert code_mapping("healthy (0), torn (1) and ruptured (2)", codes)["2"] == "ruptured"
    assert code_mapping("{'0': 'normal', '1': 'pneumonia'}", ["0", "1"]) == {
        "0": "normal", "1": "pneumonia"}
    # numbers that are not a mapping, or a mapping that misses a code: keep the codes
    assert code_mapping("use at most 1000 samples for training and 200 for testing",
                        ["0", "1"]) == {}
    assert code_mapping("0: normal, 1: pneumonia", codes) == {}


def test_one_hot_single_label_columns(tmp_path):
    data = tmp_path / "data"
    classes = ["glioma", "meningioma", "notumor"]
    rows = []
    for i in range(9):
        png(data / f"b{i}.png", i)
        rows.append({"filename": f"b{i}.png", **{c: int(k == i % 3) for k, c in
                                                  enumerate(classes)}})
    write_csv(data / "onehot.csv", rows)
    scan = scan_folder(data)
    assert scan.details["recipe"]["role"] == "one_hot"  # one 0/1 column per class
    assert scan.details["recipe"]["fields"] == classes
    assert scan.classes == classes and all(s.labels is None for s in scan.samples)
    assert labels_of(scan)["b5.png"] == ["notumor"]
    index_ok(scan, tmp_path)


def test_one_hot_multi_label_columns_with_a_negative_column(tmp_path):
    data = tmp_path / "data"
    rows = []
    table = [(1, 0, 0), (1, 1, 0), (0, 0, 1), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 0),
             (0, 1, 0), (0, 0, 1), (1, 1, 0)]
    for i, (effusion, nodule, none) in enumerate(table):
        png(data / f"cxr{i}.png", i)
        rows.append({"Path": f"cxr{i}.png", "Sex": "F" if i % 2 else "M",
                     "Effusion": float(effusion), "Nodule": float(nodule) if i != 3 else -1.0,
                     "No Finding": none})
    write_csv(data / "train.csv", rows)
    scan = scan_folder(data)
    assert scan.details["recipe"]["role"] == "findings"  # one 0/1 column per finding
    assert all(s.labels is not None for s in scan.samples)  # multi-label
    assert scan.classes == ["Effusion", "Nodule"]  # "No Finding" is the negative, not a class
    got = labels_of(scan)
    assert got["cxr1.png"] == ["Effusion", "Nodule"] and got["cxr2.png"] == []
    assert got["cxr3.png"] == []  # -1 (uncertain) is not a positive
    index_ok(scan, tmp_path)


def test_multi_label_cells_with_no_finding(tmp_path):
    data = tmp_path / "data"
    cells = ["Effusion|Nodule", "No Finding", "Effusion,Nodule", "Nodule;Mass", "Mass",
             "No Finding", "Effusion", "Nodule", "Mass|Effusion", "No Finding"]
    rows = []
    for i, cell in enumerate(cells):
        png(data / "images" / f"{i:05d}_000.png", i)
        rows.append({"Image Index": f"{i:05d}_000.png", "Finding Labels": cell,
                     "Patient ID": i // 2})
    write_csv(data / "Data_Entry.csv", rows)  # the csv module quotes "Effusion,Nodule"
    assert '"Effusion,Nodule"' in (data / "Data_Entry.csv").read_text()
    scan = scan_folder(data)
    assert scan.details["recipe"]["role"] == "labels"  # several labels per cell
    assert all(s.labels is not None for s in scan.samples)  # multi-label
    assert scan.classes == ["Effusion", "Mass", "Nodule"]
    got = labels_of(scan)
    assert got["00002_000.png"] == ["Effusion", "Nodule"] and got["00001_000.png"] == []
    assert got["00003_000.png"] == ["Nodule", "Mass"]
    assert scan.class_counts == {"Effusion": 4, "Mass": 3, "Nodule": 4}
    index_ok(scan, tmp_path)


def test_split_column_is_kept(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(12):
        png(data / f"im{i}.png", i)
        rows.append({"image": f"im{i}.png", "label": "a" if i % 2 else "b",
                     "split": "test" if i >= 8 else "valid" if i >= 6 else "train"})
    write_csv(data / "labels.csv", rows)
    scan = scan_folder(data)
    assert scan.details["split_column"] == "split" and scan.existing_split
    assert {s.split for s in scan.samples} == {"train", "val", "test"}
    summary = index_ok(scan, tmp_path)
    assert summary["split_method"] == "kept_from_dataset"
    assert (summary["num_train"], summary["num_test"]) == (8, 4)


def test_separate_train_and_test_tables_keep_their_split(tmp_path):
    data = tmp_path / "data"
    for split, n in (("train", 8), ("test", 4)):
        rows = []
        for i in range(n):
            png(data / "images" / f"{split}_{i}.png", i)
            rows.append({"id": f"{split}_{i}", "diagnosis": "covid" if i % 2 else "normal"})
        write_csv(data / f"{split}.csv", rows)
    scan = scan_folder(data)
    assert sorted(scan.details["recipe"]["source"].split(" + ")) == ["test.csv", "train.csv"]
    assert scan.existing_split and len(scan.samples) == 12
    assert {s.split for s in scan.samples if Path(s.image).name.startswith("test")} == {"test"}
    summary = index_ok(scan, tmp_path)
    assert (summary["num_train"], summary["num_test"]) == (8, 4)


def test_table_one_folder_down(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(6):
        png(data / "scans" / f"s{i}.png", i)
        rows.append({"scan": f"s{i}", "grade": "high" if i % 2 else "low", "label": i % 2})
    write_csv(data / "metadata" / "labels.csv", rows)
    scan = scan_folder(data)
    assert scan.layout == "label_table" and scan.classes == ["0", "1"]
    index_ok(scan, tmp_path)


def test_unmatched_rows_and_unlisted_files_are_reported(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(6):
        png(data / f"a{i}.png", i)
        rows.append({"file": f"a{i}.png", "label": "x" if i % 2 else "y"})
    rows += [{"file": "gone.png", "label": "x"}, {"file": "a0.png", "label": "x"}]
    png(data / "extra.png")
    write_csv(data / "labels.csv", rows)
    scan = scan_folder(data)
    assert len(scan.samples) == 5  # a0 has two rows with different labels: left out
    text = "\n".join(scan.skipped)
    assert "'gone.png' names no image file" in text
    assert "extra.png: not listed in labels.csv" in text
    assert "a0.png: rows give different labels" in text


def test_a_table_of_one_class_leaves_class_folders_alone(tmp_path):
    data = tmp_path / "data"
    rows = []
    for label in ("NORMAL", "PNEUMONIA"):
        for i in range(3):
            png(data / label / f"{label}{i}.png", i)
            rows.append({"file": f"{label}{i}.png", "source": "https://example.org/x"})
    write_csv(data / "metadata.csv", rows)
    scan = scan_folder(data)
    assert scan.layout == "class_folders" and scan.classes == ["NORMAL", "PNEUMONIA"]


# --------------------------------------------------------------------------- file names
def test_labels_in_file_names_with_patient_prefix(tmp_path):
    data = tmp_path / "data"
    for p in range(6):
        for view in range(2):
            label = "pneumonia" if p % 2 else "normal"
            png(data / f"patient{p:03d}_{label}_{view}.png", p)
    png(data / "patient099_unlabelled.png")
    before = tree_digest(data)
    scan = scan_folder(data)
    assert scan.layout == "filename_labels" and scan.classes == ["normal", "pneumonia"]
    assert scan.group_source == "filename prefix"
    assert len({s.group for s in scan.samples}) == 6 and len(scan.samples) == 12
    assert any("patient099_unlabelled.png: no label word" in s for s in scan.skipped)
    index_ok(scan, tmp_path)
    assert tree_digest(data) == before


def test_labels_in_file_names_mixed_positions_and_splits(tmp_path):
    data = tmp_path / "data"
    for split, n in (("train", 6), ("test", 4)):
        for i in range(n):
            png(data / split / f"covid_{split}{i:04d}.png", i)
            png(data / split / f"IM-{i:04d}-normal.jpeg" if split == "train" else
                data / split / f"IM-{i + 50:04d}-normal.jpeg", i)
    scan = scan_folder(data, "COVID-19 versus normal chest X-rays")
    assert scan.layout == "filename_labels" and scan.classes == ["covid", "normal"]
    assert scan.existing_split and scan.class_counts == {"covid": 10, "normal": 10}
    summary = index_ok(scan, tmp_path)
    assert summary["split_method"] == "kept_from_dataset"


def test_description_picks_the_label_token_over_a_site_token(tmp_path):
    data = tmp_path / "data"
    for i in range(8):
        site = "siteA" if i < 4 else "siteB"
        png(data / f"{site}_{'benign' if i % 2 else 'malignant'}_{i}.png", i)
    scan = scan_folder(data, "Breast ultrasound: benign or malignant lesions")
    assert scan.classes == ["benign", "malignant"]


@pytest.mark.parametrize("names", [
    [f"ISIC_{i:07d}.jpg" for i in range(8)],                           # IDs only
    [f"patient{i:03d}_{v}.png" for i in range(4) for v in (1, 2)],     # patient + view number
    [f"case{i}_{v}.png" for i in range(4) for v in ("AP", "PA")],      # views are not labels
    [f"1.2.840.{i}.{i * 7}.png" for i in range(8)],                    # UIDs
])
def test_file_names_carrying_only_ids_are_not_labels(tmp_path, names):
    data = tmp_path / "data"
    for i, name in enumerate(names):
        png(data / name, i)
    with pytest.raises(ScanError, match="directly in the folder"):
        scan_folder(data)


def test_description_class_names_pick_the_label_column(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(8):
        png(data / f"m{i}.png", i)
        rows.append({"file": f"m{i}.png", "scanner group": "siemens" if i % 2 else "ge",
                     "diagnosis class": ["AD", "CN", "MCI", "CN"][i % 4]})
    write_csv(data / "labels.csv", rows)
    assert scan_folder(data).details["label_column"] == "scanner group"  # first named column
    scan = scan_folder(data, "Alzheimer's staging: AD, MCI or CN")
    assert scan.details["label_column"] == "diagnosis class"
    assert scan.classes == ["AD", "CN", "MCI"]


def test_chexpert_like_tables(tmp_path):
    """train.csv + valid.csv naming ``CheXpert-v1.0-small/<split>/patientN/studyM/view1_frontal.jpg``
    (the file name alone is shared by every study), one-hot columns with blanks and -1."""
    data = tmp_path / "CheXpert-v1.0-small"
    findings = ["No Finding", "Cardiomegaly", "Edema", "Pleural Effusion"]
    for split, patients in (("train", range(6)), ("valid", range(6, 9))):
        rows = []
        for p in patients:
            for study in (1, 2):
                rel = f"{split}/patient{p:05d}/study{study}/view1_frontal.jpg"
                png(data / rel, p)
                flags = {f: "" for f in findings}
                if (p + study) % 3 == 0:
                    flags["No Finding"] = "1.0"
                else:
                    flags["Cardiomegaly"] = "1.0" if p % 2 else "-1.0"
                    flags["Edema"] = "1.0" if study == 2 else "0.0"
                    flags["Pleural Effusion"] = "1.0" if p % 3 == 1 else ""
                rows.append({"Path": f"CheXpert-v1.0-small/{rel}", "Sex": "Female", "Age": 50 + p,
                             "Frontal/Lateral": "Frontal", "AP/PA": "AP", **flags})
        write_csv(data / f"{split}.csv", rows)
    scan = scan_folder(data)
    assert scan.details["recipe"]["role"] == "findings"
    assert all(s.labels is not None for s in scan.samples)  # multi-label
    assert scan.classes == ["Cardiomegaly", "Edema", "Pleural Effusion"]
    assert len(scan.samples) == 18 and not scan.skipped
    assert scan.group_source == "case folder"
    assert {s.group for s in scan.samples} == {f"patient{p:05d}" for p in range(9)}
    # train + valid only: the validation set is the held-out set
    assert scan.existing_split and {s.split for s in scan.samples} == {"train", "test"}
    summary = index_ok(scan, tmp_path)
    assert summary["split_method"] == "kept_from_dataset" and summary["num_test"] == 6


def test_json_mapping_to_label_lists_is_multi_label(tmp_path):
    data = tmp_path / "data"
    mapping = {}
    for i in range(8):
        png(data / "img" / f"{i}.png", i)
        mapping[f"img/{i}.png"] = [["mass"], ["calcification"], ["mass", "calcification"],
                                   ["normal"]][i % 4]
    (data / "annotations.json").write_text(json.dumps(mapping))
    scan = scan_folder(data)
    assert all(s.labels is not None for s in scan.samples)  # multi-label
    assert scan.classes == ["calcification", "mass"]
    assert labels_of(scan)["3.png"] == [] and labels_of(scan)["2.png"] == ["mass",
                                                                            "calcification"]
    index_ok(scan, tmp_path)


def test_patient_column_named_by_the_description(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(8):
        png(data / f"u{i}.png", i)
        rows.append({"file": f"u{i}.png", "Group": "benign" if i % 2 else "malignant",
                     "donor": f"D{i // 2}"})
    write_csv(data / "labels.csv", rows)
    description = "label column: Group; split by donor (several images per patient)"
    scan = scan_folder(data, description)
    assert scan.details["label_column"] == "Group"
    assert scan.group_source == "table column 'donor'"
    assert len({s.group for s in scan.samples}) == 4
    index_ok(scan, tmp_path)


def test_long_tables_and_a_partial_download(tmp_path):
    """A table longer than the rows that choose the image column (every row naming a file), and
    a long table of which only a few images were downloaded, none of them in its first rows."""
    data = tmp_path / "long"
    (data / "images").mkdir(parents=True)
    lines = ["Image Index,Finding Labels,Patient ID"]
    for i in range(10_500):
        (data / "images" / f"{i:06d}.png").touch()   # never decoded by a scan
        lines.append(f"{i:06d}.png,{['Mass', 'No Finding', 'Nodule|Mass'][i % 3]},{i // 3}")
    (data / "Data_Entry.csv").write_text("\n".join(lines) + "\n")
    scan = scan_folder(data)
    assert len(scan.samples) == 10_500 and scan.classes == ["Mass", "Nodule"]
    assert scan.group_source == "table column 'Patient ID'" and not scan.skipped

    partial = tmp_path / "partial"
    rows = []
    for i in range(4000):
        if i >= 3500 and i < 3520:
            png(partial / "images_008" / f"x{i:05d}.png", i % 250)
        rows.append({"Image Index": f"x{i:05d}.png", "Finding Labels": ["Mass", "Effusion"][i % 2],
                     "Patient ID": i // 2})
    write_csv(partial / "Data_Entry.csv", rows)
    scan = scan_folder(partial)
    assert len(scan.samples) == 20 and scan.classes == ["Effusion", "Mass"]
    assert scan.details["image_column"] == "Image Index"
    assert any("3980 rows of Data_Entry.csv name no image" in s for s in scan.skipped)


def test_rows_naming_folders_of_slices(tmp_path):
    data = tmp_path / "data"
    rows = []
    for i in range(8):
        for n in range(3):
            png(data / "scans" / f"s{i}" / f"slice_{n}.png", i)
        rows.append({"scan": f"scans/s{i}", "label": "a" if i % 2 else "b"})
    rows.append({"scan": "scans/s9", "label": ""})
    write_csv(data / "labels.csv", rows)
    scan = scan_folder(data)
    assert scan.classes == ["a", "b"] and len(scan.samples) == 8
    assert scan.file_format == "slices" and scan.dimension == "3D"
    assert Path(scan.samples[0].image).is_dir()
    # the slices of a listed folder are not "unlisted"; the row without a file is reported
    assert scan.skipped == ["labels.csv row 10: 'scans/s9' names no image file"]
