"""Ops of the dot family: `dot_general` (`dot` is builder sugar for it), `ragged_dot`, `scaled_dot`.

Semantics (seeds 001/004 DotGeneral, SEMANTICS.md D8 and 5.F):

- Sum of products over the contracting dimensions; the result's dimensions
  are the batch dimensions, then lhs's free dimensions, then rhs's free
  dimensions, each group in operand order.
- Element types follow XLA: lhs and rhs must have the same element type
  unless `preferred_element_type` is given. Without it the result has the
  operands' type. With it, each operand type must widen to it the way XLA
  and jax allow: pred -> anything; an integer -> a type at least as wide
  (XLA's `MaybeUpcast`: s8 x s8 -> s32 yes, s32 -> s8 or s32 -> f16 no);
  a float -> any float or complex (f32 -> bf16 is allowed, XLA then rounds
  the result), never an integer; a complex -> complex only.
- pred dot is a logical or of ands (XLA:CPU's emitter; StableHLO's `*`/`+`
  on i1 are `and`/`or`). Integer dots wrap. Complex dots do not conjugate.
- `precision_config` is recorded ("DEFAULT", "HIGH" or "HIGHEST" per
  operand); it has no numeric effect on CPU.
- `ragged_dot` is chlo.ragged_dot (seed 001 RaggedDot defers to it): the
  shape rules of StableHLO's ChloOps.cpp checkRaggedDotConstraints, the
  numerics of XLA's expansion (lowering/ops/dot_variants.py).
- `scaled_dot` (seed 001 ScaledDot, only sketched there; SEMANTICS.md 5.F:
  defined by its decomposition): dot_general of lhs * lhs_scale and
  rhs * rhs_scale, a scale of the operand's rank covering blocks of
  operand size // scale size elements along every dimension, both factors
  converted to the result type (a float) first, as XLA's dequantize does.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import ELEMENT_TYPE, I64_ARRAY, STR, OpDef, Operand, define
from .shape import Shape

P = PrimitiveType
OP = "dot_general"
PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")
# jax's string spellings of the same three levels.
_PRECISION_ALIASES = {"FASTEST": "DEFAULT", "BFLOAT16": "DEFAULT", "TENSORFLOAT32": "HIGH",
                      "FLOAT32": "HIGHEST"}


def _dims(value: Any, what: str) -> tuple[int, ...]:
    """A sequence of ints (Python or numpy, not bool) as a tuple of Python ints."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ShapeError("DotDimensionNumbers", [], f"{what} must be a sequence of ints, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, (bool, np.bool_)):
            raise ShapeError("DotDimensionNumbers", [], f"{what} must be ints, got {value!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise ShapeError("DotDimensionNumbers", [], f"{what} must be ints, got {v!r}") from None
    return tuple(out)


@dataclass(frozen=True)
class DotDimensionNumbers:
    """Which dimensions of lhs and rhs are contracted and which are batch dimensions.

    Field names as in XLA's proto. Lists are stored as tuples of ints, so
    instances are hashable and compare by value.
    """

    lhs_contracting_dimensions: tuple[int, ...]
    rhs_contracting_dimensions: tuple[int, ...]
    lhs_batch_dimensions: tuple[int, ...] = ()
    rhs_batch_dimensions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _dims(getattr(self, f.name), f.name))

    @classmethod
    def of(cls, value: Any) -> DotDimensionNumbers:
        """Accepts an instance, jax's `((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`
        or a mapping with the field names."""
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        try:
            (lc, rc), (lb, rb) = value
        except (TypeError, ValueError):
            raise ShapeError(OP, [], "dimension_numbers must be a DotDimensionNumbers or "
                             "((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), "
                             f"got {value!r}") from None
        return cls(lc, rc, lb, rb)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> DotDimensionNumbers:
        names = [f.name for f in fields(cls)]
        unknown = set(value) - set(names)
        missing = set(names[:2]) - set(value)
        if unknown or missing:
            raise ShapeError(OP, [], f"dot dimension numbers need the keys {names} (the batch ones "
                             f"may be left out); unknown {sorted(unknown)}, missing {sorted(missing)}")
        return cls(**{k: value.get(k, ()) for k in names})

    def as_dict(self) -> dict[str, tuple[int, ...]]:
        """The op's four I64_ARRAY attributes (one per field, same names)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


DOT_FIELDS = tuple(f.name for f in fields(DotDimensionNumbers))


def normalize_precision(precision_config: Any) -> str:
    """None, a level ("DEFAULT"/"HIGH"/"HIGHEST", or an enum with that `.name`) or a pair
    of them -> the attribute text "LHS,RHS"."""
    if precision_config is None:
        return "DEFAULT,DEFAULT"
    if isinstance(precision_config, (str, bytes)) or hasattr(precision_config, "name"):
        levels = [precision_config, precision_config]
    else:
        try:
            levels = list(precision_config)
        except TypeError:
            raise ShapeError(OP, [], f"precision_config must be None, one of {PRECISIONS} or a "
                             f"pair of them, got {precision_config!r}") from None
    if len(levels) != 2:
        raise ShapeError(OP, [], "precision_config needs one level per operand (2), "
                         f"got {precision_config!r}")
    names = []
    for level in levels:
        name = getattr(level, "name", level)  # jax's lax.Precision members have .name
        name = _PRECISION_ALIASES.get(name.upper(), name.upper()) if isinstance(name, str) else None
        if name not in PRECISIONS:
            raise ShapeError(OP, [], f"unknown precision {level!r}; use one of {PRECISIONS}")
        names.append(name)
    return ",".join(names)


def check_preferred_type(shapes: list[Shape], operand: PrimitiveType, preferred: PrimitiveType,
                         op: str = OP) -> None:
    """XLA's (and jax's) rule for which accumulation/result types an operand type may use."""
    if not preferred.is_array_type:
        raise ShapeError(op, shapes, f"preferred_element_type {preferred} is not an array element type")
    if preferred == operand or operand == P.PRED:
        return
    if operand.is_complex:
        if not preferred.is_complex:
            raise ShapeError(op, shapes, f"preferred_element_type {preferred} would drop the imaginary "
                             f"part of {operand} operands; use a complex type")
    elif operand.is_floating:
        if not (preferred.is_floating or preferred.is_complex):
            raise ShapeError(op, shapes, f"preferred_element_type {preferred} is not a floating-point "
                             f"type; {operand} operands need a float or complex result")
    elif preferred.bit_width < operand.bit_width:  # integers: XLA's MaybeUpcast
        raise ShapeError(op, shapes, f"preferred_element_type {preferred} is narrower than the "
                         f"operand type {operand}")


def _check_dimension_numbers(lhs: Shape, rhs: Shape, d: DotDimensionNumbers, op: str = OP) -> None:
    shapes = [lhs, rhs]
    for kind in ("contracting", "batch"):
        lhs_dims = getattr(d, f"lhs_{kind}_dimensions")
        rhs_dims = getattr(d, f"rhs_{kind}_dimensions")
        if len(lhs_dims) != len(rhs_dims):
            raise ShapeError(op, shapes, f"lhs and rhs must have the same number of {kind} dimensions, "
                             f"got {lhs_dims} and {rhs_dims}")
    for side, shape in (("lhs", lhs), ("rhs", rhs)):
        contracting = getattr(d, f"{side}_contracting_dimensions")
        batch = getattr(d, f"{side}_batch_dimensions")
        for kind, dims in (("contracting", contracting), ("batch", batch)):
            for dim in dims:
                if not 0 <= dim < shape.rank:
                    raise ShapeError(op, shapes, f"{side} {kind} dimension {dim} is out of range for "
                                     f"rank {shape.rank}")
            if len(set(dims)) != len(dims):
                raise ShapeError(op, shapes, f"{side} {kind} dimensions {dims} repeat a dimension")
        both = sorted(set(contracting) & set(batch))
        if both:
            raise ShapeError(op, shapes, f"{side} dimension {both[0]} is both a batch and a "
                             "contracting dimension")
    for kind in ("contracting", "batch"):
        pairs = zip(getattr(d, f"lhs_{kind}_dimensions"), getattr(d, f"rhs_{kind}_dimensions"))
        for ld, rd in pairs:
            if lhs.dimensions[ld] != rhs.dimensions[rd]:
                raise ShapeError(op, shapes, f"{kind} dimension sizes differ: lhs dimension {ld} has "
                                 f"size {lhs.dimensions[ld]}, rhs dimension {rd} has size "
                                 f"{rhs.dimensions[rd]}")


def free_dimensions(rank: int, d: DotDimensionNumbers, side: str) -> list[int]:
    """The dimensions of `side` ("lhs"/"rhs") that are neither batch nor contracting, in order."""
    used = set(getattr(d, f"{side}_contracting_dimensions")) | set(getattr(d, f"{side}_batch_dimensions"))
    return [i for i in range(rank) if i not in used]


def check_dot(op: str, shapes: list[Shape], lhs: Shape, rhs: Shape, d: DotDimensionNumbers,
              precision_config: Any, preferred_element_type: Any, preferred_given: bool) -> PrimitiveType:
    """dot_general's rules, shared by its variants (errors name `op`); returns the result type."""
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")
    _check_dimension_numbers(lhs, rhs, d, op)
    levels = precision_config.split(",") if isinstance(precision_config, str) else []
    if len(levels) != 2 or any(level not in PRECISIONS for level in levels):
        raise ShapeError(op, shapes, f"precision_config must be two of {PRECISIONS} separated by a "
                         f"comma, got {precision_config!r}")
    preferred = P(preferred_element_type)
    lt, rt = lhs.element_type, rhs.element_type
    if lt != rt and not preferred_given:
        raise ShapeError(op, shapes, f"lhs and rhs must have the same element type (got {lt} and {rt}); "
                         "convert one with convert_element_type or pass preferred_element_type")
    check_preferred_type(shapes, lt, preferred, op)
    check_preferred_type(shapes, rt, preferred, op)
    return preferred


def dot_result_dimensions(lhs: Shape, rhs: Shape, d: DotDimensionNumbers,
                          rhs_skip: tuple[int, ...] = ()) -> list[int]:
    """Batch dimensions, then lhs's free ones, then rhs's free ones (minus `rhs_skip`)."""
    return ([lhs.dimensions[i] for i in d.lhs_batch_dimensions]
            + [lhs.dimensions[i] for i in free_dimensions(lhs.rank, d, "lhs")]
            + [rhs.dimensions[i] for i in free_dimensions(rhs.rank, d, "rhs") if i not in rhs_skip])


def infer_dot_general(lhs: Shape, rhs: Shape, *, lhs_contracting_dimensions: tuple[int, ...],
                      rhs_contracting_dimensions: tuple[int, ...], lhs_batch_dimensions: tuple[int, ...],
                      rhs_batch_dimensions: tuple[int, ...], precision_config: str,
                      preferred_element_type: Any, preferred_given: bool = True) -> Shape:
    """XLA's InferDotOpShape. `preferred_given` is builder-only (not an MLIR attribute): the
    builder always fills `preferred_element_type` and says whether the user chose it; text
    parsed from MLIR states its result type, which counts as a choice."""
    d = DotDimensionNumbers(lhs_contracting_dimensions, rhs_contracting_dimensions,
                            lhs_batch_dimensions, rhs_batch_dimensions)
    result = check_dot(OP, [lhs, rhs], lhs, rhs, d, precision_config, preferred_element_type,
                       preferred_given)
    return Shape.array(result, tuple(dot_result_dimensions(lhs, rhs, d)))


define(OpDef("dot_general", (Operand("lhs"), Operand("rhs")),
             {**{name: I64_ARRAY for name in DOT_FIELDS},
              "precision_config": STR, "preferred_element_type": ELEMENT_TYPE},
             infer_dot_general,
             doc="Sum of products over contracting dimensions, with batch dimensions (spec#dot_general)."))


# ---- ragged_dot ---------------------------------------------------------------------------------

RAGGED = "ragged_dot"
RAGGED_FIELDS = ("lhs_ragged_dimensions", "rhs_group_dimensions")


@dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """XLA's RaggedDotDimensionNumbers: a dot's dimension numbers, the one lhs dimension split
    into groups by `group_sizes`, and (when that dimension is not contracted nor a batch one)
    the rhs dimension that selects each group's matrix.

    `dot_dimension_numbers` takes whatever DotDimensionNumbers.of() does (jax's nested pairs).
    """

    dot_dimension_numbers: DotDimensionNumbers
    lhs_ragged_dimensions: tuple[int, ...]
    rhs_group_dimensions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dot_dimension_numbers", DotDimensionNumbers.of(self.dot_dimension_numbers))
        for name in RAGGED_FIELDS:
            object.__setattr__(self, name, _dims(getattr(self, name), name))

    @classmethod
    def of(cls, value: Any) -> RaggedDotDimensionNumbers:
        """An instance, a mapping with the field names, or anything with those attributes
        (jax's lax.RaggedDotDimensionNumbers)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown or "dot_dimension_numbers" not in value or "lhs_ragged_dimensions" not in value:
                raise ShapeError(RAGGED, [], "ragged dot dimension numbers need the keys "
                                 "dot_dimension_numbers, lhs_ragged_dimensions and optionally "
                                 f"rhs_group_dimensions; got {sorted(value)}")
            return cls(**value)
        try:
            return cls(value.dot_dimension_numbers, value.lhs_ragged_dimensions,
                       value.rhs_group_dimensions)
        except AttributeError:
            raise ShapeError(RAGGED, [], "dimension_numbers must be a RaggedDotDimensionNumbers, got "
                             f"{value!r}") from None

    def as_dict(self) -> dict[str, tuple[int, ...]]:
        """The op's six I64_ARRAY attributes."""
        return {**self.dot_dimension_numbers.as_dict(),
                **{name: getattr(self, name) for name in RAGGED_FIELDS}}


def ragged_mode(lhs_ragged: int, d: DotDimensionNumbers) -> str:
    """"batch", "contracting" or "non_contracting": which kind of lhs dimension is ragged."""
    if lhs_ragged in d.lhs_batch_dimensions:
        return "batch"
    if lhs_ragged in d.lhs_contracting_dimensions:
        return "contracting"
    return "non_contracting"


def ragged_prefix_dimensions(lhs_rank: int, lhs_ragged: int, d: DotDimensionNumbers) -> list[int]:
    """The lhs dimensions group_sizes has before its group dimension (chlo's [b..., x..., g]):
    the batch dimensions, then the dimensions of the ragged one's kind that come before it
    (for a ragged batch dimension: only the batch dimensions before it)."""
    batch = list(d.lhs_batch_dimensions)
    mode = ragged_mode(lhs_ragged, d)
    if mode == "batch":
        return batch[: batch.index(lhs_ragged)]
    if mode == "contracting":
        contracting = list(d.lhs_contracting_dimensions)
        return batch + contracting[: contracting.index(lhs_ragged)]
    return batch + [i for i in free_dimensions(lhs_rank, d, "lhs") if i < lhs_ragged]


def infer_ragged_dot(lhs: Shape, rhs: Shape, group_sizes: Shape, *,
                     lhs_contracting_dimensions: tuple[int, ...], rhs_contracting_dimensions: tuple[int, ...],
                     lhs_batch_dimensions: tuple[int, ...],
                     rhs_batch_dimensions: tuple[int, ...], lhs_ragged_dimensions: tuple[int, ...],
                     rhs_group_dimensions: tuple[int, ...], precision_config: str,
                     preferred_element_type: Any, preferred_given: bool = True) -> Shape:
    """chlo.ragged_dot's verifier (StableHLO ChloOps.cpp checkRaggedDotConstraints) on top of
    dot_general's rules; group_sizes must be an integer array (chlo: 2..64-bit integers)."""
    shapes = [lhs, rhs, group_sizes]
    d = DotDimensionNumbers(lhs_contracting_dimensions, rhs_contracting_dimensions,
                            lhs_batch_dimensions, rhs_batch_dimensions)
    result = check_dot(RAGGED, shapes, lhs, rhs, d, precision_config, preferred_element_type,
                       preferred_given)
    if not group_sizes.element_type.is_integral or group_sizes.element_type == P.PRED:
        raise ShapeError(RAGGED, shapes, f"group_sizes must have an integer element type, got "
                         f"{group_sizes.element_type}")
    if len(lhs_ragged_dimensions) != 1:
        raise ShapeError(RAGGED, shapes, "there must be exactly one lhs ragged dimension, got "
                         f"{lhs_ragged_dimensions}")
    ragged = lhs_ragged_dimensions[0]
    if not 0 <= ragged < lhs.rank:
        raise ShapeError(RAGGED, shapes, f"lhs ragged dimension {ragged} is out of range for rank {lhs.rank}")
    prefix = [lhs.dimensions[i] for i in ragged_prefix_dimensions(lhs.rank, ragged, d)]
    if group_sizes.rank == 0:
        raise ShapeError(RAGGED, shapes, "group_sizes must have rank >= 1 (its last dimension counts "
                         "the groups)")
    if group_sizes.rank != 1 and list(group_sizes.dimensions[:-1]) != prefix:
        raise ShapeError(RAGGED, shapes, f"group_sizes must have shape {[*prefix, 'g']} or [g], got "
                         f"{list(group_sizes.dimensions)}")
    groups = group_sizes.dimensions[-1]
    for dim in rhs_group_dimensions:
        if not 0 <= dim < rhs.rank:
            raise ShapeError(RAGGED, shapes, f"rhs group dimension {dim} is out of range for rank {rhs.rank}")
        if dim in d.rhs_batch_dimensions or dim in d.rhs_contracting_dimensions:
            raise ShapeError(RAGGED, shapes, f"rhs group dimension {dim} is also a batch or contracting "
                             "dimension")
    mode = ragged_mode(ragged, d)
    if mode != "non_contracting" and rhs_group_dimensions:
        raise ShapeError(RAGGED, shapes, f"with a ragged {mode} dimension the rhs has no group dimension, "
                         f"got {rhs_group_dimensions}")
    if mode == "non_contracting":
        if len(rhs_group_dimensions) != 1:
            raise ShapeError(RAGGED, shapes, "with a ragged non-contracting dimension the rhs needs exactly "
                             f"one group dimension, got {rhs_group_dimensions}")
        if rhs.dimensions[rhs_group_dimensions[0]] != groups:
            raise ShapeError(RAGGED, shapes, f"rhs group dimension {rhs_group_dimensions[0]} has size "
                             f"{rhs.dimensions[rhs_group_dimensions[0]]}, group_sizes counts {groups} groups")
    dims = dot_result_dimensions(lhs, rhs, d, tuple(rhs_group_dimensions))
    return Shape.array(result, tuple([groups] * (mode == "contracting") + dims))


define(OpDef(RAGGED, (Operand("lhs"), Operand("rhs"), Operand("group_sizes")),
             {**{name: I64_ARRAY for name in (*DOT_FIELDS, *RAGGED_FIELDS)},
              "precision_config": STR, "preferred_element_type": ELEMENT_TYPE},
             infer_ragged_dot,
             doc="dot_general whose lhs ragged dimension is split into groups by group_sizes "
                 "(chlo.ragged_dot)."))


# ---- scaled_dot ---------------------------------------------------------------------------------

SCALED = "scaled_dot"


def scale_blocks(operand: Shape, scale: Shape) -> tuple[int, ...] | None:
    """How many operand elements share one scale along each dimension; None if the shapes do
    not tile (the same rank, every operand size a multiple of the scale's)."""
    if scale.rank != operand.rank:
        return None
    blocks = []
    for n, s in zip(operand.dimensions, scale.dimensions):
        if s == 0:
            if n != 0:
                return None
            blocks.append(1)
        elif n % s:
            return None
        else:
            blocks.append(n // s)
    return tuple(blocks)


def infer_scaled_dot(lhs: Shape, lhs_scale: Shape, rhs: Shape, rhs_scale: Shape, *,
                     lhs_contracting_dimensions: tuple[int, ...], rhs_contracting_dimensions: tuple[int, ...],
                     lhs_batch_dimensions: tuple[int, ...], rhs_batch_dimensions: tuple[int, ...],
                     precision_config: str, preferred_element_type: Any,
                     preferred_given: bool = True) -> Shape:
    """dot_general's rules on the operands; each scale has its operand's rank and tiles it
    (SEMANTICS.md 5.F: defined by the decomposition, scales repeated block-wise)."""
    shapes = [lhs, lhs_scale, rhs, rhs_scale]
    d = DotDimensionNumbers(lhs_contracting_dimensions, rhs_contracting_dimensions,
                            lhs_batch_dimensions, rhs_batch_dimensions)
    result = check_dot(SCALED, shapes, lhs, rhs, d, precision_config, preferred_element_type,
                       preferred_given)
    if not result.is_floating:
        raise ShapeError(SCALED, shapes, f"the result type must be a float type (the scaled operands "
                         f"are computed in it), got {result}")
    for name, operand, scale in (("lhs", lhs, lhs_scale), ("rhs", rhs, rhs_scale)):
        if not (scale.element_type.is_floating or scale.element_type.is_integral) or \
                scale.element_type == P.PRED:
            raise ShapeError(SCALED, shapes, f"{name}_scale must have a real number type, got "
                             f"{scale.element_type}")
        if scale_blocks(operand, scale) is None:
            raise ShapeError(SCALED, shapes, f"{name}_scale {list(scale.dimensions)} does not tile {name} "
                             f"{list(operand.dimensions)}: it needs the same rank and each {name} size a "
                             "multiple of the scale's")
    return Shape.array(result, tuple(dot_result_dimensions(lhs, rhs, d)))


define(OpDef(SCALED, (Operand("lhs"), Operand("lhs_scale"), Operand("rhs"), Operand("rhs_scale")),
             {**{name: I64_ARRAY for name in DOT_FIELDS},
              "precision_config": STR, "preferred_element_type": ELEMENT_TYPE},
             infer_scaled_dot,
             doc="dot_general of block-scaled operands: lhs * lhs_scale and rhs * rhs_scale, each "
                 "scale repeated over its block, computed in the result type."))
