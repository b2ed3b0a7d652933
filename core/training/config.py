"""The Model Trainer's configuration: plan + the user's binding edits + template defaults ->
``train_config.json``. The child reads only this file; it names the run channel's files
(metrics_path, stop_path), never the store."""
from __future__ import annotations

import json
import os
from pathlib import Path

from core.config.training_defaults import (DDP_TEMPLATES, DEFAULT_SEED, DEFAULT_TIME_BUDGET_S,
                                           DEFAULT_TRAINING, MIN_EPOCHS, NNUNET_CPU_WORKERS,
                                           VAL_FLOOR_CASES, VAL_FLOOR_PER_CLASS, VAL_FRACTION,
                                           default_epochs)
from core.datasets.datacards import write_json_atomic
from core.jobs.workspace import JobWorkspace
from core.planning.plan_edits import user_edits
from core.planning.tasks import NNUNET_NETWORKS, template_networks


class TrainConfigError(ValueError):
    """The configuration asked for cannot train; the message says why and what to choose."""


def choose_engine_for_network(plan: dict, network: str) -> str:
    engine = plan.get("engine", "")
    if network in NNUNET_NETWORKS:
        return "nnunet"
    if engine == "nnunet" and network in template_networks(plan["template"]):
        return "monai"  # a MONAI network asked for by name overrides the plan's engine
    return engine


def gpu_count() -> int:
    import torch
    return torch.cuda.device_count()


def dataloader_workers(gpus: int, device: str) -> int:
    """DataLoader worker processes. None on CPU: the model's step already uses every core
    through torch's threads, a worker competes with it, and with decoded images cached
    (ml_templates.common.cache) a sample costs little more than its augmentation
    (bench.pipeline_speed on 2 busy cores, training-like loop: 3D 2.0/1.9/2.2 samples/s with
    0/1/2 workers, 2D inconsistent between runs). With a GPU the CPU is otherwise idle while it
    computes: up to 4, leaving a core to the main process (not measured here)."""
    if gpus == 0 or device == "cpu":
        return 0
    return max(0, min(4, (os.cpu_count() or 1) - 1))


MAX_WEIGHTS_BYTES = 8 << 30


def check_pretrained_path(path: str | None, weights_dir: Path | None) -> str | None:
    """``path`` as a real file inside ``weights_dir`` (the only folder training may read
    weights from), or None when no weights are asked for. An LLM (or a child rewriting
    train_config.json) must not widen a training run's read access to any file it names."""
    if not path:
        return None
    where = (f"put the weights file in {weights_dir} (or set M3B_WEIGHTS_DIR to the folder "
             "that holds it) and name it there") if weights_dir else \
        "local weights are read only from the app's weights folder"
    if weights_dir is None:
        raise TrainConfigError(f"pretrained weights {path} refused: {where}")
    real, folder = os.path.realpath(path), os.path.realpath(weights_dir)
    if os.path.commonpath([real, folder]) != folder or real == folder:
        raise TrainConfigError(f"pretrained weights {path} are outside the weights folder; "
                               f"{where}")
    if not os.path.isfile(real):
        raise TrainConfigError(f"pretrained weights {path} do not exist (or are not a file); "
                               f"{where}")
    if os.path.getsize(real) > MAX_WEIGHTS_BYTES:
        raise TrainConfigError(f"pretrained weights {path} are larger than "
                               f"{MAX_WEIGHTS_BYTES >> 30} GB")
    return real


def build_train_config(ws: JobWorkspace, job_id: str, network: str | None = None,
                       epochs: int | None = None, batch_size: int | None = None,
                       learning_rate: float | None = None,
                       early_stopping_patience: int | None = None,
                       pretrained_path: str | None = None, seed: int = DEFAULT_SEED,
                       num_processes: int | None = None,
                       iterations_per_epoch: int | None = None,
                       weights_dir: Path | None = None) -> dict:
    """Write and return train_config.json. What the user set when approving the plan wins over
    the arguments; the arguments win over the template's defaults. Raises TrainConfigError."""
    plan = ws.read_plan()
    fixed = user_edits(plan)
    network = fixed.get("model") or network or plan["model"]
    epochs = fixed.get("epochs") or epochs
    seed = fixed.get("seed", seed)
    engine = choose_engine_for_network(plan, network)
    defaults = DEFAULT_TRAINING[plan["template"]]
    epochs = epochs or default_epochs(plan["template"], engine, plan.get("device", "cpu"))
    batch_size = batch_size or defaults["batch_size"]
    learning_rate = learning_rate or defaults["learning_rate"]
    if early_stopping_patience is None:
        early_stopping_patience = defaults["early_stopping_patience"]
    gpus = gpu_count()
    ddp_ok = plan["template"] in DDP_TEMPLATES and engine != "nnunet"
    num_processes = num_processes or (gpus if gpus > 1 and ddp_ok else 1)
    if num_processes > 1 and not ddp_ok:
        raise TrainConfigError(f"multi-process training is verified for {sorted(DDP_TEMPLATES)} "
                               f"(MONAI engine) only; use num_processes=1 for "
                               f"{engine or plan['template']}")
    if not ws.dataloader.exists():
        raise TrainConfigError("Datapath/dataloader.py is missing: the Module Architect writes "
                               "it first")
    if network not in template_networks(plan["template"], engine):
        choices = template_networks(plan["template"]) + (
            sorted(NNUNET_NETWORKS) if plan["template"] == "segmentation" else [])
        raise TrainConfigError(f"unknown network {network!r}; choose one of {choices}")
    pretrained_path = check_pretrained_path(pretrained_path, weights_dir)
    if not ws.dataloader_check.exists():
        raise TrainConfigError("the dataloader has not been validated: the Module Architect "
                               "runs validate_dataloader first")
    loader = json.loads(ws.dataloader_config.read_text())
    shapes = json.loads(ws.dataloader_check.read_text()).get("shapes") or [[1]]
    config = {
        "job_id": job_id, "datapath": str(ws.datapath), "dataloader": str(ws.dataloader),
        "output_dir": str(ws.logout), "metrics_path": str(ws.metrics_channel),
        "stop_path": str(ws.stop_request), "task": plan["task"], "template": plan["template"],
        "network": network, "image_size": loader.get("IMAGE_SIZE", shapes[0][1:]),
        "roi_size": loader.get("ROI_SIZE"), "in_channels": loader.get("IN_CHANNELS", 1),
        "epochs": epochs, "batch_size": batch_size, "learning_rate": learning_rate,
        "early_stopping_patience": early_stopping_patience, "seed": seed,
        "time_budget_s": plan.get("time_budget_s", DEFAULT_TIME_BUDGET_S),
        "device": plan.get("device", "auto"), "pretrained_path": pretrained_path,
        "val_fraction": VAL_FRACTION, "val_floor_per_class": VAL_FLOOR_PER_CLASS,
        "val_floor_cases": VAL_FLOOR_CASES,
        "min_epochs": min(MIN_EPOCHS, int(epochs)), "num_processes": num_processes}
    config["num_workers"] = dataloader_workers(gpus, plan.get("device", "auto"))
    if engine:
        config["engine"] = engine
    if engine == "nnunet":  # nnU-Net plans patch, batch, lr and spacing itself
        config.update(configuration=NNUNET_NETWORKS[network],
                      iterations_per_epoch=iterations_per_epoch, workers=NNUNET_CPU_WORKERS)
    write_json_atomic(ws.train_config, config)
    return config
