"""Matmul f32 1024^3 and relu(x@W+b) 256x1024x1024 against numpy's BLAS (and JAX).

Both go through the default pipeline, whose "tiled" stage packs, tiles,
vectorizes and splits the matmul across cores and fuses the bias + relu into it
(lowering/passes/schedules.py). Each checks its result against numpy first, then times
ours, numpy and JAX, each in its own block of calls, and reports medians. `workloads()` is what
bench/suite.py runs for these two rows. Run with `python bench/dot.py [m k n]`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import Measurement, Workload

import xlamlir as xm
from xlamlir.runtime.compiler import clear_cache

try:  # optional: the `bench` extra
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
except Exception:  # noqa: BLE001 - any import problem means "no JAX column"
    jax = None
    jnp = None


def medians(fns: list[Callable[[], Any] | None], rounds: int) -> list[float | None]:
    """Median seconds per call of each fn, each timed in its own block of `rounds` calls
    after a warm-up call. Not interleaved: OpenBLAS's threads spin for a while after a
    call and would take the cores from the next call of another library."""
    times: list[float | None] = []
    for f in fns:
        if f is None:
            times.append(None)
            continue
        f()
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            f()
            samples.append(time.perf_counter() - start)
        times.append(float(np.median(samples)))
    return times


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
    computation = b.build()
    clear_cache()
    start = time.perf_counter()
    exe = xm.compile(computation)
    compile_s = time.perf_counter() - start
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
    jax_call = None
    if jax is not None:
        jitted = jax.jit(lambda *a: reference(*a, np=jnp))
        device_args = tuple(jnp.asarray(a) for a in args)
        np.testing.assert_allclose(np.asarray(jitted(*device_args)), expected, **tol)
        jax_call = lambda: jitted(*device_args).block_until_ready()  # noqa: E731
    ours, theirs, jax_s = medians([lambda: exe(*args), lambda: reference(*args), jax_call], rounds)
    return Measurement(ours_s=ours, numpy_s=theirs, jax_s=jax_s, compile_s=compile_s,
                       work=2 * m * k * n, unit="GFLOP/s")


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
