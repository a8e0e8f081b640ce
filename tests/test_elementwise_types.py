"""Elementwise tests of type changes and operand shapes: convert, bitcast_convert,
reduce_precision, and every op on empty, rank-0 and rank-2/3 operands (tests/reference.py
is the reference; helpers in tests/elementwise_support.py).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

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
    N,
    check,
    check_bits,
    expect_shape_error,
    run,
    run_op,
    seed_of,
    tolerance,
    xtype,
)

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
