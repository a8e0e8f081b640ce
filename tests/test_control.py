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

This file holds while_; conditional and call are in test_control_conditional_call.py, map and
optimization_barrier in test_control_map.py, the build-time errors in test_control_errors.py,
the IR in test_control_ir.py, the shared helpers in control_support.py.
"""

from __future__ import annotations

import numpy as np
import pytest
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

# ---- while_: classic loops ------------------------------------------------------------------


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
