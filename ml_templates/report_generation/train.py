"""Report-generation training entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.report_generation.train
        --config <job>/train_config.json

Reads the job's ``Datapath/dataloader.py``; builds the tokenizer (a local pretrained one from
``tokenizer_path`` / the dataloader's TOKENIZER_PATH, or one trained on train.json's reports) and
saves it to ``Logout/tokenizer/``; holds out a validation set from the training index (grouped by
patient when split.json knows the groups); trains the image-conditioned decoder under the
Transformers ``Trainer`` (loss, learning rate and validation loss reported through the run
channel, stop request and time budget honoured, early stopping on validation loss, best checkpoint
kept, resume from ``Logout/checkpoints/``); then writes a generated report for every test image to
``Logout/predictions.json`` ``[{"image_path", "generated"}]``, the model (weights, config,
tokenizer) to ``Logout/model/`` and ``Logout/train_summary.json``. Test metrics are computed by
the system's evaluator (core.evaluation.report_generation) afterwards, not here.
"""
from __future__ import annotations

import json
import random
import sys
import time

import torch
from transformers import EarlyStoppingCallback, Trainer, TrainingArguments

from core.evaluation.report_generation import reference_text, rouge_l
from ml_templates.common.callbacks import ChannelCallback
from ml_templates.common.entry import start_run
from ml_templates.report_generation.model import ReportGenerator, generate_reports
from ml_templates.report_generation.tokenizer import (get_tokenizer, load_tokenizer,
                                                      report_text)


def validation_items(items: list, groups: dict, fraction: float, seed: int) -> tuple[list, list]:
    """Hold out ~fraction of the training groups (patients; each image its own group when
    split.json has none), at random with the seed."""
    keys = sorted({groups.get(str(it["image_path"]), str(it["image_path"])) for it in items})
    random.Random(seed).shuffle(keys)
    n_val = min(len(keys) - 1, max(1, round(len(keys) * fraction))) if len(keys) > 1 else 0
    val_groups = set(keys[:n_val])
    in_val = [groups.get(str(it["image_path"]), str(it["image_path"])) in val_groups
              for it in items]
    return ([it for it, v in zip(items, in_val) if not v],
            [it for it, v in zip(items, in_val) if v])


def collate(batch: list[dict]) -> dict:
    """Stack a batch and trim the text to its longest report (less decoder work)."""
    labels = torch.stack([b["labels"] for b in batch])
    length = int((labels != -100).sum(1).max())
    return {"pixel_values": torch.stack([b["pixel_values"] for b in batch]),
            "input_ids": torch.stack([b["input_ids"] for b in batch])[:, :length],
            "labels": labels[:, :length]}


def main(argv: list[str] | None = None) -> int:
    run = start_run(argv, __doc__)
    cfg, datapath, out, seed, started = run.cfg, run.datapath, run.out, run.seed, run.started
    dl = run.dataloader()
    train_index = dl.load_index("train", str(datapath))
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    resume = bool(cfg.get("resume")) and bool(checkpoints)
    if resume and (out / "tokenizer").is_dir():  # the checkpoint's own vocabulary
        tokenizer = load_tokenizer(out / "tokenizer")
    else:
        tokenizer = get_tokenizer(
            [report_text(it.get("findings"), it.get("impression")) for it in train_index],
            cfg.get("tokenizer_path") or getattr(dl, "TOKENIZER_PATH", "") or None,
            save_dir=out / "tokenizer")
    split_file = datapath / "split.json"
    groups = json.loads(split_file.read_text()).get("groups", {}) if split_file.exists() else {}
    train_items, val_items = validation_items(train_index, groups,
                                              float(cfg.get("val_fraction", 0.15)), seed)

    def dataset(split, augment, items=None):
        return dl.ReportDataset(split, augment=augment, datapath=str(datapath), items=items,
                                tokenizer=tokenizer)

    train_ds, val_ds = dataset("train", True, train_items), dataset("train", False, val_items)
    test_ds = dataset("test", False)
    for ds in (train_ds, val_ds, test_ds):
        ds.transforms.set_random_state(seed=seed)  # augmentation replays with the seed

    image_size = list(cfg.get("image_size") or dl.IMAGE_SIZE)
    max_tokens = int(dl.MAX_TOKENS)
    model = ReportGenerator(cfg.get("network", "report_small"), len(image_size),
                            int(cfg.get("in_channels", dl.IN_CHANNELS)), len(tokenizer),
                            max_tokens, tokenizer.pad_token_id, tokenizer.bos_token_id,
                            tokenizer.eos_token_id, pretrained_path=cfg.get("pretrained_path"))
    use_cpu = cfg.get("device", "auto") == "cpu" or not torch.cuda.is_available()
    batch_size = int(cfg.get("batch_size", 16))
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=float(cfg.get("epochs", 30)),
        per_device_train_batch_size=batch_size, per_device_eval_batch_size=batch_size * 2,
        learning_rate=float(cfg.get("learning_rate", 5e-4)),
        weight_decay=float(cfg.get("weight_decay", 1e-2)), lr_scheduler_type="cosine",
        warmup_steps=int(cfg.get("warmup_steps", 20)), max_grad_norm=1.0,
        eval_strategy="epoch" if val_ds.items else "no",
        save_strategy="epoch", save_total_limit=2, load_best_model_at_end=bool(val_ds.items),
        metric_for_best_model="loss", greater_is_better=False, prediction_loss_only=True,
        logging_steps=int(cfg.get("logging_steps", 5)), report_to="none", use_cpu=use_cpu,
        dataloader_num_workers=int(cfg.get("num_workers", 0)), seed=seed, data_seed=seed,
        remove_unused_columns=False, disable_tqdm=True)
    channel_cb = ChannelCallback(cfg)
    callbacks = [channel_cb]
    if cfg.get("early_stopping_patience") and val_ds.items:
        callbacks.append(EarlyStoppingCallback(int(cfg["early_stopping_patience"])))
    trainer = Trainer(model=model, args=args, train_dataset=train_ds,
                      eval_dataset=val_ds if val_ds.items else None, data_collator=collate,
                      callbacks=callbacks)
    result = trainer.train(resume_from_checkpoint=resume)

    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    (model_dir / "report_config.json").write_text(json.dumps(
        {**model.report_config, "image_size": image_size}, indent=2))
    device = trainer.args.device
    model.to(device)
    max_new = int(cfg.get("max_new_tokens", max_tokens - 1))
    generated = generate_reports(model, test_ds, tokenizer, device, max_new)
    predictions = [{"image_path": it["image_path"], "generated": text}
                   for it, text in zip(test_ds.items, generated)]
    (out / "predictions.json").write_text(json.dumps(predictions, indent=1))
    val_rouge = None
    if val_ds.items:  # a quick look at generation quality on held-out training reports
        val_text = generate_reports(model, val_ds, tokenizer, device, max_new)
        val_rouge = float(rouge_l([reference_text(it) for it in val_items], val_text).mean())
    summary = {
        "model_path": str(model_dir / "model.safetensors"),
        "network": model.report_config["network"], "resumed": resume,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "epochs_run": trainer.state.epoch, "global_step": trainer.state.global_step,
        "best_val_metric": trainer.state.best_metric, "best_val_metric_name": "eval_loss",
        "best_checkpoint": trainer.state.best_model_checkpoint, "val_rouge_l": val_rouge,
        "train_loss": result.training_loss, "stop_reason": channel_cb.stop_reason or "completed",
        "seconds": time.time() - started, "device": str(device), "num_train": len(train_ds),
        "num_val": len(val_ds), "num_test": len(test_ds), "seed": seed,
        "vocab_size": len(tokenizer), "max_tokens": max_tokens, "image_size": image_size,
        "tokenizer_path": str(out / "tokenizer"), "exports": {},
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
