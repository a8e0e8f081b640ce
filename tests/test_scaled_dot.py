"""Tests of scaled_dot (seed 001 ScaledDot, defined by its decomposition in SEMANTICS.md 5.F):
dot_general(lhs * lhs_scale, rhs * rhs_scale), each scale element repeated over its
block and both factors converted to the result type first (XLA's dequantize expansion).
Compared with the numpy oracle (tests/reference.py `_scaled_dot`) and with the
decomposition built from plain builder ops.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import reference
from conftest import data, run

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
DN = xm.DotDimensionNumbers
MATMUL = DN((1,), (0,))


def scaled(dnums, preferred=None):
    return lambda b, x, xs, w, ws: b.scaled_dot(x, xs, w, ws, dnums, preferred_element_type=preferred)


def check(lhs, lhs_scale, rhs, rhs_scale, dnums, out_dtype, preferred=None) -> np.ndarray:
    got = run(scaled(dnums, preferred), lhs, lhs_scale, rhs, rhs_scale)
    want = reference._scaled_dot(lhs, lhs_scale, rhs, rhs_scale, dnums.as_dict(), np.dtype(out_dtype))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


def test_hand_computed_block_scales():
    """Block size 2 along k: lhs row [1, 1, 1, 1] with scales [2, 10] is [2, 2, 10, 10]."""
    lhs = np.ones((1, 4), np.float32)
    lhs_scale = np.array([[2, 10]], np.float32)
    rhs = np.array([[1], [2], [3], [4]], np.float32)
    rhs_scale = np.array([[1], [0.5]], np.float32)  # rhs rows 2, 3 halved
    got = run(scaled(MATMUL), lhs, lhs_scale, rhs, rhs_scale)
    np.testing.assert_array_equal(got, [[2 * 1 + 2 * 2 + 10 * 1.5 + 10 * 2]])


@pytest.mark.parametrize("dtype, scale_dtype", [(np.float32, np.float32), (BF16, BF16),
                                                (np.float16, np.float32), (np.float64, np.float64),
                                                (BF16, np.float32)])
def test_types_against_the_oracle(dtype, scale_dtype):
    lhs, rhs = data((3, 8), dtype, 1), data((8, 5), dtype, 2)
    lhs_scale = np.exp2(data((3, 2), np.float32, 3)).astype(scale_dtype)
    rhs_scale = np.exp2(data((2, 5), np.float32, 4)).astype(scale_dtype)
    check(lhs, lhs_scale, rhs, rhs_scale, MATMUL, dtype)


def test_bf16_operands_with_f32_result_and_rounding_order():
    """The operands are converted to the result type before the multiply (f32 here), so
    f32 scales that are not powers of two are not rounded to bf16."""
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((4, 32)).astype(BF16)
    rhs = rng.standard_normal((32, 3)).astype(BF16)
    lhs_scale = rng.uniform(0.5, 2, (4, 1)).astype(np.float32)
    rhs_scale = rng.uniform(0.5, 2, (1, 3)).astype(np.float32)
    got = run(scaled(MATMUL, np.float32), lhs, lhs_scale, rhs, rhs_scale)
    want = (lhs.astype(np.float64) * lhs_scale) @ (rhs.astype(np.float64) * rhs_scale)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_matches_the_decomposition_with_batch_and_two_dimensional_blocks():
    """lhs [b, m, k] with [b, m/2, k/4] scales, rhs [b, k, n] with [b, k/4, 1] scales."""
    dnums = DN((2,), (1,), (0,), (0,))
    lhs, rhs = data((2, 4, 8), np.float32, 1), data((2, 8, 3), np.float32, 2)
    ls, rs = np.exp2(data((2, 2, 2), np.float32, 3)), np.exp2(data((2, 2, 1), np.float32, 4))
    got = check(lhs, ls, rhs, rs, dnums, np.float32)

    def decomposed(b, x, xs, w, ws):
        x = b.mul(x, b.reshape(b.broadcast_in_dim(xs, (2, 2, 2, 2, 4), (0, 1, 3)), (2, 4, 8)))
        w = b.mul(w, b.reshape(b.broadcast_in_dim(ws, (2, 2, 4, 3), (0, 1, 3)), (2, 8, 3)))
        return b.dot_general(x, w, dnums)

    np.testing.assert_array_equal(got, run(decomposed, lhs, ls, rhs, rs))


def test_zero_size_contracting_dimension():
    check(np.ones((2, 0), np.float32), np.ones((2, 0), np.float32), np.ones((0, 3), np.float32),
          np.ones((0, 3), np.float32), MATMUL, np.float32)


def build_error(lhs, lhs_scale, rhs, rhs_scale, dnums=MATMUL, preferred=None):
    b = xm.XlaBuilder("e")
    ops = [b.parameter(i, xm.Shape.array(t, s)) for i, (t, s) in enumerate([lhs, lhs_scale, rhs, rhs_scale])]
    b.scaled_dot(*ops, dnums, preferred_element_type=preferred)


F = xm.F32


@pytest.mark.parametrize("args, message", [
    (((F, (2, 4)), (F, (2,)), (F, (4, 3)), (F, (1, 3))), "lhs_scale .* does not tile lhs"),
    (((F, (2, 4)), (F, (2, 3)), (F, (4, 3)), (F, (1, 3))), "lhs_scale .* does not tile lhs"),
    (((F, (2, 4)), (F, (2, 1)), (F, (4, 3)), (F, (0, 3))), "rhs_scale .* does not tile rhs"),
    (((F, (2, 4)), (xm.PRED, (2, 1)), (F, (4, 3)), (F, (1, 3))), "real number type"),
    (((F, (2, 4)), (xm.C64, (2, 1)), (F, (4, 3)), (F, (1, 3))), "real number type"),
    (((xm.S32, (2, 4)), (F, (2, 1)), (xm.S32, (4, 3)), (F, (1, 3))), "must be a float type"),
    (((F, (2, 4)), (F, (2, 1)), (F, (5, 3)), (F, (1, 3))), "contracting dimension sizes differ"),
    (((F, (2, 4)), (F, (2, 1)), (xm.F64, (4, 3)), (F, (1, 3))), "same element type"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_shape_rules(args, message):
    with pytest.raises(xm.ShapeError, match=message) as e:
        build_error(*args)
    assert "scaled_dot" in str(e.value)


def test_standard_layouts_are_named_contractions():
    """[m, k] x [k, n] is a linalg.matmul (and batched, a batch_matmul) of the scaled
    operands: the matmul schedule takes those; other layouts are one generic."""
    def stages(*shapes_and_dnums):
        *shapes, dnums = shapes_and_dnums
        b = xm.XlaBuilder("t")
        ops = [b.parameter(i, xm.Shape.array(xm.F32, s)) for i, s in enumerate(shapes)]
        return xm.compile(b.build(b.scaled_dot(*ops, dnums))).stages["linalg"]

    assert "linalg.matmul" in stages((4, 8), (4, 2), (8, 3), (2, 3), MATMUL)
    batched = DN((2,), (1,), (0,), (0,))
    assert "linalg.batch_matmul" in stages((2, 4, 8), (2, 4, 2), (2, 8, 3), (2, 2, 3), batched)
    text = stages((8, 4), (2, 4), (8, 3), (2, 3), DN((0,), (0,)))
    assert "matmul" not in text and "linalg.generic" in text


@pytest.mark.parametrize("dtype, scale_dtype, block", [
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, 32),  # MXFP8
    (ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, 16),  # NVFP4
], ids=["mxfp8-e4m3", "mxfp8-e5m2", "nvfp4"])
def test_narrow_float_operands_with_block_scales(dtype, scale_dtype, block):
    """ScaledDot's natural types: every narrow float and every power-of-two scale is exact in
    f32, and so is each product; the f32 sums are compared with a tolerance."""
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((4, 64)).astype(dtype)
    rhs = rng.standard_normal((64, 3)).astype(dtype)
    lhs_scale = np.exp2(rng.integers(-3, 4, (4, 64 // block))).astype(scale_dtype)
    rhs_scale = np.exp2(rng.integers(-3, 4, (64 // block, 3))).astype(scale_dtype)
    got = run(scaled(MATMUL, np.float32), lhs, lhs_scale, rhs, rhs_scale)
    want = reference._scaled_dot(lhs, lhs_scale, rhs, rhs_scale, MATMUL.as_dict(), np.dtype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
