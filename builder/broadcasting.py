"""XLA's implicit broadcasting for binary ops (seed 000, "Broadcasting semantics").

Scalars broadcast to anything; equal ranks broadcast size-1 ("degenerate")
dimensions; a lower-rank operand is mapped into the higher-rank one by
`broadcast_dimensions` (strictly increasing), after which degenerate
dimensions broadcast as well. The result is expressed with explicit
`broadcast_in_dim` ops, so the dialect's binary ops only ever see equal shapes.
A Python or numpy scalar on one side becomes a constant of the other side's element
type first, as with the operators. Imports `dialect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dialect.errors import ShapeError
from . import args
from .recorder import Recorder, is_number
from .xla_op import XlaOp


def broadcast_to(builder: Recorder, operand: XlaOp, dims: tuple[int, ...],
                 mapping: tuple[int, ...]) -> XlaOp:
    """`operand` broadcast to `dims`, its dimension i landing on output dimension mapping[i]."""
    if operand.shape.dimensions == dims and mapping == tuple(range(len(dims))):
        return operand
    return builder.broadcast_in_dim(operand, dims, mapping)


def scalars_as_ops(builder: Recorder, op: str, lhs: Any, rhs: Any) -> tuple[Any, Any]:
    """A scalar beside an XlaOp as a constant of the op's element type (`b.max(x, 0.0)`)."""
    if isinstance(lhs, XlaOp) and is_number(rhs):
        rhs = builder.scalar_as_op(op, rhs, like=lhs)
    elif isinstance(rhs, XlaOp) and is_number(lhs):
        lhs = builder.scalar_as_op(op, lhs, like=rhs)
    return lhs, rhs


def broadcast_binary_operands(builder: Recorder, op: str, lhs: Any, rhs: Any,
                              broadcast_dimensions: Sequence[int]) -> tuple[XlaOp, XlaOp]:
    lhs, rhs = scalars_as_ops(builder, op, lhs, rhs)
    lhs = builder.check_operand(op, lhs)
    rhs = builder.check_operand(op, rhs)
    shapes = [lhs.shape, rhs.shape]
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")
    bdims = args.ints(op, broadcast_dimensions, "broadcast_dimensions")
    lo, hi = (lhs, rhs) if lhs.shape.rank <= rhs.shape.rank else (rhs, lhs)
    lo_dims, hi_dims = lo.shape.dimensions, hi.shape.dimensions
    if bdims and lo.shape.rank == hi.shape.rank and bdims != tuple(range(hi.shape.rank)):
        raise ShapeError(op, shapes, f"broadcast_dimensions {bdims} must be empty or the identity "
                         "for operands of equal rank")
    if lo.shape.rank == 0:
        mapping: tuple[int, ...] = ()
    elif lo.shape.rank == hi.shape.rank:
        mapping = tuple(range(hi.shape.rank))
    else:
        if not bdims:
            raise ShapeError(op, shapes, "operands of different ranks need broadcast_dimensions "
                             "to map the lower-rank operand into the higher-rank one")
        mapping = bdims
        if len(mapping) != lo.shape.rank:
            raise ShapeError(op, shapes, f"broadcast_dimensions {bdims} must have one entry per "
                             f"dimension of the lower-rank operand ({lo.shape.rank})")
        if any(not 0 <= d < hi.shape.rank for d in mapping):
            raise ShapeError(op, shapes, f"broadcast_dimensions {bdims} out of range for rank "
                             f"{hi.shape.rank}")
        if any(b <= a for a, b in zip(mapping, mapping[1:])):
            raise ShapeError(op, shapes, f"broadcast_dimensions {bdims} must be strictly increasing")
    out = list(hi_dims)
    for i, d in enumerate(mapping):
        a, b = lo_dims[i], hi_dims[d]
        if a != b and 1 not in (a, b):
            raise ShapeError(op, shapes, f"dimension {i} of size {a} is not compatible with "
                             f"dimension {d} of size {b} (sizes must match or one must be 1)")
        out[d] = b if a == 1 else a
    out_dims = tuple(out)
    new_lo = broadcast_to(builder, lo, out_dims, mapping)
    new_hi = broadcast_to(builder, hi, out_dims, tuple(range(hi.shape.rank)))
    return (new_lo, new_hi) if lo is lhs else (new_hi, new_lo)

