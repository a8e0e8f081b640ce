"""The benchmark suite of issue #7: every workload against numpy (and JAX when importable),
with targets, throughput and compile time, measured in one run.

Each workload checks its result against numpy before timing. Prints one table
and writes `bench/results.json`. Matmul, relu(x@W+b) and convolution come from
`workloads()` in bench/dot.py and bench/conv.py. Run with `make bench` or
`python bench/suite.py [name-substring ...]` from the repository root.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import Measurement, Workload, median_time

import xlamlir as xm
from xlamlir.runtime.compiler import clear_cache

try:  # optional: the `bench` extra
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
except Exception:  # noqa: BLE001 - any import problem means "no JAX column"
    jax = None
    jnp = None

F32 = xm.F32


def _compile(b: xm.XlaBuilder, root: Any = None) -> tuple[Any, float]:
    computation = b.build(root) if root is not None else b.build()
    clear_cache()  # compile time of a fresh compile, not a cache hit
    start = time.perf_counter()
    exe = xm.compile(computation)
    return exe, time.perf_counter() - start


def _jax_time(fn: Callable[..., Any], args: tuple[Any, ...], expected: np.ndarray, repeats: int,
              rtol: float, atol: float) -> float | None:
    if jax is None:
        return None
    jitted = jax.jit(fn)
    device_args = tuple(jnp.asarray(a) for a in args)
    np.testing.assert_allclose(np.asarray(jitted(*device_args)), expected, rtol=rtol, atol=atol)
    return median_time(lambda: jitted(*device_args).block_until_ready(), repeats)


def axpy(n: int = 1 << 22) -> Measurement:
    b = xm.XlaBuilder("axpy")
    a = b.parameter(0, xm.Shape.array(F32, ()))
    x = b.parameter(1, xm.Shape.array(F32, (n,)))
    y = b.parameter(2, xm.Shape.array(F32, (n,)))
    b.add(b.mul(a, x), y)
    exe, compile_s = _compile(b)
    rng = np.random.default_rng(1)
    av = np.float32(2.0)
    xv, yv = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    expected = av * xv + yv
    np.testing.assert_allclose(exe(av, xv, yv), expected, rtol=1e-6)
    return Measurement(
        ours_s=median_time(lambda: exe(av, xv, yv), 15),
        numpy_s=median_time(lambda: av * xv + yv, 15),
        jax_s=_jax_time(lambda a, x, y: a * x + y, (av, xv, yv), expected, 15, 1e-6, 0),
        compile_s=compile_s, work=3 * 4 * n, unit="GB/s")


def tanh_chain(n: int = 1 << 22) -> Measurement:
    b = xm.XlaBuilder("chain")
    shape = xm.Shape.array(F32, (n,))
    x, y, z = (b.parameter(i, shape) for i in range(3))
    b.add(b.mul(b.tanh(b.add(b.mul(x, y), z)), b.constant(np.float32(0.5))), b.exp(b.neg(x)))
    exe, compile_s = _compile(b)
    rng = np.random.default_rng(0)
    args = tuple(rng.standard_normal(n, dtype=np.float32) for _ in range(3))

    def reference(x: Any, y: Any, z: Any, np: Any = np) -> Any:
        return np.tanh(x * y + z) * np.float32(0.5) + np.exp(-x)

    expected = reference(*args)
    np.testing.assert_allclose(exe(*args), expected, rtol=2e-6, atol=1e-6)  # cancellation
    return Measurement(
        ours_s=median_time(lambda: exe(*args), 9), numpy_s=median_time(lambda: reference(*args), 5),
        jax_s=_jax_time(lambda x, y, z: reference(x, y, z, jnp), args, expected, 9, 2e-6, 1e-6),
        compile_s=compile_s, work=4 * 4 * n, unit="GB/s")


def row_sum(n: int = 2048) -> Measurement:
    b = xm.XlaBuilder("row_sum")
    x = b.parameter(0, xm.Shape.array(F32, (n, n)))
    b.reduce(x, b.constant(np.float32(0)), lambda acc, v: acc + v, [1])
    exe, compile_s = _compile(b)
    xv = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    expected = xv.sum(axis=1)
    np.testing.assert_allclose(exe(xv), expected, rtol=1e-4, atol=1e-3)
    return Measurement(
        ours_s=median_time(lambda: exe(xv), 25), numpy_s=median_time(lambda: xv.sum(axis=1), 25),
        jax_s=_jax_time(lambda x: x.sum(axis=1), (xv,), expected, 25, 1e-4, 1e-3),
        compile_s=compile_s, work=4 * n * n, unit="GB/s")


def softmax(n: int = 1024) -> Measurement:
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, xm.Shape.array(F32, (n, n)))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (n, n), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.div(e, b.broadcast_in_dim(s, (n, n), [0]))
    exe, compile_s = _compile(b)
    xv = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)

    def reference(x: Any, np: Any = np) -> Any:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    expected = reference(xv)
    np.testing.assert_allclose(exe(xv), expected, rtol=1e-5, atol=1e-8)
    jax_s = None
    if jax is not None:
        jax_s = _jax_time(lambda x: jax.nn.softmax(x, axis=1), (xv,), expected, 15, 1e-5, 1e-8)
    return Measurement(
        ours_s=median_time(lambda: exe(xv), 15), numpy_s=median_time(lambda: reference(xv), 9),
        jax_s=jax_s, compile_s=compile_s, work=2 * 4 * n * n, unit="GB/s")


def while_loop(trips: int = 1000, n: int = 16) -> Measurement:
    b = xm.XlaBuilder("while")
    x = b.parameter(0, xm.Shape.array(F32, (n,)))

    def cond(t: Any) -> Any:
        bb = t.builder
        return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(trips)))

    def body(t: Any) -> Any:
        bb = t.builder
        i, v = bb.get_tuple_element(t, 0), bb.get_tuple_element(t, 1)
        return bb.tuple([bb.add(i, bb.constant(np.int32(1))),
                         bb.add(bb.mul(v, bb.constant(np.float32(0.999))), bb.constant(np.float32(0.001)))])

    loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
    exe, compile_s = _compile(b, b.get_tuple_element(loop, 1))
    xv = np.linspace(-1, 1, n, dtype=np.float32)

    def reference(v: np.ndarray) -> np.ndarray:
        for _ in range(trips):
            v = v * np.float32(0.999) + np.float32(0.001)
        return v

    expected = reference(xv)
    np.testing.assert_allclose(exe(xv), expected, rtol=1e-5, atol=1e-6)
    jax_s = None
    if jax is not None:
        def jax_loop(v: Any) -> Any:
            return jax.lax.fori_loop(0, trips, lambda _, v: v * np.float32(0.999) + np.float32(0.001), v)
        jax_s = _jax_time(jax_loop, (xv,), expected, 51, 1e-5, 1e-6)
    return Measurement(
        ours_s=median_time(lambda: exe(xv), 51), numpy_s=median_time(lambda: reference(xv), 5),
        jax_s=jax_s, compile_s=compile_s, work=2 * trips * n, unit="GFLOP/s")


def scalar_add() -> Measurement:
    b = xm.XlaBuilder("scalar_add")
    b.add(b.parameter(0, xm.Shape.array(F32, ())), b.parameter(1, xm.Shape.array(F32, ())))
    exe, compile_s = _compile(b)
    x, y = np.float32(1.5), np.float32(2.25)
    assert exe(x, y) == x + y

    def per_call(fn: Callable[[], Any], inner: int = 2000) -> float:
        samples = []
        for _ in range(9):
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - start) / inner)
        return float(np.median(samples))

    jax_s = None
    if jax is not None:
        add = jax.jit(lambda a, c: a + c)
        add(x, y)
        jax_s = per_call(lambda: np.asarray(add(x, y)), 200)  # numpy in -> numpy out
    return Measurement(ours_s=per_call(lambda: exe(x, y)), numpy_s=per_call(lambda: np.add(x, y)),
                       jax_s=jax_s, compile_s=compile_s, work=None, unit="")


def max_pool() -> Measurement:
    shape = (8, 112, 112, 64)
    n, h, w, c = shape
    b = xm.XlaBuilder("max_pool")
    x = b.parameter(0, xm.Shape.array(F32, shape))
    b.reduce_window(x, b.constant(np.float32(-np.inf)), lambda acc, v: acc.builder.max(acc, v),
                    [1, 2, 2, 1], [1, 2, 2, 1])
    exe, compile_s = _compile(b)
    xv = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)

    def reference() -> np.ndarray:
        return xv.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))

    np.testing.assert_array_equal(exe(xv), reference())
    return Measurement(ours_s=median_time(lambda: exe(xv), 9), numpy_s=median_time(reference, 9),
                       jax_s=None, compile_s=compile_s, work=xv.nbytes * 5 // 4, unit="GB/s")


def all_workloads() -> list[Workload]:
    """The issue's rows, in its order; matmul, relu(x@W+b) and conv are bench/dot.py's and
    bench/conv.py's `workloads()` (their owners tune them)."""
    import conv
    import dot

    return [
        Workload("axpy f32[4M]", axpy, 2.7e-3),
        Workload("tanh(x*y+z)*0.5+exp(-x) f32[4M]", tanh_chain, 4.0e-3),
        Workload("row sum f32[2048,2048]", row_sum, 0.47e-3),
        Workload("softmax f32[1024,1024] last axis", softmax, 0.75e-3),
        *dot.workloads(),
        *conv.workloads(),
        Workload("while 1000 x (x*0.999+0.001) f32[16]", while_loop, 18e-6),
        Workload("scalar add, numpy in/out, per call", scalar_add, 5e-6),
        Workload("max-pool 2x2/2 f32[8,112,112,64]", max_pool, None),
    ]


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def main(filters: list[str]) -> int:
    rows = []
    header = (f"{'workload':44s} {'ours':>10s} {'numpy':>10s} {'jax':>10s} {'target':>10s} "
              f"{'np/ours':>7s} {'jax/ours':>8s} {'throughput':>15s} {'compile':>8s} {'met':>4s}")
    print(header)
    print("-" * len(header))
    for workload in all_workloads():
        if filters and not any(f in workload.name for f in filters):
            continue
        m = workload.run()
        met = None if workload.target_s is None else m.ours_s <= workload.target_s
        throughput = ""
        if m.work:
            scale = 1e9
            throughput = f"{m.work / m.ours_s / scale:.1f} {m.unit}"
        jax_ratio = f"{m.jax_s / m.ours_s:.2f}" if m.jax_s else "-"
        print(f"{workload.name:44s} {_fmt_time(m.ours_s):>10s} {_fmt_time(m.numpy_s):>10s} "
              f"{_fmt_time(m.jax_s):>10s} {_fmt_time(workload.target_s):>10s} "
              f"{m.numpy_s / m.ours_s:7.2f} {jax_ratio:>8s} {throughput:>15s} "
              f"{m.compile_s * 1e3:6.0f}ms {'-' if met is None else ('yes' if met else 'NO'):>4s}",
              flush=True)
        rows.append({"workload": workload.name, "ours_s": m.ours_s, "numpy_s": m.numpy_s,
                     "jax_s": m.jax_s, "target_s": workload.target_s, "compile_s": m.compile_s,
                     "throughput": throughput, "met": met})
    compiles = sorted(r["compile_s"] for r in rows)
    median_compile = compiles[len(compiles) // 2] if compiles else 0.0
    print(f"{'compile time (JIT), median over the above':44s} {median_compile * 1e3:8.0f} ms "
          f"(target <= 150 ms: {'yes' if median_compile <= 0.150 else 'NO'})")
    if jax is None:
        print("(JAX not importable: install the `bench` extra for the JAX column)")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
    with open(out, "w") as f:
        json.dump({"cpu_count": os.cpu_count(), "jax": jax.__version__ if jax else None,
                   "median_compile_s": median_compile, "workloads": rows}, f, indent=1)
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
