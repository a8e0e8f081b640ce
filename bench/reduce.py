"""Reductions against numpy: a row sum and a 2x2 max-pool, each checked before timing.

Prints one line per workload with our time, numpy's, and the ratio, all
measured in this run. Run with `python bench/reduce.py`.
"""

from __future__ import annotations

import time

import numpy as np
from timing import best_of

import xlamlir as xm


def row_sum(n: int = 2048) -> tuple[str, float, float, float]:
    b = xm.XlaBuilder("row_sum")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n, n)))
    b.reduce(x, b.constant(np.float32(0)), lambda acc, v: acc + v, [1])
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    xv = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    np.testing.assert_allclose(exe(xv), xv.sum(axis=1), rtol=1e-4, atol=1e-3)
    ours = best_of(lambda: exe(xv), 5, 5)
    theirs = best_of(lambda: xv.sum(axis=1), 5, 5)
    return f"row sum f32[{n},{n}]", ours, theirs, compile_s


def max_pool(shape: tuple[int, int, int, int] = (8, 112, 112, 64)) -> tuple[str, float, float, float]:
    n, h, w, c = shape
    b = xm.XlaBuilder("max_pool")
    x = b.parameter(0, xm.Shape.array(xm.F32, shape))
    lowest = b.constant(np.float32(-np.inf))
    b.reduce_window(x, lowest, lambda acc, v: acc.builder.max(acc, v), [1, 2, 2, 1], [1, 2, 2, 1])
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    xv = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)

    def reference() -> np.ndarray:
        return xv.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))

    np.testing.assert_array_equal(exe(xv), reference())
    ours = best_of(lambda: exe(xv), 5, 3)
    theirs = best_of(reference, 5, 3)
    return "max-pool 2x2/2 f32[8,112,112,64] NHWC", ours, theirs, compile_s


def main() -> None:
    print(f"{'workload':40s} {'xlamlir':>12s} {'numpy':>12s} {'numpy/ours':>11s} {'compile':>9s}")
    for bench in (row_sum, max_pool):
        name, ours, theirs, compile_s = bench()
        print(f"{name:40s} {ours * 1e6:10.1f}us {theirs * 1e6:10.1f}us {theirs / ours:10.2f}x "
              f"{compile_s * 1e3:7.1f}ms")


if __name__ == "__main__":
    main()
