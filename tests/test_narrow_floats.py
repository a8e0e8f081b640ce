"""The narrow floats (f8e5m2, f8e4m3fn, f8e4m3b11fnuz, f8e5m2fnuz, f8e4m3fnuz, f8e4m3, f8e3m4,
f4e2m1fn, f8e8m0fnu): conversions (integer code in lowering/passes/soft_float.py, the same
on every CPU) on every bit pattern, and around every rounding boundary, against
tests/reference.py, against ml_dtypes and, when jax is there, against XLA itself;
arithmetic computed in f32 and rounded to the type; compare (FLOAT and TOTALORDER);
reduce_precision."""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref  # noqa: E402
from narrow_support import NARROW_FLOATS, all_bits, run  # noqa: E402

NAMES = [t.text_name for t in NARROW_FLOATS]


def _convert(x: np.ndarray, dst: str) -> np.ndarray:
    return run(lambda b, p: b.convert_element_type(p, xm.type_of(dst)), [x])


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(f"u{a.dtype.itemsize}") if a.dtype.itemsize <= 8 else a.view(np.uint64)


def _same_bits(actual: np.ndarray, expected: np.ndarray, inputs: np.ndarray, what: str) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    bad = _bits(actual) != _bits(expected)
    if bad.any():
        idx = np.nonzero(bad)[0][:6]
        raise AssertionError(f"{what}: {int(bad.sum())} differ: inputs {inputs.reshape(-1)[idx]!r} -> "
                             f"{_bits(actual)[idx]} expected {_bits(expected)[idx]}")


def _same_values(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Equal values, the sign of zero included; NaN matches NaN (payloads aside)."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    bad = ~(((a == e) & (np.signbit(a) == np.signbit(e))) | (np.isnan(a) & np.isnan(e)))
    assert not bad.any(), f"{what}: {int(bad.sum())} differ, e.g. {actual[bad][:5]} vs {expected[bad][:5]}"


def _boundaries(name: str) -> np.ndarray:
    """Every finite value of the type, the midpoints between neighbours (ties) and the f64
    numbers just above and below each, values past the largest, and the specials."""
    values = all_bits(xm.type_of(name)).astype(np.float64)
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[1:] + finite[:-1]) / 2
    top = finite[-1] * np.array([1.0625, 1.125, 1.25, 1.5, 2.0, 1e3])
    near = [np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-300, -1e-300, 1e300])
    return np.concatenate([finite, mids, *near, top, -top, specials])


def _f32_boundaries(name: str) -> np.ndarray:
    """As `_boundaries`, the neighbours of the ties taken in f32 (the f64 ones round back
    onto the tie in f32)."""
    x = _boundaries(name).astype(np.float32)
    values = all_bits(xm.type_of(name)).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[1:] + finite[:-1]) / np.float32(2)  # exact: a few significant bits
    up, down = np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))
    return np.concatenate([x, up, down])


def _f32_sweep() -> np.ndarray:
    """Every 4093rd f32 bit pattern (all exponents, both signs, NaNs, subnormals)."""
    return np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32).view(np.float32)


# ---------------------------------------------------------------- narrow -> wide

@pytest.mark.parametrize("name", NAMES)
def test_decode_every_bit_pattern(name: str) -> None:
    x = all_bits(xm.type_of(name))
    f32 = _convert(x, "f32")
    _same_values(f32, x.astype(np.float32), f"{name} -> f32 (ml_dtypes)")
    # NaN becomes the quiet NaN with its sign (XLA: FNUZ and E8M0 give +NaN).
    nan = np.isnan(f32)
    signed = xm.type_of(name).float_format.nan in ("ieee", "all_ones") and name != "f8e8m0fnu"
    sign = (_bits(x).astype(np.uint32) >> (xm.type_of(name).bit_width - 1)) & 1 if signed else 0
    np.testing.assert_array_equal(_bits(f32)[nan], (0x7FC00000 | (np.uint32(sign) << 31))[nan]
                                  if signed else np.full(int(nan.sum()), 0x7FC00000, np.uint32))
    for wide in ("f64", "f16", "bf16"):
        _same_values(_convert(x, wide), ref.convert(x, wide), f"{name} -> {wide}")


@pytest.mark.parametrize("name", NAMES)
def test_narrow_to_ints_truncates_and_saturates(name: str) -> None:
    x = all_bits(xm.type_of(name))
    for dst in ("pred", "s8", "u8", "s32", "u64", "s4", "u2"):
        out = _convert(x, dst)
        expected = ref.convert(x, dst)
        np.testing.assert_array_equal(out.astype(np.int64) if dst != "pred" else out,
                                      expected.astype(np.int64) if dst != "pred" else expected,
                                      err_msg=f"{name} -> {dst}")
    # f4e2m1fn's largest, 6, is 6 (XLA:CPU gives the integer maximum: a bug not copied).
    if name == "f4e2m1fn":
        assert _convert(np.array([6, -6], ml_dtypes.float4_e2m1fn), "s8").tolist() == [6, -6]


# ---------------------------------------------------------------- wide -> narrow

@pytest.mark.parametrize("name", NAMES)
def test_encode_f32_around_every_boundary(name: str) -> None:
    x = np.concatenate([_f32_boundaries(name), _f32_sweep()])
    out = _convert(x, name)
    _same_bits(out, ref.convert(x, name), x, f"f32 -> {name}")
    # ml_dtypes converts f32 as XLA does, but for NaN -> f4e2m1fn (XLA: -0 for every NaN).
    keep = ~np.isnan(x) if name == "f4e2m1fn" else np.ones(x.shape, bool)
    ml = x[keep].astype(xm.dtype_of(xm.type_of(name)))
    _same_bits(out[keep], ml, x[keep], f"f32 -> {name} (ml_dtypes)")


@pytest.mark.parametrize("name", NAMES)
def test_encode_f64_rounds_once(name: str) -> None:
    x = _boundaries(name)
    out = _convert(x, name)
    _same_bits(out, ref.convert(x, name), x, f"f64 -> {name}")
    # Just above a tie rounds away from it (through f32 it would be the tie, then even).
    values = all_bits(xm.type_of(name)).astype(np.float64)
    finite = np.unique(values[np.isfinite(values) & (values > 0)])
    above = np.nextafter((finite[1:] + finite[:-1]) / 2, np.inf)
    np.testing.assert_array_equal(_convert(above, name).astype(np.float64), finite[1:])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("src", ["f16", "bf16"])
def test_encode_every_f16_and_bf16(name: str, src: str) -> None:
    x = np.arange(1 << 16, dtype=np.uint16).view(ref.DTYPES[src])
    _same_bits(_convert(x, name), ref.convert(x, name), x, f"{src} -> {name}")


@pytest.mark.parametrize("name", NAMES)
def test_narrow_to_every_narrow_float(name: str) -> None:
    x = all_bits(xm.type_of(name))
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.type_of(name), x.shape))
    exe = xm.compile(b.build(b.tuple([b.convert_element_type(p, xm.type_of(d)) for d in NAMES])))
    for dst, out in zip(NAMES, exe(x), strict=True):
        _same_bits(out, ref.convert(x, dst), x, f"{name} -> {dst}")


@pytest.mark.parametrize("name", NAMES)
def test_ints_to_narrow_go_through_f32(name: str) -> None:
    for src in ("pred", "s8", "u8", "s32", "s64", "u64", "s4", "u2"):
        x = ref.values(src, 200, seed=5)
        _same_bits(_convert(x, name), ref.convert(x, name), x, f"{src} -> {name}")


# ---------------------------------------------------------------- arithmetic and compare

EXACT_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "rem": "remainder",
                "max": "maximum", "min": "minimum"}
EXACT_UNARY = {"abs": "abs", "neg": "negate", "sign": "sign", "floor": "floor", "ceil": "ceil",
               "round_nearest_afz": "round_nearest_afz", "round_nearest_even": "round_nearest_even",
               "sqrt": "sqrt", "is_finite": "is_finite", "real": "real", "imag": "imag"}


def _pairs(name: str, limit: int = 1 << 12) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of values for the 4-bit type; for 8-bit ones a seeded sample with every
    value on each side."""
    values = all_bits(xm.type_of(name))
    if values.size ** 2 <= limit:
        x, y = np.meshgrid(values, values)
        return x.reshape(-1).copy(), y.reshape(-1).copy()
    rng = np.random.default_rng(values.size)
    x = np.concatenate([values, rng.choice(values, limit - values.size)])
    return x, rng.permutation(x)


@pytest.mark.parametrize("name", NAMES)
def test_binary_ops_round_once_from_f32(name: str) -> None:
    x, y = _pairs(name)
    b = xm.XlaBuilder("t")
    p, q = (b.parameter(i, xm.Shape.array(xm.type_of(name), x.shape)) for i in range(2))
    exe = xm.compile(b.build(b.tuple([getattr(b, m)(p, q) for m in EXACT_BINARY])))
    for method, out in zip(EXACT_BINARY, exe(x, y), strict=True):
        _same_values(out, getattr(ref, EXACT_BINARY[method])(x, y), f"{method} {name}")


@pytest.mark.parametrize("name", NAMES)
def test_unary_ops(name: str) -> None:
    x = all_bits(xm.type_of(name))
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.type_of(name), x.shape))
    exe = xm.compile(b.build(b.tuple([getattr(b, m)(p) for m in EXACT_UNARY])))
    for method, out in zip(EXACT_UNARY, exe(x), strict=True):
        expected = getattr(ref, EXACT_UNARY[method])(x)
        if method == "is_finite":
            np.testing.assert_array_equal(out, expected)
        else:
            _same_values(out, expected, f"{method} {name}")
    # Transcendental ones: f32's result (close to the true one) rounded to the type.
    for method, fn in (("exp", ref.exponential), ("log", ref.log), ("tanh", ref.tanh)):
        out = run(lambda bb, v, m=method: getattr(bb, m)(v), [x]).astype(np.float64)
        want = fn(x).astype(np.float64)
        finite = np.isfinite(want) & np.isfinite(out)
        assert (np.isnan(out) == np.isnan(want)).all(), method
        spacing = float(ml_dtypes.finfo(x.dtype).eps) * np.maximum(np.abs(want), float(
            ml_dtypes.finfo(x.dtype).smallest_normal))
        assert (np.abs(out - want)[finite] <= spacing[finite]).all(), f"{method} {name}"


@pytest.mark.parametrize("name", NAMES)
def test_compare_float_and_total_order(name: str) -> None:
    x, y = _pairs(name)
    b = xm.XlaBuilder("t")
    p, q = (b.parameter(i, xm.Shape.array(xm.type_of(name), x.shape)) for i in range(2))
    cases = [(d, c) for c in ("FLOAT", "TOTALORDER") for d in ("EQ", "NE", "LT", "LE", "GT", "GE")]
    exe = xm.compile(b.build(b.tuple([b.compare(p, q, d, c) for d, c in cases])))
    for (direction, ct), out in zip(cases, exe(x, y), strict=True):
        np.testing.assert_array_equal(out, ref.compare(x, y, direction, ct), err_msg=f"{direction} {ct}")


def test_compare_rejects_integer_comparison_types() -> None:
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.F8E4M3FN, (2,)))
    with pytest.raises(xm.ShapeError):
        b.compare(p, p, "LT", "SIGNED")


def test_e8m0_has_no_zero() -> None:
    # Products underflow in f32 (XLA computes there): 0 is not an e8m0 value, so NaN.
    x = np.array([2.0 ** -127, 2.0 ** -100, 2.0 ** 100, 1.0], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    out = run(lambda b, p: b.tuple([p * p, b.sign(p), b.convert_element_type(p, xm.PRED)]), [x])
    assert np.isnan(out[0].astype(np.float32)[:3]).all() and float(out[0][3]) == 1.0
    assert out[1].astype(np.float32).tolist() == [1.0] * 4
    assert out[2].tolist() == [True] * 4


# ---------------------------------------------------------------- reduce_precision

PRECISIONS = [(8, 23), (5, 10), (5, 2), (4, 3), (3, 2), (2, 1), (1, 0), (8, 0), (3, 4)]


@pytest.mark.parametrize("name", NAMES)
def test_reduce_precision(name: str) -> None:
    x = all_bits(xm.type_of(name))
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.type_of(name), x.shape))
    exe = xm.compile(b.build(b.tuple([b.reduce_precision(p, e, m) for e, m in PRECISIONS])))
    for (e, m), out in zip(PRECISIONS, exe(x), strict=True):
        _same_values(out, ref.reduce_precision(x, e, m), f"reduce_precision({e}, {m}) {name}")


def test_reduce_precision_to_the_types_own_format_is_the_identity() -> None:
    for t in NARROW_FLOATS:
        x = all_bits(t)
        f = t.float_format
        out = run(lambda b, p, f=f: b.reduce_precision(p, f.exponent_bits, f.mantissa_bits), [x])
        np.testing.assert_array_equal(_bits(out), _bits(x), err_msg=str(t))


# ---------------------------------------------------------------- the reference against XLA

@pytest.mark.parametrize("name", NAMES)
def test_reference_conversions_agree_with_xla(name: str) -> None:
    jax = pytest.importorskip("jax")
    # Scoped: a global jax_enable_x64 stays on for every later test of the process (jax
    # programs then lower float64 constants and fail where they ran alone).
    with jax.enable_x64(True):
        dt = xm.dtype_of(xm.type_of(name))
        xla = jax.jit(lambda a: jax.lax.convert_element_type(a, dt), static_argnums=())
        for x in (np.concatenate([_f32_boundaries(name), _f32_sweep()]), _boundaries(name),
                  np.arange(1 << 16, dtype=np.uint16).view(np.float16),
                  np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16),
                  ref.values("s64", 300, seed=9)):
            _same_bits(ref.convert(x, name), np.asarray(xla(x)), x,
                       f"{x.dtype} -> {name}: reference vs XLA")
        bits = all_bits(xm.type_of(name))
        for wide in (np.float32, np.float64):
            got = np.asarray(jax.jit(lambda a, w=wide: jax.lax.convert_element_type(a, w))(bits))
            _same_values(ref.convert(bits, np.dtype(wide).name.replace("float", "f")), got,
                         f"{name} -> {wide}")


@pytest.mark.parametrize("name", NAMES)
def test_complex_both_ways(name: str) -> None:
    x = all_bits(xm.type_of(name))
    for c in ("c64", "c128"):
        out = _convert(x, c)
        expected = ref.convert(x, c)
        _same_values(out.real, expected.real, f"{name} -> {c} (real)")
        assert (out.imag == 0).all()
        z = ref.values(c, 80, seed=4)
        _same_bits(_convert(z, name), ref.convert(z, name), z, f"{c} -> {name}")
