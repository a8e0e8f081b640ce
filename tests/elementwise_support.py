"""Shared pieces of the elementwise tests (tests/test_elementwise*.py).

The type-name tuples, the transcendental tolerances, the compile-and-run helpers, the
comparison (`check`: ints and PRED exactly, floats exactly with NaN == NaN and the sign of
zero, transcendental results within ATOL + RTOL * |expected|) and the edge-value inputs.
"""

from __future__ import annotations

import math
import os
import sys
import zlib

import numpy as np
import pytest

import xlamlir as xm

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package: import the sibling module directly
    sys.path.insert(0, os.path.dirname(__file__))
    import reference as ref

PRED = ("pred",)
SINT = ("s8", "s16", "s32", "s64")
UINT = ("u8", "u16", "u32", "u64")
INTS = SINT + UINT
FLOATS = ("f16", "bf16", "f32", "f64")
COMPLEX = ("c64", "c128")
ALL = PRED + INTS + FLOATS + COMPLEX
INEXACT = FLOATS + COMPLEX
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
N = 64  # elements per case: the edge values first, then random ones

# Tolerances for transcendental results. RTOL: f32 ~17 ulp, f64 ~4500 ulp of libm
# differences, f16/bf16 2 ulp (they compute in f32 and round). ATOL: the smallest normal
# number, so results in the subnormal range may flush to zero. Complex functions are
# computed from real formulas (XLA:CPU style), hence looser.
RTOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 2e-6, "f64": 1e-12, "c64": 1e-5, "c128": 1e-11}
ATOL = {**{n: float(ref.finfo(n).tiny) for n in FLOATS}, "c64": 1e-6, "c128": 1e-12}
# sin/cos/tan: an absolute error of about one ulp of 1 where the result crosses zero.
PERIODIC_ATOL = {**{n: 2 * float(ref.finfo(n).eps) for n in FLOATS}, "c64": 1e-6, "c128": 1e-12}


def xtype(name: str) -> xm.PrimitiveType:
    return getattr(xm, name.upper())


def shape_of(name: str, dims: tuple[int, ...]) -> xm.Shape:
    return xm.Shape.array(xtype(name), dims)


def seed_of(*parts) -> int:
    return zlib.crc32("-".join(map(str, parts)).encode())


def run(build, arrays):
    """Compile `build(b, *params)`, one parameter per array, and run it on the arrays."""
    b = xm.XlaBuilder("t")
    params = [b.parameter(i, shape_of(ref.name_of(a), a.shape)) for i, a in enumerate(arrays)]
    root = build(b, *params)
    exe = xm.compile(b.build(root))
    return exe(*arrays)


def run_op(method: str, arrays, *extra, **kwargs):
    return run(lambda b, *p: getattr(b, method)(*p, *extra, **kwargs), arrays)


def expect_shape_error(method: str, names, *extra, dims=(4,), **kwargs) -> None:
    b = xm.XlaBuilder("t")
    params = [b.parameter(i, shape_of(n, dims)) for i, n in enumerate(names)]
    with pytest.raises(xm.ShapeError):
        getattr(b, method)(*params, *extra, **kwargs)


# ---------------------------------------------------------------- checking

def _float_bad(a, e, approx: bool, rtol: float, atol: float) -> np.ndarray:
    a, e = np.asarray(a).astype(np.float64), np.asarray(e).astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    bad = nan_a != nan_e
    both = ~nan_a & ~nan_e
    if not approx:
        return bad | (both & ((a != e) | (np.signbit(a) != np.signbit(e))))
    inf = np.isinf(a) | np.isinf(e)
    bad |= both & inf & (a != e)
    fin = both & ~inf
    with np.errstate(all="ignore"):
        bad |= fin & ~(np.abs(a - e) <= atol + rtol * np.abs(e))
    zeros = both & (a == 0) & (e == 0)
    return bad | (zeros & (np.signbit(a) != np.signbit(e)))


def _complex_bad(a, e, approx: bool, rtol: float, atol: float) -> np.ndarray:
    a, e = np.asarray(a).astype(np.complex128), np.asarray(e).astype(np.complex128)
    exact = _float_bad(a.real, e.real, False, 0, 0) | _float_bad(a.imag, e.imag, False, 0, 0)
    if not approx:
        return exact
    finite = np.isfinite(e.real) & np.isfinite(e.imag)
    with np.errstate(all="ignore"):
        close = np.abs(a - e) <= atol + rtol * np.abs(e)
    return np.where(finite, ~close, exact)


def tolerance(method: str, dt: str) -> dict:
    atol = PERIODIC_ATOL if method in ("sin", "cos", "tan") else ATOL
    return {"rtol": RTOL.get(dt, 0.0), "atol": atol.get(dt, 0.0)}


def check(actual, expected, *, approx=False, rtol=0.0, atol=0.0, inputs=(), what="") -> None:
    assert isinstance(actual, np.ndarray), f"{what}: got {type(actual).__name__}, not an array"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    kind = ref.kind_of(expected.dtype)
    if kind == "float":
        bad = _float_bad(actual, expected, approx, rtol, atol)
    elif kind == "complex":
        bad = _complex_bad(actual, expected, approx, rtol, atol)
    else:
        bad = actual != expected
    if not np.any(bad):
        return
    lines = [f"{what}: {int(np.sum(bad))} of {bad.size} elements differ"]
    for idx in list(zip(*np.nonzero(bad), strict=True))[:10]:
        args = ", ".join(repr(x[idx]) if x.shape == bad.shape else "..." for x in inputs)
        lines.append(f"  at {idx}: f({args}) = {actual[idx]!r}, expected {expected[idx]!r}")
    raise AssertionError("\n".join(lines))


def check_bits(actual, expected, what="") -> None:
    """Bit-exact comparison (NaN payloads included)."""
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    width = expected.dtype.itemsize * 8
    u = np.dtype(f"uint{width}") if width <= 64 else np.dtype(np.uint64)
    np.testing.assert_array_equal(np.ascontiguousarray(actual).view(u),
                                  np.ascontiguousarray(expected).view(u), err_msg=what)


# ---------------------------------------------------------------- inputs

FLOAT_KEYS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -2.5]
COMPLEX_KEYS = [complex(math.nan, 0), complex(0, math.nan), complex(math.inf, 0),
                complex(0, -math.inf), 0j, 1 + 1j, -2.5 + 0.5j]


def _int_keys(dt: str) -> list[int]:
    info, width = np.iinfo(ref.DTYPES[dt]), ref.bit_width(dt)
    if dt in SINT:
        return [0, 1, -1, info.min, info.max, 7, -7]
    return [0, 1, info.max, info.max - 1, 7, 1 << (width - 1), 2]


def _keys(dt: str) -> list:
    if dt == "pred":
        return [False, True]
    if dt in COMPLEX:
        return COMPLEX_KEYS
    if dt in FLOATS:
        return FLOAT_KEYS
    return _int_keys(dt)


def cross(keys, dt: str, rng, n: int = N) -> list[np.ndarray]:
    """All ordered pairs of `keys`, then random pairs up to n elements."""
    k = ref.as_dtype(keys, dt)
    x, y = np.repeat(k, len(k)), np.tile(k, len(k))
    rest = n - x.size
    if rest > 0:
        x = np.concatenate([x, ref.random_values(dt, rest, rng)])
        y = np.concatenate([y, ref.random_values(dt, rest, rng)])
    return [x, y]


def moderate_complex(dt: str, rng, n: int = N, scale: float = 1.0) -> np.ndarray:
    """Finite, nonzero, |z| in [0.2, 2.5], off the negative real axis: where complex
    formulas agree with numpy. NaN/inf parts are covered by the componentwise ops."""
    fixed = [1 + 0j, 1j, 0.5 - 0.5j, -1.5 + 2j, 2 - 1j, -0.25 - 1.75j, 1.25 + 0.75j, -2 - 0.5j]
    count = n - len(fixed)
    z = rng.uniform(0.2, 2.5, count) * np.exp(1j * rng.uniform(-3.1, 3.1, count))
    return ref.as_dtype((np.array(fixed + list(z)) * scale)[:n], dt)


def shift_inputs(dt: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    width, info = ref.bit_width(dt), np.iinfo(ref.DTYPES[dt])
    amounts = [0, 1, width - 1, width, width + 1, 2 * width, info.max]
    if dt in SINT:
        amounts += [-1, info.min, -width]      # negative amounts read as huge unsigned ones
    amounts += [int(v) for v in rng.integers(0, width, N - len(amounts))]
    return [ref.values(dt, N, seed), ref.as_dtype(amounts, dt)]


def int_pow_inputs(dt: str, rng) -> list[np.ndarray]:
    # Exponents stay below 64: XLA:CPU reads only the exponent's low 6 bits
    # (reference._int_power), the exact wrapped power is asserted below that.
    info, width = np.iinfo(ref.DTYPES[dt]), ref.bit_width(dt)
    if dt in SINT:
        bases, exps = [0, 1, -1, 2, -3, info.min, info.max], [-2, -1, 0, 1, 2, width - 1, 63]
    else:
        bases, exps = [0, 1, 2, 3, info.max, 1 << (width - 1), 7], [0, 1, 2, 3, width - 1, width, 63]
    x = np.repeat(ref.as_dtype(bases, dt), len(exps))
    y = np.tile(ref.as_dtype(exps, dt), len(bases))
    rest = N - x.size
    x = np.concatenate([x, ref.random_values(dt, rest, rng)])
    y = np.concatenate([y, ref.as_dtype(rng.integers(0, 64, rest), dt)])
    return [x, y]
