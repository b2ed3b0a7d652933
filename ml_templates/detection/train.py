"""Detection training entry point (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.detection.train --config <job>/train_config.json

Reads the job's ``Datapath/dataloader.py`` (sizes come from its CONFIG block), holds out a
validation set (grouped by patient when split.json knows the groups, stratified by
positive/negative image), fits anchor shapes to the training boxes, and trains a MONAI
RetinaNetDetector under the Transformers ``Trainer``: batches are lists of images and target
dicts, evaluation is replaced by detection on the validation set (mAP50 each epoch, the metric
for the best checkpoint and early stopping), losses / learning rate / val mAP50 stream to the
run channel (ChannelCallback, which also honours a stop request and ``time_budget_s``).
Afterwards every validation and test image is predicted, boxes are mapped back to the stored
image's coordinates and written to ``Logout/val_predictions.json`` (the evaluator chooses the
boxes' score threshold on them) and ``Logout/predictions.json``; ``Logout/model/`` and ``Logout/train_summary.json`` as
the README says. Test metrics come from ``core.evaluation.detection`` afterwards, not from here.
"""
from __future__ import annotations

import json
import random
import sys
import time

import numpy as np
import torch
from transformers import Trainer, TrainingArguments

from core.evaluation.detection import detection_metrics
from ml_templates.common.callbacks import ChannelCallback, SelectionCallback
from ml_templates.detection.model import DEFAULT_CPU, DetectionModel, predict, save_detection_model
from ml_templates.common.entry import start_run


def _key(image_path) -> str:
    return image_path if isinstance(image_path, str) else json.dumps(image_path)


def validation_items(items: list, groups: dict, fraction: float, seed: int) -> tuple[list, list]:
    """Hold out ~fraction of the groups (patients), separately among images with and without
    boxes, so both kinds are validated."""
    kind: dict[str, bool] = {}
    for it in items:
        group = groups.get(_key(it["image_path"]), _key(it["image_path"]))
        kind[group] = kind.get(group, False) or bool(it.get("boxes"))
    rng, val_groups = random.Random(seed), set()
    for positive in (True, False):
        gs = sorted(g for g, k in kind.items() if k == positive)
        rng.shuffle(gs)
        if len(gs) > 1:
            val_groups.update(gs[:max(1, round(len(gs) * fraction))])
    in_val = [groups.get(_key(it["image_path"]), _key(it["image_path"])) in val_groups
              for it in items]
    train = [it for it, v in zip(items, in_val) if not v]
    return train, [it for it, v in zip(items, in_val) if v]


def fit_anchor_shapes(dataset, spatial_dims: int) -> list[list[float]] | None:
    """Three base anchor shapes (10/50/90% quantiles of the box sizes at the training size);
    the pyramid levels scale them by 1, 2, 4."""
    sizes = [b[spatial_dims:] - b[:spatial_dims] for i in range(len(dataset))
             for b in np.asarray(dataset.prepared(i)["boxes"], dtype=np.float64)]
    if not sizes:
        return None
    q = np.quantile(np.asarray(sizes), [0.1, 0.5, 0.9], axis=0)
    return [[round(max(2.0, float(v)), 2) for v in row] for row in q]


def collate(batch: list[dict]) -> dict:
    return {"images": [b["image"] for b in batch],
            "targets": [{"boxes": b["boxes"], "labels": b["labels"]} for b in batch]}


def _ground_truth(items: list, label_dict: dict, dims: int) -> list[dict]:
    return [{"boxes": np.asarray(it.get("boxes") or [], np.float64).reshape(-1, 2 * dims),
             "labels": np.asarray([label_dict[n] for n in it.get("labels") or []], np.int64)}
            for it in items]


class DetectionTrainer(Trainer):
    """Trainer whose evaluation is detection on the validation set (mAP50, image AUC) and whose
    logs carry the classification and box-regression losses separately."""

    def __init__(self, *args, dl=None, class_names=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.dl, self.class_names = dl, class_names
        self._parts: dict[str, float] = {}
        self._count = 0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        for name in ("loss_cls", "loss_box"):
            self._parts[name] = self._parts.get(name, 0.0) + float(outputs[name])
        self._count += 1
        return (outputs["loss"], outputs) if return_outputs else outputs["loss"]

    def log(self, logs: dict, start_time: float | None = None) -> None:
        if "loss" in logs and self._count:
            logs.update({k: v / self._count for k, v in self._parts.items()})
            self._parts, self._count = {}, 0
        super().log(logs, start_time)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        started = time.time()
        preds = predict(self.model, dataset, self.dl, self.args.device,
                        self.args.per_device_eval_batch_size)
        gt = _ground_truth(dataset.items, dataset.label_dict, self.dl.SPATIAL_DIMS)
        values = detection_metrics(gt, preds, self.class_names)
        metrics = {f"{metric_key_prefix}_{k}": (0.0 if v != v else float(v))
                   for k, v in values.items() if not (k == "image_auc" and v != v)}
        metrics[f"{metric_key_prefix}_runtime"] = time.time() - started
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control,
                                                         metrics)
        return metrics


def main(argv: list[str] | None = None) -> int:
    run = start_run(argv, __doc__, determinism=True)
    cfg, datapath, out, seed, started = run.cfg, run.datapath, run.out, run.seed, run.started
    dl = run.dataloader()
    dims = int(dl.SPATIAL_DIMS)
    label_dict = dl.load_label_dict(str(datapath))
    names = sorted(label_dict, key=label_dict.get)
    split_file = datapath / "split.json"
    split_info = json.loads(split_file.read_text()) if split_file.exists() else {}
    all_train = dl.DetectionDataset("train", datapath=str(datapath)).items
    train_items, val_items = validation_items(all_train, split_info.get("groups", {}),
                                              float(cfg.get("val_fraction", 0.15)), seed)
    train_ds = dl.DetectionDataset("train", augment=True, datapath=str(datapath), items=train_items)
    val_ds = dl.DetectionDataset("train", augment=False, datapath=str(datapath), items=val_items)
    test_ds = dl.DetectionDataset("test", augment=False, datapath=str(datapath))
    anchors = fit_anchor_shapes(train_ds, dims)  # also fills the dataset's cache
    model = DetectionModel({"network": cfg.get("network", DEFAULT_CPU), "spatial_dims": dims,
                            "in_channels": int(dl.IN_CHANNELS), "label_names": names,
                            "image_size": list(dl.IMAGE_SIZE), "anchor_shapes": anchors,
                            "pretrained_path": cfg.get("pretrained_path")})
    use_cpu = cfg.get("device", "auto") == "cpu" or not torch.cuda.is_available()
    for dataset in (train_ds, val_ds, test_ds):
        dataset.transforms.set_random_state(seed=seed)  # augmentation replays with the seed

    batch = int(cfg.get("batch_size", 4))
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=float(cfg.get("epochs", 10)),
        per_device_train_batch_size=batch, per_device_eval_batch_size=batch * 2,
        learning_rate=float(cfg.get("learning_rate", 1e-3)),
        weight_decay=float(cfg.get("weight_decay", 1e-4)), lr_scheduler_type="cosine",
        warmup_steps=int(cfg.get("warmup_steps", 10)), eval_strategy="epoch", save_strategy="epoch",
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="map50",
        greater_is_better=True, logging_steps=int(cfg.get("logging_steps", 5)), report_to="none",
        use_cpu=use_cpu, dataloader_num_workers=int(cfg.get("num_workers", 0)), seed=seed,
        data_seed=seed, remove_unused_columns=False, disable_tqdm=True)
    channel_cb = ChannelCallback(cfg)
    selection = SelectionCallback("map50", True, cfg.get("early_stopping_patience"),
                                  min(int(cfg.get("min_epochs", 5)), int(cfg.get("epochs", 10))),
                                  description="validation mAP50")
    callbacks = [channel_cb, selection]
    trainer = DetectionTrainer(model=model, args=args, train_dataset=train_ds, eval_dataset=val_ds,
                               data_collator=collate, callbacks=callbacks, dl=dl, class_names=names)
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=bool(cfg.get("resume")) and bool(checkpoints))

    model_path = save_detection_model(model, out / "model")

    def rows(dataset) -> str:
        return json.dumps([
            {"image_path": p["image_path"], "boxes": p["boxes"].round(2).tolist(),
             "scores": p["scores"].round(5).tolist(),
             "labels": [names[int(c)] for c in p["labels"]]}
            for p in predict(model, dataset, dl, trainer.args.device, batch * 2)])
    # validation boxes: the evaluator chooses the score threshold on them, never on test
    (out / "val_predictions.json").write_text(rows(val_ds))
    (out / "predictions.json").write_text(rows(test_ds))
    epochs_run = trainer.state.epoch or 0.0
    stop_reason = selection.stop_reason(channel_cb.stop_reason)
    summary = {
        "model_path": str(model_path), "network": model.detector_config["network"],
        "num_parameters": sum(p.numel() for p in model.parameters()), "epochs_run": epochs_run,
        "global_step": trainer.state.global_step, "best_val_metric": trainer.state.best_metric,
        "best_val_metric_name": "map50", "best_checkpoint": trainer.state.best_model_checkpoint,
        "train_loss": result.training_loss, "stop_reason": stop_reason, **selection.summary(),
        "train_samples_per_second": result.metrics.get("train_samples_per_second"),
        "seconds": time.time() - started, "device": str(trainer.args.device),
        "num_train": len(train_ds), "num_val": len(val_ds), "num_test": len(test_ds),
        "anchor_shapes": anchors, "spatial_dims": dims, "image_size": list(dl.IMAGE_SIZE),
        "seed": seed, "exports": {},
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
