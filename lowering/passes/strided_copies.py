"""Copies between non-contiguous buffers as linalg copies, vectorized and split across
cores by the "vectorized" stage, instead of MLIR's `memrefCopy`.

Bufferization leaves a `memref.copy` wherever a value is written into part of a buffer
or read from part of one: a slice (`x[100:1900, 3:2000]`), a pad (the operand into the
middle of the padded result), a concatenation along an inner dimension. Between
contiguous buffers `finalize-memref-to-llvm` makes a memcpy; any other copy becomes a
call to the runner utils' `memrefCopy`, which walks the elements one at a time through
its N-d index (and its library, libMLIR, costs ~25-100 ms to load). Measured against
numpy (f32, this 2-core machine): the slice above 6.8 ms against 1.0, a pad of
[1024,1024] by one on each side 2.1 ms against 0.34. Here each such copy becomes the
linalg.generic `out = in` over the same views, which `schedule_vectorize` tiles into
rows of 16-lane vector moves (a partial vector at each row's end) and splits across
the cores like any elementwise op. Exact: a copy moves bits. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import linalg, memref

_DYNAMIC = ir.ShapedType.get_dynamic_size()  # also the bindings' dynamic stride and offset


def _contiguous(t: ir.MemRefType) -> bool:
    """Whether `t` is row-major contiguous (what the LLVM lowering copies with memcpy)."""
    try:
        strides, _ = t.get_strides_and_offset()
    except Exception:  # noqa: BLE001 - a layout that is no strided form
        return False
    expected = 1
    for extent, stride in reversed(list(zip(t.shape, strides))):
        if extent == 1:
            continue  # any stride: a unit dimension is never stepped
        if stride == _DYNAMIC or extent == _DYNAMIC or stride != expected:
            return False
        expected *= extent
    return True


def _static_window(view: Any) -> tuple[list[int], list[int]] | None:
    """(offsets, sizes) of a memref.subview with static offsets and sizes and unit strides."""
    if view.name != "memref.subview" or len(view.operands) != 1:
        return None
    offsets = list(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    strides = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
    if any(s != 1 for s in strides) or _DYNAMIC in offsets or _DYNAMIC in sizes:
        return None
    return offsets, sizes


def _border(shape: list[int], offsets: list[int], sizes: list[int]) -> list[tuple[list[int], list[int]]]:
    """Disjoint boxes (offsets, sizes) covering `shape` but the window: for each dimension
    d, the slabs before and after the window along d, inside the window along the
    dimensions before d and whole along the ones after."""
    boxes = []
    rank = len(shape)
    for d in range(rank):
        for start, extent in ((0, offsets[d]), (offsets[d] + sizes[d], shape[d] - offsets[d] - sizes[d])):
            box_offsets = [offsets[j] if j < d else start if j == d else 0 for j in range(rank)]
            box_sizes = [sizes[j] if j < d else extent if j == d else shape[j] for j in range(rank)]
            if all(box_sizes):
                boxes.append((box_offsets, box_sizes))
    return boxes


def _fill_only_the_border(copy: Any, before: dict[Any, list[Any]]) -> None:
    """`fill(v, B); copy(X, subview(B))` (a pad): the fill rewritten to fill B's border
    only, so each element of B is written once. `before[op]`: the two operations before
    `op` in its block."""
    view = copy.operands[1].owner
    if isinstance(view, ir.Block):
        return
    window = _static_window(view)
    if window is None:
        return
    # The three ops in a row: nothing else touches B between the fill and the copy.
    previous = before.get(copy.operation, [])
    if len(previous) < 2 or previous[1] != view.operation or previous[0].name != "linalg.fill":
        return
    fill, buffer = previous[0], view.operands[0]
    if fill.operands[1] != buffer or len(fill.operands) != 2:
        return
    shape = list(ir.MemRefType(buffer.type).shape)
    if _DYNAMIC in shape:
        return
    with ir.InsertionPoint(fill), fill.location:
        for offsets, sizes in _border(shape, *window):
            box = memref.subview(buffer, offsets, sizes, [1] * len(shape))
            linalg.fill(fill.operands[0], outs=[box])
    fill.erase()


def _plain_copy(op: Any) -> bool:
    """A copy of rank > 0 between two memrefs of one shape and element type: every
    memref.copy (its verifier requires the rest), and a linalg.copy of memrefs (a
    convolution's padded input, lowering/passes/schedules.py), which the affine path
    made a scalar loop nest that LLVM vectorized at great cost (a strided NCHW conv's
    two such nests: ~75 ms of JIT)."""
    if len(op.operands) != 2 or not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False
    source, target = (ir.MemRefType(v.type) for v in op.operands)
    return source.rank > 0 and source.element_type == target.element_type and source.shape == target.shape


def strided_copies_as_loops(op: Any, pass_: Any) -> None:
    """Rewrite every `memref.copy` under `op` with a non-contiguous side, and every
    linalg.copy of memrefs, into a linalg copy generic (a pad's fill first reduced to the
    border the copy does not write); a linalg.copy between contiguous buffers becomes a
    memref.copy (a memcpy)."""
    found: list[Any] = []
    contiguous: list[Any] = []  # linalg.copy ops between contiguous buffers: a memcpy

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name in ("memref.copy", "linalg.copy") and _plain_copy(inner):
            source, target = (ir.MemRefType(v.type) for v in inner.operands)
            if not (_contiguous(source) and _contiguous(target)):
                found.append(inner)
            elif inner.name == "linalg.copy":
                contiguous.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for copy in contiguous:
        with ir.InsertionPoint(copy), copy.location:
            memref.copy(*copy.operands)
        copy.erase()
    # The two operations before each copy, from one pass over each block holding one.
    before: dict[Any, list[Any]] = {}
    for block in {copy.operation.block for copy in found}:
        ops = [o.operation for o in block.operations]
        before.update((o, ops[max(0, i - 2):i]) for i, o in enumerate(ops) if o.name == "memref.copy")
    for copy in found:
        _fill_only_the_border(copy, before)
    for copy in found:
        source, target = copy.operands
        rank = ir.MemRefType(source.type).rank
        identity = ir.AffineMap.get_identity(rank)
        with ir.InsertionPoint(copy), copy.location:
            parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
            generic = linalg.GenericOp([], [source], [target],
                                       ir.ArrayAttr.get([ir.AffineMapAttr.get(identity)] * 2),
                                       ir.ArrayAttr.get([parallel] * rank))
            element = ir.MemRefType(source.type).element_type
            block = generic.regions[0].blocks.append(element, element)
            with ir.InsertionPoint(block):
                linalg.YieldOp([block.arguments[0]])
        copy.erase()
