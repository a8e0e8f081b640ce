"""Elementwise results written over a temporary they last read (lowering/passes/in_place.py)
and the second round of producer duplication: attention keeps one [heads, seq, seq]
buffer (scores, then probabilities in place) instead of three; parameters, outputs and
values read later are never overwritten. Results checked against numpy at odd sizes,
with inf/NaN scores, in every float type and on every target CPU."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS, target_options

import xlamlir as xm
from xlamlir.lowering.passes.in_place import elementwise_in_place
from xlamlir.lowering.passes.row_softmax import rows_softmax

DTYPES = {"f32": (xm.F32, np.float32), "f64": (xm.F64, np.float64),
          "f16": (xm.F16, np.float16), "bf16": (xm.BF16, ml_dtypes.bfloat16)}
DOT_BATCHED = xm.DotDimensionNumbers((2,), (2,), (0,), (0,))  # q k^T per head
DOT_PV = xm.DotDimensionNumbers((2,), (1,), (0,), (0,))  # p v per head


def attention(heads: int, seq: int, dim: int, dtype: str = "f32", **options: object) -> xm.Executable:
    """softmax(q k^T * scale) v, written as the benchmark writes it."""
    et, nt = DTYPES[dtype]
    b = xm.XlaBuilder("attention")
    q, k, v = (b.parameter(i, xm.Shape.array(et, (heads, seq, dim))) for i in range(3))
    s = b.mul(b.dot_general(q, k, DOT_BATCHED), b.constant(nt(1 / np.sqrt(dim))))
    full = (heads, seq, seq)
    m = b.reduce(s, b.constant(nt(-np.inf)), lambda a, e: a.builder.max(a, e), [2])
    e = b.exp(b.sub(s, b.broadcast_in_dim(m, full, [0, 1])))
    total = b.reduce(e, b.constant(nt(0)), lambda a, x: a + x, [2])
    p = b.div(e, b.broadcast_in_dim(total, full, [0, 1]))
    b.dot_general(p, v, DOT_PV)
    return xm.compile(b.build(), **options)


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    with np.errstate(invalid="ignore", over="ignore"):
        s = (q @ k.transpose(0, 2, 1)) / np.sqrt(q.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v


def allocs(text: str, shape: str) -> int:
    return len(re.findall(rf"memref\.alloc\(\)[^\n]*: memref<{shape}>", text))


def test_pass_is_in_the_fused_stage() -> None:
    assert elementwise_in_place in xm.Pipeline.default().passes("fused")


def test_attention_keeps_one_score_buffer() -> None:
    exe = attention(8, 512, 64)
    # Scores and probabilities share one buffer; the scaled scores are not materialized.
    assert allocs(exe.stages["bufferized"], "8x512x512xf32") == 1
    # The division itself, before row_softmax.py makes the softmax one loop over rows.
    pipeline = xm.Pipeline.default()
    pipeline.replace("fused", [p for p in pipeline.passes("fused") if p is not rows_softmax])
    fused = attention(8, 512, 64, pipeline=pipeline).stages["fused"]
    assert fused.count("tensor.empty() : tensor<8x512x512xf32>") == 1
    division = [g for g in re.findall(r"linalg\.generic \{.*?\n\s*\} -> tensor<[^\n]*", fused, re.S)
                if "arith.divf" in g]
    assert len(division) == 1
    init = re.search(r"outs\((%\w+) :", division[0]).group(1)
    assert not re.search(rf"{init} = tensor\.empty", fused)  # written over the scores


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize(("heads", "seq", "dim"), [(2, 37, 5), (3, 16, 8), (1, 1, 3)])
def test_attention_correct(dtype: str, heads: int, seq: int, dim: int) -> None:
    nt = DTYPES[dtype][1]
    rng = np.random.default_rng(heads * 100 + seq + dim)
    q, k, v = (rng.standard_normal((heads, seq, dim)).astype(nt) for _ in range(3))
    tolerance = {"f32": 1e-5, "f64": 1e-12, "f16": 2e-2, "bf16": 5e-2}[dtype]
    got = np.asarray(attention(heads, seq, dim, dtype)(q, k, v)).astype(np.float64)
    np.testing.assert_allclose(got, reference_attention(q, k, v), rtol=tolerance, atol=tolerance)


def test_attention_inf_and_nan_scores() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 24, 4)).astype(np.float32) for _ in range(3))
    q[0, 1, :] = -np.inf  # -inf and +inf scores in one row: NaN after the max
    q[0, 2, 0] = np.nan  # a NaN row
    k[1, 5, :] = np.inf  # one infinite column in every row of head 1
    q[1, 7, :] = 0  # ... times zero: NaN
    expected = reference_attention(q, k, v)
    assert np.isnan(expected).any()
    got = np.asarray(attention(2, 24, 4)(q, k, v))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("target", TARGETS)
def test_attention_same_bits_on_every_target(target: str) -> None:
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 40, 16)).astype(np.float32) for _ in range(3))
    host = np.asarray(attention(2, 40, 16)(q, k, v))
    got = np.asarray(attention(2, 40, 16, **target_options(target))(q, k, v))
    np.testing.assert_array_equal(got.view(np.uint32), host.view(np.uint32))


# ---------------------------------------------------------------- what is never overwritten

def _mat(b: xm.XlaBuilder, i: int, shape: tuple[int, ...]) -> xm.XlaOp:
    return b.parameter(i, xm.Shape.array(xm.F32, shape))


def _product(b: xm.XlaBuilder) -> tuple[xm.XlaOp, xm.XlaOp, xm.XlaOp]:
    x, y = _mat(b, 0, (24, 16)), _mat(b, 1, (16, 24))
    return x, y, b.dot(x, y)


def test_temporary_read_first_is_reused() -> None:
    b = xm.XlaBuilder("reuse")
    x, y, t = _product(b)
    total = b.reduce(t, b.constant(np.float32(0)), lambda a, e: a + e, [1])
    p = b.div(b.exp(t), b.broadcast_in_dim(total, (24, 24), [0]))
    b.dot(p, _mat(b, 2, (24, 8)))  # a consumer the division is not fused into
    exe = xm.compile(b.build())
    assert allocs(exe.stages["bufferized"], "24x24xf32") == 1
    rng = np.random.default_rng(0)
    xs, ys, zs = (rng.standard_normal(s).astype(np.float32) for s in [(24, 16), (16, 24), (24, 8)])
    t64 = xs.astype(np.float64) @ ys
    expected = (np.exp(t64) / t64.sum(axis=1, keepdims=True)) @ zs
    np.testing.assert_allclose(exe(xs, ys, zs), expected, rtol=1e-5, atol=1e-5)


def test_parameter_is_not_overwritten() -> None:
    b = xm.XlaBuilder("param")
    x = _mat(b, 0, (24, 24))
    b.add(b.exp(x), b.constant(np.float32(1)))
    xs = np.random.default_rng(0).standard_normal((24, 24)).astype(np.float32)
    before = xs.copy()
    np.testing.assert_allclose(xm.compile(b.build())(xs), np.exp(before) + 1, rtol=1e-6)
    np.testing.assert_array_equal(xs, before)


def test_temporary_returned_or_read_later_is_not_overwritten() -> None:
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((24, 16)).astype(np.float32)
    ys = rng.standard_normal((16, 24)).astype(np.float32)
    t64 = xs.astype(np.float64) @ ys
    # Returned beside the elementwise result of it.
    b = xm.XlaBuilder("returned")
    _, _, t = _product(b)
    b.tuple([t, b.exp(t)])
    got_t, got_e = xm.compile(b.build())(xs, ys)
    np.testing.assert_allclose(got_t, t64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_e, np.exp(t64), rtol=1e-5)
    # Read again after the elementwise op (by a reduction of the result and of t).
    b = xm.XlaBuilder("later")
    _, _, t = _product(b)
    e = b.exp(t)
    b.add(b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1]),
          b.reduce(t, b.constant(np.float32(0)), lambda a, v: a + v, [1]))
    np.testing.assert_allclose(xm.compile(b.build())(xs, ys),
                               np.exp(t64).sum(axis=1) + t64.sum(axis=1), rtol=1e-5, atol=1e-5)
