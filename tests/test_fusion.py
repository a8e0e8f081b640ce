"""Duplication of cheap multi-use producers into their consumers (lowering/fusion.py):
softmax has no temporary as large as its input and sums the exp inside the reduction;
what is not cheap, or would be recomputed per broadcast element, stays one op; results
checked against numpy, NaN and infinite rows included."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_vectorization import f32, softmax  # the same softmax the vectorization tests build

import xlamlir as xm
from xlamlir.lowering.passes.fusion import duplicate_cheap_producers
from xlamlir.lowering.passes.row_softmax import rows_softmax

F32 = xm.F32


def reference_softmax(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def generics(text: str) -> list[str]:
    """The linalg.generic ops of a tensor-level stage, each with its body."""
    return re.findall(r"linalg\.generic \{.*?\n\s*\} -> tensor<[^\n]*", text, re.S)


def test_pass_is_in_the_fused_stage() -> None:
    assert duplicate_cheap_producers in xm.Pipeline.default().passes("fused")


def without_rows_softmax() -> xm.Pipeline:
    """The default pipeline without rows_softmax, which replaces the fused softmax
    (lowering/passes/row_softmax.py, tests/test_row_softmax.py)."""
    pipeline = xm.Pipeline.default()
    return pipeline.replace("fused", [p for p in pipeline.passes("fused") if p is not rows_softmax])


def test_softmax_has_no_temporary_and_sums_exp_in_the_reduction() -> None:
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, f32(1024, 1024))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (1024, 1024), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.div(e, b.broadcast_in_dim(s, (1024, 1024), [0]))
    fused = xm.compile(b.build(), pipeline=without_rows_softmax()).stages["fused"]
    # Only the result is 1024x1024: the exp is not materialized.
    assert fused.count("tensor.empty() : tensor<1024x1024xf32>") == 1
    assert "bufferization.alloc_tensor" not in fused
    reductions = [g for g in generics(fused) if '"reduction"' in g]
    assert any("math.exp" in g and "arith.addf" in g for g in reductions)
    # The division recomputes the exp from the input.
    assert any("math.exp" in g and "arith.divf" in g for g in generics(fused))


def test_softmax_bufferized_allocates_no_large_buffer() -> None:
    bufferized = softmax(1024, 1024).stages["bufferized"]
    assert not re.search(r"memref\.alloc\(\) [^\n]*memref<1024x1024xf32>", bufferized)
    # The lane-split accumulators ([1024, 16]) and row results are the only temporaries.
    for m in re.finditer(r"memref\.alloc\(\)[^\n]*: (memref<[^>]*>)", bufferized):
        assert "1024x1024" not in m.group(1)


@pytest.mark.parametrize(("rows", "cols"), [(1024, 1024), (64, 256), (7, 40), (3, 17)])
def test_softmax_correct(rows: int, cols: int) -> None:
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=np.float32) * 5
    np.testing.assert_allclose(softmax(rows, cols)(x), reference_softmax(x), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("cols", [64, 40])
def test_softmax_nan_and_infinite_rows(cols: int) -> None:
    rows = 8
    x = np.random.default_rng(cols).standard_normal((rows, cols), dtype=np.float32)
    x[1, 5] = np.nan  # one NaN: the row is NaN
    x[2, :] = np.nan
    x[3, 7] = np.inf  # inf - inf: NaN
    x[4, :] = -np.inf  # max -inf, -inf - -inf: NaN
    x[5, 3] = -np.inf  # exp(-inf) = 0, the rest is finite
    x[6, :] = 80.0  # exp would overflow without subtracting the max
    x[7, 0] = 1e30
    got = softmax(rows, cols)(x)
    expected = reference_softmax(x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)  # NaNs where numpy's
    assert np.isnan(got[[1, 2, 3, 4]]).all() and np.isfinite(got[[0, 5, 6, 7]]).all()


def test_elementwise_consumers_each_recompute_the_producer() -> None:
    b = xm.XlaBuilder("two_users")
    x = b.parameter(0, f32(64, 64))
    e = b.exp(x)
    b.tuple([b.add(e, b.constant(np.float32(1))), b.mul(e, e)])
    exe = xm.compile(b.build())
    fused = exe.stages["fused"]
    gens = generics(fused)
    # Two loops, each computing its own exp; no generic writes the exp alone.
    assert len(gens) == 2 and all("math.exp" in g for g in gens)
    xv = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
    got = exe(xv)
    np.testing.assert_allclose(got[0], np.exp(xv) + 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(xv) * np.exp(xv), rtol=1e-5)


def test_producer_kept_for_a_user_that_cannot_fuse() -> None:
    # exp is also a result: it is written once, and recomputed inside the reduction.
    b = xm.XlaBuilder("exp_and_sum")
    x = b.parameter(0, f32(32, 128))
    e = b.exp(x)
    b.tuple([e, b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])])
    exe = xm.compile(b.build())
    reductions = [g for g in generics(exe.stages["fused"]) if '"reduction"' in g]
    assert any("math.exp" in g for g in reductions)
    xv = np.random.default_rng(1).standard_normal((32, 128), dtype=np.float32)
    got = exe(xv)
    np.testing.assert_allclose(got[0], np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(xv).sum(axis=1), rtol=1e-5)


def test_not_duplicated_into_a_broadcasting_consumer() -> None:
    # y = exp(v) has two users; one reads it broadcast over 256 columns: fusing there would
    # compute each exp 256 times, so y stays one loop (the other user may take it).
    b = xm.XlaBuilder("broadcast_user")
    v = b.parameter(0, f32(256))
    m = b.parameter(1, f32(256, 256))
    y = b.exp(v)
    b.tuple([b.add(m, b.broadcast_in_dim(y, (256, 256), [0])), b.mul(y, y)])
    exe = xm.compile(b.build())
    gens = generics(exe.stages["fused"])
    assert sum("math.exp" in g for g in gens) == 1
    vv = np.random.default_rng(2).standard_normal(256, dtype=np.float32)
    mv = np.random.default_rng(3).standard_normal((256, 256), dtype=np.float32)
    got = exe(vv, mv)
    np.testing.assert_allclose(got[0], mv + np.exp(vv)[:, None], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(got[1], np.exp(vv) ** 2, rtol=1e-5)


def test_expensive_producer_not_duplicated() -> None:
    b = xm.XlaBuilder("expensive")
    x = b.parameter(0, f32(64, 64))
    y = b.tanh(b.exp(b.log(b.exp(x))))  # three transcendental ops: computed once
    b.tuple([b.add(y, x), b.mul(y, x)])
    exe = xm.compile(b.build())
    gens = generics(exe.stages["fused"])
    assert sum("math.log" in g for g in gens) == 1
    xv = np.random.default_rng(4).standard_normal((64, 64), dtype=np.float32)
    y_ref = np.tanh(np.exp(np.log(np.exp(xv))))
    got = exe(xv)
    np.testing.assert_allclose(got[0], y_ref + xv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], y_ref * xv, rtol=1e-5, atol=1e-6)
