"""Output buffers as tensors for one-shot bufferization, and one destination per op.

The entry function writes each result with the memref form of
`bufferization.materialize_in_destination` (readable in the `linalg` stage, and
kept alive by canonicalize, which would erase an unused tensor-form one). Right
before bufferization `output_tensors` moves every output buffer into the tensor
world once, at the top of the function (`to_tensor restrict writable`), and
materializes each result into that tensor. Every write into an output buffer is
then a tensor value that one-shot-bufferize's conflict analysis sees. With the
memref form it could not: after `eliminate-empty-tensors` two in-place ops
(scatters, dynamic_update_slice, sorts, loops) that shared one init were both
computed in one output buffer, and one result silently overwrote the other.

`split_shared_inits` is for speed, not correctness: CSE merges identical
`tensor.empty` / `linalg.fill` ops, and a shared init makes bufferization copy
for all but one of its users; a fresh init per use costs nothing. Imports
`passes.walk`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import bufferization, linalg

from .walk import ops_named

_INIT_OPS = ("tensor.empty", "linalg.fill")
_MATERIALIZE = "bufferization.materialize_in_destination"


def output_tensors(op: Any, pass_: Any) -> None:
    """Turn every memref-form materialization into a function argument into the tensor
    form, its destination one `to_tensor restrict writable` of the argument at the top
    of the function (other `to_tensor`s of that argument are replaced by it), and let
    the result be computed in that buffer where that is safe (`_compute_in_place`)."""
    dests: dict[Any, ir.Value] = {}
    placed: list[tuple[ir.Value, ir.Value]] = []
    for mat in ops_named(op, _MATERIALIZE):
        source, out = mat.operands[0], mat.operands[1]
        if not isinstance(out.type, ir.MemRefType) or not isinstance(out.owner, ir.Block):
            continue
        block = out.owner
        if out not in dests:
            with ir.InsertionPoint.at_block_begin(block), mat.location:
                dests[out] = bufferization.to_tensor(source.type, out, restrict=True, writable=True)
        with ir.InsertionPoint(mat), mat.location:
            bufferization.materialize_in_destination(dests[out].type, source, dests[out])
        mat.erase()
        placed.append((source, dests[out]))
    # The schedules may have put a result in its output already (lowering/schedules.py).
    for loaded in ops_named(op, "bufferization.to_tensor"):
        memref = loaded.operands[0]
        if memref in dests and loaded.results[0] != dests[memref]:
            loaded.results[0].replace_all_uses_with(dests[memref])
            loaded.erase()
    outputs = set(dests.values())
    for source, dest in placed:
        _compute_in_place(source, dest, outputs)


def _single_use(value: ir.Value) -> bool:
    uses = iter(value.uses)
    return next(uses, None) is not None and next(uses, None) is None


def _inputs(op: Any) -> int:
    """How many inputs a linalg op on tensors has: its inits, one per result, come last."""
    return len(op.operands) - len(op.results)


def _only_read(value: ir.Value) -> bool:
    """Whether every use of `value` reads it and none can write its buffer: a linalg
    op's input, an element or size query, the source of a materialization (a value
    returned beside a reduction of it, or returned twice)."""
    for use in value.uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        name = user.name
        if name in (_MATERIALIZE, "tensor.extract", "tensor.dim") and use.operand_number == 0:
            continue
        if name.startswith("linalg.") and use.operand_number < _inputs(user):
            continue
        return False
    return True


def _tied_init(value: ir.Value) -> tuple[Any, int] | None:
    """The (op, operand index) whose buffer `value` is computed in (destination-passing
    style), for the ops results are commonly computed through; None for any other."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    name, k = op.name, value.result_number
    if name.startswith("linalg.") and len(op.results):
        return op, _inputs(op) + k
    if name in ("tensor.insert_slice", "tensor.insert"):
        return op, 1
    if name == "scf.for":
        return op, 3 + k
    if name == "scf.forall":
        outputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[3]
        return op, len(op.operands) - outputs + k
    if name == "scf.while" and _forwards_state(op):
        return op, k
    if name in ("tensor.expand_shape", "tensor.collapse_shape"):
        return op, 0
    return None


def _forwards_state(loop: Any) -> bool:
    """Whether a scf.while's results are its state, in order (the condition passes its
    arguments on unchanged), so result k lives where init k does."""
    before = loop.regions[0].blocks[0]
    condition = list(before.operations)[-1].operation
    forwarded = list(condition.operands)[1:]
    return (len(forwarded) == len(before.arguments) == len(loop.operands)
            and all(f == a for f, a in zip(forwarded, before.arguments)))


def _compute_in_place(source: ir.Value, dest: ir.Value, outputs: set[ir.Value]) -> None:
    """Let a result be computed in its output tensor: the `tensor.empty` its destination
    chain starts from becomes the output; a chain that starts from a value (a
    parameter, a constant: a while loop's or a scatter's initial state) starts from a
    copy of it in the output instead of a fresh buffer copied out at the end.

    What upstream `eliminate-empty-tensors` does, restricted to chains in which every
    value has this one use (the result itself may also be read: `_only_read`): a value
    used elsewhere too (an init two scatters share, a value returned beside an update
    of it) must not live in an output buffer that a later write can reach, and
    one-shot-bufferize cannot always undo that choice ("cannot avoid RaW conflict").
    Such results are computed in a buffer of their own and copied out."""
    value, consumer = source, None
    for _ in range(64):
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.empty":
            if _single_use(value) and value.type == dest.type and not owner.operation.operands:
                value.replace_all_uses_with(dest)
                owner.operation.erase()
            return
        tied = _tied_init(value)
        if tied is None:  # the chain's start: a parameter, a constant, another output...
            if consumer is not None and value not in outputs and value.type == dest.type:
                op, index = consumer
                with ir.InsertionPoint(op), op.location:
                    op.operands[index] = linalg.copy(value, outs=[dest])
            return
        if not (_single_use(value) or value == source and _only_read(value)):
            return
        consumer = tied
        value = tied[0].operands[tied[1]]


def split_shared_inits(op: Any, pass_: Any) -> None:
    """Give every use of a shared tensor.empty / linalg.fill its own copy."""
    for init in ops_named(op, *_INIT_OPS):
        if len(init.results) != 1 or sum(1 for _ in init.results[0].uses) < 2:
            continue
        uses = [(use.owner, use.operand_number) for use in init.results[0].uses]
        for owner, index in uses[1:]:
            owner.operands[index] = _clone_for(init)


def _clone_for(init: ir.Operation) -> ir.Value:
    """A fresh copy of `init` (and of a fill's own empty init) just after it."""
    clone = init.clone(ip=ir.InsertionPoint(init))
    if init.name == "linalg.fill":
        dest_owner = clone.operands[1].owner
        if not isinstance(dest_owner, ir.Block) and dest_owner.operation.name == "tensor.empty":
            fresh_empty = dest_owner.operation.clone(ip=ir.InsertionPoint(clone))
            clone.operands[1] = fresh_empty.results[0]
    return clone.results[0]
