"""Build-time ShapeErrors of while_, conditional, call and map: every broken rule, incl.
closed computations (the error names the foreign op) and XlaComputations of the wrong
type; helpers in tests/control_support.py."""

from __future__ import annotations

import numpy as np
import pytest
from control_support import (
    F32,
    PRED,
    S32,
    c,
    computation,
    gte,
    sh,
)

import xlamlir as xm

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
