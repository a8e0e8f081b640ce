"""Pipeline.sequential(): the same pipeline with its loops on the calling thread (what
export builds, so the library needs no async runtime)."""

from __future__ import annotations

import numpy as np

import xlamlir as xm
from xlamlir.lowering.pipeline import PARALLEL_LOOPS, SEQUENTIAL_LOOPS, TASKS_TO_LLVM


def test_sequential_drops_only_the_thread_pool_passes() -> None:
    default = xm.Pipeline.default()
    sequential = default.sequential()
    assert sequential.stage_names == default.stage_names
    for stage in default.stage_names:
        expected = [p for p in default.passes(stage) if p is not PARALLEL_LOOPS and p is not TASKS_TO_LLVM]
        assert sequential.passes(stage) == expected
    assert PARALLEL_LOOPS in default.passes("loops") and TASKS_TO_LLVM in default.passes("llvm")
    assert SEQUENTIAL_LOOPS in sequential.passes("loops")
    assert all("async" not in p for s in sequential.stage_names for p in sequential.passes(s)
               if isinstance(p, str))


def test_sequential_is_a_copy() -> None:
    default = xm.Pipeline.default()
    sequential = default.sequential()
    sequential.replace("fused", "canonicalize")
    assert default.passes("fused") != sequential.passes("fused")


def test_sequential_program_runs_without_the_async_runtime() -> None:
    b = xm.XlaBuilder("big_exp")
    x = b.parameter(0, xm.Shape.array(xm.F32, (512, 1024)))
    b.exp(x)
    exe = xm.compile(b.build(), pipeline=xm.Pipeline.default().sequential())
    assert "async" not in exe.stages["llvm"] and "mlirAsyncRuntime" not in exe.stages["llvm"]
    assert "_parallel_" not in exe.stages["llvm"]
    a = np.linspace(-3, 3, 512 * 1024, dtype=np.float32).reshape(512, 1024)
    np.testing.assert_allclose(exe(a), np.exp(a), rtol=1e-6)
