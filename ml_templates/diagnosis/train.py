"""Diagnosis training entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.diagnosis.train --config <job>/train_config.json

Several GPUs (or, for tests, several CPU processes with gloo): start it with
``torchrun --nproc_per_node N -m core.config.launch ml_templates.diagnosis.train --config ...``;
the Trainer runs DDP, rank 0 writes metrics, predictions and the summary.

Reads the job's ``Datapath/dataloader.py``, holds out a validation set from the training index
(grouped by patient when split.json knows the groups, stratified by class, with a floor so it can
tell models apart), trains a MONAI network under the Transformers ``Trainer`` (metrics reported
through the run channel, stop request and time budget honoured), keeps the checkpoint with the
lowest validation loss (a validation AUC saturates at 1.0 on an easy set long before the model
stops improving), stops early after ``early_stopping_patience`` epochs without improvement but
never before ``min_epochs``, and says which epoch it kept and why.

It then writes the kept model's probabilities for the validation images
(``Logout/val_predictions.json``) and the test images (``Logout/predictions.json``), both before
calibration, fits temperature scaling on the validation ones (the same function the evaluator
refits with) and saves the temperature in the model, so the saved weights, the exports and the
inference page give calibrated probabilities. Test metrics, thresholds and calibration are
computed by the system's evaluator afterwards, not here.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter

import numpy as np
import torch
from transformers import Trainer, TrainingArguments

from core.evaluation.calibration import fit_temperature
from core.evaluation.diagnosis import diagnosis_metrics, multi_label_metrics
from ml_templates.common.accelerate import channels_last, device_options
from ml_templates.common.callbacks import ChannelCallback, SelectionCallback
from ml_templates.common.entry import start_run
from ml_templates.common.export import export_model
from ml_templates.diagnosis.model import DiagnosisModel, Probabilities


def validation_size(n_groups: int, fraction: float, floor: int) -> int:
    """Validation groups of one class: ``fraction`` of them, raised to ``floor`` (so a handful of
    easy images cannot saturate the selection) but never above a quarter of the class, and at
    least one when the class has two or more groups."""
    if n_groups < 2:
        return 0
    return max(1, round(n_groups * fraction), min(floor, n_groups // 4))


def validation_items(items: list, groups: dict, fraction: float, seed: int,
                     floor_per_class: int = 0) -> tuple[list, list]:
    """Hold out ~fraction of the training groups (patients), stratified by label."""
    by_label: dict[str, list[str]] = {}
    group_label = {}
    for path, labels in items:
        group_label.setdefault(groups.get(path, path), labels[0] if labels else "")
    for group, label in sorted(group_label.items()):
        by_label.setdefault(label, []).append(group)
    rng = random.Random(seed)
    val_groups = set()
    for label, gs in sorted(by_label.items()):
        rng.shuffle(gs)
        val_groups.update(gs[:validation_size(len(gs), fraction, floor_per_class)])
    train = [it for it in items if groups.get(it[0], it[0]) not in val_groups]
    val = [it for it in items if groups.get(it[0], it[0]) in val_groups]
    return train, val


def class_weights(items: list, label_dict: dict, multi_label: bool) -> list[float]:
    """Counter imbalance: inverse-frequency weights (single-label) or negative/positive ratios
    as BCE ``pos_weight`` (multi-label), capped at 20."""
    n = len(label_dict)
    counts = Counter(label_dict[lbl] for _, labels in items for lbl in labels)
    if multi_label:
        return [min(20.0, (len(items) - counts.get(i, 0)) / max(counts.get(i, 0), 1))
                for i in range(n)]
    return [len(items) / (n * max(counts.get(i, 0), 1)) for i in range(n)]


def collate(batch: list[dict]) -> dict:
    return {"pixel_values": torch.stack([b["pixel_values"] for b in batch]),
            "labels": torch.stack([b["labels"] for b in batch])}


def predict(predictor: torch.nn.Module, dataset, device, batch_size: int = 32) -> dict:
    """``{image_path: [probability per label]}`` for every image of ``dataset``."""
    out = {}
    with torch.no_grad():
        for i in range(0, len(dataset), batch_size):
            batch = [dataset[j] for j in range(i, min(i + batch_size, len(dataset)))]
            pixels = torch.stack([b["pixel_values"] for b in batch]).to(device)
            for b, p in zip(batch, predictor(pixels).float().cpu().numpy()):
                out[b["image_path"]] = [float(x) for x in p]
    return out


def calibrate(model: DiagnosisModel, val_probs: dict, val_items: list, label_dict: dict,
              multi: bool) -> dict:
    """Fit the temperature on the validation probabilities and keep it in the model."""
    paths = sorted(val_probs)
    labels = dict(val_items)
    if multi:
        targets = np.zeros((len(paths), len(label_dict)), dtype=int)
        for row, path in enumerate(paths):
            for name in labels[path]:
                targets[row, label_dict[name]] = 1
    else:
        targets = np.array([label_dict[labels[p][0]] for p in paths], dtype=int)
    probs = np.array([val_probs[p] for p in paths], dtype=np.float64).reshape(len(paths), -1)
    fit = fit_temperature(probs, targets, multi) if paths else {
        "temperature": 1.0, "fitted": False, "note": "no validation images: not calibrated"}
    model.temperature.fill_(float(fit["temperature"]))
    return fit


def main(argv: list[str] | None = None) -> int:
    run = start_run(argv, __doc__)
    cfg, datapath, out, seed, started = run.cfg, run.datapath, run.out, run.seed, run.started
    dl = run.dataloader()
    label_dict = dl.load_label_dict(str(datapath))
    full_train = dl.DiagnosisDataset("train", datapath=str(datapath))
    split_info = json.loads((datapath / "split.json").read_text())
    train_items, val_items = validation_items(full_train.items, split_info.get("groups", {}),
                                              float(cfg.get("val_fraction", 0.15)), seed,
                                              int(cfg.get("val_floor_per_class", 0)))
    train_ds = dl.DiagnosisDataset("train", augment=True, datapath=str(datapath), items=train_items)
    val_ds = dl.DiagnosisDataset("train", augment=False, datapath=str(datapath), items=val_items)
    test_ds = dl.DiagnosisDataset("test", augment=False, datapath=str(datapath))

    n = len(label_dict)
    multi = bool(getattr(dl, "MULTI_LABEL", False))
    weights = class_weights(train_items, label_dict, multi)
    spatial_dims = len(cfg["image_size"])
    model = DiagnosisModel(cfg["network"], spatial_dims, int(cfg.get("in_channels", 1)), n,
                           multi_label=multi, class_weights=weights,
                           pretrained_path=cfg.get("pretrained_path"))
    use_cpu = cfg.get("device", "auto") == "cpu" or not torch.cuda.is_available()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # started by torchrun
    if spatial_dims == 2 and not use_cpu:
        channels_last(model)
    # mixed precision, cuDNN autotuning and a batch sized from free memory on a GPU
    accel = device_options(cfg, use_cpu, model,
                           None if use_cpu or not len(train_ds) else train_ds[0]["pixel_values"])
    batch_size = accel.get("batch_size") or int(cfg.get("batch_size", 16))
    for dataset in (train_ds, val_ds, test_ds):
        dataset.transforms.set_random_state(seed=seed)  # augmentation replays with the seed

    def compute_metrics(eval_pred):
        logits = torch.as_tensor(np.asarray(eval_pred.predictions))
        labels = np.asarray(eval_pred.label_ids)
        if multi:
            return multi_label_metrics(labels.astype(int), torch.sigmoid(logits).numpy())
        return diagnosis_metrics(labels, torch.softmax(logits, dim=1).numpy(), n)

    epochs = float(cfg.get("epochs", 10))
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=epochs,
        per_device_train_batch_size=batch_size, per_device_eval_batch_size=batch_size * 2,
        bf16=accel["bf16"], fp16=accel["fp16"],
        learning_rate=float(cfg.get("learning_rate", 1e-3)),
        weight_decay=float(cfg.get("weight_decay", 1e-4)), lr_scheduler_type="cosine",
        warmup_steps=int(cfg.get("warmup_steps", 10)), eval_strategy="epoch", save_strategy="epoch",
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="loss",
        greater_is_better=False, logging_steps=int(cfg.get("logging_steps", 5)), report_to="none",
        use_cpu=use_cpu, ddp_backend="gloo" if distributed and use_cpu else None,
        dataloader_num_workers=int(cfg.get("num_workers", 0)), seed=seed,
        data_seed=seed, remove_unused_columns=False, disable_tqdm=True)
    channel_cb = ChannelCallback(cfg)
    selection = SelectionCallback("loss", False, cfg.get("early_stopping_patience"),
                                  min(int(cfg.get("min_epochs", 5)), int(epochs)),
                                  rel_delta=float(cfg.get("min_rel_improvement", 0.01)),
                                  description="validation loss")
    callbacks = [channel_cb, selection]
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=val_ds,
                      data_collator=collate, compute_metrics=compute_metrics, callbacks=callbacks)
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=bool(cfg.get("resume")) and bool(checkpoints))

    model_dir = out / "model"
    if not trainer.is_world_process_zero():
        return 0  # other ranks of a multi-process run: rank 0 predicts and reports
    trained_s = time.time() - started
    model.eval()
    predictor = Probabilities(model).eval()
    val_probs = predict(predictor, val_ds, trainer.args.device)  # temperature is still 1 here
    (out / "val_predictions.json").write_text(json.dumps(val_probs))
    (out / "predictions.json").write_text(json.dumps(predict(predictor, test_ds,
                                                             trainer.args.device)))
    calibration = calibrate(model, val_probs, val_items, label_dict, multi)
    trainer.save_model(str(model_dir))  # the kept weights with their temperature
    exports = (export_model(predictor, test_ds[0]["pixel_values"][None], out / "export",
                            output_name="probabilities", metadata={
                                "task": "diagnosis", "multi_label": multi,
                                "class_names": sorted(label_dict, key=label_dict.get),
                                "input_size": list(cfg["image_size"]),
                                "in_channels": int(cfg.get("in_channels", 1)),
                                "intensity": getattr(dl, "INTENSITY", None),
                                "probabilities": "calibrated (temperature scaling fitted "
                                                 "on validation, inside the model)"})
               if cfg.get("export", True) else {})
    summary = {
        "model_path": str(model_dir / "model.safetensors"), "network": cfg["network"],
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "epochs_run": trainer.state.epoch, "epochs_planned": epochs,
        "global_step": trainer.state.global_step, "best_val_metric": trainer.state.best_metric,
        "val_metric": "loss", "best_checkpoint": trainer.state.best_model_checkpoint,
        "train_loss": result.training_loss,
        "stop_reason": selection.stop_reason(channel_cb.stop_reason), **selection.summary(),
        "temperature": calibration["temperature"], "calibration_note": calibration.get("note"),
        "seconds": time.time() - started, "train_seconds": trained_s,
        "train_samples_per_second": result.metrics.get("train_samples_per_second"),
        "device": str(trainer.args.device), "precision": accel["precision"],
        "batch_size": batch_size, "num_train": len(train_ds), "num_val": len(val_ds),
        "num_test": len(test_ds), "class_weights": weights, "seed": seed,
        "multi_label": multi, "exports": exports,
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
