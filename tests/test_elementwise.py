"""Numeric tests of the elementwise ops: xlamlir against tests/reference.py.

Case tables (op x element type, ids like `add-f32`, `convert-f32-s8`,
`sub-pred-rejected`) drive one parametrized test per family, written against
the public API only (../shared/API.md). Every op meets every one of the 15
array types: a type XLA accepts runs on reference.EDGE_VALUES plus random
values and is compared with the reference function of the same name; a type
XLA rejects must raise xm.ShapeError at the builder call. Then the
cross-cutting rules: operator overloads, XLA broadcasting (seed 000's worked
examples, plus a hypothesis check against numpy's shapes), empty and rank-0/2/3
operands, argument checking at call time.

Comparison: ints and PRED exactly; floats exactly (NaN == NaN, and the sign of
zero must match) except the transcendental functions, which get
|actual - expected| <= ATOL + RTOL * |expected| with the per-type values below
(expected = the float64 result rounded once to the type).

Which ops accept complex, unsigned or PRED follows XLA's shape inference, and
XLA:CPU's emitter where the shape inference is looser than what XLA can run
(max/min/clamp/rem/atan2 on complex, clamp on PRED): see the `accepts` columns.
"""

from __future__ import annotations

import math
import os
import sys
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------- unary and binary ops

@dataclass(frozen=True)
class Op:
    method: str                  # XlaBuilder method (API.md)
    ref: str                     # reference function, named like the dialect op
    arity: int
    accepts: tuple[str, ...]     # the other types must raise ShapeError
    approx: tuple[str, ...] = ()  # types compared with a tolerance


TRANSCENDENTAL = ("exp", "expm1", "log", "log1p", "logistic", "rsqrt", "cbrt", "sin", "cos", "tan", "tanh")
_REFS = {"exp": "exponential", "expm1": "exponential_minus_one", "log1p": "log_plus_one",
         "sin": "sine", "cos": "cosine"}

UNARY_OPS = [
    # abs: XLA's shape inference wants a signed type (ElementIsSigned) or complex; StableHLO
    # abs likewise: unsigned and PRED are rejected. Complex -> the component type.
    Op("abs", "abs", 1, SINT + INEXACT, approx=COMPLEX),
    Op("neg", "negate", 1, INTS + INEXACT),
    # sign on unsigned: 0/1 (SEMANTICS.md 5.A Sign; XLA's shape inference would reject it).
    Op("sign", "sign", 1, INTS + INEXACT, approx=COMPLEX),
    Op("floor", "floor", 1, FLOATS),
    Op("ceil", "ceil", 1, FLOATS),
    Op("round", "round_nearest_afz", 1, FLOATS),
    Op("round_nearest_afz", "round_nearest_afz", 1, FLOATS),
    Op("round_nearest_even", "round_nearest_even", 1, FLOATS),
    # Float or complex, as XLA's shape inference (cbrt, tan and logistic included:
    # XLA:CPU has EmitComplexCbrt; StableHLO cbrt takes complex too).
    *(Op(m, _REFS.get(m, m), 1, INEXACT, approx=INEXACT) for m in TRANSCENDENTAL),
    Op("sqrt", "sqrt", 1, INEXACT, approx=COMPLEX),  # real sqrt is correctly rounded (IEEE)
    # Client-library ops in XLA (math.h), real only: Erf rejects complex, Atan is
    # Atan2(x, 1) and Cosh uses Max, neither of which XLA:CPU has for complex.
    Op("cosh", "cosh", 1, FLOATS, approx=FLOATS),
    Op("atan", "atan", 1, FLOATS, approx=FLOATS),
    Op("erf", "erf", 1, FLOATS, approx=FLOATS),
    Op("is_finite", "is_finite", 1, FLOATS),
    Op("not_", "not_", 1, PRED + INTS),
    Op("clz", "count_leading_zeros", 1, INTS),
    Op("population_count", "popcnt", 1, INTS),
    Op("real", "real", 1, INEXACT),
    Op("imag", "imag", 1, INEXACT),
]

BINARY_OPS = [
    Op("add", "add", 2, ALL),
    Op("sub", "subtract", 2, INTS + INEXACT),                  # PRED rejected (SEMANTICS 5.X)
    Op("mul", "multiply", 2, ALL, approx=COMPLEX),
    Op("div", "divide", 2, INTS + INEXACT, approx=COMPLEX),
    Op("rem", "remainder", 2, INTS + FLOATS),                  # no complex remainder in XLA:CPU
    # Complex max/min: StableHLO's lexicographic order is slated for removal (#560) and
    # XLA:CPU has no emitter for it, so rejected; PRED max = OR, min = AND.
    Op("max", "maximum", 2, PRED + INTS + FLOATS),
    Op("min", "minimum", 2, PRED + INTS + FLOATS),
    Op("pow", "power", 2, INTS + INEXACT, approx=INEXACT),
    Op("atan2", "atan2", 2, FLOATS, approx=FLOATS),            # no complex atan2 in XLA:CPU
    Op("complex", "complex", 2, ("f32", "f64")),               # f32 -> c64, f64 -> c128 only
    Op("and_", "and_", 2, PRED + INTS),
    Op("or_", "or_", 2, PRED + INTS),
    Op("xor", "xor", 2, PRED + INTS),
    Op("shift_left", "shift_left", 2, INTS),
    Op("shift_right_arithmetic", "shift_right_arithmetic", 2, INTS),
    Op("shift_right_logical", "shift_right_logical", 2, INTS),
]


def op_inputs(op: Op, dt: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if op.arity == 1:
        if dt in COMPLEX and dt in op.approx:
            return [moderate_complex(dt, rng)]
        return [ref.values(dt, N, seed)]
    if op.method.startswith("shift"):
        return shift_inputs(dt, seed)
    if op.method == "pow" and dt in INTS:
        return int_pow_inputs(dt, rng)
    if dt in COMPLEX and dt in op.approx:    # mul, div, pow: finite nonzero operands
        scale = 0.6 if op.method == "pow" else 1.0
        return [moderate_complex(dt, rng), moderate_complex(dt, rng, scale=scale)]
    return cross(_keys(dt), dt, rng)


def tolerance(method: str, dt: str) -> dict:
    atol = PERIODIC_ATOL if method in ("sin", "cos", "tan") else ATOL
    return {"rtol": RTOL.get(dt, 0.0), "atol": atol.get(dt, 0.0)}


def _op_cases():
    for op in UNARY_OPS + BINARY_OPS:
        for dt in ALL:
            suffix = "" if dt in op.accepts else "-rejected"
            yield pytest.param(op, dt, id=f"{op.method}-{dt}{suffix}")


@pytest.mark.parametrize(("op", "dt"), list(_op_cases()))
def test_elementwise(op: Op, dt: str) -> None:
    if dt not in op.accepts:
        expect_shape_error(op.method, [dt] * op.arity)
        return
    args = op_inputs(op, dt, seed_of(op.method, dt))
    out = run_op(op.method, args)
    expected = getattr(ref, op.ref)(*args)
    check(out, expected, approx=dt in op.approx, inputs=args, what=f"{op.method}-{dt}",
          **tolerance(op.method, dt))


# ---------------------------------------------------------------- compare

def _compare_keys(dt: str) -> list:
    info = np.iinfo(ref.DTYPES[dt]) if dt in INTS else None
    if dt in FLOATS:   # -NaN and -0.0 for TOTALORDER
        return [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -2.5]
    if dt in COMPLEX:
        return [complex(math.nan, 0), complex(0, math.nan), complex(math.inf, 0), 0j,
                complex(-0.0, -0.0), 1 + 1j, 1 - 1j, 1 + 0j]
    if dt in SINT:
        return [info.min, -1, 0, 1, info.max, 7, info.min + 1, info.max - 1]
    if dt in UINT:
        top = 1 << (ref.bit_width(dt) - 1)
        return [0, 1, info.max, info.max - 1, top, top - 1, 7, 2]
    return [False, True]


# StableHLO compare (C3): the comparison type must fit the element type.
VALID_COMPARISON_TYPES = {"pred": ("UNSIGNED",), **{t: ("SIGNED",) for t in SINT},
                          **{t: ("UNSIGNED",) for t in UINT},
                          **{t: ("FLOAT", "TOTALORDER") for t in FLOATS},
                          **{t: ("FLOAT",) for t in COMPLEX}}
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _compare_cases():
    for dt in ALL:
        yield pytest.param(dt, "methods", id=f"compare-{dt}-methods")   # b.eq ... b.ge
        yield pytest.param(dt, None, id=f"compare-{dt}-default")
        for ct in VALID_COMPARISON_TYPES[dt]:
            yield pytest.param(dt, ct, id=f"compare-{dt}-{ct}")


@pytest.mark.parametrize(("dt", "ctype"), list(_compare_cases()))
def test_compare(dt: str, ctype) -> None:
    # Complex numbers have no order: EQ and NE only (XLA:CPU; StableHLO #560).
    directions = ("EQ", "NE") if dt in COMPLEX else DIRECTIONS
    args = cross(_compare_keys(dt), dt, np.random.default_rng(seed_of("compare", dt)))

    def build(b, x, y):
        if ctype == "methods":
            return [getattr(b, d.lower())(x, y) for d in directions]
        return [b.compare(x, y, d, comparison_type=ctype) for d in directions]

    outs = run(build, args)
    assert isinstance(outs, tuple) and len(outs) == len(directions)
    for d, out in zip(directions, outs, strict=True):
        expected = ref.compare(*args, d, None if ctype == "methods" else ctype)
        check(out, expected, inputs=args, what=f"compare {d} {ctype} {dt}")


def _compare_error_cases():
    for dt in ALL:
        for ct in COMPARISON_TYPES:
            if ct not in VALID_COMPARISON_TYPES[dt]:
                yield pytest.param(dt, ct, "EQ", id=f"compare-{dt}-{ct}-rejected")
    for dt in COMPLEX:
        for d in ("LT", "LE", "GT", "GE"):
            yield pytest.param(dt, None, d, id=f"compare-{dt}-{d}-rejected")


@pytest.mark.parametrize(("dt", "ctype", "direction"), list(_compare_error_cases()))
def test_compare_rejected(dt: str, ctype, direction: str) -> None:
    expect_shape_error("compare", [dt, dt], direction, comparison_type=ctype)
    if ctype is None:
        expect_shape_error(direction.lower(), [dt, dt])


def test_compare_unknown_direction_or_type() -> None:
    expect_shape_error("compare", ["f32", "f32"], "LTE")
    expect_shape_error("compare", ["f32", "f32"], "LT", comparison_type="PARTIAL")


# ---------------------------------------------------------------- select, clamp

@pytest.mark.parametrize("dt", ALL, ids=[f"select-{dt}" for dt in ALL])
def test_select(dt: str) -> None:
    seed = seed_of("select", dt)
    pred = ref.random_values("pred", N, np.random.default_rng(seed))
    on_true, on_false = ref.values(dt, N, seed), ref.values(dt, N, seed + 1)[::-1].copy()
    args = [pred, on_true, on_false]
    check(run_op("select", args), ref.select(*args), inputs=args, what=f"select-{dt}")


CLAMP_TYPES = INTS + FLOATS   # XLA:CPU: "Clamp unimplemented" for PRED and complex


@pytest.mark.parametrize("dt", ALL, ids=[f"clamp-{dt}" + ("" if dt in CLAMP_TYPES else "-rejected")
                                         for dt in ALL])
def test_clamp(dt: str) -> None:
    if dt not in CLAMP_TYPES:
        expect_shape_error("clamp", [dt, dt, dt])
        return
    seed = seed_of("clamp", dt)
    rng = np.random.default_rng(seed)
    x = ref.values(dt, N, seed)
    lo, hi = x[rng.permutation(N)], x[rng.permutation(N)]   # lo > hi happens: gives hi
    args = [lo, x, hi]
    check(run_op("clamp", args), ref.clamp(*args), inputs=args, what=f"clamp-{dt}")


# ---------------------------------------------------------------- convert

@pytest.mark.parametrize(("src", "dst"), [pytest.param(s, d, id=f"convert-{s}-{d}")
                                          for s in ALL for d in ALL])
def test_convert(src: str, dst: str) -> None:
    x = ref.values(src, N, seed_of("convert", src))
    out = run_op("convert_element_type", [x], xtype(dst))
    check(out, ref.convert(x, dst), inputs=[x], what=f"convert {src} -> {dst}")


def test_convert_accepts_numpy_dtype() -> None:
    x = ref.values("f32", N, 7)
    check(run_op("convert_element_type", [x], np.int16), ref.convert(x, "s16"), inputs=[x])


# ---------------------------------------------------------------- bitcast_convert

_SAME_WIDTH = [("s8", "u8"), ("s16", "u16", "f16", "bf16"), ("s32", "u32", "f32"),
               ("s64", "u64", "f64"), ("c64",), ("c128",)]
BITCAST_OK = [(s, d, (N,)) for group in _SAME_WIDTH for s in group for d in group] + [
    ("f32", "f16", (8,)), ("f32", "s8", (8,)), ("f32", "f16", ()),   # seed 001: f32[] -> f16[2]
    ("f16", "f32", (10, 2)),                                         # seed 001 example
    ("s8", "s32", (4, 4)), ("u8", "f64", (2, 8)), ("f64", "s16", (3,)), ("s64", "u8", (2,)),
    ("bf16", "u64", (2, 4)), ("u32", "bf16", (3, 2)),
]
BITCAST_REJECTED = [
    ("f16", "f32", (10, 3)),   # the last dimension must equal the width ratio
    ("f16", "f32", ()),        # ... so a scalar cannot widen
    ("c64", "f64", (4,)), ("c64", "s64", (4,)), ("f32", "c64", (4, 2)),   # complex <-> real
    # xlamlir choices: complex only to complex of its own width; PRED has no defined bit
    # width to reinterpret (StableHLO's i1 is 1 bit, XLA stores a byte).
    ("c128", "c64", (3,)), ("c64", "c128", (3, 2)),
    ("pred", "s8", (4,)), ("u8", "pred", (4,)), ("s32", "pred", (4,)),
]


def _bitcast_id(src: str, dst: str, dims: tuple[int, ...]) -> str:
    return f"bitcast-{src}-{dst}-" + ("x".join(map(str, dims)) or "scalar")


@pytest.mark.parametrize(("src", "dst", "dims"),
                         [pytest.param(*c, id=_bitcast_id(*c)) for c in BITCAST_OK])
def test_bitcast_convert(src: str, dst: str, dims: tuple[int, ...]) -> None:
    size = int(np.prod(dims))
    x = ref.values(src, size, seed_of("bitcast", src)).reshape(dims)
    out = run_op("bitcast_convert_type", [x], xtype(dst))
    check_bits(out, ref.bitcast_convert(x, dst), what=f"bitcast {src}{list(dims)} -> {dst}")


@pytest.mark.parametrize(("src", "dst", "dims"),
                         [pytest.param(*c, id=_bitcast_id(*c) + "-rejected")
                          for c in BITCAST_REJECTED])
def test_bitcast_convert_rejected(src: str, dst: str, dims: tuple[int, ...]) -> None:
    expect_shape_error("bitcast_convert_type", [src], xtype(dst), dims=dims)


# ---------------------------------------------------------------- reduce_precision

REDUCE_PRECISION = [
    ("f32", 8, 7), ("f32", 5, 10), ("f32", 8, 23), ("f32", 11, 52), ("f32", 3, 2), ("f32", 4, 3),
    ("f32", 5, 2), ("f32", 2, 1), ("f32", 1, 4), ("f32", 4, 0),
    ("f64", 11, 52), ("f64", 8, 23), ("f64", 5, 10), ("f64", 11, 10), ("f64", 3, 2),
    ("f16", 5, 10), ("f16", 3, 2), ("f16", 5, 2), ("f16", 8, 7), ("f16", 2, 0),
    ("bf16", 8, 7), ("bf16", 5, 10), ("bf16", 4, 3), ("bf16", 3, 1),
]
# Ties and range limits: ties to even for bf16 (1 + 2^-8, 1 + 3 * 2^-8), f16's largest
# finite value and its rounding limit, f16's smallest normal and the values just below.
_PRECISION_SPECIALS = [1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-8), 65504.0, 65519.0, 65520.0,
                       2.0**-14, 2.0**-15, -(2.0**-15), 2.0**-14 * (1 - 2.0**-12), 1 + 2.0**-11]


@pytest.mark.parametrize(("dt", "e", "m"), [pytest.param(*c, id=f"reduce_precision-{c[0]}-e{c[1]}m{c[2]}")
                                            for c in REDUCE_PRECISION])
def test_reduce_precision(dt: str, e: int, m: int) -> None:
    seed = seed_of("reduce_precision", dt)
    edges = ref.EDGE_VALUES[dt]
    specials = ref.as_dtype(_PRECISION_SPECIALS, dt)
    rest = ref.random_values(dt, N - edges.size - specials.size, np.random.default_rng(seed))
    x = np.concatenate([edges, specials, rest])
    out = run_op("reduce_precision", [x], e, m)
    check(out, ref.reduce_precision(x, e, m), inputs=[x], what=f"reduce_precision({dt}, {e}, {m})")


def test_reduce_precision_matches_narrow_types() -> None:
    # (8, 7) is a bf16 round trip for every finite f32; (5, 10) an f16 round trip, with
    # overflow to inf, wherever the value is not in f16's subnormal range.
    x = ref.values("f32", N, 11)
    x = x[np.isfinite(x)]
    bf16, f16 = run(lambda b, p: [b.reduce_precision(p, 8, 7), b.reduce_precision(p, 5, 10)], [x])
    check(bf16, x.astype(ref.DTYPES["bf16"]).astype(np.float32), inputs=[x], what="(8, 7)")
    normal = np.abs(x) >= 2.0**-14
    with np.errstate(over="ignore"):
        check(f16[normal], x[normal].astype(np.float16).astype(np.float32), what="(5, 10)")


@pytest.mark.parametrize(("dt", "e", "m"), [("f32", 0, 5), ("f32", 8, -1), ("s32", 8, 7),
                                            ("c64", 8, 7), ("pred", 8, 7)],
                         ids=["e0", "m-1", "s32", "c64", "pred"])
def test_reduce_precision_rejected(dt: str, e: int, m: int) -> None:
    expect_shape_error("reduce_precision", [dt], e, m)


# ---------------------------------------------------------------- empty, rank 0, rank 2/3

@dataclass(frozen=True)
class Call:
    id: str
    method: str
    operands: tuple[tuple[str, tuple[int, ...]], ...]
    expected: object              # reference function of the arrays
    extra: tuple = ()
    approx: bool = False


def _to(name):
    return lambda x: ref.convert(x, name)


SHAPE_CASES = [
    *(Call(f"empty-add-{dt}", "add", ((dt, (0,)), (dt, (0,))), ref.add) for dt in ALL),
    Call("empty-not_-pred", "not_", (("pred", (0,)),), ref.not_),
    Call("empty-neg-s32", "neg", (("s32", (0,)),), ref.negate),
    Call("empty-population_count-u16", "population_count", (("u16", (0,)),), ref.popcnt),
    Call("empty-exp-f32", "exp", (("f32", (0,)),), ref.exponential),
    Call("empty-sqrt-bf16", "sqrt", (("bf16", (0,)),), ref.sqrt),
    Call("empty-erf-f64", "erf", (("f64", (0,)),), ref.erf),
    Call("empty-real-c64", "real", (("c64", (0,)),), ref.real),
    Call("empty-abs-c128", "abs", (("c128", (0,)),), ref.abs),
    Call("empty-lt-f64", "lt", (("f64", (0,)), ("f64", (0,))), lambda x, y: ref.compare(x, y, "LT")),
    Call("empty-select-u8", "select", (("pred", (0,)), ("u8", (0,)), ("u8", (0,))), ref.select),
    Call("empty-clamp-s64", "clamp", (("s64", (0,)),) * 3, ref.clamp),
    Call("empty-convert-f32-s8", "convert_element_type", (("f32", (0,)),), _to("s8"), (xm.S8,)),
    Call("empty-reduce_precision-f16", "reduce_precision", (("f16", (0,)),),
         lambda x: ref.reduce_precision(x, 3, 2), (3, 2)),
    Call("empty-add-f32-2x0", "add", (("f32", (2, 0)), ("f32", (2, 0))), ref.add),
    Call("rank0-add-f32", "add", (("f32", ()), ("f32", ())), ref.add),
    Call("rank0-div-s32", "div", (("s32", ()), ("s32", ())), ref.divide),
    Call("rank0-abs-c64", "abs", (("c64", ()),), ref.abs),
    Call("rank0-round-f16", "round", (("f16", ()),), ref.round_nearest_afz),
    Call("rank0-lt-s16", "lt", (("s16", ()), ("s16", ())), lambda x, y: ref.compare(x, y, "LT")),
    Call("rank0-convert-f64-u16", "convert_element_type", (("f64", ()),), _to("u16"), (xm.U16,)),
    Call("rank0-select-c128", "select", (("pred", ()), ("c128", ()), ("c128", ())), ref.select),
    Call("rank2-mul-s32-8x8", "mul", (("s32", (8, 8)), ("s32", (8, 8))), ref.multiply),
    Call("rank2-atan2-f32-4x4", "atan2", (("f32", (4, 4)), ("f32", (4, 4))), ref.atan2, approx=True),
    Call("rank2-select-u16-4x8", "select", (("pred", (4, 8)), ("u16", (4, 8)), ("u16", (4, 8))),
         ref.select),
    Call("rank2-not_-pred-2x3", "not_", (("pred", (2, 3)),), ref.not_),
    Call("rank3-exp-f64-2x3x4", "exp", (("f64", (2, 3, 4)),), ref.exponential, approx=True),
    Call("rank3-rem-s8-2x4x4", "rem", (("s8", (2, 4, 4)), ("s8", (2, 4, 4))), ref.remainder),
    Call("rank3-clamp-f16-2x2x4", "clamp", (("f16", (2, 2, 4)),) * 3, ref.clamp),
    Call("rank3-neg-c64-2x2x2", "neg", (("c64", (2, 2, 2)),), ref.negate),
    Call("rank3-convert-f32-s32-2x3x2", "convert_element_type", (("f32", (2, 3, 2)),), _to("s32"),
         (xm.S32,)),
    Call("rank3-reduce_precision-f32-4x2x2", "reduce_precision", (("f32", (4, 2, 2)),),
         lambda x: ref.reduce_precision(x, 8, 7), (8, 7)),
    Call("rank3-shift_right_logical-u32-2x2x4", "shift_right_logical", (("u32", (2, 2, 4)),) * 2,
         ref.shift_right_logical),
]


@pytest.mark.parametrize("call", SHAPE_CASES, ids=[c.id for c in SHAPE_CASES])
def test_shapes(call: Call) -> None:
    arrays = []
    for i, (dt, dims) in enumerate(call.operands):
        size, skip = int(np.prod(dims)), 5 + 3 * i     # skip a few edge values, differently per operand
        arrays.append(ref.values(dt, size + skip, seed_of(call.id, i))[skip:].reshape(dims))
    out = run_op(call.method, arrays, *call.extra)
    expected = call.expected(*arrays)
    if out.ndim == 0:
        assert isinstance(out, np.ndarray), "a rank-0 result is a 0-d numpy array"
    dt = ref.name_of(arrays[-1])
    check(out, np.asarray(expected), approx=call.approx, inputs=arrays, what=call.id,
          **tolerance(call.method, dt))


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


# ---------------------------------------------------------------- broadcasting (seed 000)

def s32(v) -> np.ndarray:
    return np.array(v, dtype=np.int32)


def test_broadcast_scalar_either_side() -> None:
    m, seven = s32([[1, 2, 3], [4, 5, 6]]), s32(7)
    outs = run(lambda b, m, s: [b.add(m, s), b.add(s, m), b.sub(m, s), b.sub(s, m)], [m, seven])
    np.testing.assert_array_equal(outs[0], [[8, 9, 10], [11, 12, 13]])   # seed 000
    np.testing.assert_array_equal(outs[1], [[8, 9, 10], [11, 12, 13]])
    np.testing.assert_array_equal(outs[2], m - 7)
    np.testing.assert_array_equal(outs[3], 7 - m)
    assert all(o.dtype == np.int32 and o.shape == (2, 3) for o in outs)


def test_broadcast_matrix_vector() -> None:
    m, v = s32([[1, 2, 3], [4, 5, 6]]), s32([7, 8, 9])
    outs = run(lambda b, m, v: [b.add(m, v, broadcast_dimensions=(1,)),
                                b.add(v, m, broadcast_dimensions=(1,))], [m, v])
    for out in outs:   # seed 000: |1 2 3; 4 5 6| + |7 8 9|
        np.testing.assert_array_equal(out, [[8, 10, 12], [11, 13, 15]])


def test_broadcast_square_matrix_both_ways() -> None:
    m, v = s32(np.arange(9).reshape(3, 3) * 10), s32([7, 8, 9])
    rows, cols = run(lambda b, m, v: [b.add(m, v, broadcast_dimensions=(1,)),
                                      b.add(m, v, broadcast_dimensions=(0,))], [m, v])
    np.testing.assert_array_equal(rows, m + v[None, :])    # dim 1: the vector is each row
    np.testing.assert_array_equal(cols, m + v[:, None])    # dim 0: each element fills a row


def test_broadcast_rejections() -> None:
    b = xm.XlaBuilder("t")
    m = b.parameter(0, shape_of("s32", (2, 3)))
    v = b.parameter(1, shape_of("s32", (3,)))
    w = b.parameter(2, shape_of("s32", (2, 3)))
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(0,))    # seed 000: dimension 0 is invalid for 2x3 + 3
    with pytest.raises(xm.ShapeError):
        b.add(m, v)                               # different ranks need broadcast_dimensions
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(2,))    # out of range
    with pytest.raises(xm.ShapeError):
        b.add(m, v, broadcast_dimensions=(0, 1))  # one entry per lower-rank dimension
    with pytest.raises(xm.ShapeError):
        b.add(m, w, broadcast_dimensions=(1, 0))  # equal ranks: empty or the identity only
    assert b.add(m, w, broadcast_dimensions=(0, 1)).shape == shape_of("s32", (2, 3))


@pytest.mark.parametrize(("a", "b", "result"), [
    ((2, 1), (2, 3), (2, 3)), ((1, 2, 5), (7, 2, 5), (7, 2, 5)), ((7, 2, 5), (7, 1, 5), (7, 2, 5)),
    ((2, 1), (1, 3), (2, 3)),                    # "outer operation"
    ((7, 2, 5), (7, 2, 6), None),                # incompatible
], ids=["2x1+2x3", "1x2x5+7x2x5", "7x2x5+7x1x5", "2x1+1x3-outer", "7x2x5+7x2x6-rejected"])
def test_broadcast_degenerate_dimensions(a, b, result) -> None:   # seed 000 examples
    x, y = ref.values("f32", int(np.prod(a)), 1).reshape(a), ref.values("f32", int(np.prod(b)), 2).reshape(b)
    if result is None:
        expect_broadcast_error(a, b)
        return
    out = run_op("mul", [x, y])
    assert out.shape == result
    xb, yb = np.broadcast_arrays(x, y)
    check(out, ref.multiply(np.ascontiguousarray(xb), np.ascontiguousarray(yb)), inputs=[xb, yb])


def expect_broadcast_error(a, b, dims=()) -> None:
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("f32", a)), bld.parameter(1, shape_of("f32", b))
    with pytest.raises(xm.ShapeError):
        bld.mul(x, y, broadcast_dimensions=dims)


def test_broadcast_composition() -> None:
    # seed 000: |1 2 3 4| + [5 6] with dims (0): 4x1 then degenerate broadcasting to 4x2.
    v, m = s32([1, 2, 3, 4]), s32([[5, 6]])
    out = run_op("add", [v, m], broadcast_dimensions=(0,))
    np.testing.assert_array_equal(out, [[6, 7], [7, 8], [8, 9], [9, 10]])


def test_broadcast_composition_rank3() -> None:
    # seed 000: a 1x2 matrix + a 4x3x1 array with dims (1, 2) -> 4x3x2.
    m, a = s32([[5, 6]]), s32(np.arange(12).reshape(4, 3, 1))
    out = run_op("add", [m, a], broadcast_dimensions=(1, 2))
    np.testing.assert_array_equal(out, m.reshape(1, 1, 2) + a)


def test_broadcast_cuboid_and_matrix() -> None:
    # seed 000: a 2x3x4 cuboid and a 3x4 matrix with dims (1, 2).
    c, m = s32(np.arange(24).reshape(2, 3, 4)), s32(np.arange(12).reshape(3, 4) * 100)
    np.testing.assert_array_equal(run_op("add", [c, m], broadcast_dimensions=(1, 2)), c + m)


def test_broadcast_dimension_order() -> None:
    # seed 000: TxV onto MxNxPxQ with (0, 3) is fine; the tuple must be strictly increasing.
    big = ref.values("f32", 120, 3).reshape(2, 3, 4, 5)
    tv, t = ref.values("f32", 10, 4).reshape(2, 5), ref.values("f32", 4, 5)
    out = run_op("add", [big, tv], broadcast_dimensions=(0, 3))
    check(out, ref.add(big, np.ascontiguousarray(np.broadcast_to(tv[:, None, None, :], big.shape))))
    out = run_op("add", [t, big], broadcast_dimensions=(2,))
    check(out, ref.add(np.ascontiguousarray(np.broadcast_to(t[None, None, :, None], big.shape)), big))
    expect_broadcast_error((2, 3, 4, 5), (5, 2), dims=(3, 0))   # V to Q and T to M: wrong order
    expect_broadcast_error((2, 3, 4, 5), (3, 3), dims=(1, 1))   # one dimension twice


def test_broadcast_element_type_mismatch() -> None:
    for a, b in [("f32", "f64"), ("s32", "u32"), ("s8", "pred"), ("f16", "bf16"), ("c64", "f32")]:
        bld = xm.XlaBuilder("t")
        x, y = bld.parameter(0, shape_of(a, (3,))), bld.parameter(1, shape_of(b, (3,)))
        s = bld.parameter(2, shape_of(b, ()))
        with pytest.raises(xm.ShapeError):
            bld.add(x, y)
        with pytest.raises(xm.ShapeError):
            bld.add(x, s)           # a scalar of another type is no exception
        with pytest.raises(xm.ShapeError):
            bld.compare(x, y, "EQ")


BINARY_METHODS = ["add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "complex"]


def test_broadcast_dimensions_on_every_binary_op() -> None:
    b = xm.XlaBuilder("t")
    m, v = b.parameter(0, shape_of("f32", (2, 3))), b.parameter(1, shape_of("f32", (3,)))
    for method in BINARY_METHODS:
        r = getattr(b, method)(m, v, broadcast_dimensions=(1,))
        assert r.shape.dimensions == (2, 3), method
    i, j = b.parameter(2, shape_of("u8", (2, 3))), b.parameter(3, shape_of("u8", (2,)))
    for method in ["and_", "or_", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical"]:
        assert getattr(b, method)(i, j, broadcast_dimensions=(0,)).shape.dimensions == (2, 3), method
    for method in ["eq", "ne", "lt", "le", "gt", "ge"]:
        r = getattr(b, method)(m, v, broadcast_dimensions=(1,))
        assert r.shape == shape_of("pred", (2, 3)), method
    assert b.compare(m, v, "LT", broadcast_dimensions=(1,)).shape == shape_of("pred", (2, 3))


def test_broadcast_compare_values() -> None:
    m, v = s32([[1, 5, 9], [2, 6, 8]]), s32([5, 6, 7])
    lt, ge = run(lambda b, m, v: [b.lt(m, v, broadcast_dimensions=(1,)),
                                  b.compare(v, m, "GE", broadcast_dimensions=(1,))], [m, v])
    np.testing.assert_array_equal(lt, m < v)
    np.testing.assert_array_equal(ge, v >= m)
    assert lt.dtype == np.bool_


def test_select_scalar_predicate() -> None:
    # seed 000/001: a scalar PRED picks one whole operand.
    t, f = s32([1, 2, 3]), s32([4, 5, 6])
    for p in (True, False):
        out = run_op("select", [np.array(p), t, f])
        np.testing.assert_array_equal(out, t if p else f)


def test_select_rejections() -> None:
    b = xm.XlaBuilder("t")
    p3, p2 = b.parameter(0, shape_of("pred", (3,))), b.parameter(1, shape_of("pred", (2,)))
    t, f = b.parameter(2, shape_of("f32", (3,))), b.parameter(3, shape_of("f32", (3,)))
    s, i = b.parameter(4, shape_of("s32", (3,))), b.parameter(5, shape_of("f64", (3,)))
    for args in [(p2, t, f), (s, t, f), (p3, t, i)]:
        with pytest.raises(xm.ShapeError):
            b.select(*args)


def test_clamp_scalar_bounds() -> None:
    # seed 001: Clamp(0, {-1, 5, 9}, 6) = {0, 5, 6}; min and max may be scalars.
    out = run_op("clamp", [s32(0), s32([-1, 5, 9]), s32(6)])
    np.testing.assert_array_equal(out, [0, 5, 6])
    out = run_op("clamp", [s32([0, 0, 0]), s32([-1, 5, 9]), s32(6)])
    np.testing.assert_array_equal(out, [0, 5, 6])


def test_clamp_rejections() -> None:
    b = xm.XlaBuilder("t")
    x = b.parameter(0, shape_of("f32", (3,)))
    lo2, hi = b.parameter(1, shape_of("f32", (2,))), b.parameter(2, shape_of("f32", ()))
    lo_f64 = b.parameter(3, shape_of("f64", ()))
    for args in [(lo2, x, hi), (hi, x, lo2), (lo_f64, x, hi)]:
        with pytest.raises(xm.ShapeError):
            b.clamp(*args)


_dim = st.integers(1, 3)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_degenerate_broadcast_matches_numpy(data) -> None:
    rank = data.draw(st.integers(0, 4))
    a = tuple(data.draw(st.lists(_dim, min_size=rank, max_size=rank)))
    b = tuple(d if data.draw(st.booleans()) else data.draw(_dim) for d in a)
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("f32", a)), bld.parameter(1, shape_of("f32", b))
    if expected is None:
        with pytest.raises(xm.ShapeError):
            bld.add(x, y)
    else:
        assert bld.add(x, y).shape.dimensions == expected


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_in_dim_broadcast_matches_numpy(data) -> None:
    # A lower-rank operand mapped by strictly increasing broadcast_dimensions behaves like
    # numpy after inserting size-1 dimensions at the unmapped positions.
    hi = tuple(data.draw(st.lists(_dim, min_size=1, max_size=4)))
    mapping = tuple(sorted(data.draw(st.sets(st.integers(0, len(hi) - 1), max_size=len(hi) - 1))))
    lo = tuple(hi[d] if data.draw(st.booleans()) else data.draw(_dim) for d in mapping)
    expanded = [1] * len(hi)
    for i, d in enumerate(mapping):
        expanded[d] = lo[i]
    try:
        expected = np.broadcast_shapes(tuple(expanded), hi)
    except ValueError:
        expected = None
    bld = xm.XlaBuilder("t")
    x, y = bld.parameter(0, shape_of("s32", lo)), bld.parameter(1, shape_of("s32", hi))
    for lhs, rhs in ((x, y), (y, x)):
        if expected is None:
            with pytest.raises(xm.ShapeError):
                bld.add(lhs, rhs, broadcast_dimensions=mapping)
        else:
            assert bld.add(lhs, rhs, broadcast_dimensions=mapping).shape.dimensions == expected


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
