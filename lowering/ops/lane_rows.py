"""A matrix-vector product y = A x (A of [M, K], f32/f64) as vector code, row by row.

The same sums as lowering/ops/dot_lanes.py's generics: row r's lane l adds
A[r, c * 16 + l] * x[c * 16 + l] for c = 0, 1, ... into a zero, then y[r] is zero plus
lanes 0..15 in order. Those generics, tiled by lowering/passes/lane_schedules.py, run
8 rows side by side (the chunk loop outside the rows: 8 streams through A, 1 KB apart
for K = 256), keep the partial sums in a zero-filled [M, 16] buffer and fold it in a
second loop. Here each row is one accumulator, CHAINS rows' carried by one chunk
loop, which reads each row as one contiguous stream and x once for them (their
dependent add chains side by side; a tanh RNN step's two 256 x 256 products ran 1.2x
faster with 64-byte aligned rows), and every 16 rows' accumulators are folded at once by a
16 x 16 transpose in registers (4 rounds of shuffles) into one vector of y: no
partials buffer, no fill, no second pass. Rows past the last whole block of 16 are
zero vectors and not written. Only element moves and the generics' own multiply-add
and add: the same bits on every target. Imports the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from ..register_transpose import transposed

LANES = 16
MIN_ROWS = LANES  # fewer rows: the generics (one partial fold per row costs as much)
# Longer rows of a product on one core: the generics. A row's adds are one dependent
# chain; past ~64 chunks the out-of-order window no longer reaches the next row and the
# 8 rows the generics run side by side win (same process: [1024, 4096] 284 vs 211 us;
# [1024, 1024] 42 vs 48, [512, 2048] 42 vs 43, [256, 256] in an RNN step 1.6x faster).
# A product split across the cores (PARALLEL_MIN_ELEMENTS) takes this path at any depth:
# the generics run on one core, at half the memory bandwidth (f32 [2048, 2048] 640 ->
# 390 us, [1024, 4096] 644 -> 410, [4096, 4096] 2600 -> 1380; numpy 350, 346, 1300).
MAX_DEPTH = 1024
# Rows whose chains one chunk loop carries. One row's chain of 16 dependent multiply-adds
# (K = 256) left the core waiting on each add's latency: a 256 x 256 product took 8.7 us
# on Zen 3 (AVX2); four rows side by side: 5.5 us (a tanh RNN step's two products 17.4
# -> 8.4-11 us; eight rows measured the same within this VM's noise and take all 16 AVX2
# registers). Any count gives the same sums: each row's chain is unchanged.
CHAINS = 4
# Matrices of at least this many elements split their blocks of 16 rows across the cores
# (vectorize.py's PARALLEL_MIN_WORK): f32 [1024, 1024] times a vector 133 -> 106 us.
# Smaller ones (a tanh RNN step's 256 x 256, inside a while loop) stay on the calling
# thread: waking the pool would cost more than the product.
PARALLEL_MIN_ELEMENTS = 1 << 18


def _converted(value: ir.Value) -> bool:
    """Whether `value` is a generic's conversion (f16/bf16 operands widened to f32): fused
    into the generics' loads, it would be a whole converted copy here."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "linalg.generic":
        return False
    element = ir.RankedTensorType(value.type).element_type
    return any(isinstance(v.type, ir.ShapedType) and ir.ShapedType(v.type).element_type != element
               for v in owner.operands)


def applies(matrix: ir.Value, vector_value: ir.Value, batch: int) -> bool:
    """A [M, K] f32/f64 matrix times a [K] vector of its type, M >= 16, K <= MAX_DEPTH or
    M x K >= PARALLEL_MIN_ELEMENTS, no batch, neither converted from another type."""
    m, v = ir.RankedTensorType(matrix.type), ir.RankedTensorType(vector_value.type)
    return (batch == 0 and m.rank == 2 and v.rank == 1 and m.has_static_shape and v.has_static_shape
            and isinstance(m.element_type, (ir.F32Type, ir.F64Type)) and m.element_type == v.element_type
            and m.shape[0] >= MIN_ROWS and m.shape[1] % LANES == 0
            and (m.shape[1] <= MAX_DEPTH or m.shape[0] * m.shape[1] >= PARALLEL_MIN_ELEMENTS)
            and not _converted(matrix) and not _converted(vector_value))


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def lane_rows(matrix: ir.Value, vector_value: ir.Value, zero: ir.Value,
              multiply_add: Callable[[ir.Value, ir.Value, ir.Value], ir.Value],
              add: Callable[[ir.Value, ir.Value], ir.Value], vector_first: bool) -> ir.Value:
    """y[r] = sum_k matrix[r, k] * vector[k] (call where `applies`); the products are
    vector * matrix element when `vector_first`."""
    rows, depth = ir.RankedTensorType(matrix.type).shape
    element = ir.RankedTensorType(matrix.type).element_type
    lane_type = ir.VectorType.get([LANES], element)
    row_map = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
    flat_map = ir.AffineMap.get_identity(1)
    zeros = vector.broadcast(lane_type, zero)

    def row_sums(rows: list[ir.Value]) -> list[ir.Value]:
        """Lane partial sums of a few rows: each row's chunks in order, into zeros, the
        rows' chains side by side in one loop (one read of x per chunk)."""
        loop = scf.ForOp(_index(0), _index(depth), _index(LANES), [zeros] * len(rows))
        with ir.InsertionPoint(loop.body):
            c = loop.induction_variable
            x = vector.transfer_read(lane_type, vector_value, [c], flat_map, zero, [True])
            sums = []
            for row, acc in zip(rows, loop.inner_iter_args):
                a = vector.transfer_read(lane_type, matrix, [row, c], row_map, zero, [True])
                sums.append(multiply_add(x, a, acc) if vector_first else multiply_add(a, x, acc))
            scf.YieldOp(sums)
        return list(loop.results)

    def block(first: ir.Value, count: int, out: ir.Value, at: ir.Value) -> ir.Value:
        """y[first:first + count] (count <= 16) written into `out` from its element `at`
        (`out` is y, or a block's slice of it)."""
        lanes = []
        for group in range(0, count, CHAINS):
            rows_of_group = range(group, min(count, group + CHAINS))
            lanes += row_sums([arith.addi(first, _index(i)) for i in rows_of_group])
        lanes += [zeros] * (LANES - count)
        y = zeros
        for lane in transposed(lanes, pairs_first=True):
            y = add(y, lane)
        return vector.transfer_write(out.type, y, out, [at], flat_map, [count == LANES])

    out = tensor.EmptyOp([rows], element).result
    whole = rows // LANES * LANES
    if rows * depth < PARALLEL_MIN_ELEMENTS:
        loop = scf.ForOp(_index(0), _index(whole), _index(LANES), [out])
        with ir.InsertionPoint(loop.body):
            first = loop.induction_variable
            scf.YieldOp([block(first, LANES, loop.inner_iter_args[0], first)])
    else:  # the blocks of 16 rows on the cores; each writes its own 16 elements of y
        loop = scf.ForallOp([0], [whole // LANES], [1], [out])
        with ir.InsertionPoint(loop.body):
            first = arith.muli(loop.induction_variables[0], _index(LANES))
            shared = loop.inner_iter_args[0]
            dynamic = [ir.ShapedType.get_dynamic_size()]
            part = tensor.extract_slice(ir.RankedTensorType.get([LANES], element), shared, [first], [],
                                        [], dynamic, [LANES], [1])
            written = block(first, LANES, part, _index(0))
            with ir.InsertionPoint(loop.terminator().block):
                tensor.parallel_insert_slice(written, shared, [first], [], [], dynamic, [LANES], [1])
    out = loop.results[0]
    if rows > whole:
        out = block(_index(whole), rows - whole, out, _index(whole))
    return out
