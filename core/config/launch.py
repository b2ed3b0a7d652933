"""``python -m core.config.launch MODULE [ARGS...]``: run MODULE as ``__main__`` after the
process set-up (core.config.bootstrap).

Every child that runs a training template or a dataloader check starts here, so the templates
themselves import nothing of core's configuration: they stay at the bottom of the house and
import only their common package, image I/O and the evaluators. ``torchrun`` starts each of its
processes through this module too (``-m core.config.launch MODULE``).
"""
from __future__ import annotations

import runpy
import sys

from core.config import bootstrap

LAUNCHER = "core.config.launch"  # this module, as ``python -m`` names it


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: python -m core.config.launch MODULE [ARGS...]")
    bootstrap.apply()
    module, sys.argv = argv[0], [argv[0], *argv[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
