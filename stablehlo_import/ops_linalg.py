"""dot, dot_general, chlo.ragged_dot, convolution, fft, triangular_solve, cholesky, batch norm."""

from __future__ import annotations

from typing import Any

from jaxlib.mlir.dialects import stablehlo as shlo

from ..builder import XlaOp
from ..dialect import dot_algorithms
from ..dialect.errors import ShapeError
from ..dialect.ops_conv import ConvDimensionNumbers
from ..dialect.ops_dot import DotDimensionNumbers, RaggedDotDimensionNumbers
from . import parsing
from .importer import OpContext, handles
from .ops_misc import KNOWN_TARGETS
from .types import Unsupported


def _precision(cx: OpContext) -> list[str] | None:
    attr = cx.attr("precision_config")
    if attr is None:
        return None
    levels = [shlo.PrecisionAttr(a).value for a in attr]
    return levels if len(levels) == 2 else None


def _preferred(cx: OpContext, operands: list[XlaOp]) -> Any:
    """The result element type when it differs from the operands' (XLA's preferred type)."""
    result = cx.result_shape.element_type
    return None if all(o.shape.element_type == result for o in operands) else result


def _algorithm(cx: OpContext) -> dot_algorithms.DotAlgorithm | None:
    """The XLA preset a `#stablehlo.dot_algorithm` names (dialect/dot_algorithms.py); the
    builder then computes its numerics. A combination no preset has is refused."""
    attr = cx.attr("algorithm")
    if attr is None:
        return None
    a = shlo.DotAlgorithm(attr)
    try:
        return dot_algorithms.from_fields(
            str(a.lhs_precision_type), str(a.rhs_precision_type), str(a.accumulation_type),
            a.lhs_component_count, a.rhs_component_count, a.num_primitive_operations,
            a.allow_imprecise_accumulation)
    except ShapeError as e:
        raise Unsupported(f"dot algorithm {attr}: {e.rule}") from None


@handles("stablehlo.dot_general")
def dot_general(cx: OpContext) -> XlaOp:
    lhs, rhs = cx.operands
    d = shlo.DotDimensionNumbers(cx.attr("dot_dimension_numbers"))
    dnums = DotDimensionNumbers(tuple(d.lhs_contracting_dimensions), tuple(d.rhs_contracting_dimensions),
                                tuple(d.lhs_batching_dimensions), tuple(d.rhs_batching_dimensions))
    return cx.b.dot_general(lhs, rhs, dnums, precision_config=_precision(cx),
                            preferred_element_type=_preferred(cx, [lhs, rhs]), algorithm=_algorithm(cx))


def ragged_dot(cx: OpContext) -> XlaOp:
    """A chlo.ragged_dot, kept by parsing.py as a custom_call with its dimension numbers."""
    config = dict(item.split("=", 1) for item in cx.str("backend_config").split(";"))

    def dims(name: str) -> tuple[int, ...]:
        return tuple(int(v) for v in config[name].split(",") if v)

    lhs, rhs, group_sizes = cx.operands
    dnums = RaggedDotDimensionNumbers(
        DotDimensionNumbers(dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions"),
                            dims("lhs_batching_dimensions"), dims("rhs_batching_dimensions")),
        dims("lhs_ragged_dimensions"), dims("rhs_group_dimensions"))
    levels = config["precision"].split(",") if config["precision"] else None
    return cx.b.ragged_dot(lhs, rhs, group_sizes, dnums, precision_config=levels,
                           preferred_element_type=_preferred(cx, [lhs, rhs]))


KNOWN_TARGETS[parsing.RAGGED_DOT_TARGET] = ragged_dot


@handles("stablehlo.dot")
def dot(cx: OpContext) -> XlaOp:
    lhs, rhs = cx.operands
    return cx.b.dot(lhs, rhs, precision_config=_precision(cx),
                    preferred_element_type=_preferred(cx, [lhs, rhs]))


def _conv(cx: OpContext, padding: list[tuple[int, int]]) -> XlaOp:
    lhs, rhs = cx.operands[:2]
    d = shlo.ConvDimensionNumbers(cx.attr("dimension_numbers"))
    dnums = ConvDimensionNumbers(
        d.input_batch_dimension, d.input_feature_dimension, tuple(d.input_spatial_dimensions),
        d.kernel_input_feature_dimension, d.kernel_output_feature_dimension,
        tuple(d.kernel_spatial_dimensions), d.output_batch_dimension, d.output_feature_dimension,
        tuple(d.output_spatial_dimensions))
    n = len(dnums.input_spatial_dimensions)
    ones = [1] * n
    reversal = [bool(x) for x in cx.attr("window_reversal")] if cx.has("window_reversal") else []
    flipped = [dnums.kernel_spatial_dimensions[i] for i, r in enumerate(reversal) if r]
    if flipped:
        rhs = cx.b.rev(rhs, flipped)
    return cx.b.conv_general_dilated(
        lhs, rhs, cx.ints("window_strides", ones), padding, cx.ints("lhs_dilation", ones),
        cx.ints("rhs_dilation", ones), dnums, feature_group_count=cx.int("feature_group_count", 1),
        batch_group_count=cx.int("batch_group_count", 1), precision_config=_precision(cx),
        preferred_element_type=_preferred(cx, [lhs, rhs]))


@handles("stablehlo.convolution")
def convolution(cx: OpContext) -> XlaOp:
    n = len(shlo.ConvDimensionNumbers(cx.attr("dimension_numbers")).input_spatial_dimensions)
    flat = cx.ints("padding", [0] * (2 * n))
    return _conv(cx, [(flat[2 * i], flat[2 * i + 1]) for i in range(n)])


@handles("stablehlo.dynamic_conv")
def dynamic_conv(cx: OpContext) -> XlaOp:
    from .ops_shape import constant_operand

    pads = constant_operand(cx, 2, "padding")
    return _conv(cx, [(int(lo), int(hi)) for lo, hi in pads.reshape(-1, 2)])


@handles("stablehlo.fft")
def fft(cx: OpContext) -> XlaOp:
    return cx.b.fft(cx.operands[0], cx.enum("fft_type"), cx.ints("fft_length"))


@handles("stablehlo.triangular_solve")
def triangular_solve(cx: OpContext) -> XlaOp:
    a, b = cx.operands
    return cx.b.triangular_solve(a, b, cx.bool("left_side"), cx.bool("lower"), cx.bool("unit_diagonal"),
                                 cx.enum("transpose_a"))


@handles("stablehlo.cholesky")
def cholesky(cx: OpContext) -> XlaOp:
    return cx.b.cholesky(cx.operands[0], lower=cx.bool("lower"))


@handles("stablehlo.batch_norm_training")
def batch_norm_training(cx: OpContext) -> list[XlaOp]:
    x, scale, offset = cx.operands
    out = cx.b.batch_norm_training(x, scale, offset, cx.float("epsilon"), cx.int("feature_index"))
    return cx.unpack(out, 3)


@handles("stablehlo.batch_norm_inference")
def batch_norm_inference(cx: OpContext) -> XlaOp:
    x, scale, offset, mean, variance = cx.operands
    return cx.b.batch_norm_inference(x, scale, offset, mean, variance, cx.float("epsilon"),
                                     cx.int("feature_index"))


@handles("stablehlo.batch_norm_grad")
def batch_norm_grad(cx: OpContext) -> list[XlaOp]:
    x, scale, mean, variance, grad = cx.operands
    out = cx.b.batch_norm_grad(x, scale, mean, variance, grad, cx.float("epsilon"), cx.int("feature_index"))
    return cx.unpack(out, 3)
