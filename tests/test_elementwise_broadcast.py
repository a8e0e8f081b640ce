"""Elementwise tests of XLA broadcasting: seed 000's worked examples, broadcast_dimensions on
every binary op, select/clamp operand rules, and a hypothesis check against numpy's shapes
(helpers in tests/elementwise_support.py).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlamlir as xm

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package: import the sibling module directly
    sys.path.insert(0, os.path.dirname(__file__))
    import reference as ref

from elementwise_support import (
    check,
    run,
    run_op,
    shape_of,
)

# ---------------------------------------------------------------- broadcasting (seed 000)

def s32(v) -> np.ndarray:
    return np.array(v, dtype=np.int32)


def test_broadcast_scalar_either_side() -> None:
    m, seven = s32([[1, 2, 3], [4, 5, 6]]), s32(7)
    outs = run(lambda b, m, s: [b.add(m, s), b.add(s, m), b.sub(m, s), b.sub(s, m)], [m, seven])
    np.testing.assert_array_equal(outs[0], [[8, 9, 10], [11, 12, 13]])   # seed 000
    np.testing.assert_array_equal(outs[1], [[8, 9, 10], [11, 12, 13]])
    np.testing.assert_array_equal(outs[2], m - 7)
    np.testing.assert_array_equal(outs[3], 7 - m)
    assert all(o.dtype == np.int32 and o.shape == (2, 3) for o in outs)


def test_broadcast_matrix_vector() -> None:
    m, v = s32([[1, 2, 3], [4, 5, 6]]), s32([7, 8, 9])
    outs = run(lambda b, m, v: [b.add(m, v, broadcast_dimensions=(1,)),
                                b.add(v, m, broadcast_dimensions=(1,))], [m, v])
    for out in outs:   # seed 000: |1 2 3; 4 5 6| + |7 8 9|
        np.testing.assert_array_equal(out, [[8, 10, 12], [11, 13, 15]])


def test_broadcast_square_matrix_both_ways() -> None:
    m, v = s32(np.arange(9).reshape(3, 3) * 10), s32([7, 8, 9])
    rows, cols = run(lambda b, m, v: [b.add(m, v, broadcast_dimensions=(1,)),
                                      b.add(m, v, broadcast_dimensions=(0,))], [m, v])
    np.testing.assert_array_equal(rows, m + v[None, :])    # dim 1: the vector is each row
    np.testing.assert_array_equal(cols, m + v[:, None])    # dim 0: each element fills a row


def test_broadcast_rejections() -> None:
    b = xm.XlaBuilder("t")
    m = b.parameter(0, shape_of("s32", (2, 3)))
    v = b.parameter(1, shape_of("s32", (3,)))
    w = b.parameter(2, shape_of("s32", (2, 3)))
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(0,))    # seed 000: dimension 0 is invalid for 2x3 + 3
    with pytest.raises(xm.ShapeError):
        b.add(m, v)                               # different ranks need broadcast_dimensions
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(2,))    # out of range
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(0, 1))  # one entry per lower-rank dimension
    with pytest.raises(xm.ShapeError):
        b.add(m, w, broadcast_dimensions=(1, 0))  # equal ranks: empty or the identity only
    assert b.add(m, w, broadcast_dimensions=(0, 1)).shape == shape_of("s32", (2, 3))


@pytest.mark.parametrize(("a", "b", "result"), [
    ((2, 1), (2, 3), (2, 3)), ((1, 2, 5), (7, 2, 5), (7, 2, 5)), ((7, 2, 5), (7, 1, 5), (7, 2, 5)),
    ((2, 1), (1, 3), (2, 3)),                    # "outer operation"
    ((7, 2, 5), (7, 2, 6), None),                # incompatible
], ids=["2x1+2x3", "1x2x5+7x2x5", "7x2x5+7x1x5", "2x1+1x3-outer", "7x2x5+7x2x6-rejected"])
def test_broadcast_degenerate_dimensions(a, b, result) -> None:   # seed 000 examples
    x, y = ref.values("f32", int(np.prod(a)), 1).reshape(a), ref.values("f32", int(np.prod(b)), 2).reshape(b)
    if result is None:
        expect_broadcast_error(a, b)
        return
    out = run_op("mul", [x, y])
    assert out.shape == result
    xb, yb = np.broadcast_arrays(x, y)
    check(out, ref.multiply(np.ascontiguousarray(xb), np.ascontiguousarray(yb)), inputs=[xb, yb])


def expect_broadcast_error(a, b, dims=()) -> None:
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("f32", a)), bld.parameter(1, shape_of("f32", b))
    with pytest.raises(xm.ShapeError):
        bld.mul(x, y, broadcast_dimensions=dims)


def test_broadcast_composition() -> None:
    # seed 000: |1 2 3 4| + [5 6] with dims (0): 4x1 then degenerate broadcasting to 4x2.
    v, m = s32([1, 2, 3, 4]), s32([[5, 6]])
    out = run_op("add", [v, m], broadcast_dimensions=(0,))
    np.testing.assert_array_equal(out, [[6, 7], [7, 8], [8, 9], [9, 10]])


def test_broadcast_composition_rank3() -> None:
    # seed 000: a 1x2 matrix + a 4x3x1 array with dims (1, 2) -> 4x3x2.
    m, a = s32([[5, 6]]), s32(np.arange(12).reshape(4, 3, 1))
    out = run_op("add", [m, a], broadcast_dimensions=(1, 2))
    np.testing.assert_array_equal(out, m.reshape(1, 1, 2) + a)


def test_broadcast_cuboid_and_matrix() -> None:
    # seed 000: a 2x3x4 cuboid and a 3x4 matrix with dims (1, 2).
    c, m = s32(np.arange(24).reshape(2, 3, 4)), s32(np.arange(12).reshape(3, 4) * 100)
    np.testing.assert_array_equal(run_op("add", [c, m], broadcast_dimensions=(1, 2)), c + m)


def test_broadcast_dimension_order() -> None:
    # seed 000: TxV onto MxNxPxQ with (0, 3) is fine; the tuple must be strictly increasing.
    big = ref.values("f32", 120, 3).reshape(2, 3, 4, 5)
    tv, t = ref.values("f32", 10, 4).reshape(2, 5), ref.values("f32", 4, 5)
    out = run_op("add", [big, tv], broadcast_dimensions=(0, 3))
    check(out, ref.add(big, np.ascontiguousarray(np.broadcast_to(tv[:, None, None, :], big.shape))))
    out = run_op("add", [t, big], broadcast_dimensions=(2,))
    check(out, ref.add(np.ascontiguousarray(np.broadcast_to(t[None, None, :, None], big.shape)), big))
    expect_broadcast_error((2, 3, 4, 5), (5, 2), dims=(3, 0))   # V to Q and T to M: wrong order
    expect_broadcast_error((2, 3, 4, 5), (3, 3), dims=(1, 1))   # one dimension twice


def test_broadcast_element_type_mismatch() -> None:
    for a, b in [("f32", "f64"), ("s32", "u32"), ("s8", "pred"), ("f16", "bf16"), ("c64", "f32")]:
        bld = xm.XlaBuilder("t")
        x, y = bld.parameter(0, shape_of(a, (3,))), bld.parameter(1, shape_of(b, (3,)))
        s = bld.parameter(2, shape_of(b, ()))
        with pytest.raises(xm.ShapeError):
            bld.add(x, y)
        with pytest.raises(xm.ShapeError):
            bld.add(x, s)           # a scalar of another type is no exception
        with pytest.raises(xm.ShapeError):
            bld.compare(x, y, "EQ")


BINARY_METHODS = ["add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "complex"]


def test_broadcast_dimensions_on_every_binary_op() -> None:
    b = xm.XlaBuilder("t")
    m, v = b.parameter(0, shape_of("f32", (2, 3))), b.parameter(1, shape_of("f32", (3,)))
    for method in BINARY_METHODS:
        r = getattr(b, method)(m, v, broadcast_dimensions=(1,))
        assert r.shape.dimensions == (2, 3), method
    i, j = b.parameter(2, shape_of("u8", (2, 3))), b.parameter(3, shape_of("u8", (2,)))
    for method in ["and_", "or_", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical"]:
        assert getattr(b, method)(i, j, broadcast_dimensions=(0,)).shape.dimensions == (2, 3), method
    for method in ["eq", "ne", "lt", "le", "gt", "ge"]:
        r = getattr(b, method)(m, v, broadcast_dimensions=(1,))
        assert r.shape == shape_of("pred", (2, 3)), method
    assert b.compare(m, v, "LT", broadcast_dimensions=(1,)).shape == shape_of("pred", (2, 3))


def test_broadcast_compare_values() -> None:
    m, v = s32([[1, 5, 9], [2, 6, 8]]), s32([5, 6, 7])
    lt, ge = run(lambda b, m, v: [b.lt(m, v, broadcast_dimensions=(1,)),
                                  b.compare(v, m, "GE", broadcast_dimensions=(1,))], [m, v])
    np.testing.assert_array_equal(lt, m < v)
    np.testing.assert_array_equal(ge, v >= m)
    assert lt.dtype == np.bool_


def test_select_scalar_predicate() -> None:
    # seed 000/001: a scalar PRED picks one whole operand.
    t, f = s32([1, 2, 3]), s32([4, 5, 6])
    for p in (True, False):
        out = run_op("select", [np.array(p), t, f])
        np.testing.assert_array_equal(out, t if p else f)


def test_select_rejections() -> None:
    b = xm.XlaBuilder("t")
    p3, p2 = b.parameter(0, shape_of("pred", (3,))), b.parameter(1, shape_of("pred", (2,)))
    t, f = b.parameter(2, shape_of("f32", (3,))), b.parameter(3, shape_of("f32", (3,)))
    s, i = b.parameter(4, shape_of("s32", (3,))), b.parameter(5, shape_of("f64", (3,)))
    for args in [(p2, t, f), (s, t, f), (p3, t, i)]:
        with pytest.raises(xm.ShapeError):
            b.select(*args)


def test_clamp_scalar_bounds() -> None:
    # seed 001: Clamp(0, {-1, 5, 9}, 6) = {0, 5, 6}; min and max may be scalars.
    out = run_op("clamp", [s32(0), s32([-1, 5, 9]), s32(6)])
    np.testing.assert_array_equal(out, [0, 5, 6])
    out = run_op("clamp", [s32([0, 0, 0]), s32([-1, 5, 9]), s32(6)])
    np.testing.assert_array_equal(out, [0, 5, 6])


def test_clamp_rejections() -> None:
    b = xm.XlaBuilder("t")
    x = b.parameter(0, shape_of("f32", (3,)))
    lo2, hi = b.parameter(1, shape_of("f32", (2,))), b.parameter(2, shape_of("f32", ()))
    lo_f64 = b.parameter(3, shape_of("f64", ()))
    for args in [(lo2, x, hi), (hi, x, lo2), (lo_f64, x, hi)]:
        with pytest.raises(xm.ShapeError):
            b.clamp(*args)


_dim = st.integers(1, 3)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_degenerate_broadcast_matches_numpy(data) -> None:
    rank = data.draw(st.integers(0, 4))
    a = tuple(data.draw(st.lists(_dim, min_size=rank, max_size=rank)))
    b = tuple(d if data.draw(st.booleans()) else data.draw(_dim) for d in a)
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("f32", a)), bld.parameter(1, shape_of("f32", b))
    if expected is None:
        with pytest.raises(xm.ShapeError):
            bld.add(x, y)
    else:
        assert bld.add(x, y).shape.dimensions == expected


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_in_dim_broadcast_matches_numpy(data) -> None:
    # A lower-rank operand mapped by strictly increasing broadcast_dimensions behaves like
    # numpy after inserting size-1 dimensions at the unmapped positions.
    hi = tuple(data.draw(st.lists(_dim, min_size=1, max_size=4)))
    mapping = tuple(sorted(data.draw(st.sets(st.integers(0, len(hi) - 1), max_size=len(hi) - 1))))
    lo = tuple(hi[d] if data.draw(st.booleans()) else data.draw(_dim) for d in mapping)
    expanded = [1] * len(hi)
    for i, d in enumerate(mapping):
        expanded[d] = lo[i]
    try:
        expected = np.broadcast_shapes(tuple(expanded), hi)
    except ValueError:
        expected = None
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("s32", lo)), bld.parameter(1, shape_of("s32", hi))
    for lhs, rhs in ((x, y), (y, x)):
        if expected is None:
            with pytest.raises(xm.ShapeError):
                bld.add(lhs, rhs, broadcast_dimensions=mapping)
        else:
            assert bld.add(lhs, rhs, broadcast_dimensions=mapping).shape.dimensions == expected
