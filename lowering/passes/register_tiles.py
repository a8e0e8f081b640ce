"""Register tiles re-assembled from their rows with one `vector.insert_strided_slice` per row.

The contraction schedules (`passes/schedules.py`) lower each k step of a register tile
to one `vector.fma` per row, inserted back into the MR x NR accumulator; MLIR's
canonicalization folds that insert chain into one `vector.from_elements` of every scalar
of the tile (after a `vector.to_elements` of each row): 256 operands on one line (~2,000
characters) in every stage down to `loops`. Inserting whole rows as strided slices says
the same, a line per row, and canonicalization leaves such chains alone; LLVM receives
whole-vector inserts instead of one insert per scalar. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import ub, vector


def _rows(op: Any) -> list[ir.Value] | None:
    """The source vectors of a from_elements that lists every element of each of them, in
    order, each of the tile's trailing shape; else None."""
    result_shape = ir.VectorType(op.results[0].type).shape
    rows: list[ir.Value] = []
    operands = list(op.operands)
    i = 0
    while i < len(operands):
        owner = operands[i].owner
        if isinstance(owner, ir.Block) or owner.name != "vector.to_elements":
            return None
        source = owner.operands[0]
        shape = ir.VectorType(source.type).shape
        count = len(owner.results)
        if (i + count > len(operands) or len(shape) > len(result_shape)
                or shape != result_shape[len(result_shape) - len(shape):]
                or any(operands[i + j] != owner.results[j] for j in range(count))):
            return None
        rows.append(source)
        i += count
    return rows if len(rows) > 1 else None


def _offsets(index: int, row_rank: int, shape: list[int]) -> list[int]:
    """Offsets of the `index`-th row of a tile of `shape` whose rows have rank `row_rank`."""
    outer = shape[: len(shape) - row_rank]
    offsets = []
    for extent in reversed(outer):
        offsets.append(index % extent)
        index //= extent
    return list(reversed(offsets)) + [0] * row_rank


def rows_as_slices(root: Any) -> None:
    """Replace every from_elements of whole rows under `root` by a chain of row inserts,
    and every vector.insert of a row by its insert_strided_slice (which canonicalization
    does not fold into a from_elements)."""
    found: list[Any] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name in ("vector.from_elements", "vector.insert"):
            found.append(inner)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    for op in found:
        if op.name == "vector.insert":
            _row_insert_as_slice(op)
            continue
        rows = _rows(op)
        if rows is None:
            continue
        tile_type = op.results[0].type
        shape = ir.VectorType(tile_type).shape
        row_rank = len(ir.VectorType(rows[0].type).shape)
        with ir.InsertionPoint(op), op.location:
            # Every lane is written: the tile starts as poison (what from_elements lowers to).
            tile = ub.poison(tile_type)
            for index, row in enumerate(rows):
                tile = vector.insert_strided_slice(row, tile, _offsets(index, row_rank, shape),
                                                   [1] * row_rank)
        op.results[0].replace_all_uses_with(tile)
        op.erase()


def _row_insert_as_slice(op: Any) -> None:
    """`vector.insert %row, %tile[i, j]` (static position, a vector row) as
    `vector.insert_strided_slice %row, %tile {offsets = [i, j, 0...]}`."""
    value = op.operands[0]
    if not isinstance(value.type, ir.VectorType):  # a scalar: stays an insert
        return
    position = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
    if any(p < 0 for p in position):  # a dynamic index (kDynamic) is an operand
        return
    row_rank = len(ir.VectorType(value.type).shape)
    with ir.InsertionPoint(op), op.location:
        tile = vector.insert_strided_slice(value, op.operands[1], position + [0] * row_rank,
                                           [1] * row_rank)
    op.results[0].replace_all_uses_with(tile)
    op.erase()


def register_tiles_as_rows(op: Any, pass_: Any) -> None:
    """Pipeline pass: `rows_as_slices` on the module (after the transfers of the scheduled
    contractions' accumulator tiles were unrolled into rows)."""
    rows_as_slices(op)
