"""Matrix-vector and vector-vector dots in vector lanes: y[b.., ...] = sum_k A[b.., ..., k] x[b.., k].

Contracting the minor dimension of both operands, the sequential form is a
reduction along memory: the loop nest's innermost loop is the reduction, which
neither vectorizer handles, so it ran as scalar code (a tanh RNN step's
W h was 10x slower than numpy). Here the contraction is split into LANES
partial sums per output element, A viewed as [..., K / LANES, LANES] and x as
[K / LANES, LANES] (batch dimensions leading in both); either operand of the dot may be
the vector (W h, or q K^T for one query per head): a generic whose innermost (parallel) loop runs along the
lanes and whose reduction loop over the chunks is outside it (the "lane
accumulation" that lowering/passes/vectorize.py vectorizes), then a generic
folding the lanes in order. Same reassociation as reduce's lane split
(lowering/ops/reduce.py); it depends on K only, never on the target CPU, so
every target computes the same sums in the same order. Imports `dialect` and
the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import linalg, tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.ops_dot import DotDimensionNumbers
from ...dialect.shape import Shape
from . import lane_rows

LANES = 16  # partial sums per output element: one f32 vector of the vectorize schedule
MIN_DEPTH = 4 * LANES  # shorter contractions: the fold of the lanes would cost as much
FOLD_TAG = "xlamlir.lane_fold"


def vector_operand(d: DotDimensionNumbers, lhs: Shape, rhs: Shape, acc: PrimitiveType) -> str | None:
    """"rhs" or "lhs": the operand that is a vector per batch element, when the other's
    minor dimension is contracted with it (batch dimensions leading in both, in order),
    over a depth that splits into whole lanes, in a type whose sums vectorize; else None.
    A matrix-vector product W h (the vector rhs) or x W^T / q K^T per head (the vector lhs:
    attention's one-query step)."""
    nb = len(d.lhs_batch_dimensions)
    if acc.is_complex or acc.is_pred or d.lhs_batch_dimensions != d.rhs_batch_dimensions or \
            d.lhs_batch_dimensions != tuple(range(nb)) or len(d.lhs_contracting_dimensions) != 1:
        return None
    (lc,), (rc,) = d.lhs_contracting_dimensions, d.rhs_contracting_dimensions
    if rhs.rank == nb + 1 and rc == nb and lc == lhs.rank - 1:
        which, k = "rhs", rhs.dimensions[nb]
    elif lhs.rank == nb + 1 and lc == nb and rc == rhs.rank - 1:
        which, k = "lhs", lhs.dimensions[nb]
    else:
        return None
    return which if k % LANES == 0 and k >= MIN_DEPTH else None


def _lanes_view(value: ir.Value) -> ir.Value:
    """[..., K] viewed as [..., K / LANES, LANES] (no copy)."""
    t = ir.RankedTensorType(value.type)
    dims = list(t.shape)
    new = dims[:-1] + [dims[-1] // LANES, LANES]
    rank = len(dims)
    reassociation = [[i] for i in range(rank - 1)] + [[rank - 1, rank]]
    return tensor.expand_shape(ir.RankedTensorType.get(new, t.element_type), value, reassociation, [], new)


def _filled(dims: list[int], zero: ir.Value) -> ir.Value:
    init = tensor.EmptyOp(dims, zero.type).result
    return linalg.fill(zero, outs=[init])


def _generic(inputs: list[ir.Value], init: ir.Value, maps: list[ir.AffineMap], iterators: list[str],
             body: Callable[..., ir.Value]) -> ir.Value:
    op = linalg.GenericOp_(inputs, [init], maps, iterators)
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return op.results[0]


def lane_dot(matrix: ir.Value, vector: ir.Value, batch: int, zero: ir.Value,
             multiply_add: Callable[[ir.Value, ir.Value, ir.Value], ir.Value],
             add: Callable[[ir.Value, ir.Value], ir.Value], vector_first: bool = False) -> ir.Value:
    """sum_k matrix[b.., f.., k] * vector[b.., k] (`vector_operand` holds; `batch` leading
    dimensions), every sum starting at `zero`; the products are vector * matrix element
    when `vector_first` (the operands' order in the dot). A plain [M, K] f32/f64 matrix
    times a vector is lowering/ops/lane_rows.py's vector code (the same sums)."""
    if lane_rows.applies(matrix, vector, batch):
        return lane_rows.lane_rows(matrix, vector, zero, multiply_add, add, vector_first)
    free = list(ir.RankedTensorType(matrix.type).shape)[:-1]
    rank = len(free)  # batch and free dimensions: the output's
    n = rank + 2  # loops: output dims, chunk, lane
    d = [ir.AffineDimExpr.get(i) for i in range(n)]
    body = (lambda m, v, acc: multiply_add(v, m, acc)) if vector_first else multiply_add
    partials = _generic(
        [_lanes_view(matrix), _lanes_view(vector)], _filled(free + [LANES], zero),
        [ir.AffineMap.get_identity(n), ir.AffineMap.get(n, 0, d[:batch] + d[rank:]),
         ir.AffineMap.get(n, 0, d[:rank] + [d[rank + 1]])],
        ["parallel"] * rank + ["reduction", "parallel"], body)
    # The lanes fold in order on a reduction loop (not an all-parallel generic reading each
    # lane through a map, which elementwise fusion would sink into a broadcasting consumer).
    e = [ir.AffineDimExpr.get(i) for i in range(rank + 1)]
    folded = _generic([partials], _filled(free, zero),
                      [ir.AffineMap.get_identity(rank + 1), ir.AffineMap.get(rank + 1, 0, e[:rank])],
                      ["parallel"] * rank + ["reduction"], lambda lane, acc: add(acc, lane))
    # Marked for lowering/passes/lane_folds.py (a reduce's folds are not: their transposes
    # cost more compile time than a fold 1/64 of a long row's work returns).
    folded.owner.attributes[FOLD_TAG] = ir.UnitAttr.get()
    return folded
