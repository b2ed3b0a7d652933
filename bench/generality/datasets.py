"""The generality check's ten dataset generators and their registry.

``make_<key>(out_dir: Path, seed=0) -> Path`` writes one small folder in the layout a real
public medical-imaging dataset ships in and returns its root; ``CASES`` lists, per key, the
public dataset, the documentation followed, what a clinician would type (description and
request) and the expected reading. Generators live in ``datasets_2d.py`` / ``datasets_3d.py``,
the registry in ``cases.py``.
"""
from __future__ import annotations

from .cases import CASES, CASES_BY_KEY, Case, Expected
from .datasets_2d import (make_busi, make_ham10000, make_montgomery_tb, make_nih_cxr14,
                          make_roco, make_rsna_pneumonia)
from .datasets_3d import make_acdc, make_brats2021, make_luna16, make_picai

__all__ = ["CASES", "CASES_BY_KEY", "Case", "Expected", "make_acdc", "make_brats2021",
           "make_busi", "make_ham10000", "make_luna16", "make_montgomery_tb", "make_nih_cxr14",
           "make_picai", "make_roco", "make_rsna_pneumonia"]
