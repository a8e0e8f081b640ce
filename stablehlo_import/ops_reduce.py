"""Ops with computations: gather/scatter, reduce, reduce_window, select_and_scatter, sort, map."""

from __future__ import annotations

from jaxlib.mlir.dialects import stablehlo as shlo

from ..builder import XlaOp
from ..dialect.ops_indexing import GatherDimensionNumbers, ScatterDimensionNumbers
from .importer import OpContext, handles
from .ops_shape import constant_operand


def _gather_dnums(cx: OpContext) -> GatherDimensionNumbers:
    d = shlo.GatherDimensionNumbers(cx.attr("dimension_numbers"))
    return GatherDimensionNumbers(
        offset_dims=tuple(d.offset_dims), collapsed_slice_dims=tuple(d.collapsed_slice_dims),
        start_index_map=tuple(d.start_index_map), index_vector_dim=int(d.index_vector_dim),
        operand_batching_dims=tuple(d.operand_batching_dims),
        start_indices_batching_dims=tuple(d.start_indices_batching_dims))


@handles("stablehlo.gather")
def gather(cx: OpContext) -> XlaOp:
    operand, indices = cx.operands
    return cx.b.gather(operand, indices, _gather_dnums(cx), cx.ints("slice_sizes"),
                       indices_are_sorted=cx.bool("indices_are_sorted"))


@handles("stablehlo.dynamic_gather")
def dynamic_gather(cx: OpContext) -> XlaOp:
    operand, indices = cx.operands[:2]
    sizes = constant_operand(cx, 2, "slice_sizes")
    return cx.b.gather(operand, indices, _gather_dnums(cx), sizes.tolist(),
                       indices_are_sorted=cx.bool("indices_are_sorted"))


@handles("stablehlo.scatter")
def scatter(cx: OpContext) -> list[XlaOp]:
    operands = cx.operands
    n = (len(operands) - 1) // 2
    inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
    d = shlo.ScatterDimensionNumbers(cx.attr("scatter_dimension_numbers"))
    dnums = ScatterDimensionNumbers(
        update_window_dims=tuple(d.update_window_dims), inserted_window_dims=tuple(d.inserted_window_dims),
        scatter_dims_to_operand_dims=tuple(d.scattered_dims_to_operand_dims),
        index_vector_dim=int(d.index_vector_dim), input_batching_dims=tuple(d.input_batching_dims),
        scatter_indices_batching_dims=tuple(d.scatter_indices_batching_dims))
    result = cx.b.scatter(inputs[0] if n == 1 else inputs, indices, updates[0] if n == 1 else updates,
                          cx.closed(0, "scatter"), dnums,
                          indices_are_sorted=cx.bool("indices_are_sorted"),
                          unique_indices=cx.bool("unique_indices"))
    return cx.unpack(result, n)


def _variadic(cx: OpContext) -> tuple[list[XlaOp], list[XlaOp]]:
    operands = cx.operands
    n = len(operands) // 2
    return operands[:n], operands[n:]


@handles("stablehlo.reduce")
def reduce(cx: OpContext) -> list[XlaOp]:
    inputs, inits = _variadic(cx)
    n = len(inputs)
    result = cx.b.reduce(inputs[0] if n == 1 else inputs, inits[0] if n == 1 else inits,
                         cx.closed(0, "reduce"), cx.ints("dimensions"))
    return cx.unpack(result, n)


def _padding(cx: OpContext, rank: int) -> list[tuple[int, int]]:
    flat = cx.ints("padding", [0] * (2 * rank))
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]


@handles("stablehlo.reduce_window")
def reduce_window(cx: OpContext) -> list[XlaOp]:
    inputs, inits = _variadic(cx)
    n, rank = len(inputs), inputs[0].shape.rank
    ones = [1] * rank
    result = cx.b.reduce_window(
        inputs[0] if n == 1 else inputs, inits[0] if n == 1 else inits, cx.closed(0, "reduce_window"),
        cx.ints("window_dimensions"), cx.ints("window_strides", ones), cx.ints("base_dilations", ones),
        cx.ints("window_dilations", ones), _padding(cx, rank))
    return cx.unpack(result, n)


@handles("stablehlo.select_and_scatter")
def select_and_scatter(cx: OpContext) -> XlaOp:
    operand, source, init = cx.operands
    rank = operand.shape.rank
    return cx.b.select_and_scatter(operand, cx.closed(0, "select"), cx.ints("window_dimensions"),
                                   cx.ints("window_strides", [1] * rank), _padding(cx, rank), source,
                                   init, cx.closed(1, "scatter"))


@handles("stablehlo.sort")
def sort(cx: OpContext) -> list[XlaOp]:
    inputs = cx.operands
    n = len(inputs)
    result = cx.b.sort(inputs[0] if n == 1 else inputs, cx.closed(0, "comparator"),
                       cx.int("dimension", -1), cx.bool("is_stable"))
    return cx.unpack(result, n)


@handles("stablehlo.map")
def map_(cx: OpContext) -> XlaOp:
    return cx.b.map(cx.operands, cx.closed(0, "map"), cx.ints("dimensions"))
