"""Tests of computations and control flow: while_, conditional, call, map and
optimization_barrier (API.md "Sub-computations" and the `control flow` row;
SEMANTICS.md 5.H and D12; the seeds' While, Conditional, Call and Map).

Written against the public API only. Every program is tiny and compiled once,
then run on several inputs. Sub-computations are given both ways the contract
allows: as an `XlaComputation` built with its own `XlaBuilder`, and as a
Python callable traced on a sub-builder. Loop state never closes over the
enclosing builder (computations are closed), so bounds travel in the state.

Pinned here:
- While returns the last body result; zero-trip loops return `init`;
  nesting is allowed (D12); the seed 000 1000-iteration accumulator.
- Conditional with an s32 index runs the last branch for an index < 0 or
  >= N; a pred index means [true_computation, false_computation]; branch
  operands may differ in shape per branch, results may not.
- Call with zero operands, several operands, a tuple result, nested calls.
- Map over 1..3 operands of rank 0..3, with a result element type of its
  own and over pred/bf16/s8.
- Build-time ShapeErrors for every broken rule, incl. closed computations
  (the error names the foreign op) and XlaComputations of the wrong type.
- The "hlo" stage keeps sub-computations as private functions referenced by
  symbol; it round-trips through compile_mlir; "linalg" holds scf.while,
  scf.index_switch and scf.if.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, isolated

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)


# ---- helpers --------------------------------------------------------------------------------


def sh(t: xm.PrimitiveType, dims: Sequence[int] = ()) -> xm.Shape:
    return xm.Shape.array(t, tuple(dims))


S32 = sh(xm.S32)
F32 = sh(xm.F32)
PRED = sh(xm.PRED)


def compiled(build: Callable[..., object], *params: xm.Shape, name: str = "t") -> xm.Executable:
    """Compile `build(b, *parameters)`; its return value (an op or a list) is the root."""
    b = xm.XlaBuilder(name)
    root = build(b, *(b.parameter(i, s) for i, s in enumerate(params)))
    return xm.compile(b.build(root))


def gte(t: xm.XlaOp, i: int) -> xm.XlaOp:
    return t.builder.get_tuple_element(t, i)


def c(bb: xm.XlaBuilder, value: object, dtype: object = np.int32) -> xm.XlaOp:
    """A scalar (or array) constant of `dtype` on builder `bb`."""
    return bb.constant(np.asarray(value, dtype=dtype)[()])


def assert_same(actual: object, expected: object) -> None:
    """Same dtype, shape and values (tuples element by element)."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), actual
        for a, e in zip(actual, expected):
            assert_same(a, e)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype == BF16:
        actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    np.testing.assert_array_equal(actual, expected)


def computation(name: str, shapes: Sequence[xm.Shape], fn: Callable[..., object]) -> xm.XlaComputation:
    """An XlaComputation built with its own builder: `fn(*parameters)` is the root."""
    bb = xm.XlaBuilder(name)
    root = fn(*(bb.parameter(i, s) for i, s in enumerate(shapes)))
    return bb.build(root)


# ---- while_: classic loops ------------------------------------------------------------------


def factorial_program(b: xm.XlaBuilder, n: xm.XlaOp) -> xm.XlaOp:
    def cond(t):
        bb = t.builder
        return bb.gt(bb.get_tuple_element(t, 1), bb.constant(np.int32(0)))

    def body(t):
        bb = t.builder
        acc, k = bb.get_tuple_element(t, 0), bb.get_tuple_element(t, 1)
        return bb.tuple([acc * k, k - 1])

    w = b.while_(cond, body, b.tuple([b.constant(np.int32(1)), n]))
    return b.get_tuple_element(w, 0)


def test_factorial_by_while() -> None:
    exe = compiled(factorial_program, S32)
    for n in range(13):  # 12! still fits in s32; 0! is a zero-trip loop
        assert_same(exe(np.int32(n)), np.int32(np.prod(np.arange(1, n + 1), dtype=np.int64)))


def test_fibonacci_by_while_with_computations() -> None:
    """State (a s64, b s64, k s32, n s32); condition and body as XlaComputations."""
    state = xm.Shape.tuple([sh(xm.S64), sh(xm.S64), S32, S32])
    cond = computation("fib_cond", [state], lambda t: t.builder.lt(gte(t, 2), gte(t, 3)))

    def body_fn(t):
        bb = t.builder
        return bb.tuple([gte(t, 1), gte(t, 0) + gte(t, 1), gte(t, 2) + 1, gte(t, 3)])

    body = computation("fib_body", [state], body_fn)
    assert body.program_shape() == ([state], state)

    def build(b, n):
        zero, one = b.constant(np.int64(0)), b.constant(np.int64(1))
        w = b.while_(cond, body, b.tuple([zero, one, b.constant(np.int32(0)), n]))
        return gte(w, 0)

    exe = compiled(build, S32)
    fib = [0, 1]
    while len(fib) <= 92:
        fib.append(fib[-1] + fib[-2])
    for n in (0, 1, 2, 3, 10, 50, 92):
        assert_same(exe(np.int32(n)), np.int64(fib[n]))


def test_single_array_loop_state() -> None:
    """A non-tuple state: double a vector until its first element reaches 100."""

    def build(b, x):
        return b.while_(lambda v: v.builder.lt(v[0], c(v.builder, 100, np.float32)), lambda v: v * 2, x)

    exe = compiled(build, sh(xm.F32, (3,)))
    assert_same(exe(np.float32([1, -1, 0.5])), np.float32([128, -128, 64]))
    assert_same(exe(np.float32([100, 2, 3])), np.float32([100, 2, 3]))  # zero trips


def test_nested_while() -> None:
    """Outer i in [0, n), inner j in [0, i): total = sum of i*j + 1 (nesting allowed, D12)."""

    def inner_loop(i):
        bb = i.builder

        def cond(t):
            return t.builder.lt(gte(t, 0), gte(t, 1))

        def body(t):
            j, ii, acc = gte(t, 0), gte(t, 1), gte(t, 2)
            return t.builder.tuple([j + 1, ii, acc + ii * j + 1])

        w = bb.while_(cond, body, bb.tuple([c(bb, 0), i, c(bb, 0)]))
        return gte(w, 2)

    def outer_body(t):
        bb = t.builder
        i, n, total = gte(t, 0), gte(t, 1), gte(t, 2)
        return bb.tuple([i + 1, n, total + inner_loop(i)])

    def build(b, n):
        w = b.while_(lambda t: t.builder.lt(gte(t, 0), gte(t, 1)), outer_body,
                     b.tuple([c(b, 0), n, c(b, 0)]))
        return gte(w, 2)

    exe = compiled(build, S32)
    for n in (0, 1, 2, 5, 9):
        expected = sum(i * j + 1 for i in range(n) for j in range(i))
        assert_same(exe(np.int32(n)), np.int32(expected))


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_data_dependent_trip_count_collatz() -> None:
    def body(t):
        bb = t.builder
        x, steps = gte(t, 0), gte(t, 1)
        even = bb.eq(x % 2, c(bb, 0))
        return bb.tuple([bb.select(even, x / 2, x * 3 + 1), steps + 1])

    def build(b, n):
        w = b.while_(lambda t: t.builder.ne(gte(t, 0), c(t.builder, 1)), body, b.tuple([n, c(b, 0)]))
        return gte(w, 1)

    exe = compiled(build, S32)
    for n in (1, 2, 6, 7, 27, 97, 871):
        assert_same(exe(np.int32(n)), np.int32(collatz_steps(n)))


def test_loop_until_value_exceeds_parameter() -> None:
    """x = 1; while x <= limit: x *= 3; the trip count comes from a parameter's value."""

    def build(b, limit):
        w = b.while_(lambda t: t.builder.le(gte(t, 0), gte(t, 2)),
                     lambda t: t.builder.tuple([gte(t, 0) * 3, gte(t, 1) + 1, gte(t, 2)]),
                     b.tuple([c(b, 1, np.float32), c(b, 0), limit]))
        return [gte(w, 0), gte(w, 1)]

    exe = compiled(build, F32)
    for limit, (x, k) in {0.5: (1, 0), 1: (3, 1), 8.9: (9, 2), 9: (27, 3), 1e6: (3**13, 13)}.items():
        assert_same(exe(np.float32(limit)), (np.float32(x), np.int32(k)))


def test_mixed_dtype_tuple_state() -> None:
    """(f32[3] array, s32 counter, pred flag): loop while the flag is off."""

    def body(t):
        bb = t.builder
        arr, k = gte(t, 0), gte(t, 1)
        new = arr * 2 + 1
        return bb.tuple([new, k + 1, bb.gt(new[0], c(bb, 100, np.float32))])

    def cond(t):
        bb = t.builder
        return bb.and_(bb.not_(gte(t, 2)), bb.lt(gte(t, 1), c(bb, 50)))

    def build(b, x, flag):
        return b.while_(cond, body, b.tuple([x, c(b, 0), flag]))

    exe = compiled(build, sh(xm.F32, (3,)), PRED)
    x = np.float32([1, 0, -0.5])
    expected_arr, k = x.copy(), 0
    while not (k > 0 and expected_arr[0] > 100):
        expected_arr, k = expected_arr * 2 + 1, k + 1
    assert_same(exe(x, np.bool_(False)), (expected_arr, np.int32(k), np.bool_(True)))
    # The flag already set: zero trips, the state comes back as is.
    assert_same(exe(x, np.bool_(True)), (x, np.int32(0), np.bool_(True)))


def test_pred_array_and_counter_state_toggles() -> None:
    def build(b, p, n):
        w = b.while_(lambda t: t.builder.lt(gte(t, 1), gte(t, 2)),
                     lambda t: t.builder.tuple([t.builder.not_(gte(t, 0)), gte(t, 1) + 1, gte(t, 2)]),
                     b.tuple([p, c(b, 0), n]))
        return gte(w, 0)

    exe = compiled(build, sh(xm.PRED, (2, 2)), S32)
    p = np.array([[True, False], [False, False]])
    for n in range(5):
        assert_same(exe(p, np.int32(n)), p if n % 2 == 0 else ~p)


def test_zero_trip_loop_returns_init() -> None:
    def build(b, x, k, flag):
        def body(t):
            return t.builder.tuple([gte(t, 0) * 100, gte(t, 1) + 5, t.builder.not_(gte(t, 2))])

        return b.while_(lambda t: t.builder.lt(gte(t, 1), c(t.builder, 0)), body, b.tuple([x, k, flag]))

    exe = compiled(build, sh(xm.F32, (2, 2)), S32, PRED)
    x = np.float32([[1.5, -2], [np.inf, np.nan]])
    out = exe(x, np.int32(7), np.bool_(True))
    assert_same(out, (x, np.int32(7), np.bool_(True)))
    # One trip for a negative counter shows the body would have changed everything.
    assert_same(exe(np.float32([[1, 2], [3, 4]]), np.int32(-1), np.bool_(True)),
                (np.float32([[100, 200], [300, 400]]), np.int32(4), np.bool_(False)))


def test_seed_000_1000_iteration_accumulator() -> None:
    """seed 000/003/001: init = {0, zero_vector[10]}; while result(0) < 1000 add a vector."""
    constant_vector = (np.arange(10, dtype=np.float32) - 3) * np.float32(0.25)

    def cond(t):
        return t.builder.lt(gte(t, 0), c(t.builder, 1000))

    def body(t):
        bb = t.builder
        return bb.tuple([gte(t, 0) + 1, gte(t, 1) + bb.constant(constant_vector)])

    def build(b):
        return b.while_(cond, body, b.tuple([c(b, 0), b.constant(np.zeros(10, np.float32))]))

    exe = compiled(build)
    # Multiples of 0.25 below 2^11: every partial sum is exact in f32.
    assert_same(exe(), (np.int32(1000), constant_vector * np.float32(1000)))


def test_while_layout_parameter_in_tuple_state() -> None:
    """A column-major parameter in the loop state: the layout is no part of the loop type
    (XLA compares shapes ignoring layout); ops produce the default layout."""

    def build(b, x):
        w = b.while_(lambda t: t.builder.lt(gte(t, 1), c(t.builder, 3)),
                     lambda t: t.builder.tuple([gte(t, 0) + 1, gte(t, 1) + 1]),
                     b.tuple([x, c(b, 0)]))
        return gte(w, 0)

    exe = compiled(build, xm.Shape.array(xm.F32, (2, 3), (0, 1)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(exe(np.asfortranarray(x)), x + 3)


def test_conditional_layout_parameter_in_tuple_result() -> None:
    """Branches returning (f32[2,3]{0,1}) and (f32[2,3]) have the same type (layouts aside)."""

    def build(b, p, x):
        return b.conditional(p, [lambda t: t, lambda t: t.builder.tuple([gte(t, 0) + 1])],
                             [b.tuple([x]), b.tuple([x])])

    exe = compiled(build, PRED, xm.Shape.array(xm.F32, (2, 3), (0, 1)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = exe(np.bool_(False), np.asfortranarray(x))
    np.testing.assert_array_equal(out, x + 1)
    (out,) = exe(np.bool_(True), np.asfortranarray(x))
    np.testing.assert_array_equal(out, x)


def test_nested_tuple_state_and_tuple_parameter() -> None:
    state = xm.Shape.tuple([xm.Shape.tuple([sh(xm.F32, (2,)), S32]), PRED])

    def body(t):
        bb = t.builder
        inner = gte(t, 0)
        return bb.tuple([bb.tuple([gte(inner, 0) * 2, gte(inner, 1) + 1]), bb.not_(gte(t, 1))])

    def build(b, s):
        return b.while_(lambda t: t.builder.lt(gte(gte(t, 0), 1), c(t.builder, 3)), body, s)

    exe = compiled(build, state)
    out = exe(((np.float32([1, 2]), np.int32(0)), np.bool_(False)))
    assert_same(out, ((np.float32([8, 16]), np.int32(3)), np.bool_(True)))


# ---- while_: bodies with other sub-computations ---------------------------------------------


@pytest.mark.parametrize("as_computation", [False, True], ids=["callable", "computation"])
def test_while_body_calls_reduce(as_computation: bool) -> None:
    """State (x f32[2,3], total f32[3], k s32, n s32): total += column sums of x; x += 1."""
    add = computation("add", [F32, F32], lambda a, b: a + b) if as_computation else (lambda a, b: a + b)

    def body(t):
        bb = t.builder
        x, total, k, n = gte(t, 0), gte(t, 1), gte(t, 2), gte(t, 3)
        sums = bb.reduce(x, c(bb, 0, np.float32), add, [0])
        return bb.tuple([x + 1, total + sums, k + 1, n])

    def build(b, x, n):
        w = b.while_(lambda t: t.builder.lt(gte(t, 2), gte(t, 3)), body,
                     b.tuple([x, b.constant(np.zeros(3, np.float32)), c(b, 0), n]))
        return gte(w, 1)

    exe = compiled(build, sh(xm.F32, (2, 3)), S32)
    x = np.float32([[1, 2, 3], [-4, 0.5, 8]])
    for n in (0, 1, 4):
        expected = sum((x + i).sum(axis=0) for i in range(n)) if n else np.zeros(3, np.float32)
        assert_same(exe(x, np.int32(n)), np.asarray(expected, np.float32))


def test_while_body_uses_map_and_conditional() -> None:
    """Each trip: x = map(collatz step, x); then branch k % 3 adds 1, doubles or subtracts 3."""

    def step(e):
        bb = e.builder
        return bb.select(bb.eq(e % 2, c(bb, 0)), e / 2, e * 3 + 1)

    def body(t):
        bb = t.builder
        x, k = gte(t, 0), gte(t, 1)
        y = bb.map([x], step, [0])
        z = bb.conditional(k % 3, [lambda v: v + 1, lambda v: v * 2, lambda v: v - 3], [y, y, y])
        flip = bb.conditional(bb.gt(z[0], c(bb, 10)), [lambda v: -v, lambda v: v], [z, z])
        return bb.tuple([flip, k + 1])

    def build(b, x):
        w = b.while_(lambda t: t.builder.lt(gte(t, 1), c(t.builder, 6)), body, b.tuple([x, c(b, 0)]))
        return gte(w, 0)

    exe = compiled(build, sh(xm.S32, (4,)))
    x = np.int32([7, 12, 1, -5])
    expected = x.copy()
    for k in range(6):
        # s32 rem/div truncate toward zero (C semantics), unlike numpy's % and //.
        y = np.where(np.fmod(expected, 2) == 0, np.trunc(expected / 2), expected * 3 + 1).astype(np.int32)
        z = [y + 1, y * 2, y - 3][k % 3].astype(np.int32)
        expected = -z if z[0] > 10 else z
    assert_same(exe(x), expected)


def test_while_in_condition_branch_and_conditional_in_while_condition() -> None:
    def branch_with_loop(v):
        bb = v.builder
        w = bb.while_(lambda t: t.builder.lt(gte(t, 0), c(t.builder, 100)),
                      lambda t: t.builder.tuple([gte(t, 0) * 2, gte(t, 1) + 1]),
                      bb.tuple([v, c(bb, 0)]))
        return gte(w, 1)

    def cond(t):
        bb = t.builder
        return bb.conditional(bb.lt(gte(t, 0), c(bb, 50)),
                              [lambda s: s.builder.ne(gte(s, 0), gte(s, 1)),
                               lambda s: s.builder.ne(gte(s, 0), gte(s, 0))], [t, t])

    def build(b, i, x):
        steps = b.conditional(i, [branch_with_loop, lambda v: v], [x, x])
        stop = b.while_(cond, lambda t: t.builder.tuple([gte(t, 0) + 1, gte(t, 1)]), b.tuple([x, c(b, 7)]))
        return [steps, gte(stop, 0)]

    exe = compiled(build, S32, S32)
    assert_same(exe(np.int32(0), np.int32(3)), (np.int32(6), np.int32(7)))
    assert_same(exe(np.int32(1), np.int32(3)), (np.int32(3), np.int32(7)))
    assert_same(exe(np.int32(0), np.int32(60)), (np.int32(1), np.int32(60)))
    assert_same(exe(np.int32(5), np.int32(8)), (np.int32(8), np.int32(50)))


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


# ---- ShapeError at build time ---------------------------------------------------------------


def loop_state(b: xm.XlaBuilder) -> xm.XlaOp:
    return b.tuple([b.parameter(0, sh(xm.F32, (2,))), c(b, 0)])


def counter_cond(t: xm.XlaOp) -> xm.XlaOp:
    return t.builder.lt(gte(t, 1), c(t.builder, 3))


@pytest.mark.parametrize("body", [
    lambda t: t.builder.tuple([t.builder.concat_in_dim([gte(t, 0), gte(t, 0)], 0), gte(t, 1)]),
    lambda t: t.builder.tuple([gte(t, 0), t.builder.convert_element_type(gte(t, 1), xm.F32)]),
    lambda t: t.builder.tuple([gte(t, 0), gte(t, 1), gte(t, 1)]),
    lambda t: gte(t, 0),
], ids=["dims", "dtype", "arity", "not-a-tuple"])
def test_while_body_must_keep_the_state_shape(b, body) -> None:
    init = loop_state(b)
    with pytest.raises(xm.ShapeError, match="while") as info:
        b.while_(counter_cond, body, init)
    assert isinstance(info.value, ValueError)
    assert "(f32[2], s32[])" in str(info.value)


@pytest.mark.parametrize("cond", [
    lambda t: gte(t, 1),                                   # s32[]
    lambda t: t.builder.lt(gte(t, 0), c(t.builder, 0, np.float32)),  # pred[2]
    lambda t: t.builder.tuple([counter_cond(t)]),          # (pred[])
], ids=["s32", "pred[2]", "tuple"])
def test_while_condition_must_return_pred_scalar(b, cond) -> None:
    init = loop_state(b)
    with pytest.raises(xm.ShapeError, match="pred"):
        b.while_(cond, lambda t: t, init)


def test_while_computations_of_the_wrong_type(b) -> None:
    init = loop_state(b)
    wrong_state = xm.Shape.tuple([sh(xm.F32, (3,)), S32])
    bad_cond = computation("bad_cond", [wrong_state], counter_cond)
    bad_body = computation("bad_body", [wrong_state], lambda t: t)
    two_params = computation("two", [sh(xm.F32, (2,)), S32], lambda a, k: a.builder.lt(k, c(a.builder, 3)))
    with pytest.raises(xm.ShapeError, match="bad_cond"):
        b.while_(bad_cond, lambda t: t, init)
    with pytest.raises(xm.ShapeError, match="bad_body"):
        b.while_(counter_cond, bad_body, init)
    with pytest.raises(xm.ShapeError, match="two"):
        b.while_(two_params, lambda t: t, init)


def test_conditional_shape_errors(b) -> None:
    i = b.parameter(0, S32)
    x = b.parameter(1, sh(xm.F32, (2,)))
    y = b.parameter(2, sh(xm.F32, (3,)))
    p = b.parameter(3, PRED)
    ident = [lambda v: v] * 3
    with pytest.raises(xm.ShapeError, match="operand"):  # operand count mismatch
        b.conditional(i, ident, [x, x])
    with pytest.raises(xm.ShapeError, match="operand"):
        b.conditional(i, ident[:2], [x, x, x])
    with pytest.raises(xm.ShapeError, match="same shape|branch 1"):  # results differ in dims
        b.conditional(i, [lambda v: v, lambda v: v], [x, y])
    with pytest.raises(xm.ShapeError, match="branch 1"):  # results differ in dtype
        b.conditional(i, [lambda v: v, lambda v: v.builder.convert_element_type(v, xm.S32)], [x, x])
    with pytest.raises(xm.ShapeError, match="branch 2"):  # a tuple vs an array
        b.conditional(i, [lambda v: v, lambda v: v, lambda v: v.builder.tuple([v])], [x, x, x])
    with pytest.raises(xm.ShapeError, match="two branches|exactly two"):  # pred needs 2 branches
        b.conditional(p, ident, [x, x, x])
    with pytest.raises(xm.ShapeError, match="index"):
        b.conditional(b.parameter(4, F32), ident[:2], [x, x])
    with pytest.raises(xm.ShapeError, match="index"):
        b.conditional(b.parameter(5, sh(xm.S32, (1,))), ident[:2], [x, x])
    with pytest.raises(xm.ShapeError):
        b.conditional(i, [], [])
    wrong = computation("takes_f32_3", [sh(xm.F32, (3,))], lambda v: v)
    with pytest.raises(xm.ShapeError, match="takes_f32_3"):
        b.conditional(i, [lambda v: v, wrong], [x, x])


def test_call_shape_errors(b) -> None:
    x = b.parameter(0, sh(xm.F32, (3,)))
    k = b.parameter(1, S32)
    comp = computation("takes_f32_2", [sh(xm.F32, (2,))], lambda v: v * 2)
    with pytest.raises(xm.ShapeError, match="takes_f32_2"):
        b.call(comp, [x])
    with pytest.raises(xm.ShapeError, match="takes_f32_2"):
        b.call(comp, [])
    with pytest.raises(xm.ShapeError, match="takes_f32_2"):
        b.call(comp, [x, k])
    two = computation("two_params", [sh(xm.F32, (3,)), S32], lambda v, n: v)
    with pytest.raises(xm.ShapeError, match="two_params"):
        b.call(two, [k, x])  # right shapes, wrong order
    assert b.call(two, [x, k]).shape == sh(xm.F32, (3,))


def test_map_shape_errors(b) -> None:
    x = b.parameter(0, sh(xm.F32, (2, 3)))
    y = b.parameter(1, sh(xm.F32, (3, 2)))
    k = b.parameter(2, sh(xm.S32, (2, 3)))
    with pytest.raises(xm.ShapeError, match="scalar"):  # a non-scalar computation
        b.map([x], lambda a: a.builder.broadcast(a, [2]), [0, 1])
    with pytest.raises(xm.ShapeError, match="scalar"):  # a tuple result
        b.map([x], lambda a: a.builder.tuple([a, a]), [0, 1])
    for dims in ([1, 0], [0], [0, 1, 2], [1]):
        with pytest.raises(xm.ShapeError, match="dimensions"):
            b.map([x], lambda a: a, dims)
    with pytest.raises(xm.ShapeError, match="same dimensions"):
        b.map([x, y], lambda a, e: a + e, [0, 1])
    f32_comp = computation("f32_fn", [F32], lambda a: a + 1)
    with pytest.raises(xm.ShapeError, match="f32_fn"):
        b.map([k], f32_comp, [0, 1])
    with pytest.raises(xm.ShapeError, match="f32_fn"):
        b.map([x, x], f32_comp, [0, 1])
    with pytest.raises(xm.ShapeError):
        b.map([], lambda: None, [])


def test_closed_computations_name_the_foreign_op(b) -> None:
    """Using an op of an enclosing builder inside a sub-computation is a ShapeError naming it."""
    x = b.parameter(0, sh(xm.F32, (2,)))
    outer = b.constant(np.float32(5))
    init = b.tuple([x, c(b, 0)])
    cases = [
        lambda: b.map([x], lambda e: e + outer),
        lambda: b.map([x], lambda e: outer),  # returning a foreign op
        lambda: b.while_(lambda t: t.builder.lt(outer, gte(t, 0)[0]), lambda t: t, init),
        lambda: b.while_(counter_cond, lambda t: t.builder.tuple([gte(t, 0) * outer, gte(t, 1)]), init),
        lambda: b.call(lambda v: v.builder.mul(v, outer), [x]),
        lambda: b.conditional(c(b, 0), [lambda v: v, lambda v: v * outer], [x, x]),
        lambda: b.call(lambda v: v.builder.reduce(v, outer, lambda a, e: a + e, [0]), [x]),
    ]
    for case in cases:
        with pytest.raises(xm.ShapeError, match=r"XlaOp\(constant: f32\[\]\)"):
            case()
    # An outer parameter, and an op of the middle builder used by a nested computation.
    with pytest.raises(xm.ShapeError, match=r"XlaOp\(parameter 0: f32\[2\]\)"):
        b.call(lambda v: v + x, [x])

    def body(t):
        bb = t.builder
        own = gte(t, 0) * 3
        inner = bb.while_(lambda s: s.builder.lt(gte(s, 1), c(s.builder, 2)),
                          lambda s: s.builder.tuple([gte(s, 0) + own, gte(s, 1) + 1]), t)
        return inner

    with pytest.raises(xm.ShapeError, match=r"XlaOp\(multiply: f32\[2\]\)"):
        b.while_(counter_cond, body, init)


# ---- the IR ---------------------------------------------------------------------------------


def control_program() -> xm.XlaComputation:
    """fact(n) by while, a 3-way conditional, calls, a map and a pred conditional."""
    sq = computation("sq", [S32], lambda v: v * v)
    b = xm.XlaBuilder("ctl")
    n = b.parameter(0, S32)
    x = b.parameter(1, sh(xm.S32, (3,)))
    fact = factorial_program(b, n)
    picked = b.conditional(n, [lambda v: v + 1, lambda v: v * 2, lambda v: -v], [x, x, x])
    squares = b.map([picked], lambda e: e * e, [0])
    both = b.call(sq, [fact]) + b.call(sq, [n])
    flag = b.conditional(b.gt(n, c(b, 2)), [lambda v: v + 100, lambda v: v - 100], [both, both])
    return b.build([fact, squares, flag])


def control_reference(n: int, x: np.ndarray) -> tuple:
    fact = int(np.prod(np.arange(1, n + 1)))
    picked = [x + 1, x * 2, -x][n if 0 <= n < 3 else 2]
    both = fact * fact + n * n
    return (np.int32(fact), (picked * picked).astype(np.int32),
            np.int32(both + 100 if n > 2 else both - 100))


def test_hlo_text_references_private_functions_by_symbol() -> None:
    text = control_program().as_mlir_text()
    assert re.search(r"func\.func @main\(", text)
    refs: list[str] = []
    for attr in ("cond", "body", "to_apply", "computation"):
        found = re.findall(rf"\b{attr} = @([\w.$-]+)", text)
        assert found, f"no {attr} = @... in\n{text}"
        refs += found
    branch_lists = re.findall(r"branches = \[(@[\w.$-]+(?:, @[\w.$-]+)*)\]", text)
    assert sorted(len(lst.split(", ")) for lst in branch_lists) == [2, 3], text
    refs += [s.strip().lstrip("@") for lst in branch_lists for s in lst.split(",")]
    for sym in set(refs):
        assert re.search(rf"func\.func private @{re.escape(sym)}\(", text), (sym, text)
    # One function per computation, however often it is used.
    assert len(re.findall(r"func\.func private @sq\(", text)) == 1
    assert "to_apply = @sq" in text
    # Sub-computations are not inlined as regions into the ops.
    check_ir(text, """
        CHECK: func.func @main(
        CHECK: "xhlo.while"({{.*}}) {body = @[[BODY:[A-Za-z0-9_]+]], cond = @[[COND:[A-Za-z0-9_]+]]}
        CHECK: "xhlo.case"({{.*}}) {branches = [@{{[A-Za-z0-9_]+}}, @{{[A-Za-z0-9_]+}}, @{{[A-Za-z0-9_]+}}]
        CHECK: "xhlo.map"({{.*}}) {computation = @
        CHECK: "xhlo.call"({{.*}}to_apply = @sq}
        CHECK-DAG: func.func private @[[COND]](
        CHECK-DAG: func.func private @[[BODY]](
    """)


def test_control_program_runs_and_round_trips_through_compile_mlir() -> None:
    comp = control_program()
    exe = xm.compile(comp)
    text = exe.stages["hlo"]
    again = xm.compile_mlir(text)
    x = np.int32([2, -3, 5])
    for n in (-1, 0, 1, 2, 3, 5):
        expected = control_reference(n, x)
        assert_same(exe(np.int32(n), x), expected)
        assert_same(again(np.int32(n), x), expected)
    assert again.stages["hlo"] == text


def test_while_program_hlo_round_trip() -> None:
    b = xm.XlaBuilder("fact")
    factorial_program(b, b.parameter(0, S32))
    exe = xm.compile(b.build())
    again = xm.compile_mlir(exe.stages["hlo"])
    for n in (0, 1, 5, 10):
        assert_same(again(np.int32(n)), exe(np.int32(n)))
    assert_same(again(np.int32(6)), np.int32(720))


def test_linalg_stage_has_structured_control_flow() -> None:
    stages = xm.compile(control_program()).stages
    check_ir(stages["linalg"], """
        CHECK-NOT: xhlo.
        CHECK-DAG: scf.while
        CHECK-DAG: scf.condition
        CHECK-DAG: scf.if
        CHECK-NOT: xhlo.
    """)
    # s32 conditionals are nested scf.if: bufferization loses read-only operands through
    # scf.index_switch (tests/test_buffer_aliasing.py).
    assert "scf.index_switch" not in stages["linalg"]
    assert "func.func private @sq" not in stages["linalg"]
