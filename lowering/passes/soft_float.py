"""f16/bf16 and narrow-float conversions in integer arithmetic: the same bits on every CPU.

After `arith-emulate-unsupported-floats` and `math-extend-to-supported-types`
every f16/bf16 computation is an f32 one between `arith.extf` and
`arith.truncf`. Left to LLVM, those conversions become whatever the target has:
`vcvtneps2bf16` (AVX512-BF16: flushes subnormals to zero), `vcvtps2ph` (F16C),
native f16 arithmetic (AVX512-FP16) or libcalls. This pass rewrites them into
integer operations (scalar or vector), so the results are fixed by this code:

- rounding to nearest even, subnormals kept (IEEE; XLA:CPU flushes them), overflow
  to infinity;
- narrowing, a NaN keeps its sign and leading payload bits and becomes quiet
  (as the hardware conversions do); widening is exact, payload included (as
  numpy and ml_dtypes);
- f64 -> bf16 rounds through f32 (XLA's and ml_dtypes' double rounding); f64 ->
  f16 rounds once (via round-to-odd f32, as numpy); integers go through f32 (or
  f64 for 64-bit integers into bf16), as `lowering.convert` spells them.

The narrow floats (f8E5M2, f8E4M3FN, f8E4M3B11FNUZ, f8E5M2FNUZ, f8E4M3FNUZ,
f8E4M3, f8E3M4, f4E2M1FN, f8E8M0FNU) have no instructions at all: every
conversion from or to one is generated here from its `FloatFormat` (exponent and
mantissa bits, bias, infinities, where NaN lives, signedness), as XLA:CPU
converts (checked against it and ml_dtypes on every bit pattern):

- f32 -> narrow: round to nearest even (F8E8M0FNU, without mantissa bits, rounds
  a tie up, to the larger power of two), subnormals kept; overflow gives inf
  (IEEE-like types), NaN (FN, FNUZ, F8E8M0FNU) or the largest finite value
  (F4E2M1FN, which has neither); NaN gives the type's quiet NaN with the sign
  (FN: all ones; FNUZ: 0x80; F4E2M1FN: -0, as XLA); FNUZ rounds -0 to +0;
  F8E8M0FNU (unsigned, no zero) gives NaN for zero and negative values, its
  smallest value 2^-127 for anything positive up to it, and 2^-126 for the f32
  subnormals above 2^-127 (XLA and ml_dtypes); from f64, NaN below 2^-127 (XLA).
  f64 rounds once (through round-to-odd f32), f16/bf16 and integers go through
  f32 (XLA).
- narrow -> f32: exact; a NaN becomes the quiet NaN with its sign (FNUZ, E8M0:
  +NaN), payloads dropped (XLA).

The only float instructions used are ones with one IEEE result on every x86-64
(SSE2 and up): f32 <-> f64 conversions, and an f32 addition or multiplication
that is exact or rounds once. Imports `dialect` (the formats).
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, math

from ...dialect.element_types import MLIR_ELEMENT_TYPES, FloatFormat

_EXTF, _TRUNCF = "arith.extf", "arith.truncf"
_TO_FLOAT = ("arith.sitofp", "arith.uitofp")
_FROM_FLOAT = ("arith.fptosi", "arith.fptoui")


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _like(t: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it shaped as `t`."""
    return ir.VectorType.get(ir.VectorType(t).shape, element) if isinstance(t, ir.VectorType) else element


# MLIR type text -> format of every narrow float ("f8E5M2" -> FloatFormat(5, 2, 15, ...)).
_NARROW = {name: t.float_format for name, t in MLIR_ELEMENT_TYPES.items() if t.is_narrow_float}


def _kind(t: ir.Type) -> str | None:
    e = _element(t)
    if isinstance(e, ir.BF16Type):
        return "bf16"
    if isinstance(e, ir.F16Type):
        return "f16"
    if str(e) in _NARROW:
        return str(e)
    return None


class _Ints:
    """Integer constants and ops of one width, shaped like a given (vector) type."""

    def __init__(self, shaped_as: ir.Type, bits: int) -> None:
        self.t = _like(shaped_as, ir.IntegerType.get_signless(bits))
        self.bits = bits

    def c(self, value: int) -> ir.Value:
        value &= (1 << self.bits) - 1
        if value >= 1 << (self.bits - 1):
            value -= 1 << self.bits
        attr = ir.IntegerAttr.get(_element(self.t), value)
        if isinstance(self.t, ir.VectorType):
            attr = ir.DenseElementsAttr.get_splat(self.t, attr)
        return arith.constant(self.t, attr)


def _u(pred: str) -> Any:
    return getattr(arith.CmpIPredicate, pred)


def _f32_to_bf16_bits(f: ir.Value) -> ir.Value:
    """i16 bits of the bf16 nearest to f32 `f` (ties to even)."""
    i = _Ints(f.type, 32)
    u = arith.bitcast(i.t, f)
    lsb = arith.andi(arith.shrui(u, i.c(16)), i.c(1))
    rounded = arith.shrui(arith.addi(u, arith.addi(lsb, i.c(0x7FFF))), i.c(16))
    is_nan = arith.cmpi(_u("ugt"), arith.andi(u, i.c(0x7FFFFFFF)), i.c(0x7F800000))
    quiet = arith.ori(arith.shrui(u, i.c(16)), i.c(0x0040))
    return arith.trunci(_Ints(f.type, 16).t, arith.select(is_nan, quiet, rounded))


def _f32_to_f16_bits(f: ir.Value) -> ir.Value:
    """i16 bits of the f16 nearest to f32 `f` (ties to even, subnormals kept)."""
    i = _Ints(f.type, 32)
    u = arith.bitcast(i.t, f)
    sign = arith.andi(arith.shrui(u, i.c(16)), i.c(0x8000))
    a = arith.andi(u, i.c(0x7FFFFFFF))
    # Normal f16 range: rebias the exponent (127 -> 15), round 13 bits off; a carry may
    # run into the exponent (correct), past the largest finite value gives >= 0x7c00.
    rebased = arith.subi(a, i.c(112 << 23))
    lsb = arith.andi(arith.shrui(rebased, i.c(13)), i.c(1))
    normal = arith.shrui(arith.addi(rebased, arith.addi(lsb, i.c(0xFFF))), i.c(13))
    normal = arith.minui(normal, i.c(0x7C00))
    # Below 2^-14: the f16 subnormal m * 2^-24, m = |f| * 2^24 rounded to nearest even, is
    # what adding 0.5 does in f32 (an IEEE addition, the same on every CPU: its ulp in
    # [0.5, 1) is 2^-24); m is in its low bits (1024 is the smallest normal, also right).
    f32 = f.type
    half = arith.bitcast(f32, i.c(0x3F000000))
    subnormal = arith.subi(arith.bitcast(i.t, arith.addf(arith.bitcast(f32, a), half)), i.c(0x3F000000))
    magnitude = arith.select(arith.cmpi(_u("ult"), a, i.c(113 << 23)), subnormal, normal)
    is_nan = arith.cmpi(_u("ugt"), a, i.c(0x7F800000))
    nan = arith.ori(arith.andi(arith.shrui(a, i.c(13)), i.c(0x3FF)), i.c(0x7E00))
    bits = arith.ori(sign, arith.select(is_nan, nan, magnitude))
    return arith.trunci(_Ints(f.type, 16).t, bits)


def _bf16_bits_to_f32(h: ir.Value) -> ir.Value:
    """The f32 with the same value: bf16 is f32's upper half (a NaN's payload kept as is)."""
    i = _Ints(h.type, 32)
    return arith.bitcast(_like(h.type, ir.F32Type.get()), arith.shli(arith.extui(i.t, h), i.c(16)))


def _f16_bits_to_f32(h: ir.Value) -> ir.Value:
    i = _Ints(h.type, 32)
    f32 = _like(h.type, ir.F32Type.get())
    w = arith.extui(i.t, h)
    sign = arith.shli(arith.andi(w, i.c(0x8000)), i.c(16))
    exponent = arith.andi(arith.shrui(w, i.c(10)), i.c(0x1F))
    mantissa = arith.andi(w, i.c(0x3FF))
    normal = arith.addi(arith.shli(arith.andi(w, i.c(0x7FFF)), i.c(13)), i.c(112 << 23))
    # Inf/NaN: exponent all ones, the payload kept as is (as numpy).
    special = arith.ori(i.c(0x7F800000), arith.shli(mantissa, i.c(13)))
    # Subnormal (and zero): mantissa * 2^-24, an exact f32 product (a normal result).
    scaled = arith.mulf(arith.uitofp(f32, mantissa), arith.bitcast(f32, i.c(103 << 23)))
    tiny = arith.bitcast(i.t, scaled)
    magnitude = arith.select(arith.cmpi(_u("eq"), exponent, i.c(0)), tiny,
                             arith.select(arith.cmpi(_u("eq"), exponent, i.c(0x1F)), special, normal))
    return arith.bitcast(f32, arith.ori(sign, magnitude))


def _f64_to_f32_odd(d: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd: rounding that to f16 is the single correct rounding
    of `d` (f32 has more than 11 + 2 bits)."""
    f32 = _like(d.type, ir.F32Type.get())
    i = _Ints(d.type, 32)
    r = arith.truncf(f32, d)
    back = arith.extf(d.type, r)
    inexact = arith.cmpf(arith.CmpFPredicate.ONE, back, d)
    bits = arith.bitcast(i.t, r)
    even = arith.cmpi(_u("eq"), arith.andi(bits, i.c(1)), i.c(0))
    # The odd neighbour on the side of `d`: one step down in magnitude if r overshot.
    overshot = arith.cmpf(arith.CmpFPredicate.OGT, math.absf(back), math.absf(d))
    neighbour = arith.select(overshot, arith.subi(bits, i.c(1)), arith.addi(bits, i.c(1)))
    return arith.bitcast(f32, arith.select(arith.andi(inexact, even), neighbour, bits))


def _max_finite(f: FloatFormat) -> int:
    """The magnitude bits (no sign) of the largest finite value."""
    all_exponent, all_mantissa = (1 << f.exponent_bits) - 1, (1 << f.mantissa_bits) - 1
    if f.has_inf:
        return ((all_exponent - 1) << f.mantissa_bits) | all_mantissa
    if f.nan == "all_ones":  # FN, E8M0FNU: all ones is NaN, one below it the largest
        return ((all_exponent << f.mantissa_bits) | all_mantissa) - 1
    return (all_exponent << f.mantissa_bits) | all_mantissa  # FNUZ, F4E2M1FN: all ones is finite


def _f32_to_narrow_bits(x: ir.Value, f: FloatFormat) -> ir.Value:
    """i32 bits (in the low `f.bits`) of the narrow value nearest to f32 `x` (module doc)."""
    i = _Ints(x.type, 32)
    m, shift = f.mantissa_bits, 23 - f.mantissa_bits
    u = arith.bitcast(i.t, x)
    negative = arith.cmpi(_u("ne"), arith.shrui(u, i.c(31)), i.c(0))
    a = arith.andi(u, i.c(0x7FFFFFFF))
    # Normal range: rebias the exponent (127 -> f.bias), round `shift` bits off to nearest
    # even (a carry may run into the exponent: correct). Without mantissa bits a tie
    # rounds up (ml_dtypes and XLA: 3 -> 4).
    rebased = arith.subi(a, i.c((127 - f.bias) << 23))
    lsb = arith.andi(arith.shrui(rebased, i.c(shift)), i.c(1)) if m else i.c(1)
    normal = arith.shrui(arith.addi(rebased, arith.addi(lsb, i.c((1 << (shift - 1)) - 1))), i.c(shift))
    if m:
        # Below the smallest normal 2^emin: the subnormal k * 2^(emin - m), k = |x| / quantum
        # rounded to nearest even, is what adding C = 2^(emin - m + 23) does in f32 (one
        # IEEE addition: its ulp in [C, 2C) is the quantum); k is in the low bits (2^m, the
        # smallest normal, is also right).
        emin = 1 - f.bias
        c_bits = (emin - m + 23 + 127) << 23
        c = arith.bitcast(x.type, i.c(c_bits))
        sub = arith.subi(arith.bitcast(i.t, arith.addf(arith.bitcast(x.type, a), c)), i.c(c_bits))
        magnitude = arith.select(arith.cmpi(_u("ult"), a, i.c((emin + 127) << 23)), sub, normal)
    else:
        # E8M0: exponent field 0 is 2^-127, an f32 subnormal (0x00400000). Below 2^-126,
        # XLA and ml_dtypes give 2^-126 for anything above 2^-127 (not the nearest).
        tiny = arith.extui(i.t, arith.cmpi(_u("ugt"), a, i.c(0x00400000)))
        magnitude = arith.select(arith.cmpi(_u("ult"), a, i.c(0x00800000)), tiny, normal)
    is_nan = arith.cmpi(_u("ugt"), a, i.c(0x7F800000))
    overflow = arith.cmpi(_u("ugt"), magnitude, i.c(_max_finite(f)))
    sign_bit = 1 << (f.bits - 1)
    sign = arith.select(negative, i.c(sign_bit), i.c(0))
    all_exponent = ((1 << f.exponent_bits) - 1) << m
    if f.has_inf:  # IEEE-like: overflow to inf, NaN quiet with its sign
        magnitude = arith.select(overflow, i.c(all_exponent), magnitude)
        magnitude = arith.select(is_nan, i.c(all_exponent | (1 << (m - 1))), magnitude)
        return arith.ori(sign, magnitude)
    if not f.signed:  # E8M0FNU: NaN for NaN, overflow, zero and negative values
        bad = arith.ori(arith.ori(is_nan, overflow), arith.ori(negative, arith.cmpi(_u("eq"), a, i.c(0))))
        return arith.select(bad, i.c(0xFF), magnitude)
    if f.nan == "all_ones":  # FN: overflow and NaN give NaN (all ones) with the sign
        magnitude = arith.select(arith.ori(overflow, is_nan), i.c(all_exponent | ((1 << m) - 1)), magnitude)
        return arith.ori(sign, magnitude)
    if f.nan == "neg_zero":  # FNUZ: NaN is 0x80; no -0
        signed = arith.select(arith.cmpi(_u("eq"), magnitude, i.c(0)), i.c(0), arith.ori(sign, magnitude))
        return arith.select(arith.ori(overflow, is_nan), i.c(sign_bit), signed)
    # No NaN, no inf (F4E2M1FN): overflow saturates; NaN gives -0 (XLA).
    magnitude = arith.select(overflow, i.c(_max_finite(f)), magnitude)
    return arith.select(is_nan, i.c(sign_bit), arith.ori(sign, magnitude))


def _narrow_bits_to_f32(bits: ir.Value, f: FloatFormat) -> ir.Value:
    """The f32 of a narrow value's bits (an integer of `f.bits` bits, scalar or vector)."""
    i = _Ints(bits.type, 32)
    f32 = _like(bits.type, ir.F32Type.get())
    m = f.mantissa_bits
    w = arith.extui(i.t, bits)
    exponent = arith.andi(arith.shrui(w, i.c(m)), i.c((1 << f.exponent_bits) - 1))
    mantissa = arith.andi(w, i.c((1 << m) - 1))
    normal = arith.ori(arith.shli(arith.addi(exponent, i.c(127 - f.bias)), i.c(23)),
                       arith.shli(mantissa, i.c(23 - m)))
    is_zero_exponent = arith.cmpi(_u("eq"), exponent, i.c(0))
    if m:
        # Subnormal (and zero): mantissa * 2^(1 - bias - m), an exact f32 product.
        scale = arith.bitcast(f32, i.c((1 - f.bias - m + 127) << 23))
        tiny = arith.bitcast(i.t, arith.mulf(arith.uitofp(f32, mantissa), scale))
    else:
        tiny = i.c(0x00400000)  # E8M0's exponent field 0: 2^-127, an f32 subnormal
    magnitude = arith.select(is_zero_exponent, tiny, normal)
    quiet_nan = i.c(0x7FC00000)
    if not f.signed:
        return arith.bitcast(f32, arith.select(arith.cmpi(_u("eq"), w, i.c(0xFF)), quiet_nan, magnitude))
    sign_bit = 1 << (f.bits - 1)
    sign = arith.shli(arith.andi(w, i.c(sign_bit)), i.c(32 - f.bits))
    all_ones = (1 << (f.bits - 1)) - 1
    if f.has_inf:
        is_special = arith.cmpi(_u("eq"), exponent, i.c((1 << f.exponent_bits) - 1))
        special = arith.select(arith.cmpi(_u("eq"), mantissa, i.c(0)), i.c(0x7F800000), quiet_nan)
        return arith.bitcast(f32, arith.ori(sign, arith.select(is_special, special, magnitude)))
    if f.nan == "all_ones":
        is_nan = arith.cmpi(_u("eq"), arith.andi(w, i.c(all_ones)), i.c(all_ones))
        return arith.bitcast(f32, arith.ori(sign, arith.select(is_nan, quiet_nan, magnitude)))
    value = arith.ori(sign, magnitude)
    if f.nan == "neg_zero":  # 0x80 is NaN (+NaN, as XLA)
        value = arith.select(arith.cmpi(_u("eq"), w, i.c(sign_bit)), quiet_nan, value)
    return arith.bitcast(f32, value)


def _to_small(x: ir.Value, kind: str, out: ir.Type) -> ir.Value:
    """`x` (f32 or f64, scalar or vector) rounded to `out` (f16/bf16/narrow, shaped alike)."""
    f32 = _like(x.type, ir.F32Type.get())
    below_e8m0 = None
    if isinstance(_element(x.type), ir.F64Type):
        if kind == "f8E8M0FNU":
            # XLA: from f64, anything below e8m0's smallest value 2^-127 is NaN (from f32
            # it is 2^-127).
            smallest = arith.constant(_like(x.type, ir.F64Type.get()), 2.0 ** -127) \
                if not isinstance(x.type, ir.VectorType) else arith.constant(
                    x.type, ir.DenseElementsAttr.get_splat(x.type, ir.FloatAttr.get_f64(2.0 ** -127)))
            below_e8m0 = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), smallest)
        x = arith.truncf(f32, x) if kind == "bf16" else _f64_to_f32_odd(x)
    if kind in _NARROW:
        f = _NARROW[kind]
        wide_bits = _f32_to_narrow_bits(x, f)
        if below_e8m0 is not None:
            wide_bits = arith.select(below_e8m0, _Ints(x.type, 32).c(0xFF), wide_bits)
        bits = arith.trunci(_like(x.type, ir.IntegerType.get_signless(f.bits)), wide_bits)
        return arith.bitcast(out, bits)
    bits = _f32_to_bf16_bits(x) if kind == "bf16" else _f32_to_f16_bits(x)
    return arith.bitcast(out, bits)


def _to_f32(x: ir.Value, kind: str) -> ir.Value:
    if kind in _NARROW:
        f = _NARROW[kind]
        return _narrow_bits_to_f32(arith.bitcast(_like(x.type, ir.IntegerType.get_signless(f.bits)), x), f)
    bits = arith.bitcast(_like(x.type, ir.IntegerType.get_signless(16)), x)
    return _bf16_bits_to_f32(bits) if kind == "bf16" else _f16_bits_to_f32(bits)


def _from_f32(wide: ir.Value, out: ir.Type) -> ir.Value:
    """An exact f32 value as `out` (f32, f64, or f16/bf16 that hold it)."""
    e = _element(out)
    if isinstance(e, ir.F32Type):
        return wide
    if isinstance(e, ir.F64Type):
        return arith.extf(out, wide)
    return _to_small(wide, _kind(out), out)


def _rewrite(op: Any) -> ir.Value | None:
    name = op.name
    source, result = op.operands[0], op.results[0]
    src_kind, dst_kind = _kind(source.type), _kind(result.type)
    if name == _EXTF and src_kind:
        return _from_f32(_to_f32(source, src_kind), result.type)
    if name == _TRUNCF and dst_kind:
        if src_kind:  # between two small types: through f32 (exact)
            source = _to_f32(source, src_kind)
        return _to_small(source, dst_kind, result.type)
    if name in _TO_FLOAT and dst_kind:
        bits = ir.IntegerType(_element(source.type)).width
        # Integers reach a narrow float through f32 (XLA), bf16 from 64 bits through f64.
        wide = ir.F64Type.get() if bits > 32 and dst_kind == "bf16" else ir.F32Type.get()
        return _to_small(getattr(arith, name.removeprefix("arith."))(_like(source.type, wide), source),
                         dst_kind, result.type)
    if name in _FROM_FLOAT and src_kind:  # every small float value is exact in f32
        return getattr(arith, name.removeprefix("arith."))(result.type, _to_f32(source, src_kind))
    return None


_KEEP = (_EXTF, _TRUNCF, *_TO_FLOAT, *_FROM_FLOAT, "arith.bitcast", "arith.constant", "arith.select")


def _is_narrow(t: ir.Type) -> bool:
    return _kind(t) in _NARROW


def _emulate_narrow(op: Any) -> None:
    """An arith/math op on narrow floats as the same op on f32 between extf and truncf
    (upstream's arith-emulate-unsupported-floats does not know every narrow type)."""
    f32 = ir.F32Type.get()
    with ir.InsertionPoint(op), op.location:
        operands = [arith.extf(_like(v.type, f32), v) if _is_narrow(v.type) else v for v in op.operands]
        results = [_like(r.type, f32) if _is_narrow(r.type) else r.type for r in op.results]
        wide = ir.Operation.create(op.name, results=results, operands=operands,
                                   attributes={name: op.attributes[name] for name in op.attributes})
    with ir.InsertionPoint.after(wide), op.location:
        for old, new in zip(op.results, wide.results, strict=True):
            old.replace_all_uses_with(arith.truncf(old.type, new) if _is_narrow(old.type) else new)
    op.erase()


def expand_small_floats(module_op: Any, pass_: Any) -> None:
    """Rewrite every conversion from or to f16/bf16/a narrow float into integer arithmetic,
    after running every other arith/math op on a narrow float in f32 (module doc)."""
    _expand(module_op, narrow_only=False)


def expand_narrow_floats(module_op: Any, pass_: Any) -> None:
    """The narrow-float part of `expand_small_floats`, run before the first canonicalize.

    MLIR folds arith ops on constant narrow floats with APFloat, whose semantics are not
    XLA's: a constant inf or NaN converted to f4E2M1FN (which has neither) hit LLVM's
    `UNREACHABLE` and aborted the process, f8E8M0FNU(-2) folded to 2 (XLA: NaN), NaN
    payloads were kept. Integer code folds to what it computes at run time."""
    _expand(module_op, narrow_only=True)


# Type text that any f16, bf16 or narrow float (f8E5M2, f4E2M1FN...) prints with, also as
# the element of a vector, tensor or memref, or inside a function type.
_SMALL_FLOAT_TEXT = ("f16", "f8E", "f4E")


def _has_small_float(module_op: Any) -> bool:
    """False only if no value of the module has a type holding f16, bf16 or a narrow float.

    Most programs have none, and the rewrite's inspection of every arith/math op's values
    costs a few ms per pass (Python objects per value and type, `_kind`'s isinstance and
    text): this takes each op's result types as one list and each distinct type's text
    once. A value is an op result or a block argument; a block argument's type is a
    function's input (in the `function_type` of the module's functions) or mirrors the
    types of its op's operands or results (loop-carried values, linalg's elements; loop
    induction variables are of index type)."""
    verdicts: dict[Any, bool] = {}

    def small(t: Any) -> bool:
        verdict = verdicts.get(t)
        if verdict is None:
            text = str(t)
            verdict = verdicts[t] = any(name in text for name in _SMALL_FLOAT_TEXT)
        return verdict

    for op in module_op.regions[0].blocks[0].operations:
        attributes = op.operation.attributes
        if "function_type" in attributes and small(attributes["function_type"]):
            return True
    found = False

    def visit(op: Any) -> ir.WalkResult:
        nonlocal found
        for t in op.results.types:
            if small(t):
                found = True
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found


def _expand(module_op: Any, narrow_only: bool) -> None:
    if not _has_small_float(module_op):
        return
    narrow_ops: list[Any] = []

    def visit_narrow(op: Any) -> ir.WalkResult:
        if (op.name.split(".")[0] in ("arith", "math") and op.name not in _KEEP
                and any(_is_narrow(v.type) for v in [*op.operands, *op.results])):
            narrow_ops.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit_narrow)
    for op in narrow_ops:
        _emulate_narrow(op)
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name in (_EXTF, _TRUNCF, *_TO_FLOAT, *_FROM_FLOAT) and (
                not narrow_only or _is_narrow(op.operands[0].type) or _is_narrow(op.results[0].type)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            new = _rewrite(op)
        if new is not None:
            op.results[0].replace_all_uses_with(new)
            op.erase()
