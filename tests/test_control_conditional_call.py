"""Control-flow tests of conditional (s32 and pred index, branch operand shapes, tuple
results) and call (zero/several operands, tuple results, nesting); helpers in
tests/control_support.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import isolated
from control_support import (
    F32,
    PRED,
    S32,
    assert_same,
    c,
    compiled,
    computation,
    factorial_program,
    gte,
    sh,
)

import xlamlir as xm

# ---- conditional ----------------------------------------------------------------------------

BRANCH_FNS = [lambda v: v + 1, lambda v: v * 2, lambda v: -v, lambda v: v * v]
BRANCH_REFS = [lambda v: v + 1, lambda v: v * 2, lambda v: -v, lambda v: v * v]


@pytest.mark.parametrize("kind", ["computation", "callable", "mixed"])
def test_conditional_four_branches_by_s32_index(kind: str) -> None:
    vec = sh(xm.F32, (3,))
    comps = [computation(f"branch{i}", [vec], fn) for i, fn in enumerate(BRANCH_FNS)]
    branches: list[object] = {"computation": comps, "callable": list(BRANCH_FNS),
                              "mixed": [comps[0], BRANCH_FNS[1], comps[2], BRANCH_FNS[3]]}[kind]

    def build(b, i, x):
        return b.conditional(i, branches, [x, x, x, x])

    exe = compiled(build, S32, vec)
    x = np.float32([1, -2, 3.5])
    for index in (0, 1, 2, 3, 4, 5, 100, -1, -2, -100, 2**31 - 1, -(2**31)):
        chosen = index if 0 <= index < 4 else 3  # out of range runs branch N-1
        assert_same(exe(np.int32(index), x), BRANCH_REFS[chosen](x).astype(np.float32))


def test_conditional_index_computed_from_data() -> None:
    """The index is argmax-like data: count of elements above 0."""

    def build(b, x):
        index = b.reduce(b.convert_element_type(b.gt(x, c(b, 0, np.float32)), xm.S32), c(b, 0),
                         lambda a, e: a + e, [0])
        return b.conditional(index, [lambda v: v + 10, lambda v: v - 10, lambda v: v * 10], [x, x, x])

    exe = compiled(build, sh(xm.F32, (3,)))
    for x in ([-1, -2, -3], [1, -2, -3], [1, 2, -3], [1, 2, 3]):
        x = np.float32(x)
        n = int((x > 0).sum())
        assert_same(exe(x), [x + 10, x - 10, x * 10, x * 10][n])


def test_conditional_pred_index_true_then_false() -> None:
    """pred index: [true_computation, false_computation]; operands of different types."""
    vec, ivec = sh(xm.F32, (3,)), sh(xm.S32, (3,))
    true_comp = computation("on_true", [vec], lambda v: v * 10)

    def build(b, p, x, y):
        return b.conditional(p, [true_comp, lambda w: w.builder.convert_element_type(w, xm.F32)], [x, y])

    exe = compiled(build, PRED, vec, ivec)
    x, y = np.float32([1, 2, 3]), np.int32([-4, 5, 6])
    assert_same(exe(np.bool_(True), x, y), x * 10)
    assert_same(exe(np.bool_(False), x, y), y.astype(np.float32))
    assert_same(exe(True, x, y), x * 10)


def test_conditional_pred_index_computed() -> None:
    def build(b, x):
        return b.conditional(b.gt(x, c(b, 0, np.float32)), [lambda v: v * 2, lambda v: v + 1], [x, x])

    exe = compiled(build, F32)
    assert_same(exe(np.float32(3)), np.float32(6))
    assert_same(exe(np.float32(-3)), np.float32(-2))


@isolated
def test_conditional_pred_index_computed_with_constant_branch() -> None:
    """A computed pred index and one branch returning a constant (must not crash)."""

    def build(b, x):
        return b.conditional(b.lt(x, c(b, 50)), [lambda v: v + 1, lambda v: c(v.builder, 0)], [x, x])

    exe = compiled(build, S32)
    assert_same(exe(np.int32(3)), np.int32(4))
    assert_same(exe(np.int32(60)), np.int32(0))


def test_conditional_branch_operands_differ_in_shape() -> None:
    """Branch 0 takes s32[], 1 takes f32[2,2], 2 takes (f32[2], f32[2]); all return f32[2]."""
    pair = xm.Shape.tuple([sh(xm.F32, (2,)), sh(xm.F32, (2,))])
    branch2 = computation("pair_sum", [pair], lambda t: gte(t, 0) + gte(t, 1))

    def branch0(s):
        bb = s.builder
        return bb.broadcast(bb.convert_element_type(s, xm.F32), [2])

    def branch1(m):
        return m.builder.reduce(m, c(m.builder, 0, np.float32), lambda a, e: a + e, [1])

    def build(b, i, s, m, u, v):
        return b.conditional(i, [branch0, branch1, branch2], [s, m, b.tuple([u, v])])

    exe = compiled(build, S32, S32, sh(xm.F32, (2, 2)), sh(xm.F32, (2,)), sh(xm.F32, (2,)))
    s, m = np.int32(-7), np.float32([[1, 2], [3, 4.5]])
    u, v = np.float32([0.5, 1]), np.float32([2, -3])
    results = [np.float32([-7, -7]), np.float32([3, 7.5]), u + v]
    for index in (-1, 0, 1, 2, 3):
        chosen = index if 0 <= index < 3 else 2
        assert_same(exe(np.int32(index), s, m, u, v), results[chosen])


@isolated
def test_conditional_returning_tuple() -> None:
    vec = sh(xm.F32, (2,))

    def b0(v):
        return v.builder.tuple([v + 1, c(v.builder, 0)])

    def b1(v):
        return [v * 3, c(v.builder, 1)]  # a list root becomes a tuple

    b2 = computation("b2", [vec], lambda v: v.builder.tuple([-v, c(v.builder, 2)]))

    def build(b, i, p, x):
        three = b.conditional(i, [b0, b1, b2], [x, x, x])
        two = b.conditional(p, [b0, b2], [x, x])
        return [gte(three, 0), gte(three, 1), gte(two, 0), gte(two, 1)]

    exe = compiled(build, S32, PRED, vec)
    x = np.float32([1.5, -2])
    assert_same(exe(np.int32(1), np.bool_(True), x), (x * 3, np.int32(1), x + 1, np.int32(0)))
    assert_same(exe(np.int32(9), np.bool_(False), x), (-x, np.int32(2), -x, np.int32(2)))
    assert_same(exe(np.int32(0), np.bool_(False), x), (x + 1, np.int32(0), -x, np.int32(2)))


def test_conditional_single_branch_runs_for_every_index() -> None:
    def build(b, i, x):
        return b.conditional(i, [lambda v: v * 2], [x])

    exe = compiled(build, S32, S32)
    for index in (-3, 0, 1, 7):
        assert_same(exe(np.int32(index), np.int32(21)), np.int32(42))


# ---- call -----------------------------------------------------------------------------------


def test_call_with_zero_operands() -> None:
    bb = xm.XlaBuilder("table")
    bb.constant(np.float32([1, 2, 3]))
    table = bb.build()
    assert table.program_shape() == ([], sh(xm.F32, (3,)))

    def build(b, x):
        return [b.call(table, []) + x, b.call(table)]

    exe = compiled(build, sh(xm.F32, (3,)))
    assert_same(exe(np.float32([10, 20, 30])), (np.float32([11, 22, 33]), np.float32([1, 2, 3])))


@pytest.mark.parametrize("as_computation", [False, True], ids=["callable", "computation"])
def test_call_with_several_operands(as_computation: bool) -> None:
    shapes = [sh(xm.F32, (2,)), S32, PRED]

    def fn(a, k, flag):
        bb = a.builder
        return bb.select(flag, a * bb.convert_element_type(k, xm.F32), a - 1)

    comp = computation("scale", shapes, fn) if as_computation else fn

    def build(b, a, k, flag):
        return b.call(comp, [a, k, flag])

    exe = compiled(build, *shapes)
    a = np.float32([1.5, -2])
    assert_same(exe(a, np.int32(3), np.bool_(True)), a * 3)
    assert_same(exe(a, np.int32(3), np.bool_(False)), a - 1)


def test_call_with_tuple_result_and_tuple_operand() -> None:
    shapes = [sh(xm.S32, (3,)), sh(xm.S32, (3,))]
    stats = computation("stats", shapes, lambda a, b: a.builder.tuple([a + b, a - b, a.builder.gt(a, b)]))
    swap = computation("swap", [xm.Shape.tuple(shapes)], lambda t: t.builder.tuple([gte(t, 1), gte(t, 0)]))

    def build(b, x, y):
        s = b.call(stats, [x, y])
        sw = b.call(swap, [b.tuple([x, y])])
        return [gte(s, 0), gte(s, 1), gte(s, 2), gte(sw, 0)]

    exe = compiled(build, *shapes)
    x, y = np.int32([1, 5, -3]), np.int32([4, 5, -7])
    assert_same(exe(x, y), (x + y, x - y, x > y, y))


def test_nested_calls() -> None:
    """outer(x, y) = call(middle, x, y) * 10, middle = call(sq, x) + call(sq, y) + 1."""
    sq = computation("sq", [S32], lambda v: v * v)
    middle = computation("middle", [S32, S32],
                         lambda x, y: x.builder.call(sq, [x]) + x.builder.call(sq, [y]) + 1)

    def build(b, x, y):
        via_callable = b.call(lambda u, v: u.builder.call(middle, [u, v]) - u.builder.call(sq, [u]), [x, y])
        return [b.call(middle, [x, y]) * 10, via_callable]

    exe = compiled(build, S32, S32)
    assert_same(exe(np.int32(3), np.int32(-4)), (np.int32(260), np.int32(17)))


def test_nested_calls_of_same_named_computations() -> None:
    """Builders may share a name: each computation stays its own function."""
    inner = computation("f", [S32], lambda v: v * v)
    middle = computation("f", [S32], lambda v: v.builder.call(inner, [v]) + 1)
    exe = compiled(lambda b, x: b.call(middle, [x]) * 10, S32, name="f")
    assert_same(exe(np.int32(3)), np.int32(100))


def test_call_of_a_computation_with_a_while() -> None:
    fact = computation("fact", [S32], lambda n: factorial_program(n.builder, n))
    exe = compiled(lambda b, n: b.call(fact, [n]) + b.call(fact, [n + 1]), S32)
    assert_same(exe(np.int32(4)), np.int32(24 + 120))
