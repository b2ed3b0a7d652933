"""M3Bench-lite: 14 small synthetic datasets laid out like the paper's 14 M3Bench datasets
(ADNI, KneeMRI, CC-CCII, CT-Kidney, COVID19, INSTANCE2022, MSD Pancreas, ChestX-Det10, VerSe,
L2R-OASIS, BTCV, CT-RATE, RadGenome-Brain, IU-Xray), each with a learnable signal, a datacard,
a request and a floor for success. ``python -m crew bench --suite m3bench-lite`` runs them
through the crew.

Generate them without the crew::

    from bench.m3bench_lite import generate
    generate("/some/folder")            # all 14; generate(folder, only="ADNI,BTCV") for a few
"""
from bench.m3bench_lite.suite import (DATASETS, SUITE, BenchDataset, Floor,  # noqa: F401
                                      datasets_of, generate, select)
