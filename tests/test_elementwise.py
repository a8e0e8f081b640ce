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

This file holds the unary/binary op table, compare, select and clamp; the other families
are in test_elementwise_types.py (convert, bitcast_convert, reduce_precision, shapes),
test_elementwise_api.py (overloads, call-time arguments) and test_elementwise_broadcast.py;
the shared helpers in elementwise_support.py.

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
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm

try:
    from . import reference as ref
except ImportError:  # tests/ is not a package: import the sibling module directly
    sys.path.insert(0, os.path.dirname(__file__))
    import reference as ref

from elementwise_support import (
    ALL,
    COMPLEX,
    DIRECTIONS,
    FLOATS,
    INEXACT,
    INTS,
    PRED,
    SINT,
    UINT,
    N,
    _keys,
    check,
    cross,
    expect_shape_error,
    int_pow_inputs,
    moderate_complex,
    run,
    run_op,
    seed_of,
    shift_inputs,
    tolerance,
)

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


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_atan2_of_signed_zeros_as_constants_and_parameters(dtype) -> None:
    """atan2(+-0, +0) = +-0 and atan2(+-0, -0) = +-pi (IEEE, numpy), also when both are
    constants: MLIR folded math.atan2 of two constant zeros to NaN."""
    t = xm.type_of(np.dtype(dtype))
    for y in (0.0, -0.0):
        for x in (0.0, -0.0, 1.0, -1.0):
            wide = np.float64 if dtype == np.float64 else np.float32  # f16/bf16 computed in f32
            expected = np.arctan2(wide(y), wide(x)).astype(dtype)
            b = xm.XlaBuilder("atan2_constants")
            b.atan2(b.constant(dtype(y)), b.constant(dtype(x)))
            b2 = xm.XlaBuilder("atan2_parameters")
            b2.atan2(b2.parameter(0, xm.Shape.array(t, ())), b2.parameter(1, xm.Shape.array(t, ())))
            for got in (xm.compile(b.build())(), xm.compile(b2.build())(dtype(y), dtype(x))):
                assert got.tobytes() == np.asarray(expected).tobytes(), (y, x, got, expected)
