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
  has a bijective key; float_nan_last gives every NaN one key): 32- or 64-bit keys, the
  sorted keys decoded back to values. NaNs, all one key, are then written again
  from the row in their order (only rows that hold some), so the result is the
  stable sort's bit for bit;
- otherwise (several operands): i64 keys (key << 32 | position), all distinct,
  sorted; each operand is then gathered by the positions.
Groups are the iterations of one scf.forall (the cores share them), each writing
its rows of the results. Only vector arith and
transfers: LLVM lowers the 512-bit vectors to whatever the target has.
Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, memref, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ..register_transpose import transposed
from ..scalar.arithmetic import int_splat
from .indexing import DYNAMIC, element_type, index_const
from .sort_kernels import KeyOrder, decoder, for_range, key_bits, place_nans, sort_key

# Longer rows: the radix sort. With the groups on the cores and BLOCK, measured against
# the radix sort (f32, 2 cores, AVX-512): [1024,1024] 1.51 vs 2.61 ms, [512,2048] 1.86
# vs 2.65, [256,4096] 2.16 vs 2.47 (a 256 KB buffer per group, in L2), [128,8192] 2.54 vs
# 2.43.
NETWORK_MAX = 4096
VECTOR_BITS = 512
# Compare-exchanges between places less than BLOCK apart run in registers, BLOCK places'
# vectors loaded once per pass instead of once per stage.
BLOCK = 8


def network_applies(dims: Sequence[int], axis: int, types: Sequence[PrimitiveType],
                    order: KeyOrder) -> bool:
    """Whether `network_rows` sorts this: rows along the last dimension, short, in groups
    of at least a few rows; one operand, or several with keys of at most 32 bits."""
    return (len(dims) >= 2 and axis == len(dims) - 1 and 2 <= dims[-1] <= NETWORK_MAX
            and dims[-2] >= 4 and (len(types) == 1 or key_bits(types[order.operand]) <= 32))


def _bitonic(keys: ir.Value, size: int, vtype: ir.VectorType) -> None:
    """Every column of `keys` (a memref [>= size, lanes], size a power of two) sorted
    ascending over its first `size` places, in place."""
    zero = index_const(0)
    block = min(BLOCK, size)

    def load(at: ir.Value) -> ir.Value:
        return vector.load(vtype, keys, [at, zero])

    def store(value: ir.Value, at: ir.Value) -> None:
        vector.store(value, keys, [at, zero])

    def exchange(lo: ir.Value, hi: ir.Value) -> None:
        a, b = load(lo), load(hi)
        store(arith.minui(a, b), lo)
        store(arith.maxui(a, b), hi)

    def in_registers(pairs: list[tuple[int, int]]) -> None:
        """The compare-exchanges `pairs` (places within a block) on every block of
        `block` places: the block's vectors loaded once, exchanged in registers, stored."""
        def each(b: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            base = arith.muli(b, index_const(block))
            at = [arith.addi(base, index_const(t)) for t in range(block)]
            v = [load(a) for a in at]
            for lo, hi in pairs:
                v[lo], v[hi] = arith.minui(v[lo], v[hi]), arith.maxui(v[lo], v[hi])
            for a, value in zip(at, v):
                store(value, a)
            return []

        for_range(0, size // block, [], each)

    def mirror_pairs(k: int) -> list[tuple[int, int]]:
        return [(b + t, b + k - 1 - t) for b in range(0, block, k) for t in range(k // 2)]

    def half_pairs(j: int) -> list[tuple[int, int]]:
        return [(t, t + j) for t in range(block) if not t & j]

    # Phases k <= block: wholly within blocks.
    pairs: list[tuple[int, int]] = []
    k = 2
    while k <= block:
        pairs += mirror_pairs(k)
        j = k // 4
        while j >= 1:
            pairs += half_pairs(j)
            j //= 2
        k *= 2
    in_registers(pairs)
    if k > size:
        return
    # Phases k = 2 * block .. size: one loop over the phases, of a loop over their memory
    # stages (not one loop per stage: LLVM compiled each, 55 for 1024 places).
    low = [p for j in _powers_below(block) for p in half_pairs(j)]
    one = index_const(1)
    shl = arith.shli

    def phase(p: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        """Phase k = 2**p: the mirror stage, the stages j = k/4 .. block, then the ones
        below a block in registers."""
        half_bits = arith.subi(p, one)
        k_minus_1 = arith.subi(shl(one, p), one)

        def mirror(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            start = shl(arith.shrui(i, half_bits), p)
            offset = arith.andi(i, arith.subi(shl(one, half_bits), one))
            exchange(arith.addi(start, offset), arith.subi(arith.addi(start, k_minus_1), offset))
            return []

        for_range(0, size // 2, [], mirror)

        def stage(t: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            q = arith.subi(arith.subi(p, index_const(2)), t)  # j = 2**q
            j = shl(one, q)

            def step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                lo = arith.ori(shl(arith.shrui(i, q), arith.addi(q, one)),
                               arith.andi(i, arith.subi(j, one)))
                exchange(lo, arith.addi(lo, j))
                return []

            return for_range(0, size // 2, [], step)

        # Stages j = 2**(p-2) .. block: p - 1 - log2(block) of them.
        stages = arith.subi(p, index_const(block.bit_length()))
        for_range(0, stages, [], stage)
        in_registers(low)
        return []

    first_phase = (2 * block).bit_length() - 1
    for_range(first_phase, size.bit_length(), [], phase)


def _powers_below(block: int) -> list[int]:
    """block/2, block/4, .., 1."""
    out = []
    j = block // 2
    while j >= 1:
        out.append(j)
        j //= 2
    return out


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
    # 16 lanes of 32-bit keys; 8 of 64-bit ones (64-bit types, or a key and a position).
    width = 32 if single and key_bits(key_type) <= 32 else 64
    kt = ir.IntegerType.get_signless(width)
    lanes = VECTOR_BITS // width
    vtype = ir.VectorType.get([lanes], kt)
    i32v = ir.VectorType.get([lanes], ir.IntegerType.get_signless(32))
    groups = -(-rows // lanes)
    count = math.prod(dims[:-2]) * groups
    decode = decoder(key_type, storage, order) if single else None
    results = [tensor.EmptyOp(list(dims), element_type(x)).result for x in inputs]
    # Places are filled and written back `lanes` at a time (whole tiles: past the row they
    # hold keys of 0, which the padding then overwrites up to `size`).
    tiles = -(-n // lanes)
    allocated = max(size, tiles * lanes)

    def group(lead: list[ir.Value], live: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
        """The group whose first row is at `lead` in the inputs, of `live` rows: its
        sorted rows in `outs`, its slices of the results."""
        first = lead[-1]
        at = [index_const(0)] * len(lead)  # the group's first row in `outs`
        src_type = ir.VectorType.get([lanes], element_type(inputs[order.operand]))
        key_vtype = ir.VectorType.get([lanes], ir.IntegerType.get_signless(key_bits(key_type)))
        zero_elem = _zero_of(element_type(inputs[order.operand]))

        row_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
        last_live = arith.subi(live, index_const(1))
        last_row = index_const(rows - 1)
        # The key of a NaN (float_nan_last): no other value has it.
        bits = key_bits(key_type)
        all_ones = (1 << bits) - 1 if bits < width else -1
        nan_key = int_splat(vtype, all_ones if order.ascending else 0)

        def fill(tile: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            """Places i0 .. i0 + lanes - 1 of the group's rows, read as one vector per row
            and transposed in registers into one vector per place (a lane per row)."""
            (nans,) = carried
            i0 = arith.muli(tile, index_const(lanes))
            keys = []
            for r in range(lanes):
                # Rows past the last (a partial group) read the last one: their lanes are
                # never written back.
                row = arith.minsi(arith.addi(first, index_const(r)), last_row)
                x = vector.transfer_read(src_type, inputs[order.operand], lead[:-1] + [row, i0],
                                         row_map, zero_elem, [False])
                key = sort_key(x, key_type, order)
                if width > key_bits(key_type):
                    key = arith.extui(vtype, key)
                if not single:  # the key above the position
                    places = arith.addi(vector.step(ir.VectorType.get([lanes], ir.IndexType.get())),
                                        vector.broadcast(ir.VectorType.get([lanes], ir.IndexType.get()), i0))
                    key = arith.ori(arith.shli(key, int_splat(vtype, 32)), arith.index_cast(vtype, places))
                keys.append(key)
            for k, key in enumerate(transposed(keys, pairs_first=False)):
                vector.store(key, buffer, [arith.addi(i0, index_const(k)), index_const(0)])
                if nan_last:  # places past the row hold 0.0, whose key is not a NaN's
                    nans = arith.addi(nans, arith.select(
                        arith.cmpi(arith.CmpIPredicate.eq, key, nan_key),
                        int_splat(i32v, 1), int_splat(i32v, 0)))
            return [nans]

        # The group's keys, place by place (a memref: bufferization need not analyse
        # the network's thousands of reads and writes of it).
        buffer = memref.alloc(ir.MemRefType.get([allocated, lanes], kt), [], [], alignment=64)
        (nans,) = for_range(0, tiles, [int_splat(i32v, 0)], fill)
        if size > n:
            def pad(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                vector.store(int_splat(vtype, -1), buffer, [i, index_const(0)])
                return []
            for_range(n, size, [], pad)
        _bitonic(buffer, size, vtype)
        if single:
            def write(tile: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                """Sorted places i0 .. i0 + lanes - 1, transposed back to one vector per row
                and written into the rows the group has."""
                i0 = arith.muli(tile, index_const(lanes))
                values = []
                for k in range(lanes):
                    key = vector.load(vtype, buffer, [arith.addi(i0, index_const(k)), index_const(0)])
                    if width > key_bits(key_type):
                        key = arith.trunci(key_vtype, key)
                    values.append(_as_int(decode(key)))
                out = carried[0]
                for r, row in enumerate(transposed(values, pairs_first=False)):
                    # Lanes past the group's rows sorted copies of its last row (`fill`):
                    # written there again, the same values, with no branch.
                    to = arith.minsi(index_const(r), last_live)
                    out = vector.transfer_write(out.type, _from_int(row, src_type), out,
                                                at[:-1] + [to, i0], row_map, [False])
                return [out]

            out = for_range(0, tiles, outs, write)[0]
            if nan_last:
                # One loop over the lanes (not one per lane: bufferization's analysis of
                # many chained loops writing one tensor took minutes).
                counts_type = ir.RankedTensorType.get([lanes], ir.IntegerType.get_signless(32))
                empty = tensor.EmptyOp([lanes], counts_type.element_type).result
                counts = vector.transfer_write(counts_type, nans, empty, [index_const(0)],
                                               ir.AffineMap.get_identity(1), [True])

                def fix(lane: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                    nans = arith.index_cast(ir.IndexType.get(), tensor.extract(counts, [lane]))
                    return [place_nans(inputs[0], carried[0], nans, key_type, order.ascending,
                                       lead[:-1] + [arith.addi(first, lane)], at[:-1] + [lane])]

                out = for_range(0, live, [out], fix)[0]
            return [out]
        # Several operands: each gathered by the positions, row by row.
        def gather_row(lane: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
            at_row = lead[:-1] + [arith.addi(first, lane)]
            out_row = at[:-1] + [lane]

            def element(i: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
                moved = memref.load(buffer, [i, lane])
                position = arith.index_castui(ir.IndexType.get(), arith.trunci(
                    ir.IntegerType.get_signless(32), moved))
                return [tensor.insert(tensor.extract(x, at_row + [position]), o, out_row + [i])
                        for x, o in zip(inputs, outs)]

            return for_range(0, n, outs, element)

        return for_range(0, live, outs, gather_row)

    return _each_group(count, groups, rows, lanes, results, group)


def _as_int(v: ir.Value) -> ir.Value:
    """A vector of floats as the integers of its bits (shuffles move bits alike)."""
    t = ir.VectorType(v.type)
    if isinstance(t.element_type, ir.IntegerType):
        return v
    width = ir.FloatType(t.element_type).width
    return arith.bitcast(ir.VectorType.get(t.shape, ir.IntegerType.get_signless(width)), v)


def _from_int(v: ir.Value, to: ir.VectorType) -> ir.Value:
    return v if v.type == to else arith.bitcast(to, v)


def _zero_of(t: ir.Type) -> ir.Value:
    if isinstance(t, ir.FloatType):
        return arith.constant(t, 0.0)
    return arith.constant(t, 0)


def _each_group(count: int, groups: int, rows: int, lanes: int, results: list[ir.Value],
                group: Callable[[list[ir.Value], ir.Value, list[ir.Value]], list[ir.Value]]
                ) -> list[ir.Value]:
    """One scf.forall iteration per group (of `count`, `groups` along the rows), each
    writing its slice of the results: its rows (`lanes`, fewer in the last group) at its
    indices of the leading dimensions, `group(indices of its first row, rows, slices)`.
    The pipeline runs the iterations on the cores."""
    loop = scf.ForallOp([0], [count], [1], results)
    with ir.InsertionPoint(loop.body):
        flat = loop.induction_variables[0]
        rank = ir.RankedTensorType(results[0].type).rank
        lead_dims = list(ir.RankedTensorType(results[0].type).shape[:-2])
        ivs = []
        stride = count
        for d in lead_dims + [groups]:  # row-major delinearisation
            stride //= d
            ivs.append(arith.remui(arith.divui(flat, index_const(stride)), index_const(d)))
        first = arith.muli(ivs[-1], index_const(lanes))
        live = arith.minsi(index_const(lanes), arith.subi(index_const(rows), first))
        n = ir.RankedTensorType(results[0].type).shape[-1]
        offsets = ivs[:-1] + [first]
        static_offsets = [DYNAMIC] * (rank - 1) + [0]
        sizes = [1] * (rank - 2) + [DYNAMIC, n]
        dynamic = ir.ShapedType.get_dynamic_size()
        slice_args = (offsets, [live], [], static_offsets, sizes, [1] * rank)
        slices = [tensor.extract_slice(
            ir.RankedTensorType.get([1] * (rank - 2) + [dynamic, n],
                                    ir.RankedTensorType(shared.type).element_type),
            shared, *slice_args) for shared in loop.inner_iter_args]
        written = group(offsets, live, slices)
        with ir.InsertionPoint(loop.terminator().block):
            for w, shared in zip(written, loop.inner_iter_args):
                tensor.parallel_insert_slice(w, shared, *slice_args)
    return list(loop.results)
