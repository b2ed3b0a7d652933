"""Segmentation with nnU-Net v2 (the Model Trainer runs it as its own process).

    python -m core.config.launch ml_templates.segmentation.nnunet_train
        --config <job>/train_config.json

Same contract as ml_templates.segmentation.train: converts the job's index into an nnU-Net raw
dataset under ``<output_dir>/nnunet/``, plans and preprocesses it (3d_fullres, or 2d for 2D
data), trains fold "all" with a budgeted nnUNetTrainer subclass (train_loss, val_loss,
mean_fg_dice, lr reported through the run channel each epoch; stop request and ``time_budget_s``
honoured),
predicts the test images and writes ``predictions/``, ``predictions.json``, ``model/`` and
``train_summary.json`` into ``output_dir`` (the job's Logout/).

Config keys: job_id, metrics_path, stop_path, datapath, output_dir, epochs (default 20),
iterations_per_epoch (default 250 on CUDA, 10 on CPU), val_iterations_per_epoch (default
max(1, iterations_per_epoch // 5)), time_budget_s, seed, device (auto | cpu | cuda),
workers (preprocessing and augmentation processes, default 2), configuration (override: 2d |
3d_fullres), use_mirroring (default true), threads.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from ml_templates.common.channel import RunChannel
from ml_templates.segmentation import nnunet_engine as eng

CONFINED_ENV = "M3B_CONFINED"  # set by core.config.launch in a sandboxed child


def _predict_in_this_process(predictor) -> None:
    """Confined, a child has no Unix sockets, and nnU-Net's multi-process prediction needs one
    (its preprocessing runs under a multiprocessing Manager): predict sequentially instead."""
    def sequential(inputs, outputs, save_probabilities=False, overwrite=True, **_workers):
        return predictor.predict_from_files_sequential(inputs, outputs, save_probabilities,
                                                       overwrite)
    predictor.predict_from_files = sequential


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    cfg = json.loads(Path(parser.parse_args(argv).config).read_text())
    started = time.time()
    out = Path(cfg["output_dir"]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    n_proc = int(cfg.get("workers") or 2)
    paths = eng.setup_env(out, n_proc=n_proc, n_proc_da=int(cfg.get("workers_da") or n_proc))

    import torch  # after setup_env: nnunetv2 reads some variables at import

    seed = int(cfg.get("seed", 42))
    torch.manual_seed(seed)
    import random

    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    if cfg.get("threads"):
        torch.set_num_threads(max(1, int(cfg["threads"])))
    device = eng.pick_device(cfg.get("device", "auto"))
    channel = RunChannel.from_config(cfg)

    def stage(name: str) -> None:
        print(json.dumps({"event": "stage", "stage": name, "seconds": time.time() - started}),
              flush=True)

    stage("convert")
    info = eng.convert_dataset(cfg["datapath"], paths["nnUNet_raw"])
    configuration = cfg.get("configuration") or ("2d" if info["dimension"] == 2 else "3d_fullres")
    stage("plan_and_preprocess")
    plans_info = eng.plan_and_preprocess(configuration, n_proc=n_proc)
    cpu = device.type != "cuda"
    iterations = int(cfg.get("iterations_per_epoch") or (10 if cpu else 250))
    val_iterations = int(cfg.get("val_iterations_per_epoch") or max(1, iterations // 5))
    budget = cfg.get("time_budget_s")
    stage("train")
    result = eng.train(plans_info, configuration, device, int(cfg.get("epochs", 20)), iterations,
                       val_iterations, channel=channel,
                       time_budget_s=float(budget) if budget else None, started=started)
    trained_s = time.time() - started

    model_dir = out / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    for src in (result["checkpoint"], plans_info["plans_file"], plans_info["dataset_json_file"]):
        target = model_dir / Path(src).name
        target.unlink(missing_ok=True)
        try:
            os.link(src, target)  # same disk: no second copy of the checkpoint
        except OSError:
            shutil.copyfile(src, target)  # contents only: a confined child may not chmod/utime
    fingerprint = Path(plans_info["plans_file"]).parent / "dataset_fingerprint.json"
    if fingerprint.exists():
        shutil.copyfile(fingerprint, model_dir / fingerprint.name)
    (model_dir / "nnunet_model.json").write_text(json.dumps({
        "engine": "nnunet", "trainer": eng.TRAINER_NAME, "configuration": configuration,
        "checkpoint": "checkpoint_final.pth", "plans": Path(plans_info["plans_file"]).name,
        "dataset_json": "dataset.json", "fold": "all",
        "load_with": "ml_templates.segmentation.nnunet_engine.load_predictor"}, indent=2))

    stage("predict")
    predictor = eng.load_predictor(model_dir / "checkpoint_final.pth",
                                   model_dir / Path(plans_info["plans_file"]).name,
                                   model_dir / "dataset.json", configuration, device,
                                   use_mirroring=bool(cfg.get("use_mirroring", True)))
    if os.environ.get(CONFINED_ENV) == "1":
        _predict_in_this_process(predictor)
    rows = eng.predict(predictor, info["dataset_dir"], info["test"], out / "predictions",
                       n_proc=n_proc)
    (out / "predictions.json").write_text(json.dumps(rows, indent=1))
    network = f"nnunet_{configuration}"
    summary = {
        "engine": "nnunet", "model_path": str(model_dir / "checkpoint_final.pth"),
        "network": network, "configuration": configuration, "trainer": eng.TRAINER_NAME,
        "fold": "all", "nnunet_results": result["output_folder"],
        "num_parameters": result["num_parameters"], "epochs_run": result["epochs_run"],
        "iterations_per_epoch": iterations, "val_iterations_per_epoch": val_iterations,
        "best_val_metric": result["best_val_metric"], "val_metric": "mean_fg_dice",
        "stop_reason": result["stop_reason"], "seconds": time.time() - started,
        "train_seconds": trained_s, "device": str(device), "seed": seed,
        "num_train": info["num_train"], "num_test": len(info["test"]),
        "spatial_dims": info["dimension"], "in_channels": info["n_channels"],
        "num_classes": len(info["labels"]) + 1, "labels": info["labels"],
        "patch_size": result["patch_size"], "pixdim": result["spacing"],
        "batch_size": result["batch_size"],
        "validation_on_training_cases": True,  # fold "all": nnU-Net validates on training cases
    }
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({"event": "done", **summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
