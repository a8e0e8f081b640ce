"""Scalar element type conversion and reduce_precision, with XLA:CPU's exact results.

float -> int truncates toward zero and saturates to the target's range, NaN
gives 0 (XLA:CPU); anything -> pred is `x != 0`; complex -> real keeps the
real part. Imports `dialect` and `lowering.scalar`.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import complex as cx

from ...dialect.element_types import PrimitiveType
from .arithmetic import Elem, F, I, is_small_float

P = PrimitiveType


def convert(src: Elem, dst: Elem, x: ir.Value) -> ir.Value:
    if src.t == dst.t:
        return x
    if src.t.is_complex:
        if dst.t.is_complex:
            part_src, part_dst = Elem(src.t.complex_component), Elem(dst.t.complex_component)
            re = convert(part_src, part_dst, cx.re(x))
            im = convert(part_src, part_dst, cx.im(x))
            return cx.create_(dst.type, re, im)
        if dst.t == P.PRED:
            part = Elem(src.t.complex_component)
            nonzero_re = arith.cmpf(F.UNE, cx.re(x), part.const(0.0))
            nonzero_im = arith.cmpf(F.UNE, cx.im(x), part.const(0.0))
            return arith.ori(nonzero_re, nonzero_im)
        return convert(Elem(src.t.complex_component), dst, cx.re(x))
    if dst.t.is_complex:
        part = Elem(dst.t.complex_component)
        return cx.create_(dst.type, convert(src, part, x), part.const(0.0))
    if dst.t == P.PRED:
        if src.t.is_floating:
            return arith.cmpf(F.UNE, x, src.const(0.0))
        return arith.cmpi(I.ne, x, src.const(0))
    if src.t == P.PRED:
        if dst.t.is_floating:
            return arith.uitofp(dst.type, x)
        return arith.extui(dst.type, x)
    if src.t.is_floating and dst.t.is_floating:
        return _float_to_float(src, dst, x)
    if src.t.is_floating:
        return _float_to_int(src, dst, x)
    if dst.t.is_floating:
        if is_small_float(dst.t):
            # XLA: integers reach f16 and the narrow floats through f32, bf16 through f64
            # from 64-bit integers.
            wide = Elem(P.F32 if dst.t != P.BF16 or src.bits <= 32 else P.F64)
            return _float_to_float(wide, dst, convert(src, wide, x))
        to_float = arith.sitofp if src.t.is_signed_int else arith.uitofp
        return to_float(dst.type, x)
    return _int_to_int(src, dst, x)


def _float_to_float(src: Elem, dst: Elem, x: ir.Value) -> ir.Value:
    wide = (P.F32, P.F64)
    if is_small_float(src.t) and is_small_float(dst.t):
        # Between two small types through f32 (exact from the source), one rounding.
        out = arith.truncf(dst.type, arith.extf(Elem(P.F32).type, x))
        if src.t in (P.F16, P.BF16) and dst.t == P.F8E5M2:
            # XLA converts f16/bf16 to f8e5m2 (a truncated f16) giving 0x7F for every NaN.
            nan = arith.bitcast(dst.type, arith.constant(ir.IntegerType.get_signless(8), 0x7F))
            out = arith.select(arith.cmpf(F.UNO, x, x), nan, out)
        return out
    if src.t.is_narrow_float or dst.t.is_narrow_float:
        # f32/f64 <-> narrow: one rounding (f64 directly, not through f32: XLA).
        return arith.extf(dst.type, x) if dst.t in wide else arith.truncf(dst.type, x)
    if src.bits < dst.bits:
        return arith.extf(dst.type, x)
    return arith.truncf(dst.type, x)


def _int_to_int(src: Elem, dst: Elem, x: ir.Value) -> ir.Value:
    if src.bits == dst.bits:
        return x
    if src.bits > dst.bits:
        return arith.trunci(dst.type, x)
    extend = arith.extsi if src.t.is_signed_int else arith.extui
    return extend(dst.type, x)


def _float_to_int(src: Elem, dst: Elem, x: ir.Value) -> ir.Value:
    if is_small_float(src.t):
        src, x = Elem(P.F32), arith.extf(Elem(P.F32).type, x)
    if dst.t.is_signed_int:
        lo, hi = dst.int_min(), dst.int_max()
        lo_float, hi_float = float(lo), float(1 << (dst.bits - 1))
    else:
        lo, hi = 0, (1 << dst.bits) - 1
        lo_float, hi_float = 0.0, float(1 << dst.bits)
    # Both bounds are powers of two, exact in every float type.
    too_low = arith.cmpf(F.OLE, x, src.const(lo_float))
    too_high = arith.cmpf(F.OGE, x, src.const(hi_float))
    is_nan = arith.cmpf(F.UNO, x, x)
    in_range = arith.select(arith.ori(arith.ori(too_low, too_high), is_nan), src.const(0.0), x)
    to_int = arith.fptosi if dst.t.is_signed_int else arith.fptoui
    value = to_int(dst.type, in_range)
    value = arith.select(too_low, arith.constant(dst.type, as_signed(lo, dst.bits)), value)
    return arith.select(too_high, arith.constant(dst.type, as_signed(hi, dst.bits)), value)


def as_signed(value: int, bits: int) -> int:
    """An unsigned value as the signed integer of the same bits (arith constants are signless)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


_FORMATS = {  # (exponent bits, mantissa bits) of each float type's own format
    PrimitiveType.F16: (5, 10), PrimitiveType.BF16: (8, 7),
    PrimitiveType.F32: (8, 23), PrimitiveType.F64: (11, 52),
}


def reduce_precision(e: Elem, x: ir.Value, exponent_bits: int, mantissa_bits: int) -> ir.Value:
    """XLA's ReducePrecision: round the mantissa to nearest even, then clamp the
    exponent (too large -> inf, too small -> signed zero).

    Mirrors XLA:CPU's elemental emitter: f16/bf16 are computed on f32 bits and
    rounded back, with the exponent step only when `exponent_bits` is below the
    type's own (so f16 with (5, 10) is the identity, subnormals kept). NaN stays
    NaN, except with 0 mantissa bits, where NaN is not representable and becomes inf.
    """
    if e.t.is_narrow_float:
        f = e.t.float_format
        if exponent_bits >= f.exponent_bits and mantissa_bits >= f.mantissa_bits:
            return x  # nothing to reduce
        # XLA computes f8e5m2 (a truncated f16) as f16, the other narrow floats as f32.
        via = Elem(P.F16 if e.t == P.F8E5M2 else P.F32)
        wide = reduce_precision(via, _float_to_float(e, via, x), exponent_bits, mantissa_bits)
        return _float_to_float(via, e, wide)
    if is_small_float(e.t):
        own_exponent = _FORMATS[e.t][0]
        f32 = Elem(P.F32)
        wide = _reduce_precision_bits(f32, arith.extf(f32.type, x), exponent_bits, mantissa_bits,
                                      exponent_bits < own_exponent)
        return arith.truncf(e.type, wide)
    return _reduce_precision_bits(e, x, exponent_bits, mantissa_bits, True)


def _reduce_precision_bits(e: Elem, x: ir.Value, exponent_bits: int, mantissa_bits: int,
                           reduce_exponent: bool) -> ir.Value:
    src_exponent, src_mantissa = _FORMATS[e.t]
    bits = e.bits
    int_type = ir.IntegerType.get_signless(bits)

    def c(v: int) -> ir.Value:
        return arith.constant(int_type, as_signed(v, bits))

    x_bits = arith.bitcast(int_type, x)
    result = x_bits
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_mantissa_bit_mask = c(1 << shift)
        base_rounding_bias = c((1 << (shift - 1)) - 1)
        x_last_mantissa_bit = arith.shrui(arith.andi(result, last_mantissa_bit_mask), c(shift))
        rounding_bias = arith.addi(x_last_mantissa_bit, base_rounding_bias)
        truncation_mask = c(~((1 << shift) - 1))
        result = arith.andi(arith.addi(result, rounding_bias), truncation_mask)
    if reduce_exponent and exponent_bits < src_exponent:
        sign_bit_mask = c(1 << (bits - 1))
        exp_bits_mask = c(((1 << src_exponent) - 1) << src_mantissa)
        exponent_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        reduced_max_exponent = exponent_bias + reduced_bias
        reduced_min_exponent = exponent_bias - reduced_bias
        x_exponent = arith.andi(result, exp_bits_mask)
        overflow = arith.cmpi(I.ugt, x_exponent, c(reduced_max_exponent << src_mantissa))
        underflow = arith.cmpi(I.ule, x_exponent, c(reduced_min_exponent << src_mantissa))
        x_signed_zero = arith.andi(result, sign_bit_mask)
        x_signed_inf = arith.ori(x_signed_zero, exp_bits_mask)
        result = arith.select(overflow, x_signed_inf, arith.select(underflow, x_signed_zero, result))
    out = arith.bitcast(e.type, result)
    if mantissa_bits < src_mantissa or exponent_bits < src_exponent:
        is_nan = arith.cmpf(F.UNO, x, x)
        if mantissa_bits > 0:
            out = arith.select(is_nan, x, out)
        else:
            # The rounding carry may have run into the sign; NaN becomes +inf (XLA).
            infinity = arith.bitcast(e.type, c(((1 << src_exponent) - 1) << src_mantissa))
            out = arith.select(is_nan, infinity, out)
    return out
