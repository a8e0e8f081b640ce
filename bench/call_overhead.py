"""Per-call overhead and a fused elementwise chain, against numpy (and JAX if installed).

Prints one line per workload with our time, numpy's, and the ratio, all
measured in this run. Run with `make bench` or `python bench/call_overhead.py`.
"""

from __future__ import annotations

import time

import numpy as np
from timing import best_of

import xlamlir as xm


def scalar_add() -> tuple[str, float, float, float]:
    b = xm.XlaBuilder("scalar_add")
    b.add(b.parameter(0, xm.Shape.array(xm.F32, ())), b.parameter(1, xm.Shape.array(xm.F32, ())))
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    x, y = np.float32(1.5), np.float32(2.25)
    assert exe(x, y) == x + y
    ours = best_of(lambda: exe(x, y), 7, 20000)
    theirs = best_of(lambda: np.add(x, y), 7, 20000)
    return "scalar add, per call", ours, theirs, compile_s


def fused_chain(n: int = 1 << 22) -> tuple[str, float, float, float]:
    b = xm.XlaBuilder("chain")
    shape = xm.Shape.array(xm.F32, (n,))
    x, y, z = (b.parameter(i, shape) for i in range(3))
    b.add(b.mul(b.tanh(b.add(b.mul(x, y), z)), b.constant(np.float32(0.5))), b.exp(b.neg(x)))
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    xv, yv, zv = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))

    def reference() -> np.ndarray:
        return np.tanh(xv * yv + zv) * np.float32(0.5) + np.exp(-xv)

    np.testing.assert_allclose(exe(xv, yv, zv), reference(), rtol=2e-5, atol=1e-6)
    ours = best_of(lambda: exe(xv, yv, zv), 5, 3)
    theirs = best_of(reference, 5, 3)
    return "tanh(x*y+z)*0.5+exp(-x) f32[4M]", ours, theirs, compile_s


def axpy(n: int = 1 << 22) -> tuple[str, float, float, float]:
    b = xm.XlaBuilder("axpy")
    a = b.parameter(0, xm.Shape.array(xm.F32, ()))
    x = b.parameter(1, xm.Shape.array(xm.F32, (n,)))
    y = b.parameter(2, xm.Shape.array(xm.F32, (n,)))
    b.add(b.mul(a, x), y)
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(1)
    av = np.float32(2.0)
    xv, yv = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(exe(av, xv, yv), av * xv + yv, rtol=1e-6)
    ours = best_of(lambda: exe(av, xv, yv), 5, 5)
    theirs = best_of(lambda: av * xv + yv, 5, 5)
    return "axpy f32[4M]", ours, theirs, compile_s


def main() -> None:
    print(f"{'workload':40s} {'xlamlir':>12s} {'numpy':>12s} {'numpy/ours':>11s} {'compile':>9s}")
    for bench in (scalar_add, axpy, fused_chain):
        name, ours, theirs, compile_s = bench()
        print(f"{name:40s} {ours * 1e6:10.2f}us {theirs * 1e6:10.2f}us {theirs / ours:10.2f}x "
              f"{compile_s * 1e3:7.1f}ms")


if __name__ == "__main__":
    main()
