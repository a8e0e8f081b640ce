"""Lowering of every elementwise op to one `linalg.generic` over the result shape.

The scalar body comes from the one table `lowering.scalar.elementwise.ELEMENTWISE`;
scalar operands of select/clamp are read through a constant indexing map.
`generic` is the parallel linalg.generic other op families build on too.
Imports `dialect`, `lowering.scalar` and `lowering.patterns`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import linalg, tensor

from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers
from ..scalar.elementwise import ELEMENTWISE, ScalarOp
from ..scalar.storage import from_storage, to_storage


def generic(inputs: Sequence[ir.Value], input_shapes: Sequence[Shape], out_shape: Shape,
            out_type: ir.Type, body: Callable[..., ir.Value],
            input_maps: Sequence[ir.AffineMap] | None = None) -> ir.Value:
    """A parallel linalg.generic computing body(*input scalars) at every output index."""
    rank = out_shape.rank
    out_elem = ir.RankedTensorType(out_type).element_type
    init = tensor.EmptyOp(list(out_shape.dimensions), out_elem).result
    if input_maps is None:
        input_maps = [ir.AffineMap.get_identity(rank) if s.rank == rank
                      else ir.AffineMap.get(rank, 0, []) for s in input_shapes]
    maps = list(input_maps) + [ir.AffineMap.get_identity(rank)]
    op = linalg.GenericOp_(
        list(inputs), [init], maps,
        ["parallel"] * rank)
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        scalars = [from_storage(a, s.element_type)
                   for a, s in zip(block.arguments[: len(inputs)], input_shapes, strict=True)]
        linalg.YieldOp([to_storage(body(*scalars), out_shape.element_type)])
    return op.results[0]


@lowers(*ELEMENTWISE)
def lower_elementwise(v: OpView) -> ir.Value:
    """One linalg.generic whose body is the op's scalar emitter (`scalar.elementwise`)."""
    names = list(v.args)
    op = ScalarOp([v.operand_element_type(n) for n in names], v.result_shape.element_type, v.attrs)
    emit = ELEMENTWISE[v.opdef.name]
    return generic([v.args[n] for n in names], [v.shapes[n] for n in names], v.result_shape,
                   v.result_type, lambda *xs: emit(op, xs))
