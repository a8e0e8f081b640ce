"""Lowering of constants, tuples, broadcast_in_dim and bitcast_convert.

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg

from .elementwise import generic
from .framework import ERASED, NO_MATCH, OpView, lowers, signless_type
from .scalar import Elem


@lowers("constant")
def lower_constant(v: OpView) -> ir.Value:
    value = v.attrs["value"]
    wanted = signless_type(value.type)
    if wanted != value.type:
        value = ir.Attribute.parse(str(value).rsplit(":", 1)[0] + f": {wanted}")
    return arith.ConstantOp(wanted, value).result


@lowers("tuple")
def lower_tuple(v: OpView) -> object:
    # A tuple disappears once every get_tuple_element of it has been forwarded.
    if any(True for _ in v.op.results[0].uses):
        return NO_MATCH
    v.rewriter.erase_op(v.op)
    return ERASED


@lowers("get_tuple_element")
def lower_get_tuple_element(v: OpView) -> object:
    producer = v.op.operands[0].owner
    if isinstance(producer, ir.Block) or producer.operation.name != "xhlo.tuple":
        return NO_MATCH
    return producer.operation.operands[v.attrs["index"]]


@lowers("broadcast_in_dim")
def lower_broadcast_in_dim(v: OpView) -> ir.Value:
    operand_shape = v.shapes["operand"]
    out = v.result_shape
    exprs = []
    for i, d in enumerate(v.attrs["broadcast_dimensions"]):
        if operand_shape.dimensions[i] == 1 and out.dimensions[d] != 1:
            exprs.append(ir.AffineConstantExpr.get(0))
        else:
            exprs.append(ir.AffineDimExpr.get(d))
    in_map = ir.AffineMap.get(out.rank, 0, exprs)
    return generic([v.args["operand"]], [operand_shape], out, v.result_type, lambda x: x,
                   input_maps=[in_map])


@lowers("bitcast_convert")
def lower_bitcast_convert(v: OpView) -> ir.Value:
    src_shape, out = v.shapes["operand"], v.result_shape
    src, dst = Elem(src_shape.element_type), Elem(out.element_type)
    if src.bits == dst.bits:
        return generic([v.args["operand"]], [src_shape], out, v.result_type,
                       lambda x: arith.bitcast(dst.type, x))
    if src.bits > dst.bits:
        return _bitcast_narrowing(v, src, dst)
    return _bitcast_widening(v, src, dst)


def _as_int(e: Elem, x: ir.Value) -> tuple[ir.Type, ir.Value]:
    int_type = ir.IntegerType.get_signless(e.bits)
    return int_type, x if e.t.is_integral else arith.bitcast(int_type, x)


def _bitcast_narrowing(v: OpView, src: Elem, dst: Elem) -> ir.Value:
    """Element i of the wide value becomes a trailing dimension of its parts (little endian)."""
    out = v.result_shape
    rank = out.rank
    in_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank - 1)])

    def body(x: ir.Value) -> ir.Value:
        wide_type, wide = _as_int(src, x)
        part = arith.index_cast(wide_type, linalg.IndexOp(rank - 1).result)
        shift = arith.muli(part, arith.constant(wide_type, dst.bits))
        narrow_int = arith.trunci(ir.IntegerType.get_signless(dst.bits), arith.shrui(wide, shift))
        return narrow_int if dst.t.is_integral else arith.bitcast(dst.type, narrow_int)

    return generic([v.args["operand"]], [v.shapes["operand"]], out, v.result_type, body,
                   input_maps=[in_map])


def _bitcast_widening(v: OpView, src: Elem, dst: Elem) -> ir.Value:
    """The trailing dimension's parts are read through one input map each and joined."""
    out = v.result_shape
    rank = out.rank
    ratio = dst.bits // src.bits
    maps = [ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank)]
                             + [ir.AffineConstantExpr.get(k)]) for k in range(ratio)]
    wide_type = ir.IntegerType.get_signless(dst.bits)

    def body(*parts: ir.Value) -> ir.Value:
        total = arith.constant(wide_type, 0)
        for k, part in enumerate(parts):
            _, narrow = _as_int(src, part)
            piece = arith.shli(arith.extui(wide_type, narrow), arith.constant(wide_type, k * src.bits))
            total = arith.ori(total, piece)
        return total if dst.t.is_integral else arith.bitcast(dst.type, total)

    operand = v.args["operand"]
    return generic([operand] * ratio, [v.shapes["operand"]] * ratio, out, v.result_type, body,
                   input_maps=maps)

