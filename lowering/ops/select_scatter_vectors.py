"""select_and_scatter (a max-pool's gradient) as vector loops along the minor dimension.

The general lowering (lowering/ops/reduce.py) picks each window's element in a
window generic that keeps three temporaries (best value, i64 offset, found flag),
then scatters one element at a time in a serial scalar loop nest. When the minor
dimension is outside the window (window 1, stride 1, no padding: NHWC pooling's
channels), `select` is one compare (GE, GT, LE or LT) of its two arguments and
`scatter` adds, this lowering writes the loops itself:

- one scf.forall iteration per index of the first dimension no window crosses
  (window 1, stride 1, no padding; the batch of a pooling) with more than one index,
  split across the cores: its slab of the output is filled with the init value and
  then only written by its own source positions; without one (a batch of 1, windows
  over every dimension but the minor one), blocks of whole vectors of the minor
  dimension, whose lanes are independent;
- scf.for loops over the source positions in row-major order, and over the minor
  dimension in vectors of LANES elements (the last one masked);
- per vector of source positions, the window's cells in lexicographic order: a
  cell is taken where nothing is found yet or where `select(best, cell)` is false
  (XLA's rule, the same one as the general lowering: ties keep the earlier cell, a
  NaN compare takes the later one); padding cells (known at run time) are never
  taken. Then, per cell, the lanes that picked it add their source element into
  the output (one read, add, select, write of a vector). Windows that share no
  element (strides at least the window: a 2x2/2 pooling) write init + source or
  init without reading, and when they tile the operand exactly the fill is skipped.

Each output element thus receives its source values in the source's row-major
order, as in the general lowering: the lanes are independent elements, nothing is
reassociated, and lanes that did not pick a cell keep their bits (a select, not an
add of zero). Element types: f16, bf16, f32, f64 and the 8..64-bit integers; the
16-bit floats (stored as i16) are compared and added as their float type, which
soft_float expands (f32 arithmetic, integer roundings) as it does the general
lowering's scalars, so the bits agree on every CPU. Imports `dialect` and the
lowering modules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ..patterns.computations import current_library
from ..scalar.arithmetic import scalar_type
from .indexing import DYNAMIC
from .window_vectors import carried_loop, index_constant

P = PrimitiveType
F = arith.CmpFPredicate
I = arith.CmpIPredicate  # noqa: E741 - the arith dialect's own short name
LANES_BYTES = 64  # one AVX-512 register, two AVX2 ones
MAX_UNROLLED_CELLS = 64  # windows up to this many cells are unrolled (pooling: 4 or 9)
MAX_MINOR_BLOCKS = 8  # without a batch to split, at most this many blocks of channels
_FLOATS = frozenset({P.F16, P.BF16, P.F32, P.F64})
_INTS = frozenset({P.S8, P.S16, P.S32, P.S64, P.U8, P.U16, P.U32, P.U64})
_FLOAT_PREDICATES = {"GE": F.OGE, "GT": F.OGT, "LE": F.OLE, "LT": F.OLT}
_SIGNED_PREDICATES = {"GE": I.sge, "GT": I.sgt, "LE": I.sle, "LT": I.slt}
_UNSIGNED_PREDICATES = {"GE": I.uge, "GT": I.ugt, "LE": I.ule, "LT": I.ult}


def _body(symbol: str) -> tuple[ir.Operation, list[ir.Value]] | None:
    """The one op of a computation `return op(a, b)` and the block's arguments, else None."""
    block = current_library().functions[symbol].regions[0].blocks[0]
    ops, args = list(block.operations), list(block.arguments)
    if len(ops) != 2 or len(args) != 2:
        return None
    op, ret = ops[0].operation, ops[1].operation
    if len(op.operands) != 2 or len(op.results) != 1 or ret.operands[0] != op.results[0]:
        return None
    return op, args


def _compare(t: PrimitiveType, symbol: str) -> tuple[object, bool] | None:
    """(predicate, earlier element first) when `select` is one GE/GT/LE/LT compare of its
    arguments with the type's default ordering, else None."""
    body = _body(symbol)
    if body is None or body[0].name != "xhlo.compare":
        return None
    op, args = body
    if "comparison_direction" not in op.attributes or "compare_type" not in op.attributes:
        return None
    direction = ir.StringAttr(op.attributes["comparison_direction"]).value
    kind = ir.StringAttr(op.attributes["compare_type"]).value
    table = (_FLOAT_PREDICATES if kind == "FLOAT" and t in _FLOATS else
             _SIGNED_PREDICATES if kind == "SIGNED" and t.is_signed_int else
             _UNSIGNED_PREDICATES if kind == "UNSIGNED" and t in _INTS and not t.is_signed_int else None)
    if table is None or direction not in table:
        return None
    if list(op.operands) == args:
        return table[direction], True
    if list(op.operands) == args[::-1]:
        return table[direction], False
    return None


def _add_order(symbol: str) -> bool | None:
    """Whether `scatter` is add(current, source) (True) or add(source, current) (False);
    None when it is something else."""
    body = _body(symbol)
    if body is None or body[0].name != "xhlo.add":
        return None
    op, args = body
    if list(op.operands) == args:
        return True
    if list(op.operands) == args[::-1]:
        return False
    return None


def applies(t: PrimitiveType, dims: Sequence[int], source_dims: Sequence[int], window: Sequence[int],
            strides: Sequence[int], padding: Sequence[Sequence[int]], select: str, scatter: str) -> bool:
    """Whether the vector loops can compute this select_and_scatter."""
    rank = len(dims)
    if t not in _FLOATS | _INTS or rank < 2 or 0 in dims or 0 in source_dims:
        return False
    lanes = LANES_BYTES // t.byte_width
    if dims[-1] < lanes // 2 or window[-1] != 1 or strides[-1] != 1 or tuple(padding[-1]) != (0, 0):
        return False
    if math.prod(window) > MAX_UNROLLED_CELLS or any(lo < 0 or hi < 0 for lo, hi in padding):
        return False
    return _compare(t, select) is not None and _add_order(scatter) is not None


def _nest(extents: Sequence[int], carried: ir.Value,
          body: Callable[[list[ir.Value], ir.Value], ir.Value], fixed: dict[int, ir.Value]) -> ir.Value:
    """scf.for loops over every dimension of `extents` but the minor one and those in `fixed`
    (whose index is given), row-major; `body(position, carried)` per position."""
    def level(d: int, position: list[ir.Value], value: ir.Value) -> ir.Value:
        if d == len(extents) - 1:
            return body(position, value)
        if d in fixed:
            return level(d + 1, position + [fixed[d]], value)
        return carried_loop(0, extents[d], 1, value, lambda i, v: level(d + 1, position + [i], v))
    return level(0, [], carried)


def select_and_scatter(x: ir.Value, source: ir.Value, init: ir.Value, t: PrimitiveType,
                       dims: Sequence[int], source_dims: Sequence[int], window: Sequence[int],
                       strides: Sequence[int], padding: Sequence[Sequence[int]], select: str,
                       scatter: str) -> ir.Value:
    """The select_and_scatter of `x` (scalar `init` in storage type) where `applies` holds."""
    compare = _compare(t, select)
    current_first = _add_order(scatter)
    assert compare is not None and current_first is not None
    predicate, earlier_first = compare
    rank = len(dims)
    element = ir.RankedTensorType(x.type).element_type
    minor = dims[-1]
    lanes = min(LANES_BYTES // t.byte_width, 1 << (minor.bit_length() - 1))
    vtype = ir.VectorType.get([lanes], element)
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    mask_type, pick_type = ir.VectorType.get([lanes], i1), ir.VectorType.get([lanes], i32)
    in_bounds = [minor % lanes == 0]
    minor_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    windowed = [i for i in range(rank - 1) if window[i] > 1]
    cells = list(itertools.product(*(range(window[i]) for i in windowed)))
    floating = t in _FLOATS
    # 16-bit floats are stored as i16: compared and added as their float type (which
    # soft_float expands as it does the general lowering's scalars), selected as bits.
    arith_type = ir.VectorType.get([lanes], scalar_type(t))

    def arithmetic(v: ir.Value) -> ir.Value:
        return v if arith_type == vtype else arith.bitcast(arith_type, v)

    def cell_index(position: list[ir.Value], cell: tuple[int, ...]) -> tuple[list[ir.Value], ir.Value | None]:
        """The operand index of `cell` of the window at source `position` (clamped into the
        operand) and whether it is inside the operand (None: always)."""
        offsets = dict(zip(windowed, cell))
        indices, checks = [], []
        for i in range(rank - 1):
            q = position[i] if strides[i] == 1 else arith.muli(position[i], index_constant(strides[i]))
            step = offsets.get(i, 0) - padding[i][0]
            if step:
                q = arith.addi(q, index_constant(step))
            if padding[i][0] > 0 or padding[i][1] > 0:
                checks.append(arith.cmpi(I.sge, q, index_constant(0)))
                checks.append(arith.cmpi(I.slt, q, index_constant(dims[i])))
                q = arith.minsi(arith.maxsi(q, index_constant(0)), index_constant(dims[i] - 1))
            indices.append(q)
        valid = None
        for check in checks:
            valid = check if valid is None else arith.andi(valid, check)
        return indices, valid

    def lanes_of(scalar: ir.Value, vtype: ir.Type) -> ir.Value:
        return vector.broadcast(vtype, scalar)

    # Windows that share no element (strides at least the window): each output element
    # receives at most one source, so it is written, not read and added to; when they also
    # tile the operand exactly, every element is written once and no fill comes first.
    disjoint = all(strides[d] >= window[d] for d in range(rank - 1))
    tiled = disjoint and all(strides[d] == window[d] and tuple(padding[d]) == (0, 0)
                             and source_dims[d] * window[d] == dims[d] for d in range(rank - 1))

    def add(current: ir.Value, update: ir.Value) -> ir.Value:
        total = (arith.addf if floating else arith.addi)(
            *(arithmetic(current), arithmetic(update))[::1 if current_first else -1])
        return total if total.type == vtype else arith.bitcast(vtype, total)

    def chunk(position: list[ir.Value], j: ir.Value, local_j: ir.Value, out: ir.Value) -> ir.Value:
        """One vector of source positions (minor index `j`, `local_j` in the slab): pick each
        lane's cell, add the source into it."""
        true = lanes_of(arith.constant(i1, 1), mask_type)
        found = lanes_of(arith.constant(i1, 0), mask_type)
        best = lanes_of(init, vtype)
        pick = lanes_of(arith.constant(i32, -1), pick_type)
        targets = []
        for k, cell in enumerate(cells):
            indices, valid = cell_index(position, cell)
            targets.append((indices, valid))
            value = vector.transfer_read(vtype, x, indices + [j], minor_map, init, in_bounds)
            lhs, rhs = (arithmetic(best), arithmetic(value))[::1 if earlier_first else -1]
            keep = arith.cmpf(predicate, lhs, rhs) if floating else arith.cmpi(predicate, lhs, rhs)
            take = arith.ori(arith.xori(found, true), arith.xori(keep, true))
            if valid is not None:  # padding is never taken
                valid_lanes = lanes_of(valid, mask_type)
                take = arith.andi(take, valid_lanes)
                found = arith.ori(found, valid_lanes)
            else:
                found = true
            best = arith.select(take, value, best)
            pick = arith.select(take, lanes_of(arith.constant(i32, k), pick_type), pick)
        update = vector.transfer_read(vtype, source, position + [j], minor_map, init, in_bounds)
        for k, (indices, valid) in enumerate(targets):
            here = [local_index(d, q) for d, q in enumerate(indices)] + [local_j]
            chosen = arith.cmpi(I.eq, pick, lanes_of(arith.constant(i32, k), pick_type))
            if not disjoint:
                # A padding cell is never picked: its clamped index reads and writes back
                # an element unchanged.
                current = vector.transfer_read(vtype, out, here, minor_map, init, in_bounds)
                out = vector.transfer_write(out.type, arith.select(chosen, add(current, update), current),
                                            out, here, minor_map, in_bounds)
                continue
            # No other window holds this element: it is still the init value. A padding
            # cell's clamped index may be another window's element, which is not written.
            splat = lanes_of(init, vtype)
            written = arith.select(chosen, add(splat, update), splat)
            if valid is None:
                out = vector.transfer_write(out.type, written, out, here, minor_map, in_bounds)
                continue
            branch = scf.IfOp(valid, [out.type], has_else=True)
            with ir.InsertionPoint(branch.then_block):
                scf.YieldOp([vector.transfer_write(out.type, written, out, here, minor_map, in_bounds)])
            with ir.InsertionPoint(branch.else_block):
                scf.YieldOp([out])
            out = branch.results[0]
        return out

    # The cores split the first dimension that no window crosses (its slabs of the output
    # are disjoint) with more than one index; without one, the minor dimension in blocks of
    # whole vectors (the lanes are independent); else one serial loop nest.
    split = next((d for d in range(rank - 1) if window[d] == 1 and strides[d] == 1
                  and tuple(padding[d]) == (0, 0) and dims[d] > 1), None)
    block, count = 1, 1 if split is None else dims[split]
    if split is None and minor % lanes == 0:
        vectors = minor // lanes
        count = max(c for c in range(1, MAX_MINOR_BLOCKS + 1) if vectors % c == 0)
        split, block = (rank - 1, minor // count) if count > 1 else (None, 1)
    slab_dims = [block if d == split else n for d, n in enumerate(dims)]
    slab_minor = slab_dims[-1]

    def local_index(d: int, q: ir.Value) -> ir.Value:
        return index_constant(0) if d == split else q

    def fill_and_scatter(part: ir.Value | None, out: ir.Value) -> ir.Value:
        fixed = {} if part is None or split == rank - 1 else {split: part}
        base = arith.muli(part, index_constant(block)) if split == rank - 1 else None
        splat = lanes_of(init, vtype)

        def fill_row(position: list[ir.Value], out: ir.Value) -> ir.Value:
            return carried_loop(0, slab_minor, lanes, out, lambda j, o: vector.transfer_write(
                o.type, splat, o, position + [j], minor_map, in_bounds))

        if not tiled:
            out = _nest(slab_dims, out, fill_row, {})

        def scatter_row(position: list[ir.Value], out: ir.Value) -> ir.Value:
            return carried_loop(0, slab_minor, lanes, out, lambda j, o: chunk(
                position, j if base is None else arith.addi(base, j), j, o))

        return _nest(source_dims, out, scatter_row, fixed)

    if split is None:
        return fill_and_scatter(None, tensor.EmptyOp(list(dims), element).result)
    shared = tensor.EmptyOp(list(dims), element).result
    loop = scf.ForallOp([0], [count], [1], [shared])
    with ir.InsertionPoint(loop.body):
        part = loop.induction_variables[0]
        start = part if block == 1 else arith.muli(part, index_constant(block))
        offsets = [DYNAMIC if d == split else 0 for d in range(rank)]
        # The iteration's slice of the shared output as its destination: written in place.
        slab = tensor.extract_slice(ir.RankedTensorType.get(slab_dims, element), loop.inner_iter_args[0],
                                    [start], [], [], offsets, slab_dims, [1] * rank)
        slab = fill_and_scatter(part, slab)
        with ir.InsertionPoint(loop.terminator().block):
            tensor.parallel_insert_slice(slab, loop.inner_iter_args[0], [start], [], [], offsets,
                                         slab_dims, [1] * rank)
    return loop.results[0]
