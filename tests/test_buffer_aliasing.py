"""Ops bufferized in place never share a buffer they must not share (issue #14).

Two in-place ops whose initial operands are one value (the builder's identical
broadcasts are merged by CSE, a parameter or an intermediate used twice) must
each see that value unchanged, and every output buffer must receive its own
result. Found as a scatter miscompile: empty-tensor elimination put both
scatters' shared init into one output buffer, and the memref-form result
materialization hid that write from the bufferization's conflict analysis
(fixed in lowering/destinations.py). One test per op family that updates a
buffer in place: scatter, dynamic_update_slice, select_and_scatter, sort, while
state, conditional, and the value returned beside an in-place update of it.
"""

from __future__ import annotations

import numpy as np
import pytest

import xlamlir as xm

S32 = xm.S32
F32 = xm.F32
DN = xm.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


def _zeros(b: xm.XlaBuilder, n: int, dtype=np.int32) -> xm.XlaOp:
    return b.broadcast(b.constant(dtype(0)), (n,))


def _histogram(indices: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(indices[(indices >= 0) & (indices < n)], minlength=n).astype(np.int32)


@pytest.mark.parametrize("init", ["merged", "one_op", "parameter"])
def test_two_scatters_on_one_init(init: str) -> None:
    """The issue's reproducer and its variants: the init is two identical broadcasts
    (merged by CSE), one op used twice, or a parameter (an input buffer)."""
    b = xm.XlaBuilder("two_scatters")
    p = b.parameter(0, xm.Shape.array(S32, (64,)))
    q = b.parameter(1, xm.Shape.array(S32, (64,)))
    ones = b.broadcast(b.constant(np.int32(1)), (64,))
    if init == "parameter":
        e1 = e2 = b.parameter(2, xm.Shape.array(S32, (16,)))
    elif init == "one_op":
        e1 = e2 = _zeros(b, 16)
    else:
        e1, e2 = _zeros(b, 16), _zeros(b, 16)
    b.tuple([b.scatter(e1, p, ones, lambda u, w: u + w, DN),
             b.scatter(e2, q, ones, lambda u, w: u + w, DN)])
    exe = xm.compile(b.build())
    pi = np.arange(64, dtype=np.int32) % 20 - 2  # some out of bounds: skipped
    qi = np.full(64, 3, np.int32)
    args = [pi, qi] + ([np.zeros(16, np.int32)] if init == "parameter" else [])
    r1, r2 = exe(*args)
    np.testing.assert_array_equal(r1, _histogram(pi, 16))
    np.testing.assert_array_equal(r2, _histogram(qi, 16))
    if init == "parameter":
        np.testing.assert_array_equal(args[2], np.zeros(16, np.int32))  # input untouched


def test_scatter_result_beside_its_init() -> None:
    b = xm.XlaBuilder("scatter_and_init")
    p = b.parameter(0, xm.Shape.array(S32, (8,)))
    init = b.iota(xm.Shape.array(S32, (16,)), 0)
    ones = b.broadcast(b.constant(np.int32(100)), (8,))
    b.tuple([b.scatter(init, p, ones, lambda u, w: u + w, DN), init, b.mul(init, init)])
    idx = np.array([0, 1, 1, 15, 3, -1, 16, 2], np.int32)
    r, i, sq = xm.compile(b.build())(idx)
    expected = np.arange(16, dtype=np.int32) + 100 * _histogram(idx, 16)
    np.testing.assert_array_equal(r, expected)
    np.testing.assert_array_equal(i, np.arange(16, dtype=np.int32))
    np.testing.assert_array_equal(sq, np.arange(16, dtype=np.int32) ** 2)


@pytest.mark.parametrize("init", ["merged", "one_op", "parameter"])
def test_two_dynamic_update_slices_on_one_init(init: str) -> None:
    b = xm.XlaBuilder("two_dus")
    u = b.parameter(0, xm.Shape.array(F32, (4,)))
    s1 = b.parameter(1, xm.Shape.array(S32, ()))
    s2 = b.parameter(2, xm.Shape.array(S32, ()))
    if init == "parameter":
        c1 = c2 = b.parameter(3, xm.Shape.array(F32, (12,)))
    elif init == "one_op":
        c1 = c2 = _zeros(b, 12, np.float32)
    else:
        c1, c2 = _zeros(b, 12, np.float32), _zeros(b, 12, np.float32)
    b.tuple([b.dynamic_update_slice(c1, u, [s1]), b.dynamic_update_slice(c2, b.neg(u), [s2]), c1])
    upd = np.array([1, 2, 3, 4], np.float32)
    args = [upd, np.int32(2), np.int32(20)] + ([np.zeros(12, np.float32)] if init == "parameter" else [])
    r1, r2, c = xm.compile(b.build())(*args)
    e1 = np.zeros(12, np.float32)
    e1[2:6] = upd
    e2 = np.zeros(12, np.float32)
    e2[8:12] = -upd  # start 20 clamped to 8
    np.testing.assert_array_equal(r1, e1)
    np.testing.assert_array_equal(r2, e2)
    np.testing.assert_array_equal(c, np.zeros(12, np.float32))


def test_two_select_and_scatters_on_one_init() -> None:
    b = xm.XlaBuilder("two_sas")
    x = b.parameter(0, xm.Shape.array(F32, (8,)))
    src = b.parameter(1, xm.Shape.array(F32, (4,)))
    zero = b.constant(np.float32(0))
    ge = lambda a, c: a.builder.ge(a, c)  # noqa: E731
    lt = lambda a, c: a.builder.lt(a, c)  # noqa: E731
    add = lambda a, c: a + c  # noqa: E731
    r1 = b.select_and_scatter(x, ge, (2,), (2,), "VALID", src, zero, add)
    r2 = b.select_and_scatter(x, lt, (2,), (2,), "VALID", src, zero, add)
    b.tuple([r1, r2])
    xv = np.array([1, 5, 7, 2, 0, 0, 3, 9], np.float32)
    sv = np.array([10, 20, 30, 40], np.float32)
    a1, a2 = xm.compile(b.build())(xv, sv)
    np.testing.assert_array_equal(a1, [0, 10, 20, 0, 30, 0, 0, 40])
    np.testing.assert_array_equal(a2, [10, 0, 0, 20, 0, 30, 40, 0])


def test_two_sorts_of_one_operand() -> None:
    b = xm.XlaBuilder("two_sorts")
    x = b.parameter(0, xm.Shape.array(F32, (33,)))
    y = b.add(x, b.constant(np.float32(1)))
    b.tuple([b.sort(y), b.sort(y, lambda p, q: p.builder.gt(p, q)), y])
    xv = np.random.default_rng(0).standard_normal(33).astype(np.float32)
    up, down, yv = xm.compile(b.build())(xv)
    np.testing.assert_array_equal(up, np.sort(xv + 1))
    np.testing.assert_array_equal(down, np.sort(xv + 1)[::-1])
    np.testing.assert_array_equal(yv, xv + 1)


def test_two_while_loops_on_one_init() -> None:
    b = xm.XlaBuilder("two_whiles")
    n = b.parameter(0, xm.Shape.array(S32, ()))
    init = _zeros(b, 8)
    shape = xm.Shape.array(S32, (8,))
    cb = xm.XlaBuilder("cond")
    s = cb.parameter(0, shape)
    cb.lt(cb.reduce(s, cb.constant(np.int32(0)), lambda a, c: a + c, (0,)), cb.constant(np.int32(100)))
    cond = cb.build()

    def body(step: int) -> xm.XlaComputation:
        bb = xm.XlaBuilder(f"body{step}")
        s = bb.parameter(0, shape)
        bb.add(s, bb.broadcast(bb.constant(np.int32(step)), (8,)))
        return bb.build()

    w1 = b.while_(cond, body(1), init)
    w2 = b.while_(cond, body(3), init)
    b.tuple([w1, w2, b.add(init, b.broadcast(n, (8,)))])
    r1, r2, r3 = xm.compile(b.build())(np.int32(7))
    np.testing.assert_array_equal(r1, np.full(8, 13, np.int32))  # 8*13 = 104 >= 100
    np.testing.assert_array_equal(r2, np.full(8, 15, np.int32))  # 8*15 = 120
    np.testing.assert_array_equal(r3, np.full(8, 7, np.int32))


def test_conditional_branches_update_a_shared_init() -> None:
    b = xm.XlaBuilder("cond_shared")
    which = b.parameter(0, xm.Shape.array(xm.PRED, ()))
    idx = b.parameter(1, xm.Shape.array(S32, (4,)))
    init = _zeros(b, 8)
    t = xm.XlaBuilder("t")
    ti = t.parameter(0, xm.Shape.array(S32, (4,)))
    t.scatter(_zeros(t, 8), ti, t.broadcast(t.constant(np.int32(1)), (4,)), lambda u, w: u + w, DN)
    f = xm.XlaBuilder("f")
    f.parameter(0, xm.Shape.array(S32, (4,)))
    _zeros(f, 8)
    r = b.conditional(which, [t.build(), f.build()], [idx, idx])
    ones = b.broadcast(b.constant(np.int32(1)), (4,))
    b.tuple([r, b.scatter(init, idx, ones, lambda u, w: u + w, DN), init])
    exe = xm.compile(b.build())
    iv = np.array([1, 1, 7, 2], np.int32)
    for flag in (True, False):
        r1, r2, r3 = exe(np.bool_(flag), iv)
        np.testing.assert_array_equal(r1, _histogram(iv, 8) if flag else np.zeros(8, np.int32))
        np.testing.assert_array_equal(r2, _histogram(iv, 8))
        np.testing.assert_array_equal(r3, np.zeros(8, np.int32))


def test_dynamic_update_slice_beside_its_operand_returned_twice() -> None:
    """The earlier (dus(c, u), c) bug, and the operand as two outputs."""
    b = xm.XlaBuilder("dus_and_c")
    u = b.parameter(0, xm.Shape.array(F32, (2,)))
    c = b.broadcast(b.constant(np.float32(5)), (6,))
    b.tuple([b.dynamic_update_slice(c, u, [b.constant(np.int32(1))]), c, c])
    r, c1, c2 = xm.compile(b.build())(np.array([7, 8], np.float32))
    np.testing.assert_array_equal(r, [5, 7, 8, 5, 5, 5])
    np.testing.assert_array_equal(c1, np.full(6, 5, np.float32))
    np.testing.assert_array_equal(c2, np.full(6, 5, np.float32))


# ---- no hidden copies (issue #17): results computed in their output buffers ----------------


def _allocs_and_copies(exe: xm.Executable) -> tuple[int, int]:
    text = exe.stages["bufferized"]
    return text.count("memref.alloc"), text.count("memref.copy") + text.count("linalg.copy")


def test_value_returned_beside_its_sum_is_computed_once_in_place() -> None:
    b = xm.XlaBuilder("value_and_sum")
    x = b.parameter(0, xm.Shape.array(F32, (1000,)))
    z = b.mul(x, b.constant(np.float32(2)))
    b.tuple([z, b.reduce(z, b.constant(np.float32(0)), lambda a, c: a + c, (0,)), z])
    exe = xm.compile(b.build())
    # z in its output, the sum in its own, z's second output one copy.
    assert _allocs_and_copies(exe) == (0, 1)
    xv = np.linspace(-3, 3, 1000, dtype=np.float32)
    z1, s, z2 = exe(xv)
    np.testing.assert_array_equal(z1, xv * 2)
    np.testing.assert_array_equal(z2, xv * 2)
    np.testing.assert_allclose(s, np.sum(xv * 2, dtype=np.float64), atol=1e-3)


def test_parameter_returned_beside_an_op_of_it() -> None:
    b = xm.XlaBuilder("param_and_op")
    x = b.parameter(0, xm.Shape.array(F32, (64,)))
    b.tuple([x, b.mul(x, x)])
    exe = xm.compile(b.build())
    assert _allocs_and_copies(exe) == (0, 1)  # the parameter into its output
    xv = np.arange(64, dtype=np.float32)
    r1, r2 = exe(xv)
    np.testing.assert_array_equal(r1, xv)
    np.testing.assert_array_equal(r2, xv * xv)


def test_while_state_from_a_parameter_lives_in_the_output() -> None:
    shape = xm.Shape.array(F32, (16,))
    cb = xm.XlaBuilder("cond")
    s = cb.parameter(0, shape)
    cb.lt(cb.reduce(s, cb.constant(np.float32(0)), lambda a, c: a + c, (0,)), cb.constant(np.float32(1000)))
    bb = xm.XlaBuilder("body")
    s = bb.parameter(0, shape)
    bb.add(bb.mul(s, bb.constant(np.float32(2))), bb.constant(np.float32(1)))
    b = xm.XlaBuilder("while_state")
    x = b.parameter(0, shape)
    b.while_(cb.build(), bb.build(), x)
    exe = xm.compile(b.build())
    # x copied into the output once, then updated there (the condition's scalar sum has
    # a buffer of its own).
    text = exe.stages["bufferized"]
    assert "memref.alloc() {alignment = 64 : i64} : memref<16xf32>" not in text
    assert _allocs_and_copies(exe)[1] == 1
    xv = np.ones(16, np.float32)
    expected = xv.copy()
    while expected.sum() < 1000:
        expected = expected * 2 + 1
    np.testing.assert_array_equal(exe(xv), expected)
    np.testing.assert_array_equal(xv, np.ones(16, np.float32))  # the input is untouched


def test_scatter_into_a_parameter_is_one_copy() -> None:
    b = xm.XlaBuilder("scatter_param")
    op = b.parameter(0, xm.Shape.array(S32, (16,)))
    idx = b.parameter(1, xm.Shape.array(S32, (8,)))
    b.scatter(op, idx, b.parameter(2, xm.Shape.array(S32, (8,))), lambda u, w: u + w, DN)
    exe = xm.compile(b.build())
    assert _allocs_and_copies(exe) == (0, 1)
    base = np.arange(16, dtype=np.int32)
    iv = np.array([0, 0, 5, 15, 16, -1, 3, 3], np.int32)
    np.testing.assert_array_equal(exe(base, iv, np.ones(8, np.int32)), base + _histogram(iv, 16))
    np.testing.assert_array_equal(base, np.arange(16, dtype=np.int32))


@pytest.mark.parametrize("index,branches", [("pred", 2), ("s32", 1), ("s32", 2), ("s32", 3)])
def test_input_passed_through_a_conditional_then_updated_stays_untouched(index: str, branches: int) -> None:
    """A parameter returned unchanged by a conditional's branch, then updated in place by a
    while loop whose state is not returned: the caller's array must not change (an s32
    conditional let the loop write into the input buffer; into a constant it crashed)."""
    b = xm.XlaBuilder("through_conditional")
    which = b.parameter(0, xm.Shape.array(xm.PRED if index == "pred" else S32, ()))
    c = b.parameter(1, xm.Shape.array(xm.U32, (3, 3)))
    identity = [lambda p: p] * branches
    x = b.conditional(which, [lambda p: p.builder.rev(p, [0, 1])] + identity[1:], [c] * branches)

    def body(s):
        sb = s.builder
        i, v = sb.get_tuple_element(s, 0), sb.get_tuple_element(s, 1)
        v = sb.dynamic_update_slice(v, sb.broadcast(sb.constant(np.uint32(0)), [1, 1]), [i, i])
        return sb.tuple([sb.add(i, sb.constant(np.int32(1))), v])

    w = b.while_(lambda s: s.builder.lt(s.builder.get_tuple_element(s, 0), s.builder.constant(np.int32(3))),
                 body, b.tuple([b.constant(np.int32(0)), x]))
    b.tuple([b.get_tuple_element(w, 0), b.reduce(b.get_tuple_element(w, 1), b.constant(np.uint32(0)),
                                                 lambda p, q: p + q, (0, 1))])
    exe = xm.compile(b.build())
    choices = ([np.bool_(False), np.bool_(True)] if index == "pred"
               else [np.int32(k) for k in (-1, 0, 1, 2, 7)])
    for choice in choices:
        arg = np.arange(9, dtype=np.uint32).reshape(3, 3)
        n, total = exe(choice, arg)
        np.testing.assert_array_equal(arg, np.arange(9, dtype=np.uint32).reshape(3, 3))
        assert n == 3 and total == 24  # the diagonal zeroed (reversed or not: 36 - 12)
