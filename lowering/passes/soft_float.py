"""f16/bf16 conversions in integer arithmetic: the same bits on every CPU.

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

The only float instructions used are ones with one IEEE result on every x86-64
(SSE2 and up): f32 <-> f64 conversions, and an f32 addition or multiplication
that is exact or rounds once. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, math

_EXTF, _TRUNCF = "arith.extf", "arith.truncf"
_TO_FLOAT = ("arith.sitofp", "arith.uitofp")
_FROM_FLOAT = ("arith.fptosi", "arith.fptoui")


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _like(t: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it shaped as `t`."""
    return ir.VectorType.get(ir.VectorType(t).shape, element) if isinstance(t, ir.VectorType) else element


def _kind(t: ir.Type) -> str | None:
    e = _element(t)
    if isinstance(e, ir.BF16Type):
        return "bf16"
    if isinstance(e, ir.F16Type):
        return "f16"
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


def _to_small(x: ir.Value, kind: str, out: ir.Type) -> ir.Value:
    """`x` (f32 or f64, scalar or vector) rounded to `out` (f16/bf16 shaped alike)."""
    f32 = _like(x.type, ir.F32Type.get())
    if isinstance(_element(x.type), ir.F64Type):
        x = arith.truncf(f32, x) if kind == "bf16" else _f64_to_f32_odd(x)
    bits = _f32_to_bf16_bits(x) if kind == "bf16" else _f32_to_f16_bits(x)
    return arith.bitcast(out, bits)


def _to_f32(x: ir.Value, kind: str) -> ir.Value:
    bits = arith.bitcast(_like(x.type, ir.IntegerType.get_signless(16)), x)
    return _bf16_bits_to_f32(bits) if kind == "bf16" else _f16_bits_to_f32(bits)


def _rewrite(op: Any) -> ir.Value | None:
    name = op.name
    source, result = op.operands[0], op.results[0]
    src_kind, dst_kind = _kind(source.type), _kind(result.type)
    if name == _EXTF and src_kind:
        wide = _to_f32(source, src_kind)
        return wide if isinstance(_element(result.type), ir.F32Type) else arith.extf(result.type, wide)
    if name == _TRUNCF and dst_kind:
        if src_kind:  # between the two small types: through f32
            source = _to_f32(source, src_kind)
        return _to_small(source, dst_kind, result.type)
    if name in _TO_FLOAT and dst_kind:
        bits = ir.IntegerType(_element(source.type)).width
        wide = ir.F64Type.get() if bits > 32 and dst_kind == "bf16" else ir.F32Type.get()
        return _to_small(getattr(arith, name.removeprefix("arith."))(_like(source.type, wide), source),
                         dst_kind, result.type)
    if name in _FROM_FLOAT and src_kind:  # every f16/bf16 value is exact in f32
        return getattr(arith, name.removeprefix("arith."))(result.type, _to_f32(source, src_kind))
    return None


def expand_small_floats(module_op: Any, pass_: Any) -> None:
    """Rewrite every conversion from or to f16/bf16 into integer arithmetic (module doc)."""
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name in (_EXTF, _TRUNCF, *_TO_FLOAT, *_FROM_FLOAT):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            new = _rewrite(op)
        if new is not None:
            op.results[0].replace_all_uses_with(new)
            op.erase()
