"""Control flow: while, if, case, func.call (inlined) and composites (composite_call ops)."""

from __future__ import annotations

from ..builder import XlaOp
from .importer import OpContext, handles


@handles("stablehlo.while")
def while_(cx: OpContext) -> list[XlaOp]:
    b, op = cx.b, cx.op
    operands = cx.operands
    n = len(operands)
    captured = cx.importer.captures(list(op.regions))
    carried = operands + [cx.importer.lookup(cx.env, v, op) for v in captured]
    single = len(carried) == 1
    init = carried[0] if single else b.tuple(carried)
    make = cx.importer.threaded_computation
    condition = make(op.regions[0], init.shape, n, captured, f"{b.name}_cond", False, single)
    body = make(op.regions[1], init.shape, n, captured, f"{b.name}_body", True, single)
    result = b.while_(condition, body, init)
    return [result] if single else [b.get_tuple_element(result, i) for i in range(n)]


def _branches(cx: OpContext, index: XlaOp, role: str) -> list[XlaOp]:
    b, op = cx.b, cx.op
    captured = cx.importer.captures(list(op.regions))
    operand = b.tuple([cx.importer.lookup(cx.env, v, op) for v in captured])
    computations = [
        cx.importer.threaded_computation(region, operand.shape, 0, captured, f"{b.name}_{role}{i}",
                                         False, False)
        for i, region in enumerate(op.regions)]
    result = b.conditional(index, computations, [operand] * len(computations))
    count = len(op.results)
    return [] if count == 0 else cx.unpack(result, count)


@handles("stablehlo.if")
def if_(cx: OpContext) -> list[XlaOp]:
    return _branches(cx, cx.operands[0], "branch")


@handles("stablehlo.case")
def case(cx: OpContext) -> list[XlaOp]:
    return _branches(cx, cx.operands[0], "case")


def _call(cx: OpContext, callee: str) -> list[XlaOp]:
    """The callee's ops, built inline with its arguments bound to the operands: jaxlib's context
    has no inliner for func.call, and a call per jax sub-function would cost a sub-computation
    build each (XLA inlines them too)."""
    func = cx.importer.functions.get(callee)
    if func is None:
        raise cx.importer.error(cx.op, f"no function @{callee} in the module")
    block = func.regions[0].blocks[0]
    env = dict(zip(block.arguments, cx.operands))
    return cx.importer.block(cx.b, block, env)


@handles("func.call")
def call(cx: OpContext) -> list[XlaOp]:
    return _call(cx, cx.attr("callee").value)


@handles("stablehlo.composite")
def composite(cx: OpContext) -> list[XlaOp]:
    """A composite means its decomposition (StableHLO spec); it becomes a composite_call, not the
    decomposition inlined, so that its name, attributes and version reach the `hlo` stage and
    the HLO text (XLA keeps them too, as a call marked is_composite)."""
    callee = cx.attr("decomposition").value
    func = cx.importer.functions.get(callee)
    if func is None:
        raise cx.importer.error(cx.op, f"no function @{callee} in the module")
    decomposition = cx.importer.closed_computation(func.regions[0], callee, cx.op)
    attributes = cx.attr("composite_attributes")
    result = cx.b.composite_call(decomposition, cx.operands, cx.str("name"),
                                 str(attributes) if attributes is not None else None,
                                 cx.int("version", 0))
    return cx.unpack(result, len(cx.op.results))
