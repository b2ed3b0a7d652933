"""Diagnosis training entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.diagnosis.train --config <job>/train_config.json

Several GPUs (or, for tests, several CPU processes with gloo): start it with
``torchrun --nproc_per_node N -m core.config.launch ml_templates.diagnosis.train --config ...``;
the Trainer runs DDP, rank 0 writes metrics, predictions and the summary.

Reads the job's ``Datapath/dataloader.py``, holds out a validation set from the training index
(grouped by patient when split.json knows the groups), trains a MONAI network under the
Transformers ``Trainer`` (metrics reported through the run channel, stop request and time budget
honoured, early stopping, best checkpoint kept), then writes test-set probabilities to
``Logout/predictions.json`` and ``Logout/train_summary.json``. Test metrics are computed by the
system's evaluator afterwards, not here.
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
from transformers import EarlyStoppingCallback, Trainer, TrainingArguments

from core.evaluation.diagnosis import diagnosis_metrics, multi_label_metrics
from ml_templates.common.callbacks import ChannelCallback
from ml_templates.common.entry import start_run
from ml_templates.common.export import export_model
from ml_templates.diagnosis.model import DiagnosisModel, Probabilities


def validation_items(items: list, groups: dict, fraction: float, seed: int) -> tuple[list, list]:
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
        val_groups.update(gs[:max(1, round(len(gs) * fraction))] if len(gs) > 1 else [])
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


def main(argv: list[str] | None = None) -> int:
    run = start_run(argv, __doc__)
    cfg, datapath, out, seed, started = run.cfg, run.datapath, run.out, run.seed, run.started
    dl = run.dataloader()
    label_dict = dl.load_label_dict(str(datapath))
    full_train = dl.DiagnosisDataset("train", datapath=str(datapath))
    split_info = json.loads((datapath / "split.json").read_text())
    train_items, val_items = validation_items(full_train.items, split_info.get("groups", {}),
                                              float(cfg.get("val_fraction", 0.15)), seed)
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
    for dataset in (train_ds, val_ds, test_ds):
        dataset.transforms.set_random_state(seed=seed)  # augmentation replays with the seed

    def compute_metrics(eval_pred):
        logits = torch.as_tensor(np.asarray(eval_pred.predictions))
        labels = np.asarray(eval_pred.label_ids)
        if multi:
            return multi_label_metrics(labels.astype(int), torch.sigmoid(logits).numpy())
        return diagnosis_metrics(labels, torch.softmax(logits, dim=1).numpy(), n)

    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=float(cfg.get("epochs", 10)),
        per_device_train_batch_size=int(cfg.get("batch_size", 16)),
        per_device_eval_batch_size=int(cfg.get("batch_size", 16)) * 2,
        learning_rate=float(cfg.get("learning_rate", 1e-3)),
        weight_decay=float(cfg.get("weight_decay", 1e-4)), lr_scheduler_type="cosine",
        warmup_steps=int(cfg.get("warmup_steps", 10)), eval_strategy="epoch", save_strategy="epoch",
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="auc",
        greater_is_better=True, logging_steps=int(cfg.get("logging_steps", 5)), report_to="none",
        use_cpu=use_cpu, ddp_backend="gloo" if distributed and use_cpu else None,
        dataloader_num_workers=int(cfg.get("num_workers", 0)), seed=seed,
        data_seed=seed, remove_unused_columns=False, disable_tqdm=True)
    channel_cb = ChannelCallback(cfg)
    callbacks = [channel_cb]
    if cfg.get("early_stopping_patience"):
        callbacks.append(EarlyStoppingCallback(int(cfg["early_stopping_patience"])))
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=val_ds,
                      data_collator=collate, compute_metrics=compute_metrics, callbacks=callbacks)
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=bool(cfg.get("resume")) and bool(checkpoints))

    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    if not trainer.is_world_process_zero():
        return 0  # other ranks of a multi-process run: rank 0 predicts and reports
    model.eval()
    predictor = Probabilities(model).eval()
    predictions = {}
    with torch.no_grad():
        for i in range(0, len(test_ds), 32):
            batch = [test_ds[j] for j in range(i, min(i + 32, len(test_ds)))]
            pixels = torch.stack([b["pixel_values"] for b in batch]).to(trainer.args.device)
            probs = predictor(pixels).cpu().numpy()
            for b, p in zip(batch, probs):
                predictions[b["image_path"]] = [float(x) for x in p]
    (out / "predictions.json").write_text(json.dumps(predictions))
    exports = (export_model(predictor, test_ds[0]["pixel_values"][None], out / "export",
                            output_name="probabilities") if cfg.get("export", True) else {})
    summary = {
        "model_path": str(model_dir / "model.safetensors"), "network": cfg["network"],
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "epochs_run": trainer.state.epoch, "global_step": trainer.state.global_step,
        "best_val_metric": trainer.state.best_metric, "best_checkpoint":
        trainer.state.best_model_checkpoint, "train_loss": result.training_loss,
        "stop_reason": channel_cb.stop_reason or "completed", "seconds": time.time() - started,
        "device": str(trainer.args.device), "num_train": len(train_ds), "num_val": len(val_ds),
        "num_test": len(test_ds), "class_weights": weights, "seed": seed,
        "multi_label": multi, "exports": exports,
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
