"""Elementwise tests of the Python surface: the XlaOp operator overloads and argument
checking at call time (helpers in tests/elementwise_support.py).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import xlamlir as xm

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package: import the sibling module directly
    sys.path.insert(0, os.path.dirname(__file__))
    import reference as ref

from elementwise_support import (
    COMPLEX,
    FLOAT_KEYS,
    check,
    cross,
    moderate_complex,
    run,
    shape_of,
    tolerance,
)

# ---------------------------------------------------------------- operator overloads

def _full(x: np.ndarray, v) -> np.ndarray:
    return ref.as_dtype(np.full(x.shape, v), ref.name_of(x))


def _check_overloads(table, arrays, approx=()) -> None:
    outs = run(lambda b, *p: [fn(*p) for _, fn, _ in table], arrays)
    dt = ref.name_of(arrays[0])
    for (label, _, expected), out in zip(table, outs, strict=True):
        check(out, expected, approx=label in approx, inputs=arrays, what=f"{dt}: {label}",
              **tolerance("pow", dt))


def test_overloads_signed() -> None:
    rng = np.random.default_rng(1)
    x, y = ref.values("s32", 32, 1), ref.values("s32", 32, 2)[::-1].copy()
    e = ref.as_dtype(rng.integers(-2, 40, 32), "s32")
    s = ref.as_dtype([0, 1, 31, 32, 33, -1, 100, 5] * 4, "s32")
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x + y", lambda x, y, e, s: x + y, ref.add(x, y)),
        ("x - y", lambda x, y, e, s: x - y, ref.subtract(x, y)),
        ("x * y", lambda x, y, e, s: x * y, ref.multiply(x, y)),
        ("x / y", lambda x, y, e, s: x / y, ref.divide(x, y)),          # truncating division
        ("x % y", lambda x, y, e, s: x % y, ref.remainder(x, y)),       # C remainder, not Python's
        ("x ** e", lambda x, y, e, s: x ** e, ref.power(x, e)),
        ("-x", lambda x, y, e, s: -x, ref.negate(x)),
        ("x & y", lambda x, y, e, s: x & y, ref.and_(x, y)),
        ("x | y", lambda x, y, e, s: x | y, ref.or_(x, y)),
        ("x ^ y", lambda x, y, e, s: x ^ y, ref.xor(x, y)),
        ("~x", lambda x, y, e, s: ~x, ref.not_(x)),
        ("x << s", lambda x, y, e, s: x << s, ref.shift_left(x, s)),
        ("x >> s", lambda x, y, e, s: x >> s, ref.shift_right_arithmetic(x, s)),  # signed: arithmetic
        ("x + 1", lambda x, y, e, s: x + 1, ref.add(x, c(1))),
        ("1 + x", lambda x, y, e, s: 1 + x, ref.add(c(1), x)),
        ("10 - x", lambda x, y, e, s: 10 - x, ref.subtract(c(10), x)),
        ("x * 3", lambda x, y, e, s: x * 3, ref.multiply(x, c(3))),
        ("7 / x", lambda x, y, e, s: 7 / x, ref.divide(c(7), x)),
        ("x % 3", lambda x, y, e, s: x % 3, ref.remainder(x, c(3))),
        ("-100 % x", lambda x, y, e, s: -100 % x, ref.remainder(c(-100), x)),
        ("x ** 2", lambda x, y, e, s: x ** 2, ref.power(x, c(2))),
        ("2 ** e", lambda x, y, e, s: 2 ** e, ref.power(c(2), e)),
        ("1 << s", lambda x, y, e, s: 1 << s, ref.shift_left(c(1), s)),
        ("x >> 1", lambda x, y, e, s: x >> 1, ref.shift_right_arithmetic(x, c(1))),
        ("255 & x", lambda x, y, e, s: 255 & x, ref.and_(c(255), x)),
        ("x ^ -1", lambda x, y, e, s: x ^ -1, ref.xor(x, c(-1))),
        ("x + np.int32(5)", lambda x, y, e, s: x + np.int32(5), ref.add(x, c(5))),
        ("np.int32(5) - x", lambda x, y, e, s: np.int32(5) - x, ref.subtract(c(5), x)),
    ]
    _check_overloads(table, [x, y, e, s])


def test_overloads_unsigned() -> None:
    x, y = ref.values("u32", 32, 3), ref.values("u32", 32, 4)[::-1].copy()
    s = ref.as_dtype([0, 1, 31, 32, 33, 2**32 - 1, 100, 5] * 4, "u32")
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x >> s", lambda x, y, s: x >> s, ref.shift_right_logical(x, s)),   # unsigned: logical
        ("x >> 1", lambda x, y, s: x >> 1, ref.shift_right_logical(x, c(1))),
        ("2**31 >> s", lambda x, y, s: 2**31 >> s, ref.shift_right_logical(c(2**31), s)),
        ("x / y", lambda x, y, s: x / y, ref.divide(x, y)),
        ("x % y", lambda x, y, s: x % y, ref.remainder(x, y)),
        ("-x", lambda x, y, s: -x, ref.negate(x)),
        ("~x", lambda x, y, s: ~x, ref.not_(x)),
        ("x - 1", lambda x, y, s: x - 1, ref.subtract(x, c(1))),
        ("x << s", lambda x, y, s: x << s, ref.shift_left(x, s)),
        ("x * y", lambda x, y, s: x * y, ref.multiply(x, y)),
    ]
    _check_overloads(table, [x, y, s])


def test_overloads_pred() -> None:
    x, y = cross([False, True], "pred", np.random.default_rng(5), n=16)
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x & y", lambda x, y: x & y, ref.and_(x, y)),
        ("x | y", lambda x, y: x | y, ref.or_(x, y)),
        ("x ^ y", lambda x, y: x ^ y, ref.xor(x, y)),
        ("~x", lambda x, y: ~x, ref.not_(x)),                 # logical not, not -2
        ("x & True", lambda x, y: x & True, ref.and_(x, c(True))),
        ("False | x", lambda x, y: False | x, ref.or_(c(False), x)),
        ("True ^ x", lambda x, y: True ^ x, ref.xor(c(True), x)),
        ("x + y", lambda x, y: x + y, ref.add(x, y)),         # PRED add = OR
        ("x * y", lambda x, y: x * y, ref.multiply(x, y)),    # PRED mul = AND
    ]
    _check_overloads(table, [x, y])


def test_overloads_float() -> None:
    x, y = cross(FLOAT_KEYS, "f32", np.random.default_rng(6))
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x + y", lambda x, y: x + y, ref.add(x, y)),
        ("x - y", lambda x, y: x - y, ref.subtract(x, y)),
        ("x * y", lambda x, y: x * y, ref.multiply(x, y)),
        ("x / y", lambda x, y: x / y, ref.divide(x, y)),
        ("x % y", lambda x, y: x % y, ref.remainder(x, y)),   # fmod: the sign of x
        ("x ** y", lambda x, y: x ** y, ref.power(x, y)),
        ("-x", lambda x, y: -x, ref.negate(x)),
        ("x + 1.5", lambda x, y: x + 1.5, ref.add(x, c(1.5))),
        ("1.5 + x", lambda x, y: 1.5 + x, ref.add(c(1.5), x)),
        ("1 - x", lambda x, y: 1 - x, ref.subtract(c(1), x)),      # an int becomes an f32 constant
        ("2.0 * x", lambda x, y: 2.0 * x, ref.multiply(c(2.0), x)),
        ("1.0 / x", lambda x, y: 1.0 / x, ref.divide(c(1.0), x)),
        ("5.0 % x", lambda x, y: 5.0 % x, ref.remainder(c(5.0), x)),
        ("x ** 2", lambda x, y: x ** 2, ref.power(x, c(2))),
        ("2.0 ** x", lambda x, y: 2.0 ** x, ref.power(c(2.0), x)),
        ("x + np.float32(0.5)", lambda x, y: x + np.float32(0.5), ref.add(x, c(0.5))),
        ("np.float32(3) * x", lambda x, y: np.float32(3) * x, ref.multiply(c(3.0), x)),
    ]
    _check_overloads(table, [x, y], approx={"x ** y", "x ** 2", "2.0 ** x"})


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_overloads_half(dt: str) -> None:
    x = ref.values(dt, 32, 8)
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x * 2", lambda x: x * 2, ref.multiply(x, c(2))),
        ("x + 0.1", lambda x: x + 0.1, ref.add(x, c(0.1))),      # 0.1 rounded to the type first
        ("0.5 - x", lambda x: 0.5 - x, ref.subtract(c(0.5), x)),
        ("x / 3", lambda x: x / 3, ref.divide(x, c(3))),
    ]
    _check_overloads(table, [x])


def test_overloads_complex() -> None:
    rng = np.random.default_rng(9)
    x, y = moderate_complex("c64", rng, 16), moderate_complex("c64", rng, 16)
    c = lambda v: _full(x, v)  # noqa: E731
    table = [
        ("x + y", lambda x, y: x + y, ref.add(x, y)),
        ("x - y", lambda x, y: x - y, ref.subtract(x, y)),
        ("-x", lambda x, y: -x, ref.negate(x)),
        ("x * y", lambda x, y: x * y, ref.multiply(x, y)),
        ("x / y", lambda x, y: x / y, ref.divide(x, y)),
        ("x + 1j", lambda x, y: x + 1j, ref.add(x, c(1j))),
        ("2 + x", lambda x, y: 2 + x, ref.add(c(2), x)),
        ("2j * x", lambda x, y: 2j * x, ref.multiply(c(2j), x)),
    ]
    _check_overloads(table, [x, y], approx={"x * y", "x / y", "2j * x"})


def test_overload_result_types() -> None:
    # A Python scalar takes the other side's element type, whatever the type.
    b = xm.XlaBuilder("t")
    names = ("s8", "u16", "s64", "f16", "bf16", "f64", "c128")
    for i, name in enumerate(names):
        x = b.parameter(i, shape_of(name, (3,)))
        for r in (x + 1, 1 + x, x * 2, 2 - x, x / 1, 3 % x if name not in COMPLEX else x):
            assert r.shape == shape_of(name, (3,)), f"{name}: {r.shape}"


# ---------------------------------------------------------------- arguments at call time

def _neg_executable(name: str, dims: tuple[int, ...]):
    b = xm.XlaBuilder("t")
    b.neg(b.parameter(0, shape_of(name, dims)))
    return xm.compile(b.build())


def test_argument_errors() -> None:
    assert issubclass(xm.ArgumentError, TypeError) and issubclass(xm.ShapeError, ValueError)
    exe = _neg_executable("f32", (3,))
    good = np.array([1.0, -2.0, 0.5], np.float32)
    check(exe(good), ref.negate(good))
    for bad_call in (lambda: exe(good.astype(np.float64)),      # wrong dtype
                     lambda: exe(good.astype(np.int32)),
                     lambda: exe(np.zeros(4, np.float32)),       # wrong shape
                     lambda: exe(np.zeros((3, 1), np.float32)),
                     lambda: exe(np.float32(1.0)),
                     lambda: exe(),                              # wrong argument count
                     lambda: exe(good, good)):
        with pytest.raises(xm.ArgumentError):
            bad_call()


def test_python_scalars_for_rank0_parameters() -> None:
    exe = _neg_executable("f32", ())
    for arg in (1.5, 2, np.float32(1.5), np.array(1.5, np.float32)):
        out = exe(arg)
        assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
        assert out == -np.float32(arg)
    for bad in (np.float64(1.5), 1 + 2j, np.array([1.5], np.float32)):
        with pytest.raises(xm.ArgumentError):
            exe(bad)
    out = _neg_executable("c64", ())(1 + 2j)
    assert out.dtype == np.complex64 and out == -(1 + 2j)
    out = _neg_executable("s32", ())(3)
    assert out.dtype == np.int32 and out == -3


def test_any_memory_order_is_accepted() -> None:
    # Elementwise results must not depend on the input's memory layout (SEMANTICS 5.X Layouts).
    base = ref.values("f32", 48, 12).reshape(4, 12)
    b = xm.XlaBuilder("t")
    b.sub(b.parameter(0, shape_of("f32", (4, 6))), b.parameter(1, shape_of("f32", (4, 6))))
    exe = xm.compile(b.build())
    x, y = np.asfortranarray(base[:, :6]), base[:, ::2]    # Fortran order and a strided view
    check(exe(x, y), ref.subtract(np.ascontiguousarray(x), np.ascontiguousarray(y)), inputs=[x, y])
