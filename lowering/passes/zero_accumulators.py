"""Register tiles of a product that is not blocked along K start from zero in registers.

The contraction schedules (`schedules.py`: matmuls, and convolutions, whose window and
channel loops are never blocked) compute each thread's block of C into a zero fill:
a vectorized loop writes zeros over the whole block first, then every register tile
reads its MR x NR accumulator from C, runs the k loop and writes it back. When one
cache block spans all of K (KC = K), each element of C is read exactly once, by the
tile that then writes its final sum: the read always sees the fill's zeros. Here such
reads become a zero constant and the fill loop goes (its result replaced by its
destination: nothing reads what it wrote any more), which saves a write and a read of
all of C (for [6272, 256] x [256, 256]: 6.4 MB each way, C falls out of L2 between
them). The sums are the same: +0 then the same fmas in the same order.

The script marks the outermost loop of each such product's fill with `MARK`. C is
followed from there through slices, loops and writes (into the peeled tiles after the
main loop too); if anything but an accumulator read reads it before the product is
finished, nothing is changed. Imports `passes.walk`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith

from .walk import ops_where

MARK = "xlamlir.zero_accumulators"


def _is_accumulator_read(op: Any) -> bool:
    """A transfer_read whose only use starts the iter_arg of a loop nest doing fmas (the
    reduction loops of a register tile: k, or a convolution's window and channels)."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return False
    loop = uses[0].owner
    if loop.name != "scf.for" or uses[0].operand_number < 3:  # lb, ub, step, then inits
        return False
    found = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "vector.fma":
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return bool(found)


# Users that take the finished product (after every tile has written its part).
_FINAL = ("tensor.parallel_insert_slice", "tensor.collapse_shape", "tensor.expand_shape",
          "bufferization.materialize_in_destination")


def _accumulator_reads(fill: Any) -> list[Any] | None:
    """Every read of the values C takes from the fill on (followed through slices, loop
    iter_args and results, writes): the accumulator reads, or None when anything else
    reads C (an epilogue, an unhoisted tile)."""
    reads: list[Any] = []
    todo, seen = [fill.results[0]], set()
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            owner, at = use.owner, use.operand_number
            if owner.name == "vector.transfer_read":
                if not _is_accumulator_read(owner):
                    return None
                reads.append(owner)
            elif owner.name == "scf.for":
                if at < 3:
                    return None
                todo.append(owner.results[at - 3])
                todo.append(owner.regions[0].blocks[0].arguments[at - 2])
            elif owner.name in ("tensor.extract_slice", "tensor.insert_slice", "vector.transfer_write"):
                todo.append(owner.results[0])
            elif owner.name == "scf.yield":
                loop = owner.parent
                if loop.name != "scf.for":
                    return None
                todo.append(loop.results[at])
            elif owner.name in _FINAL:
                continue
            else:
                return None
    return reads


def _is_zero_fill_loop(op: Any) -> bool:
    """An scf.for nest that only writes constant zero vectors (the vectorized fill): no
    reads, no other computation."""
    if op.name != "scf.for" or len(op.results) != 1:
        return False
    allowed = {"scf.for", "scf.yield", "tensor.extract_slice", "tensor.insert_slice",
               "vector.transfer_write", "arith.constant", "affine.apply", "affine.min"}
    ok = [True]

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name not in allowed:
            ok[0] = False
            return ir.WalkResult.INTERRUPT
        if inner.name == "vector.transfer_write" and not _zero_constant(inner.operands[0]):
            ok[0] = False
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return ok[0]


def _zero_constant(value: ir.Value) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    text = str(owner.attributes["value"])
    return text.startswith("dense<0.000000e+00>")  # +0.0 only: -0.0 prints as -0.000000e+00


def start_accumulators_at_zero(root: Any) -> int:
    """Rewrite the product of every fill loop marked `MARK` under `root` (see the module
    docstring); the number of accumulator reads replaced."""
    marked = ops_where(root, lambda op: op.name == "scf.for" and MARK in op.attributes)
    replaced = 0
    for fill in marked:
        del fill.attributes[MARK]
        uses = list(fill.results[0].uses) if _is_zero_fill_loop(fill) else []
        if len(uses) != 1 or uses[0].owner.name != "scf.for":
            continue  # not the form this was written for: leave it as it is
        reads = _accumulator_reads(fill)
        if not reads:
            continue
        for read in reads:
            vector_type = ir.VectorType(read.results[0].type)
            with ir.InsertionPoint(read), read.location:
                zero = arith.constant(vector_type, ir.DenseElementsAttr.get_splat(
                    vector_type, ir.FloatAttr.get(vector_type.element_type, 0.0)))
            read.results[0].replace_all_uses_with(zero)
            read.erase()
            replaced += 1
        fill.results[0].replace_all_uses_with(fill.operands[3])  # its destination (iter_arg init)
        fill.erase()
    return replaced
