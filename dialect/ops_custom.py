"""custom_call: a call into user code registered with `xm.register_custom_call`.

The result shape is the one the builder was given (XLA's rule): it is kept as
the attribute `result_shape` in XLA's text form, layout included. Imports
`dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .errors import ShapeError
from .registry import BOOL, STR, OpDef, Operand, define
from .shape import Shape


def infer_custom_call(inputs: tuple[Shape, ...], *, call_target_name: str, backend_config: str,
                      has_side_effect: bool, result_shape: str) -> Shape:
    if not call_target_name:
        raise ShapeError("custom_call", list(inputs), "call_target_name must not be empty")
    for s in inputs:
        if not s.is_array() and not (s.is_tuple() and all(leaf.is_array() for leaf in s.flatten())):
            raise ShapeError("custom_call", list(inputs), f"operand {s} is not an array or a tuple "
                             "of arrays")
    shape = Shape.parse(result_shape)
    if not all(leaf.is_array() for leaf in (shape.flatten() if shape.is_tuple() else [shape])):
        raise ShapeError("custom_call", list(inputs), f"result shape {shape} must be an array or "
                         "a tuple of arrays")
    return shape.with_default_layout() if shape.is_array() else shape


define(OpDef("custom_call", (Operand("inputs", variadic=True),),
             {"call_target_name": STR, "backend_config": STR, "has_side_effect": BOOL,
              "result_shape": STR},
             infer_custom_call, doc="Call registered user code (spec#custom_call)."))
