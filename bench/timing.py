"""Timing helper shared by the benchmark scripts (run from this folder's parent)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def best_of(fn: Callable[[], object], repeats: int, inner: int) -> float:
    """Median over `repeats` of the mean time of `inner` calls, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return float(np.median(samples))


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `repeats` calls of `fn`, in seconds, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))
