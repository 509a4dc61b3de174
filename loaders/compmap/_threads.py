"""Thread control for small tensor work."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def single_thread_if(condition: bool):
    """Run small problems on one thread: on a busy machine OpenMP's fork/join per small op costs
    milliseconds, many times the work itself."""
    previous = torch.get_num_threads()
    if condition and previous > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)
