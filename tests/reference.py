"""The numpy reference oracle: XLA's op semantics, elementwise and whole-program.

Two layers in one module, so that every rule is written once. First the
elementwise ops, below; then `evaluate(computation, args)`, an interpreter of
built computations (the differential fuzzer's oracle) that uses them for every
elementwise op and adds the others (scatter, gather, sort, while, conditional,
convolution, reduce_window, select_and_scatter, fft, cholesky, ...).

The elementwise ops:

One function per dialect op, named exactly like the op (StableHLO spelling;
`not_`, `and_`, `or_` because the plain words are Python keywords). Inputs are
numpy arrays of one shape (broadcasting already applied) and of the op's
element type; the result is the expected array with XLA's result element type.
Where numpy and XLA disagree, these functions follow XLA. Every non-obvious
choice cites its source: a seed (`../shared/seeds/NNN`), a row of
`../shared/SEMANTICS.md`, the StableHLO spec, or XLA's CPU code generator
(`xla/service/elemental_ir_emitter.cc`, "XLA:CPU" below).

Floating-point results are computed in float64 (or complex128) and rounded
once to the result type. For + - * / sqrt fmod that is exactly XLA's IEEE
result (float64 has more than 2p+2 bits for f32/f16/bf16, so the double
rounding is innocuous); for transcendental functions it is the correctly
rounded value up to libm's error, and tests compare those with a tolerance.

Also here: `DTYPES` (XLA type name -> numpy dtype), `EDGE_VALUES` and
`values()` for test inputs. Imports numpy and ml_dtypes only, never xlamlir (the
interpreter duck-types the graph), so the reference can be checked on its own
(`python tests/reference.py`).
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8),
    "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
    # Sub-byte integers and narrow floats: ml_dtypes types, one element per byte.
    "s2": np.dtype(ml_dtypes.int2),
    "s4": np.dtype(ml_dtypes.int4),
    "u2": np.dtype(ml_dtypes.uint2),
    "u4": np.dtype(ml_dtypes.uint4),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e4m3b11fnuz": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "f8e3m4": np.dtype(ml_dtypes.float8_e3m4),
    "f4e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
    "f8e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
}
_NAMES = {dt: name for name, dt in DTYPES.items()}
_SUB_BYTE = {"s2": np.dtype(np.int8), "s4": np.dtype(np.int8), "u2": np.dtype(np.uint8),
             "u4": np.dtype(np.uint8)}  # -> the byte type holding their values
# name -> (exponent bits, mantissa bits, bias, kind): kind "ieee" (inf, NaN = exponent all
# ones), "fn" (NaN = all ones, no inf), "fnuz" (NaN = 0x80, no inf, no -0), "none" (neither
# NaN nor inf), "e8m0" (unsigned, exponent only, NaN = 0xFF, no zero).
_NARROW_FLOATS = {
    "f8e5m2": (5, 2, 15, "ieee"), "f8e4m3fn": (4, 3, 7, "fn"), "f8e4m3b11fnuz": (4, 3, 11, "fnuz"),
    "f8e5m2fnuz": (5, 2, 16, "fnuz"), "f8e4m3fnuz": (4, 3, 8, "fnuz"), "f8e4m3": (4, 3, 7, "ieee"),
    "f8e3m4": (3, 4, 3, "ieee"), "f4e2m1fn": (2, 1, 1, "none"), "f8e8m0fnu": (8, 0, 127, "e8m0"),
}
_WIDTHS = {"pred": 8, "s2": 2, "s4": 4, "u2": 2, "u4": 4, "f4e2m1fn": 4}

# (precision p including the implicit bit, minimum normal exponent, maximum exponent)
_FLOAT_FORMAT = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
                 "f64": (53, -1022, 1023)}
# explicit mantissa bits, as EmitReducePrecisionIR counts them
_MANTISSA_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
_COMPONENT = {"c64": "f32", "c128": "f64"}
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}


# ---------------------------------------------------------------- type helpers

def name_of(dtype) -> str:
    """XLA type name ('f32', 'bf16', ...) of a numpy dtype or array."""
    dt = dtype.dtype if isinstance(dtype, np.ndarray) else np.dtype(dtype)
    return _NAMES[dt]


def kind_of(name_or_dtype) -> str:
    """One of 'pred', 'sint', 'uint', 'float', 'complex'."""
    name = name_or_dtype if isinstance(name_or_dtype, str) else name_of(name_or_dtype)
    if name == "pred":
        return "pred"
    return {"s": "sint", "u": "uint", "f": "float", "b": "float", "c": "complex"}[name[0]]


def bit_width(name: str) -> int:
    """Bits of one element (pred: 8, its storage; s4: 4; f4e2m1fn: 4)."""
    return _WIDTHS.get(name, DTYPES[name].itemsize * 8)


def _uint(name: str) -> np.dtype:
    """The unsigned type of the element's storage (uint8 for the sub-byte types)."""
    return np.dtype(f"uint{max(bit_width(name), 8)}")


def _sint(name: str) -> np.dtype:
    return np.dtype(f"int{max(bit_width(name), 8)}")


def _unsigned_bits(x: np.ndarray) -> np.ndarray:
    """The elements' bit patterns as unsigned integers (a sub-byte type's low bits only)."""
    name = name_of(x)
    width = bit_width(name)
    u = np.asarray(x, order="C").view(_uint(name))  # (ascontiguousarray makes rank 0 rank 1)
    return u if width >= 8 else u.astype(np.int64) & ((1 << width) - 1)


def _signed_bits(x: np.ndarray) -> np.ndarray:
    """The elements' bit patterns read as signed integers of their width."""
    name = name_of(x)
    width = bit_width(name)
    if width >= 8:
        return np.asarray(x, order="C").view(_sint(name))
    u = _unsigned_bits(x)
    return np.where(u >= 1 << (width - 1), u - (1 << width), u)


def _in_bytes(fn):
    """An integer op on s2/s4/u2/u4 computed on their values as int8/uint8 and wrapped back:
    right for the ops whose result modulo 2^width depends only on the operands' values
    (+ - * / rem min max pow and or xor not abs sign negate; XLA's x/0 = -1 and
    INT_MIN/-1 = INT_MIN carry over). Shifts, clz and popcnt read the width themselves."""

    @functools.wraps(fn)
    def wrapped(*xs: np.ndarray) -> np.ndarray:
        name = _NAMES.get(xs[0].dtype)
        if name not in _SUB_BYTE:
            return fn(*xs)
        return fn(*(x.astype(_SUB_BYTE[name]) for x in xs)).astype(DTYPES[name])

    return wrapped


def finfo(name: str):
    return ml_dtypes.finfo(DTYPES[name])


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        return dtype
    return name_of(dtype)


def round_float(y, name: str) -> np.ndarray:
    """float64 values rounded once (nearest, ties to even) to float type `name`.

    Written out because ml_dtypes converts float64 -> bfloat16 through float32,
    which rounds twice. Overflow gives inf, underflow gradual (subnormals kept).
    """
    y = np.asarray(y, dtype=np.float64)
    if name == "f64":
        return y.copy()
    if name in _NARROW_FLOATS:
        return _round_narrow(y, name)
    p, emin, emax = _FLOAT_FORMAT[name]
    out = y.copy()
    finite = np.isfinite(y) & (y != 0)
    a = np.abs(y[finite])
    _, ex = np.frexp(a)                       # a = m * 2**ex, m in [0.5, 1)
    e = np.maximum(ex - 1, emin)              # exponent of the leading bit, floored at emin
    quantum = np.ldexp(1.0, e - (p - 1))
    with np.errstate(over="ignore"):          # 2^1024 when rounding up past f64's range: inf anyway
        r = np.rint(a / quantum) * quantum    # exact scaling by a power of two; rint ties to even
    max_finite = math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)
    r = np.where(r > max_finite, np.inf, r)
    out[finite] = np.copysign(r, y[finite])
    with np.errstate(all="ignore"):
        return out.astype(DTYPES[name])


def _round_narrow(y: np.ndarray, name: str) -> np.ndarray:
    """float64 values rounded once to the narrow float `name`, as XLA:CPU converts.

    Nearest, ties to even (e8m0, whose significand is always 1, rounds a tie up to the
    next power of two). Overflow: inf ("ieee"), NaN ("fn", "fnuz", "e8m0") or the
    largest finite value ("none": f4e2m1fn). NaN: the type's NaN with the sign
    ("fnuz": 0x80; "none": -0, as XLA; "e8m0": 0xFF). "fnuz" has no -0. e8m0 has
    neither zero nor sign: NaN for zero, negative values and NaN; 2^-127 for anything
    positive up to 2^-127, 2^-126 for anything between 2^-127 and 2^-126 (XLA, ml_dtypes).
    """
    exponent_bits, m, bias, kind = _NARROW_FLOATS[name]
    dt = DTYPES[name]
    max_finite = float(ml_dtypes.finfo(dt).max)
    emin = -bias if kind == "e8m0" else 1 - bias
    a = np.abs(y)
    finite = np.isfinite(y) & (y != 0)
    r = np.zeros(y.shape)
    _, ex = np.frexp(a[finite])
    quantum = np.ldexp(1.0, np.maximum(ex - 1, emin) - m)
    r[finite] = np.rint(a[finite] / quantum) * quantum
    r[np.isinf(y)] = np.inf
    over = r > max_finite
    r[over] = {"ieee": np.inf, "none": max_finite}.get(kind, np.nan)
    out = np.asarray(np.copysign(r, y))  # a 0-d result is a numpy scalar: masks need an array
    if kind == "fnuz":
        out[out == 0] = 0.0
    if kind == "e8m0":
        smallest = math.ldexp(1.0, -127)
        out = np.where(a <= smallest, smallest, np.where(a < 2 * smallest, 2 * smallest, out))
        out[(y <= 0) | np.isnan(y)] = np.nan
    out[np.isnan(y)] = -0.0 if kind == "none" else np.copysign(np.nan, y[np.isnan(y)])
    with np.errstate(all="ignore"):
        return out.astype(dt)  # exact: every value is one of the type's


def as_dtype(values, name: str) -> np.ndarray:
    """Python numbers (or an array) as an array of type `name`, rounding floats once."""
    kind = kind_of(name)
    if kind == "float":
        return round_float(np.asarray(values, dtype=np.float64), name)
    if kind == "complex":
        c = np.asarray(values, dtype=np.complex128)
        return _make_complex(round_float(c.real, _COMPONENT[name]),
                             round_float(c.imag, _COMPONENT[name]), name)
    if isinstance(values, np.ndarray):
        return values.astype(DTYPES[name])
    # Straight to the type: np.asarray([0, 2**64 - 1]) would go through float64.
    return np.array(values, dtype=DTYPES[name])


def _make_complex(re: np.ndarray, im: np.ndarray, name: str) -> np.ndarray:
    # Not `re + 1j * im`: 1j * inf is (nan + inf j).
    out = np.empty(np.shape(re), dtype=DTYPES[name])
    out.real = re
    out.imag = im
    return out


def _float_result(y64, like: np.ndarray) -> np.ndarray:
    """A float64 (or complex128) result rounded to the type of `like`."""
    name = name_of(like)
    if name in _NARROW_FLOATS:
        # XLA computes the narrow floats in f32: its range decides under- and overflow
        # (f8e8m0fnu 2^-127 * 2^-127 is 0 in f32, so NaN). Otherwise innocuous.
        y64 = _f64(round_float(y64, "f32"))
    if kind_of(name) == "complex":
        y = np.asarray(y64, dtype=np.complex128)
        comp = _COMPONENT[name]
        return _make_complex(round_float(y.real, comp), round_float(y.imag, comp), name)
    return round_float(y64, name)


def _c128(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.complex128)


# ---------------------------------------------------------------- unary ops

@_in_bytes
def abs(x: np.ndarray) -> np.ndarray:  # noqa: A001 - named after the dialect op
    """|x|; complex -> the component type (c64 -> f32).

    Signed ints wrap: abs(INT_MIN) = INT_MIN (SEMANTICS 5.A Abs). -0.0 -> +0.0.
    Unsigned and pred are rejected by XLA's shape inference (ElementIsSigned)
    and by StableHLO, so there is no rule for them here.
    """
    kind = kind_of(x.dtype)
    if kind == "complex":
        return round_float(np.abs(_c128(x)), _COMPONENT[name_of(x)])
    if kind == "sint":
        return np.where(x < 0, negate(x), x).astype(x.dtype)
    return _float_result(np.abs(_f64(x)), x)


@_in_bytes
def negate(x: np.ndarray) -> np.ndarray:
    """-x; ints wrap modulo 2^n (-INT_MIN = INT_MIN, unsigned -1 = MAX), -(+0.0) = -0.0."""
    kind = kind_of(x.dtype)
    if kind in ("sint", "uint"):
        u = x.view(_uint(name_of(x)))
        return (np.zeros_like(u) - u).view(x.dtype)
    if kind == "complex":
        return _make_complex(-x.real, -x.imag, name_of(x))
    return _float_result(-_f64(x), x)


@_in_bytes
def sign(x: np.ndarray) -> np.ndarray:
    """-1/0/+1; floats keep the sign of zero and NaN (seed 001, SEMANTICS D9);
    unsigned gives 0/1 (SEMANTICS 5.A Sign); complex gives x/|x|, 0 for 0.

    Complex: (re/|x|, im/|x|) componentwise, like XLA:CPU (so inf parts give NaN).
    """
    kind = kind_of(x.dtype)
    if kind == "sint":
        return np.sign(x).astype(x.dtype)
    if kind == "uint":
        return (x != 0).astype(x.dtype)
    if kind == "complex":
        z = _c128(x)
        with np.errstate(all="ignore"):
            a = np.abs(z)
            re = np.where(a == 0, 0.0, z.real / a)
            im = np.where(a == 0, 0.0, z.imag / a)
        return _float_result(_join(re, im), x)
    f = _f64(x)
    # XLA:CPU: copysign(x != 0 ? 1 : 0, x), NaN -> x.
    r = np.where(np.isnan(f), f, np.copysign((f != 0).astype(np.float64), f))
    return _float_result(r, x)


def _join(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    return _make_complex(re, im, "c128")


def floor(x: np.ndarray) -> np.ndarray:
    """floor; keeps -0.0 (floor(-0.0) = -0.0), floor(-0.5) = -1."""
    return _float_result(np.floor(_f64(x)), x)


def ceil(x: np.ndarray) -> np.ndarray:
    """ceil; ceil(-0.5) = -0.0 (SEMANTICS 5.A Ceil)."""
    return _float_result(np.ceil(_f64(x)), x)


def round_nearest_afz(x: np.ndarray) -> np.ndarray:
    """Round half away from zero: 0.5 -> 1, 2.5 -> 3, -2.5 -> -3 (SEMANTICS 5.A Round).

    Not numpy's np.round (ties to even). The sign of the input is kept, so
    round(-0.4) = -0.0 (IEEE roundToIntegralTiesToAway, llvm.round).
    """
    f = _f64(x)
    with np.errstate(invalid="ignore"):
        t = np.trunc(f)
        frac = f - t                     # exact
        r = np.where(np.abs(frac) >= 0.5, t + np.copysign(1.0, f), t)
    return _float_result(np.copysign(r, f), x)


def round_nearest_even(x: np.ndarray) -> np.ndarray:
    """Round half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2; keeps -0.0."""
    return _float_result(np.rint(_f64(x)), x)


def _transcendental(x: np.ndarray, real_fn, complex_fn=None) -> np.ndarray:
    with np.errstate(all="ignore"):
        if kind_of(x.dtype) == "complex":
            return _float_result((complex_fn or real_fn)(_c128(x)), x)
        return _float_result(real_fn(_f64(x)), x)


def exponential(x: np.ndarray) -> np.ndarray:
    """e^x; overflow -> inf, exp(-inf) = 0."""
    return _transcendental(x, np.exp)


def _complex_expm1(z: np.ndarray) -> np.ndarray:
    # Accurate near 0: Re = expm1(a)cos(b) - 2 sin^2(b/2), Im = e^a sin(b).
    a, b = z.real, z.imag
    re = np.expm1(a) * np.cos(b) - 2.0 * np.sin(b / 2) ** 2
    return _join(re, np.exp(a) * np.sin(b))


def exponential_minus_one(x: np.ndarray) -> np.ndarray:
    """e^x - 1, accurate near 0: expm1(1e-10) = 1e-10 (SEMANTICS 5.A Expm1)."""
    return _transcendental(x, np.expm1, _complex_expm1)


def log(x: np.ndarray) -> np.ndarray:
    """ln x; log(+-0) = -inf, log(x < 0) = NaN."""
    return _transcendental(x, np.log)


def _complex_log1p(z: np.ndarray) -> np.ndarray:
    # XLA:CPU's formula: 0.5 * log1p(a^2 + 2a + b^2) + i atan2(b, a + 1).
    a, b = z.real, z.imag
    return _join(0.5 * np.log1p(a * a + 2 * a + b * b), np.arctan2(b, a + 1))


def log_plus_one(x: np.ndarray) -> np.ndarray:
    """ln(1 + x), accurate near 0; log1p(-1) = -inf, log1p(x < -1) = NaN."""
    return _transcendental(x, np.log1p, _complex_log1p)


def _logistic_real(f: np.ndarray) -> np.ndarray:
    # Stable for large |x|: logistic(-inf) = 0, logistic(+inf) = 1 (SEMANTICS 5.A Logistic).
    e = np.exp(-np.abs(f))
    return np.where(f >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x)."""
    return _transcendental(x, _logistic_real, lambda z: 1.0 / (1.0 + np.exp(-z)))


def sqrt(x: np.ndarray) -> np.ndarray:
    """Square root; sqrt(-0.0) = -0.0, negative -> NaN. Real results are exact (IEEE)."""
    return _transcendental(x, np.sqrt)


def rsqrt(x: np.ndarray) -> np.ndarray:
    """1/sqrt(x); rsqrt(+0) = +inf, rsqrt(-0) = -inf (SEMANTICS 5.A Rsqrt), inf -> 0."""
    return _transcendental(x, lambda f: 1.0 / np.sqrt(f))


def _complex_cbrt(z: np.ndarray) -> np.ndarray:
    # Principal cube root |z|^(1/3) * e^(i arg(z)/3); 0 -> 0 (StableHLO cbrt, XLA:CPU EmitComplexCbrt).
    r = np.cbrt(np.abs(z))
    t = np.angle(z) / 3
    return _join(r * np.cos(t), r * np.sin(t))


def cbrt(x: np.ndarray) -> np.ndarray:
    """Real cube root: cbrt(-8) = -2, no NaN for negatives (SEMANTICS 5.A Cbrt)."""
    return _transcendental(x, np.cbrt, _complex_cbrt)


def sine(x: np.ndarray) -> np.ndarray:
    """sin; NaN/inf -> NaN, sin(-0.0) = -0.0."""
    return _transcendental(x, np.sin)


def cosine(x: np.ndarray) -> np.ndarray:
    """cos; NaN/inf -> NaN."""
    return _transcendental(x, np.cos)


def tan(x: np.ndarray) -> np.ndarray:
    return _transcendental(x, np.tan)


def tanh(x: np.ndarray) -> np.ndarray:
    """tanh; saturates to +-1 for large |x|, tanh(-0.0) = -0.0."""
    return _transcendental(x, np.tanh)


def cosh(x: np.ndarray) -> np.ndarray:
    """cosh; float only (client-library op in XLA). Overflows to inf only where cosh does."""
    return _transcendental(x, np.cosh)


def atan(x: np.ndarray) -> np.ndarray:
    """arctan; float only (XLA's client library computes Atan2(x, 1))."""
    return _transcendental(x, np.arctan)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """Error function; erf(+-inf) = +-1. Float only (XLA rejects complex Erf)."""
    if x.size == 0:
        return x.copy()
    return _transcendental(x, _erf)


def is_finite(x: np.ndarray) -> np.ndarray:
    """PRED: false for NaN and +-inf (seed 003 IsFinite). Float only."""
    return np.isfinite(_f64(x))


@_in_bytes
def not_(x: np.ndarray) -> np.ndarray:
    """Logical not on PRED (not(true) is false, not -2), bitwise not on ints."""
    if x.dtype == np.bool_:
        return np.logical_not(x)
    return np.invert(x)


def _per_element_uint(x: np.ndarray, fn) -> np.ndarray:
    vals = [fn(int(v)) for v in _unsigned_bits(x).ravel().tolist()]
    return np.array(vals, dtype=_uint(name_of(x))).reshape(x.shape).view(x.dtype)


def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    """Leading zero bits of the two's-complement pattern: clz(0) = width, clz(-1) = 0."""
    width = bit_width(name_of(x))
    return _per_element_uint(x, lambda v: width - v.bit_length())


def popcnt(x: np.ndarray) -> np.ndarray:
    """Set bits of the two's-complement pattern: popcnt(s8 -1) = 8."""
    return _per_element_uint(x, lambda v: v.bit_count())


def real(x: np.ndarray) -> np.ndarray:
    """Real part (c64 -> f32); identity on real floats."""
    if kind_of(x.dtype) == "complex":
        return x.real.copy()
    return x.copy()


def imag(x: np.ndarray) -> np.ndarray:
    """Imaginary part (c64 -> f32); +0 of the same type for real floats (seed 001 Imag)."""
    if kind_of(x.dtype) == "complex":
        return x.imag.copy()
    return _float_result(np.zeros(x.shape), x)  # f8e8m0fnu has no 0: its NaN


# ---------------------------------------------------------------- binary ops

def _wrapping(x: np.ndarray, y: np.ndarray, fn) -> np.ndarray:
    u = _uint(name_of(x))
    with np.errstate(all="ignore"):
        return fn(x.view(u), y.view(u)).astype(u).view(x.dtype)


def _float_binary(x: np.ndarray, y: np.ndarray, real_fn, complex_fn=None) -> np.ndarray:
    with np.errstate(all="ignore"):
        if kind_of(x.dtype) == "complex":
            return _float_result((complex_fn or real_fn)(_c128(x), _c128(y)), x)
        return _float_result(real_fn(_f64(x), _f64(y)), x)


@_in_bytes
def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y; ints wrap; PRED add = OR (XLA:CPU EmitPredBinaryOp: int8 add != 0)."""
    kind = kind_of(x.dtype)
    if kind == "pred":
        return np.logical_or(x, y)
    if kind in ("sint", "uint"):
        return _wrapping(x, y, np.add)
    return _float_binary(x, y, np.add)


@_in_bytes
def subtract(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x - y; ints wrap. PRED is rejected at build time (SEMANTICS 5.X)."""
    if kind_of(x.dtype) in ("sint", "uint"):
        return _wrapping(x, y, np.subtract)
    return _float_binary(x, y, np.subtract)


@_in_bytes
def multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * y; ints wrap; PRED mul = AND."""
    kind = kind_of(x.dtype)
    if kind == "pred":
        return np.logical_and(x, y)
    if kind in ("sint", "uint"):
        return _wrapping(x, y, np.multiply)
    return _float_binary(x, y, np.multiply)


def _int_min(x: np.ndarray):
    return ml_dtypes.iinfo(x.dtype).min


@_in_bytes
def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x / y. Ints truncate toward zero (-7/2 = -3). XLA:CPU EmitIntegerDivide:
    x/0 = -1 (all ones, so MAX for unsigned), INT_MIN/-1 = INT_MIN; never traps.
    Floats: IEEE (1/0 = inf, 0/0 = NaN)."""
    kind = kind_of(x.dtype)
    if kind not in ("sint", "uint"):
        return _float_binary(x, y, np.divide)
    zero = y == 0
    overflow = (x == _int_min(x)) & (y == -1) if kind == "sint" else np.zeros(x.shape, bool)
    safe_y = np.where(zero | overflow, 1, y).astype(x.dtype)
    q = np.where(zero | overflow, 0, _trunc_div(x, safe_y)).astype(x.dtype)
    q = np.where(overflow, x, q)
    all_ones = np.array(-1).astype(_sint(name_of(x))).view(x.dtype) if kind == "uint" else -1
    return np.where(zero, all_ones, q).astype(x.dtype)


def _trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # C-style quotient: numpy's // floors, so adjust where the signs differ and it is inexact.
    q = x // y
    r = x - q * y
    fix = (r != 0) & ((x < 0) != (y < 0))
    return np.where(fix, q + 1, q)


@_in_bytes
def remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Truncated remainder: the sign follows the dividend (-7 rem 2 = -1, 7 rem -2 = 1;
    C fmod, not Python %). Seeds 000/003/004 and StableHLO; seed 001's "divisor"
    is a mistranslation (SEMANTICS D1). XLA:CPU EmitIntegerRemainder: x rem 0 = x,
    INT_MIN rem -1 = 0. Floats: fmod (fmod(-0.0, y) = -0.0, fmod(x, 0) = NaN)."""
    kind = kind_of(x.dtype)
    if kind not in ("sint", "uint"):
        return _float_binary(x, y, np.fmod)
    zero = y == 0
    overflow = (x == _int_min(x)) & (y == -1) if kind == "sint" else np.zeros(x.shape, bool)
    safe_y = np.where(zero | overflow, 1, y).astype(x.dtype)
    r = np.fmod(x, safe_y)           # numpy's integer fmod is C's %: sign of the dividend
    return np.where(zero, x, r).astype(x.dtype)


def _float_max_min(x: np.ndarray, y: np.ndarray, is_max: bool) -> np.ndarray:
    # IEEE 754-2019 maximum/minimum: NaN propagates, max(-0, +0) = +0, min(-0, +0) = -0
    # (SEMANTICS 5.B Max/Min; StableHLO maximum/minimum).
    f, g = _f64(x), _f64(y)
    pick_f = (f > g) if is_max else (f < g)
    tie = f == g
    zero_pick = np.signbit(g) if is_max else np.signbit(f)   # prefer the +0 (max) / -0 (min)
    r = np.where(pick_f | (tie & zero_pick), f, g)
    r = np.where(np.isnan(f) | np.isnan(g), np.nan, r)
    return _float_result(r, x)


@_in_bytes
def maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """max; PRED = OR; unsigned compared unsigned; floats NaN-propagating, max(-0, +0) = +0.
    Complex is rejected at build time (no XLA:CPU emitter; StableHLO #560)."""
    kind = kind_of(x.dtype)
    if kind == "pred":
        return np.logical_or(x, y)
    if kind in ("sint", "uint"):
        return np.maximum(x, y)
    return _float_max_min(x, y, True)


@_in_bytes
def minimum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """min; PRED = AND; floats NaN-propagating, min(-0, +0) = -0."""
    kind = kind_of(x.dtype)
    if kind == "pred":
        return np.logical_and(x, y)
    if kind in ("sint", "uint"):
        return np.minimum(x, y)
    return _float_max_min(x, y, False)


def _int_power(b: int, e: int, width: int) -> int:
    # SEMANTICS 5.B Pow (XLA:CPU / stablehlo-to-linalg): a negative exponent gives 1 for
    # base 1, +-1 by parity for base -1, else 0. Otherwise the exact power modulo 2^width
    # (wraps). Note: XLA:CPU's loop only reads the exponent's low 6 bits, so exponents
    # >= 64 differ there (pow(3, 64) = 1); the tests keep exponents below 64.
    if e < 0:
        if b == 1:
            return 1
        if b == -1:
            return -1 if e % 2 else 1
        return 0
    return pow(b, e, 1 << width)


@_in_bytes
def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y. Floats: C pow (pow(x, 0) = 1 even for NaN, pow(-8, 1/3) = NaN);
    ints: exact wrapped power, negative exponents as in `_int_power`."""
    kind = kind_of(x.dtype)
    if kind not in ("sint", "uint"):
        return _float_binary(x, y, np.power)
    width = bit_width(name_of(x))
    mask = (1 << width) - 1
    pairs = zip(x.ravel().tolist(), y.ravel().tolist(), strict=True)
    vals = [_int_power(b, e, width) & mask for b, e in pairs]
    return np.array(vals, dtype=_uint(name_of(x))).reshape(x.shape).view(x.dtype)


def atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """atan2(lhs = y, rhs = x); atan2(+-0, -0) = +-pi, atan2(+-0, +0) = +-0. Float only."""
    return _float_binary(y, x, np.arctan2)


def complex(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # noqa: A001 - the dialect op
    """lhs = real part, rhs = imaginary part; f32 -> c64, f64 -> c128 (bits kept)."""
    return _make_complex(x, y, _COMPLEX_OF[name_of(x)])


@_in_bytes
def and_(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bitwise and on ints, logical and on PRED."""
    return np.bitwise_and(x, y)


@_in_bytes
def or_(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bitwise or on ints, logical or on PRED."""
    return np.bitwise_or(x, y)


@_in_bytes
def xor(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bitwise xor on ints, logical xor on PRED."""
    return np.bitwise_xor(x, y)


def _shift(x: np.ndarray, y: np.ndarray, kind: str) -> np.ndarray:
    # XLA:CPU SaturateShiftIfNecessary: the amount is read as unsigned, so a negative
    # amount is huge; amounts >= width give 0 (shl, shr logical) or the sign fill
    # (shr arithmetic: -1 if the bit pattern read as signed is negative, else 0).
    name = name_of(x)
    width = bit_width(name)
    u = _uint(name)
    if name in _SUB_BYTE:  # the bit patterns of their own width, as int64
        amount = _unsigned_bits(y)
        in_range = amount < width
        safe = np.where(in_range, amount, 0)
        if kind == "shl":
            r, fill = _unsigned_bits(x) << safe, np.zeros(x.shape, np.int64)
        elif kind == "shrl":
            r, fill = _unsigned_bits(x) >> safe, np.zeros(x.shape, np.int64)
        else:
            xs = _signed_bits(x)
            r, fill = xs >> safe, np.where(xs < 0, -1, 0)
        out = np.where(in_range, r, fill) & ((1 << width) - 1)
        return out.astype(u).view(x.dtype)
    s = _sint(name)
    amount = y.view(u)
    in_range = amount < width
    safe = np.where(in_range, amount, 0).astype(u)
    if kind == "shl":
        r = np.left_shift(x.view(u), safe)
        fill = np.zeros_like(r)
    elif kind == "shrl":
        r = np.right_shift(x.view(u), safe)
        fill = np.zeros_like(r)
    else:
        # Arithmetic shift of the bit pattern, also for unsigned types
        # (XLA:CPU emits AShr whatever the signedness; SEMANTICS 5.B).
        xs = x.view(s)
        r = np.right_shift(xs, safe.astype(s)).view(u)
        fill = np.where(xs < 0, -1, 0).astype(s).view(u)
    return np.where(in_range, r, fill).astype(u).view(x.dtype)


def shift_left(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _shift(x, y, "shl")


def shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logical shift of the bit pattern: s32 -1 >> 1 = INT_MAX."""
    return _shift(x, y, "shrl")


def shift_right_arithmetic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Arithmetic shift of the bit pattern: u32 0x80000000 >> 31 = 0xFFFFFFFF."""
    return _shift(x, y, "shra")


# ---------------------------------------------------------------- compare / select / clamp

def default_comparison_type(name: str) -> str:
    """StableHLO compare (C3): SIGNED, UNSIGNED (also PRED), FLOAT (floats and complex)."""
    kind = kind_of(name)
    return {"sint": "SIGNED", "uint": "UNSIGNED", "pred": "UNSIGNED"}.get(kind, "FLOAT")


def _total_order_key(x: np.ndarray) -> np.ndarray:
    # XLA's total order: read the bits as a signed int and flip the magnitude bits of
    # negative values, so -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN
    # (seed 001 EqTotalOrder...; NaNs of different payloads are different).
    name = name_of(x)
    if name == "f8e8m0fnu":  # unsigned: the bits order the values (NaN 0xFF last)
        return _unsigned_bits(x)
    s = _signed_bits(x)
    magnitude_mask = (1 << (bit_width(name) - 1)) - 1
    return np.where(s < 0, s ^ magnitude_mask, s)


_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


def compare(x: np.ndarray, y: np.ndarray, direction: str, compare_type: str | None = None) -> np.ndarray:
    """Elementwise comparison -> PRED. compare_type None means the type's default.

    FLOAT: IEEE quiet comparisons (NaN != everything, -0 == +0; NE is true for NaN).
    TOTALORDER: the bit-pattern total order above (-0 < +0, NaN == NaN of the same bits).
    SIGNED/UNSIGNED: the bit patterns read as signed/unsigned integers.
    Complex: EQ/NE only, both parts compared (others are rejected at build time).
    """
    name = name_of(x)
    ct = compare_type or default_comparison_type(name)
    fn = _DIRECTIONS[direction]
    if ct == "TOTALORDER":
        return fn(_total_order_key(x), _total_order_key(y))
    if ct == "SIGNED":
        return fn(_signed_bits(x), _signed_bits(y))
    if ct == "UNSIGNED":
        return fn(_unsigned_bits(x), _unsigned_bits(y))
    if kind_of(name) == "complex":
        return fn(x, y)
    with np.errstate(invalid="ignore"):
        return fn(_f64(x), _f64(y))


def select(pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
    """on_true where pred else on_false; no NaN blending (SEMANTICS 5.B Select)."""
    return np.where(pred, on_true, on_false).astype(on_true.dtype)


def clamp(lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """min(max(lo, x), hi), argument order (min, operand, max) (seed 001 Clamp).

    NaN anywhere propagates (Max/Min rules); lo > hi gives hi. Ints and floats only:
    XLA:CPU has no clamp for PRED or complex ("Clamp unimplemented"), so those are
    rejected at build time.
    """
    return minimum(maximum(lo, x), hi)


# ---------------------------------------------------------------- conversions

def _round_int_to_precision(v: int, p: int) -> int:
    """v rounded to p significant bits, ties to even (int -> float conversion)."""
    mag = -v if v < 0 else v
    n = mag.bit_length()
    if n <= p:
        return v
    shift = n - p
    q, r = divmod(mag, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    q <<= shift
    return -q if v < 0 else q


def _int_to_float(x: np.ndarray, name: str) -> np.ndarray:
    # Round to nearest even once (seed 000/003 ConvertElementType), done exactly on
    # Python ints: int64 -> float64 -> float32 would round twice. XLA takes integers
    # to a narrow float through f32 (two roundings).
    if name in _NARROW_FLOATS:
        return round_float(_f64(_int_to_float(x, "f32")), name)
    p = _FLOAT_FORMAT[name][0]
    vals = [float(_round_int_to_precision(v, p)) for v in x.ravel().tolist()]
    return round_float(np.array(vals, dtype=np.float64).reshape(x.shape), name)


def _float_to_int(x: np.ndarray, name: str) -> np.ndarray:
    # Truncate toward zero; NaN -> 0; out of range saturates to MIN/MAX. The seeds and
    # StableHLO (#180) leave this open; XLA:CPU and API.md saturate (SEMANTICS 5.A).
    dst = DTYPES[name]
    info = ml_dtypes.iinfo(dst)
    width = bit_width(name)
    t = np.trunc(_f64(x))
    signed = kind_of(name) == "sint"
    upper = 2.0 ** (width - 1) if signed else 2.0 ** width     # first value out of range
    lower = -(2.0 ** (width - 1)) if signed else 0.0
    nan = np.isnan(t)
    big = t >= upper
    small = t < lower
    mid = ~(nan | big | small)
    out = np.zeros(x.shape, dtype=dst)
    out[mid] = t[mid].astype(dst)
    out[big] = info.max
    out[small] = info.min
    return out


def convert(x: np.ndarray, dtype) -> np.ndarray:
    """ConvertElementType to `dtype` (an XLA type name or numpy dtype).

    any -> pred: x != 0 (complex: either part; NaN -> true). pred -> number: 0/1.
    complex -> real: the real part, then the real rule. real -> complex: imag = +0.
    int -> int: wraps (two's complement truncation / extension).
    int -> float: round to nearest even; too large for f16 -> inf.
    float -> float: round to nearest even, once (f64 -> bf16 is not rounded via f32).
    float -> int: as `_float_to_int`.
    """
    name = _dtype_name(dtype)
    dst_kind, src_kind = kind_of(name), kind_of(x.dtype)
    if dst_kind == "pred":
        with np.errstate(invalid="ignore"):
            return np.asarray(x != 0)
    if src_kind == "pred":
        x, src_kind = x.astype(np.uint8), "uint"
    if dst_kind == "complex":
        comp = _COMPONENT[name]
        if src_kind == "complex":
            return _make_complex(convert(x.real.copy(), comp), convert(x.imag.copy(), comp), name)
        return _make_complex(convert(x, comp), np.zeros(x.shape, DTYPES[comp]), name)
    if src_kind == "complex":
        x, src_kind = x.real.copy(), "float"
    if dst_kind in ("sint", "uint"):
        if src_kind == "float":
            return _float_to_int(x, name)
        if name in _SUB_BYTE or name_of(x) in _SUB_BYTE:  # ml_dtypes casts through int64
            return x.astype(np.uint64 if kind_of(x.dtype) == "uint" else np.int64).astype(DTYPES[name])
        return x.astype(DTYPES[name])
    if src_kind == "float":
        if name == name_of(x):
            return x.copy()
        f = _f64(x)
        if name_of(x) in _NARROW_FLOATS and _NARROW_FLOATS[name_of(x)][3] in ("fnuz", "e8m0"):
            f[np.isnan(f)] = np.nan  # XLA reads their one NaN as +NaN (ml_dtypes: -NaN for FNUZ)
        out = round_float(f, name)
        if name == "f8e8m0fnu" and name_of(x) == "f64":
            # XLA: from f64, anything below the smallest value 2^-127 is NaN (from f32: 2^-127).
            out[np.abs(f) < math.ldexp(1.0, -127)] = np.nan
        if name == "f8e5m2" and name_of(x) in ("f16", "bf16"):
            # XLA converts f16/bf16 to f8e5m2 (a truncated f16) with 0x7F for every NaN.
            out[np.isnan(_f64(x))] = np.array(0x7F, np.uint8).view(out.dtype)
        return out
    return _int_to_float(x, name)


def bitcast_convert(x: np.ndarray, dtype) -> np.ndarray:
    """Reinterpret the bits (little-endian, as on the CPU). Same width: same shape.
    Narrower target: a new minor dimension of size ratio (f32[10] -> f16[10,2],
    f32[] -> f16[2]); wider target: the last dimension (== ratio) is consumed
    (seed 001 BitcastConvertType)."""
    name = _dtype_name(dtype)
    dst = DTYPES[name]
    src_bits, dst_bits = bit_width(name_of(x)), bit_width(name)
    if min(src_bits, dst_bits) < 8:
        return _bitcast_sub_byte(x, name)
    flat = np.ascontiguousarray(x).reshape(-1).view(dst)
    if src_bits == dst_bits:
        return flat.reshape(x.shape)
    if src_bits > dst_bits:
        return flat.reshape(x.shape + (src_bits // dst_bits,))
    ratio = dst_bits // src_bits
    if x.ndim == 0 or x.shape[-1] != ratio:
        raise ValueError(f"last dimension of {x.shape} must be {ratio}")
    return flat.reshape(x.shape[:-1])


def _bitcast_sub_byte(x: np.ndarray, name: str) -> np.ndarray:
    """bitcast_convert where a side is narrower than a byte (s4, u2, f4e2m1fn): on the bit
    patterns, element 0 of the narrow side in the lowest bits (little-endian, as XLA
    packs them: s8 0x21 is s4 {1, 2})."""
    src_bits, dst_bits = bit_width(name_of(x)), bit_width(name)
    bits = _unsigned_bits(x).astype(np.uint64)
    if src_bits > dst_bits:
        ratio = src_bits // dst_bits
        shifts = np.arange(ratio, dtype=np.uint64) * np.uint64(dst_bits)
        bits = (bits[..., None] >> shifts) & np.uint64((1 << dst_bits) - 1)
    elif src_bits < dst_bits:
        ratio = dst_bits // src_bits
        if x.ndim == 0 or x.shape[-1] != ratio:
            raise ValueError(f"last dimension of {x.shape} must be {ratio}")
        shifts = np.arange(ratio, dtype=np.uint64) * np.uint64(src_bits)
        bits = np.bitwise_or.reduce(bits << shifts, axis=-1)
    return bits.astype(_uint(name)).view(DTYPES[name])


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """Round to a format of `exponent_bits` / `mantissa_bits` and back (seed 001
    ReducePrecision), computed as XLA:CPU's EmitReducePrecisionIR (quiet_nans = false)
    on float32 / float64 bits; f16 and bf16 operands go through float32 and back (exact).

    1. If mantissa_bits is smaller: add the round-to-nearest-even bias and clear the
       dropped bits (a carry into the exponent is correct and may give inf).
    2. If exponent_bits is smaller than the operand's own: exponents above the reduced
       range -> +-inf, at or below the reduced minimum -> +-0, so the reduced format's
       subnormal range is flushed to zero, not rounded (XLA).
    3. NaN: the input NaN if mantissa_bits > 0, else +inf (XLA: a format without
       mantissa bits has no NaN; the seed's "NaN stays NaN" cannot hold there).
    Bit counts >= the operand's own are a no-op for that part (seed 001; SEMANTICS 5.A):
    the exponent step is skipped when exponent_bits >= 5 for f16 or >= 8 for bf16, so
    reduce_precision(f16, 5, 10) is the identity, f16 subnormals included.
    """
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ValueError("exponent_bits must be >= 1 and mantissa_bits >= 0")
    name = name_of(x)
    if name in _NARROW_FLOATS:
        # Nothing to reduce: the identity. Else XLA computes f8e5m2 (a truncated f16) as
        # f16 and the other narrow floats as f32, then converts back.
        own_exponent, own_mantissa = _NARROW_FLOATS[name][:2]
        if exponent_bits >= own_exponent and mantissa_bits >= own_mantissa:
            return x.copy()
        via = convert(x, "f16" if name == "f8e5m2" else "f32")
        wide = reduce_precision(via, exponent_bits, mantissa_bits)
        return convert(wide, name)
    own_exponent_bits = bit_width(name) - 1 - _MANTISSA_BITS[name]
    reduce_exponent = exponent_bits < own_exponent_bits
    if name in ("f16", "bf16"):
        wide = _reduce_precision_bits(x.astype(np.float32), exponent_bits, mantissa_bits, reduce_exponent)
        with np.errstate(over="ignore"):
            return wide.astype(x.dtype)    # exact, or inf where rounding overflowed f16
    return _reduce_precision_bits(x, exponent_bits, mantissa_bits, reduce_exponent)


def _reduce_precision_bits(x: np.ndarray, exponent_bits: int, mantissa_bits: int,
                           reduce_exponent: bool) -> np.ndarray:
    name = name_of(x)
    nbits = bit_width(name)
    src_m = _MANTISSA_BITS[name]
    src_e = nbits - 1 - src_m
    ut = _uint(name)
    all_ones = (1 << nbits) - 1
    sign_mask = 1 << (nbits - 1)
    exp_mask = ((1 << src_e) - 1) << src_m
    u = x.view(ut).copy()
    is_nan = (u & (all_ones ^ sign_mask)) > exp_mask
    if mantissa_bits < src_m:
        last_bit = 1 << (src_m - mantissa_bits)
        base_bias = (last_bit >> 1) - 1
        bias = ((u & last_bit) >> (src_m - mantissa_bits)) + ut.type(base_bias)
        u = ((u + bias) & ut.type(all_ones ^ (last_bit - 1))).astype(ut)
    if reduce_exponent and exponent_bits < src_e:
        bias = (1 << (src_e - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = (bias + reduced_bias) << src_m
        min_exp = (bias - reduced_bias) << src_m
        exponent = u & ut.type(exp_mask)
        signed_zero = u & ut.type(sign_mask)
        signed_inf = signed_zero | ut.type(exp_mask)
        u = np.where(exponent > ut.type(max_exp), signed_inf, u).astype(ut)
        u = np.where(exponent <= ut.type(min_exp), signed_zero, u).astype(ut)
    out = u.view(x.dtype)
    nan_result = x if mantissa_bits > 0 else np.full(x.shape, np.inf).astype(x.dtype)
    return np.where(is_nan, nan_result, out).astype(x.dtype)


# ---------------------------------------------------------------- test values

def _float_edges(name: str) -> list[float]:
    fi = finfo(name)
    tiny, sub, big = float(fi.tiny), float(fi.smallest_subnormal), float(fi.max)
    return [math.nan, -math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5,
            1.5, -1.5, 2.5, -2.5, tiny, -tiny, sub, -sub, big, -big,
            3.0, -7.0, 0.1, 100.0, 1e-3, -3.75]


def _int_edges(name: str) -> list[int]:
    info = ml_dtypes.iinfo(DTYPES[name])
    width = bit_width(name)
    rng = np.random.default_rng(width + (1000 if kind_of(name) == "uint" else 0))
    rand = [int(v) for v in rng.integers(int(info.min), int(info.max), size=4, endpoint=True,
                                         dtype=np.int64 if name in _SUB_BYTE else DTYPES[name])]
    if kind_of(name) == "sint":
        fixed = [0, 1, -1, info.min, info.max, info.min + 1, info.max - 1, 2, -2, 7, -7, 100, -100]
    else:
        top = 1 << (width - 1)
        fixed = [0, 1, info.max, info.max - 1, 2, 7, top, top - 1, 100, 200]
    return [v for v in fixed if info.min <= v <= info.max] + rand


def _complex_edges(name: str) -> np.ndarray:
    fi = finfo(_COMPONENT[name])
    nan, inf = math.nan, math.inf
    pairs = [(0.0, 0.0), (-0.0, -0.0), (1.0, 0.0), (0.0, 1.0), (-1.0, -1.0), (0.5, -2.5),
             (1.5, 2.5), (-2.5, 0.5), (nan, 0.0), (0.0, nan), (nan, nan), (inf, 0.0),
             (0.0, -inf), (inf, inf), (-inf, nan), (float(fi.max), float(fi.tiny)),
             (float(fi.smallest_subnormal), -float(fi.max)), (3.0, -7.0)]
    comp = _COMPONENT[name]
    re = round_float([p[0] for p in pairs], comp)
    im = round_float([p[1] for p in pairs], comp)
    return _make_complex(re, im, name)


def _edges(name: str) -> np.ndarray:
    kind = kind_of(name)
    if kind == "pred":
        return np.array([False, True])
    if kind in ("sint", "uint"):
        return np.array(_int_edges(name), dtype=DTYPES[name])
    if kind == "float":
        return round_float(_float_edges(name), name)
    return _complex_edges(name)


EDGE_VALUES: dict[str, np.ndarray] = {name: _edges(name) for name in DTYPES}


def random_values(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n random values of type `name`: full range for ints, moderate magnitudes
    (|x| in about [1e-3, 1e3], half of them uniform in [-10, 10]) for floats."""
    kind = kind_of(name)
    if kind == "pred":
        return rng.integers(0, 2, size=n).astype(bool)
    if kind in ("sint", "uint"):
        info = ml_dtypes.iinfo(DTYPES[name])
        if name in _SUB_BYTE:
            return rng.integers(int(info.min), int(info.max), size=n, endpoint=True).astype(DTYPES[name])
        return rng.integers(info.min, info.max, size=n, endpoint=True, dtype=DTYPES[name])
    if kind == "complex":
        comp = _COMPONENT[name]
        return _make_complex(random_values(comp, n, rng), random_values(comp, n, rng), name)
    uniform = rng.uniform(-10, 10, size=n)
    logu = rng.choice([-1.0, 1.0], size=n) * 10.0 ** rng.uniform(-3, 3, size=n)
    return round_float(np.where(rng.random(n) < 0.5, uniform, logu), name)


def values(dtype_name: str, n: int, seed: int = 0) -> np.ndarray:
    """n values of type `dtype_name`: the edge values first, then random ones."""
    edges = EDGE_VALUES[dtype_name]
    if n <= len(edges):
        return edges[:n].copy()
    rng = np.random.default_rng(seed)
    return np.concatenate([edges, random_values(dtype_name, n - len(edges), rng)])


# ---------------------------------------------------------------- self-check

def _self_check() -> None:
    """Known answers; run with `python tests/reference.py`."""
    i32 = np.int32
    s = lambda *v: np.array(v, dtype=i32)  # noqa: E731
    assert remainder(s(-7, 7, -7, 5, i32(-2**31), 9), s(3, -2, 2, 0, -1, 0)).tolist() == [-1, 1, -1, 5, 0, 9]
    assert divide(s(-7, 7, 5, -2**31, 5), s(2, -2, 0, -1, -1)).tolist() == [-3, -3, -1, -2**31, -5]
    u8 = np.array([7, 255], np.uint8)
    assert divide(u8, np.array([0, 2], np.uint8)).tolist() == [255, 127]
    assert remainder(u8, np.array([0, 2], np.uint8)).tolist() == [7, 1]
    f = np.array([0.5, 1.5, 2.5, -2.5, -0.5, -0.4, 0.49999997, 3.5], np.float32)
    assert round_nearest_afz(f).tolist() == [1, 2, 3, -3, -1, -0.0, 0, 4]
    assert np.signbit(round_nearest_afz(f)[5])
    assert round_nearest_even(f).tolist() == [0, 2, 2, -2, -0.0, -0.0, 0, 4]
    assert abs(s(-2**31, -3)).tolist() == [-2**31, 3]
    assert negate(np.array([1, 0], np.uint8)).tolist() == [255, 0]
    z = sign(np.array([-0.0, 0.0, np.nan, -3, 2], np.float32))
    assert np.signbit(z[0]) and not np.signbit(z[1]) and np.isnan(z[2]) and z[3:].tolist() == [-1, 1]
    assert count_leading_zeros(np.array([0, -1, 1], np.int8)).tolist() == [8, 0, 7]
    assert popcnt(np.array([-1, 0, 5], np.int8)).tolist() == [8, 0, 2]
    assert count_leading_zeros(np.array([1], np.uint64)).tolist() == [63]
    # shifts
    assert shift_left(s(1, 1, 1, 1), s(31, 32, -1, 33)).tolist() == [-2**31, 0, 0, 0]
    assert shift_right_arithmetic(s(-8, -8, 8), s(1, 40, 40)).tolist() == [-4, -1, 0]
    assert shift_right_logical(s(-1, -1), s(1, 32)).tolist() == [2**31 - 1, 0]
    u32 = np.array([0x80000000, 0x80000000], np.uint32)
    assert shift_right_arithmetic(u32, np.array([31, 99], np.uint32)).tolist() == [0xFFFFFFFF] * 2
    # pow
    assert power(s(2, 1, -1, -1, 3, 2, 0), s(10, -5, -1, -2, -1, 31, 0)).tolist() == \
        [1024, 1, -1, 1, 0, -2**31, 1]
    assert power(np.array([3], np.uint8), np.array([5], np.uint8)).tolist() == [243]
    # float max/min with signed zeros and NaN
    a = np.array([-0.0, 0.0, np.nan, 1.0], np.float32)
    b = np.array([0.0, -0.0, 1.0, np.nan], np.float32)
    mx, mn = maximum(a, b), minimum(a, b)
    assert not np.signbit(mx[0]) and not np.signbit(mx[1]) and np.isnan(mx[2:]).all()
    assert np.signbit(mn[0]) and np.signbit(mn[1]) and np.isnan(mn[2:]).all()
    # total order
    t = np.array([np.copysign(np.nan, -1), -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)
    keys = _total_order_key(t)
    assert (np.diff(keys) > 0).all()
    assert compare(t, t, "EQ", "TOTALORDER").all() and not compare(t, t, "EQ")[[0, 7]].any()
    assert compare(np.array([-0.0]), np.array([0.0]), "LT", "TOTALORDER").tolist() == [True]
    assert compare(np.array([-0.0]), np.array([0.0]), "EQ").tolist() == [True]
    # conversions
    assert convert(np.array([np.nan, 1e10, -1e10, -0.9, 2.9, -2.9], np.float32), "s32").tolist() == \
        [0, 2**31 - 1, -2**31, 0, 2, -2]
    assert convert(np.array([-1.0, 1e30, 255.9], np.float32), "u8").tolist() == [0, 255, 255]
    assert convert(np.array([300, -1], np.int32), "u8").tolist() == [44, 255]
    assert convert(np.array([65519, 65520, 2**24 + 1], np.int32), "f16").tolist() == [65504, np.inf, np.inf]
    assert convert(np.array([2**24 + 1, 2**24 + 3], np.int32), "f32").tolist() == [2**24, 2**24 + 4]
    assert convert(np.array([2**63 - 1], np.int64), "f32").tolist() == [2.0**63]
    assert convert(np.array([np.nan, 0.0, -0.0, 2], np.float32), "pred").tolist() == \
        [True, False, False, True]
    assert convert(np.array([1 + 2j], np.complex64), "f32").tolist() == [1.0]
    assert convert(np.array([True, False]), "c64").tolist() == [1, 0]
    # f64 -> bf16 rounds once: 1 + 2^-8 + 2^-30 is above the tie, so it rounds up
    # (via f32 it would first become the tie 1 + 2^-8 and then round to even, 1.0).
    v = np.array([1 + 2.0**-8 + 2.0**-30])
    assert convert(v, "bf16").astype(np.float64).tolist() == [1 + 2.0**-7]
    # round_float agrees with numpy / ml_dtypes single roundings
    rng = np.random.default_rng(0)
    r = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-45, 40, 2000),
                        [np.inf, -np.inf, 0.0, -0.0, 65520.0, 65519.99, 3.4e38, 3.41e38]])
    with np.errstate(all="ignore"):
        r32 = r.astype(np.float32)
        assert np.array_equal(round_float(r, "f32"), r32)
        assert np.array_equal(round_float(r32.astype(np.float64), "bf16").astype(np.float32),
                              r32.astype(ml_dtypes.bfloat16).astype(np.float32))
        assert np.array_equal(round_float(r, "f16"), r.astype(np.float16))
    # bitcast
    one = np.array(1.0, np.float32)
    assert bitcast_convert(one, "f16").shape == (2,)
    assert bitcast_convert(np.array([1.0], np.float32), "u32").tolist() == [0x3F800000]
    assert bitcast_convert(np.zeros((3, 2), np.float16), "f32").shape == (3,)
    # reduce_precision == bf16 round trip for every finite f32 (incl. subnormals, overflow)
    xs = np.concatenate([r32[np.isfinite(r32)], EDGE_VALUES["f32"],
                         np.array([3.4028235e38, 1 + 2.0**-8, 1 + 3 * 2.0**-8], np.float32)])
    xs = xs[np.isfinite(xs)]
    with np.errstate(all="ignore"):
        bf = xs.astype(ml_dtypes.bfloat16).astype(np.float32)
        assert np.array_equal(reduce_precision(xs, 8, 7), bf)
        # (5, 10) == f16 round trip outside f16's subnormal range (XLA flushes that to zero)
        h = xs.astype(np.float16).astype(np.float32)
        normal = np.abs(xs) >= 2.0**-14
        assert np.array_equal(reduce_precision(xs, 5, 10)[normal], h[normal])
        sub = (np.abs(xs) < 2.0**-14 * (1 - 2.0**-12)) & (xs != 0)
        flushed = reduce_precision(xs, 5, 10)[sub]
        assert (flushed == 0).all() and (np.signbit(flushed) == np.signbit(xs[sub])).all()
    assert reduce_precision(np.array([65519.0, 65520.0, -1e6], np.float32), 5, 10).tolist() == \
        [65504.0, np.inf, -np.inf]
    nan_in = np.array([np.nan], np.float32)
    assert np.isnan(reduce_precision(nan_in, 5, 2)).all()
    assert reduce_precision(nan_in, 5, 0).tolist() == [np.inf]
    h16 = EDGE_VALUES["f16"]
    assert np.array_equal(reduce_precision(h16, 5, 10), h16, equal_nan=True)   # no-op, subnormals too
    assert np.array_equal(reduce_precision(h16, 8, 7), h16.astype(ml_dtypes.bfloat16).astype(np.float16),
                          equal_nan=True)                                     # = a bf16 round trip
    b16 = EDGE_VALUES["bf16"]
    assert np.array_equal(reduce_precision(b16, 8, 7).astype(np.float32), b16.astype(np.float32),
                          equal_nan=True)
    assert reduce_precision(np.array([65504.0], np.float16), 5, 2).tolist() == [np.inf]
    # a tie with no mantissa bits goes to the even exponent: 1.5 * 2^-23 -> 2^-23
    assert reduce_precision(np.array([3 * 2.0**-24], np.float16), 5, 0).tolist() == [2.0**-23]
    d = rng.standard_normal(100)
    assert np.array_equal(reduce_precision(d, 11, 52), d)
    assert np.array_equal(reduce_precision(d, 8, 23), d.astype(np.float32).astype(np.float64))
    # transcendental edge cases
    assert logistic(np.array([-np.inf, np.inf, 0.0], np.float32)).tolist() == [0.0, 1.0, 0.5]
    assert exponential_minus_one(np.array([1e-10])).tolist() == [np.expm1(1e-10)]
    assert cbrt(np.array([-8.0], np.float32)).tolist() == [-2.0]
    assert np.signbit(sqrt(np.array([-0.0], np.float32)))[0]
    assert rsqrt(np.array([0.0, -0.0], np.float32)).tolist() == [np.inf, -np.inf]
    assert erf(np.array([np.inf, -np.inf], np.float32)).tolist() == [1.0, -1.0]
    assert imag(np.array([1.0], np.float32)).tolist() == [0.0]
    assert abs(np.array([3 + 4j], np.complex64)).dtype == np.float32
    assert atan2(np.array([0.0, -0.0]), np.array([-0.0, -0.0])).tolist() == [math.pi, -math.pi]
    # edge values
    assert np.signbit(EDGE_VALUES["bf16"][1]) and np.isnan(EDGE_VALUES["bf16"][1])
    assert all(values(n, 64, 1).shape == (64,) and values(n, 64, 1).dtype == DTYPES[n] for n in DTYPES)


# ================================================================ the graph interpreter
#
# `evaluate(computation, args)` walks the graph an XlaBuilder recorded (the xhlo ops
# after the builder's sugar: broadcasts explicit, `x[...]` as slices, batch_norm and
# top_k as their primitive ops) and computes every op with the functions above and
# numpy. It is the differential fuzzer's oracle (tests/differential_fuzzer.py). Ops are
# duck-typed (`op.opdef.name`, `op.attrs`, `op.operands`, `op.shape.dtype`), so this
# module still does not import xlamlir. Where the semantics leave a choice open the
# interpreter picks one answer and says so; the fuzzer only draws programs whose
# result does not depend on it (ties in select_and_scatter, equal keys of an
# unstable sort, the unread triangle of cholesky, duplicate scatter indices with a
# non-commutative combiner).

_BINARY_NAMES = {"and": "and_", "or": "or_"}
_UNARY_NAMES = {"not": "not_"}
WHILE_TRIP_LIMIT = 100_000  # a generated loop that runs longer is a generator bug


def _same_shape(*xs: np.ndarray) -> list[np.ndarray]:
    # The elementwise functions above take operands of one shape; sub-computations applied
    # to whole arrays at once (reduce, scatter, map) mix scalars with arrays.
    return [np.array(x) for x in np.broadcast_arrays(*xs)]  # copies; 0-d stays 0-d


def _pad_array(x: np.ndarray, value, low, high, interior) -> np.ndarray:
    """Interior padding first, then the edges: positive ones add `value`, negative ones cut."""
    if x.ndim == 0:
        return x.copy()
    dims = [n + max(n - 1, 0) * i for n, i in zip(x.shape, interior)]
    grown = np.full(dims, value, x.dtype)
    grown[tuple(slice(None, None, i + 1) for i in interior)] = x
    out = np.pad(grown, [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)],
                 constant_values=value)
    return out[tuple(slice(max(-lo, 0), out.shape[k] - max(-hi, 0))
                     for k, (lo, hi) in enumerate(zip(low, high)))]


def _wide(dtype: np.dtype) -> np.dtype:
    """The type sums of products are accumulated in before one final rounding/wrap."""
    kind = kind_of(dtype)
    return np.dtype({"float": np.float64, "complex": np.complex128, "uint": np.uint64}.get(
        kind, np.int64))


def _narrow(result: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A wide (int64/uint64/float64/complex128) result in `dtype`: ints wrap, floats round once."""
    kind = kind_of(dtype)
    if kind == "pred":
        return result != 0
    if kind in ("sint", "uint"):
        return result.astype(dtype)                 # two's complement truncation = wrapping
    return convert(result, dtype)


def _dot_general(lhs: np.ndarray, rhs: np.ndarray, attrs: dict, out_dtype: np.dtype) -> np.ndarray:
    lc, rc = attrs["lhs_contracting_dimensions"], attrs["rhs_contracting_dimensions"]
    lb, rb = attrs["lhs_batch_dimensions"], attrs["rhs_batch_dimensions"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub, rsub = [""] * lhs.ndim, [""] * rhs.ndim
    for i, j in zip(lb, rb):
        lsub[i] = rsub[j] = next(letters)
    for i, j in zip(lc, rc):
        lsub[i] = rsub[j] = next(letters)
    for i in range(lhs.ndim):
        lsub[i] = lsub[i] or next(letters)
    for j in range(rhs.ndim):
        rsub[j] = rsub[j] or next(letters)
    out = ([lsub[i] for i in lb] + [lsub[i] for i in range(lhs.ndim) if i not in lb and i not in lc]
           + [rsub[j] for j in range(rhs.ndim) if j not in rb and j not in rc])
    wide = _wide(out_dtype)
    result = np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}",
                       _widen(lhs, wide), _widen(rhs, wide))
    return _narrow(np.asarray(result), out_dtype)


def _placed(x: np.ndarray, dims: list[int], rank: int) -> np.ndarray:
    """x's axes moved to positions `dims` of a rank-`rank` array (size 1 elsewhere)."""
    order = np.argsort(dims)
    x = np.transpose(x, order) if len(dims) > 1 else x
    sizes = dict(zip(sorted(dims), x.shape))
    return x.reshape([sizes.get(i, 1) for i in range(rank)])


def _group_masks(x: np.ndarray, ragged: int, prefix: list[int], gs: np.ndarray):
    """For each group k, where x's ragged index i has start_k <= i < end_k, start/end being
    the running sums of the group sizes in their own (wrapping) type, the index an iota of
    that type (XLA's ragged_dot_rewriter.cc and jax's reference implementation)."""
    gs = np.broadcast_to(gs, tuple(x.shape[d] for d in prefix) + gs.shape[-1:])
    with np.errstate(over="ignore"):
        ends = np.cumsum(gs, axis=-1, dtype=gs.dtype)
        starts = (ends - gs).astype(gs.dtype)
    index = _placed(np.arange(x.shape[ragged]).astype(gs.dtype), [ragged], x.ndim)
    for k in range(gs.shape[-1]):
        s = _placed(starts[..., k], prefix, x.ndim)
        e = _placed(ends[..., k], prefix, x.ndim)
        yield (s <= index) & (index < e)


def _ragged_dot(lhs: np.ndarray, rhs: np.ndarray, gs: np.ndarray, a: dict, out_dtype: np.dtype):
    """chlo.ragged_dot: lhs's ragged dimension split into groups (see _group_masks). A ragged
    free dimension: rows of group k times rhs[k] (the rhs group dimension), lhs masked to
    zero elsewhere; a ragged contracting dimension: one result per group (leading), both
    operands masked; a ragged batch dimension: dot_general."""
    lc, rc = list(a["lhs_contracting_dimensions"]), list(a["rhs_contracting_dimensions"])
    lb, rb = list(a["lhs_batch_dimensions"]), list(a["rhs_batch_dimensions"])
    ragged = a["lhs_ragged_dimensions"][0]
    wide = _wide(out_dtype)
    if ragged in lb:
        return _dot_general(lhs, rhs, a, out_dtype)
    zero = np.zeros((), lhs.dtype)
    if ragged in lc:
        pos = lc.index(ragged)
        lhs_prefix, rhs_prefix = lb + lc[:pos], rb + rc[:pos]
        parts = [_dot_general(np.where(ml, lhs, zero), np.where(mr, rhs, np.zeros((), rhs.dtype)), a, wide)
                 for ml, mr in zip(_group_masks(lhs, ragged, lhs_prefix, gs),
                                   _group_masks(rhs, rc[pos], rhs_prefix, gs))]
        out_shape = (gs.shape[-1],) + _dot_general(lhs, rhs, a, wide).shape
        return _narrow(np.array(parts, dtype=wide).reshape(out_shape), out_dtype)
    group = a["rhs_group_dimensions"][0]
    prefix = lb + [i for i in range(ragged) if i not in lb and i not in lc]
    less = {"rhs_contracting_dimensions": [d - (d > group) for d in rc],
            "rhs_batch_dimensions": [d - (d > group) for d in rb]}
    dims = {**a, **less}
    total = None
    for k, mask in enumerate(_group_masks(lhs, ragged, prefix, gs)):
        part = _dot_general(np.where(mask, lhs, zero), np.take(rhs, k, axis=group), dims, wide)
        total = part if total is None else total + part
    if total is None:  # no groups
        shape = _dot_general(lhs, np.take(np.zeros(rhs.shape[:group] + (1,) + rhs.shape[group + 1:],
                                                   rhs.dtype), 0, axis=group), dims, wide).shape
        total = np.zeros(shape, wide)
    return _narrow(total, out_dtype)


def _scaled_dot(lhs: np.ndarray, lhs_scale: np.ndarray, rhs: np.ndarray, rhs_scale: np.ndarray, a: dict,
                out_dtype: np.dtype) -> np.ndarray:
    """dot_general(lhs * lhs_scale, rhs * rhs_scale), each scale element repeated over its
    block; operand and scale are converted to the result type and multiplied there, as XLA's
    dequantize expansion does (block_scaling_rewriter.cc BuildDequantize; SEMANTICS.md 5.F)."""
    def scaled(x, scale):
        for axis, (n, m) in enumerate(zip(x.shape, scale.shape)):
            scale = np.repeat(scale, n // m if m else 1, axis=axis)
        return multiply(convert(x, out_dtype), convert(scale, out_dtype))
    return _dot_general(scaled(lhs, lhs_scale), scaled(rhs, rhs_scale), a, out_dtype)


def _widen(x: np.ndarray, wide: np.dtype) -> np.ndarray:
    if x.dtype == np.bool_:
        x = x.astype(np.uint8)
    if wide.kind == "u" and x.dtype.kind == "i":
        return x.astype(np.int64).astype(wide)      # modular arithmetic: the bits are what count
    return x.astype(wide)


def _convolution(lhs: np.ndarray, rhs: np.ndarray, a: dict, out_dtype: np.dtype) -> np.ndarray:
    """StableHLO convolution: feature groups split lhs features and kernel output features,
    batch groups split lhs batch and kernel output features, results concatenated along the
    output feature dimension."""
    n = len(a["input_spatial_dimensions"])
    x = np.transpose(lhs, [a["input_batch_dimension"], a["input_feature_dimension"],
                           *a["input_spatial_dimensions"]])
    k = np.transpose(rhs, [a["kernel_output_feature_dimension"], a["kernel_input_feature_dimension"],
                           *a["kernel_spatial_dimensions"]])
    wide = _wide(out_dtype)
    x, k = _widen(x, wide), _widen(k, wide)
    # lhs dilation and padding first (zeros, which multiply the kernel: an inf tap makes
    # NaN there). Kernel dilation spaces the taps: the holes between them are never read
    # (an inf or NaN under a hole stays out of the sum, as in the library).
    x = _pad_array(x, 0, [0, 0] + [p[0] for p in a["padding"]], [0, 0] + [p[1] for p in a["padding"]],
                   [0, 0] + [d - 1 for d in a["lhs_dilation"]])
    dilation = a["rhs_dilation"]
    fg, bg = a["feature_group_count"], a["batch_group_count"]
    groups = max(fg, bg)
    xs = np.split(x, fg, axis=1) if fg > 1 else np.split(x, bg, axis=0) if bg > 1 else [x]
    ks = np.split(k, groups, axis=0) if groups > 1 else [k]
    strides = a["window_strides"]
    outs = []
    for xg, kg in zip(xs, ks):
        extent = [(kg.shape[2 + d] - 1) * dilation[d] + 1 if kg.shape[2 + d] else 0 for d in range(n)]
        spatial = [max((xg.shape[2 + d] - extent[d]) // strides[d] + 1, 0)
                   if xg.shape[2 + d] >= extent[d] else 0 for d in range(n)]
        acc = np.zeros((xg.shape[0], kg.shape[0], *spatial), wide)
        if all(spatial) and xg.shape[0] and kg.shape[0]:
            for tap in np.ndindex(*kg.shape[2:]):
                offset = [t * dl for t, dl in zip(tap, dilation)]
                window = xg[(slice(None), slice(None)) + tuple(
                    slice(o, o + (s - 1) * st + 1, st) for o, s, st in zip(offset, spatial, strides))]
                w = kg[(slice(None), slice(None)) + tap]
                acc = acc + np.einsum("nc...,oc->no...", window, w)
        outs.append(acc)
    out = np.concatenate(outs, axis=1)
    perm = [a["output_batch_dimension"], a["output_feature_dimension"], *a["output_spatial_dimensions"]]
    return _narrow(np.transpose(out, np.argsort(perm)), out_dtype)


def _fft(x: np.ndarray, fft_type: str, lengths, out_dtype: np.dtype) -> np.ndarray:
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if 0 in lengths or x.size == 0:
        return np.zeros(_fft_shape(x.shape, fft_type, lengths), out_dtype)
    if fft_type == "FFT":
        r = np.fft.fftn(x.astype(np.complex128), axes=axes)
    elif fft_type == "IFFT":
        r = np.fft.ifftn(x.astype(np.complex128), axes=axes)
    elif fft_type == "RFFT":
        r = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    else:
        r = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    return convert(r, out_dtype)


def _fft_shape(shape, fft_type, lengths):
    if fft_type == "RFFT":
        return shape[:-1] + ((lengths[-1] // 2 + 1),)
    if fft_type == "IRFFT":
        return shape[:-1] + (lengths[-1],)
    return shape


def _cholesky(x: np.ndarray, lower: bool) -> np.ndarray:
    """Only the chosen triangle is read; the other triangle of the result is zero here
    (unspecified for XLA, so the fuzzer masks it)."""
    wide = x.astype(np.complex128 if kind_of(x.dtype) == "complex" else np.float64)
    tri = np.tril(wide) if lower else np.swapaxes(np.triu(wide), -1, -2).conj()
    herm = tri + np.swapaxes(np.tril(tri, -1), -1, -2).conj()
    with np.errstate(all="ignore"):
        try:
            factor = np.linalg.cholesky(herm)
        except np.linalg.LinAlgError:
            factor = np.full(herm.shape, np.nan, herm.dtype)
    if not lower:
        factor = np.swapaxes(factor, -1, -2).conj()
    return convert(factor, x.dtype)


def _triangular_solve(a_: np.ndarray, b_: np.ndarray, at: dict) -> np.ndarray:
    wide = np.complex128 if kind_of(a_.dtype) == "complex" else np.float64
    a = np.tril(a_.astype(wide)) if at["lower"] else np.triu(a_.astype(wide))
    if at["unit_diagonal"]:
        eye = np.eye(a.shape[-1], dtype=bool)
        a = np.where(eye, 1, a)
    if at["transpose_a"] in ("TRANSPOSE", "ADJOINT"):
        a = np.swapaxes(a, -1, -2)
        if at["transpose_a"] == "ADJOINT":
            a = a.conj()
    b = b_.astype(wide)
    with np.errstate(all="ignore"):
        if at["left_side"]:
            x = np.linalg.solve(a, b) if b.size else b
        else:  # x a = b  <=>  a^T x^T = b^T
            x = np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)),
                            -1, -2) if b.size else b
    return convert(x, b_.dtype)


_M32 = np.uint64(0xFFFFFFFF)


def _rotl32(v: np.ndarray, r: int) -> np.ndarray:
    return ((v << np.uint64(r)) | (v >> np.uint64(32 - r))) & _M32


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32, 20 rounds (Random123; XLA's prng.cc ThreeFry2x32), on uint64 arrays
    holding 32-bit words."""
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = [np.uint64(k0), np.uint64(k1), np.uint64(0x1BD11BDA ^ k0 ^ k1)]
    x0, x1 = (x0 + ks[0]) & _M32, (x1 + ks[1]) & _M32
    for block in range(5):
        for r in rotations[4 * (block % 2):4 * (block % 2) + 4]:
            x0 = (x0 + x1) & _M32
            x1 = _rotl32(x1, r) ^ x0
        x0 = (x0 + ks[(block + 1) % 3]) & _M32
        x1 = (x1 + ks[(block + 2) % 3] + np.uint64(block + 1)) & _M32
    return x0, x1


def philox4x32(words: list[np.ndarray], k0: int, k1: int) -> list[np.ndarray]:
    """Philox-4x32, 10 rounds (Random123; XLA's prng.cc Philox4x32), on uint64 arrays
    holding 32-bit words."""
    c = list(words)
    key = [np.uint64(k0), np.uint64(k1)]
    for _ in range(10):
        p0 = c[0] * np.uint64(0xD2511F53)
        p1 = c[2] * np.uint64(0xCD9E8D57)
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ key[0], p1 & _M32,
             (p0 >> np.uint64(32)) ^ c[3] ^ key[1], p0 & _M32]
        key = [(key[0] + np.uint64(0x9E3779B9)) & _M32, (key[1] + np.uint64(0xBB67AE85)) & _M32]
    return c


def _halves(dims: tuple[int, ...]) -> tuple[int, list[int]]:
    """XLA's SplitShapeIntoHalves: the first even dimension, else the first largest; a
    scalar is split as [1]. Returns the split dimension and the half shape."""
    if not dims:
        return 0, [1]
    even = [i for i, d in enumerate(dims) if d % 2 == 0]
    split = even[0] if even else int(np.argmax(dims))
    half = list(dims)
    half[split] = -(-dims[split] // 2)
    return split, half


def _rng_bit_generator(state: np.ndarray, algorithm: str, dims: tuple[int, ...],
                       out_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """XLA's RngBitGeneratorExpander (prng.cc): THREE_FRY with a u64[2] state (key,
    counter) and PHILOX with a u64[3] state (key, 128-bit counter low word first); narrow
    outputs truncate 32-bit words. PHILOX with a u64[2] state and DEFAULT are left out
    (their layout is backend-specific)."""
    words = [int(w) for w in state]
    key, bits = words[0], out_dtype.itemsize * 8
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    n = math.prod(dims)
    if algorithm == "THREE_FRY" and len(words) == 2:
        if bits == 64:
            counter = (np.uint64(words[1]) + np.arange(n, dtype=np.uint64))
            x0, x1 = threefry2x32(counter & _M32, counter >> np.uint64(32), k0, k1)
            values, blocks = x0 | (x1 << np.uint64(32)), n
        else:
            split, half = _halves(dims)
            blocks = math.prod(half)
            counter = np.uint64(words[1]) + np.arange(blocks, dtype=np.uint64)
            x0, x1 = threefry2x32(counter & _M32, counter >> np.uint64(32), k0, k1)
            pair = np.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
            full = list(half)
            full[split] *= 2
            values = pair.reshape(full)
            if dims:
                values = values[tuple(slice(0, d) for d in dims)]
            values = values.reshape(-1)[:n] if not dims else values
        new_state = [words[0], (words[1] + blocks) % 2**64]
    elif algorithm == "PHILOX" and len(words) == 3:
        per_block = 2 if bits == 64 else 4
        blocks = -(-n // per_block)
        lo = np.uint64(words[1]) + np.arange(blocks, dtype=np.uint64)
        hi = np.full(blocks, np.uint64(words[2])) + (lo < np.uint64(words[1])).astype(np.uint64)
        out = philox4x32([lo & _M32, lo >> np.uint64(32), hi & _M32, hi >> np.uint64(32)], k0, k1)
        if bits == 64:
            pairs = [out[0] | (out[1] << np.uint64(32)), out[2] | (out[3] << np.uint64(32))]
            values = np.stack(pairs, axis=1).reshape(-1)[:n]
        else:
            values = np.stack(out, axis=1).reshape(-1)[:n]
        total = words[1] + (words[2] << 64) + blocks
        new_state = [words[0], total % 2**64, (total >> 64) % 2**64]
    else:
        raise NotImplementedError(f"rng_bit_generator {algorithm} with a u64[{len(words)}] state")
    unsigned = np.dtype(f"u{out_dtype.itemsize}")
    values = np.asarray(values).astype(unsigned).reshape(dims).view(out_dtype)
    return np.array(new_state, np.uint64), values


class Interpreter:
    """Evaluates one computation's graph; sub-computations get their own Interpreter.

    `vectorized`: a scalar sub-computation applied to whole arrays at once (the reducer
    of reduce/reduce_window, the combiner of scatter, a map, a sort comparator).
    """

    def __init__(self, computation, vectorized: bool = False, custom_calls=None) -> None:
        self.vectorized = vectorized
        self.computation = computation
        self.builder = computation._builder
        self.root = computation._root
        self.custom_calls = custom_calls or {}

    def _child(self, computation, vectorized: bool = False) -> Interpreter:
        return Interpreter(computation, vectorized, self.custom_calls)

    def __call__(self, *args):
        values: dict[int, object] = {}
        for n, op in self.builder.parameters.items():
            values[op.uid] = args[n]
        return self._value(self.root, values)

    def _value(self, op, values: dict):
        # Iterative post-order, so long chains do not hit the recursion limit.
        stack = [op]
        while stack:
            top = stack[-1]
            if top.uid in values:
                stack.pop()
                continue
            inputs = [top.source] if top.source is not None else [
                o for operand in top.operands
                for o in (operand if isinstance(operand, tuple) else (operand,))]
            missing = [o for o in inputs if o.uid not in values]
            if missing:
                stack.extend(missing)
                continue
            values[top.uid] = self._eval(top, values)
            stack.pop()
        return values[op.uid]

    def _eval(self, op, values: dict):
        if op.source is not None:
            return values[op.source.uid][op.index]
        ins = [tuple(values[o.uid] for o in operand) if isinstance(operand, tuple)
               else values[operand.uid] for operand in op.operands]
        with np.errstate(all="ignore"):
            out = self._compute(op.opdef.name, op, ins, op.attrs)
        if op.shape.is_array():
            out = np.asarray(out)
            if out.dtype != op.shape.dtype:
                raise AssertionError(f"{op.opdef.name} computed {out.dtype}, not {op.shape.dtype}")
            if not self.vectorized and out.shape != op.shape.dimensions:
                raise AssertionError(f"{op.opdef.name} computed {out.shape}, not {op.shape}")
        return out

    def _sub(self, computation, *args):
        """A scalar sub-computation on arrays of equal shape (elementwise); tuple results
        come back as lists."""
        result = self._child(computation, True)(*args)
        return list(result) if isinstance(result, tuple) else [result]

    def _compute(self, name: str, op, ins: list, a: dict):
        family = op.opdef.family
        dt = op.shape.dtype if op.shape.is_array() else None
        if name == "constant":
            return np.array(a["value"], dtype=dt)
        if family == "unary":
            return globals()[_UNARY_NAMES.get(name, name)](np.asarray(ins[0]))
        if family == "binary":
            return globals()[_BINARY_NAMES.get(name, name)](*_same_shape(ins[0], ins[1]))
        handler = getattr(self, "_op_" + name, None)
        if handler is None:
            raise NotImplementedError(f"the reference interpreter has no {name}")
        return handler(op, ins, a)

    # ---- elementwise beyond unary/binary -----------------------------------------------------

    def _op_compare(self, op, ins, a):
        x, y = _same_shape(ins[0], ins[1])
        return compare(x, y, a["comparison_direction"], a.get("compare_type") or None)

    def _op_select(self, op, ins, a):
        p, t, f = _same_shape(*ins)
        return select(p, t, f)

    def _op_clamp(self, op, ins, a):
        return clamp(*_same_shape(*ins))

    def _op_convert(self, op, ins, a):
        return convert(np.asarray(ins[0]), op.shape.dtype)

    def _op_bitcast_convert(self, op, ins, a):
        return bitcast_convert(np.asarray(ins[0]), op.shape.dtype)

    def _op_reduce_precision(self, op, ins, a):
        return reduce_precision(np.asarray(ins[0]), a["exponent_bits"], a["mantissa_bits"])

    # ---- data movement ------------------------------------------------------------------------

    def _op_broadcast_in_dim(self, op, ins, a):
        x = ins[0]
        shape = [1] * len(a["out_dim_size"])
        for i, d in enumerate(a["broadcast_dimensions"]):
            shape[d] = x.shape[i]
        return np.broadcast_to(x.reshape(shape), a["out_dim_size"]).copy()

    def _op_reshape(self, op, ins, a):
        return ins[0].reshape(a["new_sizes"])

    def _op_transpose(self, op, ins, a):
        return np.transpose(ins[0], a["permutation"])

    def _op_reverse(self, op, ins, a):
        return np.flip(ins[0], a["dimensions"]) if a["dimensions"] else ins[0]

    def _op_slice(self, op, ins, a):
        return ins[0][tuple(slice(s, e, st) for s, e, st in
                            zip(a["start_indices"], a["limit_indices"], a["strides"]))]

    def _op_concatenate(self, op, ins, a):
        return np.concatenate(ins[0], a["dimension"])

    def _op_pad(self, op, ins, a):
        return _pad_array(ins[0], ins[1], a["edge_padding_low"], a["edge_padding_high"],
                          a["interior_padding"])

    def _op_iota(self, op, ins, a):
        dims, k = a["dimensions"], a["iota_dimension"]
        shape = [1] * len(dims)
        shape[k] = dims[k]
        return convert(np.broadcast_to(np.arange(dims[k]).reshape(shape), dims), op.shape.dtype)

    def _op_get_dimension_size(self, op, ins, a):
        return np.array(ins[0].shape[a["dimension"]], np.int32)

    def _op_set_dimension_size(self, op, ins, a):
        # The padded data as is: the builder carries the size beside it and masks where XLA
        # ignores the padding (builder/methods_dynamic.py), so the graph is static.
        return ins[0]

    def _op_dynamic_reshape(self, op, ins, a):
        """The operand's valid region (the input sizes) reshaped row-major to the output
        sizes, zero-padded to `new_size_bounds`; sizes are clamped to [0, bound]."""
        x, in_sizes, out_sizes = ins
        bounds = tuple(a["new_size_bounds"])
        valid = x[tuple(slice(0, min(max(int(s), 0), d)) for s, d in zip(in_sizes, x.shape))]
        sizes = tuple(min(max(int(s), 0), b) for s, b in zip(out_sizes, bounds))
        if math.prod(sizes) != valid.size:
            raise AssertionError(f"dynamic_reshape of {valid.size} elements to {sizes}: "
                                 "undefined in XLA")
        out = np.zeros(bounds, x.dtype)
        out[tuple(slice(0, s) for s in sizes)] = valid.reshape(sizes)
        return out

    def _op_dynamic_slice(self, op, ins, a):
        x, sizes = ins[0], a["slice_sizes"]
        starts = [min(max(int(s), 0), d - n) for s, d, n in zip(ins[1], x.shape, sizes)]
        return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))].copy()

    def _op_dynamic_update_slice(self, op, ins, a):
        x, u = ins[0].copy(), ins[1]
        starts = [min(max(int(s), 0), d - n) for s, d, n in zip(ins[2], x.shape, u.shape)]
        x[tuple(slice(s, s + n) for s, n in zip(starts, u.shape))] = u
        return x

    def _op_gather(self, op, ins, a):
        x, idx = ins
        ivd = a["index_vector_dim"]
        if ivd == idx.ndim:
            idx = idx[..., None]
        idx = np.moveaxis(idx, ivd, -1).astype(np.int64)
        batch_dims = [d for d in range(ins[1].ndim + (ivd == ins[1].ndim)) if d != ivd]
        sizes = a["slice_sizes"]
        removed = set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
        out = np.empty(op.shape.dimensions, x.dtype)
        offset_dims = list(a["offset_dims"])
        batch_out = [d for d in range(out.ndim) if d not in offset_dims]
        for pos in np.ndindex(*idx.shape[:-1]):
            start = [0] * x.ndim
            for k, d in enumerate(a["start_index_map"]):
                start[d] = int(idx[pos][k])
            for od, sd in zip(a["operand_batching_dims"], a["start_indices_batching_dims"]):
                start[od] = pos[batch_dims.index(sd)]
            start = [min(max(s, 0), n - w) for s, n, w in zip(start, x.shape, sizes)]
            window = x[tuple(slice(s, s + w) for s, w in zip(start, sizes))]
            window = window.reshape([w for d, w in enumerate(sizes) if d not in removed])
            where: list = [slice(None)] * out.ndim
            for d, p in zip(batch_out, pos):
                where[d] = p
            out[tuple(where)] = window
        return out

    def _op_scatter(self, op, ins, a):
        """XLA's rule: a window that does not fit entirely is skipped; windows are combined
        in the row-major order of their scatter positions."""
        inputs, idx, updates = [x.copy() for x in ins[0]], ins[1], ins[2]
        ivd = a["index_vector_dim"]
        if ivd == idx.ndim:
            idx = idx[..., None]
        idx = np.moveaxis(idx, ivd, -1).astype(np.int64)
        batch_dims = [d for d in range(ins[1].ndim + (ivd == ins[1].ndim)) if d != ivd]
        uwd = list(a["update_window_dims"])
        removed = set(a["inserted_window_dims"]) | set(a["input_batching_dims"])
        window_operand_dims = [d for d in range(inputs[0].ndim) if d not in removed]
        u0 = updates[0]
        scatter_update_dims = [d for d in range(u0.ndim) if d not in uwd]
        window_sizes = [1] * inputs[0].ndim
        for d, ud in zip(window_operand_dims, uwd):
            window_sizes[d] = u0.shape[ud]
        comp = a["update_computation"]
        for pos in np.ndindex(*idx.shape[:-1]):
            start = [0] * inputs[0].ndim
            for k, d in enumerate(a["scatter_dims_to_operand_dims"]):
                start[d] = int(idx[pos][k])
            for od, sd in zip(a["input_batching_dims"], a["scatter_indices_batching_dims"]):
                start[od] = pos[batch_dims.index(sd)]
            if any(s < 0 or s + w > n for s, w, n in zip(start, window_sizes, inputs[0].shape)):
                continue
            where: list = [slice(None)] * u0.ndim
            for d, p in zip(scatter_update_dims, pos):
                where[d] = p
            target = tuple(slice(s, s + w) for s, w in zip(start, window_sizes))
            ups = [u[tuple(where)].reshape([window_sizes[d] for d in range(len(window_sizes))])
                   for u in updates]
            current = [x[target] for x in inputs]
            new = self._sub(comp, *current, *ups)
            for x, v in zip(inputs, new):
                x[target] = np.broadcast_to(np.asarray(v), x[target].shape).astype(x.dtype)
        return tuple(inputs)

    # ---- reductions, windows, sort ------------------------------------------------------------

    def _op_reduce(self, op, ins, a):
        inputs, inits = ins
        dims = sorted(a["dimensions"])
        keep = [d for d in range(inputs[0].ndim) if d not in dims]
        count = math.prod(inputs[0].shape[d] for d in dims)
        moved = [np.transpose(x, dims + keep).reshape((count, *[x.shape[d] for d in keep]))
                 for x in inputs]
        accs = [np.broadcast_to(init, moved[0].shape[1:]).astype(init.dtype) for init in inits]
        comp = a["computation"]
        for k in range(count):
            accs = [np.broadcast_to(np.asarray(r), accs[0].shape).astype(i.dtype)
                    for r, i in zip(self._sub(comp, *accs, *[m[k] for m in moved]), inits)]
        return tuple(accs) if op.shape.is_tuple() else accs[0]

    def _op_reduce_window(self, op, ins, a):
        """Padding and base-dilation holes hold the init value (an identity of the reducer)."""
        inputs, inits = ins
        padded = [_pad_array(x, init, [p[0] for p in a["padding"]], [p[1] for p in a["padding"]],
                             [d - 1 for d in a["base_dilations"]]) for x, init in zip(inputs, inits)]
        shapes = op.shape.tuple_shapes if op.shape.is_tuple() else [op.shape]
        out_dims = shapes[0].dimensions
        accs = [np.full(out_dims, init, init.dtype) for init in inits]
        strides, wd = a["window_strides"], a["window_dilations"]
        if math.prod(out_dims):
            for offset in np.ndindex(*a["window_dimensions"]):
                sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                           for o, d, n, s in zip(offset, wd, out_dims, strides))
                elems = [p[sl] for p in padded]
                accs = [np.broadcast_to(np.asarray(r), out_dims).astype(i.dtype)
                        for r, i in zip(self._sub(a["computation"], *accs, *elems), inits)]
        return tuple(accs) if op.shape.is_tuple() else accs[0]

    def _op_select_and_scatter(self, op, ins, a):
        """Each window's selected element is found by scanning in row-major order and
        keeping the current pick while select(current, candidate) holds; padding is never
        selected. Ties under GE/LE are implementation-defined: the fuzzer avoids them."""
        x, source, init = ins
        out = np.full(x.shape, init, x.dtype)
        low = [p[0] for p in a["padding"]]
        wdims, strides = a["window_dimensions"], a["window_strides"]
        select_fn = self._child(a["select"], True)
        scatter_fn = self._child(a["scatter"], True)
        for w in np.ndindex(*source.shape):
            best = None
            for offset in np.ndindex(*wdims):
                pos = tuple(wi * s + o - lo for wi, s, o, lo in zip(w, strides, offset, low))
                if any(p < 0 or p >= n for p, n in zip(pos, x.shape)):
                    continue
                if best is None or not bool(select_fn(np.asarray(x[best]), np.asarray(x[pos]))):
                    best = pos
            if best is not None:
                out[best] = np.asarray(scatter_fn(np.asarray(out[best]), np.asarray(source[w]))
                                       ).astype(x.dtype)
        return out

    def _op_sort(self, op, ins, a):
        """The stable order (what is_stable = true requires; for an unstable sort only the
        order of elements the comparator tells apart is determined). less(j, i) for all
        pairs at once; i's rank = #{j: j before i} + #{j < i: j equivalent to i}."""
        xs = [np.moveaxis(x, a["dimension"], -1) for x in ins[0]]
        n = xs[0].shape[-1] if xs[0].ndim else 0
        if n <= 1 or xs[0].size == 0:
            return tuple(x.copy() for x in ins[0])
        pairs = []
        for x in xs:
            pairs += [x[..., None, :], x[..., :, None]]     # [.., i, j]: (x_j, x_i)
        shaped = _same_shape(*pairs)
        j_before_i = np.asarray(self._sub(a["comparator"], *shaped)[0]).astype(bool)
        swapped = []
        for x in xs:
            swapped += [x[..., :, None], x[..., None, :]]   # (x_i, x_j)
        i_before_j = np.asarray(self._sub(a["comparator"], *_same_shape(*swapped))[0]).astype(bool)
        j_before_i = np.broadcast_to(j_before_i, xs[0].shape + (n,))
        i_before_j = np.broadcast_to(i_before_j, xs[0].shape + (n,))
        equivalent = ~j_before_i & ~i_before_j
        lower = np.tril(np.ones((n, n), bool), -1)          # [i, j]: j < i
        rank = j_before_i.sum(-1) + (equivalent & lower).sum(-1)
        order = np.argsort(rank, axis=-1, kind="stable")
        return tuple(np.moveaxis(np.take_along_axis(x, order, -1), -1, a["dimension"]).copy()
                     for x in xs)

    # ---- products -----------------------------------------------------------------------------

    def _op_dot_general(self, op, ins, a):
        return _dot_general(ins[0], ins[1], a, op.shape.dtype)

    def _op_ragged_dot(self, op, ins, a):
        return _ragged_dot(ins[0], ins[1], ins[2], a, op.shape.dtype)

    def _op_scaled_dot(self, op, ins, a):
        return _scaled_dot(*ins, a, op.shape.dtype)

    def _op_convolution(self, op, ins, a):
        return _convolution(ins[0], ins[1], a, op.shape.dtype)

    def _op_fft(self, op, ins, a):
        return _fft(ins[0], a["fft_type"], tuple(a["fft_length"]), op.shape.dtype)

    def _op_cholesky(self, op, ins, a):
        return _cholesky(ins[0], a["lower"])

    def _op_triangular_solve(self, op, ins, a):
        return _triangular_solve(ins[0], ins[1], a)

    # ---- structure and control flow -----------------------------------------------------------

    def _op_tuple(self, op, ins, a):
        return tuple(ins[0])

    def _op_get_tuple_element(self, op, ins, a):
        return ins[0][a["index"]]

    def _op_optimization_barrier(self, op, ins, a):
        return ins[0]

    def _op_call(self, op, ins, a):
        return self._child(a["to_apply"], self.vectorized)(*ins[0])

    # A composite means its decomposition (seed: CompositeCall); name/attributes/version are hints.
    _op_composite_call = _op_call

    def _op_scan(self, op, ins, a):
        """Step by step along scan_dimension (from its end with is_reverse), whatever
        is_associative says: to_apply(elements..., carries...) -> (outputs..., carries...),
        output j of step i stored at index i of output array j (seed: Scan; XLA's
        ScanExpander)."""
        inputs, carries = list(ins[0]), list(ins[1])
        d = a["scan_dimension"]
        k = len(carries)
        shapes = op.shape.tuple_shapes
        outs = [np.zeros(s.dimensions, s.dtype) for s in shapes[:len(shapes) - k]]
        body = self._child(a["to_apply"])
        steps = inputs[0].shape[d]
        for i in (reversed(range(steps)) if a["is_reverse"] else range(steps)):
            result = body(*[np.take(x, i, axis=d) for x in inputs], *carries)
            leaves = list(result) if isinstance(result, tuple) else [result]
            for out, y in zip(outs, leaves):
                out[(slice(None),) * d + (i,)] = y
            carries = leaves[len(outs):]
        return [*outs, *carries]

    def _op_map(self, op, ins, a):
        result = self._sub(a["computation"], *_same_shape(*ins[0]))[0]
        return np.broadcast_to(np.asarray(result), op.shape.dimensions).copy()

    def _op_while(self, op, ins, a):
        state = ins[0]
        cond, body = self._child(a["cond"]), self._child(a["body"])
        for _ in range(WHILE_TRIP_LIMIT):
            if not bool(cond(state)):
                return state
            state = body(state)
        raise AssertionError(f"while loop ran {WHILE_TRIP_LIMIT} trips")

    def _op_case(self, op, ins, a):
        """A pred index picks branch 0 when true; an s32 index out of range runs the last."""
        index, operands = ins
        branches = a["branches"]
        if index.dtype == np.bool_:
            k = 0 if bool(index) else 1
        else:
            k = int(index)
            if not 0 <= k < len(branches):
                k = len(branches) - 1
        return self._child(branches[k])(operands[k])

    def _op_rng_bit_generator(self, op, ins, a):
        return _rng_bit_generator(ins[0], a["algorithm"], tuple(a["dimensions"]),
                                  op.shape.tuple_shapes[1].dtype)

    # ---- collectives, as one replica runs them (the fuzzer compiles with num_replicas=1) ----

    def _op_all_reduce(self, op, ins, a):
        return tuple(x.copy() for x in ins[0])      # a group of one: nothing to combine

    def _op_reduce_scatter(self, op, ins, a):
        return tuple(x.copy() for x in ins[0])      # shard_count 1: the one block is everything

    def _op_all_gather(self, op, ins, a):
        return ins[0].copy()

    def _op_all_to_all(self, op, ins, a):
        return ins[0].copy()

    def _op_collective_broadcast(self, op, ins, a):
        return ins[0].copy()

    def _op_ragged_all_to_all(self, op, ins, a):
        """A group of one: the replica's own rows, input[input_offsets[0][u]:+send_sizes[0][u]],
        written into output at output_offsets[0][u] (seed: RaggedAllToAll)."""
        data, output, starts, sizes, at, _ = ins
        result = output.copy()
        for s, k, o in zip(*(np.asarray(v, np.int64).reshape(-1) for v in (starts, sizes, at))):
            result[o:o + k] = data[s:s + k]
        return result

    def _op_collective_permute(self, op, ins, a):
        """Replica 0 receives from a (0, 0) pair, else zeros."""
        if any(tuple(p) == (0, 0) for p in a["source_target_pairs"]):
            return ins[0].copy()
        return np.zeros_like(ins[0])

    def _op_custom_call(self, op, ins, a):
        """The target from `custom_calls` (name -> the Python function registered with the
        library), called like the runtime calls it; results copied into the result types."""
        name = a["call_target_name"]
        if name not in self.custom_calls:
            raise NotImplementedError(f"custom_call {name!r}: not in the interpreter's custom_calls")
        extra = {"opaque": a["backend_config"]} if a["backend_config"] else {}
        result = self.custom_calls[name](*[np.array(x) for x in ins[0]], **extra)
        if op.shape.is_tuple():
            return tuple(np.array(r, dtype=s.dtype) for r, s in zip(result, op.shape.tuple_shapes))
        return np.array(result, dtype=op.shape.dtype)

    def _op_replica_id(self, op, ins, a):
        return np.array(0, op.shape.dtype)      # a single replica

    def _op_partition_id(self, op, ins, a):
        return np.array(0, op.shape.dtype)


def evaluate(computation, args, custom_calls=None):
    """The computation's result on `args` (numpy values of its parameter shapes);
    `custom_calls` maps custom-call target names to the Python functions behind them."""
    return Interpreter(computation, custom_calls=custom_calls)(*[np.asarray(x) for x in args])


if __name__ == "__main__":
    _self_check()
    print("reference self-check passed")
