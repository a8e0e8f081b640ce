"""A few rows times a matrix, Y[M, N] = A[M, K] W[K, N] for M <= MAX_ROWS, and a vector
times a matrix, y[N] = x[K] W[K, N]: vector code reading W in place, row by row of W.

The matmul schedule (lowering/passes/schedules.py) first packs W into column panels: for
one to a few rows that copy of W was most of the work (x f32[1,512] times W f32[512,512]:
43-57 us, numpy 12), and the vector times matrix generic kept y's vector in memory from
one k to the next (each trip waiting on the store before it). Here the columns are split
into groups of G vectors (the forall's iterations, on the cores); a group's M x G
accumulators start at zero in registers and take, for k = 0, 1, ..., K - 1, A[m, k] times
W[k, columns] added: each Y[m, n] is one chain in k order, whatever the vector width, so
the same bits on every target. The chain is the path's this replaces: fused
multiply-adds where the matmul schedule would have taken the product (f32 or f64, a
matrix lhs, at least SCHEDULE_MIN_FLOPS; lowering/passes/exact_fma.py), else a multiply then an add
(the linalg op's body). G = ACCUMULATORS / M independent chains hide the latency.
Imports the lowering modules.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from .indexing import index_const

MAX_ROWS = 4  # more rows: the matmul schedule, as before (this kernel measured up to 4)
ACCUMULATORS = 8  # vector accumulators of a group: independent FMA chains
VECTOR_BITS = 512
# lowering/passes/schedules.py's MIN_FLOPS (a test checks they agree): the products the
# matmul schedule takes, whose fused multiply-adds these keep.
SCHEDULE_MIN_FLOPS = 2 * 64**3


def applies(lhs: ir.Value, rhs: ir.Value) -> bool:
    """lhs [M, K] (M <= MAX_ROWS) or [K], rhs [K, N] of the same f32/f64 type, static,
    N a multiple of the vector length."""
    a, w = ir.RankedTensorType(lhs.type), ir.RankedTensorType(rhs.type)
    if not (a.has_static_shape and w.has_static_shape and w.rank == 2 and a.rank in (1, 2)):
        return False
    element = w.element_type
    if not isinstance(element, (ir.F32Type, ir.F64Type)) or a.element_type != element:
        return False
    rows = 1 if a.rank == 1 else a.shape[0]
    lanes = VECTOR_BITS // element.width
    k, n = w.shape
    return 1 <= rows <= MAX_ROWS and a.shape[-1] == k >= 1 and n >= lanes and n % lanes == 0


def few_rows(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """lhs times rhs (call where `applies`): [M, N], or [N] for a vector lhs."""
    a = ir.RankedTensorType(lhs.type)
    depth, columns = ir.RankedTensorType(rhs.type).shape
    element = a.element_type
    rows = 1 if a.rank == 1 else a.shape[0]
    lanes = VECTOR_BITS // element.width
    vector_type = ir.VectorType.get([lanes], element)
    per_group = max(1, ACCUMULATORS // rows)
    width = per_group * lanes
    zero = arith.constant(element, 0.0)
    zeros = vector.broadcast(vector_type, zero)
    w_row = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
    fused = a.rank == 2 and 2 * rows * columns * depth >= SCHEDULE_MIN_FLOPS

    def multiply_add(x: ir.Value, w: ir.Value, acc: ir.Value) -> ir.Value:
        return vector.fma(x, w, acc) if fused else arith.addf(acc, arith.mulf(x, w))

    out_row = ir.AffineMap.get(a.rank, 0, [ir.AffineDimExpr.get(a.rank - 1)])

    def index(m: int, column: ir.Value) -> list[ir.Value]:
        return [column] if a.rank == 1 else [index_const(m), column]

    def block(first: ir.Value, vectors: int, out: ir.Value, at: ir.Value) -> ir.Value:
        """Columns [first, first + vectors * lanes) of every row, written into `out` from
        its column `at` (`out` is the result, or a group's slice of it)."""
        loop = scf.ForOp(index_const(0), index_const(depth), index_const(1), [zeros] * (rows * vectors))
        with ir.InsertionPoint(loop.body):
            k = loop.induction_variable
            ws = [vector.transfer_read(vector_type, rhs, [k, arith.addi(first, index_const(j * lanes))],
                                       w_row, zero, [True]) for j in range(vectors)]
            sums = []
            for m in range(rows):
                x = vector.broadcast(vector_type, tensor.extract(lhs, index(m, k)))
                sums += [multiply_add(x, w, acc) for w, acc in
                         zip(ws, list(loop.inner_iter_args)[m * vectors:(m + 1) * vectors])]
            scf.YieldOp(sums)
        for m in range(rows):
            for j in range(vectors):
                out = vector.transfer_write(out.type, loop.results[m * vectors + j], out,
                                            index(m, arith.addi(at, index_const(j * lanes))), out_row, [True])
        return out

    shape = [columns] if a.rank == 1 else [rows, columns]
    result = tensor.EmptyOp(shape, element).result
    groups, rest = divmod(columns // lanes, per_group)
    if groups:
        loop = scf.ForallOp([0], [groups], [1], [result])
        with ir.InsertionPoint(loop.body):
            first = arith.muli(loop.induction_variables[0], index_const(width))
            rank = len(shape)
            sizes = [width] if rank == 1 else [rows, width]
            static_offsets = [ir.ShapedType.get_dynamic_size()] if rank == 1 else \
                [0, ir.ShapedType.get_dynamic_size()]
            slice_type = ir.RankedTensorType.get(sizes, element)
            shared = loop.inner_iter_args[0]
            part = tensor.extract_slice(slice_type, shared, [first], [], [], static_offsets, sizes,
                                        [1] * rank)
            written = block(first, per_group, part, index_const(0))
            with ir.InsertionPoint(loop.terminator().block):
                tensor.parallel_insert_slice(written, shared, [first], [], [], static_offsets,
                                             sizes, [1] * rank)
        result = loop.results[0]
    if rest:
        first = index_const(groups * width)
        result = block(first, rest, result, first)
    return result
