"""CustomCallMethods: XlaBuilder.custom_call. Imports `dialect`, `builder.args` and `builder.recorder`."""

from __future__ import annotations

from collections.abc import Sequence

from ..dialect.errors import ShapeError
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


class CustomCallMethods(Recorder):
    """custom_call."""

    def custom_call(self, call_target_name: str, operands: Sequence[XlaOp], shape: Shape,
                    opaque: str = "", has_side_effect: bool = False) -> XlaOp:
        """A call of the target registered with `xm.register_custom_call`; `shape` is the
        result's (an array or a tuple of arrays, layouts included)."""
        if not isinstance(shape, Shape):
            raise ShapeError("custom_call", [], f"shape must be an xm.Shape, got {type(shape).__name__}")
        args.static_shape("custom_call", shape, hint="return the bounds and the sizes, then "
                          "set_dimension_size")
        ops = [operands] if isinstance(operands, XlaOp) else list(operands)
        return self.emit("custom_call", [ops], {
            "call_target_name": str(call_target_name), "backend_config": str(opaque),
            "has_side_effect": bool(has_side_effect), "result_shape": str(shape)})
