"""nnU-Net v2's own trainer with the bench's epoch budget (nnU-Net finds it through the
``nnUNet_extTrainer`` variable; ``nnUNetv2_train ... -tr nnUNetTrainerBench``).

Like the ``nnUNetTrainer_Xepochs`` variants it changes only the schedule: ``BENCH_EPOCHS``
epochs of enough iterations to draw ``BENCH_PATCHES_PER_EPOCH`` patches (the same number of
training patches per epoch as the other pipelines draw), validation on a fifth as many. At the
end it writes ``bench_training.json`` (schedule and training-loop seconds) beside its
checkpoints.
"""
import json
import math
import os
import time
from pathlib import Path

import torch

from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer


class nnUNetTrainerBench(nnUNetTrainer):
    def __init__(self, plans: dict, configuration: str, fold: int, dataset_json: dict,
                 device: torch.device = torch.device("cuda")):
        super().__init__(plans, configuration, fold, dataset_json, device)
        batch = int(self.configuration_manager.batch_size)
        patches = int(os.environ.get("BENCH_PATCHES_PER_EPOCH", 250 * batch))
        self.num_epochs = int(os.environ.get("BENCH_EPOCHS", 20))
        self.num_iterations_per_epoch = max(1, math.ceil(patches / batch))
        self.num_val_iterations_per_epoch = max(1, self.num_iterations_per_epoch // 5)
        self.bench_started = None

    def on_train_start(self):
        super().on_train_start()
        self.bench_started = time.time()

    def on_train_end(self):
        seconds = time.time() - (self.bench_started or time.time())
        super().on_train_end()
        if self.local_rank == 0:
            batch = int(self.configuration_manager.batch_size)
            (Path(self.output_folder) / "bench_training.json").write_text(json.dumps({
                "epochs": self.num_epochs, "iterations_per_epoch": self.num_iterations_per_epoch,
                "batch_size": batch, "patch_size": list(self.configuration_manager.patch_size),
                "train_patches": self.num_epochs * self.num_iterations_per_epoch * batch,
                "train_loop_seconds": seconds}, indent=2))
