"""Scalar semantics of every elementwise op, per element kind, as arith/math/complex ops.

These are the bodies of the `linalg.generic` ops that `lowering.elementwise`
builds. XLA's exact semantics live here: no operation that is undefined in
LLVM (division by zero, INT_MIN / -1, over-wide shifts, out-of-range float to
int conversion) is ever emitted without a guard. Imports `dialect`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from mlir import ir
from mlir.dialects import arith, math
from mlir.dialects import complex as cx

from ...dialect.element_types import PrimitiveType, dtype_of

P = PrimitiveType
F = arith.CmpFPredicate
I = arith.CmpIPredicate  # noqa: E741


class Elem:
    """An element type as the scalar code needs it."""

    def __init__(self, t: PrimitiveType) -> None:
        self.t = t
        self.type = scalar_type(t)

    @property
    def bits(self) -> int:
        return self.t.bit_width

    def const(self, value: int | float) -> ir.Value:
        if self.t.is_complex:
            part = Elem(self.t.complex_component)
            return cx.create_(self.type, part.const(value), part.const(0.0))
        if self.t.is_narrow_float:
            # The bits of the value rounded as XLA converts f32 (ml_dtypes does the same but
            # for NaN -> f4e2m1fn, -0 in XLA): f8e8m0fnu has no 0, so 0.0 is its NaN.
            # (MLIR's own constant conversion would make 0.0 its smallest value.)
            bits = int(np.array(value, np.float32).astype(dtype_of(self.t)).view(np.uint8))
            if self.t == P.F4E2M1FN and np.isnan(value):
                bits = 0x8
            signed = bits - (1 << self.bits) if bits >> (self.bits - 1) else bits  # signless attrs
            return arith.bitcast(self.type, arith.constant(ir.IntegerType.get_signless(self.bits), signed))
        return arith.constant(self.type, value)

    def int_min(self) -> int:
        return -(1 << (self.bits - 1))

    def int_max(self) -> int:
        return (1 << (self.bits - 1)) - 1


def scalar_type(t: PrimitiveType) -> ir.Type:
    return ir.Type.parse(t.mlir_name.replace("ui", "i"))


def is_small_float(t: PrimitiveType) -> bool:
    """F16, BF16 and the narrow floats (F8*, F4E2M1FN): computed in f32, rounded back."""
    return t in (P.F16, P.BF16) or t.is_narrow_float


def f32_compute(fn: Callable[..., ir.Value]) -> Callable[..., ir.Value]:
    """Run a float op in f32 for f16/bf16 (XLA does the same), then round back."""

    def wrapped(e: Elem, *xs: ir.Value) -> ir.Value:
        if not is_small_float(e.t):
            return fn(e, *xs)
        f32 = Elem(P.F32)
        wide = [arith.extf(f32.type, x) for x in xs]
        return arith.truncf(e.type, fn(f32, *wide))

    return wrapped


def _select_kind(e: Elem, *, pred=None, int_=None, float_=None, complex_=None) -> Callable:
    t = e.t
    if t == P.PRED and pred is not None:
        return pred
    if t.is_integral or t == P.PRED:
        return int_
    if t.is_floating:
        return float_
    return complex_


# -- unary ----------------------------------------------------------------------------------

def abs_(e: Elem, x: ir.Value) -> ir.Value:
    if e.t.is_complex:
        return cx.abs(x)
    if e.t.is_unsigned_int:
        return x
    if e.t.is_signed_int:
        neg = arith.subi(e.const(0), x)
        return arith.select(arith.cmpi(I.slt, x, e.const(0)), neg, x)
    return math.absf(x)


def negate(e: Elem, x: ir.Value) -> ir.Value:
    if e.t.is_complex:
        return cx.neg(x)
    if e.t.is_floating:
        return arith.negf(x)
    return arith.subi(e.const(0), x)


def sign(e: Elem, x: ir.Value) -> ir.Value:
    if e.t.is_complex:
        part = Elem(e.t.complex_component)
        magnitude = cx.abs(x)
        is_zero = arith.cmpf(F.OEQ, magnitude, part.const(0.0))
        safe = arith.select(is_zero, part.const(1.0), magnitude)
        scaled = cx.div(x, cx.create_(e.type, safe, part.const(0.0)))
        return arith.select(is_zero, x, scaled)
    if e.t.is_floating:
        one = math.copysign(e.const(1.0), x)
        keep = arith.ori(arith.cmpf(F.UNO, x, x), arith.cmpf(F.OEQ, x, e.const(0.0)))
        return arith.select(keep, x, one)
    if e.t.is_unsigned_int:
        return arith.extui(e.type, arith.cmpi(I.ne, x, e.const(0)))
    positive = arith.extui(e.type, arith.cmpi(I.sgt, x, e.const(0)))
    negative = arith.extui(e.type, arith.cmpi(I.slt, x, e.const(0)))
    return arith.subi(positive, negative)


def logistic(e: Elem, x: ir.Value) -> ir.Value:
    if e.t.is_complex:
        one = e.const(1.0)
        return cx.div(one, cx.add(one, cx.exp(cx.neg(x))))
    one = e.const(1.0)
    return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))


def not_(e: Elem, x: ir.Value) -> ir.Value:
    return arith.xori(x, e.const(-1 if e.t != P.PRED else 1))


def real(e: Elem, x: ir.Value) -> ir.Value:
    return cx.re(x) if e.t.is_complex else x


def imag(e: Elem, x: ir.Value) -> ir.Value:
    return cx.im(x) if e.t.is_complex else e.const(0.0)


def _float_or_complex(float_fn: Callable, complex_fn: Callable | None = None) -> Callable:
    def op(e: Elem, *xs: ir.Value) -> ir.Value:
        if e.t.is_complex:
            assert complex_fn is not None
            return complex_fn(*xs)
        return f32_compute(lambda _e, *ys: float_fn(*ys))(e, *xs)

    return op


def _expm1(x: ir.Value) -> ir.Value:
    """Kahan's expm1 from exp and log (LLVM lowers math.expm1 to exp(x) - 1, which
    loses everything near 0): (u - 1) * x / log(u) with u = exp(x)."""
    one = arith.constant(x.type, 1.0)
    u = math.exp(x)
    um1 = arith.subf(u, one)
    scaled = arith.mulf(um1, arith.divf(x, math.log(u)))  # divide first: no overflow
    exact = arith.ori(arith.cmpf(F.OEQ, u, one), arith.cmpf(F.OEQ, um1, arith.constant(x.type, -1.0)))
    result = arith.select(exact, arith.select(arith.cmpf(F.OEQ, u, one), x, um1), scaled)
    infinite = arith.cmpf(F.OEQ, u, arith.constant(x.type, float("inf")))
    return arith.select(infinite, u, result)


def _log1p(x: ir.Value) -> ir.Value:
    """Goldberg's log1p: log(u) * x / (u - 1) with u = 1 + x, exact where u == 1."""
    one = arith.constant(x.type, 1.0)
    u = arith.addf(one, x)
    scaled = arith.mulf(math.log(u), arith.divf(x, arith.subf(u, one)))  # divide first
    small = arith.cmpf(F.OEQ, u, one)
    infinite = arith.cmpf(F.OEQ, u, arith.constant(x.type, float("inf")))
    return arith.select(small, x, arith.select(infinite, u, scaled))


def _complex_cbrt(x: ir.Value) -> ir.Value:
    """The principal cube root, exp(log(x) / 3)."""
    part = ir.ComplexType(x.type).element_type
    third = cx.create_(x.type, arith.constant(part, 1.0 / 3.0), arith.constant(part, 0.0))
    return cx.exp(cx.mul(cx.log(x), third))


def _rsqrt_complex(x: ir.Value) -> ir.Value:
    return cx.rsqrt(x)


UNARY: dict[str, Callable[..., ir.Value]] = {
    "abs": abs_,
    "negate": negate,
    "sign": sign,
    "floor": _float_or_complex(math.floor),
    "ceil": _float_or_complex(math.ceil),
    "round_nearest_afz": _float_or_complex(math.round),
    "round_nearest_even": _float_or_complex(math.roundeven),
    "exponential": _float_or_complex(math.exp, cx.exp),
    "exponential_minus_one": _float_or_complex(lambda x: _expm1(x), cx.expm1),
    "log": _float_or_complex(math.log, cx.log),
    "log_plus_one": _float_or_complex(lambda x: _log1p(x), cx.log1p),
    "logistic": lambda e, x: logistic(e, x) if e.t.is_complex else f32_compute(logistic)(e, x),
    "sqrt": _float_or_complex(math.sqrt, cx.sqrt),
    "rsqrt": _float_or_complex(math.rsqrt, _rsqrt_complex),
    "cbrt": _float_or_complex(math.cbrt, lambda x: _complex_cbrt(x)),
    "sine": _float_or_complex(math.sin, cx.sin),
    "cosine": _float_or_complex(math.cos, cx.cos),
    "tan": _float_or_complex(math.tan, cx.tan),
    "tanh": _float_or_complex(math.tanh, cx.tanh),
    "cosh": _float_or_complex(math.cosh),
    "atan": _float_or_complex(math.atan),
    "erf": _float_or_complex(math.erf),
    "is_finite": lambda e, x: math.isfinite(x if not is_small_float(e.t)
                                             else arith.extf(Elem(P.F32).type, x)),
    "not": not_,
    "count_leading_zeros": lambda e, x: math.ctlz(x),
    "popcnt": lambda e, x: math.ctpop(x),
    "real": real,
    "imag": imag,
}


# -- binary ---------------------------------------------------------------------------------

def add(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    fn = _select_kind(e, pred=arith.ori, int_=arith.addi, float_=arith.addf, complex_=cx.add)
    return fn(x, y)


def subtract(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    fn = _select_kind(e, int_=arith.subi, float_=arith.subf, complex_=cx.sub)
    return fn(x, y)


def multiply(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    fn = _select_kind(e, pred=arith.andi, int_=arith.muli, float_=arith.mulf, complex_=cx.mul)
    return fn(x, y)


def divide(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.t.is_floating:
        return arith.divf(x, y)
    if e.t.is_complex:
        return cx.div(x, y)
    zero, one, all_ones = e.const(0), e.const(1), e.const(-1)
    y_is_zero = arith.cmpi(I.eq, y, zero)
    if e.t.is_unsigned_int:
        safe = arith.select(y_is_zero, one, y)
        return arith.select(y_is_zero, all_ones, arith.divui(x, safe))
    overflow = arith.andi(arith.cmpi(I.eq, x, e.const(e.int_min())), arith.cmpi(I.eq, y, all_ones))
    # x / 0 is -1 and INT_MIN / -1 is INT_MIN (XLA); dividing by 1 instead gives the latter.
    safe = arith.select(arith.ori(y_is_zero, overflow), one, y)
    return arith.select(y_is_zero, all_ones, arith.divsi(x, safe))


def remainder(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.t.is_floating:
        return f32_compute(lambda _e, a, b: arith.remf(a, b))(e, x, y)
    zero, one = e.const(0), e.const(1)
    y_is_zero = arith.cmpi(I.eq, y, zero)
    if e.t.is_unsigned_int:
        return arith.select(y_is_zero, x, arith.remui(x, arith.select(y_is_zero, one, y)))
    overflow = arith.andi(arith.cmpi(I.eq, x, e.const(e.int_min())),
                          arith.cmpi(I.eq, y, e.const(-1)))
    # x % 0 is x and INT_MIN % -1 is 0 (XLA); x % 1 gives the latter.
    safe = arith.select(arith.ori(y_is_zero, overflow), one, y)
    return arith.select(y_is_zero, x, arith.remsi(x, safe))


def _complex_lexicographic_less(x: ir.Value, y: ir.Value) -> ir.Value:
    xr, xi, yr, yi = cx.re(x), cx.im(x), cx.re(y), cx.im(y)
    real_less = arith.cmpf(F.OLT, xr, yr)
    real_equal = arith.cmpf(F.OEQ, xr, yr)
    return arith.ori(real_less, arith.andi(real_equal, arith.cmpf(F.OLT, xi, yi)))


def maximum(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.t == P.PRED:
        return arith.ori(x, y)
    if e.t.is_signed_int:
        return arith.maxsi(x, y)
    if e.t.is_unsigned_int:
        return arith.maxui(x, y)
    if e.t.is_floating:
        return float_extremum(e.t, x, y, maximum=True)
    return arith.select(_complex_lexicographic_less(x, y), y, x)


def minimum(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.t == P.PRED:
        return arith.andi(x, y)
    if e.t.is_signed_int:
        return arith.minsi(x, y)
    if e.t.is_unsigned_int:
        return arith.minui(x, y)
    if e.t.is_floating:
        return float_extremum(e.t, x, y, maximum=False)
    return arith.select(_complex_lexicographic_less(y, x), y, x)


def quiet_bit(t: PrimitiveType) -> int:
    """The bit that makes a NaN of `t` quiet (the mantissa's top bit), 0 where the type's
    NaNs are all one pattern already (FN: all ones; FNUZ, f8e8m0fnu) or it has none."""
    fmt = t.float_format
    return 1 << (fmt.mantissa_bits - 1) if fmt.nan == "ieee" else 0


def int_like(value: ir.Value, bits: int) -> ir.Type:
    """The signless integer type of `value`'s shape (scalar or vector) for bit casts."""
    int_type = ir.IntegerType.get_signless(bits)
    if isinstance(value.type, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(value.type).shape, int_type)
    return int_type


def int_splat(int_type: ir.Type, value: int) -> ir.Value:
    """An integer constant of `int_type`, splat when it is a vector type."""
    if isinstance(int_type, ir.VectorType):
        element = ir.IntegerAttr.get(ir.VectorType(int_type).element_type, value)
        return arith.constant(int_type, ir.DenseElementsAttr.get_splat(int_type, element))
    return arith.constant(int_type, value)


def float_extremum(t: PrimitiveType, x: ir.Value, y: ir.Value, *, maximum: bool) -> ir.Value:
    """max (or min) of floats `x`, `y` (scalars or vectors of `t`), the same bits on every
    target and in every code shape (docs/numerics.md, "NaN bits"):

    - -0 < +0 (LLVM's vectorized maximum gave -0.0 for max(+0.0, -0.0));
    - a NaN operand gives the *first* NaN operand (x if it is NaN, else y) with its quiet
      bit set, sign and payload kept. Chosen by selects, never by an arith op on both
      NaNs (`x + y`, `maximumf`): LLVM may commute those, and then the NaN depends on the
      register allocation (in vector code max(NaN 1, NaN 0) returned the second).
    """
    int_type = int_like(x, t.bit_width)
    wins, join_zeros = (F.OGT, arith.andi) if maximum else (F.OLT, arith.ori)
    # The float values only compare; the result is selected among their bits. (LLVM keeps
    # f16/bf16 values in f32 registers, and rounding a select of those back to bf16 on
    # x86-64-v2 replaced a NaN by the canonical one.)
    xi, yi = arith.bitcast(int_type, x), arith.bitcast(int_type, y)
    bit = quiet_bit(t)
    if bit:
        quiet = int_splat(int_type, bit)
        xi_quiet, yi_quiet = arith.ori(xi, quiet), arith.ori(yi, quiet)
    else:
        xi_quiet, yi_quiet = xi, yi
    first_nan = arith.select(arith.cmpf(F.UNO, x, x), xi_quiet, yi_quiet)
    larger = arith.select(arith.cmpf(wins, x, y), xi, yi)
    unequal = arith.select(arith.cmpf(F.UNO, x, y), first_nan, larger)
    # Equal values: the bits are equal too, except for +-0, where and/or of the bits
    # picks +0 (max) or -0 (min). The shape is for speed: every path is a compare and
    # three selects, as in the old `x + y` form (a reduction's accumulator chain no
    # deeper), the quiet bits are set off the chain, and UNE, UNO and OGT/OLT are single
    # SSE compares (UEQ is two). Reduce max f32[4M] measured 1.0x the old form on
    # x86-64-v2/v3/v4; with the NaN select after the ordered ones, 1.35x on v3.
    return arith.bitcast(x.type, arith.select(arith.cmpf(F.UNE, x, y), unequal, join_zeros(xi, yi)))


def power(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.t.is_floating:
        return f32_compute(lambda _e, a, b: math.powf(a, b))(e, x, y)
    if e.t.is_complex:
        return cx.pow(x, y)
    return _integer_power(e, x, y)


def _integer_power(e: Elem, base: ir.Value, exponent: ir.Value) -> ir.Value:
    """Exponentiation by squaring over every bit of the exponent, unrolled (wraps like XLA).

    A negative signed exponent gives 0, except 1 for base 1 and +-1 for base -1.
    """
    one = e.const(1)
    result = one
    b = base
    rest = exponent
    for _ in range(e.bits):
        odd = arith.trunci(ir.IntegerType.get_signless(1), rest)
        result = arith.select(odd, arith.muli(result, b), result)
        b = arith.muli(b, b)
        rest = arith.shrui(rest, one)
    if not e.t.is_signed_int:
        return result
    minus_one = e.const(-1)
    odd_exponent = arith.trunci(ir.IntegerType.get_signless(1), exponent)
    base_minus_one = arith.select(odd_exponent, minus_one, one)
    negative_result = arith.select(
        arith.cmpi(I.eq, base, one), one,
        arith.select(arith.cmpi(I.eq, base, minus_one), base_minus_one, e.const(0)))
    return arith.select(arith.cmpi(I.slt, exponent, e.const(0)), negative_result, result)


def _shift(kind: str) -> Callable[..., ir.Value]:
    def op(e: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
        width = e.const(e.bits)
        too_far = arith.cmpi(I.uge, y, width)  # negative amounts are huge unsigned ones
        safe = arith.select(too_far, e.const(0), y)
        if kind == "left":
            return arith.select(too_far, e.const(0), arith.shli(x, safe))
        if kind == "logical":
            return arith.select(too_far, e.const(0), arith.shrui(x, safe))
        fill = arith.shrsi(x, e.const(e.bits - 1))
        return arith.select(too_far, fill, arith.shrsi(x, safe))

    return op


def _atan2(e: Elem, y: ir.Value, x: ir.Value) -> ir.Value:
    """math.atan2, with atan2(+-0, +0) = +-0 and atan2(+-0, -0) = +-pi chosen explicitly:
    MLIR folds math.atan2 of two constant zeros to NaN (the differential fuzzer found
    atan2 of zero constants returning NaN while the same values as parameters did not)."""
    zero, one = e.const(0.0), e.const(1.0)
    both_zero = arith.andi(arith.cmpf(arith.CmpFPredicate.OEQ, y, zero),
                           arith.cmpf(arith.CmpFPredicate.OEQ, x, zero))
    x_negative = arith.cmpf(arith.CmpFPredicate.OLT, math.copysign(one, x), zero)
    on_axis = math.copysign(arith.select(x_negative, e.const(3.141592653589793), zero), y)
    return arith.select(both_zero, on_axis, math.atan2(y, x))


BINARY: dict[str, Callable[..., ir.Value]] = {
    "add": add,
    "subtract": subtract,
    "multiply": multiply,
    "divide": divide,
    "remainder": remainder,
    "maximum": maximum,
    "minimum": minimum,
    "power": power,
    "atan2": f32_compute(lambda e, y, x: _atan2(e, y, x)),
    "and": lambda e, x, y: arith.andi(x, y),
    "or": lambda e, x, y: arith.ori(x, y),
    "xor": lambda e, x, y: arith.xori(x, y),
    "shift_left": _shift("left"),
    "shift_right_arithmetic": _shift("arithmetic"),
    "shift_right_logical": _shift("logical"),
}


def complex_create(out: Elem, x: ir.Value, y: ir.Value) -> ir.Value:
    return cx.create_(out.type, x, y)


# -- compare --------------------------------------------------------------------------------

_FLOAT_PREDICATES = {"EQ": F.OEQ, "NE": F.UNE, "LT": F.OLT, "LE": F.OLE, "GT": F.OGT, "GE": F.OGE}
_SIGNED_PREDICATES = {"EQ": I.eq, "NE": I.ne, "LT": I.slt, "LE": I.sle, "GT": I.sgt, "GE": I.sge}
_UNSIGNED_PREDICATES = {"EQ": I.eq, "NE": I.ne, "LT": I.ult, "LE": I.ule, "GT": I.ugt, "GE": I.uge}


def total_order_key(e: Elem, x: ir.Value) -> ir.Value:
    """A signed integer ordering floats as XLA's total order: -NaN < -inf < ... < -0 < +0 < ... < NaN."""
    int_type = ir.IntegerType.get_signless(e.bits)
    bits = arith.bitcast(int_type, x)
    if not e.t.float_format.signed:  # F8E8M0FNU: no sign bit, the bits order the values
        return arith.extui(ir.IntegerType.get_signless(2 * e.bits), bits)
    magnitude_mask = arith.constant(int_type, (1 << (e.bits - 1)) - 1)
    flipped = arith.xori(bits, magnitude_mask)
    negative = arith.cmpi(I.slt, bits, arith.constant(int_type, 0))
    return arith.select(negative, flipped, bits)


def compare(e: Elem, x: ir.Value, y: ir.Value, direction: str, compare_type: str) -> ir.Value:
    if e.t.is_complex:
        real_cmp = arith.cmpf(F.OEQ, cx.re(x), cx.re(y))
        imag_cmp = arith.cmpf(F.OEQ, cx.im(x), cx.im(y))
        equal = arith.andi(real_cmp, imag_cmp)
        if direction == "EQ":
            return equal
        return arith.xori(equal, arith.constant(ir.IntegerType.get_signless(1), 1))
    if compare_type == "TOTALORDER":
        return arith.cmpi(_SIGNED_PREDICATES[direction], total_order_key(e, x), total_order_key(e, y))
    if e.t.is_floating:
        return arith.cmpf(_FLOAT_PREDICATES[direction], x, y)
    table = _SIGNED_PREDICATES if compare_type == "SIGNED" else _UNSIGNED_PREDICATES
    return arith.cmpi(table[direction], x, y)


# -- select and clamp -----------------------------------------------------------------------

def clamp(e: Elem, lo: ir.Value, x: ir.Value, hi: ir.Value) -> ir.Value:
    return minimum(e, maximum(e, x, lo), hi)
