"""Fast sort kernels: a radix sort for recognised key orders, a partial selection for
sorts of which only a prefix is read (top_k), and rows split across the cores.

- `key_order(comparator)` reads the comparator's xhlo ops and recognises the
  orders that depend on one operand's value alone: compare LT/GT of the two
  parameters of operand m, TOTALORDER on floats (optionally after the
  builder's "every NaN is +NaN" select), SIGNED/UNSIGNED on integers and pred.
  Any other comparator (several keys, FLOAT compares, user arithmetic) gets
  None and keeps the general merge sort.
- `radix_rows`: such an order maps each key to an unsigned integer whose order
  is the comparator's (sign flips for floats and signed integers, all NaNs one
  largest key, complemented for descending), then an LSD radix sort (8-bit
  digits; 11-bit on rows of 2**16 or more) moves the keys and every operand; a
  single operand moves its keys alone, the last pass writing the values they
  decode to (NaNs, which share one key, are copied back in order by a last
  loop); several operands with keys of up to 32 bits move one i64 (key,
  position) and a last loop gathers the operands. LSD passes are stable, so
  ties keep their index order as a stable merge sort's would: the results are
  the general path's, bit for bit. One counting loop builds the histograms of
  all digits, then one scatter pass per digit; passes write into two sets of
  buffers in turn and the last one into the results. No vector width or other
  target parameter: the loops are scalar, LLVM vectorizes what it can for the
  target.
- `select_rows`: when every use of the sort reads only positions [0, K) along
  the sorted dimension (top_k is sort + slice) and K is small, each row keeps
  a sorted buffer of its K first elements, filled in index order: an element
  enters only when the comparator puts it strictly before the K-th, after
  every element it does not precede, so the buffer is the stable sort's
  prefix for any comparator. Expected O(n + K^2 log n) comparator calls on
  random rows, O(n K) at worst.

Rows (every index of the other dimensions) are the iterations of one
`scf.forall`, which the pipeline turns into tasks on the thread pool. Imports
`dialect` and the lowering modules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, bufferization, scf, tensor, vector

from ...dialect.element_types import PrimitiveType
from ..patterns.computations import apply_computation, current_library
from ..scalar.arithmetic import int_like, int_splat
from ..scalar.storage import from_storage
from .indexing import DYNAMIC, element_type, index_const

# Above this many kept positions the O(n K) worst case of the selection loses to sorting.
MAX_SELECTED = 32
# Rows up to this long are merge-sorted (lowering.sort): measured faster than the radix
# sort, whose scans of 256-entry histograms cost the same on every row.
SHORT_ROW = 16
# `place_nans` tests a row for NaNs this many bits at a time (one AVX-512 register).
NAN_SCAN_BITS = 512


@dataclass(frozen=True)
class KeyOrder:
    """Operand `operand` sorted by `kind` ("float_total", "float_nan_last", "signed",
    "unsigned"), ascending or not."""

    operand: int
    kind: str
    ascending: bool


# -- recognising the comparator ----------------------------------------------------------------

_HEX = re.compile(r"dense<0x([0-9A-Fa-f]+)>")


def _positive_nan_constant(op: ir.Operation) -> bool:
    t = ir.RankedTensorType(op.results[0].type).element_type
    m = _HEX.search(str(op.attributes["value"]))
    if m is None or not isinstance(t, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)):
        return False
    bits = int(m.group(1), 16)
    width = t.width
    exponent = {16: 5 if isinstance(t, ir.F16Type) else 8, 32: 8, 64: 11}[width]
    mantissa = width - 1 - exponent
    return bits >> (width - 1) == 0 and bits > ((1 << exponent) - 1) << mantissa


def key_order(symbol: str, operand_types: Sequence[PrimitiveType]) -> KeyOrder | None:
    """The order `symbol` (a sort comparator) sorts by, when it is one operand's value in
    one of the orders the radix sort handles; None for any other comparator."""
    f = current_library().functions[symbol]
    block = f.regions[0].blocks[0]
    facts: dict[ir.Value, tuple] = {arg: ("param", i) for i, arg in enumerate(block.arguments)}
    root = None
    for op in block.operations:
        op = op.operation
        name = op.name
        if name == "func.return":
            root = facts.get(op.operands[0])
            break
        if len(op.results) != 1:
            return None
        if name == "xhlo.constant":
            facts[op.results[0]] = ("nan",) if _positive_nan_constant(op) else ("other",)
            continue
        args = [facts.get(v, ("other",)) for v in op.operands]
        if name == "xhlo.compare":
            direction = ir.StringAttr(op.attributes["comparison_direction"]).value
            ctype = ir.StringAttr(op.attributes["compare_type"]).value
            a, b = args
            if (op.operands[0] == op.operands[1] and a[0] == "param" and direction == "NE"
                    and ctype == "FLOAT"):
                facts[op.results[0]] = ("isnan", a[1])
            elif a[0] in ("param", "nan_last") and b[0] == a[0]:
                facts[op.results[0]] = ("compare", a, b, direction, ctype)
            else:
                return None
        elif name == "xhlo.select":
            c, t, e = args
            if c[0] == "isnan" and t[0] == "nan" and e == ("param", c[1]):
                facts[op.results[0]] = ("nan_last", c[1])
            else:
                return None
        else:
            return None
    if root is None or root[0] != "compare":
        return None
    _, a, b, direction, ctype = root
    if direction not in ("LT", "GT") or {a[1], b[1]} != {a[1] - a[1] % 2, a[1] - a[1] % 2 + 1}:
        return None
    operand = a[1] // 2
    t = operand_types[operand]
    if t.is_sub_byte_int or t.is_narrow_float:
        return None  # stored in a byte wider than their bits, in encodings the keys do not know
    ascending = (a[1] % 2 == 0) == (direction == "LT")
    if ctype == "TOTALORDER" and t.is_floating:
        kind = "float_nan_last" if a[0] == "nan_last" else "float_total"
    elif a[0] == "nan_last":
        return None
    elif ctype == "SIGNED" and t.is_integral:
        kind = "signed"
    elif ctype == "UNSIGNED" and (t.is_integral or t.is_pred):
        kind = "unsigned"
    else:
        return None
    return KeyOrder(operand, kind, ascending)


# -- which positions the uses read ---------------------------------------------------------------

def prefix_read(op: ir.Operation, axis: int) -> int | None:
    """K such that every use of `op`'s results reads only positions [0, K) along `axis`
    (slices, seen through casts), or None when some use may read more."""
    limit = 0

    def visit(value: ir.Value) -> bool:
        nonlocal limit
        for use in value.uses:
            user = use.owner
            name = user.name
            if name == "builtin.unrealized_conversion_cast":
                if not all(visit(r) for r in user.results):
                    return False
            elif name == "xhlo.slice":
                limits = ir.DenseI64ArrayAttr(user.attributes["limit_indices"])
                limit = max(limit, limits[axis])
            elif name == "tensor.extract_slice":
                offsets = ir.DenseI64ArrayAttr(user.attributes["static_offsets"])
                sizes = ir.DenseI64ArrayAttr(user.attributes["static_sizes"])
                strides = ir.DenseI64ArrayAttr(user.attributes["static_strides"])
                if len(offsets) <= axis or min(offsets[axis], sizes[axis], strides[axis]) < 0:
                    return False  # dynamic
                if sizes[axis]:
                    limit = max(limit, offsets[axis] + (sizes[axis] - 1) * strides[axis] + 1)
            else:
                return False
        return True

    return limit if all(visit(r) for r in op.results) else None


# -- rows ---------------------------------------------------------------------------------------


RowBody = Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]


def _row_slice_args(ivs: Sequence[ir.Value], rank: int, axis: int, length: int
                    ) -> tuple[list[ir.Value], list[int], list[int], list[int]]:
    """(dynamic offsets, static offsets, sizes, strides) of one row of `length` at `ivs`."""
    static = [DYNAMIC] * rank
    static[axis] = 0
    sizes = [1] * rank
    sizes[axis] = length
    return list(ivs), static, sizes, [1] * rank


def row_slice(x: ir.Value, ivs: Sequence[ir.Value], axis: int) -> ir.Value:
    """The 1-D row of `x` along `axis` at the other dimensions' indices `ivs` (a view)."""
    t = ir.RankedTensorType(x.type)
    if t.rank == 1:
        return x
    n = t.shape[axis]
    dyn, static, sizes, strides = _row_slice_args(ivs, t.rank, axis, n)
    row_type = ir.RankedTensorType.get([n], t.element_type)
    return tensor.extract_slice(row_type, x, dyn, [], [], static, sizes, strides)


def for_each_row(dims: Sequence[int], axis: int, types: Sequence[ir.Type], length: int,
                 body: RowBody) -> list[ir.Value]:
    """Tensors of `dims` (element types `types`) whose rows along `axis` hold, in positions
    [0, length), the 1-D tensors `body(indices of the other dimensions, destinations)`
    returns, computed into `destinations` (those positions of the results, for writes
    in place); the other positions are undefined. One scf.forall iteration per row."""
    outer = [d for i, d in enumerate(dims) if i != axis]
    rank = len(dims)
    rows = math.prod(outer)
    empties = [tensor.EmptyOp(list(dims), t).result for t in types]
    if rank == 1 and length == dims[0]:
        return body([], empties)

    def row_of(x: ir.Value, ivs: list[ir.Value]) -> ir.Value:
        dyn, static, sizes, strides = _row_slice_args(ivs, rank, axis, length)
        row_type = ir.RankedTensorType.get([length], ir.RankedTensorType(x.type).element_type)
        return tensor.extract_slice(row_type, x, dyn, [], [], static, sizes, strides)

    loop = scf.ForallOp([0], [rows], [1], empties)
    with ir.InsertionPoint(loop.body):
        flat = loop.induction_variables[0]
        ivs = []
        stride = rows
        for d in outer:  # row-major delinearisation
            stride //= d
            ivs.append(arith.remui(arith.divui(flat, index_const(stride)), index_const(d)))
        results = body(ivs, [row_of(shared, ivs) for shared in loop.inner_iter_args])
        dyn, static, sizes, strides = _row_slice_args(ivs, rank, axis, length)
        with ir.InsertionPoint(loop.terminator().block):
            for r, shared in zip(results, loop.inner_iter_args):
                tensor.parallel_insert_slice(r, shared, dyn, [], [], static, sizes, strides)
    return list(loop.results)


def for_range(lo: ir.Value | int, hi: ir.Value | int, carried: Sequence[ir.Value],
              body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """scf.for i in [lo, hi) carrying `carried`; `body(i, carried)` gives the next values."""
    lo = index_const(lo) if isinstance(lo, int) else lo
    hi = index_const(hi) if isinstance(hi, int) else hi
    loop = scf.ForOp(lo, hi, index_const(1), list(carried))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def if_values(condition: ir.Value, then: Callable[[], list[ir.Value]],
              otherwise: Callable[[], list[ir.Value]], types: Sequence[ir.Type]) -> list[ir.Value]:
    """scf.if yielding then() or otherwise(), each built inside its region."""
    op = scf.IfOp(condition, list(types), has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(then())
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(otherwise())
    return list(op.results)


def _fresh(n: int, t: ir.Type) -> ir.Value:
    """A new 1-D tensor: unlike tensor.empty, CSE does not merge two of them into one
    (which would make two buffers written in turn one, and bufferization copy)."""
    return bufferization.alloc_tensor(ir.RankedTensorType.get([n], t), [])


# -- radix sort ---------------------------------------------------------------------------------

def _key_bits(t: PrimitiveType) -> int:
    return 8 if t.is_pred else t.bit_width


def sort_key(x: ir.Value, t: PrimitiveType, order: KeyOrder) -> ir.Value:
    """`x` (storage type, or a vector of it) as an unsigned integer key in the order's order."""
    width = _key_bits(t)
    it = int_like(x, width)
    bits = x if x.type == it else arith.bitcast(it, x)
    sign = int_splat(it, -(1 << (width - 1)))
    if order.kind in ("float_total", "float_nan_last"):
        # Negative floats: all bits flipped (larger magnitude, smaller key); positive
        # ones: the sign bit set, above every negative.
        negative = arith.shrsi(bits, int_splat(it, width - 1))
        key = arith.xori(bits, arith.ori(negative, sign))
        if order.kind == "float_nan_last":
            key = arith.select(_is_nan(x, t), int_splat(it, -1), key)
    elif order.kind == "signed":
        key = arith.xori(bits, sign)
    else:
        key = bits
    if not order.ascending:
        key = arith.xori(key, int_splat(it, -1))
    return key


def _bucket_starts(hist: ir.Value, offset: int, buckets: int) -> ir.Value:
    """Where each bucket of a digit starts: the exclusive prefix sum of its histogram
    (`buckets` counts from `offset` in `hist`)."""
    i32 = ir.IntegerType.get_signless(32)

    def step(b: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        total, table = carried
        table = tensor.insert(total, table, [b])
        count = tensor.extract(hist, [arith.addi(b, index_const(offset))])
        return [arith.addi(total, count), table]

    start = tensor.EmptyOp([buckets], i32).result
    return for_range(0, buckets, [arith.constant(i32, 0), start], step)[1]


def _scatter(data: Sequence[ir.Value], outs: Sequence[ir.Value], table: ir.Value,
             digit: Callable[[ir.Value], ir.Value],
             decode: Callable[[ir.Value], ir.Value] | None = None) -> list[ir.Value]:
    """One counting-sort pass: element i of `data` (keys first) goes to the next free slot
    of its key's bucket in `outs`: the last len(outs) of data (the keys may be left out),
    or, with `decode`, the one value decode(key)."""
    i32 = ir.IntegerType.get_signless(32)
    sources = list(data)[len(data) - len(outs):]

    def move(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        table, *outs = carried
        key = tensor.extract(data[0], [i])
        d = digit(key)
        at = tensor.extract(table, [d])
        table = tensor.insert(arith.addi(at, arith.constant(i32, 1)), table, [d])
        pos = arith.index_cast(ir.IndexType.get(), at)
        if decode is not None:
            return [table, tensor.insert(decode(key), outs[0], [pos])]
        return [table] + [tensor.insert(tensor.extract(src, [i]), o, [pos])
                          for src, o in zip(sources, outs)]

    return for_range(0, ir.RankedTensorType(data[0].type).shape[0], [table, *outs], move)[1:]


def digit_bits(n: int) -> int:
    """Bits per radix digit: 8 (256 buckets) for short rows; 11 for long ones, where the
    fewer passes (3 instead of 4 for 32-bit keys) outweigh 2048-entry histograms."""
    return 11 if n >= 1 << 16 else 8


def _decoder(t: PrimitiveType, storage: ir.Type, order: KeyOrder
             ) -> Callable[[ir.Value], ir.Value] | None:
    """The inverse of `sort_key` when keys determine the values (None if not): then one
    operand sorts by moving its keys alone. For `float_nan_last` every NaN has one key;
    the caller writes the NaNs itself. Keys may be vectors (then so are the values)."""
    width = _key_bits(t)

    def decode(key: ir.Value) -> ir.Value:
        it = int_like(key, width)
        if not order.ascending:
            key = arith.xori(key, int_splat(it, -1))
        sign = int_splat(it, -(1 << (width - 1)))
        if order.kind in ("float_total", "float_nan_last"):
            # Keys of positive floats have the sign bit set (clear it); negative ones had
            # every bit flipped.
            positive = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(key, sign), int_splat(it, 0))
            bits = arith.select(positive, arith.xori(key, sign), arith.xori(key, int_splat(it, -1)))
        elif order.kind == "signed":
            bits = arith.xori(key, sign)
        else:
            bits = key
        target = storage
        if isinstance(key.type, ir.VectorType):
            target = ir.VectorType.get(ir.VectorType(key.type).shape, storage)
        return bits if target == it else arith.bitcast(target, bits)

    return decode


def _is_nan(x: ir.Value, t: PrimitiveType) -> ir.Value:
    width = _key_bits(t)
    it = int_like(x, width)
    bits = x if x.type == it else arith.bitcast(it, x)
    magnitude = arith.andi(bits, int_splat(it, (1 << (width - 1)) - 1))
    exponent = {PrimitiveType.F16: 5, PrimitiveType.BF16: 8, PrimitiveType.F32: 8,
                PrimitiveType.F64: 11}[t]
    inf = int_splat(it, ((1 << exponent) - 1) << (width - 1 - exponent))
    return arith.cmpi(arith.CmpIPredicate.ugt, magnitude, inf)


# Shared with the sorting network (lowering/ops/sort_network.py).
key_bits, decoder, is_nan = _key_bits, _decoder, _is_nan


def radix_rows(inputs: Sequence[ir.Value], types: Sequence[PrimitiveType], dims: Sequence[int],
               axis: int, order: KeyOrder) -> list[ir.Value]:
    """The inputs sorted along `axis` by `order` (stable), row by row."""
    n = dims[axis]
    key_type = types[order.operand]
    width = _key_bits(key_type)
    kt = ir.IntegerType.get_signless(width)
    i32 = ir.IntegerType.get_signless(32)
    bits = min(digit_bits(n), width)
    passes = -(-width // bits)
    buckets = 1 << bits
    # One operand: its keys alone move; the last pass writes the values they decode to.
    key_only = len(inputs) == 1
    nan_last = order.kind == "float_nan_last"
    # Several operands, keys of up to 32 bits: one i64 (key, position) moves instead of
    # the key and every operand (one scattered store per element and pass instead of
    # 1 + N; measured ~1.35x on an argsort of 1M f32), and a last loop gathers the operands.
    packed = not key_only and width <= 32
    moved_type = ir.IntegerType.get_signless(64) if packed else kt

    def digit(key: ir.Value, p: int) -> ir.Value:
        d = arith.andi(arith.shrui(key, arith.constant(kt, p * bits)),
                       arith.constant(kt, buckets - 1))
        return arith.index_castui(ir.IndexType.get(), d)

    def moved_digit(moved: ir.Value, p: int) -> ir.Value:
        if not packed:
            return digit(moved, p)
        d = arith.andi(arith.shrui(moved, arith.constant(moved_type, 32 + p * bits)),
                       arith.constant(moved_type, buckets - 1))
        return arith.index_castui(ir.IndexType.get(), d)

    def row(ivs: list[ir.Value], dests: list[ir.Value]) -> list[ir.Value]:
        rows = [row_slice(x, ivs, axis) for x in inputs]
        hist_type = ir.RankedTensorType.get([passes * buckets], i32)
        zeros = arith.constant(hist_type, ir.DenseElementsAttr.get_splat(
            hist_type, ir.IntegerAttr.get(i32, 0)))
        keys0 = _fresh(n, moved_type)

        # One loop: every element's key, the histograms of all its digits, the NaNs.
        def count(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            keys, hist, nans = carried
            x = tensor.extract(rows[order.operand], [i])
            key = sort_key(x, key_type, order)
            moved = key
            if packed:  # the key above the element's position
                high = arith.shli(arith.extui(moved_type, key), arith.constant(moved_type, 32))
                moved = arith.ori(high, arith.index_cast(moved_type, i))
            keys = tensor.insert(moved, keys, [i])
            for p in range(passes):
                at = arith.addi(digit(key, p), index_const(p * buckets))
                c = tensor.extract(hist, [at])
                hist = tensor.insert(arith.addi(c, arith.constant(i32, 1)), hist, [at])
            if key_only and nan_last:
                nans = arith.addi(nans, arith.select(_is_nan(x, key_type), index_const(1),
                                                     index_const(0)))
            return [keys, hist, nans]

        keys, hist, nans = for_range(0, n, [keys0, zeros, index_const(0)], count)
        data = [keys] if key_only or packed else [keys, *rows]
        # Two sets of buffers written in turn (the rows are only read), so every pass
        # writes in place (fresh buffers per pass would cost page faults). A pass whose
        # digit is the same for every key is not skipped: its scatter is a sequential
        # copy, and skipping would make which set holds the data dynamic (bufferization
        # then copies). `_fresh`: tensor.empty ops would be merged by CSE.
        sets = [[_fresh(n, element_type(x)) for x in data],
                [keys] + [_fresh(n, element_type(x)) for x in data[1:]]]  # keys: dead after pass 0
        for p in range(passes):
            table = _bucket_starts(hist, p * buckets, buckets)
            if p < passes - 1 or packed:
                data = sets[p % 2] = _scatter(data, sets[p % 2], table, lambda k, p=p: moved_digit(k, p))
                continue
            # The last pass writes the operands only, into the results.
            outs = dests
            if not key_only:
                return _scatter(data, outs, table, lambda k, p=p: digit(k, p))
            decode = _decoder(key_type, element_type(inputs[0]), order)
            (out,) = _scatter(data, outs, table, lambda k, p=p: digit(k, p), decode)
            if nan_last:
                out = place_nans(rows[0], out, nans, key_type, order.ascending)
            return [out]
        return _gather(rows, dests, data[0])

    return for_each_row(dims, axis, [element_type(x) for x in inputs], n, row)


def _gather(rows: Sequence[ir.Value], dests: Sequence[ir.Value], moved: ir.Value
            ) -> list[ir.Value]:
    """dests[m][j] = rows[m][position of the j-th element], positions in the low 32 bits."""
    i32 = ir.IntegerType.get_signless(32)

    def step(j: ir.Value, outs: list[ir.Value]) -> list[ir.Value]:
        position = arith.index_castui(ir.IndexType.get(),
                                      arith.trunci(i32, tensor.extract(moved, [j])))
        return [tensor.insert(tensor.extract(r, [position]), o, [j]) for r, o in zip(rows, outs)]

    return for_range(0, ir.RankedTensorType(moved.type).shape[0], dests, step)


def place_nans(row: ir.Value, out: ir.Value, nans: ir.Value, t: PrimitiveType,
               ascending: bool, row_at: Sequence[ir.Value] = (),
               out_at: Sequence[ir.Value] = ()) -> ir.Value:
    """`out` with its block of NaN keys (last when ascending, first when descending)
    holding the row's NaNs, bits and order kept (stable): their keys were all equal.
    The row is `row`'s last dimension at the leading indices `row_at`, written into
    `out`'s at `out_at` (none: both 1-D); `nans` counts them (index).

    The row is scanned a vector of NAN_SCAN_BITS at a time, and only a vector holding
    a NaN element by element: NaNs are rare, and an element-by-element scan of every
    row holding one cost the network's f32[4096,256] sort with 1% NaNs half its time."""
    row_type = ir.RankedTensorType(row.type)
    n, storage = row_type.shape[-1], row_type.element_type
    start = arith.subi(index_const(n), nans) if ascending else index_const(0)

    def step(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        pos, out = carried
        x = tensor.extract(row, [*row_at, i])
        nan = _is_nan(x, t)
        written = if_values(nan, lambda: [tensor.insert(x, out, [*out_at, pos])], lambda: [out],
                            [out.type])[0]
        return [arith.addi(pos, arith.select(nan, index_const(1), index_const(0))), written]

    lanes = NAN_SCAN_BITS // _key_bits(t)
    whole = n - n % lanes
    vector_type = ir.VectorType.get([lanes], storage)
    to_row_end = ir.AffineMap.get_minor_identity(row_type.rank, 1)
    zero = arith.constant(storage, ir.FloatAttr.get(storage, 0.0) if isinstance(storage, ir.FloatType)
                          else ir.IntegerAttr.get(storage, 0))

    def chunk(c: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        i0 = arith.muli(c, index_const(lanes))
        x = vector.transfer_read(vector_type, row, [*row_at, i0], to_row_end, zero, [True])
        some_nan = vector.reduction(ir.IntegerType.get_signless(1), vector.CombiningKind.OR, _is_nan(x, t))
        return if_values(some_nan, lambda: for_range(i0, arith.addi(i0, index_const(lanes)), carried, step),
                         lambda: carried, [c.type for c in carried])

    # No NaN, no trip (loops, not an scf.if: output_tensors sees through loops).
    some = arith.cmpi(arith.CmpIPredicate.ne, nans, index_const(0))
    carried = for_range(0, arith.select(some, index_const(whole // lanes), index_const(0)),
                        [start, out], chunk)
    return for_range(whole, arith.select(some, index_const(n), index_const(whole)), carried, step)[1]


# -- partial selection --------------------------------------------------------------------------

def select_rows(inputs: Sequence[ir.Value], dims: Sequence[int], axis: int, comparator: str,
                kept: int) -> list[ir.Value]:
    """Tensors whose positions [0, kept) along `axis` are those of the stable sort of
    `inputs` by `comparator` (the other positions undefined)."""
    n = dims[axis]
    k = min(kept, n)
    i1 = ir.IntegerType.get_signless(1)

    def row(ivs: list[ir.Value], dests: list[ir.Value]) -> list[ir.Value]:
        rows = [row_slice(x, ivs, axis) for x in inputs]

        def before(x: Sequence[ir.Value], y: Sequence[ir.Value]) -> ir.Value:
            pairs = [v for a, b in zip(x, y) for v in (a, b)]
            return from_storage(apply_computation("sort", comparator, pairs)[0], PrimitiveType.PRED)

        def at(buffers: Sequence[ir.Value], position: ir.Value) -> list[ir.Value]:
            return [tensor.extract(b, [position]) for b in buffers]

        def visit(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            bufs = carried
            x = at(rows, i)
            # Buffered so far: min(i, k) elements.
            filled = arith.minui(i, index_const(k))
            full = arith.cmpi(arith.CmpIPredicate.uge, i, index_const(k))
            last = at(bufs, index_const(k - 1))
            enters = if_values(full, lambda: [before(x, last)],
                         lambda: [arith.constant(i1, 1)], [i1])[0]

            def insert() -> list[ir.Value]:
                # Position: after every buffered element x does not go strictly before.
                def count(j: ir.Value, c: list[ir.Value]) -> list[ir.Value]:
                    stays = arith.select(before(x, at(bufs, j)), index_const(0), index_const(1))
                    return [arith.addi(c[0], stays)]

                pos = for_range(0, filled, [index_const(0)], count)[0]
                # Shift [pos, filled) up by one, from the top (the last one falls off when full).
                top = arith.minui(filled, index_const(k - 1))

                def shift(t: ir.Value, c: list[ir.Value]) -> list[ir.Value]:
                    j = arith.subi(top, t)
                    src = arith.subi(j, index_const(1))
                    return [tensor.insert(tensor.extract(b, [src]), b, [j]) for b in c]

                shifted = for_range(index_const(0), arith.subi(top, pos), bufs, shift)
                return [tensor.insert(v, b, [pos]) for v, b in zip(x, shifted)]

            return if_values(enters, insert, lambda: list(bufs), [b.type for b in bufs])

        return for_range(0, n, dests, visit)

    return for_each_row(dims, axis, [element_type(x) for x in inputs], k, row)
