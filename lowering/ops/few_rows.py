"""A few rows times a matrix, Y[M, N] = A[M, K] W[K, N] for M <= MAX_ROWS, and a vector
times a matrix, y[N] = x[K] W[K, N]: vector code reading W in place, row by row of W.

The matmul schedule (lowering/passes/schedules.py) first packs W into column panels: for
one to a few rows that copy of W was most of the work (x f32[1,512] times W f32[512,512]:
43-57 us, numpy 12), and the vector times matrix generic kept y's vector in memory from
one k to the next (each trip waiting on the store before it). Here the columns are split
into panels of up to PANEL_BYTES of a row of W (the forall's iterations, on the cores),
each into groups of G vectors; a panel's Y starts at zero and takes K_BLOCK rows of W at
a time: per group, its M x G accumulators read from Y, carried in registers through the
block's rows (A[m, k] times W[k, columns] added for each k in order), written back. So
each row's part of the panel is read in order, group after group, a block of rows at a
time: the hardware prefetchers follow it. (Taking all of K per group before the next,
as before, read 512 bytes of each row of W, one row per 4 KB page or more: no prefetcher
followed, 1.5-1.9x numpy's time at every size from [1,512]x[512,1024] to
[1,4096]x[4096,4096]; now 0.95-1.15, in alternating processes.) Each Y[m, n] is still one
chain in k order, whatever the vector width, the panels and blocks: the same bits on
every target. The chain is the path's this replaces: fused
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
# Rows of W per block: a group's accumulators go through memory (L1) once per block.
K_BLOCK = 16
# A parallel iteration's columns: up to this much of each row of W.
PANEL_BYTES = 2048
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

    def zero_fill(out: ir.Value, at: int, vectors: int) -> ir.Value:
        """`out` with its columns [at, at + vectors * lanes) zero in every row."""
        loop = scf.ForOp(index_const(0), index_const(vectors), index_const(1), [out])
        with ir.InsertionPoint(loop.body):
            column = arith.addi(index_const(at), arith.muli(loop.induction_variable, index_const(lanes)))
            written = loop.inner_iter_args[0]
            for m in range(rows):
                written = vector.transfer_write(written.type, zeros, written, index(m, column),
                                                out_row, [True])
            scf.YieldOp([written])
        return loop.results[0]

    def accumulate(out: ir.Value, first: ir.Value, at: int, groups: int, vectors: int,
                   k_first: ir.Value, k_count: int) -> ir.Value:
        """`out` plus rows [k_first, k_first + k_count) of the product, for `groups`
        groups of `vectors` vectors of columns from W's column `first` (`out`'s `at`):
        each group's accumulators read from `out`, carried in registers through the
        rows, written back."""
        loop = scf.ForOp(index_const(0), index_const(groups), index_const(1), [out])
        with ir.InsertionPoint(loop.body):
            offset = arith.muli(loop.induction_variable, index_const(vectors * lanes))
            w_column = arith.addi(first, offset)
            out_column = arith.addi(index_const(at), offset)
            written = loop.inner_iter_args[0]
            columns_at = [arith.addi(out_column, index_const(j * lanes)) for j in range(vectors)]
            start = [vector.transfer_read(vector_type, written, index(m, c), out_row, zero, [True])
                     for m in range(rows) for c in columns_at]
            k_loop = scf.ForOp(k_first, arith.addi(k_first, index_const(k_count)), index_const(1), start)
            with ir.InsertionPoint(k_loop.body):
                k = k_loop.induction_variable
                ws = [vector.transfer_read(vector_type, rhs,
                                           [k, arith.addi(w_column, index_const(j * lanes))],
                                           w_row, zero, [True]) for j in range(vectors)]
                sums = []
                for m in range(rows):
                    x = vector.broadcast(vector_type, tensor.extract(lhs, index(m, k)))
                    sums += [multiply_add(x, w, acc) for w, acc in
                             zip(ws, list(k_loop.inner_iter_args)[m * vectors:(m + 1) * vectors])]
                scf.YieldOp(sums)
            for m in range(rows):
                for j, c in enumerate(columns_at):
                    written = vector.transfer_write(written.type, k_loop.results[m * vectors + j],
                                                    written, index(m, c), out_row, [True])
            scf.YieldOp([written])
        return loop.results[0]

    def block(out: ir.Value, first: ir.Value, at: int, groups: int, vectors: int) -> ir.Value:
        """`out` with its columns [at, at + groups * vectors * lanes) the product's columns
        from `first`: zero, then K_BLOCK rows of W at a time (each row's part of the
        columns read in order), every output one chain in k order."""
        out = zero_fill(out, at, groups * vectors)
        blocks, tail = divmod(depth, K_BLOCK)
        if blocks:
            loop = scf.ForOp(index_const(0), index_const(blocks), index_const(1), [out])
            with ir.InsertionPoint(loop.body):
                k_first = arith.muli(loop.induction_variable, index_const(K_BLOCK))
                scf.YieldOp([accumulate(loop.inner_iter_args[0], first, at, groups, vectors,
                                        k_first, K_BLOCK)])
            out = loop.results[0]
        if tail:
            out = accumulate(out, first, at, groups, vectors, index_const(blocks * K_BLOCK), tail)
        return out

    shape = [columns] if a.rank == 1 else [rows, columns]
    result = tensor.EmptyOp(shape, element).result
    groups, rest = divmod(columns // lanes, per_group)
    # Panels of groups: a forall iteration's columns. Up to PANEL_BYTES of each row of W,
    # and at least two panels when there are two groups (both cores busy).
    per_panel = max(1, min(PANEL_BYTES // (width * element.width // 8), groups // 2))
    panels, spare = divmod(groups, per_panel) if groups else (0, 0)
    panel_width = per_panel * width
    if panels:
        loop = scf.ForallOp([0], [panels], [1], [result])
        with ir.InsertionPoint(loop.body):
            first = arith.muli(loop.induction_variables[0], index_const(panel_width))
            rank = len(shape)
            sizes = [panel_width] if rank == 1 else [rows, panel_width]
            static_offsets = [ir.ShapedType.get_dynamic_size()] if rank == 1 else \
                [0, ir.ShapedType.get_dynamic_size()]
            slice_type = ir.RankedTensorType.get(sizes, element)
            shared = loop.inner_iter_args[0]
            part = tensor.extract_slice(slice_type, shared, [first], [], [], static_offsets, sizes,
                                        [1] * rank)
            written = block(part, first, 0, per_panel, per_group)
            with ir.InsertionPoint(loop.terminator().block):
                tensor.parallel_insert_slice(written, shared, [first], [], [], static_offsets,
                                             sizes, [1] * rank)
        result = loop.results[0]
    at = panels * panel_width
    if spare:
        result = block(result, index_const(at), at, spare, per_group)
        at += spare * width
    if rest:
        result = block(result, index_const(at), at, 1, rest)
    return result
