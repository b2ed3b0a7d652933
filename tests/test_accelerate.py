"""GPU readiness on a CPU (issue 13): the options a GPU run would take, computed from what a GPU
would report; on a CPU nothing changes."""
from __future__ import annotations

import pytest
import torch

from ml_templates.common import accelerate
from ml_templates.common.accelerate import channels_last, device_options, fit_batch_size


def test_cpu_run_keeps_fp32_and_the_configured_batch():
    options = device_options({"batch_size": 16, "precision": "auto"}, use_cpu=True,
                             model=torch.nn.Linear(2, 2), sample=torch.zeros(2))
    assert options == {"precision": "fp32", "bf16": False, "fp16": False, "batch_size": None}
    with pytest.raises(ValueError, match="choose auto, fp32, bf16 or fp16"):
        device_options({"precision": "fp8"}, use_cpu=True)


def test_precision_on_a_gpu_with_and_without_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert accelerate.precision({}, use_cpu=False) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert accelerate.precision({}, use_cpu=False) == "fp16"
    assert accelerate.precision({"precision": "fp32"}, use_cpu=False) == "fp32"


def test_batch_size_from_free_memory():
    mib = 1 << 20

    def step(n: int) -> int:  # 300 MiB of weights and optimiser, 40 MiB per image
        return 300 * mib + 40 * mib * n
    # 80 GiB free: 0.7 x 80 GiB holds ~1400 images; capped at 4 x 16
    assert fit_batch_size(step, 80 << 30, start=16, cap=64) == 64
    # 2 GiB free: (1434 - 300) / 40 = 28 images fit: the largest power of two from 16 is 16
    assert fit_batch_size(step, 2 << 30, start=16, cap=64) == 16
    # 1 GiB free: only 10 fit: fewer than configured, never zero
    assert fit_batch_size(step, 1 << 30, start=16, cap=64) == 10
    assert fit_batch_size(step, 100 * mib, start=16, cap=64) == 1


def test_channels_last_for_2d_networks():
    model = channels_last(torch.nn.Conv2d(1, 4, 3))
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
