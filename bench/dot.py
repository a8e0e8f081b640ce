"""Matmul f32 1024^3 and relu(x@W+b) 256x1024x1024 against numpy's BLAS (and JAX).

Both go through the default pipeline, whose "tiled" stage packs, tiles,
vectorizes and splits the matmul across cores and fuses the bias + relu into it
(lowering/passes/schedules.py). Each checks its result against numpy first, then times
ours, numpy and JAX, each in its own block of calls, and reports medians. `workloads()` is what
bench/suite.py runs for these two rows. Run with `python bench/dot.py [m k n]`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from peers import jax, jax_compile, jnp
from timing import Measurement, Workload, compile_ours, medians

import xlamlir as xm


def dense(m: int, k: int, n: int, relu: bool, rounds: int = 15) -> Measurement:
    """x[m,k] @ w[k,n] (+ bias[n], relu when `relu`): checked, then timed."""
    b = xm.XlaBuilder("relu_dense" if relu else "matmul")
    x = b.parameter(0, xm.Shape.array(xm.F32, (m, k)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (k, n)))
    shapes = [(m, k), (k, n)]
    y = b.dot(x, w)
    if relu:
        bias = b.parameter(2, xm.Shape.array(xm.F32, (n,)))
        shapes.append((n,))
        y = b.max(b.add(y, b.broadcast_in_dim(bias, (m, n), (1,))), b.constant(np.float32(0)))
    (exe,), compile_s = compile_ours(b.build())
    assert "vector.fma" in exe.stages["tiled"], "the matmul schedule did not apply"

    rng = np.random.default_rng(0)
    args = tuple(rng.standard_normal(s, dtype=np.float32) for s in shapes)

    def reference(*a: Any, np: Any = np) -> Any:
        out = a[0] @ a[1]
        return np.maximum(out + a[2], 0) if relu else out

    expected = reference(*(a.astype(np.float64) for a in args))
    # Sums of k products of unit normals: absolute errors scale with sqrt(k) * eps(f32).
    tol = dict(rtol=1e-4, atol=1e-3 * np.sqrt(k / 64))
    np.testing.assert_allclose(exe(*args), expected, **tol)
    jax_call = jax_compile_s = None
    if jax is not None:
        to_numpy, jax_call, jax_compile_s = jax_compile(lambda *a: reference(*a, np=jnp), args)
        np.testing.assert_allclose(to_numpy(), expected, **tol)
    ours, theirs, jax_s = medians([lambda: exe(*args), lambda: reference(*args), jax_call], rounds)
    return Measurement(ours_s=ours, numpy_s=theirs, jax_s=jax_s, compile_s=compile_s,
                       work=2 * m * k * n, unit="GFLOP/s", jax_compile_s=jax_compile_s)


def workloads() -> list[Workload]:
    """The issue's matmul rows, for bench/suite.py."""
    return [
        Workload("matmul f32 1024^3", lambda: dense(1024, 1024, 1024, False), 19e-3),
        Workload("relu(x@W+b) 256x1024x1024", lambda: dense(256, 1024, 1024, True, rounds=41), 3.6e-3),
    ]


def _report(name: str, r: Measurement) -> None:
    gflop = (r.work or 0) / 1e9
    print(f"{name}  (compile {r.compile_s * 1e3:.0f} ms, medians)")
    print(f"  xlamlir {r.ours_s * 1e3:8.2f} ms  {gflop / r.ours_s:7.1f} GFLOP/s")
    print(f"  numpy   {r.numpy_s * 1e3:8.2f} ms  {gflop / r.numpy_s:7.1f} GFLOP/s")
    if r.jax_s is not None:
        print(f"  jax     {r.jax_s * 1e3:8.2f} ms  {gflop / r.jax_s:7.1f} GFLOP/s")
    print(f"  ratio (xlamlir / numpy): {r.ours_s / r.numpy_s:.2f}x")


def main(argv: list[str]) -> None:
    if len(argv) == 3:
        m, k, n = (int(a) for a in argv)
        _report(f"dot f32[{m},{k}] x f32[{k},{n}]", dense(m, k, n, False))
        return
    for w in workloads():
        _report(w.name, w.run())


if __name__ == "__main__":
    main(sys.argv[1:])
