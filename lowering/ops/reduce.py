"""Lowering of reduce, reduce_window and select_and_scatter.

The sub-computation of each op becomes scalar arith code inside the region of
a linalg op (`computations.current_library().emit_scalar`), so an `add`
reduction is one `arith.addf` in a `linalg.reduce` body. The computation
takes `(acc..., x...)` while linalg regions receive `(ins..., outs...)`: the
bodies swap the two halves.

- reduce: one `linalg.reduce` over all operands at once: every output element
  is `f(...f(f(init, x0), x1)...)` (the seeds' pseudo-code), also when no
  dimension is reduced. The outputs are filled with the init values, or, when
  the minor dimension is kept (its loop vectorizes), start empty and take the
  init values at the first reduction step, so that affine-loop-fusion has no
  fill to fuse (it would sink the reduction loops inside the vector loop). A
  reduction of a trailing block of dimensions by one commutative, associative
  op (add, mul, max...) is split into vector lanes first
  (`_lane_split_reduce`), the reassociation the spec allows, so that it
  vectorizes too.
- reduce_window: one `linalg.generic` whose window dimensions are reduction
  loops reading `out * stride + win * window_dilation`; with padding or base
  dilation the operands are read with a bounds check, padding cells and
  dilation holes reading as the init values (an identity, so holes are
  ignored). A window of one cell is an all-parallel loop nest reading its
  filled outputs once (lowering/passes/parallel_outputs.py makes that safe to
  fuse). Pooling (the minor dimension outside the window, one add / multiply /
  max / min) is vector loops along that dimension instead
  (lowering/ops/window_vectors.py), and a prefix scan is a running fold
  (lowering/ops/window_scan.py).
- select_and_scatter: a `linalg.generic` picks, for every source position,
  the window element `select` prefers (visiting the window in lexicographic
  order, the earlier candidate first, skipping padding as XLA:CPU does); an
  `scf.for` nest over the source positions then combines each source value
  into the output at its selected index, sequentially, because windows may
  overlap.

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import ml_dtypes
from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from ...dialect.element_types import PrimitiveType, dtype_of
from ...dialect.ops_reduce import dilated
from ..patterns.computations import apply_computation, current_library
from ..patterns.framework import OpView, lowers
from ..scalar.arithmetic import Elem
from ..scalar.storage import from_storage, to_storage
from . import select_scatter_vectors, window_vectors
from .window_scan import scan, scan_axis


def _element_type(value_or_type: ir.Value | ir.Type) -> ir.Type:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    return ir.RankedTensorType(t).element_type


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


_UNIQUE = itertools.count()


def _accumulator(dims: Sequence[int], element_type: ir.Type) -> ir.Value:
    """A tensor.empty for an op to accumulate into (as `outs` it is read and written).

    It carries a unique discardable attribute so that CSE never merges it with
    another one: with eliminate-empty-tensors in the pipeline, two accumulators
    initialised from one shared fill are miscompiled (one result overwrites the
    other; see the report).
    """
    empty = tensor.EmptyOp(list(dims), element_type)
    empty.operation.attributes["xlamlir.accumulator"] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), next(_UNIQUE))
    return empty.result


def _splat(scalar: ir.Value, dims: Sequence[int]) -> ir.Value:
    """An accumulator of `dims` holding `scalar` everywhere."""
    return linalg.fill(scalar, outs=[_accumulator(dims, scalar.type)])


def _filled(init: ir.Value, dims: Sequence[int]) -> ir.Value:
    """A tensor of `dims` holding the value of the rank-0 tensor `init` everywhere."""
    return _splat(tensor.extract(init, []), dims)


def _generic(inputs: Sequence[ir.Value], outputs: Sequence[ir.Value], maps: Sequence[ir.AffineMap],
             iterators: Sequence[str], body: Callable[..., list[ir.Value]]) -> list[ir.Value]:
    """A linalg.generic whose region yields body(*ins, *outs)."""
    op = linalg.GenericOp_(list(inputs), list(outputs), list(maps), list(iterators))
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp(body(*block.arguments))
    return list(op.results)


# -- reduce -----------------------------------------------------------------------------------

LANES = 16  # vector lanes of the split reduction (the vectorizer's width for f32)
# Binary ops that are commutative and associative (for floats up to rounding, which
# the spec allows: "the evaluation order of the reduction function is arbitrary").
_COMBINERS = frozenset(f"xhlo.{name}" for name in
                       ("add", "multiply", "maximum", "minimum", "and", "or", "xor"))


def _simple_combiner(symbol: str) -> str | None:
    """The op name (`add`, `maximum`...) when the computation is `op(acc, x)` for one
    commutative, associative op, else None."""
    block = current_library().functions[symbol].regions[0].blocks[0]
    ops = list(block.operations)
    if len(ops) != 2 or ops[0].operation.name not in _COMBINERS:
        return None
    combine, ret = ops[0].operation, ops[1].operation
    if (set(combine.operands) == set(block.arguments) and len(block.arguments) == 2
            and ret.operands[0] == combine.results[0]):
        return combine.name.removeprefix("xhlo.")
    return None


def _identity(combiner: str, t: PrimitiveType) -> ir.Value | None:
    """The identity element of `combiner` on `t` (in storage type): `f(identity, x) == x`
    for every x, bit for bit (-0.0 for float add; NaN-propagating max returns its NaN
    operand); None when there is none to rely on (complex multiply: (1, 0) * (inf, x)
    makes a NaN)."""
    if t.is_complex:
        return None
    e = Elem(t)
    if t.is_pred:
        value: int | float = 1 if combiner in ("multiply", "minimum", "and") else 0
    elif t.is_floating:
        value = {"add": -0.0, "multiply": 1.0, "maximum": -math.inf,
                 "minimum": math.inf}.get(combiner, math.nan)
        if math.isnan(value):
            return None  # bitwise ops do not apply to floats
        if t.is_narrow_float and not t.float_format.has_inf and math.isinf(value):
            # No inf (it would round to NaN): the lowest (largest) finite value does the same.
            value = float(ml_dtypes.finfo(dtype_of(t)).min if value < 0 else ml_dtypes.finfo(dtype_of(t)).max)
        if t == PrimitiveType.F8E8M0FNU and combiner == "add":
            return None  # no zero: nothing added changes no sum
    else:
        unsigned = t.is_unsigned_int
        value = {"add": 0, "multiply": 1, "and": -1, "or": 0, "xor": 0,
                 "maximum": 0 if unsigned else e.int_min(),
                 "minimum": -1 if unsigned else e.int_max()}[combiner]
    return to_storage(e.const(value), t)


def linalg_reduce(inputs: Sequence[ir.Value], outs: Sequence[ir.Value], dims: Sequence[int],
                   symbol: str, first_inits: Sequence[ir.Value] | None = None) -> list[ir.Value]:
    """One linalg.reduce of `inputs` into `outs`. With `first_inits` the outputs start
    uninitialised and the first reduction step combines with the init scalars instead."""
    n = len(inputs)
    op = linalg.ReduceOp([o.type for o in outs], list(inputs), list(outs), sorted(dims))
    block = op.regions[0].blocks.append(*[_element_type(x) for x in list(inputs) + list(outs)])
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        accs = args[n:]
        if first_inits is not None:
            first = None
            for d in dims:
                at_zero = arith.cmpi(arith.CmpIPredicate.eq, linalg.IndexOp(d).result, _index(0))
                first = at_zero if first is None else arith.andi(first, at_zero)
            accs = [arith.select(first, init, acc) for init, acc in zip(first_inits, accs)]
        linalg.YieldOp(apply_computation("reduce", symbol, accs + args[:n]))
    return list(op.results)


def _lane_split_reduce(x: ir.Value, init: ir.Value, kept: Sequence[int], size: int,
                       symbol: str, identity: ir.Value) -> ir.Value:
    """The reduction of [*kept, size] over its minor dimension, in a vectorizable form.

    The operand is viewed as [*kept, chunks, LANES]: LANES partial results per output
    element start at the combiner's identity, a generic whose innermost (parallel)
    loop runs along the lanes folds every chunk in (plain indexing maps: the
    schedule in lowering/passes/vectorize.py tiles and vectorizes it, rows across cores),
    and a last generic folds the lanes into the init value. The init value thus
    still enters every output element exactly once, as in the sequential form, and
    the identity changes no result (only the order of the combinations changes,
    which the spec allows).
    """
    elem = _element_type(x)
    rank = len(kept)  # of the output
    chunks = size // LANES
    view = tensor.expand_shape(ir.RankedTensorType.get(list(kept) + [chunks, LANES], elem), x,
                               [[i] for i in range(rank)] + [[rank, rank + 1]], [],
                               list(kept) + [chunks, LANES])

    def dims(n: int, *extra: ir.AffineExpr) -> ir.AffineMap:
        """(d0..d{n-1}) -> (d0..d{rank-1}, *extra): the output dims, then `extra`."""
        return ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(i) for i in range(rank)] + list(extra))

    d = ir.AffineDimExpr.get
    (partials,) = _generic(
        [view], [_splat(identity, list(kept) + [LANES])],
        [ir.AffineMap.get_identity(rank + 2), dims(rank + 2, d(rank + 1))],
        ["parallel"] * rank + ["reduction", "parallel"],
        lambda value, acc: apply_computation("reduce", symbol, [acc, value]))
    # The lanes fold in order (init, lane 0, lane 1...) on a reduction loop over them. Not
    # an all-parallel generic reading each lane through a map: elementwise fusion would
    # sink that into a broadcasting consumer, recomputing the fold per consumer element
    # and leaving the output buffer read-modified-written across the broadcast loop
    # (softmax gave sum * (j + 1) once bufferized).
    return _generic([partials], [_filled(init, kept)],
                    [ir.AffineMap.get_identity(rank + 1), dims(rank + 1)],
                    ["parallel"] * rank + ["reduction"],
                    lambda lane_value, acc: apply_computation("reduce", symbol, [acc, lane_value]))[0]


def _trailing_block(dims: Sequence[int], reduced: Sequence[int]) -> int | None:
    """The element count of the reduced dims when they are exactly the trailing dims
    (a lane-split candidate), else None."""
    rank = len(dims)
    if not reduced or sorted(reduced) != list(range(rank - len(reduced), rank)):
        return None
    size = 1
    for d in reduced:
        size *= dims[d]
    return size


@lowers("reduce")
def lower_reduce(v: OpView) -> list[ir.Value]:
    inputs, inits = v.args["inputs"], v.args["init_values"]
    symbol = v.attrs["computation"]
    dims = v.shapes["inputs"][0].dimensions
    reduced = v.attrs["dimensions"]
    size = _trailing_block(dims, reduced)
    combiner = _simple_combiner(symbol) if len(inputs) == 1 else None
    identity = (_identity(combiner, v.shapes["inputs"][0].element_type)
                if combiner is not None else None)
    if size is not None and size % LANES == 0 and size >= 4 * LANES and identity is not None:
        x = inputs[0]
        kept = list(dims[:len(dims) - len(reduced)])
        if len(reduced) > 1:  # one minor dimension of the reduced block's size
            flat = ir.RankedTensorType.get(kept + [size], _element_type(x))
            x = tensor.collapse_shape(flat, x, [[i] for i in range(len(kept))]
                                      + [list(range(len(kept), len(dims)))])
        return [_lane_split_reduce(x, inits[0], kept, size, symbol, identity)]
    if reduced and len(dims) - 1 not in reduced and all(dims[d] > 0 for d in reduced):
        # The minor dimension is kept: its loop is innermost and vectorizes, provided
        # affine-loop-fusion does not fuse an init fill into the loop nest (it then sinks
        # the reduction loops inside, striding through memory). So the outputs start
        # empty and the first reduction step takes the init values instead.
        scalars = [tensor.extract(init, []) for init in inits]
        outs = [_accumulator(s.dimensions, x.type) for s, x in zip(v.result_shapes, scalars)]
        return linalg_reduce(inputs, outs, reduced, symbol, first_inits=scalars)
    outs = [_filled(init, s.dimensions) for init, s in zip(inits, v.result_shapes)]
    return linalg_reduce(inputs, outs, reduced, symbol)


# -- windows ----------------------------------------------------------------------------------

def _window_loops(rank: int, windowed: Sequence[int]) -> tuple[dict[int, int], dict[int, int], int]:
    """Loop positions of the output dims and of the windowed dims of a window op.

    The window (reduction) loops go just before the last output loop: the innermost
    loop then runs along the operands' minor dimension (contiguous, vectorizable, as
    the channels of an NHWC pooling), while every output element still sees its
    window in lexicographic order.
    """
    order: list[tuple[str, int]] = [("o", i) for i in range(rank - 1)]
    order += [("w", i) for i in windowed]
    if rank:
        order.append(("o", rank - 1))
    out_pos = {i: pos for pos, (kind, i) in enumerate(order) if kind == "o"}
    win_pos = {i: pos for pos, (kind, i) in enumerate(order) if kind == "w"}
    return out_pos, win_pos, len(order)


class _Window:
    """The loop nest of a window op: output loops (parallel) and window loops (reduction).

    Window position `o`, offset `w` reads the padded, base-dilated operand at
    `q = o * stride + w * window_dilation`. Without padding or base dilation
    that is an affine map on the operand itself (vectorizable). Otherwise the
    body reads the operand with `tensor.extract` at `(q - low) / base_dilation`,
    clamped, with a flag telling whether the cell is an operand element or
    padding / a dilation hole. A stride on the minor dimension takes that path
    too: the pipeline's affine-super-vectorize reads `x[2 * i]` as if it were
    `x[i]` (contiguous) once it vectorizes the `i` loop. A padded copy of the
    operand (a fill, then a strided insert_slice) is never built: the
    pipeline's affine-loop-fusion moves the fill's loop past the memref.copy
    that the insert_slice bufferizes to.

    linalg derives loop bounds from operand shapes and the window loops appear
    in no map on their own, so a `shape` operand (an empty tensor of the window's
    size, never read, as in linalg's pooling ops) carries them.
    """

    def __init__(self, dims: Sequence[int], window: Sequence[int], strides: Sequence[int],
                 base_dilations: Sequence[int], window_dilations: Sequence[int],
                 padding: Sequence[tuple[int, int]]) -> None:
        rank = len(dims)
        self.dims, self.window, self.strides = list(dims), list(window), list(strides)
        self.base_dilations, self.window_dilations = list(base_dilations), list(window_dilations)
        self.padding = [tuple(p) for p in padding]
        self.direct = (all(bd == 1 for bd in base_dilations) and all(p == (0, 0) for p in padding)
                       and (rank == 0 or strides[-1] == 1))
        self.windowed = [i for i, w in enumerate(window) if w > 1]
        self.out_pos, self.win_pos, loops = _window_loops(rank, self.windowed)

        def dim(pos: int) -> ir.AffineExpr:
            return ir.AffineDimExpr.get(pos)

        exprs = []
        for i in range(rank):
            e = dim(self.out_pos[i]) * strides[i]
            if i in self.win_pos:
                e = e + dim(self.win_pos[i]) * window_dilations[i]
            exprs.append(e)
        self.operand_map = ir.AffineMap.get(loops, 0, exprs)
        self.out_map = ir.AffineMap.get(loops, 0, [dim(self.out_pos[i]) for i in range(rank)])
        self.shape_map = ir.AffineMap.get(loops, 0, [dim(self.win_pos[i]) for i in self.windowed])
        self.iterators = ["reduction" if pos in self.win_pos.values() else "parallel"
                          for pos in range(loops)]

    def offset_in_window(self) -> ir.Value:
        """The row-major offset of the current element within its window (index)."""
        offset = _index(0)
        for i in self.windowed:
            offset = arith.addi(arith.muli(offset, _index(self.window[i])),
                                linalg.IndexOp(self.win_pos[i]).result)
        return offset

    def _guarded_read(self, operands: Sequence[ir.Value], fills: Sequence[ir.Value],
                      ) -> tuple[list[ir.Value], ir.Value | None]:
        """The operands' elements under the current window cell (`fills` in padding and
        holes) and an i1 telling whether it is an operand element (None: always)."""
        i1 = ir.IntegerType.get_signless(1)
        if 0 in self.dims:  # every cell is padding
            return list(fills), arith.constant(i1, 0)
        checks: list[ir.Value] = []
        indices: list[ir.Value] = []
        for i, n in enumerate(self.dims):
            q = arith.muli(linalg.IndexOp(self.out_pos[i]).result, _index(self.strides[i]))
            if i in self.win_pos:
                step = arith.muli(linalg.IndexOp(self.win_pos[i]).result,
                                  _index(self.window_dilations[i]))
                q = arith.addi(q, step)
            low, high = self.padding[i]
            bd = self.base_dilations[i]
            if (low, high) == (0, 0) and bd == 1:
                indices.append(q)  # always inside: the shape rule fits the window
                continue
            q = arith.subi(q, _index(low))
            checks.append(arith.cmpi(arith.CmpIPredicate.sge, q, _index(0)))
            checks.append(arith.cmpi(arith.CmpIPredicate.slt, q, _index(dilated(n, bd))))
            if bd > 1:
                hole = arith.remsi(q, _index(bd))
                checks.append(arith.cmpi(arith.CmpIPredicate.eq, hole, _index(0)))
                q = arith.divsi(q, _index(bd))
            indices.append(arith.minsi(arith.maxsi(q, _index(0)), _index(n - 1)))
        values = [tensor.extract(x, indices) for x in operands]
        if not checks:  # a strided minor dimension only: every cell is an operand element
            return values, None
        valid = checks[0]
        for c in checks[1:]:
            valid = arith.andi(valid, c)
        return [arith.select(valid, x, f) for x, f in zip(values, fills)], valid

    def generic(self, operands: Sequence[ir.Value], fills: Sequence[ir.Value],
                outputs: Sequence[ir.Value],
                body: Callable[[list[ir.Value], ir.Value | None, list[ir.Value]], list[ir.Value]],
                ) -> list[ir.Value]:
        """The window loop nest as one linalg.generic over `outputs`. `body(xs, valid, outs)`
        gets the operands' elements under the window cell (`fills` where it is padding),
        `valid` (None when every cell is an operand element) and the current outputs."""
        n = len(operands)
        shape = tensor.EmptyOp([self.window[i] for i in self.windowed],
                               ir.IntegerType.get_signless(8)).result
        out_maps = [self.out_map] * len(outputs)
        if self.direct:
            return _generic(list(operands) + [shape], outputs,
                            [self.operand_map] * n + [self.shape_map] + out_maps, self.iterators,
                            lambda *args: body(list(args[:n]), None, list(args[n + 1:])))

        def guarded(*args: ir.Value) -> list[ir.Value]:
            xs, valid = self._guarded_read(operands, fills)
            return body(xs, valid, list(args[1:]))

        return _generic([shape], outputs, [self.shape_map] + out_maps, self.iterators, guarded)


@lowers("reduce_window")
def lower_reduce_window(v: OpView) -> list[ir.Value]:
    inputs, inits = v.args["inputs"], v.args["init_values"]
    a = v.attrs
    loops = _Window(v.shapes["inputs"][0].dimensions, a["window_dimensions"], a["window_strides"],
                    a["base_dilations"], a["window_dilations"], a["padding"])
    if v.result_shapes[0].numel == 0:
        # A window wider than the padded input: nothing to compute, and the window
        # generic's and the vector loops' maps would index past the operand.
        return [tensor.EmptyOp(list(s.dimensions), _element_type(init)).result
                for s, init in zip(v.result_shapes, inits)]
    init_scalars = [tensor.extract(init, []) for init in inits]
    symbol = a["computation"]

    def window_loops() -> list[ir.Value]:
        outs = [_splat(init, s.dimensions) for init, s in zip(init_scalars, v.result_shapes)]
        # Padding cells and dilation holes read as the init values.
        return loops.generic(inputs, init_scalars, outs,
                             lambda xs, _valid, accs: apply_computation("reduce_window", symbol,
                                                                        accs + xs))

    dims = v.shapes["inputs"][0].dimensions
    axis = scan_axis(dims, a["window_dimensions"], a["window_strides"], a["base_dilations"],
                     a["window_dilations"], a["padding"])
    if axis is not None and not any(s.element_type.is_complex for s in v.shapes["inputs"]):
        return scan(inputs, init_scalars, dims, axis, symbol, window_loops)  # cumsum & co
    if len(inputs) == 1 and window_vectors.applies(
            v.shapes["inputs"][0].element_type, dims, a["window_dimensions"], a["window_strides"],
            a["base_dilations"], a["window_dilations"], a["padding"], symbol):
        return [window_vectors.reduce_window(inputs[0], init_scalars[0], v.shapes["inputs"][0].element_type,
                                             dims, v.result_shapes[0].dimensions, a["window_dimensions"],
                                             a["window_strides"], a["window_dilations"], a["padding"],
                                             symbol)]
    return window_loops()


# -- select_and_scatter ------------------------------------------------------------------------

def _select_in_windows(v: OpView, init: ir.Value) -> tuple[ir.Value, ir.Value]:
    """For every source position: whether its window holds an operand element (not only
    padding), and the row-major offset in the window of the element `select` picks."""
    dims = v.shapes["operand"].dimensions
    ones = [1] * len(dims)
    loops = _Window(dims, v.attrs["window_dimensions"], v.attrs["window_strides"], ones, ones,
                    v.attrs["padding"])
    src_dims = v.shapes["source"].dimensions
    i1, i8, i64 = (ir.IntegerType.get_signless(w) for w in (1, 8, 64))
    # `found` is stored as i8, like pred tensors (framework.signless_type).
    outs = [_splat(init, src_dims), _splat(arith.constant(i64, 0), src_dims),
            _splat(arith.constant(i8, 0), src_dims)]
    select = v.attrs["select"]

    def body(xs: list[ir.Value], valid: ir.Value | None, outs: list[ir.Value]) -> list[ir.Value]:
        (x,), (best, best_offset, found8) = xs, outs
        true = arith.constant(i1, 1)
        found = arith.trunci(i1, found8)
        offset = arith.index_cast(i64, loops.offset_in_window())
        # Windows are visited in lexicographic order, so `best` is the earlier element:
        # it stays unless select(earlier, later) is false (XLA's IR emitter does the same).
        keep = from_storage(apply_computation("select_and_scatter", select, [best, x])[0], PrimitiveType.PRED)
        take = arith.ori(arith.xori(found, true), arith.xori(keep, true))
        if valid is not None:  # padding is never selected
            take = arith.andi(valid, take)
            found = arith.ori(found, valid)
        else:
            found = true
        return [arith.select(take, x, best), arith.select(take, offset, best_offset),
                arith.extui(i8, found)]

    results = loops.generic([v.args["operand"]], [init], outs, body)
    return results[2], results[1]


@lowers("select_and_scatter")
def lower_select_and_scatter(v: OpView) -> ir.Value:
    source = v.args["source"]
    init = tensor.extract(v.args["init_value"], [])
    a, t = v.attrs, v.shapes["operand"].element_type
    vector_form = (t, v.shapes["operand"].dimensions, v.shapes["source"].dimensions,
                   a["window_dimensions"], a["window_strides"], a["padding"], a["select"], a["scatter"])
    if select_scatter_vectors.applies(*vector_form):  # channels-last pooling's gradient
        return select_scatter_vectors.select_and_scatter(v.args["operand"], source, init, *vector_form)
    found, offsets = _select_in_windows(v, init)
    dims = v.shapes["operand"].dimensions
    window, strides, padding = (v.attrs[k] for k in ("window_dimensions", "window_strides", "padding"))
    src_dims = v.shapes["source"].dimensions
    scatter = v.attrs["scatter"]

    def scatter_one(position: list[ir.Value], out: ir.Value) -> ir.Value:
        """`out` with source[position] combined into the element its window selected."""
        selected = arith.trunci(ir.IntegerType.get_signless(1), tensor.extract(found, position))
        if_op = scf.IfOp(selected, [out.type], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            offset = arith.index_cast(ir.IndexType.get(), tensor.extract(offsets, position))
            target: list[ir.Value] = []
            for i in reversed(range(len(dims))):  # undo the row-major offset, minor dim first
                w = _index(0)
                if window[i] > 1:
                    w = arith.remui(offset, _index(window[i]))
                    offset = arith.divui(offset, _index(window[i]))
                start = arith.muli(position[i], _index(strides[i]))
                target.insert(0, arith.subi(arith.addi(start, w), _index(padding[i][0])))
            current = tensor.extract(out, target)
            update = tensor.extract(source, position)
            value = apply_computation("select_and_scatter", scatter, [current, update])
            scf.YieldOp([tensor.insert(value[0], out, target)])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([out])
        return if_op.results[0]

    def loop_nest(depth: int, position: list[ir.Value], out: ir.Value) -> ir.Value:
        if depth == len(src_dims):
            return scatter_one(position, out)
        loop = scf.ForOp(_index(0), _index(src_dims[depth]), _index(1), [out])
        with ir.InsertionPoint(loop.body):
            inner = loop_nest(depth + 1, position + [loop.induction_variable], loop.inner_iter_args[0])
            scf.YieldOp([inner])
        return loop.results[0]

    output = _splat(init, dims)
    if 0 in src_dims:
        return output
    return loop_nest(0, [], output)
