"""Constants, tuples and broadcast_in_dim: the ops every computation needs.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .errors import ShapeError
from .mlir_types import shape_from_mlir_type_text
from .registry import ELEMENTS, I64_ARRAY, INT, OpDef, Operand, define
from .shape import Shape


def infer_constant(*, value: object, shape: Shape | None = None) -> Shape:
    """From the builder: `shape` is the value's. From parsed text: the attribute's type,
    where the verifier passes the result type as `shape` to check a complex constant's
    real view (see `dialect.attributes.elements_attr`)."""
    if shape is not None and not hasattr(value, "type"):
        return shape
    held = shape_from_mlir_type_text(str(value.type))
    if shape is not None and shape.is_array() and shape.element_type.is_complex:
        expected = Shape.array(shape.element_type.complex_component, shape.dimensions + (2,))
        if held != expected:
            raise ShapeError("constant", [shape], f"a {shape} constant is held as {expected}, got {held}")
        return shape.with_dims(shape.dimensions)
    return held


def infer_tuple(elements: tuple[Shape, ...]) -> Shape:
    return Shape.tuple(elements)


def infer_get_tuple_element(operand: Shape, *, index: int) -> Shape:
    if not operand.is_tuple():
        raise ShapeError("get_tuple_element", [operand], "the operand must be a tuple")
    if not 0 <= index < len(operand.tuple_shapes):
        raise ShapeError("get_tuple_element", [operand],
                         f"index {index} is out of range for a tuple of {len(operand.tuple_shapes)}")
    return operand.tuple_shapes[index]


def infer_broadcast_in_dim(operand: Shape, *, out_dim_size: tuple[int, ...],
                           broadcast_dimensions: tuple[int, ...]) -> Shape:
    op = "broadcast_in_dim"
    if not operand.is_array():
        raise ShapeError(op, [operand], "the operand must be an array")
    if len(broadcast_dimensions) != operand.rank:
        raise ShapeError(op, [operand], f"broadcast_dimensions {broadcast_dimensions} must have "
                         f"one entry per operand dimension ({operand.rank})")
    if any(d < 0 for d in out_dim_size):
        raise ShapeError(op, [operand], f"negative output size in {out_dim_size}")
    if len(set(broadcast_dimensions)) != len(broadcast_dimensions):
        raise ShapeError(op, [operand], f"broadcast_dimensions {broadcast_dimensions} repeat a dimension")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(out_dim_size):
            raise ShapeError(op, [operand], f"broadcast dimension {d} is out of range for "
                             f"output rank {len(out_dim_size)}")
        if operand.dimensions[i] not in (1, out_dim_size[d]):
            raise ShapeError(op, [operand], f"operand dimension {i} (size {operand.dimensions[i]}) "
                             f"must be 1 or equal output dimension {d} (size {out_dim_size[d]})")
    return Shape.array(operand.element_type, out_dim_size)


define(OpDef("constant", (), {"value": ELEMENTS}, infer_constant,
             doc="A literal array (spec#constant)."))
define(OpDef("tuple", (Operand("elements", variadic=True),), {}, infer_tuple,
             doc="Group values into a tuple (spec#tuple)."))
define(OpDef("get_tuple_element", (Operand("operand"),), {"index": INT}, infer_get_tuple_element,
             doc="Element of a tuple (spec#get_tuple_element).",
             builders={"get_tuple_element": {}}))
define(OpDef("broadcast_in_dim", (Operand("operand"),),
             {"out_dim_size": I64_ARRAY, "broadcast_dimensions": I64_ARRAY},
             infer_broadcast_in_dim, doc="Broadcast into a larger shape (spec#broadcast_in_dim).",
             builders={"broadcast_in_dim": {}}))
