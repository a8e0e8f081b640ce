"""Elementwise StableHLO ops, constants and type conversions."""

from __future__ import annotations

from ..builder import XlaOp
from ..dialect.shape import Shape
from .constants import dense_array
from .importer import OpContext, handles

# StableHLO name -> XlaBuilder method (same operands, same semantics).
UNARY = {
    "abs": "abs", "negate": "neg", "sign": "sign", "floor": "floor", "ceil": "ceil",
    "round_nearest_afz": "round_nearest_afz", "round_nearest_even": "round_nearest_even",
    "exponential": "exp", "exponential_minus_one": "expm1", "log": "log", "log_plus_one": "log1p",
    "logistic": "logistic", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "sine": "sin",
    "cosine": "cos", "tan": "tan", "tanh": "tanh", "is_finite": "is_finite", "not": "not_",
    "count_leading_zeros": "clz", "popcnt": "population_count", "real": "real", "imag": "imag",
}
BINARY = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "remainder": "rem",
    "maximum": "max", "minimum": "min", "power": "pow", "atan2": "atan2", "complex": "complex",
    "and": "and_", "or": "or_", "xor": "xor", "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right_arithmetic", "shift_right_logical": "shift_right_logical",
}


def _unary(method: str):
    def handler(cx: OpContext) -> XlaOp:
        return getattr(cx.b, method)(*cx.operands)
    return handler


def _binary(method: str):
    def handler(cx: OpContext) -> XlaOp:
        lhs, rhs = cx.operands
        return getattr(cx.b, method)(lhs, rhs)
    return handler


for _name, _method in UNARY.items():
    handles(f"stablehlo.{_name}")(_unary(_method))
for _name, _method in BINARY.items():
    handles(f"stablehlo.{_name}")(_binary(_method))


@handles("stablehlo.constant")
def constant(cx: OpContext) -> XlaOp:
    return cx.b.constant(dense_array(cx.op, cx.result_shape, resources=cx.importer.resource))


@handles("stablehlo.compare")
def compare(cx: OpContext) -> XlaOp:
    lhs, rhs = cx.operands
    return cx.b.compare(lhs, rhs, cx.enum("comparison_direction"), cx.enum("compare_type"))


def broadcast_to(cx: OpContext, x: XlaOp, shape: Shape) -> XlaOp:
    """A scalar `x` broadcast to `shape`'s dimensions (StableHLO allows scalar predicates and
    clamp bounds where the builder's XLA forms want full shapes)."""
    if x.shape.rank == 0 and shape.rank > 0:
        return cx.b.broadcast(x, list(shape.dimensions))
    return x


@handles("stablehlo.select")
def select(cx: OpContext) -> XlaOp:
    pred, on_true, on_false = cx.operands
    if on_true.shape.is_array():
        pred = broadcast_to(cx, pred, on_true.shape)
    return cx.b.select(pred, on_true, on_false)


@handles("stablehlo.clamp")
def clamp(cx: OpContext) -> XlaOp:
    low, x, high = cx.operands
    return cx.b.clamp(broadcast_to(cx, low, x.shape), x, broadcast_to(cx, high, x.shape))


@handles("stablehlo.convert")
def convert(cx: OpContext) -> XlaOp:
    return cx.b.convert_element_type(cx.operands[0], cx.result_shape.element_type)


@handles("stablehlo.bitcast_convert")
def bitcast_convert(cx: OpContext) -> XlaOp:
    return cx.b.bitcast_convert_type(cx.operands[0], cx.result_shape.element_type)


@handles("stablehlo.reduce_precision")
def reduce_precision(cx: OpContext) -> XlaOp:
    return cx.b.reduce_precision(cx.operands[0], cx.int("exponent_bits"), cx.int("mantissa_bits"))
