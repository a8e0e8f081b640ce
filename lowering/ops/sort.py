"""Lowering of sort: which algorithm runs, and the general one (a merge sort).

`lower_sort` picks, per op:
- only positions [0, K) read (every use a slice; top_k is sort + slice), K <= 32:
  a per-row selection of the stable sort's first K (`sort_kernels.select_rows`);
- a comparator recognised as one operand's value in a total order
  (`sort_kernels.key_order`: the default, jnp.sort's TOTALORDER LT, integer
  LT/GT...), keys of up to 32 bits and short rows along the last dimension:
  a bitonic network with one vector lane per row (`sort_network.network_rows`);
- such an order and rows longer than 16: an LSD radix sort (`radix_rows`);
- anything else: the merge sort below, one row per scf.forall iteration; for
  a recognised order it compares the unsigned keys instead of calling the
  comparator.
Every path gives the stable sort's result, bit for bit, for any input.

The merge sort: every row along the sort dimension (length n) is sorted by
ceil(log2 n) merge passes, unrolled at compile time since n is static: pass p
merges neighbouring sorted runs of width 2**p into runs of twice that width. A
pass is `scf.for` loops over the other dimensions and the run starts, around
an `scf.for` over the merged positions that carries the two read cursors and
the N destination tensors (`tensor.extract` / `tensor.insert`). Reads use
cursors clamped to n - 1, so even the comparator call made for an exhausted
run reads in bounds.

The merge takes from the right run only when `comparator(right, left)` is
true, i.e. when the right element must go strictly first, so equal elements
keep their order: the sort is always stable, which `is_stable = false`
allows. O(n log n) comparator calls per row.

Pass p writes into the result of pass p - 2 (dead by then), so bufferization
needs two buffers, not one per pass. Imports `dialect` and the lowering
modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...dialect.element_types import PrimitiveType
from ..patterns.computations import apply_computation
from ..patterns.framework import OpView, lowers
from ..scalar.storage import from_storage
from .indexing import element_type, index_const, loop_nest
from .sort_kernels import (
    MAX_SELECTED,
    SHORT_ROW,
    for_each_row,
    key_order,
    prefix_read,
    radix_rows,
    row_slice,
    select_rows,
    sort_key,
)
from .sort_network import network_applies, network_rows
from .sort_parallel import parallel_applies, parallel_radix

Before = Callable[[Sequence[ir.Value], Sequence[ir.Value]], ir.Value]


def _merge_pass(sources: Sequence[ir.Value], destinations: Sequence[ir.Value],
                dims: Sequence[int], axis: int, width: int, comparator: str,
                before: Before | None) -> list[ir.Value]:
    """`destinations` with every pair of neighbouring runs of `width` of `sources` merged."""
    n = dims[axis]
    outer = [d for d in range(len(dims)) if d != axis]
    last = index_const(n - 1)
    n_value = index_const(n)

    def row(ivs: list[ir.Value], outs: list[ir.Value]) -> list[ir.Value]:
        def at(position: ir.Value) -> list[ir.Value]:
            index = list(ivs)
            index.insert(axis, position)
            return index

        runs = scf.ForOp(index_const(0), n_value, index_const(2 * width), outs)
        with ir.InsertionPoint(runs.body):
            lo = runs.induction_variable
            mid = arith.minsi(arith.addi(lo, index_const(width)), n_value)
            hi = arith.minsi(arith.addi(lo, index_const(2 * width)), n_value)
            merge = scf.ForOp(lo, hi, index_const(1), [lo, mid, *runs.inner_iter_args])
            with ir.InsertionPoint(merge.body):
                k = merge.induction_variable
                i, j, *values = merge.inner_iter_args
                left_at, right_at = at(arith.minsi(i, last)), at(arith.minsi(j, last))
                left = [tensor.extract(s, left_at) for s in sources]
                right = [tensor.extract(s, right_at) for s in sources]
                # comparator(right, left), parameters (2m, 2m+1) being operand m at the two
                # positions: true only when the right element must go first, so equal ones
                # take the left (earlier) element and the merge is stable.
                pairs = [x for r, l in zip(right, left) for x in (r, l)]
                if before is not None:
                    right_first = before(right, left)
                else:
                    right_first = from_storage(apply_computation("sort", comparator, pairs)[0],
                                               PrimitiveType.PRED)
                right_remains = arith.cmpi(arith.CmpIPredicate.slt, j, hi)
                left_done = arith.cmpi(arith.CmpIPredicate.sge, i, mid)
                take_right = arith.andi(right_remains, arith.ori(left_done, right_first))
                one = index_const(1)
                new_values = [tensor.insert(arith.select(take_right, r, l), out, at(k))
                              for r, l, out in zip(right, left, values)]
                scf.YieldOp([arith.select(take_right, i, arith.addi(i, one)),
                             arith.select(take_right, arith.addi(j, one), j), *new_values])
            scf.YieldOp(list(merge.results)[2:])
        return list(runs.results)

    return loop_nest([dims[d] for d in outer], destinations, row)


@lowers("sort")
def lower_sort(v: OpView) -> list[ir.Value]:
    inputs = list(v.args["inputs"])
    dims = list(v.shapes["inputs"][0].dimensions)
    axis = v.attrs["dimension"]
    n = dims[axis]
    if n <= 1 or 0 in dims:
        return inputs  # already sorted
    comparator = v.attrs["comparator"]
    kept = prefix_read(v.op, axis)
    if kept == 0:
        return [tensor.EmptyOp(dims, element_type(x)).result for x in inputs]
    if kept is not None and kept < n and kept <= MAX_SELECTED:
        return select_rows(inputs, dims, axis, comparator, kept)
    types = [s.element_type for s in v.shapes["inputs"]]
    order = key_order(comparator, types)
    if order is not None and network_applies(dims, axis, types, order):
        return network_rows(inputs, types, dims, order)
    if order is not None and parallel_applies(dims, axis, types, order):
        return parallel_radix(inputs, types, n, order)
    if order is not None and SHORT_ROW < n < 2 ** 31:  # positions are counted in i32
        return radix_rows(inputs, types, dims, axis, order)
    before = None
    if order is not None:
        def before(x: Sequence[ir.Value], y: Sequence[ir.Value]) -> ir.Value:
            # The recognised order as one unsigned compare of keys (the default float
            # comparator's NaN tests and total-order compare cost ~3x more).
            t = types[order.operand]
            return arith.cmpi(arith.CmpIPredicate.ult, sort_key(x[order.operand], t, order),
                              sort_key(y[order.operand], t, order))
    if len(dims) == 1:
        return merge_sort(inputs, dims, axis, comparator, before)
    return for_each_row(dims, axis, [element_type(x) for x in inputs], n, lambda ivs, _: merge_sort(
        [row_slice(x, ivs, axis) for x in inputs], [n], 0, comparator, before))


def merge_sort(inputs: list[ir.Value], dims: list[int], axis: int, comparator: str,
               before: Before | None = None) -> list[ir.Value]:
    """The general path: `inputs` merge-sorted along `axis` by any comparator; `before`,
    when given, computes the comparator's answer more cheaply."""
    n = dims[axis]
    previous: list[ir.Value] | None = None  # the result of the pass before the last
    current = inputs
    width = 1
    while width < n:
        if previous is None:
            destinations = [tensor.EmptyOp(dims, element_type(x)).result for x in inputs]
        else:
            destinations = previous  # dead once the last pass has read it
        result = _merge_pass(current, destinations, dims, axis, width, comparator, before)
        previous = current if current is not inputs else None  # never write into the inputs
        current = result
        width *= 2
    return current
