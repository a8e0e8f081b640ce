"""Lowering of scan (seed: Scan) as one loop over the scan dimension.

Step i (N - 1 - i with is_reverse) slices element i out of every input, applies
to_apply to those elements and the carries, writes its outputs into row i of the
output arrays and carries its new carries to the next step: the order of
XLA's ScanExpander (a while loop), and the in-order fold whatever
`is_associative` says, so floating-point results never depend on a
reassociation. The work is O(N) steps of the body on one element each: the
output arrays are loop-carried tensors updated in place (insert_slice), never
copied per step.

When every element, carry and output is a scalar and the body is scalar code
(`patterns.computations`: arith/math ops), the loop body is that scalar code on
`tensor.extract`ed values, like the prefix-scan form of reduce_window
(`window_scan.py`); otherwise the body's xhlo ops are copied into the loop
(`ComputationLibrary.emit_tensor`) and lowered by the next sweep of the rewriter.
Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...dialect.shape import Shape
from ..patterns.computations import NotScalar, current_library
from ..patterns.framework import OpView, lowers, signless_type, to_signless
from .indexing import DYNAMIC
from .sort_kernels import for_range


def _groups(rank: int, dim: int) -> list[list[int]]:
    """The reassociation that merges size-1 dimension `dim` into a neighbour (none at rank 1)."""
    if rank == 1:
        return []
    keep = dim + 1 if dim + 1 < rank else dim - 1
    merged = sorted((dim, keep))
    groups: list[list[int]] = []
    for d in range(rank):
        if d == merged[1]:
            continue
        groups.append(merged if d == merged[0] else [d])
    return groups


def _slice_args(dims: list[int], dim: int) -> tuple[list[int], list[int], list[int]]:
    offsets = [DYNAMIC if d == dim else 0 for d in range(len(dims))]
    sizes = [1 if d == dim else n for d, n in enumerate(dims)]
    return offsets, sizes, [1] * len(dims)


def _row(x: ir.Value, index: ir.Value, dim: int) -> ir.Value:
    """Element `index` of `x` along `dim`, without that dimension. The slice keeps the rank and
    a collapse_shape drops the dimension: a rank-reducing slice of a tensor with other size-1
    dimensions is ambiguous, and canonicalization then dropped the wrong one."""
    t = ir.RankedTensorType(x.type)
    dims = list(t.shape)
    element = ir.RankedTensorType.get(dims[:dim] + dims[dim + 1:], t.element_type)
    if 0 in dims:  # nothing to read (and MLIR refuses offset 0 into a dimension of size 0)
        return tensor.EmptyOp(list(element.shape), t.element_type).result
    offsets, sizes, strides = _slice_args(dims, dim)
    row = tensor.extract_slice(ir.RankedTensorType.get(sizes, t.element_type), x, [index], [], [],
                               offsets, sizes, strides)
    return tensor.collapse_shape(element, row, _groups(len(dims), dim))


def _put_row(row: ir.Value, into: ir.Value, index: ir.Value, dim: int) -> ir.Value:
    t = ir.RankedTensorType(into.type)
    dims = list(t.shape)
    if 0 in dims:  # nothing to write
        return into
    offsets, sizes, strides = _slice_args(dims, dim)
    expanded = tensor.expand_shape(ir.RankedTensorType.get(sizes, t.element_type), row,
                                   _groups(len(dims), dim), [], sizes)
    return tensor.insert_slice(expanded, into, [index], [], [], offsets, sizes, strides)


def _position(i: ir.Value, steps: int, reverse: bool) -> ir.Value:
    if not reverse:
        return i
    last = arith.constant(ir.IndexType.get(), steps - 1)
    return arith.subi(last, i)


def _all_scalar(shapes: Sequence[Shape]) -> bool:
    return all(s.is_array() and s.rank == 0 for s in shapes)


@lowers("scan")
def lower_scan(v: OpView) -> list[ir.Value]:
    library = current_library()
    symbol = v.attrs["to_apply"]
    dim = v.attrs["scan_dimension"]
    reverse = v.attrs["is_reverse"]
    xs, inits = v.args["inputs"], v.args["inits"]
    k = len(inits)
    n = len(v.result_shapes) - k
    steps = v.shapes["inputs"][0].dimensions[dim]
    out_types = [ir.RankedTensorType(signless_type(t)) for t in v.result_types[:n]]
    outs = [tensor.EmptyOp(list(t.shape), t.element_type).result for t in out_types]
    if steps == 0:  # no step: empty outputs, the carries as given
        return [*outs, *inits]
    params, result = library.signature(symbol)
    body_results = list(result.tuple_shapes) if result.is_tuple() else [result]
    if _all_scalar([*params, *body_results]) and _is_scalar_code(symbol, xs, inits):
        return _scalar_scan(symbol, xs, inits, outs, steps, reverse)

    def step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        at = _position(i, steps, reverse)
        carries, stacked = carried[:k], carried[k:]
        elements = [_row(x, at, dim) for x in xs]
        leaves = [to_signless(leaf) for leaf in library.emit_tensor(symbol, elements + carries)]
        written = [_put_row(leaf, into, at, dim) for leaf, into in zip(leaves[:n], stacked)]
        return leaves[n:] + written

    results = for_range(0, steps, [*inits, *outs], step)
    return results[k:] + results[:k]


def _is_scalar_code(symbol: str, xs: list[ir.Value], inits: list[ir.Value]) -> bool:
    """Whether the body has a scalar form: tried in a scratch module, thrown away after."""
    types = [ir.RankedTensorType(x.type).element_type for x in [*xs, *inits]]
    scratch = ir.Module.create()
    with ir.InsertionPoint(scratch.body):
        probe = scf.ExecuteRegionOp([])
        block = probe.region.blocks.append(*types)
        with ir.InsertionPoint(block):
            try:
                current_library().emit_scalar(symbol, list(block.arguments))
            except NotScalar:
                return False
    return True


def _scalar_scan(symbol: str, xs: list[ir.Value], inits: list[ir.Value],
                 outs: list[ir.Value], steps: int, reverse: bool) -> list[ir.Value]:
    """The scan of rank-1 inputs by a scalar body: scalars carried in registers."""
    library = current_library()
    k = len(inits)
    scalar_inits = [tensor.extract(c, []) for c in inits]

    def step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        at = _position(i, steps, reverse)
        carries, stacked = carried[:k], carried[k:]
        elements = [tensor.extract(x, [at]) for x in xs]
        values = library.emit_scalar(symbol, elements + carries)
        n = len(values) - k
        written = [tensor.insert(value, into, [at]) for value, into in zip(values[:n], stacked)]
        return values[n:] + written

    results = for_range(0, steps, [*scalar_inits, *outs], step)
    carries = [tensor.from_elements(ir.RankedTensorType(c.type), [value])
               for c, value in zip(inits, results[:k])]
    return results[k:] + carries
