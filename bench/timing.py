"""Timing helper shared by the benchmark scripts (run from this folder's parent)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Measurement:
    """One workload measured in this run: seconds per call (median), None when not run."""

    ours_s: float
    numpy_s: float
    jax_s: float | None
    compile_s: float
    work: float | None  # bytes moved or flops per call, for the throughput column
    unit: str  # "GB/s" or "GFLOP/s"


@dataclass
class Workload:
    """A benchmark of the suite (bench/suite.py): `run` checks against numpy, then times."""

    name: str
    run: Callable[[], Measurement]
    target_s: float | None  # the target per call, None when there is none


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
