"""Process-wide set-up every entry point goes through (app, CLI, workers, templates, tests).

Importing :mod:`core` does not run it: each entry point calls :func:`apply` itself (``app.py``,
``python -m crew`` and the job worker through the ``crew`` package, ``bench.scan_scale``'s
measuring child, and every template child, which starts as ``python -m core.config.launch
MODULE``). It runs once per process. It:

* turns off the stack's hidden network calls (CrewAI telemetry, OpenTelemetry, litellm's price
  map download), unless the user set those variables themselves;
* quiets MONAI's probe for an optional GPU DICOM decoder (a warning per image otherwise);
* keeps ``import monai`` from loading Transformers: MONAI imports every network at package
  import, and its Transchex network pulls BERT out of Transformers (1.8 s of a 4 s import, in
  every child that reads an image). While that one module loads, Transformers is reported
  absent, so Transchex alone is unavailable; a process that imported Transformers before
  MONAI, and any import of Transformers afterwards, is unaffected;
* neutralises a broken ``torchvision``. On CPU machines pip pulls a CUDA torchvision (through
  nnunetv2 -> timm) that cannot load next to the CPU torch; importing it raises, which breaks
  ``from transformers import Trainer``. When, and only when, the real import fails we register
  ``torchvision`` as absent so every library treats it as not installed. On a machine where
  torchvision works (a CUDA box) nothing changes.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
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
DEFERRED_BY = "monai.networks.nets.transchex"   # the one MONAI module that imports Transformers


class _TransformersDeferredForMonai(importlib.abc.MetaPathFinder):
    """While MONAI's Transchex module loads, Transformers cannot be imported (see above)."""

    def __init__(self) -> None:
        self.loading = 0

    def find_spec(self, name, path=None, target=None):
        if name == DEFERRED_BY and not self.loading:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = _DeferringLoader(spec.loader, self)
            return spec
        if self.loading and (name == "transformers" or name.startswith("transformers.")):
            raise ImportError(f"{name} is not loaded while MONAI imports its Transchex network")
        return None


class _DeferringLoader(importlib.abc.Loader):
    def __init__(self, loader, finder: _TransformersDeferredForMonai) -> None:
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        if "transformers" in sys.modules:          # already loaded: nothing to save
            return self.loader.exec_module(module)
        self.finder.loading += 1
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.loading -= 1


def _defer_transformers_for_monai() -> None:
    if "monai" not in sys.modules and \
            not any(isinstance(f, _TransformersDeferredForMonai) for f in sys.meta_path):
        sys.meta_path.insert(0, _TransformersDeferredForMonai())


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
    _defer_transformers_for_monai()
    # MONAI probes an optional GPU DICOM decoder on every LoadImage; without it, say it once.
    logging.getLogger("monai.data.nvimgcodec_pydicom_plugin").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="NvImgCodecPydicomReader")
    _applied = True
