"""ControlMethods: the XlaBuilder methods for computations and control flow: call,
composite_call, map, while_, conditional, scan, optimization_barrier. Imports `dialect` and
`builder.recorder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dialect.errors import ShapeError
from ..dialect.ops_control import scan_parameters
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _operand_list(op_name: str, operands: Any) -> list[XlaOp]:
    if isinstance(operands, XlaOp):
        return [operands]
    if not isinstance(operands, (list, tuple)):
        raise ShapeError(op_name, [], f"operands must be an XlaOp or a list of them, "
                         f"got {type(operands).__name__}")
    return list(operands)


class ControlMethods(Recorder):
    """call, composite_call, map, while_, conditional, scan and optimization_barrier."""

    def call(self, computation: Any, operands: Sequence[XlaOp] = ()) -> XlaOp:
        """The computation applied to `operands` (XlaOps of its parameter shapes)."""
        ops = _operand_list("call", operands)
        shapes = [self.check_operand("call", o).shape for o in ops]
        comp = self.trace("call", computation, shapes, "computation")
        return self.emit("call", [ops], {"to_apply": comp})

    def composite_call(self, computation: Any, operands: Sequence[XlaOp], name: str,
                       attributes: str | None = None, version: int = 0) -> XlaOp:
        """A named composite op (seed: CompositeCall): it means a call of `computation`, its
        decomposition; `name`, `attributes` (a stringified attribute dictionary such as
        `"{n = 1 : i32}"`) and `version` are kept on the op for backends and tools, as XLA keeps
        them in the call's frontend attributes."""
        op = "composite_call"
        ops = _operand_list(op, operands)
        shapes = [self.check_operand(op, o).shape for o in ops]
        if not isinstance(name, str):
            raise ShapeError(op, shapes, f"name must be a string, got {type(name).__name__}")
        if attributes is not None and not isinstance(attributes, str):
            raise ShapeError(op, shapes, f"attributes must be a string (a stringified attribute "
                             f"dictionary) or None, got {type(attributes).__name__}")
        comp = self.trace(op, computation, shapes, "computation")
        return self.emit(op, [ops], {"to_apply": comp, "name": name,
                                     "composite_attributes": attributes or "",
                                     "version": args.integer(op, version, "version")})

    def map(self, operands: Any, computation: Any,  # noqa: A001 - the contract's name
            dimensions: Sequence[int] | None = None) -> XlaOp:
        """A scalar computation applied elementwise across same-shape operands."""
        ops = _operand_list("map", operands)
        shapes = [self.check_operand("map", o).shape for o in ops]
        if not shapes:
            raise ShapeError("map", [], "map needs at least one operand")
        if dimensions is None:
            dimensions = range(shapes[0].rank)
        scalars = [Shape.array(s.element_type, ()) if s.is_array() else s for s in shapes]
        comp = self.trace("map", computation, scalars, operands=ops)
        return self.emit("map", [ops], {"dimensions": args.ints("map", dimensions, "dimensions"),
                                         "computation": comp})

    def while_(self, condition: Any, body: Any, init: XlaOp) -> XlaOp:
        """Repeat `body` on the state while `condition` returns true; the final state."""
        init = self.check_operand("while_", init)
        cond = self.trace("while", condition, [init.shape], "condition")
        loop_body = self.trace("while", body, [init.shape], "body")
        return self.emit("while", [init], {"cond": cond, "body": loop_body})

    def conditional(self, branch_index: XlaOp, branch_computations: Sequence[Any],
                    branch_operands: Sequence[XlaOp]) -> XlaOp:
        """Run branch `branch_index` (an s32 out of range runs the last one) on its operand;
        a pred index means [true_computation, false_computation]."""
        index = self.check_operand("conditional", branch_index)
        ops = [self.check_operand("conditional", o)
               for o in _operand_list("conditional", branch_operands)]
        if not isinstance(branch_computations, (list, tuple)):
            raise ShapeError("conditional", [index.shape], "branch_computations must be a list")
        if len(ops) != len(branch_computations):
            raise ShapeError("conditional", [index.shape, *(o.shape for o in ops)],
                             f"{len(branch_computations)} branches need as many operands, got {len(ops)}")
        branches = [self.trace("conditional", comp,
                                         [self.check_operand("conditional", o).shape], f"branch {i}")
                    for i, (comp, o) in enumerate(zip(branch_computations, ops))]
        return self.emit("case", [index, ops], {"branches": branches})

    def scan(self, inputs: Any, inits: Any, to_apply: Any, scan_dimension: int,
             is_reverse: bool = False, is_associative: bool | None = None) -> XlaOp:
        """Apply `to_apply` `(x_0, ..., x_{m-1}, c_0, ..., c_{k-1}) -> (o_0, ..., o_{n-1},
        c'_0, ..., c'_{k-1})` to the inputs' elements along `scan_dimension` in order (from the
        last with `is_reverse`), threading the carries from `inits` (seed: Scan). Returns the
        tuple (outputs..., final carries...): output j stacks every step's o_j along
        `scan_dimension`. `is_associative` (None: unspecified) is kept as a hint: the steps run
        in order whatever it says, so the result is the exact in-order fold."""
        op = "scan"
        xs = [self.check_operand(op, x) for x in _operand_list(op, inputs)]
        cs = [self.check_operand(op, c) for c in _operand_list(op, inits)]
        dimension = args.integer(op, scan_dimension, "scan_dimension")
        params = scan_parameters([x.shape for x in xs], [c.shape for c in cs], dimension)
        if is_associative is None:
            associative = ""
        else:
            associative = "true" if args.flag(op, is_associative, "is_associative") else "false"
        body = self.trace(op, to_apply, params, "to_apply", operands=[*xs, *cs])
        emitted = self.emit(op, [xs, cs], {"to_apply": body, "scan_dimension": dimension,
                                           "is_reverse": args.flag(op, is_reverse, "is_reverse"),
                                           "is_associative": associative})
        return self.results(emitted, True)

    def optimization_barrier(self, operand: XlaOp) -> XlaOp:
        return self.emit("optimization_barrier", [operand])
