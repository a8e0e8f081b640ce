"""One long row radix-sorted by all the cores: one parallel MSD pass, then every
bucket sorted in cache.

For a sort of one row (any other dimensions are 1) of at least PARALLEL_MIN
elements in a recognised key order (`sort_kernels.key_order`), one operand or
keys of up to 32 bits. What moves is the keys (one operand: `sort_key` of each
element) or i64 (key << 32 | position) pairs (several operands), as in
`sort_kernels.radix_rows`.

- The row is split into chunks of S elements (S a power of two, the last chunk
  shorter), at most CHUNKS of them: by the size alone, never by the host's
  cores; each chunk into STREAMS streams of S / STREAMS, stepped through in
  turn. One forall over the chunks counts the top digit (TOP_DIGIT key bits)
  per stream; a sequential loop turns the counts into starts, buckets in order
  and streams in index order within a bucket; a second forall scatters each
  stream's elements, in index order, to its starts. The scatter is stable and
  each chunk writes positions no other chunk writes.
- Each bucket is then sorted on its own by an LSD radix sort of the remaining
  key bits (LOW_DIGIT-bit digits; WIDE_DIGIT bits, fewer passes, for buckets of
  at least WIDE_MIN elements), its passes in cache (between a row-sized buffer
  and a per-group SCRATCH that stays in cache), then the results (decoded keys,
  or the operands gathered by the positions) written in order. Buckets are
  split into GROUPS groups of about n / GROUPS elements each (by the bucket
  starts: a data-dependent split of work), one forall iteration on tensors per
  group, writing the group's contiguous slice of every result.
- Integer keys in a narrow range (1M s32 in [0, 2^20) all have one top digit) fill a
  few neighbouring buckets of the first count (NARROW_SPAN). Then two
  more foralls find the keys' exact minimum and maximum and count again by a digit of
  the range (`_range_digit`: (key >> s) - (min >> s), s = 0 when the range has at most
  2^TOP_DIGIT keys, every bucket then one key and left as it is), and the scatter is by
  that digit; otherwise those foralls run no iteration. Measured (1M, 2 cores, numpy's
  AVX-512 quicksort beside): s32 in [-100, 100] 4.9 -> 1.7 ms (numpy 1.4), [0, 1000)
  5.1-5.3 -> 3.7 (1.8), [0, 2^20) 5.1 -> 4.5 (3.5), u32 in [0, 2^16) 5.0 -> 4.1 (3.5).
- For the default float order (every NaN one key) the NaNs are then copied back
  in order from the row, as in the sequential radix sort.

Against an LSD sort of the whole row the data crosses memory about half as
often (one wide scatter instead of three for 32-bit keys, no separate decoding
pass). Measured on 2 cores, 2**20 f32 normal: 2.2 ms (numpy 2.6 ms, same run;
the whole-row LSD version 2.7 ms against numpy 2.7, the sequential radix sort 3.9).
When the call comes after a pause (caches cold) every line the scatters first
write is a miss from memory unless prefetched (PREFETCH_BYTES, SCRATCH).

A stable sort has one answer: the results are the sequential sort's bit for
bit, whatever the chunks, streams, groups and cores. The scatters work on
memrefs (writes to data-dependent positions from parallel iterations are no
tensor op). Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, scf, tensor
from mlir.dialects import math as mlir_math

from ...dialect.element_types import PrimitiveType
from .indexing import DYNAMIC, element_type, index_const
from .sort_kernels import (
    KeyOrder,
    decoder,
    if_values,
    is_nan,
    key_bits,
    place_nans,
    sort_key,
)

# Below this the sequential radix sort's single loops beat the forall phases' overhead.
PARALLEL_MIN = 1 << 17
# At most this many chunks (parallel iterations of the counting and the scatter).
CHUNKS = 4
# Bits of the top digit (by which the row is scattered into buckets) and of the lower
# ones (each bucket's LSD passes, 2**LOW_DIGIT-entry tables in L1). An f32's top 11 bits
# are its sign, exponent and 2 mantissa bits: even skewed data (uniform in [0, 1) puts
# half in one exponent) gives buckets that fit in L2. Measured against 8 and 8 bits:
# faster on normal and uniform [0, 1) f32, ~0.9x on uniform u32.
TOP_DIGIT = 11
LOW_DIGIT = 7
# Buckets of at least WIDE_MIN elements take WIDE_DIGIT-bit lower digits: 2 passes
# instead of 3 for an f32's 21 bits, their 2048-entry tables worth it on large buckets.
WIDE_DIGIT = 11
WIDE_MIN = 1 << 13
# Interleaved streams per chunk in the counting and the scatter (see `streams`).
STREAMS = 2
# Groups of buckets, the parallel iterations of the bucket sorts: several per core, so
# that uneven groups (one bucket may hold most of the row) still spread.
GROUPS = 16
# The scatter prefetches (for writing) each bucket's position this many bytes ahead of
# the one it writes: the line is in cache when the bucket gets there. Without it every
# new line of the 2048 write streams is a miss from memory when the caches are cold (the
# call after a pause): 2**20 f32, 2 cores, 50 ms pauses: 7.0 -> 5.8 ms with the
# prefetches below, the staging in SCRATCH and the final copy together; 512 and 1024
# bytes measured between.
PREFETCH_BYTES = 2048
# When every key's top digit falls within this many neighbouring buckets, the row is
# counted again by a top digit of the keys' range, offset by their minimum (`_sort_row`):
# 1M s32 in [0, 2^20) fell into one of the 2048 buckets, and the bucket's passes then ran
# over all of it.
NARROW_SPAN = 4
# Buckets of at most this many elements are sorted between their passes in their
# group's part of a GROUPS * SCRATCH buffer, which stays in cache from bucket to bucket,
# instead of in their own positions of a second row-sized buffer (cold lines on every
# call). Larger buckets (skewed data) use the row-sized buffer.
SCRATCH = 1 << 16


Digit = Callable[[ir.Value, int], ir.Value]  # (moved value, digit number) -> index
Digit1 = Callable[[ir.Value], ir.Value]  # moved value -> its top digit, an index


@dataclass(frozen=True)
class _LowSort:
    """One way to sort a bucket by its lower digits: `passes` digits (`digit`), with
    per-group tables counts[group, pass, digit] and starts[group, digit]."""

    passes: int
    counts: ir.Value
    starts: ir.Value
    digit: Digit

# (moved value, result slices, position in them) -> the slices with its result written
Write = Callable[[ir.Value, list[ir.Value], ir.Value], list[ir.Value]]


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


def _loop(lo: ir.Value, hi: ir.Value, carried: Sequence[ir.Value] = ()) -> scf.ForOp:
    """scf.for lo..hi step 1 carrying `carried`, which LLVM is not to unroll: unrolled,
    the ~30 scalar loops of a 1M sort's kernel cost ~50 ms of JIT time (LLVM's time grew
    faster than the code: no single group of loops made the difference) for 1-2% of
    the run time (3.04/2.98 -> 3.05/3.03 ms)."""
    loop = scf.ForOp(lo, hi, index_const(1), list(carried))
    loop.operation.attributes["loop_annotation"] = ir.Attribute.parse(_NO_UNROLL)
    return loop


def _i32(value: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), value)


_NO_UNROLL = "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>"
_SCALAR_LOOP = ("#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = true>, "
                "unroll = #llvm.loop_unroll<disable = true>>")


def _for(lo: ir.Value | int, hi: ir.Value | int, body: Callable[[ir.Value], None]) -> scf.ForOp:
    lo = index_const(lo) if isinstance(lo, int) else lo
    hi = index_const(hi) if isinstance(hi, int) else hi
    loop = _loop(lo, hi)
    with ir.InsertionPoint(loop.body):
        body(loop.induction_variable)
        scf.YieldOp([])
    return loop


def _forall(count: int | ir.Value, body: Callable[[ir.Value], None]) -> None:
    """One parallel iteration per chunk; the iterations write disjoint memref places."""
    loop = scf.ForallOp([0], [count], [1])
    with ir.InsertionPoint(loop.body):
        body(loop.induction_variables[0])
    loop.terminator()


def _prefetch_ahead(buffer: ir.Value, at: ir.Value, n: int) -> None:
    """Prefetch for writing the element PREFETCH_BYTES after `at` in `buffer` (n
    elements; clamped to the last one)."""
    ahead = PREFETCH_BYTES // (ir.MemRefType(buffer.type).element_type.width // 8)
    last = index_const(n - 1)
    memref.prefetch(buffer, [arith.minui(arith.addi(at, index_const(ahead)), last)],
                    True, 3, True)


def _bump(table: ir.Value, at: list[ir.Value]) -> None:
    memref.store(arith.addi(memref.load(table, at), _i32(1)), table, at)


def _few_top_digits(counts: ir.Value, streams: int, buckets: int) -> ir.Value:
    """Whether the row's top digits (counted per stream) all fall within NARROW_SPAN
    neighbouring buckets."""
    def step(b: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        used = arith.constant(ir.IntegerType.get_signless(1), 0)
        for v in range(streams):
            some = arith.cmpi(arith.CmpIPredicate.ne, memref.load(counts, [index_const(v), b]), _i32(0))
            used = arith.ori(used, some)
        first = arith.select(used, arith.minui(carried[0], b), carried[0])
        last = arith.select(used, arith.maxui(carried[1], b), carried[1])
        return [first, last]

    first, last = _range(index_const(0), index_const(buckets), [index_const(buckets), index_const(0)],
                         step)
    return arith.cmpi(arith.CmpIPredicate.ult, arith.subi(last, first), index_const(NARROW_SPAN))


def _range_digit(lows: ir.Value, highs: ir.Value, chunks: int, width: int, top_bits: int,
                 base: int, moved_type: ir.Type) -> tuple[Digit1, ir.Value]:
    """(the top digit of the keys' range, whether it is the whole key) from the chunks'
    smallest and largest moved values: the keys in [lo, hi], span the bits of hi - lo,
    the digit is (key >> s) - (lo >> s) for the smallest s keeping it under 2^top_bits
    (s = 0: each bucket holds one key). Every bucket's keys share their bits from s up,
    which the buckets' passes over the lower digits leave as they are."""
    lo = memref.load(lows, [index_const(0)])
    hi = memref.load(highs, [index_const(0)])
    for c in range(1, chunks):
        lo = arith.minui(lo, memref.load(lows, [index_const(c)]))
        hi = arith.maxui(hi, memref.load(highs, [index_const(c)]))
    const = lambda v: arith.constant(moved_type, v)  # noqa: E731
    lo, hi = arith.shrui(lo, const(base)), arith.shrui(hi, const(base))  # the keys
    span = arith.subi(const(ir.IntegerType(moved_type).width), mlir_math.ctlz(arith.subi(hi, lo)))
    s0 = arith.maxsi(arith.subi(span, const(top_bits)), const(0))
    over = arith.cmpi(arith.CmpIPredicate.uge, arith.subi(arith.shrui(hi, s0), arith.shrui(lo, s0)),
                      const(1 << top_bits))
    shift = arith.minui(arith.addi(s0, arith.select(over, const(1), const(0))), const(width - top_bits))
    offset = arith.shrui(lo, shift)
    moved_shift = arith.addi(shift, const(base))
    mask = const((1 << top_bits) - 1)

    def digit(moved: ir.Value) -> ir.Value:
        d = arith.andi(arith.subi(arith.shrui(moved, moved_shift), offset), mask)
        return arith.index_castui(ir.IndexType.get(), d)

    return digit, arith.cmpi(arith.CmpIPredicate.eq, shift, const(0))


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
    top_bits = min(TOP_DIGIT, width)
    buckets = 1 << top_bits
    key_only = len(inputs) == 1
    nan_last = key_only and order.kind == "float_nan_last"
    moved_type = kt if key_only else ir.IntegerType.get_signless(64)
    base = 0 if key_only else 32
    shift = chunk_shift(n)
    size = 1 << shift
    chunks = -(-n // size)

    def bits_at(moved: ir.Value, offset: int, count: int) -> ir.Value:
        d = arith.andi(arith.shrui(moved, arith.constant(moved_type, base + offset)),
                       arith.constant(moved_type, (1 << count) - 1))
        return arith.index_castui(index, d)

    def fixed_top_digit(moved: ir.Value) -> ir.Value:
        return bits_at(moved, width - top_bits, top_bits)

    def alloc(shape: list[int], t: ir.Type) -> ir.Value:
        return memref.alloc(ir.MemRefType.get(shape, t), [], [])

    # Each chunk is STREAMS interleaved streams of its own counts and starts: the
    # counting and the scatter step through them in turn, so that an element's
    # read-increment-write of its bucket's count does not wait for the previous
    # element's when both fall in one bucket (skewed data).
    streams = chunks * STREAMS
    sub = size // STREAMS
    counts = alloc([streams, buckets], i32)
    starts = alloc([streams, buckets], i32)
    bucket_start = alloc([buckets + 1], index)
    rest = width - top_bits

    def low_sort(bits: int) -> _LowSort:
        passes = -(-rest // bits)  # the last digit may reach into the top one
        return _LowSort(passes, alloc([GROUPS, max(passes, 1), 1 << bits], i32),
                        alloc([GROUPS, 1 << bits], index),
                        lambda moved, p: bits_at(moved, p * bits, bits))

    narrow = low_sort(LOW_DIGIT)
    wide = low_sort(WIDE_DIGIT) if -(-rest // WIDE_DIGIT) < narrow.passes else None
    # The row scattered by its top digit; if lower digits are left, the buckets' second
    # buffer for their passes: row-sized, and the groups' scratch (`_spare`).
    data = [alloc([n], moved_type)]
    if narrow.passes:
        data += [alloc([n], moved_type), alloc([GROUPS * SCRATCH], moved_type)]
    nans = alloc([chunks], index)

    def moved_at(i: ir.Value) -> tuple[ir.Value, ir.Value]:
        x = tensor.extract(inputs[order.operand], [i])
        key = sort_key(x, key_type, order)
        if key_only:
            return x, key
        high = arith.shli(arith.extui(moved_type, key), arith.constant(moved_type, 32))
        return x, arith.ori(high, arith.index_cast(moved_type, i))

    def bounds(c: ir.Value) -> tuple[ir.Value, ir.Value]:
        lo = arith.shli(c, index_const(shift))
        return lo, arith.minui(arith.addi(lo, index_const(size)), index_const(n))

    def interleaved(c: ir.Value, carried: list[ir.Value],
                    step: Callable[[ir.Value, ir.Value, list[ir.Value]], list[ir.Value]]
                    ) -> list[ir.Value]:
        """step(position, stream, carried) on chunk c's positions, one of each stream in
        turn (each stream in index order); positions past the row skipped."""
        lo, hi = bounds(c)

        def at_j(j: ir.Value, values: list[ir.Value]) -> list[ir.Value]:
            for k in range(STREAMS):
                i = arith.addi(lo, arith.addi(j, index_const(k * sub)))
                stream = arith.addi(arith.muli(c, index_const(STREAMS)), index_const(k))
                inside = arith.cmpi(arith.CmpIPredicate.ult, i, hi)
                values = if_values(inside, lambda i=i, stream=stream, values=values: step(
                    i, stream, values), lambda values=values: list(values),
                    [v.type for v in values])
            return values

        return _range(index_const(0), index_const(sub), carried, at_j)

    def zero_counts(c: ir.Value) -> None:
        for k in range(STREAMS):
            stream = arith.addi(arith.muli(c, index_const(STREAMS)), index_const(k))
            _for(0, buckets, lambda b, stream=stream: memref.store(_i32(0), counts, [stream, b]))

    def count(c: ir.Value) -> None:
        zero_counts(c)

        def step(i: ir.Value, stream: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            x, moved = moved_at(i)
            _bump(counts, [stream, fixed_top_digit(moved)])
            found = carried[0]
            if nan_last:
                found = arith.addi(found, arith.select(is_nan(x, key_type), index_const(1),
                                                       index_const(0)))
            return [found]

        memref.store(interleaved(c, [index_const(0)], step)[0], nans, [c])

    _forall(chunks, count)

    def scatter_by(top_digit: Digit1) -> Callable[[ir.Value], None]:
        def scatter(c: ir.Value) -> None:
            def step(i: ir.Value, stream: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                moved = moved_at(i)[1]
                at = [stream, top_digit(moved)]
                pos = memref.load(starts, at)
                memref.store(arith.addi(pos, _i32(1)), starts, at)
                where = arith.index_castui(index, pos)
                _prefetch_ahead(data[0], where, n)
                memref.store(moved, data[0], [where])
                return carried

            interleaved(c, [], step)
        return scatter

    whole_key = narrowed = None
    if rest > 0 and order.kind in ("signed", "unsigned"):
        # Integer keys in a narrow range fill a few neighbouring top digits: the row is
        # then counted again by a digit of the range's own top bits (`_range_digit`),
        # from the keys' exact minimum and maximum. Not for floats: their top digit is
        # sign, exponent and 2 mantissa bits, so only floats of one binade (in [1, 2))
        # are that narrow, and the extra loops cost a 1M f32 sort ~50 ms of its compile.
        narrowed = _few_top_digits(counts, streams, buckets)
        lows, highs = alloc([chunks], moved_type), alloc([chunks], moved_type)
        for c in range(chunks):  # defined when the loop below runs no iteration
            memref.store(arith.constant(moved_type, 0), lows, [index_const(c)])
            memref.store(arith.constant(moved_type, 0), highs, [index_const(c)])

        def extremes(c: ir.Value) -> None:
            lo, hi = bounds(c)
            found = _range(lo, hi, [arith.constant(moved_type, -1), arith.constant(moved_type, 0)],
                           lambda i, m: [arith.minui(m[0], moved_at(i)[1]),
                                         arith.maxui(m[1], moved_at(i)[1])])
            memref.store(found[0], lows, [c])
            memref.store(found[1], highs, [c])

        only_if_narrowed = arith.select(narrowed, index_const(chunks), index_const(0))
        _forall(only_if_narrowed, extremes)
        range_digit, whole_key = _range_digit(lows, highs, chunks, width, top_bits, base, moved_type)
        whole_key = arith.andi(narrowed, whole_key)

        def recount(c: ir.Value) -> None:
            zero_counts(c)

            def step(i: ir.Value, stream: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                _bump(counts, [stream, range_digit(moved_at(i)[1])])
                return carried

            interleaved(c, [], step)

        _forall(only_if_narrowed, recount)

    # Starts: buckets in order, chunks in order within a bucket (stability).
    loop = _loop(index_const(0), index_const(buckets), [_i32(0)])
    with ir.InsertionPoint(loop.body):
        b = loop.induction_variable
        total = loop.inner_iter_args[0]
        memref.store(arith.index_castui(index, total), bucket_start, [b])
        for v in range(streams):  # streams in index order
            memref.store(total, starts, [index_const(v), b])
            total = arith.addi(total, memref.load(counts, [index_const(v), b]))
        scf.YieldOp([total])
    memref.store(index_const(n), bucket_start, [index_const(buckets)])

    if narrowed is None:
        _forall(chunks, scatter_by(fixed_top_digit))
    else:
        # Two scatters, one of no iterations: the constant shift of the usual one is the
        # faster loop (one scatter by a variable shift and offset: a 1M f32 sort ran 5%
        # slower; the second scatter costs ~30 ms of its compile, 200 -> 230 ms).
        _forall(arith.select(narrowed, index_const(0), index_const(chunks)), scatter_by(fixed_top_digit))
        _forall(only_if_narrowed, scatter_by(range_digit))

    results = _buckets(inputs, types, order, data, bucket_start, n, narrow, wide, whole_key)
    if nan_last:
        found = index_const(0)
        for c in range(chunks):
            found = arith.addi(found, memref.load(nans, [index_const(c)]))
        results = [place_nans(inputs[0], results[0], found, key_type, order.ascending)]
    return results


def _buckets(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], order: KeyOrder,
             data: list[ir.Value], bucket_start: ir.Value, n: int, narrow: _LowSort,
             wide: _LowSort | None, whole_key: ir.Value | None) -> list[ir.Value]:
    """The results: each bucket of data[0] sorted by its low digits, one forall iteration
    per group of buckets writing the group's slice of every result; none when `whole_key`
    holds (the top digit was the whole key, as `_range_digit` may make it)."""
    index = ir.IndexType.get()
    i32 = ir.IntegerType.get_signless(32)
    buckets = ir.MemRefType(bucket_start.type).shape[0] - 1
    types_ = [element_type(x) for x in inputs]
    key_only = len(inputs) == 1
    decode = decoder(types[order.operand], types_[0], order) if key_only else None
    dynamic = ir.ShapedType.get_dynamic_size()

    def first_bucket(g: ir.Value) -> ir.Value:
        """The first bucket of group g: buckets starting before g * n / GROUPS come before."""
        limit = arith.muli(g, index_const(n))

        def step(b: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            start = arith.muli(memref.load(bucket_start, [b]), index_const(GROUPS))
            before = arith.cmpi(arith.CmpIPredicate.ult, start, limit)
            return [arith.addi(carried[0], arith.select(before, index_const(1), index_const(0)))]

        loop = _loop(index_const(0), index_const(buckets), [index_const(0)])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(step(loop.induction_variable, list(loop.inner_iter_args)))
        return loop.results[0]

    def write(moved: ir.Value, outs: list[ir.Value], at: ir.Value) -> list[ir.Value]:
        if decode is not None:
            return [tensor.insert(decode(moved), outs[0], [at])]
        position = arith.index_castui(index, arith.trunci(i32, moved))
        return [tensor.insert(tensor.extract(x, [position]), o, [at])
                for x, o in zip(inputs, outs)]

    shared = [tensor.EmptyOp([n], t).result for t in types_]
    group_loop = scf.ForallOp([0], [GROUPS], [1], shared)
    with ir.InsertionPoint(group_loop.body):
        g = group_loop.induction_variables[0]
        first = first_bucket(g)
        last = first_bucket(arith.addi(g, index_const(1)))
        lo = memref.load(bucket_start, [first])
        hi = memref.load(bucket_start, [last])
        slice_args = ([lo], [arith.subi(hi, lo)], [], [DYNAMIC], [DYNAMIC], [1])
        slices = [tensor.extract_slice(ir.RankedTensorType.get([dynamic], t), s, *slice_args)
                  for t, s in zip(types_, group_loop.inner_iter_args)]

        def bucket(b: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
            s = memref.load(bucket_start, [b])
            e = memref.load(bucket_start, [arith.addi(b, index_const(1))])

            def as_is() -> list[ir.Value]:
                return _range(s, e, outs, lambda i, o: write(
                    memref.load(data[0], [i]), o, arith.subi(i, lo)))

            def by_low_digits() -> list[ir.Value]:
                buffers = [data[0], _spare(data[1], data[2], g, s, e, n)]
                if wide is None:
                    return _sort_bucket(s, e, lo, g, outs, buffers, narrow, write)
                large = arith.cmpi(arith.CmpIPredicate.uge, arith.subi(e, s), index_const(WIDE_MIN))
                return if_values(large, lambda: _sort_bucket(s, e, lo, g, outs, buffers, wide, write),
                                 lambda: _sort_bucket(s, e, lo, g, outs, buffers, narrow, write),
                                 [o.type for o in outs])

            if narrow.passes == 0:  # the top digit was the whole key
                return as_is()
            if whole_key is None:
                return by_low_digits()
            return if_values(whole_key, as_is, by_low_digits, [o.type for o in outs])

        def nonempty(b: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
            s = memref.load(bucket_start, [b])
            e = memref.load(bucket_start, [arith.addi(b, index_const(1))])
            some = arith.cmpi(arith.CmpIPredicate.ult, s, e)
            return if_values(some, lambda: bucket(b, outs), lambda: list(outs),
                             [o.type for o in outs])

        sorted_slices = _range(first, last, slices, nonempty)
        with ir.InsertionPoint(group_loop.terminator().block):
            for r, s in zip(sorted_slices, group_loop.inner_iter_args):
                tensor.parallel_insert_slice(r, s, *slice_args)
    return list(group_loop.results)


def _spare(whole: ir.Value, scratch: ir.Value, g: ir.Value, s: ir.Value, e: ir.Value,
           n: int) -> ir.Value:
    """Where bucket [s, e) of group g is sorted between its passes, indexed by row
    position: group g's part of `scratch` (kept in cache from bucket to bucket) when the
    bucket fits in it, else the bucket's own positions of `whole`."""
    t = ir.MemRefType(whole.type).element_type
    view = ir.MemRefType.get([n], t, ir.Attribute.parse("strided<[1], offset: ?>"))
    fits = arith.cmpi(arith.CmpIPredicate.ule, arith.subi(e, s), index_const(SCRATCH))
    choice = scf.IfOp(fits, [view], has_else=True)
    with ir.InsertionPoint(choice.then_block):
        offset = arith.subi(arith.muli(g, index_const(SCRATCH)), s)
        scf.YieldOp([memref.reinterpret_cast(view, scratch, [offset], [], [], [DYNAMIC], [n], [1])])
    with ir.InsertionPoint(choice.else_block):
        scf.YieldOp([memref.cast(view, whole)])
    return choice.results[0]


def _range(lo: ir.Value, hi: ir.Value, carried: list[ir.Value],
           body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """scf.for i in [lo, hi) carrying `carried` (body(i, carried) -> the next values)."""
    loop = _loop(lo, hi, carried)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def _sort_bucket(s: ir.Value, e: ir.Value, group_lo: ir.Value, g: ir.Value,
                 outs: list[ir.Value], data: list[ir.Value], low: _LowSort, write: Write
                 ) -> list[ir.Value]:
    """Positions [s, e) of data[0] sorted by digits 0 .. low_passes - 1 (LSD, in the same
    positions of data[1] and data[0] in turn: data[1] is indexed by row position, see
    `_spare`), then written in order into `outs` (the group's result slices, which start
    at position group_lo)."""
    low_counts, low_starts, low_passes, digit = low.counts, low.starts, low.passes, low.digit
    buckets = ir.MemRefType(low_starts.type).shape[1]
    zero32 = _i32(0)
    _for(0, low_passes, lambda p: _for(0, buckets, lambda b: memref.store(
        zero32, low_counts, [g, p, b])))

    def count(i: ir.Value) -> None:
        moved = memref.load(data[0], [i])
        # The passes write the same positions of data[1] in an order of their own:
        # fetched here, in order, they are in cache by then.
        memref.prefetch(data[1], [i], True, 3, True)
        for p in range(low_passes):
            _bump(low_counts, [g, index_const(p), digit(moved, p)])

    _for(s, e, count)
    first = memref.load(data[0], [s])
    size = arith.index_castui(ir.IntegerType.get_signless(32), arith.subi(e, s))
    for p in range(low_passes):
        source = data[p % 2]
        target = data[(p + 1) % 2]

        def place(i: ir.Value, p: int = p, source: ir.Value = source,
                  target: ir.Value = target) -> None:
            moved = memref.load(source, [i])
            at = [g, digit(moved, p)]
            pos = memref.load(low_starts, at)
            memref.store(arith.addi(pos, index_const(1)), low_starts, at)
            memref.store(moved, target, [pos])

        def scattered(p: int = p, place: Callable[[ir.Value], None] = place) -> list[ir.Value]:
            # Where each digit's elements start, as positions in the row.
            loop = _loop(index_const(0), index_const(buckets), [s])
            with ir.InsertionPoint(loop.body):
                b = loop.induction_variable
                total = loop.inner_iter_args[0]
                memref.store(total, low_starts, [g, b])
                c = memref.load(low_counts, [g, index_const(p), b])
                scf.YieldOp([arith.addi(total, arith.index_castui(ir.IndexType.get(), c))])
            _for(s, e, place)
            return []

        def copied(source: ir.Value = source, target: ir.Value = target) -> list[ir.Value]:
            loop = _for(s, e, lambda i: memref.store(memref.load(source, [i]), target, [i]))
            # A plain loop: LLVM's vectorized copy (with its alias checks) of each of these
            # took ~12 ms of JIT time for a 1M sort, for a pass that is rare and cheap.
            loop.operation.attributes["loop_annotation"] = ir.Attribute.parse(_SCALAR_LOOP)
            return []

        # A digit every element of the bucket shares (keys in a narrow range: small
        # integers, floats of one magnitude) leaves the order as it is: the pass is a
        # plain copy instead of a scatter whose every element waits on the previous one's
        # position (1M s32 in [-100, 100): most passes of its two buckets).
        shared = arith.cmpi(arith.CmpIPredicate.eq,
                            memref.load(low_counts, [g, index_const(p), digit(first, p)]), size)
        if_values(shared, copied, scattered, [])
    # The results written in order (the memory's prefetchers follow; the last pass
    # writing them in its own order missed on every new line of a cold result).
    final = data[low_passes % 2]
    return _range(s, e, outs, lambda i, o: write(memref.load(final, [i]), o,
                                                 arith.subi(i, group_lo)))
