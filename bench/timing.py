"""Timing helpers shared by the benchmark scripts (run from this folder, or with it on sys.path).

`QUICK` (set by `suite.py --quick`) divides every repetition count; `COMPILE_ONLY`
(set by `suite.py --compile-only`, the warm-cache subprocess) makes `compile_ours`
stop the workload right after its compile, reporting the seconds in `CompiledOnly`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import xlamlir as xm
from xlamlir.runtime import disk_cache
from xlamlir.runtime.compiler import clear_cache

QUICK = False
COMPILE_ONLY = False


@dataclass
class Measurement:
    """One workload measured in this run: seconds per call (median), None when not run."""

    ours_s: float
    numpy_s: float
    jax_s: float | None
    compile_s: float
    work: float | None  # bytes moved or flops per call, for the throughput column
    unit: str  # "GB/s" or "GFLOP/s"
    jax_compile_s: float | None = None  # jax.jit(f).lower(*args).compile(), timed
    warm_compile_s: float | None = None  # ours again in a second process (persistent cache)


@dataclass
class Workload:
    """A benchmark of the suite (bench/suite.py): `run` checks against numpy, then times."""

    name: str
    run: Callable[[], Measurement]
    target_s: float | None  # the target per call, None when there is none


class CompiledOnly(Exception):  # noqa: N818 - a signal, not an error
    """Raised by `compile_ours` under COMPILE_ONLY: the workload stops after compiling."""

    def __init__(self, seconds: float, disk_cache: list[str]) -> None:
        super().__init__(f"compiled in {seconds:.3f} s (disk cache: {', '.join(disk_cache)})")
        self.seconds = seconds
        self.disk_cache = disk_cache  # "hit", "miss" or "off" per computation


def rounds(n: int) -> int:
    """`n` repetitions, or a quarter of them (at least 3) in quick mode."""
    return max(3, n // 4) if QUICK else n


def compile_ours(*computations: xm.XlaComputation) -> tuple[list[Any], float]:
    """Compile each computation with the in-process cache cleared (a cold compile, not a
    hit left by an earlier row); the executables and the total seconds."""
    clear_cache()
    start = time.perf_counter()
    exes = [xm.compile(c) for c in computations]
    seconds = time.perf_counter() - start
    if COMPILE_ONLY:
        raise CompiledOnly(seconds, [str(e.compile_stats.get("disk_cache", "-")) for e in exes])
    # The disk cache links and writes the entries in a background thread (~0.1-1 s of a
    # core here): done before any timing, which it slowed by up to 2x (ours first).
    disk_cache.flush()
    return exes, seconds


#: Seconds every timed block waits before it starts (see median_time).
SETTLE_S = 0.3


def best_of(fn: Callable[[], object], repeats: int, inner: int) -> float:
    """Median over `repeats` of the mean time of `inner` calls, in seconds."""
    samples = []
    time.sleep(SETTLE_S)
    for _ in range(rounds(repeats)):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return float(np.median(samples))


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `repeats` calls of `fn`, in seconds, after one warm-up call.

    A pause comes first: OpenBLAS's threads spin ~100 ms after a call (numpy's reference
    checks, numpy's own block), holding a core the next block would use."""
    time.sleep(SETTLE_S)
    fn()
    samples = []
    for _ in range(rounds(repeats)):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


#: Rounds of blocks in `medians`: each library's calls are split over this many blocks.
BLOCK_ROUNDS = 3


def medians(fns: list[Callable[[], Any] | None], repeats: int) -> list[float | None]:
    """Median seconds per call of each fn over `repeats` calls (whole blocks: rounded up),
    after a warm-up call.

    Each fn's calls run in blocks, every block after the settle pause, and the blocks of
    the fns alternate over BLOCK_ROUNDS rounds: this 2-core VM's speed drifts by up to
    half within a minute (the same program 1.3 and 3.0 ms in two runs), and a slow phase
    then falls on every library alike instead of on whichever block it hit. Not
    interleaved call by call: OpenBLAS's threads spin for a while after a call and would
    take the cores from the next call of another library."""
    per_block = max(1, -(-rounds(repeats) // BLOCK_ROUNDS))
    samples: list[list[float]] = [[] for _ in fns]
    for round_ in range(BLOCK_ROUNDS):
        for fn, times in zip(fns, samples):
            if fn is None:
                continue
            time.sleep(SETTLE_S)
            if round_ == 0:
                fn()
            for _ in range(per_block):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
    return [None if fn is None else float(np.median(times)) for fn, times in zip(fns, samples)]
