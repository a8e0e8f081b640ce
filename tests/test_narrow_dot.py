"""dot and dot_general on the sub-byte integers and the narrow floats: operands widened
(XLA upcasts), products summed in f32 for floats (f64 if an operand is), in a byte for
s2/s4/u2/u4 (then wrapped to their width), with or without preferred_element_type."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import xlamlir as xm

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref  # noqa: E402
from narrow_support import NARROW_FLOATS, SUB_BYTE_INTS, compile_checked  # noqa: E402

MATMUL = {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0],
          "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}
BATCHED = {"lhs_contracting_dimensions": [2], "rhs_contracting_dimensions": [1],
           "lhs_batch_dimensions": [0], "rhs_batch_dimensions": [0]}


def _operand(t: xm.PrimitiveType, dims: tuple[int, ...], seed: int) -> np.ndarray:
    """Small values whose products and sums are exact in f32 (so any summation order agrees)."""
    rng = np.random.default_rng(seed)
    if t == xm.F8E8M0FNU:
        return np.exp2(rng.integers(-3, 4, dims)).astype(xm.dtype_of(t))
    if t.is_floating:
        return (rng.integers(-4, 5, dims) * 0.5).astype(xm.dtype_of(t))
    lo, hi = (0, 3) if t.is_unsigned_int else (-2, 1 if t == xm.S2 else 7)
    return rng.integers(lo, hi + 1, dims).astype(xm.dtype_of(t))


def _dot(x: np.ndarray, y: np.ndarray, dims: dict, preferred: xm.PrimitiveType | None) -> np.ndarray:
    b = xm.XlaBuilder("dot")
    p = b.parameter(0, xm.Shape.array(xm.type_of(x.dtype), x.shape))
    q = b.parameter(1, xm.Shape.array(xm.type_of(y.dtype), y.shape))
    numbers = xm.DotDimensionNumbers(**{k: tuple(v) for k, v in dims.items()})
    return compile_checked(b.build(b.dot_general(p, q, numbers, preferred_element_type=preferred)))(x, y)


CASES = ([(t, p) for t in NARROW_FLOATS for p in (None, xm.F32, xm.BF16)]
         + [(t, p) for t in SUB_BYTE_INTS for p in (None, xm.S32, xm.S8, xm.F32)])


@pytest.mark.parametrize(("t", "preferred"), CASES, ids=[f"{t}-{p}" for t, p in CASES])
@pytest.mark.parametrize("shapes", [((3, 37), (37, 4), MATMUL), ((2, 3, 5), (2, 5, 6), BATCHED),
                                    ((1, 64), (64, 1), MATMUL)], ids=["matmul", "batched", "row-col"])
def test_dot_general(t: xm.PrimitiveType, preferred: xm.PrimitiveType | None, shapes) -> None:
    lhs_dims, rhs_dims, dims = shapes
    x, y = _operand(t, lhs_dims, 1), _operand(t, rhs_dims, 2)
    out = _dot(x, y, dims, preferred)
    expected = ref._dot_general(x, y, dims, xm.dtype_of(preferred or t))
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(out.astype(np.float64), expected.astype(np.float64))


def test_sub_byte_dot_wraps_in_its_width() -> None:
    x = np.full((1, 16), 7, xm.dtype_of(xm.S4))
    out = _dot(x, x.T.copy(), MATMUL, None)
    assert int(out[0, 0]) == ((16 * 49 + 8) % 16) - 8
    assert int(_dot(x, x.T.copy(), MATMUL, xm.S32)[0, 0]) == 16 * 49


def test_narrow_float_dot_rounds_the_f32_sum_once() -> None:
    # 1 + 16 * 1/16 = 2 in f32; rounded per product into e4m3fn it would stay 1 (1 + 1/16 -> 1).
    x = np.array([[1.0] + [0.0625] * 16], np.float32).astype(xm.dtype_of(xm.F8E4M3FN))
    y = np.ones((17, 1), np.float32).astype(xm.dtype_of(xm.F8E4M3FN))
    assert float(_dot(x, y, MATMUL, None)[0, 0]) == 2.0


def test_preferred_type_rules() -> None:
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.F8E5M2, (2, 2)))
    with pytest.raises(xm.ShapeError):
        b.dot(p, p, preferred_element_type=xm.S32)
    q = b.parameter(1, xm.Shape.array(xm.S4, (2, 2)))
    assert b.dot(q, q, preferred_element_type=xm.S8).shape == xm.Shape.array(xm.S8, (2, 2))
