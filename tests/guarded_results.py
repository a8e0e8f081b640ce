"""Results computed into guarded buffers: each result inside GUARD bytes of a pattern on
both sides, checked after the call, so that a kernel writing past a result's end (or
before its start) is seen even when every value it returns is right.

Through the executable's general (ctypes) call, whose results `LeafSpec.allocate` makes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

import xlamlir as xm
from xlamlir.runtime import arguments

GUARD = 64
PATTERN = 0xA5


@contextlib.contextmanager
def guarded_allocation() -> Iterator[list[tuple[np.ndarray, int]]]:
    """While active, results are allocated inside guarded buffers, listed in the yielded
    list as (raw buffer, result bytes)."""
    buffers: list[tuple[np.ndarray, int]] = []
    original = arguments.LeafSpec.allocate

    def allocate(spec: arguments.LeafSpec) -> np.ndarray:
        if spec.order not in ("C", "F"):
            return original(spec)
        size = int(np.prod(spec.dims)) * spec.dtype.itemsize
        raw = np.full(size + 2 * GUARD, PATTERN, np.uint8)
        buffers.append((raw, size))
        return np.ndarray(spec.dims, spec.dtype, raw, GUARD, order=spec.order)

    arguments.LeafSpec.allocate = allocate
    try:
        yield buffers
    finally:
        arguments.LeafSpec.allocate = original


def overwritten(buffers: list[tuple[np.ndarray, int]]) -> list[str]:
    """What the call wrote outside its results (empty: nothing)."""
    problems = []
    for k, (raw, size) in enumerate(buffers):
        before = np.nonzero(raw[:GUARD] != PATTERN)[0] - GUARD
        after = np.nonzero(raw[GUARD + size:] != PATTERN)[0]
        if before.size or after.size:
            problems.append(f"result buffer {k} ({size} bytes): bytes written outside it, "
                            f"before its start at {before.tolist()}, past its end at +{after.tolist()}")
    return problems


def guarded_call(exe: xm.Executable, args: tuple[Any, ...]) -> tuple[Any, list[str]]:
    """`exe(*args)` with guarded results: (results, what it wrote outside them)."""
    with guarded_allocation() as buffers:
        result = exe._call_ctypes(tuple(args))
    return result, overwritten(buffers)
