"""Loop state updated in place: the while loops' carried tensors reused across iterations.

A body result computed by an elementwise generic into a fresh `tensor.empty`
is computed into the loop-carried tensor instead, and a rank-0 condition is
read back as scalar code, so no buffer is allocated per iteration. Runs on
the linalg-on-tensors form the lowering produces. Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import tensor

from .generic_attrs import all_parallel


def _computed_into_empty(value: ir.Value, block: ir.Block) -> tuple[ir.Operation, int] | None:
    """(generic, init operand index) when `value` is a result of an all-parallel
    linalg.generic in `block` whose init its body never reads: a tensor.empty, or one of
    its inputs (passes/in_place.py writes an elementwise result over a temporary input;
    a while body's update then belongs in the loop state's buffer instead)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name != "linalg.generic" or op.parent is None or op.block != block:
        return None
    if not all_parallel(op):
        return None
    n_results = len(op.results)
    index = ir.OpResult(value).result_number
    operand = len(op.operands) - n_results + index
    init = op.operands[operand]
    fresh = not isinstance(init.owner, ir.Block) and init.owner.operation.name == "tensor.empty"
    if not fresh and init not in list(op.operands)[:operand]:
        return None
    body = op.regions[0].blocks[0]
    out_arg = body.arguments[len(body.arguments) - n_results + index]
    if any(True for _ in out_arg.uses):
        return None
    return op, operand


def _scalar_condition(before: ir.Block) -> None:
    """Compute a while condition that is a rank-0 elementwise generic read back with
    tensor.extract as scalar code, so that no buffer is allocated per iteration."""
    for extract in list(before.operations):
        extract = extract.operation
        if extract.name != "tensor.extract" or len(extract.operands) != 1:
            continue
        source = extract.operands[0]
        if isinstance(source.owner, ir.Block):
            continue
        generic = source.owner.operation
        if generic.name != "linalg.generic" or generic.block != before or len(generic.results) != 1:
            continue
        if any(not str(v.type).startswith("tensor<") or ir.RankedTensorType(v.type).rank
               for v in generic.operands):
            continue
        body = generic.regions[0].blocks[0]
        ops = list(body.operations)
        n_inputs = len(generic.operands) - 1
        if any(len(o.operation.regions) for o in ops) or any(True for _ in body.arguments[n_inputs].uses):
            continue  # nested regions, or the body reads its (undefined) init
        with ir.InsertionPoint(extract), extract.location:
            mapping = {}
            for arg, value in zip(list(body.arguments)[:n_inputs], list(generic.operands)[:n_inputs]):
                mapping[arg] = tensor.extract(value, [])
            for o in ops[:-1]:
                clone = o.operation.clone(ip=ir.InsertionPoint(extract))
                for k, operand in enumerate(clone.operands):
                    if operand in mapping:
                        clone.operands[k] = mapping[operand]
                for old, new in zip(o.operation.results, clone.results):
                    mapping[old] = new
            yielded = ops[-1].operation.operands[0]
            extract.results[0].replace_all_uses_with(mapping.get(yielded, yielded))


def _single_use_collapse(value: ir.Value, block: ir.Block) -> Any | None:
    """The tensor.collapse_shape in `block` that `value` comes from when the collapse is
    its source's only use (fusion's reshape propagation leaves a [1, n] update collapsed
    to the [n] state)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "tensor.collapse_shape":
        return None
    op = owner.operation
    if op.block != block or sum(1 for _ in op.operands[0].uses) != 1:
        return None
    return op


def _update_last(generic: Any, terminator: Any, collapse: Any | None) -> None:
    """Move a state update that only the yield uses (through `collapse`, if given) to just
    before it. Ops that still read the old state (a while counter used as an index after
    `i + 1`) then read it before it is overwritten, and bufferization needs no copy of
    it per iteration."""
    last = collapse if collapse is not None else terminator
    for result in generic.results:
        if any(use.owner != last for use in result.uses):
            return
    if collapse is not None:
        if any(use.owner != terminator for use in collapse.results[0].uses):
            return
        generic.move_before(terminator)
        collapse.move_before(terminator)
    else:
        generic.move_before(terminator)


def loop_state_in_place(op: Any, pass_: Any) -> None:
    """Let while loops update their state in place: a body result computed by an
    elementwise generic into a fresh `tensor.empty` is computed into the loop-carried
    argument it replaces instead.

    That changes no value (the generic never reads its init), but it makes the yielded
    tensor the same buffer as the iteration's argument, so one-shot-bufferize keeps the
    loop state in one buffer per state element: without it every iteration allocated
    the new state and copied the old one in the condition region. Where the body still
    reads the old state after the update, bufferization's conflict analysis copies it.
    """

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "scf.while":
            _scalar_condition(inner.regions[0].blocks[0])
            after = inner.regions[1].blocks[0]
            terminator = list(after.operations)[-1].operation
            for i, value in enumerate(terminator.operands):
                target = after.arguments[i]
                if target.type != value.type:
                    continue
                collapse = _single_use_collapse(value, after)
                found = _computed_into_empty(value if collapse is None else collapse.operands[0], after)
                if found is None:
                    continue
                generic, operand = found
                if collapse is not None:  # the state seen through the inverse view
                    with ir.InsertionPoint(generic), generic.location:
                        target = tensor.expand_shape(collapse.operands[0].type, target,
                                                     collapse.attributes["reassociation"], [],
                                                     ir.RankedTensorType(collapse.operands[0].type).shape)
                generic.operands[operand] = target
                _update_last(generic, terminator, collapse)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
