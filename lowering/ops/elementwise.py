"""Lowering of every elementwise op to one `linalg.generic` over the result shape.

The scalar body comes from `lowering.scalar` / `lowering.convert`; scalar
operands of select/clamp are read through a constant indexing map. Imports
`dialect` and the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers
from ..scalar import arithmetic as scalar
from ..scalar import conversion as conv
from ..scalar.arithmetic import Elem


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


def from_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A scalar read from a tensor, in the type scalar code computes with
    (i1 for pred, bf16 for bf16; see `framework.signless_type`)."""
    if t == PrimitiveType.PRED and value.type != _I1():
        return arith.trunci(_I1(), value)
    if t == PrimitiveType.BF16 and value.type != ir.BF16Type.get():
        return arith.bitcast(ir.BF16Type.get(), value)
    return value


def to_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A computed scalar in the type tensors store (i8 for pred, i16 for bf16)."""
    if t == PrimitiveType.PRED and value.type == _I1():
        return arith.extui(ir.IntegerType.get_signless(8), value)
    if t == PrimitiveType.BF16 and value.type == ir.BF16Type.get():
        return arith.bitcast(ir.IntegerType.get_signless(16), value)
    return value


def _I1() -> ir.Type:  # noqa: N802 - a type, named as MLIR spells it
    return ir.IntegerType.get_signless(1)


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
