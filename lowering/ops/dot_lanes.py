"""Matrix-vector and vector-vector dots in vector lanes: y[...] = sum_k A[..., k] x[k].

Contracting the minor dimension of both operands, the sequential form is a
reduction along memory: the loop nest's innermost loop is the reduction, which
neither vectorizer handles, so it ran as scalar code (a tanh RNN step's
W h was 10x slower than numpy). Here the contraction is split into LANES
partial sums per output element, A viewed as [..., K / LANES, LANES] and x as
[K / LANES, LANES]: a generic whose innermost (parallel) loop runs along the
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

LANES = 16  # partial sums per output element: one f32 vector of the vectorize schedule
MIN_DEPTH = 4 * LANES  # shorter contractions: the fold of the lanes would cost as much


def applies(d: DotDimensionNumbers, lhs_rank: int, rhs_rank: int, k: int, acc: PrimitiveType) -> bool:
    """Whether a dot contracts A's minor dimension with a vector x (no batch dimensions),
    over a depth that splits into whole lanes, in a type whose sums vectorize."""
    if d.lhs_batch_dimensions or rhs_rank != 1 or lhs_rank < 1:
        return False
    if d.lhs_contracting_dimensions != (lhs_rank - 1,) or d.rhs_contracting_dimensions != (0,):
        return False
    return k % LANES == 0 and k >= MIN_DEPTH and not (acc.is_complex or acc.is_pred)


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


def lane_dot(lhs: ir.Value, rhs: ir.Value, zero: ir.Value,
             multiply_add: Callable[[ir.Value, ir.Value, ir.Value], ir.Value],
             add: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """sum_k lhs[..., k] * rhs[k] (`applies` holds), every sum starting at `zero`."""
    free = list(ir.RankedTensorType(lhs.type).shape)[:-1]
    rank = len(free)
    n = rank + 2  # loops: free dims, chunk, lane
    d = [ir.AffineDimExpr.get(i) for i in range(n)]
    partials = _generic(
        [_lanes_view(lhs), _lanes_view(rhs)], _filled(free + [LANES], zero),
        [ir.AffineMap.get_identity(n), ir.AffineMap.get(n, 0, d[rank:]),
         ir.AffineMap.get(n, 0, d[:rank] + [d[rank + 1]])],
        ["parallel"] * rank + ["reduction", "parallel"], multiply_add)
    # The lanes fold in order on a reduction loop (not an all-parallel generic reading each
    # lane through a map, which elementwise fusion would sink into a broadcasting consumer).
    e = [ir.AffineDimExpr.get(i) for i in range(rank + 1)]
    return _generic([partials], _filled(free, zero),
                    [ir.AffineMap.get_identity(rank + 1), ir.AffineMap.get(rank + 1, 0, e[:rank])],
                    ["parallel"] * rank + ["reduction"], lambda lane, acc: add(acc, lane))
