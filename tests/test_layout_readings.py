"""The interpretation step reads every layout family right (task, classes, samples) with the
datacard description a clinician wrote, never accepts a degenerate reading, and asks when a
folder can be read two ways (registration returns the readings; --interpretation picks one).

The families' folders come from core.demo.layout_families (written independently of the
scanner); the layouts at the end were invented after the mechanism was written, and pass
without code of their own."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT, ScanError
from core.datasets.datacards import parse_datacard
from core.datasets.registration import register_dataset
from core.demo.layout_families import FAMILIES


@pytest.mark.parametrize("family", FAMILIES, ids=[f.key for f in FAMILIES])
def test_every_family_is_read_right(tmp_path, family):
    root = family.generate(tmp_path / family.folder)
    scan = scan_folder(root, family.description)
    expected = family.reading
    assert TEMPLATE_OF_LAYOUT[scan.layout] == expected.template, scan.details["interpretations"]
    assert len(scan.samples) == expected.n_samples
    if expected.template in ("diagnosis", "detection", "segmentation"):
        assert sorted(scan.classes) == sorted(expected.classes)
    reading = scan.details["interpretation"]
    assert not reading["ambiguous"], reading
    assert reading["coverage"] >= 0.8
    # the readings considered are listed with example rows for the user
    best = scan.details["interpretations"][0]
    assert best["reader"] == reading["reader"] and best["examples"]


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(value)
    Image.fromarray(rng.integers(0, 255, (24, 24), dtype=np.uint8)).save(path)


def test_wrapper_folders_and_a_titled_second_sheet(tmp_path):
    """Invented after the mechanism: class folders two wrapper folders down, and a workbook
    whose labels are on its second sheet under a title row."""
    for split in ("train", "test"):
        for label in ("benign", "malignant"):
            for i in range(4):
                _png(tmp_path / "a" / "release_v2" / "data" / split / label / f"{label}{i}.png",
                     i)
    scan = scan_folder(tmp_path / "a")
    assert scan.layout == "class_folders" and scan.classes == ["benign", "malignant"]
    assert scan.existing_split and len(scan.samples) == 16

    root = tmp_path / "b"
    for i in range(12):
        _png(root / "pics" / f"img_{i:03d}.png", i)
    notes = pd.DataFrame({"About": ["Scanned 2021", "Contact: radiology"]})
    table = pd.DataFrame([["Lesion table (v3)", None, None], ["File", "Verdict", "Patient"]] +
                         [[f"img_{i:03d}", "cancer" if i % 2 else "clear", f"P{i // 2}"]
                          for i in range(12)])
    with pd.ExcelWriter(root / "meta.xlsx") as writer:
        notes.to_excel(writer, sheet_name="Notes", index=False)
        table.to_excel(writer, sheet_name="Reads", index=False, header=False)
    scan = scan_folder(root, "Labels are the Verdict column of the 'Reads' sheet.")
    assert scan.layout == "label_table" and scan.details["sheet"] == "Reads"
    assert scan.classes == ["cancer", "clear"] and len({s.group for s in scan.samples}) == 6


def _busi_like(root: Path) -> None:
    """Class folders whose images have a mask beside them (breast ultrasound style)."""
    for k, label in enumerate(("benign", "malignant", "normal")):
        for i in range(5):
            _png(root / label / f"{label} ({i}).png", i + 10 * k)
            Image.fromarray(np.where(np.arange(576).reshape(24, 24) % 7 == 0, 255, 0)
                            .astype(np.uint8)).save(root / label / f"{label} ({i})_mask.png")


def test_a_folder_with_two_targets_lists_both_and_the_request_binds_one(tmp_path, settings,
                                                                         store):
    """Class folders whose images have masks beside them hold two valid targets (diagnosis of
    the class, segmentation of the lesion): registration lists both without asking, and the
    request says which one a build uses."""
    from core.planning.matching import rank_datacards

    root = tmp_path / "busi"
    _busi_like(root)
    scan = scan_folder(root)
    reading = scan.details["interpretation"]
    readers = [r["reader"] for r in scan.details["interpretations"] if not r["refused"]]
    assert not reading["ambiguous"] and {"masks", "class_folders"} <= set(readers)
    result = register_dataset(settings, store, str(root), "BUSI-like")
    assert result["status"] == "registered", result["errors"]
    card = json.loads(Path(result["datacard_path"]).read_text())
    tasks = {t["task"]: t for t in card["targets"]}
    assert set(tasks) == {"segmentation", "diagnosis"}
    assert tasks["diagnosis"]["classes"] == ["benign", "malignant", "normal"]
    assert set(card["tasks"]) == {"segmentation", "diagnosis"}
    parsed = parse_datacard(card)
    parsed = parsed.model_copy(update={"modality": "ultrasound", "anatomy": "breast"})
    seg = rank_datacards("segment breast lesions on ultrasound", [(parsed, True)])
    dia = rank_datacards("classify benign versus malignant breast ultrasound", [(parsed, True)])
    assert seg["target"] == tasks["segmentation"]["id"]
    assert dia["target"] == tasks["diagnosis"]["id"]
    # a reading can still be picked by number (the CLI's --interpretation N)
    number = next(r["number"] for r in scan.details["interpretations"]
                  if r["reader"] == "class_folders")
    chosen = register_dataset(settings, store, str(root), "BUSI-folders", interpretation=number)
    assert chosen["status"] == "registered", chosen["errors"]
    assert json.loads(Path(chosen["datacard_path"]).read_text())["interpretation"] == \
        "class_folders"
    # the description settles it without asking
    told = scan_folder(root, "Segment the lesion: each image has its mask beside it "
                                 "(255 = lesion, 0 = background).")
    assert told.layout == "image_mask_folders" and not told.details["interpretation"]["ambiguous"]
    assert told.classes == ["lesion"] and told.details["label_values"] == [255]


def test_degenerate_readings_are_never_accepted(tmp_path):
    for i in range(30):  # one folder per case: not classes
        _png(tmp_path / "c" / f"CASE_{1000 + i}" / "slice_001.png", i)
        _png(tmp_path / "c" / f"CASE_{1000 + i}" / "slice_002.png", i + 1)
    with pytest.raises(ScanError, match="cases or patients|one class per case"):
        scan_folder(tmp_path / "c")
    for i in range(6):  # images/ and masks/ are not two classes
        _png(tmp_path / "d" / "images" / f"x{i}.png", i)
        _png(tmp_path / "d" / "masks" / f"x{i}.png", i)
    scan = scan_folder(tmp_path / "d")
    assert scan.layout == "image_mask_folders"
    refused = {r["reader"]: r["refused"] for r in scan.details["interpretations"]}
    assert "holds masks" in refused["class_folders"]


def test_a_notes_file_beside_many_images_is_not_their_report(tmp_path):
    """Invented after the mechanism: each class folder holds a README.txt of prose."""
    for k, label in enumerate(("normal", "effusion")):
        for i in range(10):
            _png(tmp_path / label / f"{label}_{i}.png", i + 20 * k)
        (tmp_path / label / "README.txt").write_text("Exported from the PACS by the radiology "
                                                    "department in 2023; anonymised.")
    scan = scan_folder(tmp_path, "Classify effusion versus normal chest X-rays.")
    assert scan.layout == "class_folders" and scan.classes == ["effusion", "normal"]
    assert "text_reports" not in {r["reader"] for r in scan.details["interpretations"]}


def test_voc_keeps_the_split_its_image_sets_list(tmp_path):
    from core.demo.layout_families import BY_NAME
    family = BY_NAME["pascal_voc"]
    scan = scan_folder(family.generate(tmp_path / family.folder), family.description)
    assert scan.existing_split and scan.details["split_lists"]
    counts = {split: sum(s.split == split for s in scan.samples) for split in family.reading.split}
    assert counts == family.reading.split


def test_slicer_segments_are_read_by_name_in_every_file(tmp_path):
    """3D Slicer numbers segments per file: every fourth case stores 'tumor' as 1 and 'liver'
    as 2. The index carries each case's own values, and the mask the dataloader and evaluator
    see (mapped by label order) has the dark tumour as label 2 in every case."""
    from core.datasets.indexing import write_list_index
    from core.imaging.arrays import map_label_values
    from core.imaging.image_io import read_image

    family = next(f for f in FAMILIES if f.key == "slicer_seg")
    root = family.generate(tmp_path / "slicer", scale=0.4)
    scan = scan_folder(root, family.description)
    assert scan.classes == ["liver", "tumor"]
    swapped = [s for s in scan.samples if s.extra.get("label_values")]
    assert swapped and all(s.extra["label_values"] == [2, 1] for s in swapped)
    out = tmp_path / "index"
    out.mkdir()
    write_list_index(scan, out, "segmentation", test_fraction=0.25)
    entries = [e for name in ("train.json", "test.json")
               for e in json.loads((out / name).read_text())]
    assert sum("label_values" in e for e in entries) == len(swapped)
    for entry in entries:
        image, _ = read_image(entry["image_path"])
        mask, _ = read_image(entry["label_path"])
        labels = np.asarray(map_label_values(mask, entry.get("label_values")))
        assert set(np.unique(labels)) == {0, 1, 2}
        assert image[labels == 2].mean() < image[labels == 1].mean() - 30, entry["label_path"]


def test_a_mask_ending_the_description_names_is_read_as_a_mask(tmp_path):
    """Invented after the mechanism: outlines saved beside their frames with an ending no
    built-in rule knows (``_les``). The description names it, the folder confirms it (every
    ``X_les.png`` has its ``X.png``), and the folder reads as segmentation of one label.
    Endings the folder does not bear out are dropped."""
    from core.datasets.layouts.dispatch import confirmed_mask_affixes

    root = tmp_path / "us"
    rng = np.random.default_rng(3)
    for i in range(10):
        mask = np.zeros((40, 40), np.uint8)
        mask[10:20 + i, 12:22] = 255
        image = rng.integers(0, 120, (40, 40), dtype=np.uint8) + (mask > 0) * 100
        (root / "frames").mkdir(parents=True, exist_ok=True)
        Image.fromarray(image.astype(np.uint8)).save(root / "frames" / f"frame{i:03d}.png")
        Image.fromarray(mask).save(root / "frames" / f"frame{i:03d}_les.png")
    told = ("Breast ultrasound frames in frames/. The lesion outline of each frame X.png is "
            "drawn in X_les.png (white = lesion).")
    scan = scan_folder(root, told)
    assert (scan.task, scan.classes, len(scan.samples)) == ("segmentation", ["lesion"], 10)
    assert all(s.extra["label_path"].endswith("_les.png") for s in scan.samples)
    assert all(not str(s.image).endswith("_les.png") for s in scan.samples)
    assert scan.details["label_values"] == [255]
    with pytest.raises(ScanError, match="suffix"):          # untold: one folder, no labels
        scan_folder(root, "Breast ultrasound frames.")
    assert confirmed_mask_affixes(root, ["_les", "_nn", "_t1"]) == ("_les",)


def test_annotation_rows_in_txt_files_are_never_report_text(tmp_path):
    """YOLO label files (rows of numbers, some empty) are boxes, not a report per image: the
    folder offers detection only, so a report request cannot pick it."""
    family = next(f for f in FAMILIES if f.key == "yolo")
    root = family.generate(tmp_path / family.folder)
    scan = scan_folder(root, family.description)
    tasks = {t["task"] for t in scan.details.get("targets", [])} | {TEMPLATE_OF_LAYOUT[scan.layout]}
    assert "report_generation" not in tasks, scan.details.get("targets")
