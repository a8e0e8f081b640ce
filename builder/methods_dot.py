"""DotMethods: the XlaBuilder methods of the dot family. Imports `dialect` and
`builder.recorder`.

`dot` is sugar: it emits `dot_general` with the dimension numbers of seed 001's Dot.
"""

from __future__ import annotations

from typing import Any

from ..dialect.element_types import type_of
from ..dialect.errors import ShapeError
from ..dialect.ops_dot import DotDimensionNumbers, RaggedDotDimensionNumbers, normalize_precision
from ..dialect.shape import Shape
from .recorder import Recorder
from .xla_op import XlaOp


def _dot_general_hint(lhs: Shape, rhs: Shape) -> str:
    """A dot_general call doing what the user most likely meant by a rank > 2 dot."""
    lr, rr = lhs.rank, rhs.rank
    if lr == rr and lhs.dimensions[:-2] == rhs.dimensions[:-2]:
        batch = tuple(range(lr - 2))
        what, args = "a batch matmul", f"({lr - 1},), ({rr - 2},), {batch}, {batch}"
    else:
        what, args = "numpy.dot's contraction", f"({lr - 1},), ({max(rr - 2, 0)},)"
    return f"for {what} use dot_general(lhs, rhs, DotDimensionNumbers({args}))"


def _preferred(op: str, operands: list[XlaOp], preferred_element_type: Any) -> dict[str, Any]:
    """The preferred_element_type attribute and whether the user chose it (see infer_dot_general)."""
    if preferred_element_type is None:
        preferred = operands[0].shape.element_type  # only read when lhs and rhs agree (see infer)
    else:
        try:
            preferred = type_of(preferred_element_type)
        except ShapeError:
            raise ShapeError(op, [o.shape for o in operands],
                             f"preferred_element_type {preferred_element_type!r} is not an element type"
                             ) from None
    return {"preferred_element_type": preferred, "preferred_given": preferred_element_type is not None}


class DotMethods(Recorder):
    """dot, dot_general, ragged_dot and scaled_dot."""

    def dot_general(self, lhs: XlaOp, rhs: XlaOp, dimension_numbers: Any,
                    precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
        """Sum of products over the contracting dimensions (spec#dot_general).

        `dimension_numbers`: a DotDimensionNumbers or jax's
        `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`. The result
        has the batch dimensions, then lhs's free ones, then rhs's free ones.
        """
        lhs = self.check_operand("dot_general", lhs)
        rhs = self.check_operand("dot_general", rhs)
        dnums = DotDimensionNumbers.of(dimension_numbers)
        return self.emit("dot_general", [lhs, rhs], {
            **dnums.as_dict(),
            "precision_config": normalize_precision(precision_config),
            **_preferred("dot_general", [lhs, rhs], preferred_element_type),
        })

    def ragged_dot(self, lhs: XlaOp, rhs: XlaOp, group_sizes: XlaOp, dimension_numbers: Any,
                   precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
        """dot_general with one lhs dimension split into groups (chlo.ragged_dot).

        `dimension_numbers`: a RaggedDotDimensionNumbers (or jax's). group_sizes [..., g]
        gives the groups' sizes in order along the lhs ragged dimension; an index past
        their sum is in no group. Ragged non-contracting dimension m: rows of group i
        use the rhs matrix i of the rhs group dimension, rows in no group are zero.
        Ragged contracting dimension k: the result gets a leading group dimension, each
        group summing over its own k range. Ragged batch dimension: a plain dot_general.
        """
        ops = [self.check_operand("ragged_dot", x) for x in (lhs, rhs, group_sizes)]
        dnums = RaggedDotDimensionNumbers.of(dimension_numbers)
        return self.emit("ragged_dot", ops, {
            **dnums.as_dict(),
            "precision_config": normalize_precision(precision_config),
            **_preferred("ragged_dot", ops[:2], preferred_element_type),
        })

    def scaled_dot(self, lhs: XlaOp, lhs_scale: XlaOp, rhs: XlaOp, rhs_scale: XlaOp, dimension_numbers: Any,
                   precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
        """dot_general(lhs * lhs_scale, rhs * rhs_scale) (seed 001 ScaledDot).

        Each scale has its operand's rank; along every dimension one scale element covers
        a block of operand size // scale size elements (e.g. one f8e8m0fnu scale per 32
        contracting elements). Operands and scales are converted to the result type and
        multiplied there, then contracted as dot_general does.
        """
        ops = [self.check_operand("scaled_dot", x) for x in (lhs, lhs_scale, rhs, rhs_scale)]
        dnums = DotDimensionNumbers.of(dimension_numbers)
        return self.emit("scaled_dot", ops, {
            **dnums.as_dict(),
            "precision_config": normalize_precision(precision_config),
            **_preferred("scaled_dot", [ops[0], ops[2]], preferred_element_type),
        })

    def dot(self, lhs: XlaOp, rhs: XlaOp, precision_config: Any = None,
            preferred_element_type: Any = None) -> XlaOp:
        """Seed 001's Dot for rank <= 2: vector.vector, matrix.vector, vector.matrix, matrix.matrix.

        Contracts lhs dimension 1 (0 for a vector) with rhs dimension 0. Rank > 2 is
        rejected (SEMANTICS.md D8: the seeds disagree on it) with a dot_general
        fix-it. scalar.scalar is seed 000's plain product; a scalar with an array is
        rejected (use mul).
        """
        lhs = self.check_operand("dot", lhs)
        rhs = self.check_operand("dot", rhs)
        shapes = [lhs.shape, rhs.shape]
        for s in shapes:
            if not s.is_array():
                raise ShapeError("dot", shapes, f"operands must be arrays, got {s}")
        lr, rr = lhs.shape.rank, rhs.shape.rank
        if lr > 2 or rr > 2:
            raise ShapeError("dot", shapes, f"dot takes operands of rank <= 2, got ranks {lr} and {rr}; "
                             + _dot_general_hint(lhs.shape, rhs.shape))
        if (lr == 0) != (rr == 0):
            raise ShapeError("dot", shapes, "dot of a scalar and an array is not a dot product; use mul")
        if lr == 0:
            dnums = DotDimensionNumbers((), ())
        else:
            lc = 0 if lr == 1 else 1
            if lhs.shape.dimensions[lc] != rhs.shape.dimensions[0]:
                raise ShapeError("dot", shapes, f"contracted dimensions differ: lhs dimension {lc} has size "
                                 f"{lhs.shape.dimensions[lc]}, rhs dimension 0 has size "
                                 f"{rhs.shape.dimensions[0]}")
            dnums = DotDimensionNumbers((lc,), (0,))
        return self.dot_general(lhs, rhs, dnums, precision_config, preferred_element_type)
