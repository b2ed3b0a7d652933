"""A child for tests/test_thread_share.py, run as ``python -m core.config.launch
tests.print_threads``: prints the compute threads it was given and the ones torch uses."""
from __future__ import annotations

import os

import torch

print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} torch={torch.get_num_threads()}")
