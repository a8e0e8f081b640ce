"""s2, s4, u2, u4: integer arithmetic wrapping in their own width, comparisons,
conversions to and from every type, and bitcast_convert's packing (little-endian:
s8 0x21 is s4 {1, 2}). Every pair of values of each type; tests/reference.py is the
oracle, itself checked against Python integers here (and against XLA when jax is there)."""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref  # noqa: E402
from narrow_support import NARROW, SUB_BYTE_INTS, all_bits, bits_of, run  # noqa: E402

NAMES = [t.text_name for t in SUB_BYTE_INTS]
BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "rem": "remainder",
          "max": "maximum", "min": "minimum", "pow": "power", "and_": "and_", "or_": "or_",
          "xor": "xor", "shift_left": "shift_left", "shift_right_logical": "shift_right_logical",
          "shift_right_arithmetic": "shift_right_arithmetic"}
UNARY = {"neg": "negate", "sign": "sign", "not_": "not_", "clz": "count_leading_zeros",
         "population_count": "popcnt"}


def _pairs(name: str) -> tuple[np.ndarray, np.ndarray]:
    values = all_bits(xm.type_of(name))
    x, y = np.meshgrid(values, values)
    return x.reshape(-1).copy(), y.reshape(-1).copy()


def _same(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.dtype == expected.dtype, what
    bad = actual.astype(np.int64) != expected.astype(np.int64)
    assert not bad.any(), f"{what}: {int(bad.sum())} differ, first at {np.argwhere(bad)[:5].ravel()}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", BINARY)
def test_binary_every_pair(name: str, method: str) -> None:
    x, y = _pairs(name)
    out = run(lambda b, p, q: getattr(b, method)(p, q), [x, y])
    _same(out, getattr(ref, BINARY[method])(x, y), f"{method} {name}")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", [*UNARY, "abs"])
def test_unary_every_value(name: str, method: str) -> None:
    x = all_bits(xm.type_of(name))
    if method == "abs" and name.startswith("u"):
        with pytest.raises(xm.ShapeError):
            run(lambda b, p: b.abs(p), [x])
        return
    out = run(lambda b, p: getattr(b, method)(p), [x])
    _same(out, getattr(ref, UNARY.get(method, method))(x), f"{method} {name}")


@pytest.mark.parametrize("name", NAMES)
def test_compare_every_pair(name: str) -> None:
    x, y = _pairs(name)
    for direction in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        out = run(lambda b, p, q, d=direction: b.compare(p, q, d), [x, y])
        np.testing.assert_array_equal(out, ref.compare(x, y, direction), err_msg=f"{direction} {name}")


def test_compare_type_must_match_signedness() -> None:
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.S4, (2,)))
    with pytest.raises(xm.ShapeError):
        b.compare(p, p, "LT", "UNSIGNED")
    with pytest.raises(xm.ShapeError):
        b.compare(p, p, "LT", "FLOAT")


def _python(op: str, a: int, b: int, width: int, signed: bool) -> int:
    """XLA's integer rules on Python ints, wrapped to `width` bits (an independent model)."""
    lo, mask = -(1 << (width - 1)) if signed else 0, (1 << width) - 1
    if op == "div":
        if b == 0:
            r = -1
        elif signed and a == lo and b == -1:
            r = a
        else:
            r = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    elif op == "rem":
        r = a if b == 0 else (0 if signed and a == lo and b == -1 else a - int(a / b) * b)
    elif op == "shift_right_logical":
        r = (a & mask) >> (b & mask) if (b & mask) < width else 0
    else:
        r = {"add": a + b, "sub": a - b, "mul": a * b}[op]
    r &= mask
    return r - (1 << width) if signed and r >> (width - 1) else r


@pytest.mark.parametrize("name", NAMES)
def test_reference_agrees_with_python_integers(name: str) -> None:
    x, y = _pairs(name)
    width, signed = ref.bit_width(name), name.startswith("s")
    for op, fn in (("add", ref.add), ("sub", ref.subtract), ("mul", ref.multiply), ("div", ref.divide),
                   ("rem", ref.remainder), ("shift_right_logical", ref.shift_right_logical)):
        want = [_python(op, int(a), int(b), width, signed) for a, b in zip(x, y, strict=True)]
        assert fn(x, y).astype(np.int64).tolist() == want, f"{op} {name}"


@pytest.mark.parametrize("src", NAMES)
def test_convert_to_every_type(src: str) -> None:
    x = all_bits(xm.type_of(src))
    for dst in list(ref.DTYPES):
        out = run(lambda b, p, d=dst: b.convert_element_type(p, xm.type_of(d)), [x])
        expected = ref.convert(x, dst)
        assert out.dtype == expected.dtype and out.shape == expected.shape
        as_bits = lambda a: np.ascontiguousarray(a).reshape(-1).view(np.uint8)  # noqa: E731
        np.testing.assert_array_equal(as_bits(out), as_bits(expected), err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("dst", NAMES)
def test_convert_from_every_type_wraps_and_saturates(dst: str) -> None:
    for src in ref.DTYPES:
        x = ref.values(src, 80, seed=3)
        out = run(lambda b, p: b.convert_element_type(p, xm.type_of(dst)), [x])
        expected = ref.convert(x, dst)
        _same(out, expected, f"{src} -> {dst}")
    # Floats saturate to the narrow range (XLA), ints wrap to it.
    f = np.array([100.0, -100.0, 7.9, -8.5, np.nan, np.inf], np.float32)
    assert run(lambda b, p: b.convert_element_type(p, xm.S4), [f]).tolist() == [7, -8, 7, -8, 0, 7]
    i = np.array([8, -9, 17, 255], np.int32)
    assert run(lambda b, p: b.convert_element_type(p, xm.S4), [i]).tolist() == [-8, 7, 1, -1]


BITCASTS = [("s8", "s4", (3,)), ("s4", "s8", (3, 2)), ("u8", "u4", (5,)), ("u4", "u8", (5, 2)),
            ("s8", "u2", (2, 2)), ("u2", "s8", (4, 4)), ("s4", "u4", (7,)), ("u4", "s4", (7,)),
            ("s2", "u2", (4,)), ("s4", "f4e2m1fn", (16,)), ("f4e2m1fn", "u4", (16,)),
            ("u16", "s4", (3,)), ("s4", "f32", (2, 8)), ("u2", "s4", (6, 2)), ("s4", "u2", (4,)),
            ("f8e5m2", "s8", (9,)), ("u8", "f8e4m3fn", (9,)), ("f8e8m0fnu", "s4", (4,)),
            ("s4", "f8e4m3b11fnuz", (4, 2)), ("f8e3m4", "u2", ()), ("u2", "f8e5m2fnuz", (4,))]


@pytest.mark.parametrize(("src", "dst", "dims"), BITCASTS, ids=[f"{s}-{d}" for s, d, _ in BITCASTS])
def test_bitcast_packing(src: str, dst: str, dims: tuple[int, ...]) -> None:
    n = int(np.prod(dims)) if dims else 1
    rng = np.random.default_rng(len(src) + 7 * n)
    storage = ref._uint(src)
    bits = rng.integers(0, 1 << ref.bit_width(src), size=n, dtype=np.uint64).astype(storage)
    x = bits.view(ref.DTYPES[src]).reshape(dims)
    out = run(lambda b, p: b.bitcast_convert_type(p, xm.type_of(dst)), [x])
    expected = ref.bitcast_convert(x, dst)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(bits_of(out.view(np.uint8) if out.dtype.itemsize == 1 else out),
                                  bits_of(expected.view(np.uint8) if expected.dtype.itemsize == 1
                                          else expected))


def test_bitcast_packing_worked_examples() -> None:
    # XLA: element 0 in the low bits.
    s8 = np.array([0x21, -9], np.int8)
    assert run(lambda b, p: b.bitcast_convert_type(p, xm.S4), [s8]).tolist() == [[1, 2], [7, -1]]
    s4 = np.array([[1, 2], [-1, 7]], ml_dtypes.int4)
    assert run(lambda b, p: b.bitcast_convert_type(p, xm.S8), [s4]).tolist() == [33, 127]
    u8 = np.array([0xE4], np.uint8)
    assert run(lambda b, p: b.bitcast_convert_type(p, xm.U2), [u8]).tolist() == [[0, 1, 2, 3]]


def test_bitcast_shape_rules() -> None:
    b = xm.XlaBuilder("t")
    with pytest.raises(xm.ShapeError, match="last dimension must be 2"):
        b.bitcast_convert_type(b.parameter(0, xm.Shape.array(xm.S4, (3,))), xm.S8)
    assert b.bitcast_convert_type(b.parameter(1, xm.Shape.array(xm.S8, (3,))), xm.U2).shape \
        == xm.Shape.array(xm.U2, (3, 4))


def test_reduce_and_fused_chain_wrap_in_the_narrow_width() -> None:
    x = np.array([7, 7, 7, -8, 3], ml_dtypes.int4)
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.S4, (5,)))
    total = b.reduce(p, b.constant(np.array(0, ml_dtypes.int4)), lambda acc, v: acc + v, [0])
    chain = (p + p) * p - p
    out = run(lambda bb, q: bb.tuple([bb.reduce(q, bb.constant(np.array(0, ml_dtypes.int4)),
                                                lambda a, v: a + v, [0]), (q + q) * q - q]), [x])
    del total, chain
    assert int(out[0]) == ((7 + 7 + 7 - 8 + 3 + 8) % 16) - 8
    expected = ref.subtract(ref.multiply(ref.add(x, x), x), x)
    assert out[1].tolist() == expected.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_reference_agrees_with_xla(name: str) -> None:
    jax = pytest.importorskip("jax")
    x, y = _pairs(name)
    ops = {"add": jax.numpy.add, "multiply": jax.numpy.multiply, "maximum": jax.numpy.maximum,
           "shift_right_logical": jax.lax.shift_right_logical,
           "shift_right_arithmetic": jax.lax.shift_right_arithmetic}
    for op, fn in ops.items():
        got = np.asarray(jax.jit(fn)(x, y))
        _same(got, getattr(ref, op)(x, y), f"xla {op} {name}")


def test_narrow_types_are_all_named() -> None:
    assert {t.text_name for t in NARROW} <= set(ref.DTYPES)
