"""The command that trains a config: which program (the template's trainer or the nnU-Net
engine), started through the process set-up (core.config.launch), under torchrun when the config
asks for several processes."""
from __future__ import annotations

import socket

from core.config.launch import LAUNCHER


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def training_module(config: dict) -> str:
    """The program that trains this config: the template's MONAI/Transformers trainer, or the
    nnU-Net v2 engine for segmentation plans that chose it."""
    if config.get("engine") == "nnunet":
        return "ml_templates.segmentation.nnunet_train"
    return f"ml_templates.{config['template']}.train"


def training_command(config: dict, config_path: str) -> tuple[str, list[str]]:
    """(module, args) for ``python -m core.config.launch module args``."""
    module, args = training_module(config), ["--config", str(config_path)]
    processes = int(config.get("num_processes") or 1)
    if processes > 1:  # DDP: torchrun starts one process each, each through the launcher
        return "torch.distributed.run", ["--nproc_per_node", str(processes), "--master_port",
                                         str(free_port()), "-m", LAUNCHER, module, *args]
    return module, args
