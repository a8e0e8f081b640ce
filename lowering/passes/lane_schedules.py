"""Matrix-vector products in vector lanes (lowering/ops/dot_lanes.py), tiled for registers.

The lowering leaves two generics: partials[.., m, l] += A[.., m, c, l] * x[c, l] (a
reduction over the chunks c, the lanes l parallel and innermost) and the fold
y[.., m] = sum_l partials[.., m, l]. Left to the "vectorized" stage, the first runs one
row at a time (one 16-lane accumulator: a chain of dependent adds per row) and the fold
as scalar code. Here, in the "tiled" stage, the partials take R rows per step (R
independent accumulators, in registers across the chunk loop). The fold stays as it
was: an in-order sum of 16 lanes per row (vectorized, it is a 16 x 16 transpose or an
ordered vector.reduction per row, which cost LLVM far more compile time than the
fold's ~1/16 of the work can return). The arithmetic of every element is unchanged
(mulf, then addf: no fma contraction), so every target computes the same bits.
Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects.transform import interpreter

from .generic_attrs import iterator_kinds

TAG = "xlamlir.lanes"
ANY = "!transform.any_op"
LANES = 16
ROWS = 8  # rows of partials per register tile: 8 accumulators of 16 lanes


def _static_float(value: ir.Value) -> bool:
    t = value.type
    return (isinstance(t, ir.RankedTensorType) and t.has_static_shape
            and isinstance(t.element_type, (ir.F32Type, ir.F64Type)))


def _single_user(value: ir.Value) -> Any | None:
    uses = list(value.uses)
    return uses[0].owner if len(uses) == 1 else None


def _body(op: Any) -> list[str]:
    return [o.name for o in op.regions[0].blocks[0].operations]


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def _plan(op: Any) -> tuple[Any, int, int] | None:
    """(fold, rank, rows) when `op` is the partials generic of a lane dot whose only user is
    its fold (rank: loops of the partials; rows: the extent of the row loop), else None."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    kinds = iterator_kinds(op)
    rank = len(kinds)
    if rank < 3 or kinds != ["parallel"] * (rank - 2) + ["reduction", "parallel"]:
        return None
    if not all(_static_float(v) for v in op.operands) or \
            _body(op) != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return None
    out = ir.RankedTensorType(op.operands[2].type).shape
    if out[-1] != LANES:
        return None
    fold = _single_user(op.results[0])
    if fold is None or fold.name != "linalg.generic" or len(fold.operands) != 2:
        return None
    if iterator_kinds(fold) != ["parallel"] * (rank - 2) + ["reduction"] or \
            _body(fold) != ["arith.addf", "linalg.yield"]:
        return None
    if not _static_float(fold.operands[1]):
        return None
    return fold, rank, out[-2]


def _script(i: int, rank: int, rows: int) -> str:
    # Loops (row tiles of R, chunks, rows of the tile): the tile's R accumulator rows are
    # R separate 1-D vectors (the row loop unrolled: no 2-D vector arithmetic, which LLVM
    # would get as 128-element vectors built element by element), each read before the
    # chunk loop and written after it (hoisted: in registers across it).
    r = _divisor_at_most(rows, ROWS)
    lead = [1] * (rank - 3)
    n_outer = len(lead) + 2
    row = [0] * len(lead) + [1, 0, 0]  # one row of the tile
    return f"""
    %lp{i} = transform.structured.match ops{{["linalg.generic"]}}
      attributes {{{TAG} = {i} : i64}} in %root : ({ANY}) -> {ANY}
    %lpt{i}, %lpl{i}:{n_outer} = transform.structured.tile_using_for %lp{i} tile_sizes {lead + [r, 1, 0]}
      : ({ANY}) -> ({', '.join([ANY] * (n_outer + 1))})
    %lpr{i}, %lpr{i}_loop = transform.structured.tile_using_for %lpt{i} tile_sizes {row}
      : ({ANY}) -> ({ANY}, {ANY})
    transform.structured.vectorize %lpr{i} : {ANY}
    %lpu{i} = transform.cast %lpr{i}_loop : {ANY} to !transform.op<"scf.for">
    transform.loop.unroll %lpu{i} {{ factor = {r} }} : !transform.op<"scf.for">
    transform.loop.hoist_loop_invariant_subsets %lpl{i}#{n_outer - 1} : {ANY}"""


_HEADER = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {"""
_FOOTER = """
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    // Each row's read and write of its accumulator index the row tile itself (not a slice
    // of it inserted back), so they are hoisted as a pair and the rows' writes after the
    // loop form one chain, which bufferization does in place.
    transform.apply_patterns to %funcs {
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %loops = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_licm to %loops : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops : !transform.any_op
    transform.yield
  }
}
"""


def schedule_lanes(op: Any) -> None:
    """Tile and vectorize every lane dot's partials and fold (module docstring)."""
    found: list[tuple[Any, Any, int, int]] = []

    def visit(inner: Any) -> ir.WalkResult:
        plan = _plan(inner)
        if plan is not None:
            found.append((inner, *plan))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    if not found:
        return
    with op.context, ir.Location.unknown():
        i64 = ir.IntegerType.get_signless(64)
        body = []
        for i, (partials, _, rank, rows) in enumerate(found):
            partials.attributes[TAG] = ir.IntegerAttr.get(i64, i)
            body.append(_script(i, rank, rows))
        text = _HEADER + "".join(body) + _FOOTER
        script = ir.Module.parse(text)
        interpreter.apply_named_sequence(op, script.body.operations[0], script)
