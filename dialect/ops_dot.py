"""Ops of the dot family: `dot_general` (`dot` is builder sugar for it).

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


def check_preferred_type(shapes: list[Shape], operand: PrimitiveType, preferred: PrimitiveType) -> None:
    """XLA's (and jax's) rule for which accumulation/result types an operand type may use."""
    if not preferred.is_array_type:
        raise ShapeError(OP, shapes, f"preferred_element_type {preferred} is not an array element type")
    if preferred == operand or operand == P.PRED:
        return
    if operand.is_complex:
        if not preferred.is_complex:
            raise ShapeError(OP, shapes, f"preferred_element_type {preferred} would drop the imaginary "
                             f"part of {operand} operands; use a complex type")
    elif operand.is_floating:
        if not (preferred.is_floating or preferred.is_complex):
            raise ShapeError(OP, shapes, f"preferred_element_type {preferred} is not a floating-point "
                             f"type; {operand} operands need a float or complex result")
    elif preferred.bit_width < operand.bit_width:  # integers: XLA's MaybeUpcast
        raise ShapeError(OP, shapes, f"preferred_element_type {preferred} is narrower than the "
                         f"operand type {operand}")


def _check_dimension_numbers(lhs: Shape, rhs: Shape, d: DotDimensionNumbers) -> None:
    shapes = [lhs, rhs]
    for kind in ("contracting", "batch"):
        lhs_dims = getattr(d, f"lhs_{kind}_dimensions")
        rhs_dims = getattr(d, f"rhs_{kind}_dimensions")
        if len(lhs_dims) != len(rhs_dims):
            raise ShapeError(OP, shapes, f"lhs and rhs must have the same number of {kind} dimensions, "
                             f"got {lhs_dims} and {rhs_dims}")
    for side, shape in (("lhs", lhs), ("rhs", rhs)):
        contracting = getattr(d, f"{side}_contracting_dimensions")
        batch = getattr(d, f"{side}_batch_dimensions")
        for kind, dims in (("contracting", contracting), ("batch", batch)):
            for dim in dims:
                if not 0 <= dim < shape.rank:
                    raise ShapeError(OP, shapes, f"{side} {kind} dimension {dim} is out of range for "
                                     f"rank {shape.rank}")
            if len(set(dims)) != len(dims):
                raise ShapeError(OP, shapes, f"{side} {kind} dimensions {dims} repeat a dimension")
        both = sorted(set(contracting) & set(batch))
        if both:
            raise ShapeError(OP, shapes, f"{side} dimension {both[0]} is both a batch and a "
                             "contracting dimension")
    for kind in ("contracting", "batch"):
        pairs = zip(getattr(d, f"lhs_{kind}_dimensions"), getattr(d, f"rhs_{kind}_dimensions"))
        for ld, rd in pairs:
            if lhs.dimensions[ld] != rhs.dimensions[rd]:
                raise ShapeError(OP, shapes, f"{kind} dimension sizes differ: lhs dimension {ld} has "
                                 f"size {lhs.dimensions[ld]}, rhs dimension {rd} has size "
                                 f"{rhs.dimensions[rd]}")


def free_dimensions(rank: int, d: DotDimensionNumbers, side: str) -> list[int]:
    """The dimensions of `side` ("lhs"/"rhs") that are neither batch nor contracting, in order."""
    used = set(getattr(d, f"{side}_contracting_dimensions")) | set(getattr(d, f"{side}_batch_dimensions"))
    return [i for i in range(rank) if i not in used]


def infer_dot_general(lhs: Shape, rhs: Shape, *, lhs_contracting_dimensions: tuple[int, ...],
                      rhs_contracting_dimensions: tuple[int, ...], lhs_batch_dimensions: tuple[int, ...],
                      rhs_batch_dimensions: tuple[int, ...], precision_config: str,
                      preferred_element_type: Any, preferred_given: bool = True) -> Shape:
    """XLA's InferDotOpShape. `preferred_given` is builder-only (not an MLIR attribute): the
    builder always fills `preferred_element_type` and says whether the user chose it; text
    parsed from MLIR states its result type, which counts as a choice."""
    shapes = [lhs, rhs]
    for s in shapes:
        if not s.is_array():
            raise ShapeError(OP, shapes, f"operands must be arrays, got {s}")
    d = DotDimensionNumbers(lhs_contracting_dimensions, rhs_contracting_dimensions,
                            lhs_batch_dimensions, rhs_batch_dimensions)
    _check_dimension_numbers(lhs, rhs, d)
    levels = precision_config.split(",") if isinstance(precision_config, str) else []
    if len(levels) != 2 or any(level not in PRECISIONS for level in levels):
        raise ShapeError(OP, shapes, f"precision_config must be two of {PRECISIONS} separated by a "
                         f"comma, got {precision_config!r}")
    preferred = P(preferred_element_type)
    lt, rt = lhs.element_type, rhs.element_type
    if lt != rt and not preferred_given:
        raise ShapeError(OP, shapes, f"lhs and rhs must have the same element type (got {lt} and {rt}); "
                         "convert one with convert_element_type or pass preferred_element_type")
    check_preferred_type(shapes, lt, preferred)
    check_preferred_type(shapes, rt, preferred)
    dims = ([lhs.dimensions[i] for i in d.lhs_batch_dimensions]
            + [lhs.dimensions[i] for i in free_dimensions(lhs.rank, d, "lhs")]
            + [rhs.dimensions[i] for i in free_dimensions(rhs.rank, d, "rhs")])
    return Shape.array(preferred, tuple(dims))


define(OpDef("dot_general", (Operand("lhs"), Operand("rhs")),
             {**{name: I64_ARRAY for name in DOT_FIELDS},
              "precision_config": STR, "preferred_element_type": ELEMENT_TYPE},
             infer_dot_general,
             doc="Sum of products over contracting dimensions, with batch dimensions (spec#dot_general)."))
