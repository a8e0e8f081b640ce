"""Compile time (issue #17): ours per stage and JAX's for the same programs, and the
steady-state run time of what each compiled, measured in one run.

Workloads: axpy f32[4M], softmax f32[1024,1024], matmul f32 512^3, conv 3x3 NHWC
[8,56,56,64]x[3,3,64,64]. Each is compiled `--repeats` times cold (in-process cache
cleared, persistent cache off) and JAX's `jit(f).lower(*args).compile()` as often (a new
function each time, so no hit in JAX's caches); medians. Then the run time of both
executables (median of blocks of calls). Wall and CPU seconds of each compile: on a
shared machine the CPU time is the steadier of the two.

    python bench/compile_time.py [--repeats N] [--no-run] [name-substring ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ["XLAMLIR_CACHE_DIR"] = "off"  # before the library reads it: cold compiles only

import numpy as np
from peers import jax, jnp
from timing import median_time

import xlamlir as xm
from xlamlir.runtime.compiler import clear_cache, load_async_runtime


def _params(name: str, *shapes: tuple[int, ...]) -> tuple[xm.XlaBuilder, list[Any]]:
    b = xm.XlaBuilder(name)
    return b, [b.parameter(i, xm.Shape.array(xm.F32, s)) for i, s in enumerate(shapes)]


def axpy(n: int = 1 << 22) -> tuple[xm.XlaComputation, Callable[..., Any], tuple[Any, ...]]:
    b, (a, x, y) = _params("axpy", (), (n,), (n,))
    rng = np.random.default_rng(0)
    args = (np.float32(2.0), rng.standard_normal(n, dtype=np.float32),
            rng.standard_normal(n, dtype=np.float32))
    return b.build(b.add(b.mul(a, x), y)), lambda a, x, y: a * x + y, args


def softmax(n: int = 1024) -> tuple[xm.XlaComputation, Callable[..., Any], tuple[Any, ...]]:
    b, (x,) = _params("softmax", (n, n))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (n, n), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    args = (np.random.default_rng(0).standard_normal((n, n), dtype=np.float32),)
    return (b.build(b.div(e, b.broadcast_in_dim(s, (n, n), [0]))),
            lambda x: jax.nn.softmax(x, axis=1), args)


def matmul(n: int = 512) -> tuple[xm.XlaComputation, Callable[..., Any], tuple[Any, ...]]:
    b, (x, w) = _params("matmul", (n, n), (n, n))
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32))
    return b.build(b.dot(x, w)), lambda x, w: x @ w, args


def conv2d() -> tuple[xm.XlaComputation, Callable[..., Any], tuple[Any, ...]]:
    shape, kernel = (8, 56, 56, 64), (3, 3, 64, 64)
    b = xm.XlaBuilder("conv3x3")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(xm.F32, shape)),
                           b.parameter(1, xm.Shape.array(xm.F32, kernel)), (1, 1), "SAME",
                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
    rng = np.random.default_rng(0)
    args = (rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(kernel, dtype=np.float32))
    return b.build(), lambda x, k: jax.lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), args


WORKLOADS = {"axpy": axpy, "softmax": softmax, "matmul_512": matmul, "conv2d": conv2d}


def ours(computation: xm.XlaComputation,
         repeats: int) -> tuple[tuple[float, float], dict[str, float], Any]:
    """(median wall, median CPU seconds), the median stage times, the last executable."""
    totals, cpu, parts = [], [], []
    exe = None
    for _ in range(repeats):
        clear_cache()
        start, start_cpu = time.perf_counter(), time.process_time()
        exe = xm.compile(computation)
        totals.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        s = exe.compile_stats
        parts.append({"parse": s["parse_verify_s"], **s["stages_s"], "jit": s["jit_s"]})
    median_parts = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    return (statistics.median(totals), statistics.median(cpu)), median_parts, exe


def theirs(fn: Callable[..., Any], args: tuple[Any, ...],
           repeats: int) -> tuple[tuple[float, float], Any]:
    device_args = tuple(jnp.asarray(a) for a in args)
    times, cpu, compiled = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        compiled = jax.jit(lambda *a: fn(*a)).lower(*device_args).compile()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return ((statistics.median(times), statistics.median(cpu)),
            (lambda: jax.block_until_ready(compiled(*device_args))))


def warm_up() -> None:
    """One small compile each: the first compile of a process loads libraries and
    registers passes (ours) or initializes the backend (JAX), which no workload should pay;
    and the thread pool, built once per cache directory (with the cache off, per process)."""
    load_async_runtime()
    computation, fn, args = axpy(16)
    ours(computation, 1)
    if jax:
        theirs(fn, args, 1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-run", action="store_true", help="compile times only")
    parser.add_argument("names", nargs="*")
    opts = parser.parse_args(argv)
    warm_up()
    for name, make in WORKLOADS.items():
        if opts.names and not any(n in name for n in opts.names):
            continue
        computation, jax_fn, args = make()
        (ours_s, ours_cpu), parts, exe = ours(computation, opts.repeats)
        (jax_s, jax_cpu), jax_call = (theirs(jax_fn, args, opts.repeats) if jax
                                      else ((float("nan"), float("nan")), None))
        stages = " ".join(f"{k}={v * 1e3:.0f}" for k, v in parts.items())
        print(f"{name:11s} compile ours {ours_s * 1e3:6.1f} ms (CPU {ours_cpu * 1e3:6.1f})  "
              f"jax {jax_s * 1e3:6.1f} ms (CPU {jax_cpu * 1e3:6.1f})  ratio {ours_s / jax_s:5.2f}"
              f"   [{stages}]", flush=True)
        if not opts.no_run:
            run_ours = median_time(lambda: exe(*args), 20)
            run_jax = median_time(jax_call, 20) if jax_call else float("nan")
            print(f"{'':11s} run     ours {run_ours * 1e3:6.3f} ms  jax {run_jax * 1e3:6.3f} ms  "
                  f"ratio {run_ours / run_jax:5.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
