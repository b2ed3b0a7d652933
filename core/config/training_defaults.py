"""Every training default in one place: per template (CPU-sized; an LLM or the user may change
them in the plan), what multi-process training is verified for, and the validation share."""
from __future__ import annotations

DEFAULT_TRAINING = {
    "diagnosis": {"epochs": 40, "batch_size": 16, "learning_rate": 1e-3,
                  "early_stopping_patience": 10},
    "segmentation": {"epochs": 30, "batch_size": 4, "learning_rate": 3e-3,
                     "early_stopping_patience": 10},
    "detection": {"epochs": 30, "batch_size": 8, "learning_rate": 1e-3,
                  "early_stopping_patience": 10},
    "report_generation": {"epochs": 20, "batch_size": 16, "learning_rate": 1e-3,
                          "early_stopping_patience": 5},
}
NNUNET_EPOCHS = {"cuda": 1000, "cpu": 20}  # nnU-Net's own schedule on a GPU; the budget stops CPU
NNUNET_CPU_WORKERS = 2
DEFAULT_TIME_BUDGET_S = 600
DEFAULT_SEED = 42
TEST_FRACTION = 0.2  # share of patients held out for testing
VAL_FRACTION = 0.15
# validation patients per class at least (never over a quarter of the class): a handful of easy
# validation images saturates a metric and cannot tell epochs apart
VAL_FLOOR_PER_CLASS = 15
VAL_FLOOR_CASES = 3  # segmentation: whole validation cases at least (sliding-window Dice each)
MIN_EPOCHS = 5  # early stopping never stops before this many epochs (or the planned ones)
DDP_TEMPLATES = {"diagnosis"}  # multi-process (torchrun) training tested with gloo on CPU
STOP_GRACE_S = 60  # how long a stopped child may take to save its best model and predict


def default_epochs(template: str, engine: str = "", device: str = "cpu") -> int:
    """The epochs a plan trains for when nobody set them: nnU-Net's schedule for its engine,
    else the template's default."""
    if engine == "nnunet":
        return NNUNET_EPOCHS["cuda" if device == "cuda" else "cpu"]
    return DEFAULT_TRAINING.get(template, DEFAULT_TRAINING["diagnosis"])["epochs"]
