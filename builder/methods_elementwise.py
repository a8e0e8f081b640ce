"""ElementwiseMethods: the hand-written elementwise methods of XlaBuilder (the unary,
binary and direction methods are made from the registry: `builder.methods_generated`).

`compare` and the total-order forms broadcast like the binary ops. `select` also takes
tuple operands under a scalar predicate (XLA's Select), as a tuple of selects of their
elements. Imports `dialect` and `builder.recorder`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dialect.element_types import PrimitiveType, type_of
from ..dialect.errors import ShapeError
from ..dialect.ops_elementwise import COMPARISON_DIRECTIONS, default_comparison_type
from ..dialect.shape import Shape
from . import args
from .broadcasting import broadcast_binary_operands
from .recorder import Recorder
from .xla_op import Scalar, XlaOp


def _total_order(direction: str) -> Callable[..., XlaOp]:
    def method(self: ElementwiseMethods, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar,
               broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return self.compare(lhs, rhs, direction, "TOTALORDER", broadcast_dimensions)

    method.__name__ = f"{direction.lower()}_total_order"
    method.__qualname__ = f"ElementwiseMethods.{method.__name__}"
    method.__doc__ = f"lhs {direction} rhs in XLA's total order (seed 001 {direction}TotalOrder)."
    return method


def _element_type(op: str, operand: Any, t: Any) -> PrimitiveType:
    shapes = [operand.shape] if isinstance(operand, XlaOp) else []
    try:
        new = type_of(t)
    except ShapeError as e:
        raise ShapeError(op, shapes, f"not an element type: {t!r}") from e
    if not new.is_array_type:
        raise ShapeError(op, shapes, f"{new} is not an array element type")
    return new


class ElementwiseMethods(Recorder):
    """compare, select, clamp, type conversions and the seeds' comparison sugar."""

    def compare(self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, direction: str,
                comparison_type: str | None = None,
                broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        """Elementwise comparison; `comparison_type` None picks XLA's default for the type."""
        lhs, rhs = broadcast_binary_operands(self, "compare", lhs, rhs, broadcast_dimensions)
        if direction not in COMPARISON_DIRECTIONS:
            raise ShapeError("compare", [lhs.shape, rhs.shape],
                             f"direction must be one of {COMPARISON_DIRECTIONS}, got {direction!r}")
        if comparison_type is None:
            comparison_type = default_comparison_type(lhs.shape.element_type)
        return self.emit("compare", [lhs, rhs], {"comparison_direction": direction,
                                                 "compare_type": comparison_type})

    eq_total_order = _total_order("EQ")
    ne_total_order = _total_order("NE")
    lt_total_order = _total_order("LT")
    le_total_order = _total_order("LE")
    gt_total_order = _total_order("GT")
    ge_total_order = _total_order("GE")

    def logical_not(self, operand: XlaOp) -> XlaOp:
        """Seed 001's LogicalNot: `not_` on a pred operand."""
        operand = self.check_operand("logical_not", operand)
        if not operand.shape.is_array() or operand.shape.element_type.name != "PRED":
            raise ShapeError("logical_not", [operand.shape], "the operand must be a pred array")
        return self.emit("not", [operand])

    def select(self, pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
        """on_true where pred, else on_false; a scalar pred selects whole operands, tuples
        included (a tuple of the selects of their elements)."""
        pred = self.check_operand("select", pred)
        on_true = self.check_operand("select", on_true)
        on_false = self.check_operand("select", on_false)
        if on_true.shape.is_tuple() or on_false.shape.is_tuple():
            return self._select_tuples(pred, on_true, on_false)
        return self.emit("select", [pred, on_true, on_false])

    def _select_tuples(self, pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
        shapes = [pred.shape, on_true.shape, on_false.shape]
        if pred.shape != Shape.array(PrimitiveType.PRED, ()):
            raise ShapeError("select", shapes, "tuple operands need a scalar pred predicate")
        if _without_layouts(on_true.shape) != _without_layouts(on_false.shape):
            raise ShapeError("select", shapes, "on_true and on_false must have the same shape")
        return self.tuple([self.select(pred, self.get_tuple_element(on_true, i),
                                       self.get_tuple_element(on_false, i))
                           for i in range(len(on_true.shape.tuple_shapes))])

    def clamp(self, min: XlaOp | Scalar, operand: XlaOp,  # noqa: A002 - the contract's name
              max: XlaOp | Scalar) -> XlaOp:  # noqa: A002
        """min(max(operand, min), max); min and max may be scalars (XlaOps or numbers)."""
        operand = self.check_operand("clamp", operand)
        return self.emit("clamp", [self.scalar_as_op("clamp", min, operand), operand,
                                   self.scalar_as_op("clamp", max, operand)])

    def convert_element_type(self, operand: XlaOp, new_element_type: Any) -> XlaOp:
        new = _element_type("convert_element_type", operand, new_element_type)
        return self.emit("convert", [operand], {"new_element_type": new})

    def bitcast_convert_type(self, operand: XlaOp, new_element_type: Any) -> XlaOp:
        new = _element_type("bitcast_convert_type", operand, new_element_type)
        return self.emit("bitcast_convert", [operand], {"new_element_type": new})

    def reduce_precision(self, operand: XlaOp, exponent_bits: int, mantissa_bits: int) -> XlaOp:
        name = "reduce_precision"
        return self.emit(name, [operand], {
            "exponent_bits": args.integer(name, exponent_bits, "exponent_bits"),
            "mantissa_bits": args.integer(name, mantissa_bits, "mantissa_bits")})


def _without_layouts(shape: Shape) -> Shape:
    if shape.is_tuple():
        return Shape.tuple([_without_layouts(s) for s in shape.tuple_shapes])
    return shape.with_default_layout() if shape.is_array() else shape
