"""Process-wide set-up every entry point goes through (app, CLI, workers, templates, tests).

Importing :mod:`core` does not run it: each entry point calls :func:`apply` itself (``app.py``,
``python -m crew`` and the job worker through the ``crew`` package, ``bench.scan_scale``'s
measuring child, and every template child, which starts as ``python -m core.config.launch
MODULE``). It runs once per process. It:

* turns off the stack's hidden network calls (CrewAI telemetry, OpenTelemetry, litellm's price
  map download), unless the user set those variables themselves;
* quiets MONAI's probe for an optional GPU DICOM decoder (a warning per image otherwise);
* neutralises a broken ``torchvision``. On CPU machines pip pulls a CUDA torchvision (through
  nnunetv2 -> timm) that cannot load next to the CPU torch; importing it raises, which breaks
  ``from transformers import Trainer``. When, and only when, the real import fails we register
  ``torchvision`` as absent so every library treats it as not installed. On a machine where
  torchvision works (a CUDA box) nothing changes.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import sys
import warnings

QUIET_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore::FutureWarning",
}

_applied = False
torchvision_status = "not checked"


def _neutralise_broken_torchvision() -> str:
    if "torchvision" in sys.modules:
        return "already imported" if sys.modules["torchvision"] is not None else "disabled"
    if importlib.util.find_spec("torchvision") is None:
        return "not installed"
    try:
        import torchvision  # noqa: F401
        return "ok"
    except Exception as exc:  # RuntimeError: operator torchvision::nms does not exist
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision"] = None  # find_spec -> None, import -> ImportError
        return f"disabled ({type(exc).__name__}: {str(exc)[:80]})"


def apply() -> None:
    """Idempotent; safe to call from every entry point."""
    global _applied, torchvision_status
    if _applied:
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    torchvision_status = _neutralise_broken_torchvision()
    # MONAI probes an optional GPU DICOM decoder on every LoadImage; without it, say it once.
    logging.getLogger("monai.data.nvimgcodec_pydicom_plugin").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="NvImgCodecPydicomReader")
    _applied = True
