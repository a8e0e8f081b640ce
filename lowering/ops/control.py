"""Lowerings of call, composite_call (a call of its decomposition), map, while, case, scan and
optimization_barrier.

Tensor-level computations (call, while bodies and conditions, branches) are
copied from the computation library as xhlo ops into the region that needs
them; the greedy rewriter lowers those copies on its next sweep. Loop state
and branch results travel as their array leaves in storage types (tuples are
flattened). Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...dialect.attributes import operand_groups
from ...dialect.element_types import PrimitiveType
from ...dialect.mlir_types import to_mlir_type_text
from ..patterns.computations import current_library, select_branch
from ..patterns.framework import OpView, cast, lowers, signless_type, to_signless
from ..patterns.tuples import rebuild_tuple, tuple_leaves
from .elementwise import generic


def _raw_operand_leaves(v: OpView, name: str) -> list[ir.Value]:
    """The array leaves of an operand (or operand list), in their own types."""
    group = operand_groups(v.opdef, v.op.operation)[name]
    values = group if isinstance(group, list) else [group]
    return [leaf for value in values for leaf in tuple_leaves(value)]


def _result(v: OpView, leaves: list[ir.Value]) -> ir.Value:
    """The op's (possibly tuple) result rebuilt from its leaves."""
    result_type = v.op.results[0].type
    if str(result_type).startswith("tuple<"):
        return rebuild_tuple(leaves, result_type, cast_leaves=True)
    return cast(leaves[0], result_type)


def _storage(values: list[ir.Value]) -> list[ir.Value]:
    return [to_signless(value) for value in values]


def _scalar_i1(pred_tensor: ir.Value) -> ir.Value:
    """The i1 of a rank-0 pred tensor (stored as i8)."""
    stored = tensor.extract(to_signless(pred_tensor), [])
    return arith.trunci(ir.IntegerType.get_signless(1), stored)


@lowers("call", "composite_call")
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
    operands = [tuple_leaves(value) for value in
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
    return list(operand_groups(v.opdef, v.op.operation)[name])
