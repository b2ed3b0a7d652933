"""Template instantiation writes the CONFIG block as Python literals, and nothing else."""
from __future__ import annotations

import pytest

from core.training.instantiate import END, START, fill_config_block

SOURCE = f"'''doc'''\n{START}\nDATAPATH = '.'\n{END}\nprint(DATAPATH)\n"


def test_values_round_trip_as_python():
    values = {"DATAPATH": "/data/true_false_null", "PIXDIM": None, "FLAGS": [True, False],
              "INTENSITY": {"kind": "ct", "window": [-160, 240]}, "LR": 1e-3}
    filled = fill_config_block(SOURCE, values)
    namespace: dict = {}
    exec(compile(filled.replace("print(DATAPATH)", ""), "dataloader.py", "exec"), namespace)
    assert {k: namespace[k] for k in values} == values
    assert filled.endswith("print(DATAPATH)\n") and filled.count(START) == 1


@pytest.mark.parametrize("values", [{"bad-key": 1}, {"X": object()}, {"X": float("nan")}])
def test_non_literal_config_is_refused(values):
    with pytest.raises(ValueError):
        fill_config_block(SOURCE, values)


def test_template_without_block_is_refused():
    with pytest.raises(ValueError, match="CONFIG block"):
        fill_config_block("print(1)\n", {"X": 1})
