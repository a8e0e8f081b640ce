"""Short rows sorted by a bitonic network, one vector lane per row.

For a sort along the last dimension of rows of n <= NETWORK_MAX elements in a
recognised key order (`sort_kernels.key_order`), a group of LANES neighbouring
rows (along the second-to-last dimension) is sorted at once: the keys are
transposed into a [n', LANES] buffer (n' = n rounded up to a power of two, the
extra places holding the largest key), so that every compare-exchange of the
network is one unsigned min and one max of two whole vectors, with no shuffle.
The network is the bitonic one in its ascending-only form: phase k (k = 2, 4,
.., n') first compares each place of a block of k with its mirror in the block,
then places j = k/4, .., 1 apart.

A network is not stable, so what it sorts must not have ties that the output
could tell apart:
- one operand whose keys determine its values (every order but float_nan_last
  has a bijective key; float_nan_last gives every NaN one key): 32-bit keys, the
  sorted keys decoded back to values. NaNs, all one key, are then written again
  from the row in their order (only rows that hold some), so the result is the
  stable sort's bit for bit;
- otherwise (several operands): i64 keys (key << 32 | position), all distinct,
  sorted; each operand is then gathered by the positions.
Groups run one after another (one core: splitting them across the cores is
left to do). Only vector arith and
transfers: LLVM lowers the 512-bit vectors to whatever the target has.
Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ..scalar.arithmetic import int_splat
from .indexing import element_type, index_const
from .sort_kernels import KeyOrder, decoder, for_range, if_values, is_nan, key_bits, sort_key

NETWORK_MAX = 512  # longer rows: the radix sort (a 1024-row buffer of keys leaves L1; measured slower)
VECTOR_BITS = 512


def network_applies(dims: Sequence[int], axis: int, types: Sequence[PrimitiveType],
                    order: KeyOrder) -> bool:
    """Whether `network_rows` sorts this: rows along the last dimension, short, in groups
    of at least a few rows, keys of at most 32 bits."""
    return (len(dims) >= 2 and axis == len(dims) - 1 and 2 <= dims[-1] <= NETWORK_MAX
            and dims[-2] >= 4 and key_bits(types[order.operand]) <= 32)


def _bitonic(keys: ir.Value, size: int, vtype: ir.VectorType) -> ir.Value:
    """`keys` ([size, lanes], size a power of two) with every column sorted ascending."""
    read_map = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
    zero = index_const(0)

    def exchange(buffer: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
        a = vector.transfer_read(vtype, buffer, [lo, zero], read_map, _pad(vtype), [True])
        b = vector.transfer_read(vtype, buffer, [hi, zero], read_map, _pad(vtype), [True])
        buffer = vector.transfer_write(buffer.type, arith.minui(a, b), buffer, [lo, zero], read_map, [True])
        return vector.transfer_write(buffer.type, arith.maxui(a, b), buffer, [hi, zero], read_map, [True])

    k = 2
    while k <= size:
        half = k // 2
        shift = half.bit_length() - 1

        def mirror(i: ir.Value, carried: list[ir.Value], k: int = k, half: int = half,
                   shift: int = shift) -> list[ir.Value]:
            block = arith.shli(arith.shrui(i, index_const(shift)), index_const(shift + 1))
            offset = arith.andi(i, index_const(half - 1))
            lo = arith.addi(block, offset)
            hi = arith.subi(arith.addi(block, index_const(k - 1)), offset)
            return [exchange(carried[0], lo, hi)]

        keys = for_range(0, size // 2, [keys], mirror)[0]
        j = half // 2
        while j >= 1:
            s = j.bit_length() - 1

            def step(i: ir.Value, carried: list[ir.Value], j: int = j, s: int = s) -> list[ir.Value]:
                lo = arith.ori(arith.shli(arith.shrui(i, index_const(s)), index_const(s + 1)),
                               arith.andi(i, index_const(j - 1)))
                return [exchange(carried[0], lo, arith.addi(lo, index_const(j)))]

            keys = for_range(0, size // 2, [keys], step)[0]
            j //= 2
        k *= 2
    return keys


def _pad(vtype: ir.VectorType) -> ir.Value:
    return arith.constant(vtype.element_type, 0)


def network_rows(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], dims: Sequence[int],
                 order: KeyOrder) -> list[ir.Value]:
    """The inputs sorted along their last dimension by `order`, as the stable sort would."""
    rank = len(dims)
    n, rows = dims[-1], dims[-2]
    size = 1 << (n - 1).bit_length()
    key_type = types[order.operand]
    storage = element_type(inputs[order.operand])
    single = len(inputs) == 1
    nan_last = single and order.kind == "float_nan_last"
    width = 32 if single else 64
    kt = ir.IntegerType.get_signless(width)
    lanes = VECTOR_BITS // width
    vtype = ir.VectorType.get([lanes], kt)
    i32v = ir.VectorType.get([lanes], ir.IntegerType.get_signless(32))
    column = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 2)])
    along = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
    groups = -(-rows // lanes)
    outer = list(dims[:-2])
    count = math.prod(outer) * groups
    decode = decoder(key_type, storage, order) if single else None
    results = [tensor.EmptyOp(list(dims), element_type(x)).result for x in inputs]
    buffer_type = ir.RankedTensorType.get([size, lanes], kt)

    def group(flat: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
        ivs = []
        stride = count
        for d in outer + [groups]:  # row-major delinearisation
            stride //= d
            ivs.append(arith.remui(arith.divui(flat, index_const(stride)), index_const(d)))
        first = arith.muli(ivs[-1], index_const(lanes))
        lead = ivs[:-1] + [first]
        src_type = ir.VectorType.get([lanes], element_type(inputs[order.operand]))
        key_vtype = ir.VectorType.get([lanes], ir.IntegerType.get_signless(key_bits(key_type)))
        zero_elem = _zero_of(element_type(inputs[order.operand]))

        def fill(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            buffer, nans = carried
            x = vector.transfer_read(src_type, inputs[order.operand], lead + [i], column, zero_elem, [False])
            key = sort_key(x, key_type, order)
            if width > key_bits(key_type):
                key = arith.extui(vtype, key)
            if not single:  # the key above the position
                key = arith.ori(arith.shli(key, int_splat(vtype, 32)),
                                vector.broadcast(vtype, arith.index_cast(kt, i)))
            buffer = vector.transfer_write(buffer.type, key, buffer, [i, index_const(0)], along, [True])
            if nan_last:
                nans = arith.addi(nans, arith.select(is_nan(x, key_type), int_splat(i32v, 1),
                                                     int_splat(i32v, 0)))
            return [buffer, nans]

        buffer = tensor.EmptyOp([size, lanes], kt).result
        buffer, nans = for_range(0, n, [buffer, int_splat(i32v, 0)], fill)
        if size > n:
            def pad(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                return [vector.transfer_write(buffer_type, int_splat(vtype, -1), carried[0],
                                              [i, index_const(0)], along, [True])]
            buffer = for_range(n, size, [buffer], pad)[0]
        buffer = _bitonic(buffer, size, vtype)
        if single:
            def write(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                key = vector.transfer_read(vtype, buffer, [i, index_const(0)], along, _pad(vtype), [True])
                if width > key_bits(key_type):
                    key = arith.trunci(key_vtype, key)
                value = decode(key)
                out = carried[0]
                return [vector.transfer_write(out.type, value, out, lead + [i], column, [False])]

            out = for_range(0, n, outs, write)[0]
            if nan_last:
                # One loop over the lanes (not one per lane: bufferization's analysis of
                # many chained loops writing one tensor took minutes).
                counts_type = ir.RankedTensorType.get([lanes], ir.IntegerType.get_signless(32))
                empty = tensor.EmptyOp([lanes], counts_type.element_type).result
                counts = vector.transfer_write(counts_type, nans, empty, [index_const(0)],
                                               ir.AffineMap.get_identity(1), [True])

                def fix(lane: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                    return [_place_nans(inputs[0], carried[0], tensor.extract(counts, [lane]),
                                        lead[:-1] + [arith.addi(first, lane)], n, key_type,
                                        order.ascending)]

                out = for_range(0, lanes, [out], fix)[0]
            return [out]
        # Several operands: each gathered by the positions, row by row.
        live = arith.minsi(index_const(lanes), arith.subi(index_const(rows), first))

        def gather_row(lane: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
            at_row = lead[:-1] + [arith.addi(first, lane)]

            def element(i: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
                moved = tensor.extract(buffer, [i, lane])
                position = arith.index_castui(ir.IndexType.get(), arith.trunci(
                    ir.IntegerType.get_signless(32), moved))
                return [tensor.insert(tensor.extract(x, at_row + [position]), o, at_row + [i])
                        for x, o in zip(inputs, outs)]

            return for_range(0, n, outs, element)

        return for_range(0, live, outs, gather_row)

    return _each_group(count, results, group, lanes, dims)


def _zero_of(t: ir.Type) -> ir.Value:
    if isinstance(t, ir.FloatType):
        return arith.constant(t, 0.0)
    return arith.constant(t, 0)


def _place_nans(row_source: ir.Value, out: ir.Value, nans: ir.Value, at_row: list[ir.Value], n: int,
                t: PrimitiveType, ascending: bool) -> ir.Value:
    """`out`'s row at `at_row` with its block of NaN keys holding that row's NaNs, in order."""
    nans = arith.index_cast(ir.IndexType.get(), nans)
    start = arith.subi(index_const(n), nans) if ascending else index_const(0)

    def step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        pos, out = carried
        x = tensor.extract(row_source, at_row + [i])
        nan = is_nan(x, t)
        written = if_values(nan, lambda: [tensor.insert(x, out, at_row + [pos])], lambda: [out],
                            [out.type])[0]
        return [arith.addi(pos, arith.select(nan, index_const(1), index_const(0))), written]

    some = arith.cmpi(arith.CmpIPredicate.ne, nans, index_const(0))
    trips = arith.select(some, index_const(n), index_const(0))
    return for_range(0, trips, [start, out], step)[1]


def _each_group(count: int, results: list[ir.Value], group, lanes: int, dims: Sequence[int]
                   ) -> list[ir.Value]:
    """scf.for over the groups (each writes its rows of the results)."""
    loop = scf.ForOp(index_const(0), index_const(count), index_const(1), results)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(group(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)
