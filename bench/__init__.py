"""Benchmarks that run the real crew end to end (``python -m crew bench``)."""
