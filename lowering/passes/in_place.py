"""Elementwise results written over a temporary they are the last reader of.

An elementwise generic's destination is a `tensor.empty`, so bufferization gives
its result a fresh buffer even when one of its inputs is a temporary of the same
shape that nothing reads afterwards: attention's normalized probabilities
`p = exp(s - max) / sum` next to the scores `s` (two 8x512x512 f32 buffers where
XLA's buffer assignment has one). Every fresh buffer is also memory the CPU must
fault in: a temporary of a few MB is mapped anew by malloc on every call.

`elementwise_in_place` makes such an input the generic's destination. It is done
only where one-shot-bufferize then writes in place without a copy: the input is
the result of another linalg op in the same block (a buffer of this computation,
not a parameter, constant or output), read by the generic at the element it
writes (identity map on both sides), and every other reader comes before the
generic in that block. A result that goes to an output buffer keeps its
`tensor.empty` (destinations.output_tensors computes it there). Imports `passes.walk` and generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .generic_attrs import all_parallel, indexing_maps
from .walk import ops_where

_TERMINAL_USERS = ("bufferization.materialize_in_destination", "func.return")


def _candidate(op: Any) -> bool:
    """An all-parallel single-result generic on tensors into a fresh tensor.empty whose
    body does not read its output and whose result is not an output of the function."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    if not isinstance(op.results[0].type, ir.RankedTensorType):
        return False
    if not all_parallel(op):
        return False
    init = op.operands[len(op.operands) - 1]
    if isinstance(init.owner, ir.Block) or init.owner.name != "tensor.empty":
        return False
    block = op.regions[0].blocks[0]
    if any(True for _ in block.arguments[len(block.arguments) - 1].uses):
        return False
    return not any(u.owner.name in _TERMINAL_USERS for u in op.results[0].uses)


def _position(op: Any) -> int:
    """Index of `op` among its block's operations."""
    op = op.operation
    for i, other in enumerate(op.block.operations):
        if other.operation == op:
            return i
    raise AssertionError("op not in its block")


_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def _fresh_temporary(value: ir.Value) -> bool:
    """Whether `value` is a linalg op's result computed in a buffer of its own: its
    destination is a `tensor.empty`, directly or through a `linalg.fill` (not a
    parameter, a constant or an output buffer, whose contents are not ours to write)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or not owner.name.startswith("linalg."):
        return False
    op = owner.operation
    init = op.operands[len(op.operands) - len(op.results) + value.result_number]
    for _ in range(2):
        if isinstance(init.owner, ir.Block):
            return False
        if init.owner.name == "tensor.empty":
            return True
        if init.owner.name != "linalg.fill":
            return False
        init = init.owner.operation.operands[1]
    return False


def _read_before(value: ir.Value, op: Any, here: int) -> bool:
    """Whether every use of `value` other than by `op` reads it as a linalg input in
    `op`'s block before `op` (through reshapes that are only read so too)."""
    block = op.block
    for use in value.uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if user == op:
            continue
        if user.block != block or _position(user) >= here:
            return False
        if user.name in _RESHAPES:
            if not _read_before(user.results[0], op, here):
                return False
        elif not (user.name.startswith("linalg.") and use.operand_number < len(user.operands)
                  - len(user.results)):
            return False
    return True


def _reusable_input(op: Any) -> int | None:
    """The operand number of an input whose buffer the result can take, if any."""
    maps = indexing_maps(op)
    n_in = len(op.operands) - 1
    out_map, result_type = maps[-1], op.results[0].type
    if out_map != ir.AffineMap.get_identity(out_map.n_dims):
        return None
    here = _position(op)
    for k in range(n_in):
        value = op.operands[k]
        if maps[k] != out_map or value.type != result_type or not _fresh_temporary(value):
            continue
        if sum(1 for u in value.uses if u.owner == op) != 1:
            continue  # read twice by the generic: only one operand can be in place
        if value.owner.operation.block == op.block and _read_before(value, op, here):
            return k
    return None


def elementwise_in_place(op: Any, pass_: Any) -> None:
    """Give each elementwise generic the buffer of an input it is the last reader of
    (see the module docstring)."""
    for generic in ops_where(op, lambda inner: inner.name == "linalg.generic" and _candidate(inner)):
        generic = generic.operation
        k = _reusable_input(generic)
        if k is None:
            continue
        empty = generic.operands[len(generic.operands) - 1].owner
        generic.operands[len(generic.operands) - 1] = generic.operands[k]
        if not any(True for _ in empty.results[0].uses):
            empty.erase()
