"""Segmentation training entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.segmentation.train --config <job>/train_config.json

Reads the job's ``Datapath/dataloader.py``, holds out whole training cases for validation
(grouped by patient when split.json knows the groups), trains a MONAI network on random patches
under the Transformers ``Trainer`` (loss, learning rate and each epoch's validation Dice —
sliding-window inference on whole held-out images — reported through the run channel; stop
request, time budget and early stopping honoured; best checkpoint kept; ``resume`` continues from
the newest checkpoint), then predicts every test case, maps it back to the mask's original
geometry and writes ``Logout/predictions/``, ``Logout/predictions.json``, ``Logout/model/`` and
``Logout/train_summary.json``. Test metrics come from core.evaluation.segmentation afterwards.

Config keys: job_id, metrics_path, stop_path, datapath, dataloader, output_dir, network, epochs,
batch_size, learning_rate, weight_decay, seed, time_budget_s, early_stopping_patience, device
(auto | cpu | cuda), resume, val_fraction, roi_size (overrides the dataloader's ROI_SIZE),
pretrained_path, threads, num_workers, export, logging_steps, warmup_steps.
"""
from __future__ import annotations

import json
import random
import sys
import time

import torch
from transformers import Trainer, TrainingArguments

from ml_templates.common.accelerate import device_options
from ml_templates.common.callbacks import ChannelCallback, SelectionCallback
from ml_templates.common.export import export_model
from ml_templates.common.entry import start_run
from ml_templates.segmentation.inference import predict_dataset, selection_score, validation_dice
from ml_templates.segmentation.model import DEFAULT_CPU, DOWNSAMPLING, SegmentationModel


def case_key(item: dict) -> str:
    path = item["image_path"]
    return str(path[0] if isinstance(path, (list, tuple)) else path)


def validation_items(items: list, groups: dict, fraction: float, seed: int,
                     floor: int = 0) -> tuple[list, list]:
    """Hold out ~fraction of the patients (groups of cases), at least one when there are two,
    at least ``floor`` when that leaves three quarters for training."""
    by_group: dict[str, list] = {}
    for item in items:
        by_group.setdefault(str(groups.get(case_key(item), case_key(item))), []).append(item)
    names = sorted(by_group)
    if len(names) < 2:
        return items, []
    random.Random(seed).shuffle(names)
    n_val = min(len(names) - 1, max(1, round(len(names) * fraction),
                                    min(floor, len(names) // 4)))
    val = [it for g in names[:n_val] for it in by_group[g]]
    train = [it for g in names[n_val:] for it in by_group[g]]
    return train, val


def collate(batch: list[dict]) -> dict:
    return {"pixel_values": torch.stack([torch.as_tensor(b["pixel_values"]) for b in batch]),
            "labels": torch.stack([torch.as_tensor(b["labels"]) for b in batch])}


class SegmentationTrainer(Trainer):
    """Evaluation = sliding-window Dice and loss on whole validation images (not the patch loss);
    ``eval_selection`` ranks epochs by Dice with the loss as tie-break."""

    def __init__(self, *args, roi_size=None, num_classes: int = 2, **kwargs):
        super().__init__(*args, **kwargs)
        self.roi_size, self.num_classes = list(roi_size), num_classes

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        started = time.time()
        result = validation_dice(self.model, dataset, self.roi_size, self.num_classes,
                                 self.args.device)
        metrics = {f"{metric_key_prefix}_dice": result["dice"],
                   f"{metric_key_prefix}_loss": result["loss"],
                   f"{metric_key_prefix}_selection": selection_score(result["dice"],
                                                                      result["loss"]),
                   **{f"{metric_key_prefix}_dice_class{k + 1}": v
                      for k, v in enumerate(result["per_class"])},
                   f"{metric_key_prefix}_runtime": time.time() - started}
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control,
                                                         metrics)
        return metrics


class Probabilities(torch.nn.Module):
    """The exported form: a patch of ROI size in, class probabilities out (run it with
    sliding-window inference on whole images)."""

    def __init__(self, model: SegmentationModel):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.model(pixel_values=pixel_values)["logits"], dim=1)


def check_roi(roi: list[int], network: str, spatial_dims: int) -> None:
    factor = DOWNSAMPLING.get(network, 1)
    if len(roi) != spatial_dims or any(s % factor for s in roi):
        raise ValueError(f"roi_size {roi} must have {spatial_dims} sides, each a multiple of "
                         f"{factor} for {network}")


def main(argv: list[str] | None = None) -> int:
    run = start_run(argv, __doc__, determinism=True)
    cfg, datapath, out, seed, started = run.cfg, run.datapath, run.out, run.seed, run.started
    dl = run.dataloader()
    if cfg.get("roi_size"):
        dl.ROI_SIZE = [int(s) for s in cfg["roi_size"]]
    roi, num_classes = list(dl.ROI_SIZE), int(dl.NUM_CLASSES)
    network = cfg.get("network") or DEFAULT_CPU
    check_roi(roi, network, int(dl.SPATIAL_DIMS))
    index = json.loads((datapath / "train.json").read_text())
    split_path = datapath / "split.json"
    groups = json.loads(split_path.read_text()).get("groups", {}) if split_path.exists() else {}
    train_items, val_items = validation_items(index, groups, float(cfg.get("val_fraction", 0.15)),
                                              seed, int(cfg.get("val_floor_cases", 0)))
    train_ds = dl.SegmentationDataset("train", augment=True, datapath=str(datapath),
                                      items=train_items)
    val_ds = dl.SegmentationDataset("train", augment=False, datapath=str(datapath),
                                    items=val_items or train_items)
    test_ds = dl.SegmentationDataset("test", augment=False, datapath=str(datapath))
    train_ds.transforms.set_random_state(seed=seed)  # patches and augmentation replay the seed

    model = SegmentationModel(network, int(dl.SPATIAL_DIMS), int(dl.IN_CHANNELS), num_classes,
                              pretrained_path=cfg.get("pretrained_path"))
    use_cpu = cfg.get("device", "auto") == "cpu" or not torch.cuda.is_available()
    batch_size = int(cfg.get("batch_size", 4))
    epochs = float(cfg.get("epochs", 20))
    accel = device_options(cfg, use_cpu)  # mixed precision and cuDNN autotuning on a GPU
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=epochs,
        per_device_train_batch_size=batch_size, per_device_eval_batch_size=1,
        bf16=accel["bf16"], fp16=accel["fp16"],
        learning_rate=float(cfg.get("learning_rate", 1e-3)),
        weight_decay=float(cfg.get("weight_decay", 1e-5)), lr_scheduler_type="cosine",
        warmup_steps=int(cfg.get("warmup_steps", 5)), eval_strategy="epoch",
        save_strategy="epoch", save_total_limit=2, load_best_model_at_end=True,
        metric_for_best_model="selection", greater_is_better=True,
        logging_steps=int(cfg.get("logging_steps", 5)), report_to="none", use_cpu=use_cpu,
        dataloader_num_workers=int(cfg.get("num_workers", 0)), seed=seed, data_seed=seed,
        remove_unused_columns=False, disable_tqdm=True)
    channel_cb = ChannelCallback(cfg)
    selection = SelectionCallback("selection", True, cfg.get("early_stopping_patience"),
                                  min(int(cfg.get("min_epochs", 5)), int(epochs)),
                                  description="validation Dice (loss breaks ties)")
    callbacks = [channel_cb, selection]
    trainer = SegmentationTrainer(model=model, args=args, train_dataset=train_ds,
                                  eval_dataset=val_ds, data_collator=collate, callbacks=callbacks,
                                  roi_size=roi, num_classes=num_classes)
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=bool(cfg.get("resume")) and bool(checkpoints))

    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    trained_s = time.time() - started
    model.eval()
    rows = predict_dataset(model, test_ds, roi, trainer.args.device, out / "predictions")
    (out / "predictions.json").write_text(json.dumps(rows, indent=1))
    # a real patch as the example: a constant input is ill-conditioned under instance norm
    example = torch.as_tensor(train_ds[0]["pixel_values"])[None]
    labels = list(index[0].get("labels", [])) if index else []
    exports = (export_model(Probabilities(model), example, out / "export",
                            output_name="probabilities", metadata={
                                "task": "segmentation", "class_names": ["background", *labels],
                                "input_size": roi, "spatial_dims": int(dl.SPATIAL_DIMS),
                                "spacing_mm": list(dl.PIXDIM) if dl.PIXDIM else None,
                                "in_channels": int(dl.IN_CHANNELS),
                                "intensity": getattr(dl, "INTENSITY", None),
                                "inference": "sliding window of input_size over the whole "
                                             "image" + (", resampled to spacing_mm"
                                                        if dl.PIXDIM else "")})
               if cfg.get("export", True) else {})
    summary = {
        "model_path": str(model_dir / "model.safetensors"), "network": network,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "epochs_run": trainer.state.epoch, "global_step": trainer.state.global_step,
        "best_val_metric": trainer.state.best_metric, "val_metric": "selection",
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "train_loss": result.training_loss,
        "stop_reason": selection.stop_reason(channel_cb.stop_reason), **selection.summary(),
        "seconds": time.time() - started, "train_seconds": trained_s,
        "train_samples_per_second": result.metrics.get("train_samples_per_second"),
        "device": str(trainer.args.device), "precision": accel["precision"], "seed": seed, "num_train": len(train_items),
        "num_val": len(val_items), "num_test": len(test_ds), "roi_size": roi,
        "spatial_dims": int(dl.SPATIAL_DIMS), "pixdim": dl.PIXDIM,
        "in_channels": int(dl.IN_CHANNELS), "num_classes": num_classes,
        "labels": labels, "exports": exports,
        "validation_on_training_cases": not val_items,
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
