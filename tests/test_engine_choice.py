"""Segmentation engine choice (MONAI or nnU-Net v2): the plan picks by device and budget, a request
or a datacard can force one, and the Model Trainer writes the matching config and program."""
from __future__ import annotations

import json

import pytest

from core.datasets.datacards import Datacard
from core.planning.tasks import choose_engine, default_network
from tools.context import JobContext
from core.training.launch import training_module
from tools.model_trainer import ConfigureTraining


@pytest.mark.parametrize("request_text,card,device,budget,expected", [
    ("segment the liver on CT", "", "cpu", 600, "monai"),
    ("segment the liver on CT", "", "cuda", 600, "monai"),
    ("segment the liver on CT", "", "cuda", 4 * 3600, "nnunet"),
    ("segment the liver on CT with nnU-Net", "", "cpu", 600, "nnunet"),
    ("segment the liver with nnunet please", "monai", "cpu", 600, "nnunet"),
    ("segment the liver on CT using MONAI", "nnunet", "cuda", 4 * 3600, "monai"),
    ("segment the liver on CT", "nnunet", "cpu", 600, "nnunet"),
])
def test_choose_engine(request_text, card, device, budget, expected):
    engine, reason = choose_engine("segmentation", request_text, card, device, budget)
    assert engine == expected and reason


def test_other_templates_have_no_engine_choice():
    assert choose_engine("diagnosis", "classify with nnU-Net", "", "cuda", 9999) == ("", "")
    assert default_network("segmentation", "nnunet", "cpu", "2D") == "nnunet_2d"
    assert default_network("segmentation", "nnunet", "cpu", "3D") == "nnunet_3d_fullres"
    assert default_network("segmentation", "monai", "cpu", "3D") == "unet_small"


def test_datacard_engine_field_is_validated():
    card = Datacard.model_validate({"dataset name": "X", "engine": "nnunet"})
    assert card.engine == "nnunet"
    with pytest.raises(ValueError):
        Datacard.model_validate({"dataset name": "X", "engine": "tensorflow"})


def _workspace_ready_for_training(settings, store, engine: str) -> JobContext:
    ctx = JobContext(settings, store, "job-engine", "segment the liver")
    ws = ctx.workspace.ensure()
    ws.plan.write_text(json.dumps({
        "status": "ready", "dataset": "X", "task": "segmentation", "template": "segmentation",
        "engine": engine, "model": default_network("segmentation", engine, "cpu", "3D"),
        "device": "cpu", "time_budget_s": 600, "dimension": "3D"}))
    ws.dataloader.write_text("# written by the Module Architect\n")
    (ws.datapath / "dataloader_check.json").write_text(json.dumps({"shapes": [[1, 32, 32, 16]]}))
    (ws.datapath / "dataloader_config.json").write_text(json.dumps({"ROI_SIZE": [32, 32, 16]}))
    return ctx


def test_model_trainer_configures_the_planned_engine(settings, store):
    ctx = _workspace_ready_for_training(settings, store, "nnunet")
    tool = ConfigureTraining(ctx=ctx, role="Model Trainer")
    result = tool.call(iterations_per_epoch=5)
    assert result["ok"], result
    config = json.loads(ctx.workspace.train_config.read_text())
    assert config["engine"] == "nnunet" and config["configuration"] == "3d_fullres"
    assert config["network"] == "nnunet_3d_fullres" and config["iterations_per_epoch"] == 5
    assert config["epochs"] == 20  # CPU: nnU-Net's schedule shortened; the budget stops it
    assert training_module(config) == "ml_templates.segmentation.nnunet_train"

    # a MONAI network asked for by name switches the engine back
    assert tool.call(network="unet_small")["ok"]
    config = json.loads(ctx.workspace.train_config.read_text())
    assert config["engine"] == "monai" and "configuration" not in config
    assert training_module(config) == "ml_templates.segmentation.train"

    # nnU-Net is not run under torchrun by us: a clear refusal, nothing overwritten
    refused = tool.call(network="nnunet_2d", num_processes=2)
    assert not refused["ok"] and "num_processes=1" in refused["error"]
    assert json.loads(ctx.workspace.train_config.read_text())["engine"] == "monai"
    unknown = tool.call(network="nnunet_cascade")
    assert not unknown["ok"] and "unet_small" in unknown["error"]
