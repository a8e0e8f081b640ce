"""Lowering of constants, tuples, broadcast_in_dim and bitcast_convert.

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg
from mlir.dialects import complex as cx

from ...dialect.element_types import PrimitiveType, dtype_of
from ...dialect.shape import Shape
from ..patterns.framework import ERASED, NO_MATCH, OpView, lowers, signless_type
from ..scalar.arithmetic import Elem
from .elementwise import generic


@lowers("constant")
def lower_constant(v: OpView) -> ir.Value:
    value = v.attrs["value"]
    if v.result_shape.element_type.is_complex:
        return _complex_constant(v, value)
    wanted = signless_type(value.type)
    if v.result_shape.element_type == PrimitiveType.PRED:
        dense = ir.DenseElementsAttr(value)
        if dense.is_splat:  # numpy reads a splat i1 attribute wrongly: garbage past 8 elements
            splat = dense.get_splat_value()
            bit = ir.BoolAttr(splat).value if isinstance(splat, ir.BoolAttr) else ir.IntegerAttr(splat).value
            bits = np.full(v.result_shape.numel, int(bit) & 1, np.uint8)
        else:
            bits = np.array(dense, dtype=np.uint8).reshape(-1)
        if bits.size == 0:
            value = ir.Attribute.parse(f"dense<> : {wanted}")
        else:
            value = ir.Attribute.parse(f'dense<"0x{bits.tobytes().hex().upper()}"> : {wanted}')
    elif (v.result_shape.element_type == PrimitiveType.BF16 or v.result_shape.element_type.is_sub_byte_int
          or v.result_shape.element_type.is_narrow_float):
        raw = _raw_bits(value, v.result_shape)
        value = ir.Attribute.parse(f'dense<"0x{raw.tobytes().hex().upper()}"> : {wanted}'
                                   if raw.size else f"dense<> : {wanted}")
    elif wanted != value.type:
        value = ir.Attribute.parse(str(value).rsplit(":", 1)[0] + f": {wanted}")
    return arith.ConstantOp(wanted, value).result


def _complex_constant(v: OpView, real_view: ir.Attribute) -> ir.Value:
    """complex.create over the (..., 2) real view the constant is held as."""
    pairs = arith.ConstantOp(real_view.type, real_view).result
    out = v.result_shape
    rank = out.rank
    dims = [ir.AffineDimExpr.get(i) for i in range(rank)]
    maps = [ir.AffineMap.get(rank, 0, dims + [ir.AffineConstantExpr.get(k)]) for k in (0, 1)]
    component = Shape.array(out.element_type.complex_component, out.dimensions + (2,))
    element = Elem(out.element_type)
    return generic([pairs, pairs], [component, component], out, v.result_type,
                   lambda re, im: cx.create_(element.type, re, im), input_maps=maps)


@lowers("tuple")
def lower_tuple(v: OpView) -> object:
    # A tuple disappears once every get_tuple_element of it has been forwarded.
    if any(True for _ in v.op.results[0].uses):
        return NO_MATCH
    v.rewriter.erase_op(v.op.operation)
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


def _raw_bits(attr: ir.Attribute, shape: Shape) -> np.ndarray:
    """The stored bit patterns (uint8 or uint16) of a bf16, sub-byte integer or narrow
    float dense attribute, which the Python bindings cannot read as a buffer.

    MLIR prints such elements as decimals, or as hex bit patterns (NaN, -0 forms), or
    the whole array as one hex blob of its storage (one byte per element, two for bf16).
    A sub-byte integer keeps its low bits (the rest zero, as ml_dtypes stores it)."""
    t = shape.element_type
    dtype = dtype_of(t)
    bits = np.dtype(np.uint16) if dtype.itemsize == 2 else np.dtype(np.uint8)
    mask = (1 << t.bit_width) - 1
    text = str(attr)
    if shape.numel == 0:
        return np.zeros(0, bits)
    if '"0x' in text:
        raw = np.frombuffer(bytes.fromhex(text.split('"0x', 1)[1].split('"', 1)[0]), bits) & mask
    else:
        body = text[text.index("<") + 1: text.rindex("> :")]
        tokens = body.replace("[", " ").replace("]", " ").replace(",", " ").split()

        def one(token: str) -> int:
            if token.startswith("0x"):
                return int(token, 16) & mask
            if t.is_integral:
                return int(token) & mask
            return int(np.array(float(token)).astype(dtype).view(bits))

        raw = np.array([one(token) for token in tokens], bits)
    return np.broadcast_to(raw, (shape.numel,)) if raw.size == 1 else raw


@lowers("bitcast_convert")
def lower_bitcast_convert(v: OpView) -> ir.Value:
    """Reinterpretation in the integer domain. bf16 is already stored as i16 (see
    `framework.signless_type`), so no bf16 value, whose NaN payload LLVM would
    rewrite, ever exists. Sub-byte types are stored one per byte (their low bits):
    their parts are cut from and joined into the wider value little-endian, element 0
    in the lowest bits (XLA: s8 0x21 is s4 {1, 2})."""
    src_shape, out = v.shapes["operand"], v.result_shape
    src, dst = Elem(src_shape.element_type), Elem(out.element_type)
    src_int = ir.IntegerType.get_signless(src.bits)
    dst_int = ir.IntegerType.get_signless(dst.bits)
    dst_storage = ir.RankedTensorType(v.result_type).element_type

    def to_int(x: ir.Value) -> ir.Value:
        if x.type == src_int:
            return x
        if isinstance(x.type, ir.IntegerType) and ir.IntegerType(x.type).width > src.bits:
            return arith.trunci(src_int, x)  # a sub-byte value's storage byte
        return arith.bitcast(src_int, x)

    def to_dst(x: ir.Value) -> ir.Value:
        if x.type == dst_storage:
            return x
        if isinstance(dst_storage, ir.IntegerType) and ir.IntegerType(dst_storage).width > dst.bits:
            return arith.extui(dst_storage, x)  # high bits zero, as ml_dtypes stores them
        return arith.bitcast(dst_storage, x)

    operand = v.args["operand"]
    if src.t == dst.t:
        return operand
    if src.bits == dst.bits:
        return generic([operand], [_raw(src_shape)], _raw(out), v.result_type,
                       lambda x: to_dst(to_int(x)))
    if src.bits > dst.bits:
        return _bitcast_narrowing(v, src_int, dst_int, to_int, to_dst)
    return _bitcast_widening(v, src_int, dst_int, to_int, to_dst)


def _raw(shape):
    """The shape seen as integers of its width: `generic` then leaves storage values alone."""
    widths = {2: PrimitiveType.S8, 4: PrimitiveType.S8, 8: PrimitiveType.S8, 16: PrimitiveType.S16,
              32: PrimitiveType.S32, 64: PrimitiveType.S64}  # sub-byte types: their storage byte
    return shape.with_element_type(widths[shape.element_type.bit_width])


def _bitcast_narrowing(v: OpView, src_int, dst_int, to_int, to_dst) -> ir.Value:
    """Element i of the wide value becomes a trailing dimension of its parts (little endian)."""
    out = v.result_shape
    rank = out.rank
    in_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank - 1)])
    narrow_bits = ir.IntegerType(dst_int).width

    def body(x: ir.Value) -> ir.Value:
        wide = to_int(x)
        part = arith.index_cast(src_int, linalg.IndexOp(rank - 1).result)
        shift = arith.muli(part, arith.constant(src_int, narrow_bits))
        return to_dst(arith.trunci(dst_int, arith.shrui(wide, shift)))

    return generic([v.args["operand"]], [_raw(v.shapes["operand"])], _raw(out), v.result_type, body,
                   input_maps=[in_map])


def _bitcast_widening(v: OpView, src_int, dst_int, to_int, to_dst) -> ir.Value:
    """The trailing dimension's parts are read through one input map each and joined."""
    out = v.result_shape
    rank = out.rank
    narrow_bits = ir.IntegerType(src_int).width
    ratio = ir.IntegerType(dst_int).width // narrow_bits
    maps = [ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank)]
                             + [ir.AffineConstantExpr.get(k)]) for k in range(ratio)]

    def body(*parts: ir.Value) -> ir.Value:
        total = arith.constant(dst_int, 0)
        for k, part in enumerate(parts):
            piece = arith.shli(arith.extui(dst_int, to_int(part)), arith.constant(dst_int, k * narrow_bits))
            total = arith.ori(total, piece)
        return to_dst(total)

    operand = v.args["operand"]
    return generic([operand] * ratio, [_raw(v.shapes["operand"])] * ratio, _raw(out), v.result_type,
                   body, input_maps=maps)
