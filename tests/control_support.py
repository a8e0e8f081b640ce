"""Shared helpers of the control-flow tests (tests/test_control*.py): shapes, compile-a-builder,
constants, tuple access, and an exact comparison that walks tuples."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

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
