"""GPU readiness shared by the training templates: mixed precision (bf16 where the GPU has it,
else fp16 with loss scaling), cuDNN autotuning, ``channels_last`` for 2D CNNs and a batch size
sized from the GPU's free memory. On a CPU every option is off and the configured batch size is
kept, so a CPU run is exactly what it was.

Config keys read: ``precision`` (auto | fp32 | bf16 | fp16), ``batch_size``, ``auto_batch_size``
(default true on a GPU), ``max_batch_scale`` (the largest multiple of the configured batch size a
GPU may use; default 4: more would change the optimisation more than the learning rate allows).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

MEMORY_FRACTION = 0.7   # of the free GPU memory a batch may take (activations, optimizer, cache)


def precision(cfg: dict, use_cpu: bool) -> str:
    asked = str(cfg.get("precision", "auto")).lower()
    if asked not in ("auto", "fp32", "bf16", "fp16"):
        raise ValueError(f"precision {asked!r}: choose auto, fp32, bf16 or fp16")
    if use_cpu or asked == "fp32":
        return "fp32"
    if asked == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return asked


def fit_batch_size(bytes_for: Callable[[int], int], free_bytes: int, start: int, cap: int,
                   fraction: float = MEMORY_FRACTION) -> int:
    """The largest power of two between ``start`` and ``cap`` whose estimated memory fits
    ``fraction`` of ``free_bytes``. ``bytes_for(n)`` measures one training step of batch n; two
    probes (2 and 4) give the per-sample cost and the fixed part."""
    two, four = bytes_for(2), bytes_for(4)
    per_sample = max((four - two) / 2.0, 1.0)
    fixed = max(two - 2 * per_sample, 0.0)
    fits = int((free_bytes * fraction - fixed) // per_sample)
    size = start
    while size * 2 <= min(fits, cap):
        size *= 2
    return max(1, size if size <= max(fits, 1) else max(1, fits))


def cuda_step_bytes(model: torch.nn.Module, sample: torch.Tensor, prec: str) -> Callable[[int],
                                                                                         int]:
    """``bytes_for(n)``: peak CUDA memory of a forward + backward pass on a batch of n."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(prec)

    def bytes_for(n: int) -> int:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        batch = sample[None].expand(n, *sample.shape).contiguous().cuda()
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            logits = model(pixel_values=batch)["logits"]
        logits.float().sum().backward()
        model.zero_grad(set_to_none=True)
        return int(torch.cuda.max_memory_allocated() - base)
    return bytes_for


def device_options(cfg: dict, use_cpu: bool, model: torch.nn.Module | None = None,
                   sample: torch.Tensor | None = None) -> dict:
    """``{"precision", "bf16", "fp16", "batch_size" (None = keep the configured one)}``; sets
    cuDNN autotuning on a GPU (input sizes are fixed by the dataloader)."""
    prec = precision(cfg, use_cpu)
    out = {"precision": prec, "bf16": prec == "bf16", "fp16": prec == "fp16", "batch_size": None}
    if use_cpu:
        return out
    torch.backends.cudnn.benchmark = True
    start = int(cfg.get("batch_size", 16))
    if model is not None and sample is not None and cfg.get("auto_batch_size", True):
        model.cuda().train()
        free, _ = torch.cuda.mem_get_info()
        cap = start * int(cfg.get("max_batch_scale", 4))
        out["batch_size"] = fit_batch_size(cuda_step_bytes(model, sample, prec), free, start, cap)
        model.cpu()
        torch.cuda.empty_cache()
    return out


def channels_last(model: torch.nn.Module) -> torch.nn.Module:
    """NHWC memory layout for a 2D CNN on a GPU (tensor cores read it without transposes)."""
    return model.to(memory_format=torch.channels_last)
