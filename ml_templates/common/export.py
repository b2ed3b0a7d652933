"""Export a trained network to TorchScript and ONNX, and prove each export: load it back and
compare its outputs with the PyTorch model's on the same input (onnxruntime for ONNX)."""
from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import torch

TOLERANCE = 1e-4


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())


def export_model(module: torch.nn.Module, example: torch.Tensor, out_dir: Path,
                 input_name: str = "pixel_values", output_name: str = "output") -> dict:
    """``module(example)`` must return one tensor. Returns, per format, the file, the largest
    output difference and whether it is within tolerance, or the error that prevented it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    module = module.eval().cpu()
    example = example.cpu()
    with torch.no_grad():
        reference = module(example).numpy()
    results: dict[str, dict] = {}
    try:
        path = out_dir / "model.torchscript.pt"
        with torch.no_grad():
            torch.jit.trace(module, example).save(str(path))
        loaded = torch.jit.load(str(path))
        with torch.no_grad():
            diff = _max_diff(loaded(example).numpy(), reference)
        results["torchscript"] = {"path": str(path), "max_abs_diff": diff,
                                  "verified": diff <= TOLERANCE}
    except Exception as exc:  # some architectures cannot be traced: say so, keep going
        results["torchscript"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    try:
        import onnxruntime as ort
        path = out_dir / "model.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.getLogger("torch.onnx").setLevel(logging.ERROR)
            torch.onnx.export(module, (example,), str(path), dynamo=False,
                              input_names=[input_name], output_names=[output_name],
                              dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}})
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        diff = _max_diff(session.run(None, {input_name: example.numpy()})[0], reference)
        results["onnx"] = {"path": str(path), "max_abs_diff": diff, "verified": diff <= TOLERANCE}
    except Exception as exc:
        results["onnx"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return results
