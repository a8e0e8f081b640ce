"""A transpose that moves the minor dimension, as tiles of vectors.

`linalg.transpose` left to the pipeline becomes affine loops that the
super-vectorizer vectorizes along one loop: the reads or the writes are then
strided element gathers, and the loop order walks one of the two arrays across
its rows (every access a new cache line, and a TLB miss on large arrays).

Here the operand's minor dimension `m` and the dimension `b` that becomes the
result's minor dimension are cut into T x T tiles: each tile is one
`vector.transfer_read` of T rows of T contiguous elements, a `vector.transpose`
in registers and one `vector.transfer_write` of T contiguous rows of the
result. Tiles along `b` are the inner loop, so the result is written row by row
and the operand's column strip stays in cache. Edge tiles are masked transfers
(out-of-bounds lanes are neither read nor written). Every other dimension is an
outer loop. Only element moves: bit-exact for every type with a vector form.
Imports the lowering modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

TILE_BYTES = 32  # one tile row: an AVX2 register (8 x f32), half a cache line


def tile_size(element: ir.Type) -> int | None:
    """Elements per tile row for `element`, None when it has no vector form here
    (complex, index...)."""
    if isinstance(element, (ir.FloatType, ir.IntegerType)):
        width = element.width
        if width in (8, 16, 32, 64):
            return TILE_BYTES * 8 // width
    return None


def applies(dims: Sequence[int], permutation: Sequence[int], element: ir.Type) -> bool:
    """Whether the tiled form is worth it: the minor dimension moves and both tile
    dimensions hold at least one tile."""
    t = tile_size(element)
    rank = len(dims)
    if t is None or rank < 2 or permutation[-1] == rank - 1:
        return False
    return dims[permutation[-1]] >= t and dims[rank - 1] >= t


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def transpose_tiles(x: ir.Value, dims: Sequence[int], permutation: Sequence[int]) -> ir.Value:
    """`x` (of `dims`) transposed by `permutation` (result dimension i is x's
    permutation[i]); call only where `applies`."""
    element = ir.RankedTensorType(x.type).element_type
    t = tile_size(element)
    assert t is not None
    rank = len(dims)
    m, b = rank - 1, permutation[-1]
    out_dims = [dims[p] for p in permutation]
    out_m = list(permutation).index(m)  # the result dimension that x's minor dimension becomes
    others = [d for d in range(rank) if d not in (b, m)]
    read_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(b), ir.AffineDimExpr.get(m)])
    write_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(out_m), ir.AffineDimExpr.get(rank - 1)])
    tile_type = ir.VectorType.get([t, t], element)
    in_bounds = [dims[b] % t == 0, dims[m] % t == 0]
    zero = arith.constant(element, 0.0 if isinstance(element, ir.FloatType) else 0)
    init = tensor.EmptyOp(out_dims, element).result

    def loop(lo: int, hi: int, step: int, carried: ir.Value, body) -> ir.Value:
        op = scf.ForOp(_index(lo), _index(hi), _index(step), [carried])
        with ir.InsertionPoint(op.body):
            scf.YieldOp([body(op.induction_variable, op.inner_iter_args[0])])
        return op.results[0]

    def tiles(position: dict[int, ir.Value], out: ir.Value) -> ir.Value:
        def column_strip(j: ir.Value, out: ir.Value) -> ir.Value:
            def tile(i: ir.Value, out: ir.Value) -> ir.Value:
                at = {**position, b: i, m: j}
                indices = [at[d] for d in range(rank)]
                rows = vector.transfer_read(tile_type, x, indices, read_map, zero, in_bounds)
                flipped = vector.transpose(tile_type, rows, [1, 0])
                out_indices = [at[p] for p in permutation]
                return vector.transfer_write(out.type, flipped, out, out_indices, write_map,
                                             [in_bounds[1], in_bounds[0]])
            return loop(0, dims[b], t, out, tile)
        return loop(0, dims[m], t, out, column_strip)

    def nest(level: int, position: dict[int, ir.Value], out: ir.Value) -> ir.Value:
        if level == len(others):
            return tiles(position, out)
        d = others[level]
        return loop(0, dims[d], 1, out, lambda i, o: nest(level + 1, {**position, d: i}, o))

    return nest(0, {}, init)
