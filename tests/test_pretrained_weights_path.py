"""Local pretrained weights are read only from the weights folder (issue 14): an LLM naming any
file as ``pretrained_path`` (or a confined child rewriting train_config.json) must not widen the
training run's read access."""
from __future__ import annotations

import json
import os

import pytest

from core.training.config import TrainConfigError, check_pretrained_path
from tests.test_sandbox_tools import make_dataset, make_job
from tools.model_trainer import RunTraining


def test_weights_must_be_a_file_inside_the_weights_folder(tmp_path):
    weights = tmp_path / "weights"
    weights.mkdir()
    good = weights / "densenet.pt"
    good.write_bytes(b"x" * 10)
    assert check_pretrained_path(str(good), weights) == os.path.realpath(good)
    assert check_pretrained_path(None, weights) is None
    outside = tmp_path / "elsewhere.pt"
    outside.write_bytes(b"x")
    (weights / "link.pt").symlink_to(outside)            # a link out of the folder
    for path, words in ((str(outside), "outside the weights folder"),
                        ("/etc/shadow", "outside the weights folder"),
                        (str(weights / "link.pt"), "outside the weights folder"),
                        (str(weights / ".." / "elsewhere.pt"), "outside the weights folder"),
                        (str(weights), "outside the weights folder"),
                        (str(weights / "missing.pt"), "do not exist")):
        with pytest.raises(TrainConfigError) as err:
            check_pretrained_path(path, weights)
        assert words in str(err.value) and str(weights) in str(err.value), str(err.value)
    with pytest.raises(TrainConfigError, match="refused"):
        check_pretrained_path(str(good), None)


def test_a_rewritten_train_config_cannot_grant_an_outside_file(settings, store, tmp_path):
    ctx = make_job(settings, store, make_dataset(tmp_path / "tiny_dataset"))
    ws = ctx.workspace
    ws.train_config.write_text(json.dumps({"pretrained_path": "/etc/shadow", "epochs": 1}))
    result = json.loads(RunTraining(ctx=ctx, role="Model Trainer")._run())
    assert not result["ok"]
    assert "outside the weights folder" in result["error"]
    assert "configure_training" in result["error"]
    assert str(settings.weights_dir) in result["error"]
