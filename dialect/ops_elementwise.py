"""Elementwise ops: unary, binary, compare, select, clamp and type conversions.

Shape rules at the dialect level see operands that already have equal shapes;
XLA's implicit broadcasting is builder sugar (`builder.broadcasting`). Each op
accepts the element kinds XLA accepts and rejects the rest with a ShapeError.
Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from typing import Any

from .element_types import PrimitiveType, type_of
from .errors import ShapeError
from .registry import ELEMENT_TYPE, INT, STR, OpDef, Operand, define
from .shape import Shape

P = PrimitiveType
PRED_ = frozenset({P.PRED})
SINT = frozenset(t for t in P if t.is_signed_int)  # s2, s4 too: computed in their own width
UINT = frozenset(t for t in P if t.is_unsigned_int)
INT_ = SINT | UINT
FLOAT = frozenset(t for t in P if t.is_floating)  # the narrow floats too: computed in f32
COMPLEX = frozenset({P.C64, P.C128})
REAL = INT_ | FLOAT
NUMERIC = INT_ | FLOAT | COMPLEX
INEXACT = FLOAT | COMPLEX
BITWISE = PRED_ | INT_
ALL = PRED_ | NUMERIC

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _require_array(op: str, shapes: list[Shape]) -> None:
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")


def _check_kinds(op: str, shapes: list[Shape], kinds: frozenset) -> None:
    for s in shapes:
        if s.element_type not in kinds:
            allowed = " ".join(sorted(t.text_name for t in kinds))
            raise ShapeError(op, shapes, f"element type {s.element_type} is not one of: {allowed}")


def _same_shapes(op: str, shapes: list[Shape], shown: list[Shape] | None = None) -> None:
    first = shapes[0]
    for s in shapes[1:]:
        if s.dimensions != first.dimensions:
            raise ShapeError(op, shown or shapes, "operands must have the same dimensions")
        if s.element_type != first.element_type:
            raise ShapeError(op, shown or shapes, "operands must have the same element type")


def unary(name: str, kinds: frozenset, builders: tuple[str, ...] = (), result: str = "same") -> None:
    """An op of one operand; `result` is "same", "pred" or "component" (complex -> real)."""

    def infer(x: Shape) -> Shape:
        _require_array(name, [x])
        _check_kinds(name, [x], kinds)
        if result == "pred":
            return x.with_element_type(P.PRED)
        if result == "component":
            return x.with_element_type(x.element_type.complex_component)
        return x.with_dims(x.dimensions)

    define(OpDef(name, (Operand("operand"),), {}, infer, doc=f"Elementwise {name} (spec#{name}).",
                 builders={b: {} for b in (builders or (name,))}, family="unary"))


def binary(name: str, kinds: frozenset, builders: tuple[str, ...] = ()) -> None:
    """An op of two operands of equal shape and type, with a result of that shape and type."""

    def infer(lhs: Shape, rhs: Shape) -> Shape:
        _require_array(name, [lhs, rhs])
        _same_shapes(name, [lhs, rhs])
        _check_kinds(name, [lhs], kinds)
        return lhs.with_dims(lhs.dimensions)

    define(OpDef(name, (Operand("lhs"), Operand("rhs")), {}, infer,
                 doc=f"Elementwise {name} (spec#{name}).",
                 builders={b: {} for b in (builders or (name,))}, family="binary"))


def default_comparison_type(t: PrimitiveType) -> str:
    if t in SINT:
        return "SIGNED"
    if t in UINT or t == P.PRED:
        return "UNSIGNED"
    return "FLOAT"


def infer_compare(lhs: Shape, rhs: Shape, *, comparison_direction: str, compare_type: str) -> Shape:
    _require_array("compare", [lhs, rhs])
    _same_shapes("compare", [lhs, rhs])
    if comparison_direction not in COMPARISON_DIRECTIONS:
        raise ShapeError("compare", [lhs, rhs], f"unknown direction {comparison_direction!r}")
    t = lhs.element_type
    allowed = {
        "FLOAT": FLOAT | COMPLEX,
        "TOTALORDER": FLOAT,
        "SIGNED": SINT,
        "UNSIGNED": UINT | PRED_,
    }.get(compare_type)
    if allowed is None:
        raise ShapeError("compare", [lhs, rhs], f"unknown comparison type {compare_type!r}")
    if t not in allowed:
        raise ShapeError("compare", [lhs, rhs], f"comparison type {compare_type} does not apply to {t}")
    if t in COMPLEX and comparison_direction not in ("EQ", "NE"):
        raise ShapeError("compare", [lhs, rhs], "complex numbers only compare with EQ or NE")
    return lhs.with_element_type(P.PRED)


def infer_select(pred: Shape, on_true: Shape, on_false: Shape) -> Shape:
    shapes = [pred, on_true, on_false]
    _require_array("select", shapes)
    if pred.element_type != P.PRED:
        raise ShapeError("select", shapes, "the predicate must have element type pred")
    _same_shapes("select", [on_true, on_false], shapes)
    if pred.rank != 0 and pred.dimensions != on_true.dimensions:
        raise ShapeError("select", shapes, "the predicate must be a scalar or have the operands' dimensions")
    return on_true.with_dims(on_true.dimensions)


def infer_clamp(lo: Shape, x: Shape, hi: Shape) -> Shape:
    shapes = [lo, x, hi]
    _require_array("clamp", shapes)
    if x.element_type not in REAL:
        raise ShapeError("clamp", shapes, f"element type {x.element_type} cannot be clamped")
    for bound in (lo, hi):
        if bound.element_type != x.element_type:
            raise ShapeError("clamp", shapes, "min, operand and max must have the same element type")
        if bound.rank != 0 and bound.dimensions != x.dimensions:
            raise ShapeError("clamp", shapes, "min and max must be scalars or have the operand's dimensions")
    return x.with_dims(x.dimensions)


def infer_convert(x: Shape, *, new_element_type: Any) -> Shape:
    _require_array("convert", [x])
    return x.with_element_type(type_of(new_element_type))


def infer_bitcast_convert(x: Shape, *, new_element_type: Any) -> Shape:
    _require_array("bitcast_convert", [x])
    new = type_of(new_element_type)
    old = x.element_type
    for t in (old, new):
        if t == P.PRED:
            raise ShapeError("bitcast_convert", [x], "pred has no bit representation to reinterpret")
    old_bits, new_bits = old.bit_width, new.bit_width
    if (old in COMPLEX or new in COMPLEX) and old != new:
        raise ShapeError("bitcast_convert", [x], "a complex type only bitcasts to itself")
    if old_bits == new_bits:
        return x.with_element_type(new)
    if old_bits > new_bits:
        return Shape.array(new, x.dimensions + (old_bits // new_bits,))
    ratio = new_bits // old_bits
    if x.rank == 0 or x.dimensions[-1] != ratio:
        raise ShapeError("bitcast_convert", [x],
                         f"to a {ratio}x wider type the last dimension must be {ratio}")
    return Shape.array(new, x.dimensions[:-1])


def infer_reduce_precision(x: Shape, *, exponent_bits: int, mantissa_bits: int) -> Shape:
    _require_array("reduce_precision", [x])
    _check_kinds("reduce_precision", [x], FLOAT)
    if exponent_bits < 1:
        raise ShapeError("reduce_precision", [x], f"exponent_bits must be >= 1, got {exponent_bits}")
    if mantissa_bits < 0:
        raise ShapeError("reduce_precision", [x], f"mantissa_bits must be >= 0, got {mantissa_bits}")
    return x.with_dims(x.dimensions)


def infer_complex(lhs: Shape, rhs: Shape) -> Shape:
    _require_array("complex", [lhs, rhs])
    _same_shapes("complex", [lhs, rhs])
    _check_kinds("complex", [lhs], frozenset({P.F32, P.F64}))
    return lhs.with_element_type(P.C64 if lhs.element_type == P.F32 else P.C128)


# Unary ops.
unary("abs", SINT | FLOAT | COMPLEX, result="component")  # StableHLO: no unsigned abs
unary("negate", NUMERIC, ("neg",))
unary("sign", NUMERIC)
unary("floor", FLOAT)
unary("ceil", FLOAT)
unary("round_nearest_afz", FLOAT, ("round", "round_nearest_afz"))
unary("round_nearest_even", FLOAT)
unary("exponential", INEXACT, ("exp",))
unary("exponential_minus_one", INEXACT, ("expm1",))
unary("log", INEXACT)
unary("log_plus_one", INEXACT, ("log1p",))
unary("logistic", INEXACT)
unary("sqrt", INEXACT)
unary("rsqrt", INEXACT)
unary("cbrt", INEXACT)
unary("sine", INEXACT, ("sin",))
unary("cosine", INEXACT, ("cos",))
unary("tan", INEXACT)
unary("tanh", INEXACT)
unary("cosh", FLOAT)
unary("atan", FLOAT)
unary("erf", FLOAT)
unary("is_finite", FLOAT, result="pred")
unary("not", BITWISE, ("not_",))
unary("count_leading_zeros", INT_, ("clz",))
unary("popcnt", INT_, ("population_count",))
unary("real", NUMERIC - INT_, result="component")
unary("imag", NUMERIC - INT_, result="component")

# Binary ops.
binary("add", ALL)
binary("subtract", NUMERIC, ("sub",))
binary("multiply", ALL, ("mul",))
binary("divide", NUMERIC, ("div",))
binary("remainder", REAL, ("rem",))
binary("maximum", PRED_ | REAL, ("max",))  # XLA:CPU has no complex max/min
binary("minimum", PRED_ | REAL, ("min",))
binary("power", NUMERIC, ("pow",))
binary("atan2", FLOAT)
binary("and", BITWISE, ("and_",))
binary("or", BITWISE, ("or_",))
binary("xor", BITWISE)
binary("shift_left", INT_)
binary("shift_right_arithmetic", INT_)
binary("shift_right_logical", INT_)
define(OpDef("complex", (Operand("lhs"), Operand("rhs")), {}, infer_complex,
             doc="Complex number from real and imaginary parts (spec#complex).",
             builders={"complex": {}}, family="binary"))

define(OpDef("compare", (Operand("lhs"), Operand("rhs")),
             {"comparison_direction": STR, "compare_type": STR}, infer_compare,
             doc="Elementwise comparison (spec#compare).", family="compare",
             builders={"compare": {}, **{d.lower(): {"comparison_direction": d}
                                         for d in COMPARISON_DIRECTIONS}}))
define(OpDef("select", (Operand("pred"), Operand("on_true"), Operand("on_false")), {},
             infer_select, doc="Elementwise choice by a predicate (spec#select)."))
define(OpDef("clamp", (Operand("min"), Operand("operand"), Operand("max")), {}, infer_clamp,
             doc="min(max(operand, min), max) (spec#clamp)."))
define(OpDef("convert", (Operand("operand"),), {"new_element_type": ELEMENT_TYPE}, infer_convert,
             doc="Element type conversion (spec#convert).",
             builders={"convert_element_type": {}}))
define(OpDef("bitcast_convert", (Operand("operand"),), {"new_element_type": ELEMENT_TYPE},
             infer_bitcast_convert, doc="Reinterpret the bits (spec#bitcast_convert).",
             builders={"bitcast_convert_type": {}}))
define(OpDef("reduce_precision", (Operand("operand"),),
             {"exponent_bits": INT, "mantissa_bits": INT}, infer_reduce_precision,
             doc="Round to a narrower float format (spec#reduce_precision).",
             builders={"reduce_precision": {}}))
