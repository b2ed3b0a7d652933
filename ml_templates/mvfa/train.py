"""MVFA training and scoring entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.mvfa.train --config <job>/train_config.json

Reads the segmentation-style index (``Datapath/train.json`` and ``test.json``:
``[{"image_path", "label_path", "labels"}]``; mask > 0 marks the anomaly, an empty mask is a
normal image), loads a local CLIP (``clip_path``; never downloads), trains only the MVFA adapters
(loss per step reported through the run channel; stop request and ``time_budget_s`` honoured),
builds the few-shot memory from ``shots`` normal training images when ``shots`` > 0, then scores
the test set: ``Logout/predictions/<name>.npy`` anomaly maps (on the mask's grid),
``Logout/predictions.json`` ``[{"image_path", "label_path", "score", "prediction_path"}]``,
``Logout/model/`` (adapters and text embeddings) and ``Logout/train_summary.json`` with image- and
pixel-level AUROC.

Config keys: clip_path, datapath, output_dir, job_id, metrics_path, stop_path, epochs,
learning_rate, batch_size, seed, time_budget_s, shots, levels, residual_ratio, top_k, det_weight,
few_shot_weight, object_name, text_embeddings_path
(a .pt/.npy [2, projection_dim] used instead of the tokenizer), threads, max_pixels_auroc.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file

from ml_templates.common.channel import RunChannel
from ml_templates.mvfa.model import (MVFA, load_clip, load_tokenizer, preprocess,
                                     prompt_ensembles)


def read_array(path: str | Path) -> np.ndarray:
    """A 2D image or mask as an array (PNG/JPG/TIF/BMP, .npy, 2D NIfTI)."""
    p = Path(path)
    name = p.name.lower()
    if name.endswith(".npy"):
        arr = np.load(p)
    elif name.endswith((".nii", ".nii.gz")):
        import nibabel as nib
        arr = np.squeeze(np.asarray(nib.load(str(p)).dataobj))
    else:
        with Image.open(p) as img:
            arr = np.asarray(img)
    arr = np.squeeze(arr)
    if arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4):
        raise ValueError(f"{p}: MVFA takes 2D images; got shape {arr.shape} (3D volumes must be "
                         f"sliced into 2D images by the Data Engineer)")
    return arr


def to_unit(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    arr = arr.astype(np.float32)
    lo, hi = np.percentile(arr, [0.5, 99.5])
    return np.clip((arr - lo) / max(hi - lo, 1e-6), 0, 1)


def load_items(items: list[dict], size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pixel_values [N,3,S,S], masks [N,S,S] in {0,1}, labels [N])."""
    images, masks = [], []
    for it in items:
        path = it["image_path"]
        if isinstance(path, (list, tuple)):
            path = path[0]
        images.append(preprocess(to_unit(read_array(path)), size))
        mask = torch.as_tensor((read_array(it["label_path"]) > 0).astype(np.float32))
        if mask.ndim == 3:
            mask = mask.amax(-1)
        masks.append(torch.nn.functional.interpolate(mask[None, None], size=(size, size),
                                                     mode="nearest")[0, 0])
    masks_t = torch.stack(masks)
    return torch.stack(images), masks_t, (masks_t.flatten(1).amax(1) > 0).float()


@torch.no_grad()
def backbone_cache(model: MVFA, pixels: torch.Tensor, batch_size: int = 16) -> torch.Tensor:
    return torch.cat([model.backbone_features(pixels[i:i + batch_size])
                      for i in range(0, len(pixels), batch_size)])


def fit(model: MVFA, features: torch.Tensor, masks: torch.Tensor, labels: torch.Tensor,
        epochs: int = 10, learning_rate: float = 1e-3, batch_size: int = 8, seed: int = 0,
        time_budget_s: float | None = None, should_stop=None, on_step=None) -> dict:
    """Train the adapters on cached frozen-backbone features. Returns a small report."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=learning_rate, betas=(0.5, 0.999))
    gen = torch.Generator().manual_seed(seed)
    started, step, last_check, stop_reason, losses = time.time(), 0, 0.0, "completed", []
    model.train()
    epoch = 0
    for epoch in range(1, int(epochs) + 1):
        order = torch.randperm(len(features), generator=gen)
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            out = model(features=features[idx])
            parts = model.loss(out, masks[idx], labels[idx])
            opt.zero_grad()
            parts["loss"].backward()
            opt.step()
            step += 1
            values = {k: float(v.detach()) for k, v in parts.items()}
            losses.append(values["loss"])
            if on_step:
                on_step(step, epoch - 1 + (i + len(idx)) / len(order), values)
            now = time.time()
            if time_budget_s and now - started > float(time_budget_s):
                stop_reason = f"time budget of {float(time_budget_s):.0f} s reached"
            elif should_stop and now - last_check >= 2.0:
                last_check = now
                if should_stop():
                    stop_reason = "stopped by the user"
            if stop_reason != "completed":
                break
        if stop_reason != "completed":
            break
    model.eval()
    return {"steps": step, "epochs_run": epoch, "stop_reason": stop_reason,
            "train_loss": float(np.mean(losses[-10:])) if losses else None,
            "train_seconds": time.time() - started}


@torch.no_grad()
def predict(model: MVFA, features: torch.Tensor,
            batch_size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(scores [N], anomaly maps [N, S, S]) at the model's image size."""
    scores, maps = [], []
    for i in range(0, len(features), batch_size):
        out = model(features=features[i:i + batch_size])
        scores.append(out["score"])
        maps.append(out["anomaly_map"])
    return torch.cat(scores).numpy(), torch.cat(maps).numpy()


def aurocs(scores: np.ndarray, maps: np.ndarray, masks: np.ndarray, labels: np.ndarray,
           max_pixels: int = 2_000_000, seed: int = 0) -> dict[str, float | None]:
    from sklearn.metrics import roc_auc_score
    res: dict[str, float | None] = {"image_auroc": None, "pixel_auroc": None}
    if len(set(labels.tolist())) == 2:
        res["image_auroc"] = float(roc_auc_score(labels, scores))
    y, s = masks.reshape(-1) > 0.5, maps.reshape(-1)
    if y.size > max_pixels:
        keep = np.random.default_rng(seed).choice(y.size, max_pixels, replace=False)
        y, s = y[keep], s[keep]
    if 0 < y.sum() < y.size:
        res["pixel_auroc"] = float(roc_auc_score(y, s))
    return res


def support_indices(labels: torch.Tensor, shots: int, seed: int) -> list[int]:
    normal = [i for i, v in enumerate(labels.tolist()) if v == 0]
    random.Random(seed).shuffle(normal)
    return sorted(normal[:shots])


def build_model(cfg: dict) -> MVFA:
    clip = load_clip(cfg["clip_path"])
    kwargs = dict(levels=tuple(cfg["levels"]) if cfg.get("levels") else None,
                  residual_ratio=float(cfg.get("residual_ratio", 0.5)),
                  top_k=float(cfg.get("top_k", 0.02)), det_weight=float(cfg.get("det_weight", 0.0)),
                  few_shot_weight=float(cfg.get("few_shot_weight", 0.5)))
    if cfg.get("text_embeddings_path"):
        p = Path(cfg["text_embeddings_path"])
        emb = np.load(p) if p.suffix == ".npy" else torch.load(p, map_location="cpu")
        return MVFA(clip, text_embeddings=torch.as_tensor(emb), **kwargs)
    return MVFA(clip, tokenizer=load_tokenizer(cfg.get("tokenizer_path") or cfg["clip_path"]),
                prompts=prompt_ensembles(cfg.get("object_name", "chest")), **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    cfg = json.loads(Path(parser.parse_args(argv).config).read_text())
    started = time.time()
    seed = int(cfg.get("seed", 42))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    datapath, out = Path(cfg["datapath"]), Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    channel = RunChannel.from_config(cfg)

    model = build_model(cfg)
    size = model.image_size
    train_items = json.loads((datapath / "train.json").read_text())
    test_items = json.loads((datapath / "test.json").read_text())
    train_px, train_masks, train_labels = load_items(train_items, size)
    train_feats = backbone_cache(model, train_px)
    channel.metrics(0, 0.0, {"num_train": len(train_items)})

    remaining = None
    if cfg.get("time_budget_s"):
        remaining = max(1.0, float(cfg["time_budget_s"]) - (time.time() - started))
    report = fit(model, train_feats, train_masks, train_labels, epochs=int(cfg.get("epochs", 20)),
                 learning_rate=float(cfg.get("learning_rate", 1e-3)),
                 batch_size=int(cfg.get("batch_size", 8)), seed=seed, time_budget_s=remaining,
                 should_stop=channel.stop_requested, on_step=channel.metrics)

    model_dir = out / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.adapter_state_dict().items()},
              str(model_dir / "adapters.safetensors"))
    torch.save(model.text_embeddings, model_dir / "text_embeddings.pt")
    shots = int(cfg.get("shots", 0))
    support = support_indices(train_labels, shots, seed) if shots > 0 else []
    if support:
        model.build_memory(features=train_feats[support])
        torch.save([m for m in model.memory], model_dir / "memory_bank.pt")
    (model_dir / "mvfa_config.json").write_text(json.dumps({
        "clip_path": str(cfg["clip_path"]), "levels": list(model.levels),
        "residual_ratio": model.residual_ratio, "logit_scale": model.logit_scale,
        "shots": len(support), "support": [train_items[i]["image_path"] for i in support]},
        indent=2))

    test_px, test_masks, test_labels = load_items(test_items, size)
    scores, maps = predict(model, backbone_cache(model, test_px))
    pred_dir = out / "predictions"
    pred_dir.mkdir(parents=True, exist_ok=True)
    rows, gt_masks, full_maps = [], [], []
    for i, (item, score, amap) in enumerate(zip(test_items, scores, maps)):
        gt = read_array(item["label_path"])
        if gt.ndim == 3:
            gt = gt.max(-1)
        full = torch.nn.functional.interpolate(torch.as_tensor(amap)[None, None], size=gt.shape,
                                               mode="bilinear", align_corners=False)[0, 0].numpy()
        stem = Path(str(item["label_path"])).name.split(".")[0]
        target = pred_dir / f"{i:05d}_{stem}.npy"
        np.save(target, full.astype(np.float32))
        rows.append({"image_path": item["image_path"], "label_path": item["label_path"],
                     "score": float(score), "prediction_path": str(target)})
        gt_masks.append((gt > 0).reshape(-1))
        full_maps.append(full.reshape(-1))
    (out / "predictions.json").write_text(json.dumps(rows, indent=1))
    metrics = aurocs(scores, np.concatenate(full_maps), np.concatenate(gt_masks),
                     test_labels.numpy(), int(cfg.get("max_pixels_auroc", 2_000_000)), seed)
    channel.metrics(report["steps"], float(report["epochs_run"]),
                    {f"test_{k}": v for k, v in metrics.items() if v is not None})
    summary = {
        "model_path": str(model_dir / "adapters.safetensors"), "network": "mvfa",
        "clip_path": str(cfg["clip_path"]), "levels": list(model.levels),
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "num_trainable_parameters": sum(p.numel() for p in model.parameters()
                                        if p.requires_grad),
        "epochs_run": report["epochs_run"], "global_step": report["steps"],
        "train_loss": report["train_loss"], "stop_reason": report["stop_reason"],
        "best_val_metric": None, "seconds": time.time() - started,
        "train_seconds": report["train_seconds"], "device": "cpu", "seed": seed,
        "shots": len(support), "mode": "few-shot" if support else "zero-shot",
        "num_train": len(train_items), "num_test": len(test_items),
        "image_auroc": metrics["image_auroc"], "pixel_auroc": metrics["pixel_auroc"],
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
