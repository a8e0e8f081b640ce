"""Lowering of every elementwise op to one `linalg.generic` over the result shape.

The scalar body comes from `lowering.scalar` / `lowering.convert`; scalar
operands of select/clamp are read through a constant indexing map. Imports
`dialect` and the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import linalg, tensor

from ..dialect.shapes import Shape
from . import convert as conv
from . import scalar
from .framework import OpView, lowers
from .scalar import Elem


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
        linalg.YieldOp([body(*block.arguments[: len(inputs)])])
    return op.results[0]


@lowers(*scalar.UNARY)
def lower_unary(v: OpView) -> ir.Value:
    fn = scalar.UNARY[v.opdef.name]
    e = Elem(v.operand_element_type("operand"))
    return generic([v.args["operand"]], [v.shapes["operand"]], v.result_shape, v.result_type,
                   lambda x: fn(e, x))


@lowers(*scalar.BINARY)
def lower_binary(v: OpView) -> ir.Value:
    fn = scalar.BINARY[v.opdef.name]
    e = Elem(v.operand_element_type("lhs"))
    return generic([v.args["lhs"], v.args["rhs"]], [v.shapes["lhs"], v.shapes["rhs"]],
                   v.result_shape, v.result_type, lambda x, y: fn(e, x, y))


@lowers("complex")
def lower_complex(v: OpView) -> ir.Value:
    out = Elem(v.result_shape.element_type)
    return generic([v.args["lhs"], v.args["rhs"]], [v.shapes["lhs"], v.shapes["rhs"]],
                   v.result_shape, v.result_type, lambda x, y: scalar.complex_create(out, x, y))


@lowers("compare")
def lower_compare(v: OpView) -> ir.Value:
    e = Elem(v.operand_element_type("lhs"))
    direction, kind = v.attrs["comparison_direction"], v.attrs["compare_type"]
    return generic([v.args["lhs"], v.args["rhs"]], [v.shapes["lhs"], v.shapes["rhs"]],
                   v.result_shape, v.result_type,
                   lambda x, y: scalar.compare(e, x, y, direction, kind))


@lowers("select")
def lower_select(v: OpView) -> ir.Value:
    from mlir.dialects import arith

    names = ("pred", "on_true", "on_false")
    return generic([v.args[n] for n in names], [v.shapes[n] for n in names], v.result_shape,
                   v.result_type, lambda p, t, f: arith.select(p, t, f))


@lowers("clamp")
def lower_clamp(v: OpView) -> ir.Value:
    e = Elem(v.operand_element_type("operand"))
    names = ("min", "operand", "max")
    return generic([v.args[n] for n in names], [v.shapes[n] for n in names], v.result_shape,
                   v.result_type, lambda lo, x, hi: scalar.clamp(e, lo, x, hi))


@lowers("convert")
def lower_convert(v: OpView) -> ir.Value:
    src = Elem(v.operand_element_type("operand"))
    dst = Elem(v.result_shape.element_type)
    return generic([v.args["operand"]], [v.shapes["operand"]], v.result_shape, v.result_type,
                   lambda x: conv.convert(src, dst, x))


@lowers("reduce_precision")
def lower_reduce_precision(v: OpView) -> ir.Value:
    e = Elem(v.operand_element_type("operand"))
    exponent_bits, mantissa_bits = v.attrs["exponent_bits"], v.attrs["mantissa_bits"]
    return generic([v.args["operand"]], [v.shapes["operand"]], v.result_shape, v.result_type,
                   lambda x: conv.reduce_precision(e, x, exponent_bits, mantissa_bits))
