"""Lowerings of the rng family: XLA's bit generators as scalar code in a linalg.generic.

Every output element computes the block of the counter-based generator it
belongs to (Threefry-2x32 with 20 rounds, or Philox-4x32 with 10 rounds) from
its own index and keeps the word(s) it needs, so the whole output is one
parallel loop nest and the result is, bit for bit, what XLA's
RngBitGeneratorExpander (xla/hlo/builder/lib/prng.cc) produces:

- THREE_FRY, 32 bits or narrower: the shape is split in halves along its
  first even dimension (else its largest; a scalar is [1] + [1]); element j
  of the split dimension takes word j % 2 of block j // 2, where the block's
  64-bit counter is state[1] + the row-major index in the half shape and the
  key is state[0]. 64 bits: one block per element, words 0 | 1 << 32. The
  new state is (key, counter + blocks used).
- PHILOX: the 128-bit counter is (state[1], state[2]) for u64[3], and
  (state[1], state[0]) for u64[2] (XLA reverses the pair); element i takes
  word i % 4 of block i // 4 (64-bit values: words 0|1 or 2|3 of block
  i // 2). The new state is (key, counter + blocks), with only its low word
  for u64[2].
- Narrow outputs (u8/u16) truncate the 32-bit words.

`rng_get_and_update_state` reads and advances the executable's state: a
public `memref.global` named `RNG_STATE_GLOBAL` (two i64 words, the low word
of a 128-bit counter first, zero-initialised: seed 0). The runtime sets it
with `set_rng_seed(engine, n)`. `rng` (uniform / normal) draws Philox bits
from that counter with a fixed key, as XLA's RngExpander does, and converts
them like XLA's UniformFloatingPointDistribution (mantissa bits scaled into
[a, b)), UniformIntDistribution (a + bits mod (b - a)) and
NormalFloatingPointDistribution (Box-Muller on pairs split like THREE_FRY's
halves).

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

from mlir import ir
from mlir.dialects import arith, linalg, memref, tensor
from mlir.dialects import math as mmath

from ...dialect.element_types import PrimitiveType
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers, module_of, signless_type
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from ..scalar.storage import from_storage
from .elementwise import generic
from .linear_algebra import compute_type, tensor_type

P = PrimitiveType
I = arith.CmpIPredicate  # noqa: E741

# The symbol of the state global. ExecutionEngine.raw_lookup(name) resolves "_mlir_" + name,
# so the runtime finds it as raw_lookup(RNG_STATE_LOOKUP_NAME).
RNG_STATE_LOOKUP_NAME = "xhlo_rng_state"
RNG_STATE_GLOBAL = "_mlir_" + RNG_STATE_LOOKUP_NAME
# The Philox key of rng (uniform/normal). XLA draws one at random per module; a fixed
# one keeps runs reproducible. Draws never overlap: every op takes its own counter range.
RNG_KEY = 0x9E3779B97F4A7C15

_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key increments per round
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers


def _state_words(engine: Any) -> Any:
    """The two u64 words of a JIT-compiled module's state, or None if it has no random ops."""
    address = engine.raw_lookup(RNG_STATE_LOOKUP_NAME)
    return (ctypes.c_uint64 * 2).from_address(address) if address else None


def set_rng_seed(engine: Any, seed: int) -> None:
    """Reset the state of a compiled module to `seed`: counter (low 0, high seed).

    Different seeds give disjoint streams (until 2**64 draws). A module without
    random ops has no state; that is not an error.
    """
    set_rng_state(engine, (0, seed & (2**64 - 1)))


def rng_state(engine: Any) -> tuple[int, int] | None:
    """The module's current state (low, high), e.g. to carry it over to another engine."""
    words = _state_words(engine)
    return None if words is None else (words[0], words[1])


def set_rng_state(engine: Any, state: tuple[int, int] | None) -> None:
    words = _state_words(engine)
    if words is not None and state is not None:
        words[0], words[1] = state


# -- scalar helpers --------------------------------------------------------------------------------

def _i(bits: int) -> ir.Type:
    return ir.IntegerType.get_signless(bits)


def _const(bits: int, value: int) -> ir.Value:
    """An i<bits> constant from any int, taken modulo 2**bits (attributes are signed)."""
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return arith.constant(_i(bits), value)


def _lo32(x: ir.Value) -> ir.Value:
    return arith.trunci(_i(32), x)


def _hi32(x: ir.Value) -> ir.Value:
    return arith.trunci(_i(32), arith.shrui(x, _const(64, 32)))


def _join64(lo: ir.Value, hi: ir.Value) -> ir.Value:
    return arith.ori(arith.extui(_i(64), lo), arith.shli(arith.extui(_i(64), hi), _const(64, 32)))


def _add128(lo: ir.Value, hi: ir.Value, n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(lo, hi) + n for a 128-bit counter held in two i64 (wrapping)."""
    new_lo = arith.addi(lo, n)
    carry = arith.extui(_i(64), arith.cmpi(I.ult, new_lo, lo))
    return new_lo, arith.addi(hi, carry)


def threefry2x32(x0: ir.Value, x1: ir.Value, k0: ir.Value, k1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Threefry-2x32 with 20 rounds (XLA's ThreeFry2x32)."""
    ks = [k0, k1, arith.xori(arith.xori(_const(32, _THREEFRY_PARITY), k0), k1)]
    x0, x1 = arith.addi(x0, ks[0]), arith.addi(x1, ks[1])
    for block in range(5):
        for r in _THREEFRY_ROTATIONS[4 * (block % 2): 4 * (block % 2) + 4]:
            x0 = arith.addi(x0, x1)
            rotated = arith.ori(arith.shli(x1, _const(32, r)), arith.shrui(x1, _const(32, 32 - r)))
            x1 = arith.xori(x0, rotated)
        x0 = arith.addi(x0, ks[(block + 1) % 3])
        x1 = arith.addi(arith.addi(x1, ks[(block + 2) % 3]), _const(32, block + 1))
    return x0, x1


def philox4x32(words: Sequence[ir.Value], k0: ir.Value, k1: ir.Value) -> list[ir.Value]:
    """Philox-4x32 with 10 rounds (XLA's Philox4x32)."""

    def mul_hi_lo(x: ir.Value, m: int) -> tuple[ir.Value, ir.Value]:
        product = arith.muli(arith.extui(_i(64), x), _const(64, m))
        return _hi32(product), _lo32(product)

    x = list(words)
    for round_ in range(10):
        if round_:
            k0 = arith.addi(k0, _const(32, _PHILOX_W[0]))
            k1 = arith.addi(k1, _const(32, _PHILOX_W[1]))
        hi0, lo0 = mul_hi_lo(x[0], _PHILOX_M[0])
        hi1, lo1 = mul_hi_lo(x[2], _PHILOX_M[1])
        x = [arith.xori(arith.xori(hi1, x[1]), k0), lo1, arith.xori(arith.xori(hi0, x[3]), k1), lo0]
    return x


def _pick(choice: ir.Value, values: Sequence[ir.Value]) -> ir.Value:
    """values[choice] for an index `choice` in range, as a chain of selects."""
    result = values[-1]
    for k in range(len(values) - 2, -1, -1):
        is_k = arith.cmpi(I.eq, choice, arith.constant(ir.IndexType.get(), k))
        result = arith.select(is_k, values[k], result)
    return result


def _idx(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _linear(indices: Sequence[ir.Value], dims: Sequence[int]) -> ir.Value:
    """The row-major linear index (index type) of `indices` in `dims`."""
    linear = _idx(0)
    for i, n in zip(indices, dims):
        linear = arith.addi(arith.muli(linear, _idx(n)), i)
    return linear


def _to_i64(i: ir.Value) -> ir.Value:
    return arith.index_castui(_i(64), i)


def _loop_indices(rank: int) -> list[ir.Value]:
    return [linalg.IndexOp(d).result for d in range(rank)]


def split_in_halves(dims: Sequence[int]) -> tuple[int, list[int]]:
    """XLA's SplitShapeIntoHalves: the split dimension (the first even one, else the largest)
    and the half shape (that dimension halved, rounded up). A scalar is [1] + [1]."""
    if not dims:
        return 0, [1]
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = 0
        for i, d in enumerate(dims):
            if d > dims[split]:
                split = i
    half = list(dims)
    half[split] = (dims[split] + 1) // 2
    return split, half


def _pair_position(indices: Sequence[ir.Value], dims: Sequence[int]) -> tuple[list[ir.Value], ir.Value]:
    """For an element of `dims`: its position in the half shape and which of the pair (0/1)."""
    split, _ = split_in_halves(dims)
    if not dims:
        return [_idx(0)], _idx(0)
    position = list(indices)
    position[split] = arith.divui(indices[split], _idx(2))
    return position, arith.remui(indices[split], _idx(2))


# -- the generators, element by element ----------------------------------------------------------

class _State:
    """The u64 state words as i64 scalars."""

    def __init__(self, state: ir.Value, size: int) -> None:
        self.words = [tensor.extract(state, [_idx(k)]) for k in range(size)]

    @property
    def key(self) -> tuple[ir.Value, ir.Value]:
        return _lo32(self.words[0]), _hi32(self.words[0])


def _threefry_element(key: tuple[ir.Value, ir.Value], counter: ir.Value, dims: Sequence[int],
                      bits: int, indices: Sequence[ir.Value]) -> ir.Value:
    """The output element at `indices` of ThreeFryBitGenerator (i32 or i64)."""
    if bits == 64:
        c = arith.addi(counter, _to_i64(_linear(indices, dims)))
        x0, x1 = threefry2x32(_lo32(c), _hi32(c), *key)
        return _join64(x0, x1)
    _, half = split_in_halves(dims)
    position, which = _pair_position(indices, dims)
    c = arith.addi(counter, _to_i64(_linear(position, half)))
    x0, x1 = threefry2x32(_lo32(c), _hi32(c), *key)
    return _pick(which, [x0, x1])


def _philox_words(key: tuple[ir.Value, ir.Value], lo: ir.Value, hi: ir.Value,
                  block: ir.Value) -> list[ir.Value]:
    """The four 32-bit words of Philox block `block` (index) after counter (lo, hi)."""
    c_lo, c_hi = _add128(lo, hi, _to_i64(block))
    return philox4x32([_lo32(c_lo), _hi32(c_lo), _lo32(c_hi), _hi32(c_hi)], *key)


def _philox_at(key: tuple[ir.Value, ir.Value], lo: ir.Value, hi: ir.Value, linear: ir.Value,
               bits: int) -> ir.Value:
    """Element `linear` (row-major) of PhiloxBitGenerator's output (i32 or i64)."""
    if bits == 64:
        w = _philox_words(key, lo, hi, arith.divui(linear, _idx(2)))
        return _pick(arith.remui(linear, _idx(2)), [_join64(w[0], w[1]), _join64(w[2], w[3])])
    w = _philox_words(key, lo, hi, arith.divui(linear, _idx(4)))
    return _pick(arith.remui(linear, _idx(4)), w)


def _philox_blocks(count: int, bits: int) -> int:
    """How many 128-bit blocks PhiloxBitGenerator uses for `count` values of `bits`."""
    words = count * 2 if bits == 64 else count
    return (words + 3) // 4


def _bits_tensor(out: Shape, body: Any) -> ir.Value:
    """A generic over `out` (storage type) whose element at the loop indices is body(indices)."""
    out_type = signless_type(tensor_type(out.dimensions, Elem(out.element_type).type))
    return generic([], [], out, out_type, lambda: body(_loop_indices(out.rank)))


def _narrow(value: ir.Value, bits: int) -> ir.Value:
    return value if bits >= 32 else arith.trunci(_i(bits), value)


@lowers("rng_bit_generator")
def lower_rng_bit_generator(v: OpView) -> list[ir.Value]:
    state_shape, out = v.result_shapes
    size = state_shape.dimensions[0]
    algorithm = v.attrs["algorithm"]
    dims = out.dimensions
    bits = out.element_type.bit_width
    s = _State(v.args["initial_state"], size)
    key = s.key
    if algorithm == "THREE_FRY":
        counter = s.words[1]
        blocks = math.prod(dims) if bits == 64 else math.prod(split_in_halves(dims)[1])
        values = _bits_tensor(out, lambda ix: _narrow(
            _threefry_element(key, counter, dims, 64 if bits == 64 else 32, ix), bits))
        new_words = [s.words[0], arith.addi(counter, _const(64, blocks))]
    else:  # PHILOX, and DEFAULT (XLA:CPU's default algorithm is PHILOX)
        lo, hi = (s.words[1], s.words[2]) if size >= 3 else (s.words[1], s.words[0])
        wide = 64 if bits == 64 else 32
        values = _bits_tensor(out, lambda ix: _narrow(
            _philox_at(key, lo, hi, _linear(ix, dims), wide), bits))
        new_lo, new_hi = _add128(lo, hi, _const(64, _philox_blocks(math.prod(dims), wide)))
        new_words = [s.words[0], new_lo] + ([new_hi] if size >= 3 else [])
    new_state = tensor.from_elements(tensor_type([size], _i(64)), new_words)
    return [new_state, values]


# -- the executable's state ----------------------------------------------------------------------

def _state_global(op: ir.Operation) -> ir.Type:
    """The memref type of the state global, declared in `op`'s module on first use."""
    state_type = ir.MemRefType.get([2], _i(64))
    module = module_of(op)
    body = module.regions[0].blocks[0]
    for existing in body.operations:
        if existing.operation.name == "memref.global" and \
                ir.StringAttr(existing.operation.attributes["sym_name"]).value == RNG_STATE_GLOBAL:
            return state_type
    zero = ir.DenseElementsAttr.get_splat(tensor_type([2], _i(64)), ir.IntegerAttr.get(_i(64), 0))
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        # Public, so that the JIT exports it and the runtime can find (and seed) it.
        memref.GlobalOp(RNG_STATE_GLOBAL, ir.TypeAttr.get(state_type), initial_value=zero)
    return state_type


@lowers("rng_get_and_update_state")
def lower_rng_get_and_update_state(v: OpView) -> ir.Value:
    state = memref.get_global(_state_global(v.op), RNG_STATE_GLOBAL)
    zero, one = _idx(0), _idx(1)
    lo, hi = memref.load(state, [zero]), memref.load(state, [one])
    new_lo, new_hi = _add128(lo, hi, _const(64, v.attrs["delta"]))
    memref.store(new_lo, state, [zero])
    memref.store(new_hi, state, [one])
    return tensor.from_elements(tensor_type([2], _i(64)), [lo, hi])


# -- rng: uniform and normal -----------------------------------------------------------------------

def _uniform_float(bits: ir.Value, e: Elem, a: ir.Value, b: ir.Value) -> ir.Value:
    """XLA's ConvertRandomBitsToUniformFloatingPoint: the top mantissa-width bits as a
    fraction in [0, 1), scaled to [a, b)."""
    width = e.bits
    mantissa = 23 if width == 32 else 52
    fraction = arith.uitofp(e.type, arith.shrui(bits, _const(width, width - mantissa)))
    unit = arith.mulf(fraction, e.const(math.ldexp(1.0, -mantissa)))
    return arith.addf(arith.mulf(unit, arith.subf(b, a)), a)


def _below(e: Elem, x: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """x, or the largest value below b when rounding made x reach b (and a < b: the interval
    is not empty), so that uniform numbers stay in [a, b) as SEMANTICS D6 asks."""
    bits = _i(e.bits)
    b_bits = arith.bitcast(bits, b)
    zero = e.const(0.0)
    # The next float toward -inf: one ulp down in magnitude for b > 0, up for b < 0, and the
    # smallest negative subnormal for b == 0.
    down = arith.bitcast(e.type, arith.subi(b_bits, _const(e.bits, 1)))
    up = arith.bitcast(e.type, arith.addi(b_bits, _const(e.bits, 1)))
    tiny = arith.bitcast(e.type, _const(e.bits, (1 << (e.bits - 1)) | 1))
    below_b = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, b, zero), down,
                           arith.select(arith.cmpf(arith.CmpFPredicate.OLT, b, zero), up, tiny))
    reached = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, x, b),
                         arith.cmpf(arith.CmpFPredicate.OLT, a, b))
    return arith.select(reached, below_b, x)


def _uniform_int(bits: ir.Value, e: Elem, a: ir.Value, b: ir.Value) -> ir.Value:
    """XLA's ConvertRandomBitsToUniformInt: a + bits mod (b - a), wrapping. b == a gives a
    (b <= a is implementation-defined; this never divides by zero)."""
    span = arith.subi(b, a)
    is_empty = arith.cmpi(I.eq, span, e.const(0))
    safe = arith.select(is_empty, e.const(1), span)
    return arith.addi(a, arith.remui(bits, safe))


@lowers("rng")
def lower_rng(v: OpView) -> ir.Value:
    out = v.result_shape
    t = out.element_type
    ct = compute_type(t)
    e = Elem(ct)
    dims = out.dimensions
    width = 64 if ct.bit_width == 64 else 32
    # The scalars a and b as given, and in the computation type (f16/bf16 are computed in
    # f32, as XLA does).
    given = [from_storage(tensor.extract(v.args[name], []), t) for name in ("a", "b")]
    a, b = (conversion.convert(Elem(t), e, x) for x in given)
    s = _State(v.args["state"], 2)
    key = (_const(32, RNG_KEY & 0xFFFFFFFF), _const(32, RNG_KEY >> 32))
    lo, hi = s.words  # the counter, low word first (XLA's RngExpander passes it as is)

    uniform = v.attrs["rng_distribution"] == "UNIFORM"
    if uniform:
        def body(ix: list[ir.Value]) -> ir.Value:
            bits = _philox_at(key, lo, hi, _linear(ix, dims), width)
            if not ct.is_floating:
                return _uniform_int(bits, e, a, b)
            return _below(e, _uniform_float(bits, e, a, b), a, b)
    else:
        split, half = split_in_halves(dims)
        # Uniform numbers are drawn for the "concat shape": the half shape with a pair
        # dimension after the split one; an element's pair are its two entries there.
        concat = half[: split + 1] + [2] + half[split + 1:]
        zero, one = e.const(0.0), e.const(1.0)

        def body(ix: list[ir.Value]) -> ir.Value:
            position, which = _pair_position(ix, dims)
            draws = []
            for k in (0, 1):
                at = position[: split + 1] + [_idx(k)] + position[split + 1:]
                bits = _philox_at(key, lo, hi, _linear(at, concat), width)
                draws.append(_uniform_float(bits, e, zero, one))
            # Box-Muller, as XLA's BoxMullerTransform (log of at least 1e-7).
            u1 = arith.maximumf(draws[0], e.const(1.0e-7))
            angle = arith.mulf(e.const(2.0 * math.pi), draws[1])
            radius = mmath.sqrt(arith.mulf(e.const(-2.0), mmath.log(u1)))
            z = _pick(which, [arith.mulf(mmath.sin(angle), radius), arith.mulf(mmath.cos(angle), radius)])
            return arith.addf(a, arith.mulf(b, z))

    wide = out.with_element_type(ct)
    values = _bits_tensor(wide, body)
    if ct == t:
        return values
    et = Elem(t)
    if not uniform:
        return generic([values], [wide], out, signless_type(tensor_type(dims, et.type)),
                       lambda x: conversion.convert(e, et, x))
    # Rounding to f16/bf16 can reach b: keep [a, b) by taking b's predecessor then.
    out_type = signless_type(tensor_type(dims, et.type))
    return generic([values], [wide], out, out_type,
                   lambda x: _below(et, conversion.convert(e, et, x), *given))

