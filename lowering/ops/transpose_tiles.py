"""A transpose that moves the minor dimension, as tiles of vectors.

`linalg.transpose` left to the pipeline becomes affine loops that the
super-vectorizer vectorizes along one loop: the reads or the writes are then
strided element gathers, and the loop order walks one of the two arrays across
its rows (every access a new cache line, and a TLB miss on large arrays).

Here the operand's minor dimension `m` and the dimension `b` that becomes the
result's minor dimension are cut into T x T tiles. A whole tile is T
`vector.transfer_read`s of T contiguous elements (rows of x along `m`), a
transpose in registers by log2(T) rounds of two-vector `vector.shuffle`s
(`register_transpose.transposed`), and T contiguous row writes of the result. Tiles go by blocks
of BLOCK x BLOCK elements, so that the rows a block touches stay in L1 and in
the TLB; inside a block, tiles along `b` are the inner loop (the result is
written row by row). Tiles crossing an edge are one masked 2-D transfer_read,
a `vector.transpose` and a masked 2-D transfer_write (out-of-bounds lanes are
neither read nor written). Every other dimension is an outer loop. From
PARALLEL_MIN_BYTES the cores split x's minor dimension: one `scf.forall`
iteration per chunk of it (a divisor of its whole tiles, at most BLOCK) writes
its own slab of the result in place; the edge tiles follow on the calling
thread. Only element moves: bit-exact for every type with a vector form.
Imports the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from ..register_transpose import transposed
from .indexing import DYNAMIC
from .linear_algebra import reassociation

TILE_BYTES = 32  # one tile row: an AVX2 register (8 x f32), half a cache line
# Tiles are visited by blocks of BLOCK x BLOCK elements: the rows of x and of the result
# that a block touches stay in L1 and in the TLB (4096 x 4096 f32 rows are pages apart).
BLOCK = 64
# From this size the cores split the transpose (a 4096 x 4096 f32 one by two cores: 44 ms
# -> 21 ms; smaller ones would pay more for the dispatch than they gain).
PARALLEL_MIN_BYTES = 1 << 19


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


def _value(value: int | ir.Value) -> ir.Value:
    return _index(value) if isinstance(value, int) else value


def _upto(start: ir.Value, end: int | ir.Value) -> ir.Value:
    """min(start + BLOCK, end): the end of the block starting at `start`."""
    return arith.minsi(arith.addi(start, _index(BLOCK)), _value(end))


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
    row_type = ir.VectorType.get([t], element)
    minor = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(m)])
    out_minor = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    zero = arith.constant(element, 0.0 if isinstance(element, ir.FloatType) else 0)
    init = tensor.EmptyOp(out_dims, element).result

    def loop(lo: int | ir.Value, hi: int | ir.Value, step: int, carried: ir.Value, body) -> ir.Value:
        op = scf.ForOp(_value(lo), _value(hi), _index(step), [carried])
        with ir.InsertionPoint(op.body):
            scf.YieldOp([body(op.induction_variable, op.inner_iter_args[0])])
        return op.results[0]

    def out_index(at: dict[int, ir.Value], m_start: ir.Value | None) -> list[ir.Value]:
        """The result's indices of x's element `at`, in a slab of the result whose
        dimension out_m starts at x's minor index `m_start` (None: the whole result)."""
        index = [at[p] for p in permutation]
        if m_start is not None:
            index[out_m] = arith.subi(index[out_m], m_start)
        return index

    def whole_tile(at: dict[int, ir.Value], out: ir.Value, m_start: ir.Value | None) -> ir.Value:
        """A tile inside both dimensions: t row reads, shuffles, t row writes."""
        rows = []
        for k in range(t):
            row_at = {**at, b: arith.addi(at[b], _index(k))}
            rows.append(vector.transfer_read(row_type, x, [row_at[d] for d in range(rank)], minor,
                                             zero, [True]))
        for k, row in enumerate(transposed(rows, pairs_first=False)):
            row_at = {**at, m: arith.addi(at[m], _index(k))}
            out = vector.transfer_write(out.type, row, out, out_index(row_at, m_start), out_minor, [True])
        return out

    def edge_tile(at: dict[int, ir.Value], out: ir.Value) -> ir.Value:
        """A tile crossing an edge: one masked 2-D read and write around vector.transpose."""
        rows = vector.transfer_read(tile_type, x, [at[d] for d in range(rank)], read_map, zero,
                                    [False, False])
        flipped = vector.transpose(tile_type, rows, [1, 0])
        return vector.transfer_write(out.type, flipped, out, [at[p] for p in permutation], write_map,
                                     [False, False])

    whole_b, whole_m = dims[b] - dims[b] % t, dims[m] - dims[m] % t

    def whole_tiles(position: dict[int, ir.Value], out: ir.Value, m_start: ir.Value | None,
                    m_end: int | ir.Value) -> ir.Value:
        """The whole tiles whose x minor indices are in [m_start, m_end), by blocks."""
        def block(bb: ir.Value, mb: ir.Value, out: ir.Value) -> ir.Value:
            """BLOCK x BLOCK elements of whole tiles (fewer at the end)."""
            def strip(j: ir.Value, out: ir.Value) -> ir.Value:
                return loop(bb, _upto(bb, whole_b), t, out,
                            lambda i, o: whole_tile({**position, b: i, m: j}, o, m_start))
            return loop(mb, _upto(mb, m_end), t, out, strip)

        return loop(0, whole_b, BLOCK, out, lambda bb, o: loop(
            0 if m_start is None else m_start, m_end, BLOCK, o, lambda mb, o2: block(bb, mb, o2)))

    def edge_tiles(position: dict[int, ir.Value], out: ir.Value) -> ir.Value:
        if whole_b < dims[b]:  # the last rows of x: edge tiles along its minor dimension
            out = loop(0, whole_m, t, out, lambda j, o: edge_tile({**position, b: _index(whole_b), m: j}, o))
        if whole_m < dims[m]:  # the last columns of x
            out = loop(0, dims[b], t, out, lambda i, o: edge_tile({**position, b: i, m: _index(whole_m)}, o))
        return out

    def nest(level: int, position: dict[int, ir.Value], out: ir.Value, body) -> ir.Value:
        if level == len(others):
            return body(position, out)
        d = others[level]
        return loop(0, dims[d], 1, out, lambda i, o: nest(level + 1, {**position, d: i}, o, body))

    chunk = _parallel_chunk(whole_m, t, math.prod(dims) * (TILE_BYTES // t))
    if chunk is None:
        out = nest(0, {}, init, lambda position, o: whole_tiles(position, o, None, whole_m))
    else:
        # The cores split x's minor dimension (the result's dimension out_m): each
        # iteration writes its own slab of the result, in place.
        slab_dims = [chunk if d == out_m else n for d, n in enumerate(out_dims)]
        offsets = [DYNAMIC if d == out_m else 0 for d in range(rank)]
        forall = scf.ForallOp([0], [whole_m // chunk], [1], [init])
        with ir.InsertionPoint(forall.body):
            start = arith.muli(forall.induction_variables[0], _index(chunk))
            slab = tensor.extract_slice(ir.RankedTensorType.get(slab_dims, element),
                                        forall.inner_iter_args[0], [start], [], [], offsets,
                                        slab_dims, [1] * rank)
            end = arith.addi(start, _index(chunk))
            slab = nest(0, {}, slab, lambda position, o: whole_tiles(position, o, start, end))
            with ir.InsertionPoint(forall.terminator().block):
                tensor.parallel_insert_slice(slab, forall.inner_iter_args[0], [start], [], [],
                                             offsets, slab_dims, [1] * rank)
        out = forall.results[0]
    if whole_b < dims[b] or whole_m < dims[m]:
        out = nest(0, {}, out, edge_tiles)
    return out


def _runs(permutation: Sequence[int]) -> list[list[int]]:
    """The result's dimensions cut into runs of operand dimensions that stay adjacent and
    in order (each run one dimension of a collapsed view), in result order."""
    runs: list[list[int]] = []
    for p in permutation:
        if runs and runs[-1][-1] + 1 == p:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def tiled(x: ir.Value, dims: Sequence[int], permutation: Sequence[int]) -> ir.Value | None:
    """`x` transposed by tiles (`transpose_tiles`) if that applies to it or to the view
    whose dimensions are its runs of dimensions that stay together (`_runs`: OIHW ->
    HWIO is [O, I, H*W] -> [H*W, I, O], its minor run 9 long); None if neither."""
    element = ir.RankedTensorType(x.type).element_type
    if applies(dims, permutation, element):
        return transpose_tiles(x, dims, permutation)
    runs = _runs(permutation)
    if len(runs) == len(dims) or len(runs) < 2:
        return None
    by_operand = sorted(runs)  # runs are disjoint intervals: sorted by their first dimension
    view_dims = [math.prod(dims[d] for d in run) for run in by_operand]
    view_permutation = [by_operand.index(run) for run in runs]
    if not applies(view_dims, view_permutation, element):
        return None
    view = tensor.CollapseShapeOp(ir.RankedTensorType.get(view_dims, element), x,
                                  reassociation(by_operand)).result
    moved = transpose_tiles(view, view_dims, view_permutation)
    out_dims = [dims[p] for p in permutation]
    out_groups, k = [], 0
    for run in runs:
        out_groups.append(list(range(k, k + len(run))))
        k += len(run)
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(out_dims, element), moved,
                                reassociation(out_groups), [], out_dims).result


def _parallel_chunk(whole_m: int, t: int, total_bytes: int) -> int | None:
    """Elements of x's minor dimension per parallel iteration: the largest multiple of
    t up to BLOCK that divides whole_m, or None (one loop nest on the calling thread)
    for a transpose under PARALLEL_MIN_BYTES or with fewer than two such chunks."""
    if total_bytes < PARALLEL_MIN_BYTES:
        return None
    chunk = max(c for c in range(t, BLOCK + 1, t) if whole_m % c == 0)
    return chunk if whole_m // chunk >= 2 else None
