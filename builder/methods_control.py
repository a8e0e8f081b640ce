"""XlaBuilder methods for computations and control flow: call, map, while_,
conditional, optimization_barrier. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dialect.errors import ShapeError
from ..dialect.sequences import int_list as _int_list
from ..dialect.shape import Shape
from .builder import XlaBuilder
from .xla_op import XlaOp


def _operand_list(op_name: str, operands: Any) -> list[XlaOp]:
    if isinstance(operands, XlaOp):
        return [operands]
    if not isinstance(operands, (list, tuple)):
        raise ShapeError(op_name, [], f"operands must be an XlaOp or a list of them, "
                         f"got {type(operands).__name__}")
    return list(operands)


def call(self: XlaBuilder, computation: Any, operands: Sequence[XlaOp] = ()) -> XlaOp:
    """The computation applied to `operands` (XlaOps of its parameter shapes)."""
    ops = _operand_list("call", operands)
    shapes = [self._check_operand("call", o).shape for o in ops]
    comp = self._subcomputation("call", computation, shapes, "computation")
    return self._emit("call", [ops], {"to_apply": comp})


def map(self: XlaBuilder, operands: Any, computation: Any,  # noqa: A001 - the contract's name
        dimensions: Sequence[int] | None = None) -> XlaOp:
    """A scalar computation applied elementwise across same-shape operands."""
    ops = _operand_list("map", operands)
    shapes = [self._check_operand("map", o).shape for o in ops]
    if not shapes:
        raise ShapeError("map", [], "map needs at least one operand")
    if dimensions is None:
        dimensions = range(shapes[0].rank)
    scalars = [Shape.array(s.element_type, ()) if s.is_array() else s for s in shapes]
    comp = self._subcomputation("map", computation, scalars)
    return self._emit("map", [ops], {"dimensions": _int_list(dimensions, "dimensions", "map"),
                                     "computation": comp})


def while_(self: XlaBuilder, condition: Any, body: Any, init: XlaOp) -> XlaOp:
    """Repeat `body` on the state while `condition` returns true; the final state."""
    init = self._check_operand("while_", init)
    cond = self._subcomputation("while", condition, [init.shape], "condition")
    loop_body = self._subcomputation("while", body, [init.shape], "body")
    return self._emit("while", [init], {"cond": cond, "body": loop_body})


def conditional(self: XlaBuilder, branch_index: XlaOp, branch_computations: Sequence[Any],
                branch_operands: Sequence[XlaOp]) -> XlaOp:
    """Run branch `branch_index` (an s32 out of range runs the last one) on its operand;
    a pred index means [true_computation, false_computation]."""
    index = self._check_operand("conditional", branch_index)
    ops = [self._check_operand("conditional", o)
           for o in _operand_list("conditional", branch_operands)]
    if not isinstance(branch_computations, (list, tuple)):
        raise ShapeError("conditional", [index.shape], "branch_computations must be a list")
    if len(ops) != len(branch_computations):
        raise ShapeError("conditional", [index.shape, *(o.shape for o in ops)],
                         f"{len(branch_computations)} branches need as many operands, got {len(ops)}")
    branches = [self._subcomputation("conditional", comp,
                                     [self._check_operand("conditional", o).shape], f"branch {i}")
                for i, (comp, o) in enumerate(zip(branch_computations, ops))]
    return self._emit("case", [index, ops], {"branches": branches})


def optimization_barrier(self: XlaBuilder, operand: XlaOp) -> XlaOp:
    return self._emit("optimization_barrier", [operand])


METHODS: dict[str, Callable[..., Any]] = {
    "call": call, "map": map, "while_": while_, "conditional": conditional,
    "optimization_barrier": optimization_barrier,
}
