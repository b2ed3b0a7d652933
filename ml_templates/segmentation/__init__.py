"""MONAI segmentation template (organs, lesions; 2D and 3D; one or several image channels).

dataloader_template.py (instantiated as Datapath/dataloader.py), model.py (networks by name),
train.py (Transformers Trainer on patches, sliding-window validation and test prediction),
inference.py (sliding-window prediction mapped back to the mask's geometry), check_dataloader.py.
The system's evaluator is core.evaluation.segmentation.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path


def load_dataloader(path: Path):
    """Import a job's Datapath/dataloader.py as a module."""
    spec = importlib.util.spec_from_file_location("job_dataloader", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
