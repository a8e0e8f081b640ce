"""Masked stores of narrow integers never reach LLVM's x86 backend
(lowering/passes/masked_stores.py): LLVM 22 wrote past a masked store's lanes on AVX-512
(LLVM issue #179489) when a row's last vector had one valid element: bytes past a
result's end (reduce of bf16 rows), or the next row's first elements (a sort of u8 rows).

Results are written into a guarded buffer (its bytes past the end checked after the call)
on every target; the canary shows the backend bug is still there without the pass.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from guarded_results import guarded_call
from targets_support import TARGETS, compile_for, runs_here

import xlamlir as xm
from xlamlir.lowering import pipeline as pipeline_module
from xlamlir.lowering.passes.masked_stores import partial_masked_stores_by_lane

BF16 = np.dtype(ml_dtypes.bfloat16)

def _reduce_rows(dtype: np.dtype, shape: tuple[int, ...], dims: tuple[int, ...]) -> xm.XlaComputation:
    b = xm.XlaBuilder("reduce")
    p = b.parameter(0, xm.Shape.array(xm.type_of(dtype), shape))
    b.reduce(p, b.constant(np.zeros((), dtype)), lambda u, v: u + v, dims)
    return b.build()


def _convert(source: np.dtype, dtype: np.dtype, n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("convert")
    p = b.parameter(0, xm.Shape.array(xm.type_of(source), (n,)))
    b.convert_element_type(p, xm.type_of(dtype))
    return b.build()


def _sort_rows(dtype: np.dtype, shape: tuple[int, ...]) -> xm.XlaComputation:
    b = xm.XlaBuilder("sort")
    b.sort(b.parameter(0, xm.Shape.array(xm.type_of(dtype), shape)), dimension=1)
    return b.build()


def _values(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32).astype(dtype) \
        if dtype.kind == "f" or dtype == BF16 else \
        np.random.default_rng(seed).integers(0, 11, shape).astype(dtype)


# (name, computation, argument, expected): each with rows whose last vector is partial.
def _cases() -> list[tuple[str, object, object]]:
    cases = []
    for dtype in (BF16, np.dtype(np.float16), np.dtype(np.int16), np.dtype(np.uint8)):
        for shape, dims in (((6, 129), (0,)), ((3, 3, 33), (0,)), ((2, 3, 17), (1,)),
                            ((5, 65), (0,)), ((2, 4, 127), (0, 2))):
            def expected(x: np.ndarray, dims: tuple[int, ...] = dims, dtype: np.dtype = dtype) -> np.ndarray:
                return x.astype(np.float64).sum(axis=dims).astype(dtype)
            cases.append((f"reduce {dtype.name}{list(shape)} dims {dims}",
                          lambda dtype=dtype, shape=shape, dims=dims: _reduce_rows(dtype, shape, dims),
                          lambda dtype=dtype, shape=shape: _values(dtype, shape, 1), expected))
    for source, dtype in ((np.dtype(np.float32), BF16), (np.dtype(np.int32), np.dtype(np.int8)),
                          (np.dtype(np.int32), np.dtype(np.int16)), (np.dtype(np.int64), np.dtype(np.int32))):
        for n in (17, 33, 129):
            cases.append((f"convert {source.name}[{n}] -> {dtype.name}",
                          lambda source=source, dtype=dtype, n=n: _convert(source, dtype, n),
                          lambda source=source, n=n: _values(source, (n,), 2),
                          lambda x, dtype=dtype: x.astype(dtype)))
    for dtype in (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float16)):
        for shape in ((4, 17), (4, 33), (3, 49)):
            cases.append((f"sort {dtype.name}{list(shape)}",
                          lambda dtype=dtype, shape=shape: _sort_rows(dtype, shape),
                          lambda dtype=dtype, shape=shape: _values(dtype, shape, 3),
                          lambda x: np.sort(x, axis=1)))
    return cases


CASES = _cases()
ALL_TARGETS = [*TARGETS, "host"]


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_rows_with_a_partial_last_vector_write_only_their_elements(target: str) -> None:
    failures = []
    for name, build, argument, expected in CASES:
        x = argument()
        got, outside = guarded_call(compile_for(build(), target), (x,))
        want = expected(x)
        if not np.array_equal(np.asarray(got).view(f"u{want.dtype.itemsize}"),
                              want.view(f"u{want.dtype.itemsize}")):
            failures.append(f"{name}: {got} != {want}")
        failures += [f"{name}: {problem}" for problem in outside]
    assert not failures, "\n".join(failures)


_NARROW_MASKED_STORE = re.compile(r"llvm\.intr\.masked\.store .*: vector<\d+x(i8|i16|i32|f16|bf16)>")


def test_no_masked_store_of_a_narrow_type_reaches_llvm() -> None:
    for name, build, _, _ in CASES:
        text = xm.compile(build()).stages["llvm"]
        assert not _NARROW_MASKED_STORE.search(text), name
    # f32 keeps its masked stores (no truncating store writes f32).
    b = xm.XlaBuilder("f32")
    p = b.parameter(0, xm.Shape.array(xm.F32, (6, 129)))
    b.reduce(p, b.constant(np.float32(0)), lambda u, v: u + v, (0,))
    assert "llvm.intr.masked.store" in xm.compile(b.build()).stages["llvm"]


@pytest.mark.skipif(not runs_here("x86-64-v4"), reason="the backend bug is AVX-512 code's")
def test_canary_the_llvm_bug_is_still_there_without_the_pass() -> None:
    """Without the pass, x86-64-v4 code writes two bytes past a bf16[129] result. When an
    LLVM upgrade brings the fix (llvm-project PR #179853) this fails: the pass may go."""
    without = xm.Pipeline.default().replace(
        "llvm", [p for p in xm.Pipeline.default().passes("llvm") if p is not partial_masked_stores_by_lane])
    assert len(without.passes("llvm")) == len(pipeline_module.Pipeline.default().passes("llvm")) - 1
    exe = xm.compile(_reduce_rows(BF16, (6, 129), (0,)), without, target_cpu="x86-64-v4")
    _, outside = guarded_call(exe, (_values(BF16, (6, 129), 1),))
    assert outside and "past its end at +[0, 1]" in outside[0], outside
