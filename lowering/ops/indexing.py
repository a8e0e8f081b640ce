"""Lowering of gather and scatter.

- gather: one `linalg.generic` over the output. Its body reads the start
  index vector with `tensor.extract` (at the output's batch position), clamps
  every start into `[0, dim - slice_size]` (64-bit, with the index type's
  signedness) and reads the operand element with `tensor.extract`; clamping
  keeps every read in bounds. When the output's minor dimension runs along the
  operand's minor dimension (an embedding lookup), each output row is a
  contiguous run of the operand: `_gather_rows` computes its start once and
  copies it in vectors, rows across the cores.
- scatter: `scf.for` loops over the update-scatter dimensions of `updates`
  (one iteration per index vector, in row-major order) carry the N results as
  tensors. Each iteration reads its start indices and checks XLA's bounds rule
  (every start in `[0, dim - window_size]`); an `scf.if` then runs the loops
  over the window, which read the current values and the updates with
  `tensor.extract`, apply the update computation as scalar code
  (`computations.current_library().emit_scalar`) and `tensor.insert` the
  results. The loops are sequential, so duplicate indices combine one after
  the other (the spec leaves their order unspecified).

The loop helpers here are shared with `lowering.ops.sort`. Imports `dialect` and
the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ...dialect.ops_indexing import batch_positions, scatter_window_sizes
from ..patterns.computations import apply_computation
from ..patterns.framework import OpView, lowers


def index_const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def element_type(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


LoopBody = Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]


def loop_nest(bounds: Sequence[int], carried: Sequence[ir.Value], body: LoopBody) -> list[ir.Value]:
    """`scf.for` loops over [0, bound) for each bound (outermost first) carrying `carried`;
    `body(induction variables, carried)` returns the carried values' next versions."""

    def level(depth: int, ivs: list[ir.Value], values: list[ir.Value]) -> list[ir.Value]:
        if depth == len(bounds):
            return body(ivs, values)
        loop = scf.ForOp(index_const(0), index_const(bounds[depth]), index_const(1), values)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(level(depth + 1, ivs + [loop.induction_variable],
                              list(loop.inner_iter_args)))
        return list(loop.results)

    return level(0, [], list(carried))


def if_else(condition: ir.Value, then: Callable[[], list[ir.Value]],
            otherwise: list[ir.Value]) -> list[ir.Value]:
    """`scf.if` yielding `then()` (built inside the then-region) or `otherwise`."""
    op = scf.IfOp(condition, [v.type for v in otherwise], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(then())
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(list(otherwise))
    return list(op.results)


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _widen(x: ir.Value, t: PrimitiveType) -> ir.Value:
    """An integer index (storage type) as i64, extended with its own signedness
    (a u8 200 stays 200, an s8 -1 stays -1)."""
    if t.bit_width < 64:
        return (arith.extsi if t.is_signed_int else arith.extui)(_i64(), x)
    return x


def _to_index(x: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IndexType.get(), x)


class IndexVectors:
    """Reads index vectors out of gather's start_indices / scatter's scatter_indices.

    `batch` are the loop positions over the indices' dimensions other than the
    index vector dimension (in order); `vector(k)` is the k-th element of the
    vector at that position, as i64.
    """

    def __init__(self, indices: ir.Value, rank: int, element: PrimitiveType,
                 index_vector_dim: int, batch: Sequence[ir.Value]) -> None:
        self.indices, self.rank, self.element = indices, rank, element
        self.index_vector_dim = index_vector_dim
        expanded = rank + 1 if index_vector_dim == rank else rank
        self.at = dict(zip(batch_positions(expanded, index_vector_dim), batch))

    def vector(self, k: int) -> ir.Value:
        position = [self.at.get(d) for d in range(self.rank)]
        if self.index_vector_dim < self.rank:  # else the implicit trailing dimension of size 1
            position[self.index_vector_dim] = index_const(k)
        return _widen(tensor.extract(self.indices, position), self.element)


def _index_sum(start: ir.Value | None, offset: ir.Value | None) -> ir.Value:
    """start + offset, either possibly absent (an implicit 0)."""
    if start is None or offset is None:
        present = start if offset is None else offset
        return index_const(0) if present is None else present
    return arith.addi(start, offset)


# -- gather -------------------------------------------------------------------------------------

def _clamped(x: ir.Value, t: PrimitiveType, largest: int) -> ir.Value:
    """x (i64) clamped to [0, largest], as an index; signed compares for signed index types,
    an unsigned min for unsigned ones (never below 0)."""
    hi = arith.constant(_i64(), largest)
    if t.is_signed_int:
        x = arith.minsi(arith.maxsi(x, arith.constant(_i64(), 0)), hi)
    else:
        x = arith.minui(x, hi)
    return _to_index(x)


def _gather_index(v: OpView, pos: Sequence[ir.Value]) -> list[ir.Value]:
    """The operand index that output position `pos` reads (clamped starts plus offsets)."""
    a = v.attrs
    out = v.result_shape
    operand, indices = v.shapes["operand"], v.shapes["start_indices"]
    offset_dims, slice_sizes = a["offset_dims"], a["slice_sizes"]
    removed = set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
    offset_operand_dims = [d for d in range(operand.rank) if d not in removed]
    batch = [pos[i] for i in range(out.rank) if i not in offset_dims]
    vectors = IndexVectors(v.args["start_indices"], indices.rank, indices.element_type,
                           a["index_vector_dim"], batch)
    index: list[ir.Value | None] = [None] * operand.rank
    for od, sd in zip(a["operand_batching_dims"], a["start_indices_batching_dims"]):
        index[od] = vectors.at[sd]  # the operand's batch element is the indices' own
    offsets = dict(zip(offset_operand_dims, (pos[i] for i in offset_dims)))
    starts = {}
    for k, d in enumerate(a["start_index_map"]):
        largest = operand.dimensions[d] - slice_sizes[d]
        if largest > 0:  # else the clamped start is always 0
            starts[d] = _clamped(vectors.vector(k), indices.element_type, largest)
    for d in range(operand.rank):
        if index[d] is None:
            index[d] = _index_sum(starts.get(d), offsets.get(d))
    return [i for i in index if i is not None]


def _row_copies(v: OpView) -> int | None:
    """Vector lanes for copying gathered slices row by row, or None: the output's minor
    dimension must be an offset dimension running along the operand's minor dimension
    (then a row of the output is a contiguous run of the operand), holding at least
    half a vector of a type with a vector form."""
    a = v.attrs
    out, operand = v.result_shape, v.shapes["operand"]
    removed = set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
    offset_operand_dims = [d for d in range(operand.rank) if d not in removed]
    element = ir.RankedTensorType(v.result_type).element_type
    if (out.rank < 2 or not isinstance(element, (ir.FloatType, ir.IntegerType))
            or element.width not in (8, 16, 32, 64) or out.rank - 1 not in a["offset_dims"]
            or offset_operand_dims[-1] != operand.rank - 1):
        return None
    lanes = VECTOR_BYTES * 8 // element.width
    return lanes if out.dimensions[-1] >= lanes // 2 else None


VECTOR_BYTES = 64  # one AVX-512 register, two AVX2 ones
DYNAMIC = -(2 ** 63)  # ShapedType::kDynamic: an offset or size given as an SSA value


def _gather_rows(v: OpView, lanes: int) -> ir.Value:
    """gather as loops: one scf.forall iteration per index of the output's first
    dimension (split across the cores), scf.for loops over the other positions but the
    minor one, whose start index is computed once per row; the row is then copied in
    vectors (`vector.transfer_read` of contiguous operand elements, the last one masked)."""
    out = v.result_shape
    dims = list(out.dimensions)
    rank = out.rank
    element = ir.RankedTensorType(v.result_type).element_type
    lanes = min(lanes, 1 << (dims[-1].bit_length() - 1))
    vtype = ir.VectorType.get([lanes], element)
    operand = v.args["operand"]
    operand_rank = v.shapes["operand"].rank
    in_bounds = [dims[-1] % lanes == 0]
    read_map = ir.AffineMap.get(operand_rank, 0, [ir.AffineDimExpr.get(operand_rank - 1)])
    write_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    padding = arith.constant(element, 0.0 if isinstance(element, ir.FloatType) else 0)
    slab_dims = [1, *dims[1:]]
    slab_type = ir.RankedTensorType.get(slab_dims, element)

    def row(position: list[ir.Value], slab: ir.Value) -> ir.Value:
        start = _gather_index(v, position + [index_const(0)])

        def chunk(j: ir.Value, slab: ir.Value) -> ir.Value:
            at = start[:-1] + [arith.addi(start[-1], j)]
            values = vector.transfer_read(vtype, operand, at, read_map, padding, in_bounds)
            local = [index_const(0), *position[1:], j]
            return vector.transfer_write(slab.type, values, slab, local, write_map, in_bounds)

        loop = scf.ForOp(index_const(0), index_const(dims[-1]), index_const(lanes), [slab])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([chunk(loop.induction_variable, loop.inner_iter_args[0])])
        return loop.results[0]

    shared = tensor.EmptyOp(dims, element).result
    loop = scf.ForallOp([0], [dims[0]], [1], [shared])
    with ir.InsertionPoint(loop.body):
        first = loop.induction_variables[0]
        # The iteration's slice of the shared output as its destination: written in place.
        offsets = [DYNAMIC] + [0] * (rank - 1)
        slab = tensor.extract_slice(slab_type, loop.inner_iter_args[0], [first], [], [], offsets,
                                    slab_dims, [1] * rank)
        slab = loop_nest(dims[1:-1], [slab], lambda ivs, slabs: [row([first, *ivs], slabs[0])])[0]
        with ir.InsertionPoint(loop.terminator().block):
            tensor.parallel_insert_slice(slab, loop.inner_iter_args[0], [first], [], [], offsets,
                                         slab_dims, [1] * rank)
    return loop.results[0]


@lowers("gather")
def lower_gather(v: OpView) -> ir.Value:
    out = v.result_shape
    elem = ir.RankedTensorType(v.result_type).element_type
    init = tensor.EmptyOp(list(out.dimensions), elem).result
    if out.numel == 0:
        return init  # nothing to read (a non-empty output implies every slice size >= 1)
    lanes = _row_copies(v)
    if lanes is not None:
        return _gather_rows(v, lanes)
    op = linalg.GenericOp_([], [init], [ir.AffineMap.get_identity(out.rank)],
                           ["parallel"] * out.rank)
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        pos = [linalg.IndexOp(i).result for i in range(out.rank)]
        linalg.YieldOp([tensor.extract(v.args["operand"], _gather_index(v, pos))])
    return op.results[0]


# -- scatter ------------------------------------------------------------------------------------

def _in_bounds(x: ir.Value, t: PrimitiveType, largest: int) -> ir.Value:
    """0 <= x <= largest for x (i64) of index type t: the window starting at x fits."""
    i1 = ir.IntegerType.get_signless(1)
    if largest < 0:
        return arith.constant(i1, 0)  # an empty dimension takes no window
    hi = arith.constant(_i64(), largest)
    if t.is_signed_int:
        return arith.andi(arith.cmpi(arith.CmpIPredicate.sge, x, arith.constant(_i64(), 0)),
                          arith.cmpi(arith.CmpIPredicate.sle, x, hi))
    return arith.cmpi(arith.CmpIPredicate.ule, x, hi)


@lowers("scatter")
def lower_scatter(v: OpView) -> list[ir.Value]:
    a = v.attrs
    inputs, updates = list(v.args["inputs"]), list(v.args["updates"])
    operand, update = v.shapes["inputs"][0], v.shapes["updates"][0]
    indices = v.shapes["scatter_indices"]
    if update.numel == 0:
        return inputs
    window_dims = a["update_window_dims"]
    scatter_dims = [d for d in range(update.rank) if d not in window_dims]
    window = scatter_window_sizes(operand, update, window_dims, a["inserted_window_dims"],
                                  a["input_batching_dims"])
    removed = set(a["inserted_window_dims"]) | set(a["input_batching_dims"])
    window_operand_dims = [d for d in range(operand.rank) if d not in removed]
    symbol = a["update_computation"]
    t = indices.element_type

    def one_index_vector(batch: list[ir.Value], outs: list[ir.Value]) -> list[ir.Value]:
        vectors = IndexVectors(v.args["scatter_indices"], indices.rank, t,
                               a["index_vector_dim"], batch)
        starts: dict[int, ir.Value] = {}
        valid = arith.constant(ir.IntegerType.get_signless(1), 1)
        for k, d in enumerate(a["scatter_dims_to_operand_dims"]):
            x = vectors.vector(k)
            valid = arith.andi(valid, _in_bounds(x, t, operand.dimensions[d] - window[d]))
            starts[d] = x
        batch_index = {od: vectors.at[sd] for od, sd in
                       zip(a["input_batching_dims"], a["scatter_indices_batching_dims"])}

        def apply_window() -> list[ir.Value]:
            # Inside the guard the starts are known to be in [0, dim - window]: safe as indices.
            start_index = {d: _to_index(x) for d, x in starts.items()}

            def one_element(offsets: list[ir.Value], values: list[ir.Value]) -> list[ir.Value]:
                u_index: list[ir.Value | None] = [None] * update.rank
                for d, iv in zip(scatter_dims, batch):
                    u_index[d] = iv
                for d, iv in zip(window_dims, offsets):
                    u_index[d] = iv
                offset_of = dict(zip(window_operand_dims, offsets))
                o_index = []
                for d in range(operand.rank):
                    if d in batch_index:
                        o_index.append(batch_index[d])
                        continue
                    o_index.append(_index_sum(start_index.get(d), offset_of.get(d)))
                current = [tensor.extract(x, o_index) for x in values]
                new = [tensor.extract(u, u_index) for u in updates]
                combined = apply_computation("scatter", symbol, current + new)
                return [tensor.insert(c, x, o_index) for c, x in zip(combined, values)]

            return loop_nest([update.dimensions[d] for d in window_dims], outs, one_element)

        return if_else(valid, apply_window, outs)

    return loop_nest([update.dimensions[d] for d in scatter_dims], inputs, one_index_vector)
