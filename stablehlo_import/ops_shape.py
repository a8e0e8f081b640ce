"""Shape and data-movement ops, tuples, and the dynamic-shape ops whose shape operands are
constants (what is left of them after shape refinement)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..builder import XlaOp
from ..dialect.shape import Shape
from .constants import dense_array
from .importer import OpContext, _defining_op, handles
from .types import Unsupported, shape_of


def constant_operand(cx: OpContext, index: int, what: str) -> np.ndarray:
    """The value of operand `index` when a constant defines it; Unsupported otherwise."""
    owner = _defining_op(cx.op.operands[index])
    if owner is None or owner.name != "stablehlo.constant":
        raise Unsupported(f"its {what} (operand {index}) is not a constant after shape refinement: "
                          "the shape stays dynamic (xlamlir compiles static shapes only)")
    return dense_array(owner, shape_of(owner.results[0].type), resources=cx.importer.resource)


@handles("stablehlo.reshape", "stablehlo.dynamic_reshape")
def reshape(cx: OpContext) -> XlaOp:
    bounded = _bounds(cx.op.results[0].type)
    if bounded is not None and cx.op.operation.name == "stablehlo.dynamic_reshape":
        operand, shape = cx.operands
        sizes = [cx.b.convert_element_type(cx.b.reshape(cx.b.slice(shape, [i], [i + 1]), []), "s32")
                 for i in range(len(bounded[0]))]
        return cx.b.dynamic_reshape(operand, sizes, *bounded)
    # dynamic_reshape with a static result type: its shape operand can only equal that type.
    return cx.b.reshape(cx.operands[0], list(cx.result_shape.dimensions))


def _bounds(mlir_type: Any) -> tuple[list[int], list[bool]] | None:
    """A bounded tensor type's bounds and dynamic flags (tensor<?x2xf32,
    #stablehlo.bounds<12, ?>> -> [12, 2], [True, False]); None for any other type."""
    text = str(mlir_type)
    m = re.fullmatch(r"tensor<([0-9?x]*)x[^,<>]+,\s*#stablehlo\.bounds<([^>]*)>>", text)
    if m is None:
        return None
    dims = m.group(1).split("x")
    bounds = [b.strip() for b in m.group(2).split(",")]
    if len(dims) != len(bounds) or any(d == "?" and not b.isdigit() for d, b in zip(dims, bounds)):
        raise Unsupported(f"{text}: every dynamic dimension needs a bound")
    return ([int(b) if d == "?" else int(d) for d, b in zip(dims, bounds)], [d == "?" for d in dims])


@handles("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim")
def broadcast_in_dim(cx: OpContext) -> XlaOp:
    return cx.b.broadcast_in_dim(cx.operands[0], list(cx.result_shape.dimensions),
                                 cx.ints("broadcast_dimensions"))


@handles("stablehlo.broadcast")
def broadcast(cx: OpContext) -> XlaOp:
    return cx.b.broadcast(cx.operands[0], cx.ints("broadcast_sizes"))


@handles("stablehlo.transpose")
def transpose(cx: OpContext) -> XlaOp:
    return cx.b.transpose(cx.operands[0], cx.ints("permutation"))


@handles("stablehlo.slice")
def slice_(cx: OpContext) -> XlaOp:
    operand = cx.operands[0]
    return cx.b.slice(operand, cx.ints("start_indices"), cx.ints("limit_indices"),
                      cx.ints("strides", [1] * operand.shape.rank))


@handles("stablehlo.real_dynamic_slice")
def real_dynamic_slice(cx: OpContext) -> XlaOp:
    start = constant_operand(cx, 1, "start_indices")
    limit = constant_operand(cx, 2, "limit_indices")
    strides = constant_operand(cx, 3, "strides")
    return cx.b.slice(cx.operands[0], start.tolist(), limit.tolist(), strides.tolist())


@handles("stablehlo.concatenate")
def concatenate(cx: OpContext) -> XlaOp:
    return cx.b.concat_in_dim(cx.operands, cx.int("dimension"))


def _pad(cx: OpContext, low: Any, high: Any, interior: Any) -> XlaOp:
    operand, value = cx.operands[:2]
    return cx.b.pad(operand, value, [(int(a), int(b), int(c)) for a, b, c in zip(low, high, interior)])


@handles("stablehlo.pad")
def pad(cx: OpContext) -> XlaOp:
    return _pad(cx, cx.ints("edge_padding_low"), cx.ints("edge_padding_high"),
                cx.ints("interior_padding"))


@handles("stablehlo.dynamic_pad")
def dynamic_pad(cx: OpContext) -> XlaOp:
    return _pad(cx, constant_operand(cx, 2, "edge_padding_low"),
                constant_operand(cx, 3, "edge_padding_high"),
                constant_operand(cx, 4, "interior_padding"))


@handles("stablehlo.reverse")
def reverse(cx: OpContext) -> XlaOp:
    return cx.b.rev(cx.operands[0], cx.ints("dimensions"))


@handles("stablehlo.iota", "stablehlo.dynamic_iota")
def iota(cx: OpContext) -> XlaOp:
    shape = cx.result_shape
    return cx.b.iota(Shape.array(shape.element_type, list(shape.dimensions)), cx.int("iota_dimension"))


@handles("stablehlo.dynamic_slice")
def dynamic_slice(cx: OpContext) -> XlaOp:
    operand, *starts = cx.operands
    return cx.b.dynamic_slice(operand, starts, cx.ints("slice_sizes"))


@handles("stablehlo.dynamic_update_slice")
def dynamic_update_slice(cx: OpContext) -> XlaOp:
    operand, update, *starts = cx.operands
    return cx.b.dynamic_update_slice(operand, update, starts)


@handles("stablehlo.get_dimension_size")
def get_dimension_size(cx: OpContext) -> XlaOp:
    return cx.b.get_dimension_size(cx.operands[0], cx.int("dimension"))


@handles("stablehlo.tuple")
def tuple_(cx: OpContext) -> XlaOp:
    return cx.b.tuple(cx.operands)


@handles("stablehlo.get_tuple_element")
def get_tuple_element(cx: OpContext) -> XlaOp:
    return cx.b.get_tuple_element(cx.operands[0], cx.int("index"))


@handles("stablehlo.optimization_barrier")
def optimization_barrier(cx: OpContext) -> list[XlaOp]:
    operands = cx.operands
    if len(operands) == 1:
        return [cx.b.optimization_barrier(operands[0])]
    return cx.unpack(cx.b.optimization_barrier(cx.b.tuple(operands)), len(operands))


@handles("stablehlo.set_dimension_size")
def set_dimension_size(cx: OpContext) -> XlaOp:
    dimension = cx.int("dimension")
    value = cx.b.set_dimension_size(cx.operands[0], cx.operands[1], dimension)
    bounded = _bounds(cx.op.results[0].type)
    if bounded is None or not bounded[1][dimension]:
        # A static result dimension: XLA's RemoveDynamicDimension (the padded data as is).
        value = cx.b.remove_dynamic_dimension_size(value, dimension)
    return value
