"""The thread pool parallel loops run on (runtime/task_pool.py): ours where a C compiler
exists, MLIR's async runtime otherwise or when turned off, the same bits either way.
Its build in the cache directory: test_c_build.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from test_parallel_tasks import inputs, matmul, softmax

import xlamlir as xm
from xlamlir.runtime import c_build, task_pool
from xlamlir.runtime.compiler import _async_runtime, load_async_runtime

needs_cc = pytest.mark.skipif(shutil.which(c_build.compiler()[0]) is None
                              or not task_pool.enabled(), reason="no C compiler, or the pool is off")


def _axpy(n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("axpy")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (n,)))
    b.add(b.mul(b.constant(np.float32(3)), x), y)
    return b.build()


@needs_cc
def test_parallel_loops_run_on_our_pool() -> None:
    load_async_runtime()
    assert _async_runtime[0] is task_pool.library(), task_pool.unavailable_reason()
    x, _ = inputs()
    exe = xm.compile(softmax(256))
    assert exe.dispatches_parallel_loops
    run_before, _ = task_pool.tasks_run()
    first = exe(x)
    for _ in range(20):
        np.testing.assert_array_equal(exe(x), first)
    run_after, _ = task_pool.tasks_run()
    assert run_after > run_before  # at least the probing calls ran in parallel
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(first, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@needs_cc
def test_back_to_back_calls_find_a_worker_spinning() -> None:
    """A worker that ran out of tasks spins before it sleeps: over back-to-back calls of a
    parallel program some task is taken by a spinning worker (none ever is when the
    worker sleeps at once)."""
    load_async_runtime()
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal(1 << 20, dtype=np.float32) for _ in range(2))
    exe = xm.compile(_axpy(1 << 20))
    _, spun_before = task_pool.tasks_run()
    for _ in range(400):
        out = exe(x, y)
        if task_pool.tasks_run()[1] > spun_before:
            break
    assert task_pool.tasks_run()[1] > spun_before
    np.testing.assert_array_equal(out, np.float32(3) * x + y)


def test_programs_called_from_many_threads_at_once() -> None:
    """Tasks of several threads' parallel loops queued at once: every call gives the
    single-threaded bits (tokens, the queue and waking under contention)."""
    x, w = inputs()
    soft, mm = xm.compile(softmax(256)), xm.compile(matmul(192))
    programs = [(lambda: soft(x)), (lambda: mm(w, w))]
    want = [call() for call in programs]
    failures: list[str] = []

    def calls(i: int) -> None:
        for _ in range(15):
            if not np.array_equal(programs[i % 2](), want[i % 2]):
                failures.append(f"thread {i}")

    with ThreadPoolExecutor(6) as threads:
        list(threads.map(calls, range(6)))
    assert not failures


_CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import test_parallel_tasks as t
    import xlamlir as xm
    from xlamlir.runtime import task_pool
    from xlamlir.runtime.compiler import _async_runtime, load_async_runtime
    load_async_runtime()
    x, w = t.inputs()
    np.save(sys.argv[2], xm.compile(t.softmax(256))(x))
    np.save(sys.argv[3], xm.compile(t.matmul(192))(w, w))
    print(json.dumps({"library": os.path.basename(_async_runtime[0]._name),
                      "why": task_pool.unavailable_reason()}))
""")


@pytest.mark.parametrize("how", ["off", "no compiler"])
def test_mlir_runtime_without_our_pool_gives_the_same_bits(how: str, tmp_path: Path) -> None:
    x, w = inputs()
    ours = xm.compile(softmax(256))(x), xm.compile(matmul(192))(w, w)
    paths = [tmp_path / "softmax.npy", tmp_path / "matmul.npy"]
    env = {k: v for k, v in os.environ.items() if k != task_pool.ENV}  # as the case sets it
    env["XLAMLIR_CACHE_DIR"] = "off"
    env.update({task_pool.ENV: "off"} if how == "off" else {"CC": str(tmp_path / "no-cc")})
    run = subprocess.run([sys.executable, "-c", _CHILD, __file__, *map(str, paths)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    child = json.loads(run.stdout.splitlines()[-1])
    assert child["library"] == "libmlir_async_runtime.so"
    assert ("is off" if how == "off" else "no C compiler") in child["why"]
    for got, path in zip(ours, paths):
        np.testing.assert_array_equal(np.load(path), got)
