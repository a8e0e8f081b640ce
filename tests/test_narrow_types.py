"""The sub-byte integers (s2, s4, u2, u4) and the narrow floats (f8e5m2, f8e4m3fn, ...,
f4e2m1fn, f8e8m0fnu) at the numpy boundary: parameters, results, constants, shapes and
their texts. Every bit pattern of every type goes through unchanged."""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref  # noqa: E402
from narrow_support import NARROW, P, all_bits, bits_of, compile_checked, run  # noqa: E402


@pytest.mark.parametrize("t", NARROW, ids=str)
def test_parameter_to_result_keeps_every_bit_pattern(t: xm.PrimitiveType) -> None:
    x = all_bits(t).reshape(-1, 2)
    out = run(lambda b, p: p, [x])
    assert out.dtype == xm.dtype_of(t) and out.shape == x.shape
    np.testing.assert_array_equal(bits_of(out), bits_of(x))


@pytest.mark.parametrize("t", NARROW, ids=str)
def test_constant_keeps_every_bit_pattern(t: xm.PrimitiveType) -> None:
    x = all_bits(t)
    for data in (x, x[3:4].reshape(()), np.broadcast_to(x[-1], (3, 7)), x[:0]):
        b = xm.XlaBuilder("c")
        data = np.array(data)  # a copy, C-contiguous (ascontiguousarray makes rank 0 rank 1)
        out = compile_checked(b.build(b.constant(data)))()
        assert out.dtype == xm.dtype_of(t) and out.shape == data.shape
        np.testing.assert_array_equal(bits_of(out), bits_of(data))


@pytest.mark.parametrize("t", NARROW, ids=str)
def test_large_constant_and_tuple_of_parameters(t: xm.PrimitiveType) -> None:
    # A constant large enough for MLIR's hex form, next to a parameter in a tuple result.
    big = np.resize(all_bits(t), 300)
    x = all_bits(t)[::-1].copy()
    out = run(lambda b, p: b.tuple([b.constant(big), p]), [x])
    np.testing.assert_array_equal(bits_of(out[0]), bits_of(big))
    np.testing.assert_array_equal(bits_of(out[1]), bits_of(x))


def test_non_canonical_storage_reads_as_ml_dtypes_reads_it() -> None:
    # ml_dtypes reads only the low bits of an int4 byte; so does a computation.
    x = np.array([0x3F, 0xF1, 0x08], np.uint8).view(ml_dtypes.int4)
    out = run(lambda b, p: b.tuple([p, b.convert_element_type(p, xm.S8)]), [x])
    np.testing.assert_array_equal(out[1], x.astype(np.int8))


def test_shape_texts() -> None:
    assert str(xm.Shape.array(P.S4, (2, 3))) == "s4[2,3]"
    assert str(xm.Shape.array(P.F8E5M2, (4,))) == "f8e5m2[4]"
    assert str(xm.Shape.array(P.F8E4M3FN, ())) == "f8e4m3fn[]"
    for t in NARROW:
        s = xm.Shape.array(t, (2, 1))
        assert xm.Shape.parse(str(s)) == s


def test_hlo_text_prints_types_and_literals() -> None:
    b = xm.XlaBuilder("c")
    f8 = b.constant(np.array([1.5, -2, np.nan, 0], ml_dtypes.float8_e4m3fn))
    s4 = b.constant(np.array([1, -2, 7], ml_dtypes.int4))
    f4 = b.constant(np.array(2, ml_dtypes.float4_e2m1fn))
    p = b.parameter(0, xm.Shape.array(P.U2, (3,)))
    text = b.build(b.tuple([f8, s4, f4, p])).as_hlo_text()
    assert "f8e4m3fn[4]{0} constant({1.5, -2, nan, 0})" in text
    assert "s4[3]{0} constant({1, -2, 7})" in text
    assert "f4e2m1fn[] constant(2)" in text
    assert "u2[3]{0} parameter(0)" in text


def test_wrong_dtype_argument_is_rejected() -> None:
    b = xm.XlaBuilder("t")
    exe = xm.compile(b.build(b.parameter(0, xm.Shape.array(P.S4, (2,)))))
    with pytest.raises((xm.ShapeError, xm.ArgumentError)):
        exe(np.zeros(2, np.int8))


@pytest.mark.parametrize("t", NARROW, ids=str)
def test_sort_long_rows(t: xm.PrimitiveType) -> None:
    # Rows longer than the radix sort's threshold: the comparator decides (the radix keys
    # assume the storage width and IEEE layouts).
    x = np.resize(all_bits(t), (3, 40))
    x = np.ascontiguousarray(np.random.default_rng(1).permuted(x, axis=1))
    b = xm.XlaBuilder("s")
    p = b.parameter(0, xm.Shape.array(t, x.shape))
    kind = "TOTALORDER" if t.is_floating else ("SIGNED" if t.is_signed_int else "UNSIGNED")
    out = compile_checked(b.build(b.sort(p, lambda u, v: u.builder.compare(u, v, "LT", kind),
                                         dimension=1)))(x)
    for row_in, row_out in zip(x, out, strict=True):
        keys = [int(k) for k in ref_total_order(row_out)]
        assert keys == sorted(keys)
        assert sorted(bits_of(row_in).tolist()) == sorted(bits_of(row_out).tolist())


def ref_total_order(row: np.ndarray) -> np.ndarray:
    if xm.type_of(row.dtype).is_floating:
        return ref._total_order_key(row)
    return row.astype(np.int64)


_OTHER_OPS = {
    "concat": lambda b, p, one, zero: b.concat_in_dim([p, p], 3),
    "reduce_window": lambda b, p, one, zero: b.reduce_window(p, b.constant(zero), lambda a, v: a + v,
                                                             (1, 1, 2, 2), (1, 1, 1, 1)),
    "conv": lambda b, p, one, zero: b.conv(p, b.constant(np.broadcast_to(one, (1, 1, 2, 2)).copy()),
                                           (1, 1), "VALID"),
    "reduce": lambda b, p, one, zero: b.reduce(p, b.constant(zero), lambda a, v: a + v, [3]),
    "pad": lambda b, p, one, zero: b.pad(p, b.constant(one), [(0, 0, 0), (0, 0, 0), (1, 0, 1), (0, 2, 0)]),
    "transpose_add": lambda b, p, one, zero: b.transpose(p, (0, 1, 3, 2)) + b.transpose(p, (0, 1, 3, 2)),
}


@pytest.mark.parametrize("t", NARROW, ids=str)
@pytest.mark.parametrize("op", _OTHER_OPS)
def test_other_ops_match_the_reference(t: xm.PrimitiveType, op: str) -> None:
    dtype = xm.dtype_of(t)
    if t.is_floating:
        x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4).astype(dtype)
    else:
        x = (np.arange(12).reshape(1, 1, 3, 4) % 3).astype(dtype)
    one = np.array(1, dtype)
    zero = np.array(1 if t == P.F8E8M0FNU else 0, dtype)  # e8m0 has no 0
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(t, x.shape))
    comp = b.build(_OTHER_OPS[op](b, p, one, zero))
    out = compile_checked(comp)(x)
    expected = np.asarray(ref.evaluate(comp, [x]))
    np.testing.assert_array_equal(out.astype(np.float64), expected.astype(np.float64))


@pytest.mark.parametrize("t", NARROW, ids=str)
def test_long_reductions_use_identities_the_type_has(t: xm.PrimitiveType) -> None:
    # 4096 elements: the lane-split reduction pads lanes with the combiner's identity; -inf
    # is NaN in a type without inf, and f8e8m0fnu has no 0 at all.
    dtype = xm.dtype_of(t)
    if t == P.F8E8M0FNU:
        x, init = np.full(4096, 2.0 ** -20, np.float32).astype(dtype), np.array(2.0 ** -20, np.float32)
    else:
        x, init = np.zeros(4096, np.float32), np.array(0, np.float32)
        x[::512] = 1
    x, init = x.astype(dtype), init.astype(dtype)
    b = xm.XlaBuilder("r")
    p = b.parameter(0, xm.Shape.array(t, x.shape))
    top = b.constant(np.array(x.max(), dtype))
    comp = b.build(b.tuple([b.reduce(p, b.constant(init), lambda a, v: a + v, [0]),
                            b.reduce(p, b.constant(init), lambda a, v: a.builder.max(a, v), [0]),
                            b.reduce(p, top, lambda a, v: a.builder.min(a, v), [0])]))
    total, largest, smallest = compile_checked(comp)(x)
    assert float(largest) == float(x.max()) and float(smallest) == float(x.min())
    if t == P.F8E8M0FNU:
        assert float(total) == 2.0 ** -18  # 2^-19 + 2^-20 ties up to 2^-18, where it stays
    elif t.is_floating:
        exact = 8.0
        assert float(total) == float(np.array(exact, np.float32).astype(dtype)) or t == P.F4E2M1FN
    else:
        assert int(total) == int(np.array(8).astype(dtype))
