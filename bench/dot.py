"""dot of two f32[1024,1024] matrices (lowered to linalg.matmul) against numpy's BLAS.

Checks the result against numpy first, then prints the median of a few timed
runs after a warm-up for both, and the ratio (ours / numpy). Only measures:
the matmul goes through the default pipeline as it is. Run with
`python bench/dot.py [n]`.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from timing import median_time

import xlamlir as xm


def main(n: int = 1024, repeats: int = 5) -> None:
    b = xm.XlaBuilder("matmul")
    shape = xm.Shape.array(xm.F32, (n, n))
    b.dot(b.parameter(0, shape), b.parameter(1, shape))
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    assert "linalg.matmul" in exe.stages["linalg"]

    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((n, n), dtype=np.float32)
    rhs = rng.standard_normal((n, n), dtype=np.float32)
    expected = lhs.astype(np.float64) @ rhs.astype(np.float64)
    # Sums of n products of unit normals: absolute errors scale with sqrt(n) * eps(f32).
    np.testing.assert_allclose(exe(lhs, rhs), expected, rtol=1e-4, atol=1e-3 * np.sqrt(n / 64))

    ours = median_time(lambda: exe(lhs, rhs), repeats)
    theirs = median_time(lambda: lhs @ rhs, repeats)
    gflop = 2 * n**3 / 1e9
    print(f"dot f32[{n},{n}] x f32[{n},{n}]  (compile {compile_s:.2f} s, median of {repeats})")
    print(f"  xlamlir {ours * 1e3:10.2f} ms  {gflop / ours:8.2f} GFLOP/s")
    print(f"  numpy   {theirs * 1e3:10.2f} ms  {gflop / theirs:8.2f} GFLOP/s")
    print(f"  ratio (xlamlir / numpy): {ours / theirs:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
