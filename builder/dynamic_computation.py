"""A computation whose result has a dynamic dimension (issue #16).

Its entry returns ``(padded, size, ...)``, one s32 per dynamic dimension, and names the
bounded shape in the attribute `DYNAMIC_RESULT_ATTR`; its program shape shows the bounded
shape (``f32[<=10]``) and the runtime returns the padded array sliced to the sizes.
Imports `dialect` and `builder.computation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir

from ..dialect.errors import ShapeError
from ..dialect.ops_dynamic import DYNAMIC_RESULT_ATTR
from ..dialect.shape import Shape
from .computation import XlaComputation
from .emit import ModuleEmitter, check_parameters

if TYPE_CHECKING:
    from .recorder import Recorder as XlaBuilder
    from .xla_op import XlaOp


class DynamicResultComputation(XlaComputation):
    """An XlaComputation returning `result_shape` (dynamic) as the tuple `packed_root`."""

    @classmethod
    def of(cls, builder: XlaBuilder, packed_root: XlaOp, result_shape: Shape) -> DynamicResultComputation:
        params = check_parameters(builder)
        comp = cls(builder.name, [p.shape for p in params], result_shape, builder, packed_root)
        comp.as_mlir_text()  # emit now, so errors surface at build()
        return comp

    def emit_into(self, emitter: ModuleEmitter, name: str, private: bool = True) -> None:
        if private:
            raise ShapeError("build", [self._result_shape], f"computation {self.name!r} returns "
                             "a dynamic dimension, which a sub-computation cannot do yet; "
                             "return remove_dynamic_dimension_size(...) of it")
        super().emit_into(emitter, name, private)
        with emitter.context:
            for op in emitter.module.body.operations:
                if op.operation.name == "func.func" and \
                        ir.StringAttr(op.attributes["sym_name"]).value == name:
                    op.attributes[DYNAMIC_RESULT_ATTR] = ir.StringAttr.get(str(self._result_shape))
