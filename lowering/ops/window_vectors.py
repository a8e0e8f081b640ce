"""reduce_window (pooling) as vector loops along the untouched minor dimension.

The window generic of lowering/ops/reduce.py reads the operand at `o * stride + w`:
no vectorizer of the pipeline takes such a map (the linalg-level schedule wants
projected permutations, the affine one refuses strided accesses), so a max-pool
ran one element at a time. When the minor dimension is outside the window
(window 1, stride 1, no padding or dilation: NHWC pooling's channels) and the
computation is one add / multiply / maximum / minimum of the accumulator and the
element, this lowering writes the loops itself:

- one scf.forall iteration per index of the first output dimension larger than 1
  (split across the cores), scf.for loops over the other output positions, and over
  the minor dimension in vectors of LANES elements (the last one masked);
- per vector of outputs the window's cells in lexicographic order, each one
  `vector.transfer_read` of LANES contiguous operand elements combined into the
  accumulator vector, which starts as the init value. A padding cell (known only
  at run time) reads as the init value, as in the seeds' semantics.

Each output element thus sees f(...f(f(init, x0), x1)..., xn) in the same order
as the generic form: the lanes are independent outputs, nothing is reassociated.
The combiners are spelled for vectors here with the scalar emitters' semantics
(lowering/scalar/arithmetic.py: wrapping integers; float max/min are its
`float_extremum`, which takes vectors: -0 < +0, the first NaN quieted). Element
types: f32, f64 and the 8..64-bit integers (f16/bf16 arithmetic goes through
soft_float's scalar expansion). Imports `dialect` and the lowering
modules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ..patterns.computations import current_library
from ..scalar.arithmetic import float_extremum
from .indexing import DYNAMIC

P = PrimitiveType
F = arith.CmpFPredicate
LANES_BYTES = 64  # one AVX-512 register, two AVX2 ones
MAX_UNROLLED_CELLS = 64  # windows up to this many cells are unrolled (pooling: 4 or 9)
_TYPES = frozenset({P.F32, P.F64, P.S8, P.S16, P.S32, P.S64, P.U8, P.U16, P.U32, P.U64})
_COMBINERS = ("add", "multiply", "maximum", "minimum")


def _combiner(symbol: str) -> tuple[str, bool] | None:
    """(op name, accumulator first) when the computation is `op(acc, x)` or `op(x, acc)`
    for one of the combiners this module spells for vectors, else None."""
    block = current_library().functions[symbol].regions[0].blocks[0]
    ops = list(block.operations)
    args = list(block.arguments)
    if len(ops) != 2 or len(args) != 2:
        return None
    combine, ret = ops[0].operation, ops[1].operation
    name = combine.name.removeprefix("xhlo.")
    if name not in _COMBINERS or len(combine.operands) != 2 or ret.operands[0] != combine.results[0]:
        return None
    if list(combine.operands) == args:
        return name, True
    if list(combine.operands) == args[::-1]:
        return name, False
    return None


def applies(t: PrimitiveType, dims: Sequence[int], window: Sequence[int], strides: Sequence[int],
            base_dilations: Sequence[int], window_dilations: Sequence[int],
            padding: Sequence[Sequence[int]], symbol: str) -> bool:
    """Whether the vector loops can compute this reduce_window (one operand)."""
    rank = len(dims)
    if t not in _TYPES or rank < 2 or 0 in dims or any(b != 1 for b in base_dilations):
        return False
    lanes = LANES_BYTES // t.byte_width
    if dims[-1] < lanes // 2 or window[-1] != 1 or strides[-1] != 1 or tuple(padding[-1]) != (0, 0):
        return False
    if math.prod(window) > MAX_UNROLLED_CELLS or math.prod(window) == 1:
        return False
    return _combiner(symbol) is not None


def _combine(name: str, t: PrimitiveType, x: ir.Value, y: ir.Value) -> ir.Value:
    """The combiner on vectors, as lowering/scalar/arithmetic.py computes it per element."""
    floating = t.is_floating
    if name == "add":
        return arith.addf(x, y) if floating else arith.addi(x, y)
    if name == "multiply":
        return arith.mulf(x, y) if floating else arith.muli(x, y)
    if not floating:
        signed = t.is_signed_int
        if name == "maximum":
            return arith.maxsi(x, y) if signed else arith.maxui(x, y)
        return arith.minsi(x, y) if signed else arith.minui(x, y)
    # The scalar emitters' definition, which works on vectors too (one rule for NaN bits).
    return float_extremum(t, x, y, maximum=name == "maximum")


def index_constant(value: int) -> ir.Value:
    """An index constant (shared with select_scatter_vectors)."""
    return arith.constant(ir.IndexType.get(), value)


def carried_loop(lo: int, hi: int, step: int, carried: ir.Value,
                 body: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """scf.for lo..hi by step carrying one value: body(index, carried) -> next."""
    op = scf.ForOp(index_constant(lo), index_constant(hi), index_constant(step), [carried])
    with ir.InsertionPoint(op.body):
        scf.YieldOp([body(op.induction_variable, op.inner_iter_args[0])])
    return op.results[0]


def reduce_window(x: ir.Value, init: ir.Value, t: PrimitiveType, dims: Sequence[int],
                  out_dims: Sequence[int], window: Sequence[int], strides: Sequence[int],
                  window_dilations: Sequence[int], padding: Sequence[Sequence[int]],
                  symbol: str) -> ir.Value:
    """The reduce_window of `x` (one operand, scalar `init` in storage type) where
    `applies` holds."""
    combiner = _combiner(symbol)
    assert combiner is not None
    name, acc_first = combiner
    rank = len(dims)
    element = ir.RankedTensorType(x.type).element_type
    lanes = min(LANES_BYTES // t.byte_width, 1 << (dims[-1].bit_length() - 1))
    vtype = ir.VectorType.get([lanes], element)
    minor = dims[-1]
    in_bounds = [minor % lanes == 0]
    windowed = [i for i in range(rank) if window[i] > 1]
    cells = list(itertools.product(*(range(window[i]) for i in windowed)))
    minor_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])

    def row(position: list[ir.Value], out: ir.Value) -> ir.Value:
        """The minor dimension of one output position, a vector at a time."""
        def chunk(j: ir.Value, out: ir.Value) -> ir.Value:
            acc = vector.broadcast(vtype, init)
            for cell in cells:
                offsets = dict(zip(windowed, cell))
                indices, checks = [], []
                for i in range(rank - 1):
                    o = position[i]
                    q = o if strides[i] == 1 else arith.muli(o, index_constant(strides[i]))
                    step = offsets.get(i, 0) * window_dilations[i] - padding[i][0]
                    if step:
                        q = arith.addi(q, index_constant(step))
                    if padding[i][0] > 0 or padding[i][1] > 0:
                        checks.append(arith.cmpi(arith.CmpIPredicate.sge, q, index_constant(0)))
                        checks.append(arith.cmpi(arith.CmpIPredicate.slt, q, index_constant(dims[i])))
                        q = arith.minsi(arith.maxsi(q, index_constant(0)), index_constant(dims[i] - 1))
                    indices.append(q)
                value = vector.transfer_read(vtype, x, indices + [j], minor_map, init, in_bounds)
                if checks:
                    valid = checks[0]
                    for check in checks[1:]:
                        valid = arith.andi(valid, check)
                    value = arith.select(valid, value, vector.broadcast(vtype, init))
                acc = _combine(name, t, acc, value) if acc_first else _combine(name, t, value, acc)
            local = [index_constant(0) if d == split else position[d] for d in range(rank - 1)] + [j]
            return vector.transfer_write(out.type, acc, out, local, minor_map, in_bounds)
        return carried_loop(0, minor, lanes, out, chunk)

    # The cores split the first output dimension with more than one index (dimensions
    # before it have one): the batch of a pooling, or its rows when the batch is 1.
    split = next((d for d in range(rank - 1) if out_dims[d] > 1), 0)
    slab_dims = [1 if d == split else n for d, n in enumerate(out_dims)]

    def nest(level: int, position: list[ir.Value], out: ir.Value) -> ir.Value:
        if level == rank - 1:
            return row(position, out)
        if level == split:
            return nest(level + 1, position + [part], out)
        return carried_loop(0, out_dims[level], 1, out,
                    lambda i, o: nest(level + 1, position + [i], o))

    shared = tensor.EmptyOp(list(out_dims), element).result
    loop = scf.ForallOp([0], [out_dims[split]], [1], [shared])
    with ir.InsertionPoint(loop.body):
        part = loop.induction_variables[0]
        offsets = [DYNAMIC if d == split else 0 for d in range(rank)]
        # The iteration's slice of the shared output as its destination: written in place.
        slab = tensor.extract_slice(ir.RankedTensorType.get(slab_dims, element), loop.inner_iter_args[0],
                                    [part], [], [], offsets, slab_dims, [1] * rank)
        slab = nest(0, [], slab)
        with ir.InsertionPoint(loop.terminator().block):
            tensor.parallel_insert_slice(slab, loop.inner_iter_args[0], [part], [], [], offsets,
                                         slab_dims, [1] * rank)
    return loop.results[0]
