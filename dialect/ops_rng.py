"""Ops of the rng family.

- `rng_bit_generator(initial_state) {algorithm, dimensions, element_type}` ->
  (new_state, bits): XLA's RngBitGenerator, bit for bit as XLA's
  RngBitGeneratorExpander computes it. THREE_FRY takes a u64[2] state
  (key, counter); PHILOX a u64[2] or u64[3] one (key, then the counter);
  DEFAULT is PHILOX, XLA:CPU's default. The bits are u8/u16/u32/u64.
- `rng_get_and_update_state() {delta}` -> u64[2]: the per-executable random
  state (a 128-bit counter, low word first) before the call, advanced by
  `delta` (HLO's RngGetAndUpdateState; seed 001 says users never build it:
  the builder's rng_uniform/rng_normal/rng_bernoulli emit it).
- `rng(a, b, state) {rng_distribution, dimensions}`: StableHLO's `rng`
  with the state made explicit: UNIFORM over [a, b) (SEMANTICS D6) or NORMAL
  with mean a and standard deviation b, drawn with Philox from `state` (the
  counter) as XLA's RngExpander does. rng_bernoulli is builder sugar on top.

Element types (SEMANTICS D18, seed 001): UNIFORM takes f16, bf16, f32, f64,
s32, u32, s64 or u64 (what XLA's CPU backend supports); NORMAL a float type.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from typing import Any

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import ELEMENT_TYPE, I64_ARRAY, INT, STR, OpDef, Operand, define
from .shape import Shape

P = PrimitiveType
ALGORITHMS = ("DEFAULT", "THREE_FRY", "PHILOX")
# Which state sizes each algorithm accepts (StableHLO's rng_bit_generator C2).
STATE_SIZES = {"DEFAULT": (2, 3), "THREE_FRY": (2,), "PHILOX": (2, 3)}
BIT_TYPES = (P.U8, P.U16, P.U32, P.U64)
DISTRIBUTIONS = ("UNIFORM", "NORMAL")
UNIFORM_TYPES = (P.F16, P.BF16, P.F32, P.F64, P.S32, P.U32, P.S64, P.U64)
NORMAL_TYPES = (P.F16, P.BF16, P.F32, P.F64)
STATE_SHAPE = Shape.array(P.U64, (2,))


def state_delta(dims: tuple[int, ...], t: PrimitiveType) -> int:
    """How far `rng` of `dims` elements of `t` advances the executable's state: its count of
    32-bit words, as XLA's RngExpander (f16/bf16 are drawn as f32). That is never less than
    the Philox blocks the draw uses, so draws from successive states never overlap."""
    count = 1
    for d in dims:
        count *= d
    return count * (2 if t.bit_width == 64 else 1)


def _output_dims(op: str, shapes: list[Shape], dimensions: Any) -> tuple[int, ...]:
    dims = tuple(dimensions)
    if any(d < 0 for d in dims):
        raise ShapeError(op, shapes, f"negative output dimension in {list(dims)}")
    return dims


def infer_rng_bit_generator(initial_state: Shape, *, algorithm: str, dimensions: tuple[int, ...],
                            element_type: Any) -> Shape:
    op = "rng_bit_generator"
    shapes = [initial_state]
    if algorithm not in ALGORITHMS:
        raise ShapeError(op, shapes, f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if not initial_state.is_array() or initial_state.element_type != P.U64 or initial_state.rank != 1:
        raise ShapeError(op, shapes, f"initial_state must be a u64 vector, got {initial_state}")
    sizes = STATE_SIZES[algorithm]
    if initial_state.dimensions[0] not in sizes:
        wanted = " or ".join(f"u64[{s}]" for s in sizes)
        raise ShapeError(op, shapes, f"{algorithm} takes a {wanted} state, got {initial_state}")
    t = P(element_type)
    if t not in BIT_TYPES:
        raise ShapeError(op, shapes, f"the output element type must be one of "
                         f"{', '.join(map(str, BIT_TYPES))}, got {t}")
    dims = _output_dims(op, shapes, dimensions)
    return Shape.tuple([initial_state.with_default_layout(), Shape.array(t, dims)])


def infer_rng_get_and_update_state(*, delta: int) -> Shape:
    if delta < 0:
        raise ShapeError("rng_get_and_update_state", [], f"delta must be >= 0, got {delta}")
    return STATE_SHAPE


def infer_rng(a: Shape, b: Shape, state: Shape, *, rng_distribution: str,
              dimensions: tuple[int, ...]) -> Shape:
    op = "rng"
    shapes = [a, b, state]
    if rng_distribution not in DISTRIBUTIONS:
        raise ShapeError(op, shapes, f"rng_distribution must be one of {DISTRIBUTIONS}, "
                         f"got {rng_distribution!r}")
    names = ("a", "b") if rng_distribution == "UNIFORM" else ("mu", "sigma")
    for name, s in zip(names, (a, b)):
        if not s.is_array() or s.rank != 0:
            raise ShapeError(op, shapes, f"{name} must be a scalar, got {s}")
    if a.element_type != b.element_type:
        raise ShapeError(op, shapes, f"{names[0]} and {names[1]} must have the same element type, "
                         f"got {a.element_type} and {b.element_type}")
    allowed = UNIFORM_TYPES if rng_distribution == "UNIFORM" else NORMAL_TYPES
    if a.element_type not in allowed:
        raise ShapeError(op, shapes, f"{rng_distribution} takes one of "
                         f"{', '.join(map(str, allowed))}, got {a.element_type}")
    if state.with_default_layout() != STATE_SHAPE:
        raise ShapeError(op, shapes, f"state must be {STATE_SHAPE}, got {state}")
    return Shape.array(a.element_type, _output_dims(op, shapes, dimensions))


define(OpDef("rng_bit_generator", (Operand("initial_state"),),
             {"algorithm": STR, "dimensions": I64_ARRAY, "element_type": ELEMENT_TYPE},
             infer_rng_bit_generator, results=None,
             doc="Random bits and the next state, from an explicit state (spec#rng_bit_generator)."))
define(OpDef("rng_get_and_update_state", (), {"delta": INT}, infer_rng_get_and_update_state,
             side_effect=True,
             doc="The executable's random state, then advanced by delta (HLO RngGetAndUpdateState)."))
define(OpDef("rng", (Operand("a"), Operand("b"), Operand("state")),
             {"rng_distribution": STR, "dimensions": I64_ARRAY}, infer_rng,
             doc="Uniform [a, b) or normal(a, b) numbers drawn from an explicit state (spec#rng)."))
