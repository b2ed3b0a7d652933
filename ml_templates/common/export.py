"""Export a trained network to TorchScript and ONNX, and prove each export: load it back and
compare its outputs with the PyTorch model's on the same input (onnxruntime for ONNX).

What a user of the file needs beyond the weights travels inside it: the ONNX model's
``metadata_props`` (text; lists and dicts as JSON: ``class_names``, ``task``, the input's size
and spacing...) and the TorchScript file's ``metadata.json`` extra file."""
from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

TOLERANCE = 1e-4
# core.RESEARCH_ONLY, which templates do not import (a test keeps the two equal)
NOTICE = ("For research use only. Not a medical device; not for diagnosis or treatment "
          "decisions.")


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())


def metadata_text(metadata: dict | None) -> dict[str, str]:
    """Metadata as ONNX keeps it: text values, anything else as JSON; None values left out."""
    return {str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in (metadata or {}).items() if v is not None}


def add_onnx_metadata(path: Path, metadata: dict[str, str], doc: str = "") -> None:
    """Write ``metadata`` into the ONNX file's ``metadata_props`` (replacing equal keys)."""
    import onnx
    model = onnx.load(str(path))
    kept = [p for p in model.metadata_props if p.key not in metadata]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    if doc:
        model.doc_string = doc
    onnx.save(model, str(path))


def export_model(module: torch.nn.Module, example: torch.Tensor, out_dir: Path,
                 input_name: str = "pixel_values", output_name: str = "output",
                 metadata: dict | None = None) -> dict:
    """``module(example)`` must return one tensor. Returns, per format, the file, the largest
    output difference and whether it is within tolerance, or the error that prevented it.
    ``metadata`` (e.g. ``class_names``, ``task``, ``input_size``, ``spacing_mm``) goes into
    both files; its ``notice`` also becomes the ONNX model's description."""
    raw = {k: v for k, v in {"input_name": input_name, "output_name": output_name,
                             "notice": NOTICE, **(metadata or {})}.items() if v is not None}
    meta = metadata_text(raw)
    out_dir.mkdir(parents=True, exist_ok=True)
    module = module.eval().cpu()
    example = example.cpu()
    with torch.no_grad():
        reference = module(example).numpy()
    results: dict[str, dict] = {}
    try:
        path = out_dir / "model.torchscript.pt"
        with torch.no_grad():
            torch.jit.trace(module, example).save(
                str(path), _extra_files={"metadata.json": json.dumps(raw)})
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
        add_onnx_metadata(path, meta, meta.get("notice", ""))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        diff = _max_diff(session.run(None, {input_name: example.numpy()})[0], reference)
        stored = session.get_modelmeta().custom_metadata_map
        results["onnx"] = {"path": str(path), "max_abs_diff": diff,
                           "verified": diff <= TOLERANCE and all(
                               stored.get(k) == v for k, v in meta.items()),
                           "metadata": sorted(stored)}
    except Exception as exc:
        results["onnx"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return results
