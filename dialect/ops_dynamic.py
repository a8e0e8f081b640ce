"""Bounded dynamic shapes (XLA's SetDimensionSize, DynamicReshape): the xhlo ops and the
entry's dynamic result.

The IR stays static: a value with a dynamic dimension is its padded tensor (the bound),
and its runtime size is an s32 scalar value beside it, which the builder tracks
(`builder/methods_dynamic.py`, docs/architecture.md "Bounded dynamic shapes").
`set_dimension_size` is the identity on the padded data whose size operand readers of the
text can see; `dynamic_reshape` is the one op that moves data by runtime sizes. An entry
whose result has a dynamic dimension returns ``(padded, size, ...)`` and names the bounded
shape in its attribute `DYNAMIC_RESULT_ATTR`; the runtime slices the padded array.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .element_types import PrimitiveType
from .errors import CompileError, ShapeError
from .registry import I64_ARRAY, INT, OpDef, Operand, define
from .shape import Shape

#: Attribute of an entry function returning a dynamic array: its bounded shape's text.
DYNAMIC_RESULT_ATTR = "xhlo.dynamic_result"
_DYNAMIC_RESULT = re.compile(re.escape(DYNAMIC_RESULT_ATTR) + r'\s*=\s*"([^"]*)"')


def check_size_operand(op: str, shapes: Sequence[Shape], size: Shape, what: str) -> None:
    """A runtime dimension size is an s32 scalar (XLA's SetDimensionSize takes int32)."""
    if not size.is_array() or size.rank != 0 or size.element_type is not PrimitiveType.S32:
        raise ShapeError(op, list(shapes), f"{what} must be an s32 scalar, got {size}")


def check_dimension(op: str, operand: Shape, dimension: int) -> None:
    if not operand.is_array():
        raise ShapeError(op, [operand], "the operand must be an array")
    if not 0 <= dimension < operand.rank:
        raise ShapeError(op, [operand], f"dimension {dimension} is out of range for rank {operand.rank}")


def infer_set_dimension_size(operand: Shape, size: Shape, *, dimension: int) -> Shape:
    """The padded data keeps the operand's (static) shape; the builder marks the dimension
    dynamic on the value it returns."""
    check_dimension("set_dimension_size", operand, dimension)
    check_size_operand("set_dimension_size", [operand, size], size, "the size")
    return operand.with_dynamic_dimensions(None)


def infer_dynamic_reshape(operand: Shape, input_sizes: tuple[Shape, ...],
                          output_sizes: tuple[Shape, ...], *,
                          new_size_bounds: tuple[int, ...]) -> Shape:
    shapes = [operand, *input_sizes, *output_sizes]
    if not operand.is_array():
        raise ShapeError("dynamic_reshape", shapes, "the operand must be an array")
    if len(input_sizes) != operand.rank:
        raise ShapeError("dynamic_reshape", shapes, f"got {len(input_sizes)} input sizes for an "
                         f"operand of rank {operand.rank}")
    if len(output_sizes) != len(new_size_bounds):
        raise ShapeError("dynamic_reshape", shapes, f"got {len(output_sizes)} dim_sizes for "
                         f"{len(new_size_bounds)} new_size_bounds; there must be one per dimension")
    for i, s in enumerate((*input_sizes, *output_sizes)):
        check_size_operand("dynamic_reshape", shapes, s, f"size {i}")
    if any(b < 0 for b in new_size_bounds):
        raise ShapeError("dynamic_reshape", shapes, f"new_size_bounds {list(new_size_bounds)} "
                         "has a negative bound")
    return Shape.array(operand.element_type, new_size_bounds)


define(OpDef("set_dimension_size", (Operand("operand"), Operand("size")), {"dimension": INT},
             infer_set_dimension_size, builders={"set_dimension_size": {}},
             doc="The operand's padded data, with dimension `dimension`'s runtime size `size` "
                 "(s32) carried beside it by the builder (spec#set_dimension_size)."))
define(OpDef("dynamic_reshape", (Operand("operand"), Operand("input_sizes", variadic=True),
                                 Operand("output_sizes", variadic=True)),
             {"new_size_bounds": I64_ARRAY}, infer_dynamic_reshape, builders={"dynamic_reshape": {}},
             doc="Reshape of the operand's valid region (runtime `input_sizes`) to the runtime "
                 "`output_sizes`, padded with zeros to `new_size_bounds` (spec#dynamic_reshape)."))


def dynamic_result_of(module_text: str, result: Shape) -> Shape | None:
    """The bounded shape an entry function's attribute names, None for a static entry;
    CompileError unless the entry's `result` is (that shape made static, one s32 per
    dynamic dimension), as the builder emits it."""
    m = _DYNAMIC_RESULT.search(module_text)
    if m is None:
        return None
    try:
        shape = Shape.parse(m.group(1))
    except ShapeError as e:
        raise CompileError(f"{DYNAMIC_RESULT_ATTR}: {e}", "hlo") from None
    count = sum(flag for leaf in shape.flatten() if leaf.is_array() for flag in leaf.dynamic_dimensions)
    expected = Shape.tuple([_static(shape), *[Shape.scalar(PrimitiveType.S32)] * count])
    if result.with_default_layout() != expected:
        raise CompileError(f"{DYNAMIC_RESULT_ATTR} = {shape} needs the entry to return {expected}, "
                           f"not {result}", "hlo")
    return shape


def _static(shape: Shape) -> Shape:
    if shape.is_tuple():
        return Shape.tuple([_static(s) for s in shape.tuple_shapes])
    return shape.with_dynamic_dimensions(None) if shape.is_array() else shape


def slice_to_sizes(shape: Shape, outputs: Sequence[np.ndarray]) -> Any:
    """What an entry returning the dynamic `shape` gives the caller: `outputs` are its padded
    array leaves (depth-first; a token has none), then one s32 size per dynamic dimension,
    in order; every leaf is cut to its sizes, as XLA returns a dynamic literal. A size
    outside [0, bound] is clamped: XLA leaves it undefined, the slice stays in bounds."""
    count = sum(1 for leaf in shape.flatten() if leaf.is_array())
    padded, sizes = iter(outputs[:count]), iter(outputs[count:])

    def build(s: Shape) -> Any:
        if s.is_tuple():
            return tuple(build(e) for e in s.tuple_shapes)
        if s.is_token():
            return None
        index = tuple(slice(0, min(max(int(next(sizes)), 0), bound)) if dynamic else slice(None)
                      for bound, dynamic in zip(s.dimensions, s.dynamic_dimensions))
        array = next(padded)
        return np.ascontiguousarray(array[index]) if s.is_dynamic() else array

    return build(shape)
