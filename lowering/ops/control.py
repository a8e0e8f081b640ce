"""Lowerings of call, map, while, case and optimization_barrier.

Tensor-level computations (call, while bodies and conditions, branches) are
copied from the computation library as xhlo ops into the region that needs
them; the greedy rewriter lowers those copies on its next sweep. Loop state
and branch results travel as their array leaves in storage types (tuples are
flattened). Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.mlir_types import to_mlir_type_text
from ..patterns.boundary import _leaves, _rebuild
from ..patterns.computations import current_library, select_branch
from ..patterns.framework import OpView, lowers, signless_type, to_signless
from .elementwise import generic


def _raw_operand_leaves(v: OpView, name: str) -> list[ir.Value]:
    """The array leaves of an operand (or operand list), in their own types."""
    from ...dialect.attributes import operand_groups

    group = operand_groups(v.opdef, v.op.operation)[name]
    values = group if isinstance(group, list) else [group]
    return [leaf for value in values for leaf in _leaves(value)]


def _result(v: OpView, leaves: list[ir.Value]) -> ir.Value:
    """The op's (possibly tuple) result rebuilt from its leaves."""
    result_type = v.op.results[0].type
    if str(result_type).startswith("tuple<"):
        return _rebuild(leaves, result_type, cast_leaves=True)
    from ..patterns.framework import cast

    return cast(leaves[0], result_type)


def _storage(values: list[ir.Value]) -> list[ir.Value]:
    return [to_signless(value) for value in values]


def _scalar_i1(pred_tensor: ir.Value) -> ir.Value:
    """The i1 of a rank-0 pred tensor (stored as i8)."""
    stored = tensor.extract(to_signless(pred_tensor), [])
    return arith.trunci(ir.IntegerType.get_signless(1), stored)


@lowers("call")
def lower_call(v: OpView) -> ir.Value:
    leaves = current_library().emit_tensor(v.attrs["to_apply"], _raw_operand_leaves(v, "operands"))
    return _result(v, leaves)


@lowers("optimization_barrier")
def lower_optimization_barrier(v: OpView) -> ir.Value:
    return v.op.operands[0]


@lowers("map")
def lower_map(v: OpView) -> ir.Value:
    library = current_library()
    symbol = v.attrs["computation"]
    # from_storage/to_storage are idempotent, so generic's and emit_scalar's compose.
    return generic(v.args["operands"], v.shapes["operands"], v.result_shape, v.result_type,
                   lambda *xs: library.emit_scalar(symbol, list(xs))[0])


@lowers("while")
def lower_while(v: OpView) -> ir.Value:
    library = current_library()
    init = _storage(_raw_operand_leaves(v, "init"))
    types = [value.type for value in init]
    loop = scf.WhileOp(types, init)
    before = loop.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        (pred,) = library.emit_tensor(v.attrs["cond"], list(before.arguments))
        scf.ConditionOp(_scalar_i1(pred), list(before.arguments))
    after = loop.after.blocks.append(*types)
    with ir.InsertionPoint(after):
        scf.YieldOp(_storage(library.emit_tensor(v.attrs["body"], list(after.arguments))))
    return _result(v, list(loop.results))


@lowers("case")
def lower_case(v: OpView) -> ir.Value:
    library = current_library()
    branches = v.attrs["branches"]
    operands = [_leaves(value) for value in
                _operand_list(v, "branch_operands")]
    shape = v.result_shape
    result_types = [signless_type(ir.Type.parse(to_mlir_type_text(leaf)))
                    for leaf in (shape.flatten() if shape.is_tuple() else [shape])]
    index = v.op.operands[0]

    def emit_branch(i: int) -> None:
        scf.YieldOp(_storage(library.emit_tensor(branches[i], operands[i])))

    if v.shapes["index"].element_type == PrimitiveType.PRED:
        scalar_index = _scalar_i1(index)
    else:
        scalar_index = tensor.extract(v.args["index"], [])
    return _result(v, select_branch(scalar_index, len(branches), result_types, emit_branch))


def _operand_list(v: OpView, name: str) -> list[ir.Value]:
    from ...dialect.attributes import operand_groups

    return list(operand_groups(v.opdef, v.op.operation)[name])


# -- loop state in place ------------------------------------------------------------------------

def _computed_into_empty(value: ir.Value, block: ir.Block) -> tuple[ir.Operation, int] | None:
    """(generic, init operand index) when `value` is a result of an all-parallel
    linalg.generic in `block` whose init is a tensor.empty its body never reads."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name != "linalg.generic" or op.parent is None or op.block != block:
        return None
    if any("parallel" not in str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])):
        return None
    n_results = len(op.results)
    index = ir.OpResult(value).result_number
    operand = len(op.operands) - n_results + index
    init = op.operands[operand]
    if isinstance(init.owner, ir.Block) or init.owner.operation.name != "tensor.empty":
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
                found = _computed_into_empty(value, after)
                if found is None or target.type != value.type:
                    continue
                generic, operand = found
                generic.operands[operand] = target
        return ir.WalkResult.ADVANCE

    op.walk(visit)
