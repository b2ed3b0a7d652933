"""Pipeline speed bench: what caching decoded images, sampling the dataloader check and worker
processes buy, on synthetic 2D and 3D diagnosis data.

    python -m bench.pipeline_speed [--images 600] [--volumes 48] [--workers 0,1,2] [--json]

Writes a 2D set (PNG, 256 x 256 -> IMAGE_SIZE 128 x 128) and a 3D set (NIfTI, 96 x 96 x 48 ->
64 x 64 x 32) into a temporary folder with a job workspace beside it, instantiates the
diagnosis dataloader template and measures:

* ``decode``: training samples/s (augmentation on) over two epochs, uncached (every access reads
  and resizes, as before the cache) against the cache in memory, disk only (PersistentDataset)
  and a fresh process's first epoch over a warm disk cache;
* ``check``: the dataloader check as its own process (imports included) loading every image
  against the stratified sample, and the first training epoch after a sampled check (what it
  decoded is reused) against a cold one;
* ``workers``: a training-like loop (DataLoader, batch 16 in 2D and 8 in 3D, one DenseNet step
  per batch on the torch threads of this machine) with ``num_workers`` 0, 1, 2 over the cached
  dataset (workers start again every epoch, as under the Trainer).

Apart from the check, everything runs in this process (imports excluded from the numbers);
the data is deleted afterwards. Numbers, not assertions: the tests do not time anything.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def make_2d(folder: Path, n: int, size: int = 256) -> dict:
    from PIL import Image
    rng = np.random.default_rng(0)
    index = {}
    for i in range(n):
        label = ("NORMAL", "PNEUMONIA", "OTHER")[i % 3]
        path = folder / label / f"p{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        base = rng.normal(120, 30, (size // 8, size // 8)).clip(0, 255).astype(np.uint8)
        Image.fromarray(base).resize((size, size), Image.BICUBIC).save(path)
        index[str(path)] = [label]
    return index


def make_3d(folder: Path, n: int, shape=(96, 96, 48)) -> dict:
    import nibabel as nib
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    index = {}
    for i in range(n):
        path = folder / f"case{i:04d}.nii.gz"
        volume = rng.normal(0, 200, shape).astype(np.int16)
        nib.save(nib.Nifti1Image(volume, np.diag([1.0, 1.0, 2.5, 1.0])), str(path))
        index[str(path)] = [("no", "yes")[i % 2]]
    return index


def make_job(root: Path, index: dict, image_size: list[int], intensity: dict) -> Path:
    from core.training.instantiate import instantiate
    datapath = root / "job" / "Datapath"
    datapath.mkdir(parents=True, exist_ok=True)
    items = sorted(index.items())
    test = dict(items[::5])
    train = {k: v for k, v in items if k not in test}
    (datapath / "train.json").write_text(json.dumps(train))
    (datapath / "test.json").write_text(json.dumps(test))
    labels = sorted({v[0] for v in index.values()})
    (datapath / "label_dict.json").write_text(json.dumps({n: i for i, n in enumerate(labels)}))
    instantiate(ROOT / "ml_templates" / "diagnosis" / "dataloader_template.py",
                datapath / "dataloader.py",
                {"DATAPATH": str(datapath), "IMAGE_SIZE": image_size, "IN_CHANNELS": 1,
                 "MULTI_LABEL": False, "INTENSITY": intensity, "ALLOW_PICKLE": False,
                 "CACHE_DIR": "../cache"})
    return datapath


def fresh_module(datapath: Path, memory: bool = True, disk: bool = True):
    """The job's dataloader as a new process would import it, with the cache tiers chosen."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("job_dataloader", datapath / "dataloader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not memory:
        module.fits_in_memory = lambda *a, **k: False
    if not disk:
        module.CACHE_DIR = None
    return module


def epoch_rate(dataset) -> float:
    started = time.perf_counter()
    for i in range(len(dataset)):
        dataset[i]
    return len(dataset) / (time.perf_counter() - started)


def clear_cache(datapath: Path) -> None:
    shutil.rmtree(datapath.parent / "cache", ignore_errors=True)


def decode_bench(datapath: Path) -> dict:
    out = {}
    clear_cache(datapath)
    ds = fresh_module(datapath, memory=False, disk=False).DiagnosisDataset("train", augment=True)
    out["uncached"] = [epoch_rate(ds), epoch_rate(ds)]
    ds = fresh_module(datapath).DiagnosisDataset("train", augment=True)
    out["memory+disk"] = [epoch_rate(ds), epoch_rate(ds)]
    ds = fresh_module(datapath, memory=True, disk=False).DiagnosisDataset("train", augment=True)
    out["memory"] = [epoch_rate(ds), epoch_rate(ds)]
    clear_cache(datapath)
    ds = fresh_module(datapath, memory=False).DiagnosisDataset("train", augment=True)
    out["disk"] = [epoch_rate(ds), epoch_rate(ds)]
    ds = fresh_module(datapath).DiagnosisDataset("train", augment=True)  # warm disk cache
    out["memory+disk, warm disk"] = [epoch_rate(ds), epoch_rate(ds)]
    return {k: [round(r, 1) for r in v] for k, v in out.items()}


def run_check(datapath: Path, whole: int | None = None) -> tuple[float, dict]:
    """The dataloader check as the Module Architect runs it: its own process (imports
    included); ``whole`` overrides the split size checked image by image."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = ("import sys, runpy; from core.config import bootstrap; bootstrap.apply(); "
            "from ml_templates.common import check_sample; "
            f"check_sample.WHOLE_SPLIT = {whole or 'check_sample.WHOLE_SPLIT'}; "
            "sys.argv = ['check', '--datapath', sys.argv[1]]; "
            "runpy.run_module('ml_templates.diagnosis.check_dataloader', run_name='__main__')")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(datapath)], cwd=ROOT, env=env,
                   capture_output=True, check=True)
    seconds = time.perf_counter() - started
    return round(seconds, 2), json.loads((datapath / "dataloader_check.json").read_text())


def check_bench(datapath: Path) -> dict:
    out = {}
    clear_cache(datapath)
    out["full_s"], report = run_check(datapath, whole=10 ** 9)
    out["full_checked"] = report["checked"]
    clear_cache(datapath)
    out["sampled_s"], report = run_check(datapath)
    out["sampled_checked"] = report["checked"]
    ds = fresh_module(datapath).DiagnosisDataset("train", augment=True)
    out["first_epoch_after_sampled_check_per_s"] = round(epoch_rate(ds), 1)
    clear_cache(datapath)
    ds = fresh_module(datapath).DiagnosisDataset("train", augment=True)
    out["first_epoch_cold_per_s"] = round(epoch_rate(ds), 1)
    return out


def workers_bench(datapath: Path, workers: list[int], spatial_dims: int, steps: int = 12,
                  batch_size: int = 16) -> dict:
    import torch
    from monai.networks import nets
    out = {}
    module = fresh_module(datapath)
    dataset = module.DiagnosisDataset("train", augment=True)
    [dataset[i] for i in range(len(dataset))]  # warm: the cache is filled once, as in epoch 1
    model = nets.DenseNet(spatial_dims=spatial_dims, in_channels=1, out_channels=2,
                          init_features=16, growth_rate=12, block_config=(3, 6, 6))  # "small"
    optimiser = torch.optim.AdamW(model.parameters(), 1e-3)

    def collate(batch):
        return (torch.stack([b["pixel_values"] for b in batch]),
                torch.stack([b["labels"] for b in batch]).clamp(max=1))
    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    step(*collate([dataset[0], dataset[1]]))  # warm-up: the first step pays one-off costs
    for n in workers:
        for with_model in (False, True):
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                                 num_workers=n, collate_fn=collate)
            started, seen, done = time.perf_counter(), 0, 0
            while done < steps:  # epochs until `steps` batches (workers restart per epoch)
                for x, y in loader:
                    if with_model:
                        step(x, y)
                    seen, done = seen + len(x), done + 1
                    if done >= steps:
                        break
            key = f"num_workers={n}, {'with model step' if with_model else 'loader only'}"
            out[key] = round(seen / (time.perf_counter() - started), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    from core.config.bootstrap import apply
    apply()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--volumes", type=int, default=48)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import torch
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    results = {"torch_threads": torch.get_num_threads()}
    tmp = Path(tempfile.mkdtemp(prefix="m3b-pipeline-speed-"))
    try:
        for name, make, size, intensity, dims in (
                ("2d", lambda f: make_2d(f, args.images), [128, 128], {"kind": "minmax"}, 2),
                ("3d", lambda f: make_3d(f, args.volumes), [64, 64, 32],
                 {"kind": "ct", "window": [-400, 400]}, 3)):
            index = make(tmp / name / "data")
            datapath = make_job(tmp / name, index, size, intensity)
            results[name] = {"images": len(index),
                             "cached_mb": round(len(index) * math.prod(size) * 4 / 2 ** 20, 1),
                             "decode_samples_per_s": decode_bench(datapath),
                             "check": check_bench(datapath),
                             "workers_samples_per_s": workers_bench(
                                 datapath, workers, dims, *((12, 16) if dims == 2 else (4, 8)))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"torch threads: {results['torch_threads']}")
    for name in ("2d", "3d"):
        r = results[name]
        print(f"\n{name.upper()}: {r['images']} images, {r['cached_mb']} MB decoded")
        print("  training samples/s (epoch 1, epoch 2):")
        for mode, rates in r["decode_samples_per_s"].items():
            print(f"    {mode:<24} {rates[0]:>8.1f} {rates[1]:>8.1f}")
        c = r["check"]
        print(f"  dataloader check: every image {c['full_s']} s {c['full_checked']}, "
              f"sampled {c['sampled_s']} s {c['sampled_checked']}")
        print(f"  first training epoch: after the sampled check "
              f"{c['first_epoch_after_sampled_check_per_s']}/s, cold "
              f"{c['first_epoch_cold_per_s']}/s")
        print("  DataLoader samples/s:")
        for key, rate in r["workers_samples_per_s"].items():
            print(f"    {key:<36} {rate:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
