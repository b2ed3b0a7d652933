"""MVFA (multi-level adapters on a frozen CLIP) on synthetic chest-X-ray-like anomaly data: only
the adapters train, CLIP is untouched, the adapters learn a bright-blob anomaly on a tiny random
CLIP (zero-shot and few-shot maps), no download ever happens, and the entry point runs end to end.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import CLIPModel

from core.demo.segmentation import xray_case
from ml_templates.mvfa.model import (MVFA, CLIPNotFoundError, build_char_tokenizer, load_clip,
                                     tiny_clip_config)
from ml_templates.mvfa.train import (aurocs, backbone_cache, fit, load_items, predict,
                                     support_indices)

ROOT = Path(__file__).resolve().parent.parent


def anomaly_case(rng: np.random.Generator, abnormal: bool, size: int = 64):
    """(8-bit image, mask): chest-like anatomy; abnormal images carry a bright blob in a lung."""
    img, organs = xray_case(rng, size)
    img = img.astype(np.float32) / 255
    mask = np.zeros((size, size), np.uint8)
    if abnormal:
        ys, xs = np.nonzero(organs == 1)
        i = rng.integers(0, len(ys))
        sigma = rng.uniform(3.5, 6.0)
        yy, xx = np.mgrid[0:size, 0:size]
        blob = np.exp(-(((yy - ys[i]) ** 2 + (xx - xs[i]) ** 2) / (2 * sigma ** 2)))
        img = img + blob * rng.uniform(0.5, 0.7)
        mask = (blob > 0.4).astype(np.uint8)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8), mask


def make_dataset(root: Path, n_train: int = 96, n_test: int = 64, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        items = []
        for k in range(n):
            image, mask = anomaly_case(rng, abnormal=k % 2 == 1)
            name = f"{split}_{k:03d}.png"
            Image.fromarray(image, mode="L").save(root / "images" / name)
            Image.fromarray(mask, mode="L").save(root / "masks" / name)
            items.append({"image_path": str(root / "images" / name),
                          "label_path": str(root / "masks" / name), "labels": ["lesion"]})
        (root / f"{split}.json").write_text(json.dumps(items))
    return root


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_clip")
    CLIPModel(tiny_clip_config()).save_pretrained(str(folder))
    build_char_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("mvfa_data"))


def test_only_adapters_trainable_and_shapes(tiny_clip_dir):
    model = MVFA(load_clip(tiny_clip_dir), tokenizer=build_char_tokenizer(tiny_clip_dir / "t"))
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"seg_adapters", "det_adapters"}
    assert not any(p.requires_grad for p in model.clip.parameters())
    assert model.levels == (1, 2, 3, 4)
    out = model(torch.randn(2, 3, 64, 64))
    assert out["anomaly_map"].shape == (2, 64, 64) and out["score"].shape == (2,)
    assert ((out["anomaly_map"] >= 0) & (out["anomaly_map"] <= 1)).all()
    model.build_memory(torch.randn(2, 3, 64, 64))
    out = model(torch.randn(1, 3, 64, 64))
    assert out["few_shot_map"].shape == (1, 64, 64)
    # precomputed text embeddings instead of a tokenizer
    emb = torch.randn(2, model.clip.config.projection_dim)
    MVFA(model.clip, text_embeddings=emb)
    with pytest.raises(ValueError, match="text_embeddings"):
        MVFA(model.clip, text_embeddings=torch.randn(3, 5))


def test_load_clip_missing_folder_is_clear(tmp_path):
    missing = tmp_path / "no_clip_here"
    with pytest.raises(CLIPNotFoundError, match="no_clip_here") as err:
        load_clip(missing)
    assert "never downloads" in str(err.value)


@pytest.mark.slow
def test_adapters_learn_blob_anomalies(tiny_clip_dir, dataset):
    started = time.time()
    clip = load_clip(tiny_clip_dir)
    before = {k: v.clone() for k, v in clip.state_dict().items()}
    torch.manual_seed(0)
    model = MVFA(clip, tokenizer=build_char_tokenizer(tiny_clip_dir / "t"))
    train_items = json.loads((dataset / "train.json").read_text())
    test_items = json.loads((dataset / "test.json").read_text())
    px, masks, labels = load_items(train_items, 64)
    feats = backbone_cache(model, px)
    report = fit(model, feats, masks, labels, epochs=12, learning_rate=5e-3, batch_size=8)
    assert report["stop_reason"] == "completed"
    for k, v in clip.state_dict().items():
        assert torch.equal(v, before[k]), f"CLIP weight {k} changed"

    tpx, tmasks, tlabels = load_items(test_items, 64)
    tfeats = backbone_cache(model, tpx)
    zero = aurocs(*predict(model, tfeats), tmasks.numpy(), tlabels.numpy())
    model.build_memory(features=feats[support_indices(labels, 4, 0)])
    few = aurocs(*predict(model, tfeats), tmasks.numpy(), tlabels.numpy())
    print(f"\nMVFA tiny random CLIP: zero-shot {zero}, few-shot (4 shots) {few}, "
          f"{time.time() - started:.1f} s")
    assert zero["image_auroc"] >= 0.8 and zero["pixel_auroc"] >= 0.8, zero
    assert few["image_auroc"] >= 0.8 and few["pixel_auroc"] >= 0.8, few


@pytest.mark.slow
def test_entry_point_end_to_end(tiny_clip_dir, dataset, tmp_path):
    from conftest import channel_metrics, channel_paths
    out = tmp_path / "Logout"
    cfg = {"clip_path": str(tiny_clip_dir), "datapath": str(dataset), "output_dir": str(out),
           "job_id": "job-mvfa", **channel_paths(out), "epochs": 3,
           "learning_rate": 2e-3, "batch_size": 8, "seed": 0, "time_budget_s": 60, "shots": 2}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    proc = subprocess.run([sys.executable, "-m", "core.config.launch", "ml_templates.mvfa.train", "--config",
                           str(tmp_path / "cfg.json")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    preds = json.loads((out / "predictions.json").read_text())
    assert len(preds) == 64
    for row in preds:
        assert set(row) == {"image_path", "label_path", "score", "prediction_path"}
        assert np.load(row["prediction_path"]).shape == (64, 64)
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["mode"] == "few-shot" and summary["shots"] == 2
    assert summary["stop_reason"] == "completed" and summary["global_step"] == 36
    assert summary["image_auroc"] is not None and summary["pixel_auroc"] is not None
    assert (out / "model" / "adapters.safetensors").exists()
    names = {m["name"] for m in channel_metrics(out)}
    assert {"loss", "focal", "dice", "bce", "test_image_auroc"} <= names

    # the stop file (the parent writes it when the user presses Stop) ends training at the
    # first check
    cfg.update(output_dir=str(tmp_path / "Logout2"), epochs=50, **channel_paths(tmp_path / "Logout2"))
    (tmp_path / "Logout2").mkdir()
    (tmp_path / "Logout2" / "stop.request").touch()
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    proc = subprocess.run([sys.executable, "-m", "core.config.launch", "ml_templates.mvfa.train", "--config",
                           str(tmp_path / "cfg.json")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "Logout2" / "train_summary.json").read_text())
    assert summary["stop_reason"] == "stopped by the user" and summary["global_step"] == 1
