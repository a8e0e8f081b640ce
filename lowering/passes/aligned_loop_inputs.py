"""Parameters that while loops read whole every iteration, read from a 64-byte aligned copy.

numpy allocates arrays 16-byte aligned, so a parameter's 16-lane f32 rows usually start
mid cache line and every vector load of them touches two lines. A loop body that
streams a loop-invariant matrix each iteration (a tanh RNN's W h: 256 KB per step)
pays that on every pass: the RNN row ran 1.7x slower with numpy's arrays than with
64-byte aligned ones. Here a parameter of at least MIN_BYTES that a while loop reads
(through whole-buffer views only: expand/collapse_shape; a slice is read partly) and
that nothing in the function writes is copied once, before the loop, into an aligned
buffer when its address is not 64-byte aligned; the loop reads the copy. The check is on
the address at run time, and the copy is exact: every input gives the same bits, and
an aligned input costs one compare. Runs on buffers after the deallocation pipeline,
freeing its copy itself after the loop (the pipeline would track the maybe-copied
buffer's ownership with a run-time alias check per call). Imports `passes.walk`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, memref, scf

from .walk import ops_named

ALIGNMENT = 64  # a cache line, and an AVX-512 register
MIN_BYTES = 16 * 1024  # smaller parameters: the copy would cost about what it saves

_VIEWS = ("memref.expand_shape", "memref.collapse_shape")
_READ_ONLY = ("memref.load", "vector.transfer_read", "vector.load")


def _bytes(t: ir.MemRefType) -> int:
    element = t.element_type
    size = max(element.width, 8) // 8 if isinstance(element, (ir.FloatType, ir.IntegerType)) else 0
    for extent in t.shape:
        size *= extent
    return size


def _only_read(value: ir.Value) -> bool:
    """Whether every use of `value` (and of its views) reads it: linalg inputs (of ops
    that say which operands are inputs), loads, transfer reads, copy sources. Anything
    else (an init, a store, a call, an op of fixed operands) may write."""
    for use in value.uses:
        owner = use.owner
        name = owner.name
        if name in _VIEWS or name == "memref.subview":
            if not _only_read(owner.results[0]):
                return False
        elif name in _READ_ONLY:
            continue
        elif name == "memref.copy":
            if use.operand_number != 0:
                return False
        elif name.startswith("linalg.") and "operandSegmentSizes" in owner.attributes:
            inputs = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))[0]
            if use.operand_number >= inputs:  # an init: written
                return False
        else:
            return False
    return True


def _read_whole_inside(value: ir.Value, loop: Any) -> list[Any] | None:
    """The uses of `value` inside `loop`; None when one of them, or of its views, is a
    slice (a part of the buffer read)."""
    uses = []
    for use in value.uses:
        owner = use.owner.operation
        if owner.name == "memref.subview":
            return None
        if owner.name in _VIEWS and _read_whole_inside(owner.results[0], loop) is None:
            return None
        if _inside(owner, loop):
            uses.append((owner, use.operand_number))
    return uses


def _inside(op: Any, loop: Any) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.operation == loop:
            return True
        parent = parent.parent
    return False


def _aligned_copy(param: ir.Value, loop: Any) -> ir.Value:
    """Before `loop`: `param` itself when 64-byte aligned, else an aligned copy of it,
    freed after the loop."""
    t = param.type
    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        address = memref.extract_aligned_pointer_as_index(param)
        offset = arith.remui(address, arith.constant(index, ALIGNMENT))
        misaligned = arith.cmpi(arith.CmpIPredicate.ne, offset, arith.constant(index, 0))
        choice = scf.IfOp(misaligned, [t], has_else=True)
        with ir.InsertionPoint(choice.then_block):
            copy = memref.alloc(t, [], [], alignment=ALIGNMENT)
            memref.copy(param, copy)
            scf.YieldOp([copy])
        with ir.InsertionPoint(choice.else_block):
            scf.YieldOp([param])
    with ir.InsertionPoint.after(loop), loop.location:
        free = scf.IfOp(misaligned)
        with ir.InsertionPoint(free.then_block):
            memref.dealloc(choice.results[0])
            scf.YieldOp([])
    return choice.results[0]


def aligned_loop_inputs(op: Any, pass_: Any) -> None:
    """Pipeline pass (module docstring)."""
    for loop in ops_named(op, "scf.while"):
        loop = loop.operation
        func = loop.parent
        while func is not None and func.operation.name != "func.func":
            func = func.parent
        if func is None or len(func.regions[0].blocks) == 0:
            continue
        for param in func.regions[0].blocks[0].arguments:
            t = param.type
            if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
                continue
            t = ir.MemRefType(t)
            if not isinstance(t.layout, ir.AffineMapAttr) or _bytes(t) < MIN_BYTES:
                continue
            uses = _read_whole_inside(param, loop)
            if not uses or not _only_read(param):
                continue
            copy = _aligned_copy(param, loop)
            for owner, number in uses:
                owner.operands[number] = copy
