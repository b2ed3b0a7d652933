"""M3Builder's domain package: settings, datacards, store, jobs, datasets, evaluation.

`core` imports no UI and none of `crew`, `tools` or `pages`. Importing it applies the process
set-up in :mod:`core.bootstrap` (quiet telemetry, the torchvision guard).
"""
from core import bootstrap as _bootstrap

_bootstrap.apply()

__version__ = "0.1.0"
RESEARCH_ONLY = (
    "For research use only. Not a medical device; not for diagnosis or treatment decisions."
)
