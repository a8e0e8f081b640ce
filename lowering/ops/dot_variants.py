"""Lowering of dot_general's variants: `ragged_dot` and `scaled_dot`.

Both convert their operands to the accumulation type the way dot_general does
(`dot.accumulation_type`) and contract in one linalg.generic whose indexing maps
read every operand in place, then round once to the result type.

ragged_dot follows XLA's own expansion (ragged_dot_rewriter.cc, jax's
_ragged_dot_general_impl): group g covers the ragged indices
[start_g, end_g), start/end being the exclusive/inclusive running sums of
group_sizes in its own integer type (so negative or overflowing sizes behave as
there). An index in no group contributes nothing. Rather than materialising
XLA's [g, ...] copy of the masked lhs, the group is one more loop of the
generic:

- ragged non-contracting dimension: a reduction loop over g, the lhs element
  masked to zero outside group g before it multiplies rhs[g] (so, as in XLA,
  an inf/NaN in another group's rhs still makes NaN); jax.lax.ragged_dot's
  layout (lhs [m, k], rhs [g, k, n]) is XLA's dense form as a linalg.batch_matmul
  of the masked lhs [g, m, k], so that it gets the matmul schedule;
- ragged contracting dimension: g is the result's leading parallel loop, lhs
  and rhs both masked (a masked product is exactly zero); with rank-2 operands,
  XLA's dense form: a linalg.batch_matmul of the masked [g, m, k] and [g, k, n];
- ragged batch dimension: group_sizes is not read; a plain contraction.

scaled_dot multiplies each operand by its scale (element [i // block]) in the
result type, then contracts like dot_general (linalg.matmul / batch_matmul in
their standard layouts, which the matmul schedule takes).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg

from ...dialect.element_types import PrimitiveType
from ...dialect.ops_dot import (
    DOT_FIELDS,
    DotDimensionNumbers,
    free_dimensions,
    ragged_mode,
    ragged_prefix_dimensions,
    scale_blocks,
)
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers
from ..scalar import arithmetic, conversion
from ..scalar.arithmetic import Elem
from .dot import _convert, _tensor_type, _zero, _zero_filled, accumulation_type, multiply_add
from .elementwise import generic

P = PrimitiveType


def _loop_maps(d: DotDimensionNumbers, lhs: Shape, rhs: Shape, leading: int, extra: int,
               rhs_group: int | None) -> tuple[dict[int, int], dict[int, int], int, int]:
    """Loop numbers of every lhs and rhs dimension in a generic whose loops are `leading`
    parallel ones (the contracting group), the dot's output dimensions, `extra` reduction
    ones (the non-contracting group) and the contracting dimensions. Returns
    (lhs loop of dim, rhs loop of dim, number of parallel loops, number of loops)."""
    lhs_free = free_dimensions(lhs.rank, d, "lhs")
    rhs_free = [i for i in free_dimensions(rhs.rank, d, "rhs") if i != rhs_group]
    n_batch = len(d.lhs_batch_dimensions)
    n_par = leading + n_batch + len(lhs_free) + len(rhs_free)
    first_contract = n_par + extra
    lhs_loop = {dim: leading + k for k, dim in enumerate(d.lhs_batch_dimensions)}
    lhs_loop.update({dim: leading + n_batch + k for k, dim in enumerate(lhs_free)})
    lhs_loop.update({dim: first_contract + k for k, dim in enumerate(d.lhs_contracting_dimensions)})
    rhs_loop = {dim: leading + k for k, dim in enumerate(d.rhs_batch_dimensions)}
    rhs_loop.update({dim: leading + n_batch + len(lhs_free) + k for k, dim in enumerate(rhs_free)})
    rhs_loop.update({dim: first_contract + k for k, dim in enumerate(d.rhs_contracting_dimensions)})
    return lhs_loop, rhs_loop, n_par, first_contract + len(d.lhs_contracting_dimensions)


def _map(n_loops: int, loops: list[int]) -> ir.AffineMap:
    return ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(k) for k in loops])


def _running_sums(gs: ir.Value, shape: Shape, inclusive: bool) -> ir.Value:
    """sum(group_sizes[..., :g + 1]) (inclusive) or sum(group_sizes[..., :g]) at [..., g],
    wrapping in group_sizes' type like XLA's reduce-window cumulative sum."""
    t = shape.element_type
    r = shape.rank
    init = _zero_filled(shape, t)
    maps = [_map(r + 1, [*range(r - 1), r]), _map(r + 1, list(range(r)))]
    op = linalg.GenericOp_([gs], [init], maps, ["parallel"] * r + ["reduction"])
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        x, acc = block.arguments
        g, j = linalg.IndexOp(r - 1).result, linalg.IndexOp(r).result
        counted = arith.cmpi(arith.CmpIPredicate.ule if inclusive else arith.CmpIPredicate.ult, j, g)
        linalg.YieldOp([arith.addi(acc, arith.select(counted, x, _zero(t)))])
    return op.results[0]


def _in_group(index: ir.Value, start: ir.Value, end: ir.Value, t: PrimitiveType) -> ir.Value:
    """start <= index < end in group_sizes' type (the index as an iota of that type)."""
    i = (arith.index_castui if t.is_unsigned_int else arith.index_cast)(start.type, index)
    le, lt = ((arith.CmpIPredicate.ule, arith.CmpIPredicate.ult) if t.is_unsigned_int
              else (arith.CmpIPredicate.sle, arith.CmpIPredicate.slt))
    return arith.andi(arith.cmpi(le, start, i), arith.cmpi(lt, i, end))


def _grouped_copy(x: ir.Value, shape: Shape, loops: list[int], ragged_loop: int, starts: ir.Value,
                  ends: ir.Value, dims: tuple[int, ...], gt: PrimitiveType, acc: PrimitiveType) -> ir.Value:
    """[g, ...dims...]: x (dimension i read by loop loops[i]) where loop ragged_loop is in
    group g, zero elsewhere (XLA's RaggedToDense)."""
    rank = len(dims) + 1
    wide = Shape.array(acc, (ir.RankedTensorType(starts.type).shape[0], *dims))
    group = _map(rank, [0])

    def body(a: ir.Value, start: ir.Value, end: ir.Value) -> ir.Value:
        return arith.select(_in_group(linalg.IndexOp(ragged_loop).result, start, end, gt), a, _zero(acc))

    bounds = Shape.array(gt, wide.dimensions[:1])
    return generic([x, starts, ends], [shape.with_element_type(acc), bounds, bounds], wide,
                   _tensor_type(wide, acc), body, input_maps=[_map(rank, loops), group, group])


def _batch_matmul(lhs: ir.Value, rhs: ir.Value, shape: Shape, acc: PrimitiveType) -> ir.Value:
    result = linalg.batch_matmul(lhs, rhs, outs=[_zero_filled(shape, acc)])
    return result.result if isinstance(result, (ir.Operation, ir.OpView)) else result


def _grouped_matmul(d: DotDimensionNumbers, lhs: ir.Value, rhs: ir.Value, starts: ir.Value, ends: ir.Value,
                    lhs_shape: Shape, rhs_shape: Shape, gs_shape: Shape, ragged: int, rhs_group: int | None,
                    acc: PrimitiveType, out: Shape) -> ir.Value | None:
    """XLA's dense form as a linalg.batch_matmul, which the matmul schedule packs and tiles (one
    generic over the group and the contraction gets none), for rank-2 operands without batch
    dimensions and group_sizes [g]; None for other layouts.

    Ragged non-contracting (jax.lax.ragged_dot: lhs [m, k], rhs [g, k, n]): lhs masked into
    [g, m, k], times rhs, the g products summed in order (an index in one group adds zeros to
    its own product). Ragged contracting (its transpose, lhs [m, k] or [k, m], rhs [k, n] or
    [n, k]): both masked into [g, m, k] and [g, k, n], the product is the result."""
    if lhs_shape.rank != 2 or gs_shape.rank != 1 or acc == P.PRED or d.lhs_batch_dimensions:
        return None
    g = gs_shape.dimensions[0]
    gt = gs_shape.element_type
    lc = d.lhs_contracting_dimensions
    if rhs_group is not None:
        jax_layout = rhs_shape.rank == 3 and ragged == 0 and rhs_group == 0
        if not (jax_layout and d == DotDimensionNumbers((1,), (1,))):
            return None
        (m, k), n = lhs_shape.dimensions, rhs_shape.dimensions[2]
        masked = _grouped_copy(lhs, lhs_shape, [1, 2], 1, starts, ends, (m, k), gt, acc)
        products = _batch_matmul(masked, rhs, Shape.array(acc, (g, m, n)), acc)
        op = linalg.GenericOp_([products], [_zero_filled(out.with_element_type(acc), acc)],
                               [_map(3, [0, 1, 2]), _map(3, [1, 2])], ["reduction", "parallel", "parallel"])
        block = op.regions[0].blocks[0]
        with ir.InsertionPoint(block):
            linalg.YieldOp([arithmetic.add(Elem(acc), block.arguments[1], block.arguments[0])])
        return op.results[0]
    if rhs_shape.rank != 2 or len(lc) != 1:
        return None
    rc = d.rhs_contracting_dimensions[0]
    m, k, n = lhs_shape.dimensions[1 - lc[0]], lhs_shape.dimensions[lc[0]], rhs_shape.dimensions[1 - rc]
    # Loops (g, m, k) and (g, k, n): each operand read through its own layout.
    lhs_g = _grouped_copy(lhs, lhs_shape, [1, 2] if lc[0] == 1 else [2, 1], 2, starts, ends, (m, k), gt, acc)
    rhs_g = _grouped_copy(rhs, rhs_shape, [1, 2] if rc == 0 else [2, 1], 1, starts, ends, (k, n), gt, acc)
    return _batch_matmul(lhs_g, rhs_g, out.with_element_type(acc), acc)


@lowers("ragged_dot")
def lower_ragged_dot(v: OpView) -> ir.Value:
    d = DotDimensionNumbers(*(v.attrs[name] for name in DOT_FIELDS))
    lhs_shape, rhs_shape, gs_shape = v.shapes["lhs"], v.shapes["rhs"], v.shapes["group_sizes"]
    out = v.result_shape
    ragged = v.attrs["lhs_ragged_dimensions"][0]
    mode = ragged_mode(ragged, d)
    rhs_group = v.attrs["rhs_group_dimensions"][0] if mode == "non_contracting" else None
    acc = accumulation_type(lhs_shape.element_type, rhs_shape.element_type, out.element_type)
    lhs = _convert(v.args["lhs"], lhs_shape, lhs_shape.element_type, acc)
    rhs = _convert(v.args["rhs"], rhs_shape, rhs_shape.element_type, acc)
    init = _zero_filled(out, acc)
    lhs_loop, rhs_loop, n_par, n_loops = _loop_maps(d, lhs_shape, rhs_shape, int(mode == "contracting"),
                                                    int(mode == "non_contracting"), rhs_group)
    inputs = [lhs, rhs]
    maps = [_map(n_loops, [lhs_loop[i] for i in range(lhs_shape.rank)]),
            _map(n_loops, [rhs_loop.get(i, n_par) for i in range(rhs_shape.rank)])]
    gt = gs_shape.element_type
    if mode != "batch":
        group_loop = 0 if mode == "contracting" else n_par
        prefix = ragged_prefix_dimensions(lhs_shape.rank, ragged, d) if gs_shape.rank > 1 else []
        gs_map = _map(n_loops, [lhs_loop[i] for i in prefix] + [group_loop])
        gs = v.args["group_sizes"]
        bounds = [_running_sums(gs, gs_shape, False), _running_sums(gs, gs_shape, True)]
        result = _grouped_matmul(d, lhs, rhs, *bounds, lhs_shape, rhs_shape, gs_shape, ragged, rhs_group,
                                 acc, out)
        if result is not None:
            return _convert(result, out.with_element_type(acc), acc, out.element_type)
        inputs += bounds
        maps += [gs_map, gs_map]
    maps.append(_map(n_loops, list(range(n_par))))
    op = linalg.GenericOp_(inputs, [init], maps, ["parallel"] * n_par + ["reduction"] * (n_loops - n_par))
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        a, b, *bounds, total = block.arguments
        if bounds:
            inside = _in_group(linalg.IndexOp(lhs_loop[ragged]).result, *bounds, gt)
            a = arith.select(inside, a, _zero(acc))
            if mode == "contracting":
                b = arith.select(inside, b, _zero(acc))
        linalg.YieldOp([multiply_add(acc)(a, b, total)])
    return _convert(op.results[0], out.with_element_type(acc), acc, out.element_type)


def _scaled(x: ir.Value, shape: Shape, scale: ir.Value, scale_shape: Shape, t: PrimitiveType) -> ir.Value:
    """x * scale[i // block] in type t, x's shape."""
    blocks = scale_blocks(shape, scale_shape)
    rank = shape.rank
    scale_map = ir.AffineMap.get(rank, 0, [ir.AffineExpr.get_floor_div(ir.AffineDimExpr.get(k), b)
                                           for k, b in enumerate(blocks)])
    e, xe, se = Elem(t), Elem(shape.element_type), Elem(scale_shape.element_type)
    out = shape.with_element_type(t)

    def body(a: ir.Value, s: ir.Value) -> ir.Value:
        return arithmetic.multiply(e, conversion.convert(xe, e, a), conversion.convert(se, e, s))

    return generic([x, scale], [shape, scale_shape], out, _tensor_type(out, t), body,
                   input_maps=[ir.AffineMap.get_identity(rank), scale_map])


@lowers("scaled_dot")
def lower_scaled_dot(v: OpView) -> ir.Value:
    d = DotDimensionNumbers(*(v.attrs[name] for name in DOT_FIELDS))
    out = v.result_shape
    t = out.element_type
    lhs = _scaled(v.args["lhs"], v.shapes["lhs"], v.args["lhs_scale"], v.shapes["lhs_scale"], t)
    rhs = _scaled(v.args["rhs"], v.shapes["rhs"], v.args["rhs_scale"], v.shapes["rhs_scale"], t)
    lhs_shape, rhs_shape = v.shapes["lhs"].with_element_type(t), v.shapes["rhs"].with_element_type(t)
    acc = accumulation_type(t, t, t)
    lhs, rhs = _convert(lhs, lhs_shape, t, acc), _convert(rhs, rhs_shape, t, acc)
    init = _zero_filled(out, acc)
    # The standard layouts as named ops: the matmul schedule packs and tiles those.
    layout = (lhs_shape.rank, rhs_shape.rank, d.lhs_contracting_dimensions, d.rhs_contracting_dimensions,
              d.lhs_batch_dimensions, d.rhs_batch_dimensions)
    named = {(2, 2, (1,), (0,), (), ()): linalg.matmul,
             (3, 3, (2,), (1,), (0,), (0,)): linalg.batch_matmul}.get(layout)
    if named is not None:
        result = named(lhs, rhs, outs=[init])
        result = result.result if isinstance(result, (ir.Operation, ir.OpView)) else result
        return _convert(result, out.with_element_type(acc), acc, t)
    lhs_loop, rhs_loop, n_par, n_loops = _loop_maps(d, lhs_shape, rhs_shape, 0, 0, None)
    maps = [_map(n_loops, [lhs_loop[i] for i in range(lhs_shape.rank)]),
            _map(n_loops, [rhs_loop[i] for i in range(rhs_shape.rank)]),
            _map(n_loops, list(range(n_par)))]
    op = linalg.GenericOp_([lhs, rhs], [init], maps, ["parallel"] * n_par + ["reduction"] * (n_loops - n_par))
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp([multiply_add(acc)(*block.arguments)])
    return _convert(op.results[0], out.with_element_type(acc), acc, t)

