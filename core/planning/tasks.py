"""What each task needs from the rest of the system, in one table: which training template
serves it (chosen from the dataset's layout), its primary metric, how its index is written and
gated, and which evaluator scores it. The crew's tools dispatch through here."""
from __future__ import annotations

import importlib

from core.jobs.gates import GateResult, check_diagnosis_index, check_list_index
from core.jobs.workspace import JobWorkspace
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT

TEMPLATES = ("diagnosis", "segmentation", "detection", "report_generation")
PRIMARY_METRIC = {"diagnosis": "auc", "segmentation": "dice", "detection": "map50",
                  "report_generation": "rouge_l"}
DEFAULT_NETWORK = {"diagnosis": ("densenet_small", "densenet121"),
                   "segmentation": ("unet_small", "segresnet"),
                   "detection": ("retinanet_small", "retinanet_resnet50"),
                   "report_generation": ("report_small", "report_base")}
DEFAULT_TEMPLATE = {"diagnosis": "diagnosis", "segmentation": "segmentation",
                    "anomaly_detection": "segmentation", "report_generation": "report_generation"}


ENGINES = {"segmentation": ("monai", "nnunet")}
# the nnU-Net engine's networks and the nnU-Net configuration each trains
NNUNET_NETWORKS = {"nnunet_2d": "2d", "nnunet_3d_fullres": "3d_fullres"}
# nnU-Net shines with a GPU and hours; on CPU or a short budget the small MONAI UNet wins.
NNUNET_MIN_BUDGET_S = 3600


def choose_engine(template: str, request: str, card_engine: str, device: str,
                  time_budget_s: int) -> tuple[str, str]:
    """Pick the training engine of a template and say why. A request that names an engine
    wins, then the datacard's ``engine``; otherwise nnU-Net on a GPU with at least an hour,
    MONAI otherwise."""
    engines = ENGINES.get(template)
    if not engines:
        return "", ""
    text = request.lower().replace("-", "").replace(" ", "")
    if "nnunet" in text:
        return "nnunet", "the request asks for nnU-Net"
    if "monai" in text:
        return "monai", "the request asks for MONAI"
    if card_engine in engines:
        return card_engine, f"the datacard asks for {card_engine}"
    if device == "cuda" and time_budget_s >= NNUNET_MIN_BUDGET_S:
        return "nnunet", "a GPU and a budget of at least an hour: nnU-Net's self-configured plan"
    return "monai", (f"{device.upper()} with a {time_budget_s // 60}-minute budget: the small "
                     "MONAI network trains in minutes (nnU-Net needs a GPU and hours to shine)")


def default_network(template: str, engine: str, device: str, dimension: str) -> str:
    if engine == "nnunet":
        return "nnunet_2d" if dimension == "2D" else "nnunet_3d_fullres"
    return DEFAULT_NETWORK[template][device == "cuda"]


def template_networks(template: str, engine: str = "") -> list[str]:
    """The networks a template's trainer builds (the nnU-Net engine's when ``engine`` is it)."""
    if engine == "nnunet":
        return sorted(NNUNET_NETWORKS)
    return sorted(importlib.import_module(f"ml_templates.{template}.model").NETWORKS)


def template_for(task: str, layout: str) -> str:
    """Lesion/anomaly datasets train a segmentation model when they have masks and a detector
    when they have boxes; the layout decides, the task only when the layout is unknown."""
    return TEMPLATE_OF_LAYOUT.get(layout) or DEFAULT_TEMPLATE.get(task, "")


def check_index(ws: JobWorkspace, template: str) -> GateResult:
    return check_diagnosis_index(ws) if template == "diagnosis" else check_list_index(ws, template)
