"""reduce_window as a prefix scan: XLA's cumulative-op idiom (cumsum, cummax...).

A window of the whole axis (n = the dimension) with padding (n - 1, 0) along
it, stride 1, no dilation and windows of 1 elsewhere makes output i the
in-order fold of (n - 1 - i) padding cells (the init value) and then
x_0 ... x_i. When f(init, init) == init (bit for bit, checked at run time;
true for the identities the spec asks for), the padding leaves the
accumulator at init, so output i is f(...f(f(init, x_0), x_1)..., x_i): the
same operations in the same order as a running fold, out_i = f(out_{i-1},
x_i). The scan is therefore exact for every computation and element type,
float sums included (no reassociation), in O(n) instead of O(n^2). Any other
init falls back to the window loops (the `otherwise` branch).

The loops: the operand viewed as [P, n, Q] (dimensions before the axis, the
axis, dimensions after it); one scf.forall iteration per p (split across the
cores), sequential along n, and along q an inner loop of independent
elements that LLVM can vectorize. Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ..patterns.computations import apply_computation
from .indexing import DYNAMIC
from .sort_kernels import for_range, if_values


def scan_axis(dims: Sequence[int], window: Sequence[int], strides: Sequence[int],
              base_dilations: Sequence[int], window_dilations: Sequence[int],
              padding: Sequence[Sequence[int]]) -> int | None:
    """The axis when the window op is a prefix scan along it, else None."""
    axes = [d for d, w in enumerate(window) if w != 1]
    if len(axes) != 1:
        return None
    axis = axes[0]
    n = dims[axis]
    if n < 2 or window[axis] != n or 0 in dims:
        return None
    if any(s != 1 for s in strides) or any(b != 1 for b in base_dilations):
        return None
    if any(w != 1 for w in window_dilations):
        return None
    return axis if all(tuple(p) == ((n - 1, 0) if d == axis else (0, 0))
                       for d, p in enumerate(padding)) else None


def _reshape(x: ir.Value, shape: Sequence[int], groups: Sequence[Sequence[int]],
             expand: bool) -> ir.Value:
    element = ir.RankedTensorType(x.type).element_type
    result = ir.RankedTensorType.get(list(shape), element)
    if expand:
        return tensor.expand_shape(result, x, [list(g) for g in groups], [], list(shape))
    return tensor.collapse_shape(result, x, [list(g) for g in groups])


def _bits(x: ir.Value) -> ir.Value:
    if isinstance(x.type, ir.IntegerType):
        return x
    return arith.bitcast(ir.IntegerType.get_signless(x.type.width), x)


def scan(inputs: Sequence[ir.Value], inits: Sequence[ir.Value], dims: Sequence[int], axis: int,
         symbol: str, otherwise: Callable[[], list[ir.Value]]) -> list[ir.Value]:
    """The cumulative fold of `inputs` along `axis` by the computation `symbol` from the
    scalars `inits`, or `otherwise()` when f(init, init) != init."""
    rank = len(dims)
    p_size, n, q_size = math.prod(dims[:axis]), dims[axis], math.prod(dims[axis + 1:])
    # [1, dims..., 1] then [P, n, Q]: every group of the collapse is non-empty.
    padded = [1, *dims, 1]
    to_padded = [[0, 1]] + [[i + 1] for i in range(1, rank - 1)] + [[rank, rank + 1]]
    if rank == 1:
        to_padded = [[0, 1, 2]]
    to_3d = [list(range(0, axis + 1)), [axis + 1], list(range(axis + 2, rank + 2))]
    types = [ir.RankedTensorType(x.type).element_type for x in inputs]

    def as_3d(x: ir.Value) -> ir.Value:
        return _reshape(_reshape(x, padded, to_padded, True), [p_size, n, q_size], to_3d, False)

    def from_3d(x: ir.Value) -> ir.Value:
        return _reshape(_reshape(x, padded, to_3d, True), dims, to_padded, False)

    def slab(xs: list[ir.Value]) -> list[ir.Value]:
        """The scan of [n, Q] slabs."""
        outs = [tensor.EmptyOp([n, q_size], t).result for t in types]

        def step(i: ir.Value | None) -> Callable[[ir.Value, list[ir.Value]], list[ir.Value]]:
            def body(q: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
                row = i if i is not None else arith.constant(ir.IndexType.get(), 0)
                if i is None:
                    accs = list(inits)
                else:
                    before = arith.subi(row, arith.constant(ir.IndexType.get(), 1))
                    accs = [tensor.extract(o, [before, q]) for o in outs]
                values = [tensor.extract(x, [row, q]) for x in xs]
                new = apply_computation("reduce_window", symbol, accs + values)
                return [tensor.insert(v, o, [row, q]) for v, o in zip(new, outs)]
            return body

        outs = for_range(0, q_size, outs, step(None))
        return for_range(1, n, outs, lambda i, outs: for_range(0, q_size, outs, step(i)))

    def scanned() -> list[ir.Value]:
        xs = [as_3d(x) for x in inputs]
        if p_size == 1:
            slices = [tensor.collapse_shape(ir.RankedTensorType.get([n, q_size], t), x,
                                            [[0, 1], [2]]) for x, t in zip(xs, types)]
            results = [tensor.expand_shape(ir.RankedTensorType.get([1, n, q_size], t), r,
                                           [[0, 1], [2]], [], [1, n, q_size])
                       for r, t in zip(slab(slices), types)]
            return [from_3d(r) for r in results]
        shared = [tensor.EmptyOp([p_size, n, q_size], t).result for t in types]
        loop = scf.ForallOp([0], [p_size], [1], shared)
        with ir.InsertionPoint(loop.body):
            p = loop.induction_variables[0]
            pieces = [tensor.extract_slice(ir.RankedTensorType.get([n, q_size], t), x, [p], [], [],
                                           [DYNAMIC, 0, 0], [1, n, q_size], [1, 1, 1])
                      for x, t in zip(xs, types)]
            results = slab(pieces)
            with ir.InsertionPoint(loop.terminator().block):
                for r, s in zip(results, loop.inner_iter_args):
                    tensor.parallel_insert_slice(r, s, [p], [], [], [DYNAMIC, 0, 0],
                                                 [1, n, q_size], [1, 1, 1])
        return [from_3d(r) for r in loop.results]

    twice = apply_computation("reduce_window", symbol, list(inits) + list(inits))
    same = None
    for a, b in zip(twice, inits):
        eq = arith.cmpi(arith.CmpIPredicate.eq, _bits(a), _bits(b))
        same = eq if same is None else arith.andi(same, eq)
    result_types = [ir.RankedTensorType.get(list(dims), t) for t in types]
    return if_values(same, scanned, otherwise, result_types)
