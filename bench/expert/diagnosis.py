"""Expert diagnosis baseline: plain MONAI + PyTorch, written as an ML engineer would, trained on
the system job's own split, network family, image size and epoch budget.

    python -m bench.expert.diagnosis --job <job workspace> --out <folder>

* data: the job's ``Datapath/train.json`` / ``test.json`` / ``label_dict.json``; validation is
  held out from train by patient groups (``split.json``), stratified by class;
* transforms: deterministic steps (load, channel first, RAS for volumes, intensity as the data's
  fingerprint says, resize to the job's image size) cached once in memory by ``CacheDataset``;
  random affine, flips (volumes) and noise on top, every epoch;
* training: AdamW, linear warm-up then cosine decay, class-weighted cross-entropy, the weights of
  the epoch with the lowest validation loss kept;
* output: ``predictions.json`` (test probabilities, the templates' format) and
  ``val_predictions.json`` (the validation probabilities the evaluator fits its temperature and
  threshold on), scored by the system's evaluator (``core.evaluation``); the threshold is also
  chosen here on validation with ``choose_threshold``; ``expert_result.json`` holds it all.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch
from monai.data import CacheDataset, DataLoader
from monai.networks import nets
from monai.transforms import (Compose, EnsureChannelFirstd, EnsureTyped, LoadImaged,
                              NormalizeIntensityd, Orientationd, RandAffined, RandFlipd,
                              RandGaussianNoised, Resized, ScaleIntensityd, ScaleIntensityRanged)
from monai.utils import set_determinism
from sklearn.metrics import roc_auc_score

from bench.expert.common import (Clock, ExpertError, check_split, cosine_schedule,
                                 hold_out_validation, load_job, score, write_result)
from core.evaluation.operating_point import choose_threshold, decision_rates, positive_index

# the system's diagnosis network families, built from MONAI by the same names
NETWORKS = {
    "densenet_small": lambda sd, ic, oc: nets.DenseNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, init_features=16, growth_rate=12,
        block_config=(3, 6, 6), dropout_prob=0.1),
    "densenet121": lambda sd, ic, oc: nets.DenseNet121(spatial_dims=sd, in_channels=ic,
                                                       out_channels=oc),
    "resnet18": lambda sd, ic, oc: nets.resnet18(spatial_dims=sd, n_input_channels=ic,
                                                 num_classes=oc),
    "resnet50": lambda sd, ic, oc: nets.resnet50(spatial_dims=sd, n_input_channels=ic,
                                                 num_classes=oc),
    "efficientnet-b0": lambda sd, ic, oc: nets.EfficientNetBN(
        "efficientnet-b0", pretrained=False, spatial_dims=sd, in_channels=ic, num_classes=oc),
}


def intensity(loader: dict):
    kind = (loader.get("INTENSITY") or {}).get("kind", "minmax")
    if kind == "ct":
        low, high = loader["INTENSITY"].get("window", [-1000, 1000])
        return ScaleIntensityRanged("image", a_min=low, a_max=high, b_min=0.0, b_max=1.0,
                                    clip=True)
    if kind == "mri":
        return NormalizeIntensityd("image", nonzero=True, channel_wise=True)
    return ScaleIntensityd("image", minv=0.0, maxv=1.0)


class ToChannels:
    """RGB(A) to gray (or gray repeated) so the image has the network's input channels."""

    def __init__(self, channels: int):
        self.channels = channels

    def __call__(self, d: dict) -> dict:
        image = d["image"]
        if image.shape[0] != self.channels:
            image = image[:3].mean(0, keepdim=True).repeat(self.channels,
                                                           *[1] * (image.ndim - 1))
        return {**d, "image": image}


def transforms(size: list[int], channels: int, loader: dict, augment: bool) -> Compose:
    dims = len(size)
    steps = [LoadImaged("image", image_only=True), EnsureChannelFirstd("image"),
             ToChannels(channels)]
    if dims == 3:
        steps.append(Orientationd("image", axcodes="RAS"))
    steps += [intensity(loader), Resized("image", spatial_size=size)]
    if augment:  # the cache stops at the first random step
        steps += [RandAffined("image", prob=0.5, rotate_range=[0.1] * (1 if dims == 2 else 3),
                              scale_range=[0.1] * dims, translate_range=[s * 0.05 for s in size],
                              padding_mode="zeros")]
        if dims == 3:
            steps.append(RandFlipd("image", prob=0.5, spatial_axis=0))  # left-right
        steps.append(RandGaussianNoised("image", prob=0.3, std=0.02))
    steps.append(EnsureTyped(["image", "label"], track_meta=False))
    return Compose(steps)


def network_size(size: list[int], first_image: str, channels: int, loader: dict) -> list[int]:
    """The job's image size in MONAI's axis order: the system reads volumes slices-first, so a
    size that matches the native shape reversed is reversed."""
    if len(size) != 3:
        return list(size)
    native = list(transforms([1, 1, 1], channels, loader, False).transforms[0](
        {"image": first_image})["image"].shape[-3:])
    if sorted(native) != sorted(size) or native == list(size):
        return list(size)
    return list(reversed(size)) if list(reversed(native)) == list(size) else list(size)


@torch.no_grad()
def predict(model: torch.nn.Module, loader) -> tuple[np.ndarray, np.ndarray, float]:
    """Softmax probabilities, labels and the mean cross-entropy over a loader."""
    model.eval()
    probs, labels, loss, n = [], [], 0.0, 0
    for batch in loader:
        logits = model(batch["image"])
        loss += float(torch.nn.functional.cross_entropy(logits, batch["label"],
                                                        reduction="sum"))
        n += len(batch["label"])
        probs.append(torch.softmax(logits, 1).numpy())
        labels.append(batch["label"].numpy())
    return np.concatenate(probs), np.concatenate(labels), loss / max(n, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="the system job's workspace folder")
    parser.add_argument("--out", required=True, help="where the expert writes its files")
    parser.add_argument("--epochs", type=int, help="default: the job's epochs")
    args = parser.parse_args(argv)
    clock = Clock()
    job = load_job(args.job)
    if job.template != "diagnosis":
        raise ExpertError(f"job {args.job} trained the {job.template!r} template, not diagnosis")
    if any(len(v) != 1 for v in list(job.train.values()) + list(job.test.values())):
        raise ExpertError("this expert baseline covers single-label diagnosis only")
    cfg, out = job.config, Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    set_determinism(seed=job.seed)
    names = sorted(job.label_dict, key=job.label_dict.get)
    channels = int(cfg.get("in_channels", 1))
    keys = sorted(job.train)
    labels = [job.label_dict[job.train[k][0]] for k in keys]
    tr, va = hold_out_validation(keys, job.groups, labels, seed=job.seed)
    train_keys, val_keys, test_keys = [keys[i] for i in tr], [keys[i] for i in va], sorted(job.test)
    check_split(train_keys, val_keys, test_keys, job.groups)
    size = network_size([int(s) for s in cfg["image_size"]], train_keys[0], channels, job.loader)
    records = {name: [{"image": k, "label": job.label_dict[index[k][0]], "path": k} for k in ks]
               for name, ks, index in (("train", train_keys, job.train),
                                       ("val", val_keys, job.train),
                                       ("test", test_keys, job.test))}
    batch = int(cfg.get("batch_size", 16))
    with clock("cache"):
        data = {name: CacheDataset(rows, transforms(size, channels, job.loader, name == "train"),
                                   cache_rate=1.0, num_workers=None, progress=False)
                for name, rows in records.items()}
    loaders = {"train": DataLoader(data["train"], batch_size=batch, shuffle=True,
                                   num_workers=0, drop_last=len(tr) > batch)}
    for name in ("val", "test"):
        loaders[name] = DataLoader(data[name], batch_size=batch * 2, num_workers=0)

    network = cfg["network"]
    if network not in NETWORKS:
        raise ExpertError(f"no expert recipe for network {network!r}; known: {sorted(NETWORKS)}")
    model = NETWORKS[network](len(size), channels, len(names))
    counts = np.bincount([labels[i] for i in tr], minlength=len(names))
    weights = torch.tensor(len(tr) / (len(names) * np.maximum(counts, 1)), dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    epochs = int(args.epochs or cfg.get("epochs", 10))
    steps = epochs * len(loaders["train"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg.get("learning_rate", 1e-3)),
                                  weight_decay=1e-2)
    scheduler = cosine_schedule(optimizer, steps, warmup_steps=steps // 20)
    best, history = (float("inf"), None, 0), []
    with clock("train"):
        for epoch in range(1, epochs + 1):
            model.train()
            running = 0.0
            for batch_data in loaders["train"]:
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(batch_data["image"]), batch_data["label"])
                loss.backward()
                optimizer.step()
                scheduler.step()
                running += loss.item() * len(batch_data["label"])
            val_probs, val_y, val_loss = predict(model, loaders["val"])
            auc = roc_auc_score(val_y, val_probs[:, 1]) if len(names) == 2 and \
                len(set(val_y)) == 2 else float("nan")
            history.append({"epoch": epoch, "train_loss": running / len(tr),
                            "val_loss": val_loss, "val_auc": auc})
            print(json.dumps({"event": "epoch", **history[-1]}), flush=True)
            if val_loss < best[0]:
                best = (val_loss, copy.deepcopy(model.state_dict()), epoch)
    train_samples = len(tr) * epochs
    model.load_state_dict(best[1])
    with clock("predict"):
        val_probs, val_y, _ = predict(model, loaders["val"])
        test_probs, test_y, _ = predict(model, loaders["test"])
    (out / "predictions.json").write_text(json.dumps(
        {k: [float(x) for x in p] for k, p in zip(test_keys, test_probs)}))
    (out / "val_predictions.json").write_text(json.dumps(
        {k: [float(x) for x in p] for k, p in zip(val_keys, val_probs)}))
    with clock("evaluate"):
        report = score("diagnosis", job.datapath, out / "predictions.json")
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    point = None
    if len(names) == 2:
        pos = positive_index(names)
        threshold = choose_threshold(val_y == pos, val_probs[:, pos])
        point = {"positive_class": names[pos], "threshold": threshold, "source": "validation",
                 "test": decision_rates(test_y == pos, test_probs[:, pos], threshold)}
    result = {"pipeline": "expert", "template": "diagnosis", "network": network,
              "image_size": size, "epochs": epochs, "best_epoch": best[2],
              "num_train": len(tr), "num_val": len(va), "num_test": len(test_keys),
              "train_samples_per_second": train_samples / clock.seconds["train"],
              "seconds": clock.total(), "sections": clock.seconds, "history": history,
              "metrics": report["metrics"], "report": str(out / "report.json"),
              "operating_point": point}
    write_result(out, result)
    print(json.dumps({"event": "done", **{k: result[k] for k in (
        "metrics", "best_epoch", "train_samples_per_second", "seconds")}}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
