"""Synthetic, learnable demo datasets for every task (the app's demo data and the M3Bench-lite
stand-ins), written reproducibly.

May import: core.imaging and third-party libraries.
"""
