"""M3Bench-lite: 26 small synthetic datasets: 14 laid out like the paper's M3Bench datasets
(ADNI, KneeMRI, CC-CCII, CT-Kidney, COVID19, INSTANCE2022, MSD Pancreas, ChestX-Det10, VerSe,
L2R-OASIS, BTCV, CT-RATE, RadGenome-Brain, IU-Xray; suite "paper") and 12 in the layouts
ordinary public datasets ship in (suite "layout-families"), each with a learnable signal, a
datacard, a request and a floor for success. ``python -m crew bench --suite m3bench-lite`` runs
them through the crew.

Generate them without the crew::

    from bench.m3bench_lite import generate
    generate("/some/folder")            # all 26; generate(folder, only="ADNI,BTCV") for a few
"""
from bench.m3bench_lite.suite import (DATASETS, FAMILIES, SUITE, SUITES,  # noqa: F401
                                      BenchDataset, Floor, datasets_of, generate, select)
