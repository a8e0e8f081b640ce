"""Sub-computations as scalar code: the bodies of reductions, sorts, scatters, maps.

A sub-computation is a private `func.func` of xhlo ops on rank-0 tensors. The
lowering of an op that applies it per element (reduce, reduce_window, map,
sort comparators, scatter updates...) needs it as *scalar* arith/math code
inside a linalg region. `ComputationLibrary` keeps an untouched copy of the
module (the greedy rewriter lowers the original's functions meanwhile) and
emits a function's body as scalar ops with the elementwise lowering's own table
(`scalar.elementwise.ELEMENTWISE`), so `add` becomes one `arith.addf` in a `linalg.reduce` body.
Imports `dialect`, `lowering.scalar` and `patterns`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, scf
from mlir.dialects import complex as cx

from ...dialect.attributes import attribute_values, operand_groups
from ...dialect.errors import CompileError
from ...dialect.mlir_types import shape_from_mlir_type_text
from ...dialect.registry import DIALECT, lookup
from ...dialect.shape import Shape
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from ..scalar.elementwise import ELEMENTWISE, ScalarOp
from ..scalar.storage import from_storage, to_storage
from .framework import cast
from .tuples import rebuild_tuple, tuple_leaves


class NotScalar(Exception):
    """The computation uses an op that has no scalar form (e.g. a rank-1 value)."""


class ComputationLibrary:
    """Read-only copies of a module's functions, for emitting them as scalar code."""

    def __init__(self, module_op: ir.Operation) -> None:
        self.module = ir.Module.parse(str(module_op), context=module_op.context)
        self.functions: dict[str, Any] = {}
        for f in self.module.body.operations:
            if f.operation.name == "func.func":
                self.functions[ir.StringAttr(f.attributes["sym_name"]).value] = f

    def signature(self, symbol: str) -> tuple[list[Shape], Shape]:
        ftype = ir.FunctionType(ir.TypeAttr(self.functions[symbol].attributes["function_type"]).value)
        return ([shape_from_mlir_type_text(str(t)) for t in ftype.inputs],
                shape_from_mlir_type_text(str(ftype.results[0])))

    def emit_scalar(self, symbol: str, args: list[ir.Value]) -> list[ir.Value]:
        """The function's result leaves, computed as scalar ops from scalar args.

        Arguments and results are in storage types (signless; i8 for pred), as they
        come out of and go into tensors.
        """
        params, result = self.signature(symbol)
        leaves = result.flatten() if result.is_tuple() else [result]
        args = [from_storage(a, s.element_type) for a, s in zip(args, params, strict=True)]
        values = self._emit_body(symbol, args)
        return [to_storage(v, s.element_type) for v, s in zip(values, leaves, strict=True)]

    def emit_tensor(self, symbol: str, leaves: list[ir.Value]) -> list[ir.Value]:
        """The function's xhlo ops copied to the insertion point (the greedy rewriter lowers
        them on its next sweep): `leaves` are the parameters' array leaves, in order, in
        any storage type; returns the result's leaves (in the function's own types)."""
        f = self.functions[symbol]
        block = f.regions[0].blocks[0]
        it = iter(leaves)
        env: dict[ir.Value, ir.Value] = {}
        for arg in block.arguments:
            shape = shape_from_mlir_type_text(str(arg.type))
            if shape.is_tuple():
                env[arg] = rebuild_tuple([next(it) for _ in shape.flatten()], arg.type, cast_leaves=True)
            else:
                env[arg] = cast(next(it), arg.type)
        for op in block.operations:
            if op.operation.name == "func.return":
                return tuple_leaves(env[op.operands[0]])
            clone = op.operation.clone()
            for i, operand in enumerate(op.operation.operands):
                clone.operands[i] = env[operand]
            for old, new in zip(op.operation.results, clone.results, strict=True):
                env[old] = new
        raise NotScalar(f"@{symbol} has no return")

    def _call_scalar(self, symbol: str, args: list[Any]) -> Any:
        return _structure(self.signature(symbol)[1], self._emit_body(symbol, args))

    def _case_scalar(self, op: ir.Operation, index: ir.Value, branches: list[str],
                     operands: list[Any]) -> Any:
        """A conditional in scalar code: scf.if on a pred, scf.index_switch on an s32."""
        result_shape = self.signature(branches[0])[1]
        types = _compute_types(result_shape)

        def branch(i: int) -> None:
            scf.YieldOp(self._emit_body(branches[i], [operands[i]]))

        return _structure(result_shape, select_branch(index, len(branches), types, branch))

    def _while_scalar(self, cond: str, body: str, init: Any) -> Any:
        """A while loop in scalar code: scf.while over the state's scalar leaves."""
        state_shape = self.signature(body)[1]
        leaves = _leaves(init)
        types = [leaf.type for leaf in leaves]
        loop = scf.WhileOp(types, leaves)
        before = loop.before.blocks.append(*types)
        with ir.InsertionPoint(before):
            (keep_going,) = self._emit_body(cond, [_structure(state_shape, list(before.arguments))])
            scf.ConditionOp(keep_going, list(before.arguments))
        after = loop.after.blocks.append(*types)
        with ir.InsertionPoint(after):
            scf.YieldOp(self._emit_body(body, [_structure(state_shape, list(after.arguments))]))
        return _structure(state_shape, list(loop.results))

    def _emit_body(self, symbol: str, args: list[ir.Value]) -> list[ir.Value]:
        f = self.functions[symbol]
        block = f.regions[0].blocks[0]
        env: dict[ir.Value, Any] = dict(zip(block.arguments, args, strict=True))
        for op in block.operations:
            name = op.operation.name
            if name == "func.return":
                return _leaves(env[op.operands[0]])
            if not name.startswith(DIALECT + "."):
                raise NotScalar(f"{name} in @{symbol}")
            results = self._emit_op(op.operation, env)
            env[op.operation.results[0]] = results
        raise NotScalar(f"@{symbol} has no return")

    def _emit_op(self, op: ir.Operation, env: dict[ir.Value, Any]) -> Any:
        opdef = lookup(op.name)
        kind = opdef.name
        groups = operand_groups(opdef, op)
        attrs = attribute_values(opdef, op)
        if kind == "tuple":
            return ("tuple", [env[v] for v in groups["elements"]])
        if kind == "get_tuple_element":
            value = env[groups["operand"]]
            return value[1][attrs["index"]]
        for value in list(op.operands) + list(op.results):
            shape = shape_from_mlir_type_text(str(value.type))
            if not all(leaf.is_array() and leaf.rank == 0
                       for leaf in (shape.flatten() if shape.is_tuple() else [shape])):
                raise NotScalar(f"{op.name} on {value.type}")
        if kind == "constant":
            return _scalar_constant(attrs["value"], shape_from_mlir_type_text(str(op.results[0].type)))
        if kind in ("broadcast_in_dim", "optimization_barrier"):
            return env[op.operands[0]]
        if kind in ("call", "composite_call"):  # a composite means its decomposition
            return self._call_scalar(attrs["to_apply"], [env[v] for v in groups["operands"]])
        if kind == "case":
            return self._case_scalar(op, env[groups["index"]], attrs["branches"],
                                     [env[v] for v in groups["branch_operands"]])
        if kind == "while":
            return self._while_scalar(attrs["cond"], attrs["body"], env[groups["init"]])
        operand_types = [shape_from_mlir_type_text(str(v.type)).element_type for v in op.operands]
        values = [env[v] for v in op.operands]
        emit = ELEMENTWISE.get(kind)
        if emit is not None:
            return emit(ScalarOp(operand_types, _result_type(op), attrs), values)
        if kind == "bitcast_convert":  # same width here: scalars are rank 0
            return arith.bitcast(Elem(_result_type(op)).type, values[0])
        raise NotScalar(f"{op.name} has no scalar form")


def select_branch(index: ir.Value, count: int, result_types: list[ir.Type],
                  emit_branch: Callable[[int], None]) -> list[ir.Value]:
    """Run branch `index` of `count`: an i1 picks branch 0 (true) or 1 (false); an i32
    picks branch `index`, an index below 0 or at least `count` running the last branch
    (XLA). `emit_branch(i)` builds branch i, ending with its scf.yield.

    Only scf.if, nested for an i32 (one compare per branch), never scf.index_switch:
    one-shot-bufferize does not see through a switch that a result passes an operand
    through unchanged is read-only (a parameter, a constant), and a while loop then
    updated the caller's input array in place (or wrote into a constant: SIGSEGV)."""
    if index.type == ir.IntegerType.get_signless(1):
        if_op = scf.IfOp(index, result_types, has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            emit_branch(0)
        with ir.InsertionPoint(if_op.else_block):
            emit_branch(1)
        return list(if_op.results)
    if count == 1:
        region = scf.ExecuteRegionOp(result_types)
        with ir.InsertionPoint(region.region.blocks.append()):
            emit_branch(0)
        return list(region.results)
    i32 = index.type

    def branches_from(i: int) -> list[ir.Value]:
        if_op = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, index, arith.constant(i32, i)),
                         result_types, has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            emit_branch(i)
        with ir.InsertionPoint(if_op.else_block):
            if i + 2 == count:  # the last branch: also every index out of range
                emit_branch(i + 1)
            else:
                scf.YieldOp(branches_from(i + 1))
        return list(if_op.results)

    return branches_from(0)


def _structure(shape: Shape, leaves: list[Any]) -> Any:
    """Leaves regrouped as the (possibly nested) tuple `shape` describes."""
    it = iter(leaves)

    def build(s: Shape) -> Any:
        return ("tuple", [build(t) for t in s.tuple_shapes]) if s.is_tuple() else next(it)

    return build(shape)


def _compute_types(shape: Shape) -> list[ir.Type]:
    return [Elem(leaf.element_type).type for leaf in (shape.flatten() if shape.is_tuple() else [shape])]


def _result_type(op: ir.Operation) -> Any:
    return shape_from_mlir_type_text(str(op.results[0].type)).element_type


def _leaves(value: Any) -> list[ir.Value]:
    if isinstance(value, tuple) and value and value[0] == "tuple":
        return [leaf for v in value[1] for leaf in _leaves(v)]
    return [value]


def _scalar_constant(attr: ir.Attribute, result: Shape) -> ir.Value:
    dense = ir.DenseElementsAttr(attr)
    shape = shape_from_mlir_type_text(str(dense.type))
    if result.element_type.is_complex:
        # Held as its real view (re, im); see dialect.attributes.elements_attr.
        re, im = (float(v) for v in np.array(dense).reshape(-1)[:2])
        part = Elem(result.element_type.complex_component)
        return cx.create_(Elem(result.element_type).type, part.const(re), part.const(im))
    e = Elem(shape.element_type)
    value = dense.get_splat_value() if dense.is_splat else dense[0]
    if shape.element_type.is_integral or shape.element_type.is_pred:
        raw = ir.IntegerAttr(value).value
        return arith.constant(e.type, conversion.as_signed(raw, e.bits) if e.bits > 1 else raw & 1)
    return arith.ConstantOp(e.type, value).result  # float attributes are already signless


def apply_computation(op_name: str, symbol: str, args: list[ir.Value]) -> list[ir.Value]:
    """The sub-computation `symbol` on scalars (storage types in and out) as scalar code,
    or a CompileError naming the op when it has no scalar form."""
    try:
        return current_library().emit_scalar(symbol, list(args))
    except NotScalar as e:
        raise CompileError(
            f"{op_name}: its computation @{symbol} is not a scalar computation ({e}); only "
            "computations of scalar elementwise ops (arith, compare, select, convert...) can "
            "be lowered", "linalg") from None


_current = threading.local()


def current_library() -> ComputationLibrary:
    library = getattr(_current, "library", None)
    if library is None:
        raise RuntimeError("no computation library: lowering runs outside lower_xhlo")
    return library


def set_current_library(library: ComputationLibrary | None) -> None:
    _current.library = library
