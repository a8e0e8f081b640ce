"""One destination per op before bufferization.

CSE merges identical `tensor.empty` / `linalg.fill` ops, so two reductions can
share one init tensor. `eliminate-empty-tensors` then makes both write the
same buffer and the second result silently overwrites the first. Giving every
use of a shared init its own copy of the (cheap) init ops restores one
destination per op. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_INIT_OPS = ("tensor.empty", "linalg.fill")


def _shared_inits(op: Any) -> list[Any]:
    found: list[Any] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name in _INIT_OPS and len(inner.results) == 1:
            if sum(1 for _ in inner.results[0].uses) > 1:
                found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _clone_for(init: ir.Operation) -> ir.Value:
    """A fresh copy of `init` (and of a fill's own empty init) just after it."""
    clone = init.clone(ip=ir.InsertionPoint(init))
    if init.name == "linalg.fill":
        dest_owner = clone.operands[1].owner
        if not isinstance(dest_owner, ir.Block) and dest_owner.operation.name == "tensor.empty":
            fresh_empty = dest_owner.operation.clone(ip=ir.InsertionPoint(clone))
            clone.operands[1] = fresh_empty.results[0]
    return clone.results[0]


def split_shared_inits(op: Any, pass_: Any) -> None:
    """Give every use of a shared tensor.empty / linalg.fill its own copy."""
    for init in _shared_inits(op):
        uses = [(use.owner, use.operand_number) for use in init.results[0].uses]
        for owner, index in uses[1:]:
            owner.operands[index] = _clone_for(init)
