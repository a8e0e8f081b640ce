"""One long row radix-sorted by all the cores: a parallel LSD radix sort.

For a sort of one row (any other dimensions are 1) of at least PARALLEL_MIN
elements in a recognised key order (`sort_kernels.key_order`), one operand or
keys of up to 32 bits: the row is
split into chunks of S elements (S a power of two, the last chunk shorter), at
most CHUNKS of them. The chunking depends on the size alone, never on the
host's cores, and the result is the stable sort's whatever the chunking (a
stable sort has one answer), bit for bit.

The data that moves is the keys (one operand: `sort_key` of each element) or
i64 (key << 32 | position) pairs (several operands), as in
`sort_kernels.radix_rows`. Every digit pass is one scf.forall over the chunks:
chunk c scatters its elements, in index order, from where its buckets start in
the pass's output. Where the bucket b of chunk c starts is the count of
elements of smaller digits plus those of digit b in chunks before c, so the
pass is stable and each chunk writes positions no other chunk writes. The
counts per (chunk, digit) of the next pass are counted during this one, by the
position each element is written to: chunk c counts, in its own table, the
elements landing in each destination chunk (position >> log2 S), so no pass
reads the data only to count. The first pass's counts come from a forall that
only reads the input; the first pass then computes the keys again from the input
(cheaper than writing them and reading them back). A sequential loop over the
C x C x 2**bits counts between the passes turns them into starts.

The scatters work on memrefs (writes to data-dependent positions from
parallel iterations are no tensor op); a last forall over the chunks, on
tensors, decodes the keys into the values (one operand) or gathers the operands
by the positions, into the results' own buffers. For the default float order
(every NaN one key) the NaNs are then copied back in order from the row, as in
the sequential radix sort. Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, memref, scf, tensor

from ...dialect.element_types import PrimitiveType
from .indexing import element_type, index_const
from .sort_kernels import KeyOrder, decoder, digit_bits, is_nan, key_bits, place_nans, sort_key

# Below this the sequential radix sort's single loops beat the forall phases' overhead.
PARALLEL_MIN = 1 << 17
# At most this many chunks (and so parallel iterations per pass): enough for a few cores,
# few enough that each chunk's C x 2**bits counting table stays in L1 (32 KB at 4).
CHUNKS = 4

_DYNAMIC = -(2 ** 63)


def parallel_applies(dims: Sequence[int], axis: int, types: Sequence[PrimitiveType],
                     order: KeyOrder) -> bool:
    """Whether `parallel_radix` sorts this: one long row, one operand or short keys."""
    n = dims[axis]
    return (math.prod(dims) == n and PARALLEL_MIN <= n < 2 ** 31
            and (len(types) == 1 or key_bits(types[order.operand]) <= 32))


def chunk_shift(n: int) -> int:
    """log2 of the chunk size: the smallest power of two splitting `n` into <= CHUNKS."""
    per_chunk = -(-n // CHUNKS)
    return max(per_chunk - 1, 1).bit_length()


def _i32(value: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), value)


def _for(lo: ir.Value | int, hi: ir.Value | int, body: Callable[[ir.Value], None]) -> None:
    lo = index_const(lo) if isinstance(lo, int) else lo
    hi = index_const(hi) if isinstance(hi, int) else hi
    loop = scf.ForOp(lo, hi, index_const(1))
    with ir.InsertionPoint(loop.body):
        body(loop.induction_variable)
        scf.YieldOp([])


def _forall(count: int, body: Callable[[ir.Value], None]) -> None:
    """One parallel iteration per chunk; the iterations write disjoint memref places."""
    loop = scf.ForallOp([0], [count], [1])
    with ir.InsertionPoint(loop.body):
        body(loop.induction_variables[0])
    loop.terminator()


def _bump(table: ir.Value, at: list[ir.Value]) -> None:
    memref.store(arith.addi(memref.load(table, at), _i32(1)), table, at)


def parallel_radix(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], n: int,
                   order: KeyOrder) -> list[ir.Value]:
    """`inputs` (one row of n elements, any rank: the other dimensions are 1) sorted by
    `order`, stably."""
    dims = list(ir.RankedTensorType(inputs[0].type).shape)
    if len(dims) == 1:
        return _sort_row(inputs, types, n, order)
    # Viewed as 1-D and back (views: no copy).
    flat = [tensor.collapse_shape(ir.RankedTensorType.get([n], element_type(x)), x,
                                  [list(range(len(dims)))]) for x in inputs]
    return [tensor.expand_shape(x.type, r, [list(range(len(dims)))], [], dims)
            for x, r in zip(inputs, _sort_row(flat, types, n, order))]


def _sort_row(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], n: int,
              order: KeyOrder) -> list[ir.Value]:
    key_type = types[order.operand]
    width = key_bits(key_type)
    kt = ir.IntegerType.get_signless(width)
    i32 = ir.IntegerType.get_signless(32)
    index = ir.IndexType.get()
    bits = min(digit_bits(n), width)
    passes = -(-width // bits)
    buckets = 1 << bits
    key_only = len(inputs) == 1
    nan_last = key_only and order.kind == "float_nan_last"
    moved_type = kt if key_only else ir.IntegerType.get_signless(64)
    shift = chunk_shift(n)
    size = 1 << shift
    chunks = -(-n // size)

    def moved_digit(moved: ir.Value, p: int) -> ir.Value:
        low = p * bits + (0 if key_only else 32)
        d = arith.andi(arith.shrui(moved, arith.constant(moved_type, low)),
                       arith.constant(moved_type, buckets - 1))
        return arith.index_castui(index, d)

    def bounds(c: ir.Value) -> tuple[ir.Value, ir.Value]:
        lo = arith.shli(c, index_const(shift))
        return lo, arith.minui(arith.addi(lo, index_const(size)), index_const(n))

    def alloc(shape: list[int], t: ir.Type) -> ir.Value:
        return memref.alloc(ir.MemRefType.get(shape, t), [], [])

    # counts[t, c, b]: elements of digit b in chunk c of the next pass's input, as counted
    # by chunk t of this pass; starts[c, b]: where chunk c's bucket b goes next.
    counts = alloc([chunks, chunks, buckets], i32)
    starts = alloc([chunks, buckets], i32)
    data = [alloc([n], moved_type) for _ in range(min(passes, 2))]
    nans = alloc([chunks], index)

    # Zero counts to start; the loop turning counts into starts zeroes each count it
    # reads, ready for the next pass. (A clearing loop inside the foralls' bodies cost
    # LLVM ~60 ms of compile time per pass.)
    _for(0, chunks, lambda t: _for(0, chunks, lambda c: _for(
        0, buckets, lambda b: memref.store(_i32(0), counts, [t, c, b]))))

    def moved_at(i: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The input element at `i` and what moves for it."""
        x = tensor.extract(inputs[order.operand], [i])
        key = sort_key(x, key_type, order)
        if key_only:
            return x, key
        high = arith.shli(arith.extui(moved_type, key), arith.constant(moved_type, 32))
        return x, arith.ori(high, arith.index_cast(moved_type, i))  # the key above the position

    def count(c: ir.Value) -> None:
        lo, hi = bounds(c)
        loop = scf.ForOp(lo, hi, index_const(1), [index_const(0)])
        with ir.InsertionPoint(loop.body):
            x, moved = moved_at(loop.induction_variable)
            _bump(counts, [c, c, moved_digit(moved, 0)])
            found = loop.inner_iter_args[0]
            if nan_last:
                found = arith.addi(found, arith.select(is_nan(x, key_type), index_const(1),
                                                       index_const(0)))
            scf.YieldOp([found])
        memref.store(loop.results[0], nans, [c])

    _forall(chunks, count)

    for p in range(passes):
        # Starts: buckets in order, chunks in order within a bucket (stability).
        loop = scf.ForOp(index_const(0), index_const(buckets), index_const(1), [_i32(0)])
        with ir.InsertionPoint(loop.body):
            b = loop.induction_variable
            total = loop.inner_iter_args[0]
            for c in range(chunks):
                memref.store(total, starts, [index_const(c), b])
                for t in range(chunks):
                    at = [index_const(t), index_const(c), b]
                    total = arith.addi(total, memref.load(counts, at))
                    memref.store(_i32(0), counts, at)
            scf.YieldOp([total])
        source, target = data[(p + 1) % 2] if p else None, data[p % 2]
        last = p == passes - 1

        def scatter(c: ir.Value, p: int = p, source: ir.Value | None = source,
                    target: ir.Value = target, last: bool = last) -> None:
            lo, hi = bounds(c)

            def move(i: ir.Value) -> None:
                moved = moved_at(i)[1] if p == 0 else memref.load(source, [i])
                at = [c, moved_digit(moved, p)]
                pos = memref.load(starts, at)
                memref.store(arith.addi(pos, _i32(1)), starts, at)
                where = arith.index_castui(index, pos)
                memref.store(moved, target, [where])
                if not last:
                    lands = arith.shrui(where, index_const(shift))
                    _bump(counts, [c, lands, moved_digit(moved, p + 1)])

            _for(lo, hi, move)

        _forall(chunks, scatter)

    sorted_ = data[(passes - 1) % 2]
    results = _unpack(inputs, types, order, sorted_, n, shift, chunks, key_only)
    if nan_last:
        found = index_const(0)
        for c in range(chunks):
            found = arith.addi(found, memref.load(nans, [index_const(c)]))
        results = [place_nans(inputs[0], results[0], found, key_type, order.ascending)]
    return results


def _unpack(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], order: KeyOrder,
            sorted_: ir.Value, n: int, shift: int, chunks: int, key_only: bool
            ) -> list[ir.Value]:
    """The results from the sorted moved data, one forall iteration per chunk writing its
    slice of every result: the decoded keys, or each operand gathered by the positions."""
    i32 = ir.IntegerType.get_signless(32)
    index = ir.IndexType.get()
    types_ = [element_type(x) for x in inputs]
    shared = [tensor.EmptyOp([n], t).result for t in types_]
    decode = decoder(types[order.operand], types_[0], order) if key_only else None
    size = 1 << shift
    loop = scf.ForallOp([0], [chunks], [1], shared)
    with ir.InsertionPoint(loop.body):
        c = loop.induction_variables[0]
        lo = arith.shli(c, index_const(shift))
        length = arith.subi(arith.minui(arith.addi(lo, index_const(size)), index_const(n)), lo)
        slice_args = ([lo], [length], [], [_DYNAMIC], [_DYNAMIC], [1])
        slices = [tensor.extract_slice(ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()],
                                                               t), s, *slice_args)
                  for t, s in zip(types_, loop.inner_iter_args)]
        body = scf.ForOp(index_const(0), length, index_const(1), slices)
        with ir.InsertionPoint(body.body):
            j = body.induction_variable
            moved = memref.load(sorted_, [arith.addi(lo, j)])
            outs = list(body.inner_iter_args)
            if decode is not None:
                written = [tensor.insert(decode(moved), outs[0], [j])]
            else:
                at = arith.index_castui(index, arith.trunci(i32, moved))
                written = [tensor.insert(tensor.extract(x, [at]), o, [j])
                           for x, o in zip(inputs, outs)]
            scf.YieldOp(written)
        with ir.InsertionPoint(loop.terminator().block):
            for r, s in zip(body.results, loop.inner_iter_args):
                tensor.parallel_insert_slice(r, s, *slice_args)
    return list(loop.results)
