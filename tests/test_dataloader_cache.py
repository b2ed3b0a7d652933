"""The diagnosis dataloader decodes each image once (memory, and the job's cache/ folder on
disk), never reuses a stale decode, never writes inside the dataset folder; the dataloader check
loads a stratified sample of large splits (every class, both splits) and still catches a
corrupt image in it."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core.jobs.gates import check_dataloader
from core.jobs.workspace import JobWorkspace
from core.training.dataloader import _cache_dir
from core.training.instantiate import instantiate
from ml_templates.common import check_sample
from ml_templates.common.check_sample import stratified_sample
from tests.conftest import ROOT, tree_digest

pytestmark = pytest.mark.filterwarnings("ignore:NvImgCodecPydicomReader")
TEMPLATE = ROOT / "ml_templates" / "diagnosis" / "dataloader_template.py"
CLASSES = ("cat_a", "cat_b", "cat_c")


def make_data(folder: Path, per_class: dict[str, int]) -> dict[str, list[str]]:
    """Small gray PNGs in class folders -> {class: [paths]}."""
    rng = np.random.default_rng(0)
    out = {}
    for name, n in per_class.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        out[name] = []
        for i in range(n):
            path = folder / name / f"img{i:03d}.png"
            Image.fromarray(rng.integers(0, 255, (12, 12), dtype=np.uint8)).save(path)
            out[name].append(str(path))
    return out


def make_job(root: Path, files: dict[str, list[str]], test_share: int = 4,
             image_size=(16, 16), cache: bool = True) -> JobWorkspace:
    ws = JobWorkspace(root / "job").ensure()
    train, test = {}, {}
    for name, paths in files.items():
        for i, p in enumerate(paths):
            (test if i % test_share == 0 else train)[p] = [name]
    for fname, data in (("train", train), ("test", test),
                        ("label_dict", {n: i for i, n in enumerate(files)})):
        (ws.datapath / f"{fname}.json").write_text(json.dumps(data))
    values = {"DATAPATH": str(ws.datapath), "IMAGE_SIZE": list(image_size), "IN_CHANNELS": 1,
              "MULTI_LABEL": False, "INTENSITY": {"kind": "minmax"}, "ALLOW_PICKLE": False}
    if cache:
        values["CACHE_DIR"] = _cache_dir(ws, {"dataset_path": str(Path(files[next(iter(files))][0])
                                                                 .parent.parent)})
    instantiate(TEMPLATE, ws.dataloader, values)
    return ws


def load(ws: JobWorkspace, name: str = "job_dl"):
    spec = importlib.util.spec_from_file_location(name, ws.dataloader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def count_reads(module) -> list:
    calls = []
    real = module.read_image

    def counting(ref, **kw):
        calls.append(ref)
        return real(ref, **kw)
    module.read_image = counting
    return calls


@pytest.fixture
def job(tmp_path):
    files = make_data(tmp_path / "data", {"cat_a": 6, "cat_b": 6})
    return tmp_path, files, make_job(tmp_path, files)


def test_second_epoch_reads_nothing_and_cache_is_in_the_job(job):
    root, _, ws = job
    before = tree_digest(root / "data")
    module = load(ws)
    calls = count_reads(module)
    ds = module.DiagnosisDataset("train", augment=True)
    first = [ds[i]["pixel_values"] for i in range(len(ds))]
    assert len(calls) == len(ds) and ds.prepared.mode == "memory+disk"
    [ds[i] for i in range(len(ds))]  # second epoch
    assert len(calls) == len(ds)
    assert tuple(first[0].shape) == (1, 16, 16) and str(first[0].dtype) == "torch.float32"
    cached = sorted(ws.cache.glob("*.pt"))
    assert len(cached) == len(ds) and ws.cache == ws.root / "cache"
    assert tree_digest(root / "data") == before and not list((root / "data").rglob("*.pt"))


def test_augmentation_replays_with_the_seed_over_the_cache(job):
    _, _, ws = job
    module = load(ws)
    runs = []
    for _ in range(2):
        ds = module.DiagnosisDataset("train", augment=True)
        ds.transforms.set_random_state(seed=3)
        runs.append(np.stack([ds[i]["pixel_values"].numpy() for i in range(len(ds))]))
    np.testing.assert_array_equal(runs[0], runs[1])
    plain = module.DiagnosisDataset("train", augment=False)
    assert not np.array_equal(runs[0], np.stack([plain[i]["pixel_values"].numpy()
                                                 for i in range(len(plain))]))


def test_disk_cache_survives_processes_and_is_invalidated_by_file_and_config(job, monkeypatch):
    root, files, ws = job
    module = load(ws)
    monkeypatch.setattr(module, "fits_in_memory", lambda *a, **k: False)  # disk only
    calls = count_reads(module)
    ds = module.DiagnosisDataset("test", augment=False)
    reference = [ds[i]["pixel_values"] for i in range(len(ds))]
    assert ds.prepared.mode == "disk" and len(calls) == len(ds)
    again = module.DiagnosisDataset("test", augment=False)  # as a new process would
    for i in range(len(again)):
        assert np.array_equal(again[i]["pixel_values"], reference[i])
    assert len(calls) == len(ds)  # all from disk
    changed = ds.items[0][0]
    Image.fromarray(np.full((12, 12), 7, np.uint8)).save(changed)
    os.utime(changed, ns=(1, 1))
    fresh = module.DiagnosisDataset("test", augment=False)
    [fresh[i] for i in range(len(fresh))]
    assert calls[len(ds):] == [changed]  # only the changed file decoded again
    resized = make_job(root, files, image_size=(20, 20))  # same job, CONFIG changed
    module2 = load(resized, "job_dl2")
    monkeypatch.setattr(module2, "fits_in_memory", lambda *a, **k: False)
    calls2 = count_reads(module2)
    ds2 = module2.DiagnosisDataset("test", augment=False)
    assert tuple(ds2[0]["pixel_values"].shape) == (1, 20, 20) and len(calls2) == 1


def test_a_cache_dir_inside_the_dataset_folder_is_refused(tmp_path):
    files = make_data(tmp_path / "data", {"cat_a": 3, "cat_b": 3})
    ws = JobWorkspace(tmp_path / "data" / "job")
    assert _cache_dir(ws, {"dataset_path": str(tmp_path / "data")}) is None
    assert _cache_dir(JobWorkspace(tmp_path / "j"), {"dataset_path": str(tmp_path / "data")}) \
        == os.path.join("..", "cache")
    job = make_job(tmp_path / "data", files, cache=False)  # job folder inside the data folder
    text = job.dataloader.read_text().replace("# --- M3B CONFIG END",
                                              "CACHE_DIR = '../../cat_a'\n# --- M3B CONFIG END")
    job.dataloader.write_text(text)
    module = load(job)
    ds = module.DiagnosisDataset("train")
    with pytest.warns(UserWarning, match="inside the dataset folder"):
        ds[0]
    assert ds.prepared.mode == "memory" and not list((tmp_path / "data").rglob("*.pt"))


def test_stratified_sample_every_class_first_last_and_small_splits_whole():
    labels = [["a"]] * 100 + [["b"]] * 50 + [["c"]] * 3
    picked = stratified_sample(labels, per_class=6, whole=20, seed=1)
    assert {0, 99, 100, 149, 150, 151, 152} <= set(picked)
    assert sum(i < 100 for i in picked) == 6 and sum(100 <= i < 150 for i in picked) == 6
    assert picked == stratified_sample(labels, per_class=6, whole=20, seed=1)
    assert stratified_sample(labels[:20], per_class=6, whole=20) == list(range(20))
    multi = [["a", "b"]] * 40 + [[]] * 10
    assert any(i >= 40 for i in stratified_sample(multi, per_class=4, whole=5))


def run_check(ws: JobWorkspace) -> dict:
    from ml_templates.diagnosis.check_dataloader import check
    report = check(ws.datapath)
    ws.dataloader_check.write_text(json.dumps(report))
    return report


def test_sampled_check_covers_classes_and_splits_and_training_reuses_it(tmp_path, monkeypatch):
    monkeypatch.setattr(check_sample, "WHOLE_SPLIT", 8)
    monkeypatch.setattr(check_sample, "PER_CLASS", 3)
    files = make_data(tmp_path / "data", {"cat_a": 20, "cat_b": 16, "cat_c": 12})
    ws = make_job(tmp_path, files)
    report = run_check(ws)
    assert report["sampled"] and report["expected"] == {"train": 36, "test": 12}
    assert report["checked"] == report["loaded"] == {"train": 9, "test": 9}
    for split in ("train", "test"):
        assert sorted(report["label_counts"][split]) == ["0", "1", "2"]
    assert report["shapes"] == [[1, 16, 16]] and report["cache"] == "memory+disk"
    gate = check_dataloader(ws)
    assert gate.ok, gate.errors
    assert len(list(ws.cache.glob("*.pt"))) == 18
    module = load(ws)
    calls = count_reads(module)
    train = module.DiagnosisDataset("train", augment=True)
    [train[i] for i in range(len(train))]
    assert len(calls) == 36 - 9  # what the check decoded comes from the cache


def test_sampled_check_catches_a_corrupt_image_in_the_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(check_sample, "WHOLE_SPLIT", 8)
    monkeypatch.setattr(check_sample, "PER_CLASS", 3)
    files = make_data(tmp_path / "data", {"cat_a": 20, "cat_b": 16})
    ws = make_job(tmp_path, files)
    train = json.loads(ws.train_index.read_text())
    broken = sorted(p for p, v in train.items() if v == ["cat_b"])[-1]  # a class's last image
    Path(broken).write_bytes(b"not a png")
    report = run_check(ws)
    assert report["loaded"]["train"] == report["checked"]["train"] - 1
    assert len(report["failed"]) == 1 and broken in report["failed"][0]
    assert "applying transform" not in report["failed"][0], report["failed"]
    gate = check_dataloader(ws)
    assert not gate.ok and "sampled of 27" in " ".join(gate.errors)


def test_small_dataset_is_checked_whole(job):
    _, _, ws = job
    report = run_check(ws)
    assert not report["sampled"] and report["checked"] == report["expected"] == \
        report["loaded"] == {"train": 8, "test": 4}


def test_segmentation_past_the_budget_caches_training_cases_on_disk(tmp_path, monkeypatch):
    from core.demo.segmentation import make_ct_organ_demo_3d
    from core.imaging import image_io
    folder = make_ct_organ_demo_3d(tmp_path / "ct", n_cases=3)
    labels = json.loads((folder / "labels.json").read_text())
    cases = [{"image_path": str(folder / "images" / m.name), "label_path": str(m),
              "labels": labels} for m in sorted((folder / "masks").iterdir())]
    ws = JobWorkspace(tmp_path / "job").ensure()
    ws.train_index.write_text(json.dumps(cases[:2]))
    ws.test_index.write_text(json.dumps(cases[2:]))
    ws.fingerprint.write_text(json.dumps({"median_shape": [4000, 4000, 4000]}))  # too big
    instantiate(ROOT / "ml_templates" / "segmentation" / "dataloader_template.py", ws.dataloader,
                {"DATAPATH": str(ws.datapath), "SPATIAL_DIMS": 3, "PIXDIM": [3.0, 3.0, 3.0],
                 "ROI_SIZE": [32, 32, 16], "IN_CHANNELS": 1, "NUM_CLASSES": 3,
                 "INTENSITY": {"kind": "ct", "window": [-160, 240]}, "CACHE_DIR": "../cache"})
    module = load(ws, "seg_dl")
    reads = []
    real = image_io.ImageRefReader.get_data
    monkeypatch.setattr(image_io.ImageRefReader, "get_data",
                        lambda self, img: reads.append(img) or real(self, img))
    train = module.SegmentationDataset("train", datapath=str(ws.datapath))
    shapes = {tuple(train[i]["pixel_values"].shape) for i in range(len(train))}
    assert train.cache == "disk" and shapes == {(1, 32, 32, 16)}
    assert len(list(ws.cache.glob("*.pt"))) == 2 and len(reads) == 4  # image + mask per case
    again = module.SegmentationDataset("train", datapath=str(ws.datapath))
    assert again[0]["labels"].shape == (1, 32, 32, 16) and len(reads) == 4
    test = module.SegmentationDataset("test", datapath=str(ws.datapath))
    assert test.cache == "none" and test[0]["pixel_values"].applied_operations  # invertible
    assert not list(folder.rglob("*.pt"))
