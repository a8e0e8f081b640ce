"""Reads of a `to_tensor restrict` buffer that canonicalization made memref reads, made
tensor reads again before one-shot-bufferize.

A custom call's result is a buffer the call fills, then `to_tensor %buffer restrict
writable` (lowering/ops/custom.py); a later custom call reads it through
`to_buffer %tensor read_only`. Canonicalization folds that pair into `%buffer` itself, so
the later call reads the memref directly: a read one-shot-bufferize's analysis does not
see, breaking `restrict`'s promise that the tensor is the buffer's only way in. A while
loop (or any in-place op) between the two could then update the tensor's buffer in
place, and the later call read the updated values (the differential fuzzer's seed 971352:
a callback's result given to a while loop, which doubled it in place, and to another
callback after it). Every use of such a buffer after its `to_tensor` becomes a
`to_buffer` of the tensor again, read-only where the user only reads it (a custom call's
input operands, `READ_OPERANDS_ATTR`). Imports `patterns` and `walk`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import bufferization

from ..patterns.boundary import READ_OPERANDS_ATTR
from .walk import ops_where


def _after(op: ir.Operation, anchor: ir.Operation) -> bool:
    """Whether `op` (or the op holding it in `anchor`'s block) comes after `anchor`."""
    block = anchor.block
    while op.block != block:
        parent = op.parent
        if parent is None or parent.name == "builtin.module":
            return False
        op = parent.operation if hasattr(parent, "operation") else parent
    for candidate in block.operations:
        if candidate.operation == anchor:
            return True
        if candidate.operation == op:
            return False
    return False


def _read_only(user: ir.Operation, operand: int) -> bool:
    return (READ_OPERANDS_ATTR in user.attributes
            and operand < ir.IntegerAttr(user.attributes[READ_OPERANDS_ATTR]).value)


def restore_tensor_reads(op: Any, pass_: Any) -> None:
    """Module pass (before one-shot-bufferize): every later use of a `to_tensor restrict`
    op's buffer reads the tensor through a `to_buffer` instead."""
    to_tensors = ops_where(op, lambda inner: inner.name == "bufferization.to_tensor"
                           and "restrict" in inner.attributes)
    for to_tensor in (t.operation for t in to_tensors):
        buffer, tensor = to_tensor.operands[0], to_tensor.results[0]
        for use in list(buffer.uses):
            user = use.owner.operation
            if user == to_tensor or not _after(user, to_tensor):
                continue
            with ir.InsertionPoint(user), user.location:
                read = bufferization.to_buffer(buffer.type, tensor,
                                               read_only=_read_only(user, use.operand_number))
            user.operands[use.operand_number] = read
