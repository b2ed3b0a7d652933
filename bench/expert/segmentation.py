"""Expert segmentation baseline: plain MONAI + PyTorch (the MONAI tutorials' recipe, written
carefully), trained on the system job's own split, network family, spacing, patch size and
epoch budget.

    python -m bench.expert.segmentation --job <job workspace> --out <folder>

* data: the job's ``Datapath/train.json`` / ``test.json``; whole patients of train held out for
  validation (``split.json`` groups);
* deterministic steps cached once by ``CacheDataset``: load, channel first, RAS, resample to the
  job's spacing, intensity as the data's fingerprint says, crop to the body;
* every epoch, per training case, four patches of the job's ROI sampled by class (small
  structures such as tumours as often as the organ and the background), flips, 90-degree
  rotations in-plane, intensity jitter;
* AdamW, warm-up then cosine decay, DiceCE loss; each epoch the validation loss (DiceCE of
  sliding-window logits over whole images) and Dice; the weights of the lowest validation loss
  kept;
* test cases predicted by sliding window, mapped back to the original grid with ``Invertd`` and
  saved as NIfTI; ``predictions.json`` lists them as the templates do and the system's evaluator
  scores them.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch
from monai.data import CacheDataset, DataLoader, decollate_batch
from monai.inferers import sliding_window_inference
from monai.losses import DiceCELoss
from monai.metrics import DiceMetric
from monai.networks import nets
from monai.transforms import (AsDiscrete, AsDiscreted, Compose, CropForegroundd,
                              EnsureChannelFirstd, EnsureTyped, Invertd, LoadImaged,
                              NormalizeIntensityd, Orientationd, RandCropByLabelClassesd,
                              RandFlipd, RandRotate90d, RandScaleIntensityd, RandShiftIntensityd,
                              SaveImaged, ScaleIntensityd, ScaleIntensityRanged, Spacingd,
                              SpatialPadd)
from monai.utils import set_determinism

from bench.expert.common import (Clock, ExpertError, check_split, cosine_schedule,
                                 hold_out_validation, load_job, score, write_result)

NETWORKS = {  # the system's segmentation network families, built from MONAI by the same names
    "unet_small": lambda sd, ic, oc: nets.UNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, channels=(8, 16, 32, 64),
        strides=(2, 2, 2), num_res_units=1),
    "unet": lambda sd, ic, oc: nets.UNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, channels=(32, 64, 128, 256, 320),
        strides=(2, 2, 2, 2), num_res_units=2, dropout=0.1),
    "segresnet": lambda sd, ic, oc: nets.SegResNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, init_filters=16,
        blocks_down=(1, 2, 2, 4), blocks_up=(1, 1, 1), dropout_prob=0.1),
}
PATCHES_PER_CASE = 4


def intensity(loader: dict):
    kind = (loader.get("INTENSITY") or {}).get("kind", "minmax")
    if kind == "ct":
        low, high = loader["INTENSITY"].get("window", [-160, 240])
        return ScaleIntensityRanged("image", a_min=low, a_max=high, b_min=0.0, b_max=1.0,
                                    clip=True)
    if kind == "mri":
        return NormalizeIntensityd("image", nonzero=True, channel_wise=True)
    return ScaleIntensityd("image", minv=0.0, maxv=1.0, channel_wise=True)


def preprocessing(loader: dict, keys: list[str]) -> list:
    modes = ["bilinear", "nearest"][:len(keys)]
    steps = [LoadImaged(keys, image_only=True), EnsureChannelFirstd(keys)]
    if int(loader.get("SPATIAL_DIMS", 3)) == 3:
        steps.append(Orientationd(keys, axcodes="RAS"))
    if loader.get("PIXDIM"):
        steps.append(Spacingd(keys, pixdim=loader["PIXDIM"], mode=modes))
    return steps + [intensity(loader),
                    CropForegroundd(keys, source_key="image", margin=2, allow_smaller=True)]


def training_steps(roi: list[int], num_classes: int) -> list:
    keys = ["image", "label"]
    return [SpatialPadd(keys, spatial_size=roi),
            RandCropByLabelClassesd(keys, label_key="label", spatial_size=roi,
                                    num_classes=num_classes, ratios=[1.0] * num_classes,
                                    num_samples=PATCHES_PER_CASE, warn=False),
            *[RandFlipd(keys, prob=0.2, spatial_axis=a) for a in range(len(roi))],
            # in-plane quarter turns only where they keep the patch's shape (a batch stacks them)
            *([RandRotate90d(keys, prob=0.2, max_k=3, spatial_axes=(0, 1))]
              if roi[0] == roi[1] else []),
            RandScaleIntensityd("image", factors=0.05, prob=0.5),
            RandShiftIntensityd("image", offsets=0.05, prob=0.5),
            EnsureTyped(keys, track_meta=False)]


def records(items: list[dict]) -> list[dict]:
    for it in items:
        if isinstance(it["image_path"], (list, tuple)) or it.get("label_values"):
            raise ExpertError("this expert baseline reads one image file and a 0..N mask per case")
    return [{"image": it["image_path"], "label": it["label_path"]} for it in items]


def saved_name(image_path: str) -> str:
    """The file SaveImaged writes for an image (its name, no postfix, as NIfTI)."""
    name = Path(image_path).name
    for ext in (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd"):
        name = name[:-len(ext)] if name.endswith(ext) else name
    return name + ".nii.gz"


def evaluate_whole(model, loader, roi, num_classes, loss_fn) -> tuple[float, float]:
    """Mean DiceCE loss of sliding-window logits and mean foreground Dice over whole images."""
    model.eval()
    dice = DiceMetric(include_background=False, reduction="mean")
    onehot = AsDiscrete(to_onehot=num_classes)
    losses = []
    with torch.no_grad():
        for batch in loader:
            logits = sliding_window_inference(batch["image"], roi, 4, model, overlap=0.25,
                                              mode="gaussian")
            losses.append(float(loss_fn(logits, batch["label"])))
            pred = [onehot(p.argmax(0, keepdim=True)) for p in decollate_batch(logits)]
            dice(y_pred=pred, y=[onehot(y) for y in decollate_batch(batch["label"])])
    return sum(losses) / max(len(losses), 1), float(dice.aggregate())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="the system job's workspace folder")
    parser.add_argument("--out", required=True, help="where the expert writes its files")
    parser.add_argument("--epochs", type=int, help="default: the job's epochs")
    args = parser.parse_args(argv)
    clock = Clock()
    job = load_job(args.job)
    if job.template != "segmentation" or job.config.get("engine") == "nnunet":
        raise ExpertError(f"job {args.job} is not a MONAI segmentation job")
    cfg, loader, out = job.config, job.loader, Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    set_determinism(seed=job.seed)
    roi = [int(s) for s in (cfg.get("roi_size") or loader["ROI_SIZE"])]
    num_classes = int(loader.get("NUM_CLASSES") or len(job.train[0]["labels"]) + 1)
    channels = int(loader.get("IN_CHANNELS", 1))
    tr, va = hold_out_validation([it["image_path"] for it in job.train], job.groups,
                                 seed=job.seed)
    train_items, val_items = [job.train[i] for i in tr], [job.train[i] for i in va]
    check_split(train_items, val_items, job.test, job.groups)
    keys = ["image", "label"]
    pre = preprocessing(loader, keys)
    with clock("cache"):
        train_ds = CacheDataset(records(train_items),
                                Compose(pre + training_steps(roi, num_classes)), cache_rate=1.0,
                                progress=False)
        val_ds = CacheDataset(records(val_items), Compose(pre + [EnsureTyped(keys)]),
                              cache_rate=1.0, progress=False)
    cases_per_step = max(1, int(cfg.get("batch_size", 4)) // PATCHES_PER_CASE)
    train_loader = DataLoader(train_ds, batch_size=cases_per_step, shuffle=True, num_workers=0)
    val_loader = DataLoader(val_ds, batch_size=1, num_workers=0)

    network = cfg.get("network") or "unet_small"
    if network not in NETWORKS:
        raise ExpertError(f"no expert recipe for network {network!r}; known: {sorted(NETWORKS)}")
    model = NETWORKS[network](len(roi), channels, num_classes)
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True, batch=True)
    epochs = int(args.epochs or cfg.get("epochs", 20))
    steps = epochs * len(train_loader)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg.get("learning_rate", 3e-3)),
                                  weight_decay=1e-5)
    scheduler = cosine_schedule(optimizer, steps, warmup_steps=steps // 20)
    best, history, patches = (float("inf"), None, 0), [], 0
    with clock("train"):
        for epoch in range(1, epochs + 1):
            model.train()
            running = []
            for batch in train_loader:
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(batch["image"]), batch["label"])
                loss.backward()
                optimizer.step()
                scheduler.step()
                running.append(loss.item())
                patches += len(batch["image"])
            val_loss, val_dice = evaluate_whole(model, val_loader, roi, num_classes, loss_fn)
            history.append({"epoch": epoch, "train_loss": sum(running) / len(running),
                            "val_loss": val_loss, "val_dice": val_dice})
            print(json.dumps({"event": "epoch", **history[-1]}), flush=True)
            if val_loss < best[0]:
                best = (val_loss, copy.deepcopy(model.state_dict()), epoch)
    model.load_state_dict(best[1])
    model.eval()

    pred_dir = out / "predictions"
    test_pre = Compose(preprocessing(loader, ["image"]) + [EnsureTyped("image")])
    post = Compose([Invertd("pred", transform=test_pre, orig_keys="image", nearest_interp=False),
                    AsDiscreted("pred", argmax=True),
                    SaveImaged("pred", output_dir=str(pred_dir), output_postfix="",
                               separate_folder=False, resample=False, output_dtype="uint8",
                               print_log=False)])
    rows = []
    with clock("predict"), torch.no_grad():
        test_ds = CacheDataset([{"image": it["image_path"]} for it in job.test], test_pre,
                               cache_rate=1.0, progress=False)
        for item, d in zip(job.test, DataLoader(test_ds, batch_size=1, num_workers=0)):
            d["pred"] = sliding_window_inference(d["image"], roi, 4, model, overlap=0.25,
                                                 mode="gaussian").softmax(1)
            post(decollate_batch(d)[0])
            rows.append({"image_path": item["image_path"], "label_path": item["label_path"],
                         "prediction_path": str(pred_dir / saved_name(item["image_path"]))})
    (out / "predictions.json").write_text(json.dumps(rows, indent=1))
    with clock("evaluate"):
        report = score("segmentation", job.datapath, out / "predictions.json")
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    result = {"pipeline": "expert", "template": "segmentation", "network": network,
              "roi_size": roi, "epochs": epochs, "best_epoch": best[2],
              "num_train": len(train_items), "num_val": len(val_items), "num_test": len(job.test),
              "train_samples_per_second": patches / clock.seconds["train"],
              "seconds": clock.total(), "sections": clock.seconds, "history": history,
              "metrics": report["metrics"], "report": str(out / "report.json")}
    write_result(out, result)
    print(json.dumps({"event": "done", **{k: result[k] for k in (
        "metrics", "best_epoch", "train_samples_per_second", "seconds")}}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
