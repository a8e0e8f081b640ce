"""The benchmark suite (issues #7 and #17): every workload against numpy and JAX (when
importable), with throughput, compile times and the targets, measured in one run.

Each workload checks its result against numpy (or a float64 reference) before timing;
ours, numpy and JAX are each timed in their own block of calls and reported as medians.
A workload whose check fails or whose compile raises is reported and skipped (exit 1).
Columns: `ours/best` is ours / the best of numpy and JAX (goal <= 1.0); `compile` is our
cold compile (in-process cache cleared), `jax comp` JAX's `jit(f).lower(*args).compile()`,
`c ratio` ours / JAX's, `warm` our compile of the same programs in a second process
when the persistent compile cache ($XLAMLIR_CACHE_DIR, runtime/disk_cache.py) exists: a
disk-cache hit (else '-'). The run uses a fresh cache directory, so `compile` includes
storing the entry and never hits one left by an earlier run. Writes `bench/results.json` (with a filter:
`bench/results-only.json`).

    python bench/suite.py [--quick] [--only NAME ...] [name-substring ...]

`--only` and the positional substrings keep the rows whose name contains one of them;
`--quick` runs a quarter of the repetitions (for a developer checking one row).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import timing
from harness import Case, f32_params, measure, normal
from peers import jax, jnp
from timing import CompiledOnly, Measurement, Workload, compile_ours

import xlamlir as xm

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
# The persistent compile cache's switch, when the library has one (runtime/ mentions it).
CACHE_ENV = "XLAMLIR_CACHE_DIR"


def _load_thread_pool() -> None:
    """The one-time builds of the thread pool (~0.15 s with `cc`: runtime/task_pool.py)
    and of the runtime library (30-90 ms: runtime/shared_runtime.py), once per cache
    directory, before any row, so that no row's cold compile carries them."""
    try:
        from xlamlir.runtime.compiler import load_async_runtime
    except ImportError:  # an older library: its first parallel compile loads the runtime
        return
    start = time.perf_counter()
    load_async_runtime()
    what = "thread pool"
    try:
        from xlamlir.runtime import shared_runtime
        from xlamlir.runtime.compiler import JIT_OPT_LEVEL
    except ImportError:  # a library without one
        pass
    else:
        if shared_runtime.runtime_library(JIT_OPT_LEVEL) is not None:
            what += " and runtime library"
    print(f"({what} loaded in {(time.perf_counter() - start) * 1e3:.0f} ms before the rows)")


def persistent_cache_available() -> bool:
    runtime = Path(xm.__file__).resolve().parent / "runtime"
    return any(CACHE_ENV in p.read_text() for p in runtime.glob("*.py"))


def axpy(n: int = 1 << 22) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (a, x, y) = f32_params("axpy", (), (n,), (n,))
        return b.build(b.add(b.mul(a, x), y))

    def args() -> tuple[Any, ...]:
        return (np.float32(2.0), *normal(1, (n,), (n,)))

    return measure(Case(build, args, lambda a, x, y: a * x + y, lambda a, x, y: a * x + y,
                        work=3 * 4 * n, unit="GB/s", repeats=15, rtol=1e-6, atol=0))


def tanh_chain(n: int = 1 << 22) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x, y, z) = f32_params("chain", (n,), (n,), (n,))
        return b.build(b.add(b.mul(b.tanh(b.add(b.mul(x, y), z)), b.constant(np.float32(0.5))),
                             b.exp(b.neg(x))))

    def reference(x: Any, y: Any, z: Any, np: Any = np) -> Any:
        return np.tanh(x * y + z) * np.float32(0.5) + np.exp(-x)

    # atol: cancellation between the two terms
    return measure(Case(build, lambda: normal(0, (n,), (n,), (n,)), reference,
                        jnp and (lambda *a: reference(*a, np=jnp)), work=4 * 4 * n, unit="GB/s",
                        repeats=9, rtol=2e-6, atol=1e-6))


def row_sum(n: int = 2048) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = f32_params("row_sum", (n, n))
        return b.build(b.reduce(x, b.constant(np.float32(0)), lambda acc, v: acc + v, [1]))

    return measure(Case(build, lambda: normal(0, (n, n)), lambda x: x.sum(axis=1),
                        lambda x: x.sum(axis=1), work=4 * n * n, unit="GB/s", repeats=25,
                        rtol=1e-4, atol=1e-3))


def softmax(n: int = 1024) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = f32_params("softmax", (n, n))
        m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
        e = b.exp(b.sub(x, b.broadcast_in_dim(m, (n, n), [0])))
        s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
        return b.build(b.div(e, b.broadcast_in_dim(s, (n, n), [0])))

    def reference(x: Any) -> Any:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return measure(Case(build, lambda: normal(2, (n, n)), reference,
                        jax and (lambda x: jax.nn.softmax(x, axis=1)), work=2 * 4 * n * n,
                        unit="GB/s", repeats=15, rtol=1e-5, atol=1e-8))


def while_loop(trips: int = 1000, n: int = 16) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = f32_params("while", (n,))

        def cond(t: Any) -> Any:
            bb = t.builder
            return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(trips)))

        def body(t: Any) -> Any:
            bb = t.builder
            i, v = bb.get_tuple_element(t, 0), bb.get_tuple_element(t, 1)
            return bb.tuple([bb.add(i, bb.constant(np.int32(1))),
                             bb.add(bb.mul(v, bb.constant(np.float32(0.999))),
                                    bb.constant(np.float32(0.001)))])

        loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
        return b.build(b.get_tuple_element(loop, 1))

    def reference(v: np.ndarray) -> np.ndarray:
        for _ in range(trips):
            v = v * np.float32(0.999) + np.float32(0.001)
        return v

    def jax_loop(v: Any) -> Any:
        return jax.lax.fori_loop(0, trips, lambda _, v: v * np.float32(0.999) + np.float32(0.001), v)

    return measure(Case(build, lambda: (np.linspace(-1, 1, n, dtype=np.float32),), reference,
                        jax and jax_loop, work=2 * trips * n, unit="GFLOP/s", repeats=51,
                        rtol=1e-5, atol=1e-6))


def scalar_add() -> Measurement:
    """Per-call overhead: numpy scalars in, numpy out (means of many calls, not medians)."""
    b, (x, y) = f32_params("scalar_add", (), ())
    (exe,), compile_s = compile_ours(b.build(b.add(x, y)))
    xv, yv = np.float32(1.5), np.float32(2.25)
    assert exe(xv, yv) == xv + yv
    jax_s = jax_compile_s = None
    if jax is not None:
        from peers import jax_compile

        to_numpy, _, jax_compile_s = jax_compile(lambda a, c: a + c, (xv, yv))
        assert to_numpy() == xv + yv
        add = jax.jit(lambda a, c: a + c)
        add(xv, yv)
        jax_s = timing.best_of(lambda: np.asarray(add(xv, yv)), 9, 200)  # numpy in -> numpy out
    return Measurement(ours_s=timing.best_of(lambda: exe(xv, yv), 9, 2000),
                       numpy_s=timing.best_of(lambda: np.add(xv, yv), 9, 2000), jax_s=jax_s,
                       compile_s=compile_s, work=None, unit="", jax_compile_s=jax_compile_s)


def all_workloads() -> list[Workload]:
    """Issue #7's rows, then issue #17's. Matmul, relu(x@W+b) and the 3x3 conv are
    bench/dot.py's and bench/conv.py's `workloads()` (their owners tune them)."""
    import array_ops
    import conv
    import dot
    import nn_ops

    return [
        Workload("axpy f32[4M]", axpy, 2.7e-3),
        Workload("tanh(x*y+z)*0.5+exp(-x) f32[4M]", tanh_chain, 4.0e-3),
        Workload("row sum f32[2048,2048]", row_sum, 0.47e-3),
        Workload("softmax f32[1024,1024] last axis", softmax, 0.75e-3),
        *dot.workloads(),
        *conv.workloads(),
        Workload("while 1000 x (x*0.999+0.001) f32[16]", while_loop, 18e-6),
        Workload("scalar add, numpy in/out, per call", scalar_add, 5e-6),
        *nn_ops.workloads(),
        *array_ops.workloads(),
    ]


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f}us" if s < 1e-3 else f"{s * 1e3:.2f}ms" if s < 1 else f"{s:.2f}s"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}"


def warm_compile(name: str, cache_dir: str) -> float | None:
    """Our compile of workload `name` in a fresh process sharing this run's cache directory
    (the cold compile in this process filled it). None, with a note, unless every program
    of the row was a disk-cache hit there. A miss is tried once more: the cache key holds a
    digest of the library's sources, so an edit of the tree since this process started
    misses (and stores the entry again, for the retry)."""
    env = dict(os.environ, **{CACHE_ENV: cache_dir})
    status = "-"
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(HERE / "suite.py"), "--compile-only", name],
                              cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
        fields = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        if "compile_s" not in fields:
            print(f"  (warm compile of {name!r} failed: {proc.stderr.strip()[-300:]})", flush=True)
            return None
        status = fields.get("disk_cache", "-")
        if set(status.split(",")) == {"hit"}:
            return float(fields["compile_s"])
    print(f"  (warm compile of {name!r}: disk cache {status}, not a hit)", flush=True)
    return None


def compile_only(name: str) -> int:
    """The warm-cache subprocess: compile workload `name`'s programs, print the seconds and
    each program's disk-cache status (hit/miss/off)."""
    timing.COMPILE_ONLY = True
    for workload in all_workloads():
        if workload.name == name:
            try:
                workload.run()
            except CompiledOnly as done:
                print(f"compile_s={done.seconds}")
                print(f"disk_cache={','.join(done.disk_cache)}")
                return 0
    print(f"no workload named {name!r} compiled", file=sys.stderr)
    return 1


COLUMNS = [("workload", 44), ("ours", 9), ("numpy", 9), ("jax", 9), ("ours/best", 9),
           ("throughput", 15), ("compile", 8), ("jax comp", 8), ("c ratio", 7), ("warm", 8),
           ("target", 8), ("met", 4)]


def _line(cells: list[str]) -> str:
    first = f"{cells[0]:{COLUMNS[0][1]}s}"
    return " ".join([first] + [f"{c:>{w}s}" for c, (_, w) in zip(cells[1:], COLUMNS[1:])])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filters", nargs="*", help="keep rows whose name contains one of these")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="keep rows whose name contains NAME (repeatable)")
    parser.add_argument("--quick", action="store_true", help="a quarter of the repetitions")
    parser.add_argument("--compile-only", metavar="NAME", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.compile_only:
        return compile_only(opts.compile_only)
    timing.QUICK = opts.quick
    filters = opts.filters + opts.only
    cache_dir = None
    before = os.environ.get(CACHE_ENV)
    cache_off = before is not None and before.strip().lower() in ("", "0", "off")
    if persistent_cache_available() and not cache_off:
        # Cold: an empty cache (so the compile and the store), never an entry left by an
        # earlier run in the default directory; warm: a second process's hit on it.
        cache_dir = tempfile.mkdtemp(prefix="xlamlir-bench-cache-")
        os.environ[CACHE_ENV] = cache_dir
    try:
        return _run(opts, filters, cache_dir)
    finally:
        if cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)
            if before is None:
                del os.environ[CACHE_ENV]
            else:
                os.environ[CACHE_ENV] = before


def _run(opts: argparse.Namespace, filters: list[str], cache_dir: str | None) -> int:
    _load_thread_pool()
    rows, failures = [], []
    header = _line([name for name, _ in COLUMNS])
    print(header)
    print("-" * len(header), flush=True)
    for workload in all_workloads():
        if filters and not any(f in workload.name for f in filters):
            continue
        try:
            m = workload.run()
        except Exception as error:  # noqa: BLE001 - a failing row is reported, the rest still run
            failures.append({"workload": workload.name, "error": f"{type(error).__name__}: {error}"})
            print(f"{workload.name:44s} SKIPPED: {type(error).__name__}: "
                  f"{str(error).strip().splitlines()[0] if str(error).strip() else ''}", flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
            continue
        if cache_dir is not None:
            m.warm_compile_s = warm_compile(workload.name, cache_dir)
        peers = [t for t in (m.numpy_s, m.jax_s) if t is not None]
        best = min(peers)
        met = None if workload.target_s is None else m.ours_s <= workload.target_s
        throughput = f"{m.work / m.ours_s / 1e9:.1f} {m.unit}" if m.work else ""
        print(_line([workload.name, _fmt_time(m.ours_s), _fmt_time(m.numpy_s), _fmt_time(m.jax_s),
                     _ratio(m.ours_s, best), throughput,
                     _fmt_time(m.compile_s), _fmt_time(m.jax_compile_s),
                     _ratio(m.compile_s, m.jax_compile_s), _fmt_time(m.warm_compile_s),
                     _fmt_time(workload.target_s), "-" if met is None else ("yes" if met else "NO")]),
              flush=True)
        rows.append({"workload": workload.name, "ours_s": m.ours_s, "numpy_s": m.numpy_s,
                     "jax_s": m.jax_s, "ours_over_best_peer": m.ours_s / best,
                     "target_s": workload.target_s, "compile_s": m.compile_s,
                     "jax_compile_s": m.jax_compile_s, "warm_compile_s": m.warm_compile_s,
                     "throughput": throughput, "met": met})
    compiles = sorted(r["compile_s"] for r in rows)
    median_compile = compiles[len(compiles) // 2] if compiles else 0.0
    print(f"{'compile time (JIT), median over the above':44s} {median_compile * 1e3:8.0f} ms "
          f"(target <= 150 ms: {'yes' if median_compile <= 0.150 else 'NO'})")
    slow = [r for r in rows if r["ours_over_best_peer"] > 1.0]
    if slow:
        print("slower than the best peer (ours/best > 1): "
              + ", ".join(f"{r['workload']} {r['ours_over_best_peer']:.2f}" for r in slow))
    for f in failures:
        print(f"FAILED: {f['workload']}: {f['error']}")
    if jax is None:
        print("(JAX not importable: install the `bench` extra for the JAX columns)")
    if cache_dir is None:
        print(f"(no persistent compile cache ({CACHE_ENV}) in runtime/, or it is off: warm column '-')")
    # A partial run (--only) must not replace the last full run's table.
    out = RESULTS if not filters else RESULTS.with_name("results-only.json")
    out.write_text(json.dumps({"cpu_count": os.cpu_count(), "quick": opts.quick,
                               "jax": jax.__version__ if jax else None,
                               "median_compile_s": median_compile, "workloads": rows,
                               "failures": failures, "time": time.strftime("%Y-%m-%d %H:%M:%S")},
                              indent=1))
    print(f"results written to {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
