"""XlaBuilder methods: generated from the registry for the unary/binary/compare
families, and thin hand-written sugar for the rest of the elementwise ops.

Binary ops and compare get XLA's implicit broadcasting (`builder.broadcasting`).
Imports `dialect` and the builder modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dialect.element_types import type_of
from ..dialect.errors import ShapeError
from ..dialect.ops_elementwise import COMPARISON_DIRECTIONS, default_comparison_type
from ..dialect.registry import REGISTRY, OpDef
from ..dialect.sequences import int_list as _int_list
from .broadcasting import broadcast_binary_operands
from .builder import XlaBuilder
from .xla_op import XlaOp


def _unary_method(opdef: OpDef, method: str) -> Callable[..., XlaOp]:
    def method_fn(self: XlaBuilder, operand: XlaOp) -> XlaOp:
        return self._emit(opdef, [operand])

    method_fn.__name__ = method
    method_fn.__doc__ = opdef.doc
    return method_fn


def _binary_method(opdef: OpDef, method: str) -> Callable[..., XlaOp]:
    def method_fn(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp,
                  broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        lhs, rhs = broadcast_binary_operands(self, opdef.name, lhs, rhs, broadcast_dimensions)
        return self._emit(opdef, [lhs, rhs])

    method_fn.__name__ = method
    method_fn.__doc__ = opdef.doc
    return method_fn


def _direction_method(direction: str) -> Callable[..., XlaOp]:
    def method_fn(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp,
                  broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return self.compare(lhs, rhs, direction, None, broadcast_dimensions)

    method_fn.__name__ = direction.lower()
    method_fn.__doc__ = f"Elementwise lhs {direction} rhs, giving pred (spec#compare)."
    return method_fn


def _total_order_method(direction: str) -> Callable[..., XlaOp]:
    def method_fn(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp,
                  broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return self.compare(lhs, rhs, direction, "TOTALORDER", broadcast_dimensions)

    method_fn.__name__ = f"{direction.lower()}_total_order"
    method_fn.__doc__ = f"lhs {direction} rhs in XLA's total order (seed 001 {direction}TotalOrder)."
    return method_fn


def logical_not(self: XlaBuilder, operand: XlaOp) -> XlaOp:
    """Seed 001's LogicalNot: `not_` on a pred operand."""
    operand = self._check_operand("logical_not", operand)
    if not operand.shape.is_array() or operand.shape.element_type.name != "PRED":
        raise ShapeError("logical_not", [operand.shape], "the operand must be a pred array")
    return self.not_(operand)


def compare(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp, direction: str,
            comparison_type: str | None = None, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
    """Elementwise comparison; `comparison_type` None picks XLA's default for the type."""
    lhs, rhs = broadcast_binary_operands(self, "compare", lhs, rhs, broadcast_dimensions)
    if direction not in COMPARISON_DIRECTIONS:
        raise ShapeError("compare", [lhs.shape, rhs.shape],
                         f"direction must be one of {COMPARISON_DIRECTIONS}, got {direction!r}")
    if comparison_type is None:
        comparison_type = default_comparison_type(lhs.shape.element_type)
    return self._emit("compare", [lhs, rhs], {"comparison_direction": direction,
                                             "compare_type": comparison_type})


def select(self: XlaBuilder, pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    """on_true where pred, else on_false; a scalar pred selects whole operands."""
    return self._emit("select", [pred, on_true, on_false])


def clamp(self: XlaBuilder, min: XlaOp, operand: XlaOp, max: XlaOp) -> XlaOp:  # noqa: A002
    """min(max(operand, min), max); min and max may be scalars."""
    return self._emit("clamp", [min, operand, max])


def convert_element_type(self: XlaBuilder, operand: XlaOp, new_element_type: Any) -> XlaOp:
    new = _element_type("convert_element_type", operand, new_element_type)
    return self._emit("convert", [operand], {"new_element_type": new})


def bitcast_convert_type(self: XlaBuilder, operand: XlaOp, new_element_type: Any) -> XlaOp:
    new = _element_type("bitcast_convert_type", operand, new_element_type)
    return self._emit("bitcast_convert", [operand], {"new_element_type": new})


def reduce_precision(self: XlaBuilder, operand: XlaOp, exponent_bits: int,
                     mantissa_bits: int) -> XlaOp:
    return self._emit("reduce_precision", [operand], {"exponent_bits": int(exponent_bits),
                                                      "mantissa_bits": int(mantissa_bits)})


def broadcast_in_dim(self: XlaBuilder, operand: XlaOp, out_dim_size: Sequence[int],
                     broadcast_dimensions: Sequence[int]) -> XlaOp:
    return self._emit("broadcast_in_dim", [operand], {
        "out_dim_size": _int_list(out_dim_size, "out_dim_size", "broadcast_in_dim"),
        "broadcast_dimensions": _int_list(broadcast_dimensions, "broadcast_dimensions",
                                          "broadcast_in_dim")})


def _element_type(op: str, operand: Any, t: Any) -> Any:
    shapes = [operand.shape] if isinstance(operand, XlaOp) else []
    try:
        new = type_of(t)
    except ShapeError as e:
        raise ShapeError(op, shapes, f"not an element type: {t!r}") from e
    if not new.is_array_type:
        raise ShapeError(op, shapes, f"{new} is not an array element type")
    return new


HAND_WRITTEN = {
    "compare": compare, "select": select, "clamp": clamp,
    "convert_element_type": convert_element_type, "bitcast_convert_type": bitcast_convert_type,
    "reduce_precision": reduce_precision, "broadcast_in_dim": broadcast_in_dim,
}


def install() -> None:
    """Attach every builder method of the registry to XlaBuilder."""
    for opdef in REGISTRY.values():
        for method in opdef.builders:
            if method in HAND_WRITTEN or hasattr(XlaBuilder, method):
                continue
            if opdef.family == "unary":
                setattr(XlaBuilder, method, _unary_method(opdef, method))
            elif opdef.family == "binary":
                setattr(XlaBuilder, method, _binary_method(opdef, method))
            elif opdef.family == "compare":
                setattr(XlaBuilder, method, _direction_method(opdef.builders[method]["comparison_direction"]))
    for name, fn in HAND_WRITTEN.items():
        setattr(XlaBuilder, name, fn)
    for direction in COMPARISON_DIRECTIONS:
        setattr(XlaBuilder, f"{direction.lower()}_total_order", _total_order_method(direction))
    XlaBuilder.logical_not = logical_not  # type: ignore[attr-defined]
