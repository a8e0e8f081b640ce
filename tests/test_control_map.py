"""Control-flow tests of map (1..3 operands of rank 0..3, result types of its own, nested
sub-computations) and optimization_barrier; helpers in tests/control_support.py."""

from __future__ import annotations

import numpy as np
import pytest
from control_support import (
    BF16,
    F32,
    PRED,
    S32,
    assert_same,
    c,
    compiled,
    computation,
    gte,
    sh,
)

import xlamlir as xm

# ---- map ------------------------------------------------------------------------------------

RANK_DIMS = [(), (3,), (2, 3), (2, 1, 3)]


def _map_fns(n: int):
    """(the computation on scalars, the numpy reference, operand dtypes)."""
    if n == 1:
        return (lambda a: a * 2 + 1), (lambda a: a * 2 + 1), [np.float32]
    if n == 2:
        return (lambda a, b: a * b - a), (lambda a, b: a * b - a), [np.float32, np.float32]

    def three(a, k, p):  # operands of three element types, same dims
        bb = a.builder
        return bb.select(p, a, bb.convert_element_type(k, xm.F32))

    return three, (lambda a, k, p: np.where(p, a, k.astype(np.float32))), [np.float32, np.int32, np.bool_]


@pytest.mark.parametrize("dims", RANK_DIMS, ids=lambda d: f"rank{len(d)}")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_map_operands_and_ranks(n: int, dims: tuple[int, ...]) -> None:
    fn, ref, dtypes = _map_fns(n)
    rng = np.random.default_rng(n * 10 + len(dims))
    args = []
    for dt in dtypes:
        if dt is np.bool_:
            args.append(np.asarray(rng.integers(0, 2, dims).astype(bool)))
        else:
            args.append(np.asarray(rng.integers(-8, 9, dims).astype(dt)))
    shapes = [xm.Shape.array(xm.type_of(np.dtype(dt)), dims) for dt in dtypes]

    def build(b, *ops):
        return b.map(list(ops), fn, list(range(len(dims))))

    exe = compiled(build, *shapes)
    expected = np.asarray(ref(*args)).astype(np.float32)
    assert_same(exe(*args), expected.reshape(dims))


def test_map_single_op_and_default_dimensions_and_computation() -> None:
    comp = computation("halve", [F32], lambda a: a / 2)

    def build(b, x):
        return [b.map(x, comp, [0, 1]), b.map([x], lambda a: a - 1)]

    exe = compiled(build, sh(xm.F32, (2, 2)))
    x = np.float32([[1, 2], [3, -4]])
    assert_same(exe(x), (x / 2, x - 1))


def test_map_result_dtype_differs() -> None:
    """compare -> pred, convert -> s8: the output element type is the computation's S."""

    def build(b, x, y):
        less = b.map([x, y], lambda a, c2: a.builder.lt(a, c2), [0, 1])
        cast = b.map([x], lambda a: a.builder.convert_element_type(a, xm.S8), [0, 1])
        return [less, cast]

    exe = compiled(build, sh(xm.F32, (2, 3)), sh(xm.F32, (2, 3)))
    x = np.float32([[1, 2, 3], [-1, np.nan, 7]])
    y = np.float32([[2, 2, 1], [0, 0, 8]])
    assert_same(exe(x, y), (x < y, np.int8([[1, 2, 3], [-1, 0, 7]])))


def test_map_over_pred_bf16_s8() -> None:
    def build(b, p, q, h, s, t):
        return [b.map([p, q], lambda a, e: a.builder.xor(a.builder.not_(a), e), [0]),
                b.map(h, lambda a: a * a + 1, [0]),
                b.map([s, t], lambda a, e: a * 3 + e, [0])]

    exe = compiled(build, sh(xm.PRED, (4,)), sh(xm.PRED, (4,)), sh(xm.BF16, (4,)),
                   sh(xm.S8, (4,)), sh(xm.S8, (4,)))
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    h = np.array([1.5, -2.5, 3, 0.25], dtype=BF16)
    s, t = np.int8([100, -100, 7, -128]), np.int8([1, -1, 127, 0])
    with np.errstate(over="ignore"):
        s8 = (s * np.int8(3) + t).astype(np.int8)  # wraps, two's complement
    bf = ((h.astype(np.float32) ** 2).astype(BF16).astype(np.float32) + 1).astype(BF16)
    assert_same(exe(p, q, h, s, t), ((~p) ^ q, bf, s8))


def test_map_with_empty_dimension() -> None:
    exe = compiled(lambda b, x: b.map(x, lambda a: a * 2, [0, 1]), sh(xm.F32, (0, 2)))
    assert_same(exe(np.zeros((0, 2), np.float32)), np.zeros((0, 2), np.float32))


@pytest.mark.parametrize("inner", ["call", "conditional", "while"])
def test_map_computation_with_nested_computation(inner: str) -> None:
    """A map computation is any scalar computation; it may call, branch or loop."""
    sq = computation("sq", [S32], lambda v: v * v)

    def fn(e):
        bb = e.builder
        if inner == "call":
            return bb.call(sq, [e]) + 1
        if inner == "conditional":
            return bb.conditional(bb.gt(e, c(bb, 1)), [lambda v: v * 10, lambda v: v - 1], [e, e])
        w = bb.while_(lambda t: t.builder.lt(gte(t, 0), c(t.builder, 10)),
                      lambda t: t.builder.tuple([gte(t, 0) * 2, gte(t, 1) + 1]), bb.tuple([e, c(bb, 0)]))
        return gte(w, 1)

    exe = compiled(lambda b, x: b.map([x], fn, [0]), sh(xm.S32, (3,)))
    x = np.int32([1, 3, 20])
    expected = {"call": x * x + 1, "conditional": np.where(x > 1, x * 10, x - 1),
                "while": np.int32([4, 2, 0])}[inner]
    assert_same(exe(x), expected.astype(np.int32))


# ---- optimization_barrier -------------------------------------------------------------------


def test_optimization_barrier_array_and_tuple() -> None:
    def build(b, x, k):
        arr = b.optimization_barrier(x * 2)
        tup = b.optimization_barrier(b.tuple([x, k, b.gt(k, c(b, 0))]))
        assert arr.shape == x.shape and tup.shape == xm.Shape.tuple([x.shape, S32, PRED])
        return [arr + 1, gte(tup, 0) - 1, gte(tup, 1) * 2, gte(tup, 2), b.optimization_barrier(tup)]

    exe = compiled(build, sh(xm.F32, (2, 2)), S32)
    x = np.float32([[1, 2], [3, 4]])
    out = exe(x, np.int32(-5))
    assert_same(out[:4], (x * 2 + 1, x - 1, np.int32(-10), np.bool_(False)))
    assert_same(out[4], (x, np.int32(-5), np.bool_(False)))


def test_optimization_barrier_in_loop_body() -> None:
    def build(b, x):
        def body(t):
            bb = t.builder
            return bb.optimization_barrier(bb.tuple([gte(t, 0) + 1, gte(t, 1) + 1]))

        w = b.while_(lambda t: t.builder.lt(gte(t, 1), c(t.builder, 3)), body, b.tuple([x, c(b, 0)]))
        return gte(w, 0)

    assert_same(compiled(build, F32)(np.float32(0.5)), np.float32(3.5))
