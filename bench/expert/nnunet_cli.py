"""Run one of nnU-Net v2's console scripts (``nnUNetv2_plan_and_preprocess``,
``nnUNetv2_train``, ``nnUNetv2_predict``, ...) from this environment, after the process set-up
every entry point of the project goes through (core.config.bootstrap: on CPU machines it hides
a CUDA-only torchvision that cannot load next to the CPU torch; elsewhere it changes nothing).

Trainer lookup (``-tr NAME``): nnU-Net imports every module of its own trainer folder before it
looks in ``nnUNet_extTrainer``, and its Primus trainers import timm, which needs torchvision;
where torchvision cannot load that walk fails before any external trainer is reached. So the
folders of ``nnUNet_extTrainer`` (nnU-Net's documented place for one's own trainers) are
searched first, with nnU-Net's own class finder, and nnU-Net's search runs as before when the
name is not there.

    python -m bench.expert.nnunet_cli nnUNetv2_train 777 3d_fullres 0 -tr nnUNetTrainerBench
"""
from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path


def script_path(name: str) -> Path:
    """The console script beside this interpreter (the environment's own nnU-Net)."""
    if not name.startswith("nnUNetv2_"):
        raise SystemExit(f"not an nnU-Net v2 command: {name!r}")
    path = Path(sys.executable).parent / name
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: install nnunetv2 in this environment "
                         "(make setup)")
    return path


def external_trainers_first() -> None:
    """Make nnU-Net's training and prediction entry points find trainers in the
    ``nnUNet_extTrainer`` folders before walking nnU-Net's own trainer package."""
    import importlib
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
    from nnunetv2.utilities import find_objects
    from nnunetv2.utilities.find_class_by_name import recursive_find_python_class

    walk_nnunet = find_objects.recursive_find_trainer_class_by_name

    def find(trainer_name: str):
        for folder in os.environ.get("nnUNet_extTrainer", "").split(os.pathsep):
            if folder.strip() and os.path.isdir(folder):
                found = recursive_find_python_class(folder, trainer_name, None,
                                                    base_folder=folder)
                if found is not None:
                    if not issubclass(found, nnUNetTrainer):
                        raise SystemExit(f"{trainer_name} in {folder} is not an nnUNetTrainer")
                    return found
        return walk_nnunet(trainer_name)

    for name in ("nnunetv2.run.run_training", "nnunetv2.inference.predict_from_raw_data"):
        importlib.import_module(name).recursive_find_trainer_class_by_name = find


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    from core.config import bootstrap
    bootstrap.apply()
    path = script_path(argv[0])
    if "-tr" in argv:
        external_trainers_first()
    sys.argv = [str(path), *argv[1:]]
    runpy.run_path(str(path), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
