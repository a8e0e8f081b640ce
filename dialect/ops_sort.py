"""Ops of the sort family: sort (top_k is builder sugar over it).

Shape rule as XLA's InferVariadicOpShape for kSort plus the comparator check
of its verifier: N >= 1 arrays of equal dimensions (element types may
differ), `dimension` in [0, rank), and a comparator taking 2N scalars, where
parameters 2k and 2k+1 are operand k's element type, returning pred[]. The op
has one result per operand.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import BOOL, INT, OpDef, Operand, define
from .shape import Shape

ProgramShape = tuple[Sequence[Shape], Shape]


def check_sort_operands(inputs: Sequence[Shape], dimension: int) -> None:
    """Everything but the comparator (checked by the builder before tracing it)."""
    op, shapes = "sort", list(inputs)
    if not inputs:
        raise ShapeError(op, shapes, "needs at least one operand")
    for s in inputs:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")
    for s in inputs[1:]:
        if s.dimensions != inputs[0].dimensions:
            raise ShapeError(op, shapes, f"all operands must have the same dimensions, got "
                             f"{inputs[0].dimensions} and {s.dimensions}")
    rank = inputs[0].rank
    if not 0 <= dimension < rank:
        raise ShapeError(op, shapes, f"dimension {dimension} is out of range for rank {rank}"
                         + (" (a scalar cannot be sorted)" if rank == 0 else ""))


def check_comparator(inputs: Sequence[Shape], comparator: ProgramShape) -> None:
    op, shapes = "sort", list(inputs)
    params, result = list(comparator[0]), comparator[1]
    n = len(inputs)
    if len(params) != 2 * n:
        raise ShapeError(op, shapes, f"the comparator must take {2 * n} parameters (two per "
                         f"operand), but takes {len(params)}")
    for i, p in enumerate(params):
        t = inputs[i // 2].element_type
        if not (p.is_array() and p.rank == 0 and p.element_type == t):
            raise ShapeError(op, shapes, f"the comparator's parameter {i} must be {t}[] "
                             f"(operand {i // 2}'s element type), got {p}")
    if not (result.is_array() and result.rank == 0 and result.element_type == PrimitiveType.PRED):
        raise ShapeError(op, shapes, f"the comparator must return pred[], not {result}")


def infer_sort(inputs: tuple[Shape, ...], *, dimension: int, is_stable: bool,
               comparator: ProgramShape) -> Shape:
    check_sort_operands(inputs, dimension)
    check_comparator(inputs, comparator)
    return Shape.tuple([s.with_default_layout() for s in inputs])


define(OpDef("sort", (Operand("inputs", variadic=True),), {"dimension": INT, "is_stable": BOOL},
             infer_sort, results=None, computations=("comparator",),
             doc="Sort N arrays together along one dimension with a comparator (spec#sort)."))
