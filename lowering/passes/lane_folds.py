"""Folds of 16 lanes per row, y[r] = (((y[r] + p[r, 0]) + p[r, 1]) + ...) + p[r, 15], as
16 x 16 transposes in registers.

Matrix-vector products left to the generics of lowering/ops/dot_lanes.py (batched,
converted from bf16/f16) end with such a fold, marked with dot_lanes.FOLD_TAG: a generic
whose reduction loop runs along the 16 contiguous lanes of each row. Vectorized along the
rows, as "vectorized" would do it, every vector reads one lane of 16 rows: a strided
gather per lane (16 per 16 rows), a quarter of a tanh RNN step's time. (The reductions
split into lanes by lowering/ops/reduce.py fold the same way but are not marked: for
their long rows the fold is a small part of the work, and the transposes cost LLVM
~20 ms per fold to compile.) Here 16 rows are 16 contiguous vector loads,
transposed by 4 rounds of two-vector shuffles, so that vector l holds lane l of the 16
rows, and summed into y's 16 elements in the generic's order (y first, then lanes
0..15). Every element sees the same additions in the same order: the same bits on
every target. Rows past the last whole block of 16 are read as zero vectors and not
written (a masked write). Runs on buffers, before "vectorized" schedules the generics.
Imports `lowering.register_transpose` and generic_attrs.
"""

from __future__ import annotations

import math
from typing import Any

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from ..register_transpose import transposed
from .generic_attrs import indexing_maps, iterator_kinds

LANES = 16
TAG = "xlamlir.lane_fold"  # lowering/ops/dot_lanes.py's FOLD_TAG (passes import no ops)


def _rows_readable(t: ir.Type, collapsed: bool) -> bool:
    """A static buffer whose minor dimension is contiguous (each row one vector read);
    of the identity layout when its leading dimensions are to be `collapsed` into one."""
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
        return False
    t = ir.MemRefType(t)
    if isinstance(t.layout, ir.AffineMapAttr):
        return t.layout.value == ir.AffineMap.get_identity(t.rank)
    strides, _ = t.get_strides_and_offset()
    return not collapsed and strides[-1] == 1


def _plan(op: Any) -> tuple[ir.Value, ir.Value, Any] | None:
    """(lanes, out, add) when `op` is a marked fold of the last dimension's 16 lanes of an
    f32/f64 buffer into the buffer of its other dimensions (`add` the body's addf), else
    None."""
    if op.name != "linalg.generic" or len(op.operands) != 2 or len(op.results) != 0 or \
            TAG not in op.attributes:
        return None
    lanes, out = op.operands
    collapsed = isinstance(lanes.type, ir.MemRefType) and ir.MemRefType(lanes.type).rank > 2
    if not (_rows_readable(lanes.type, collapsed) and _rows_readable(out.type, collapsed)):
        return None
    shape, element = ir.MemRefType(lanes.type).shape, ir.MemRefType(lanes.type).element_type
    rank = len(shape)
    if not isinstance(element, (ir.F32Type, ir.F64Type)) or rank < 2 or shape[-1] != LANES or \
            list(ir.MemRefType(out.type).shape) != list(shape[:-1]):
        return None
    if iterator_kinds(op) != ["parallel"] * (rank - 1) + ["reduction"]:
        return None
    maps = indexing_maps(op)
    dims = [ir.AffineDimExpr.get(i) for i in range(rank)]
    if maps[0] != ir.AffineMap.get_identity(rank) or maps[1] != ir.AffineMap.get(rank, 0, dims[:-1]):
        return None
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if len(body) != 2 or body[0].name != "arith.addf" or body[1].name != "linalg.yield":
        return None
    add, yielded = body
    if list(yielded.operands) != [add.results[0]] or \
            {ir.BlockArgument(v).arg_number if isinstance(v.owner, ir.Block) else -1
             for v in add.operands} != {0, 1}:
        return None
    return lanes, out, add


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _fold_block(lanes: ir.Value, out: ir.Value, first: ir.Value, count: int, add: Any) -> None:
    """y[first + i] for the `count` (<= 16) rows from `first`: the rows as vectors (zero
    past `count`), transposed, added to y's vector lane by lane in the body's order."""
    element = ir.MemRefType(lanes.type).element_type
    row_type = ir.VectorType.get([LANES], element)
    zero = arith.constant(element, 0.0)
    row_map = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
    out_map = ir.AffineMap.get_identity(1)
    c0 = _index(0)
    rows = [vector.transfer_read(row_type, lanes, [arith.addi(first, _index(i)), c0], row_map, zero, [True])
            if i < count else vector.broadcast(row_type, zero) for i in range(LANES)]
    whole = count == LANES
    acc = vector.transfer_read(row_type, out, [first], out_map, zero, [whole])
    out_first = ir.BlockArgument(add.operands[0]).arg_number == 1  # addf(out, in)
    fastmath = add.attributes["fastmath"] if "fastmath" in add.attributes else None
    for lane in transposed(rows, pairs_first=True):
        lhs, rhs = (acc, lane) if out_first else (lane, acc)
        acc = arith.addf(lhs, rhs, fastmath=fastmath)
    vector.transfer_write(None, acc, out, [first], out_map, [whole])


def _rewrite(op: Any, lanes: ir.Value, out: ir.Value, add: Any) -> None:
    shape = ir.MemRefType(lanes.type).shape
    rows = math.prod(shape[:-1])
    with ir.InsertionPoint(op), op.location:
        if len(shape) > 2:  # rows of all the free dimensions, in order (contiguous buffers)
            element = ir.MemRefType(lanes.type).element_type
            free = list(range(len(shape) - 1))
            lanes = memref.collapse_shape(ir.MemRefType.get([rows, LANES], element), lanes,
                                          [free, [len(shape) - 1]])
            out = memref.collapse_shape(ir.MemRefType.get([rows], element), out, [free])
        whole = rows // LANES * LANES
        if whole:
            loop = scf.ForOp(_index(0), _index(whole), _index(LANES))
            with ir.InsertionPoint(loop.body):
                _fold_block(lanes, out, loop.induction_variable, LANES, add)
                scf.YieldOp([])
        if rows > whole:
            _fold_block(lanes, out, _index(whole), rows - whole, add)
    op.erase()


def transposed_lane_folds(op: Any, pass_: Any) -> None:
    """Pipeline pass: every 16-lane fold of at least 16 rows as transposed blocks (module
    docstring)."""
    found: list[tuple[Any, ir.Value, ir.Value, Any]] = []

    def visit(inner: Any) -> ir.WalkResult:
        plan = _plan(inner)
        if plan is not None and math.prod(ir.MemRefType(plan[0].type).shape[:-1]) >= LANES:
            found.append((inner, *plan))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for generic, lanes, out, add in found:
        _rewrite(generic, lanes, out, add)
