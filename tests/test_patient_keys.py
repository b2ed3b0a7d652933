"""Patient keys inferred from every source (core.datasets.patient_keys): naming schemes of real
and invented datasets give the right patients, the split never puts one on both sides, the
source says where the key came from and a guess is flagged and warned about — in split.json,
the index summary and the model card. The chest X-ray pneumonia failure (``IM-0119-0001`` and
``IM-0119-0002`` in different groups) is reproduced end to end."""
from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.datasets.indexing import write_diagnosis_index
from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.patient_keys import NONE, REPORT, infer_patient_keys, tokens
from core.datasets.splitting import grouped_stratified_split, make_split, split_samples
from core.jobs.model_card import render_model_card

ROOT = "/data"
A, B = "NORMAL", "PNEUMONIA"


def label(p: int) -> str:
    return A if p % 2 else B


def make_scan(files: list[tuple[str, str, str]], source: str = NONE, existing: bool = False,
              splits: list[str] | None = None) -> ScanResult:
    """An in-memory scan of (path below the root, label, true patient); each sample's group is
    its file stem, as the layouts leave it when they found no key."""
    samples = [Sample(f"{ROOT}/{rel}", lab, Path(rel).name.split(".")[0],
                      splits[i] if splits else "") for i, (rel, lab, _) in enumerate(files)]
    counts = Counter(s.label for s in samples)
    return ScanResult(ROOT, "class_folders", "diagnosis", "2D", "png", sorted(counts),
                      dict(counts), samples, source, existing)


def partition(keys: list[str]) -> set[frozenset[int]]:
    groups: dict[str, set[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, set()).add(i)
    return {frozenset(g) for g in groups.values()}


# (path, label, true patient) of each naming scheme; the true patient of a one-image-per-patient
# set is the image itself
SCHEMES = {
    "chest x-ray IM-0119-0001": [(f"{label(p)}/IM-{p:04d}-{v:04d}.jpeg", label(p), f"IM{p}")
                                 for p in range(100, 124) for v in range(1, 2 + p % 3)],
    "NORMAL2-IM-1427-0001": [(f"{A if p % 2 else B}/{A if p % 2 else B}2-IM-{p}-{v:04d}.jpeg",
                              label(p), f"IM{p}") for p in range(1400, 1420) for v in (1, 2)],
    "person1_bacteria_1": [((f"{label(p)}/person{p}_{'bacteria' if v % 2 else 'virus'}_"
                             f"{p * 5 + v}.jpeg"), label(p), f"person{p}")
                           for p in range(1, 21) for v in range(1 + p % 3)],
    "patient00001_study1_view1_frontal": [
        (f"{label(p)}/patient{p:05d}_study{s}_view{v}_{'frontal' if v == 1 else 'lateral'}.jpg",
         label(p), f"patient{p:05d}") for p in range(1, 13) for s in (1, 2) for v in (1, 2)],
    "mammography 0001_L_CC": [(f"{label(p)}/{p:04d}_{side}_{view}.png", label(p), str(p))
                              for p in range(1, 15) for side in "LR" for view in ("CC", "MLO")],
    "ISIC_0000001": [(f"{label(i)}/ISIC_{i:07d}.jpg", label(i), str(i)) for i in range(40)],
    "NIH 00000013_005": [(f"images/{p:08d}_{f:03d}.png", label(p), str(p))
                         for p in range(1, 31) for f in range(p % 4 + 1)],
    "BIDS sub-03_ses-1_T1w": [(f"{label(s)}/sub-{s:02d}_ses-{k}_{m}.nii.gz", label(s), str(s))
                              for s in range(1, 13) for k in (1, 2) for m in ("T1w", "FLAIR")],
    "BraTS2021_00012_flair": [(f"{label(c)}/BraTS2021_{c:05d}_{m}.nii.gz", label(c), str(c))
                              for c in range(12) for m in ("flair", "t1", "t1ce", "t2")],
    "case_00012": [(f"{label(c)}/case_{c:05d}.nii.gz", label(c), str(c)) for c in range(30)],
    "UUID names": [(f"{label(i)}/{uuid.UUID(int=i * 7919 + 10 ** 20)}.png", label(i), str(i))
                   for i in range(40)],
    "md5 names": [(f"{label(i)}/{hashlib.md5(str(i).encode()).hexdigest()}.png", label(i),
                   str(i)) for i in range(40)],
    "P12_scan3": [(f"{label(p)}/P{p}_scan{k}.png", label(p), str(p))
                  for p in range(1, 16) for k in range(1, 2 + p % 3)],
    "2019_0045_a": [(f"{label(p)}/{2018 + p % 3}_{p:04d}_{x}.jpg", label(p), str(p))
                    for p in range(1, 25) for x in "abc"[:1 + p % 3]],
    "Subj-7-slice-004": [(f"{label(p)}/Subj-{p}-slice-{z:03d}.png", label(p), str(p))
                         for p in range(1, 13) for z in range(6)],
    "one folder per patient": [(f"{label(p)}/P{p:03d}/img{k}.png", label(p), str(p))
                               for p in range(1, 14) for k in range(3)],
    "BIDS subject folders": [(f"{label(s)}/sub-{s:02d}/anat/{m}.nii.gz", label(s), str(s))
                             for s in range(1, 11) for m in ("T1w", "T2w", "FLAIR")],
}
# scheme -> (source, guess, the group of the first sample or None for one group per image)
EXPECTED = {
    "chest x-ray IM-0119-0001": ("filename prefix 'IM-0100'", True, "IM-0100"),
    "NORMAL2-IM-1427-0001": ("filename prefix 'IM-1400'", True, "IM-1400"),
    "person1_bacteria_1": ("filename prefix", False, "person1"),
    "patient00001_study1_view1_frontal": ("filename prefix", False, "patient00001"),
    "mammography 0001_L_CC": ("filename prefix '0001'", True, "0001"),
    "ISIC_0000001": (NONE, False, None),
    "NIH 00000013_005": ("filename prefix '00000001'", True, "00000001"),
    "BIDS sub-03_ses-1_T1w": ("filename prefix", False, "sub01"),
    "BraTS2021_00012_flair": ("filename prefix 'BraTS2021_00000'", True, "BraTS2021_00000"),
    "case_00012": ("filename prefix", False, "case00000"),
    "UUID names": (NONE, False, None),
    "md5 names": (NONE, False, None),
    "P12_scan3": ("filename prefix 'P1'", True, "P1"),
    "2019_0045_a": ("filename prefix '2019_0001'", True, "2019_0001"),
    "Subj-7-slice-004": ("filename prefix 'Subj-1'", True, "Subj-1"),
    "one folder per patient": ("folder 'P001/'", True, "P001"),
    "BIDS subject folders": ("patient folder 'sub-01/'", False, "sub-01"),
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_naming_scheme_gives_the_true_patients(scheme):
    files = SCHEMES[scheme]
    scan = make_scan(files)
    keyed = infer_patient_keys(scan)
    source, guess, first_group = EXPECTED[scheme]
    report = keyed.details[REPORT]
    assert (keyed.group_source, report["source"], report["guess"]) == (source, source, guess)
    groups = [s.group for s in split_samples(keyed)]
    assert partition(groups) == partition([truth for _, _, truth in files])
    assert groups[0] == (first_group or f"{ROOT}/{files[0][0]}")
    sharing = sum(c for c in Counter(t for _, _, t in files).values() if c > 1)
    assert report["images_sharing_a_patient"] == sharing
    assert report["num_groups"] == len({t for _, _, t in files})
    assert bool(report["warnings"]) == guess  # a guess is always warned about, a known key not
    if guess:
        assert report["warnings"][0].startswith("patient key guessed from ")
        assert f"{sharing} images share a patient" in report["warnings"][0]
    for seed in (0, 1, 2):  # no true patient on both sides of the split
        split = make_split(scan, 0.3, seed)
        truth = {f"{ROOT}/{rel}": t for rel, _, t in files}
        assert split.test and not ({truth[s.image] for s in split.train} &
                                   {truth[s.image] for s in split.test})
        assert split.info["grouping_key"] == source and split.info["patient_key"]["guess"] == guess


def test_tokens_split_words_and_numbers_but_keep_hashes_whole():
    assert [t[0] for t in tokens("NORMAL2-IM-1427-0001")] == ["NORMAL", "2", "IM", "1427", "0001"]
    assert [t[0] for t in tokens("person1_bacteria_1")] == ["person", "1", "bacteria", "1"]
    assert [t[0] for t in tokens("3f2a9c1e-4b5d")] == ["3f2a9c1e", "4b5d"]
    assert [t[3] for t in tokens("sub 03.T1w")] == [False, True, False, True, False]


def test_pneumonia_set_has_no_sibling_across_the_split(tmp_path):
    """The failure: IM-0119-0001 and IM-0119-0002 were different groups, so most test patients
    had a sibling image in training and the model card said "none on both sides"."""
    data = tmp_path / "chest_xray"
    for p in range(100, 145):  # NORMAL: IM-<patient>-<image>, one to three images each
        for v in range(1, 2 + p % 3):
            save(data / "NORMAL" / f"IM-{p:04d}-{v:04d}.jpeg", p)
    for p in range(1, 31):  # PNEUMONIA: person<patient>_<kind>_<image counter>
        for v in range(1 + p % 2):
            save(data / "PNEUMONIA" / f"person{p}_{'virus' if v else 'bacteria'}_{p * 7 + v}"
                 ".jpeg", p)
    scan = scan_folder(data)
    truth = {}
    for s in scan.samples:
        name = Path(s.image).name
        truth[s.image] = re.match(r"IM-\d+|person\d+", name).group()
    per_image = [Sample(s.image, s.label, s.image) for s in scan.samples]  # the old grouping
    old = grouped_stratified_split(per_image, 0.2, 42)
    assert {truth[s.image] for s in old.train} & {truth[s.image] for s in old.test}

    out = write_diagnosis_index(scan, tmp_path / "dp", 0.2, seed=42)
    train = json.loads((tmp_path / "dp" / "train.json").read_text())
    test = json.loads((tmp_path / "dp" / "test.json").read_text())
    assert not {truth[p] for p in train} & {truth[p] for p in test}  # zero cross-split siblings
    assert len(train) + len(test) == len(scan.samples)
    split = json.loads((tmp_path / "dp" / "split.json").read_text())
    assert "filename prefix 'IM-0100'" in split["grouping_key"]
    key = split["patient_key"]
    assert key["guess"] is True and key["num_groups"] == 45 + 30
    sharing = sum(1 + p % 3 for p in range(100, 145) if p % 3) + 2 * 15
    assert key["images_sharing_a_patient"] == sharing
    assert any(w.startswith("patient key guessed from file names 'IM-0100-…'")
               for w in split["warnings"])
    assert out["warnings"] == split["warnings"] and out["patient_key"]["guess"] is True
    assert out["grouping_key"] == split["grouping_key"]
    card = render_model_card(PLAN, REPORT_STUB, SUMMARY, split)
    assert "none on both sides" not in card and "patient key guessed" in card


def test_a_table_key_wins_over_names():
    files = SCHEMES["chest x-ray IM-0119-0001"]
    scan = make_scan(files, source="table column 'Patient ID'")
    for i, s in enumerate(scan.samples):
        s.group = f"pid{i % 5}"  # the table says otherwise; it is believed
    keyed = infer_patient_keys(scan)
    assert keyed.group_source == "table column 'Patient ID'"
    assert [s.group for s in keyed.samples] == [f"pid{i % 5}" for i in range(len(files))]
    report = keyed.details[REPORT]
    assert not report["guess"] and not report["warnings"] and report["num_groups"] == 5


def test_layout_key_kept_and_the_images_it_missed_inferred():
    files = SCHEMES["person1_bacteria_1"] + SCHEMES["chest x-ray IM-0119-0001"]
    scan = make_scan(files, source="filename prefix")
    keyed = infer_patient_keys(scan)
    n_person = len(SCHEMES["person1_bacteria_1"])
    assert keyed.group_source == (f"filename prefix ({n_person} images); filename prefix "
                                  f"'IM-0100' ({len(files) - n_person} images)")
    assert partition([s.group for s in keyed.samples]) == partition([t for *_, t in files])
    report = keyed.details[REPORT]
    assert report["guess"] and report["guessed_images"] == len(files) - n_person
    assert f"for {len(files) - n_person} of {len(files)} images" in report["warnings"][0]


def test_many_slices_a_patient_are_no_key_but_a_warning():
    files = [(f"{label(p)}/Subj-{p}-slice-{z:03d}.png", label(p), str(p))
             for p in range(1, 12) for z in range(40)]
    keyed = infer_patient_keys(make_scan(files))
    report = keyed.details[REPORT]
    assert keyed.group_source == NONE and not report["guess"]
    assert report["warnings"] and report["warnings"][0].startswith("no patient key found, but "
                                                                  "440 images share file names")
    assert "'Subj-1-…'" in report["warnings"][0]


def test_numbering_that_restarts_per_class_is_kept_apart():
    files = [(f"{lab}/{p}_{v}.png", lab, f"{lab}{p}") for lab in (A, B) for p in range(1, 9)
             for v in range(2)]
    keyed = infer_patient_keys(make_scan(files))
    assert partition([s.group for s in keyed.samples]) == partition([t for *_, t in files])
    assert any("repeats across classes" in w for w in keyed.details[REPORT]["warnings"])


def test_dataset_split_with_restarted_numbering_keeps_its_training_images():
    files, splits = [], []
    for part in ("train", "test"):
        for p in range(1, 9):
            for v in (1, 2):
                files.append((f"{part}/{label(p)}/IM-{p:04d}-{v:04d}.jpeg", label(p),
                              part + str(p)))
                splits.append(part)
    scan = make_scan(files, existing=True, splits=splits)
    split = make_split(scan, 0.2, 0)
    assert split.info["method"] == "kept_from_dataset" and "left_out_for_leakage" not in split.info
    assert len(split.train) == len(split.test) == 16
    assert any("the dataset's train and test folders" in w for w in split.info["warnings"])


def test_dataset_split_with_a_shared_patient_leaves_its_training_images_out():
    files, splits = [], []
    for part, patients in (("train", range(1, 9)), ("test", range(8, 16))):  # patient 8: both
        for p in patients:
            for v in (1, 2):
                files.append((f"{part}/{label(p)}/IM-{p:04d}-{v:04d}.jpeg", label(p), str(p)))
                splits.append(part)
    split = make_split(make_scan(files, existing=True, splits=splits), 0.2, 0)
    assert split.info["left_out_for_leakage"]["groups"] == ["IM-0008"]
    assert any("2 training images were left out" in w for w in split.info["warnings"])


def test_inference_is_pure_and_idempotent():
    scan = make_scan(SCHEMES["mammography 0001_L_CC"])
    before = [s.group for s in scan.samples]
    once = infer_patient_keys(scan)
    assert [s.group for s in scan.samples] == before and REPORT not in scan.details
    assert infer_patient_keys(once) is once
    assert scan.group_source == NONE and once.group_source == "filename prefix '0001'"


PLAN = {"dataset": "X", "task": "diagnosis", "dataset_path": "/x", "classes": [A, B]}
REPORT_STUB = {"metrics": {}, "num_test": 3}
SUMMARY = {"network": "resnet", "epochs_run": 1, "device": "cpu", "seconds": 1.0}


@pytest.mark.parametrize("split,says,never", [
    ({"grouping_key": "table column 'Patient ID'", "patient_key": {"guess": False},
      "train_groups": ["a", "b"], "test_groups": ["c"]},
     "2 training and 1 test patients/groups; none on both sides", "guess"),
    ({"grouping_key": "filename prefix 'IM-0119'", "patient_key": {"guess": True},
      "train_groups": ["a"], "test_groups": ["c"]},
     "1 test groups by a patient key guessed from file or folder names", "none on both sides"),
    ({"grouping_key": "filename prefix (6 images); none (4 images, one group each)",
      "patient_key": {"guess": False}, "train_groups": ["a"], "test_groups": ["c"]},
     "images without a key are each their own group", "none on both sides."),
    ({"grouping_key": NONE, "train_groups": ["a"], "test_groups": ["c"]},
     "each its own group: the dataset gives no patient key", "none on both sides"),
])
def test_model_card_claims_no_overlap_only_for_a_known_key(split, says, never):
    card = render_model_card(PLAN, REPORT_STUB, SUMMARY, split)
    assert says in card and never not in card


def save(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8), value % 256, np.uint8)).save(path, format="JPEG")
