"""Byte-wide memory for i1: the buffers bufferization's deallocation creates.

Our own tensors never hold i1 (pred is stored as i8), but
`buffer-deallocation-pipeline` builds `memref<?xi1>` ownership buffers (in
`@dealloc_helper`), and LLVM 22's memref lowering asserts on scalar i1 loads
and stores (MemRefToLLVM: `integralElementType.getWidth() >= 8`). This pass
retypes every i1 memref to i8 and converts at its loads and stores. Imports
nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith


def _i1_memref(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and ir.MemRefType(t).element_type == ir.IntegerType.get_signless(1)


def _as_i8(t: ir.Type) -> ir.Type:
    m = ir.MemRefType(t)
    return ir.MemRefType.get(list(m.shape), ir.IntegerType.get_signless(8), m.layout, m.memory_space)


def widen_i1_memrefs(module_op: Any, pass_: Any) -> None:
    """Retype i1 memrefs to i8; trunci after their loads, extui before their stores."""
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    loads, stores, functions = [], [], []

    def visit(op: Any) -> ir.WalkResult:
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if _i1_memref(arg.type):
                        arg.set_type(_as_i8(arg.type))
                        functions.append(op)
        for result in op.results:
            if _i1_memref(result.type):
                result.set_type(_as_i8(result.type))
        if op.name == "memref.load" and op.results[0].type == i1:
            loads.append(op)
        if op.name == "memref.store" and op.operands[0].type == i1:
            stores.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for load in loads:
        # The narrowing goes right after the load, then takes over its uses.
        result = load.results[0]
        uses = [(use.owner, use.operand_number) for use in result.uses]
        result.set_type(i8)
        with ir.InsertionPoint.after(load), load.location:
            narrow = arith.trunci(i1, result)
        for owner, index in uses:
            owner.operands[index] = narrow
    for store in stores:
        with ir.InsertionPoint(store), store.location:
            store.operands[0] = arith.extui(i8, store.operands[0])
    for f in {id(f): f for f in functions if f.name == "func.func"}.values():
        block = f.regions[0].blocks[0]
        old = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        f.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], list(old.results)))
