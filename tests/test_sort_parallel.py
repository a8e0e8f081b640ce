"""The parallel radix sort of one long row (lowering/ops/sort_parallel.py) against numpy.

Rows of PARALLEL_MIN or more elements in a recognised order are scattered by their
top digit in parallel chunks, then sorted bucket by bucket in parallel groups; the
results must be the stable sort's, bit for bit (NaN payloads and signs, -0.0), at
sizes around the chunk boundaries, with buckets of any sizes, for every element type
and order the path takes, and on every target CPU.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, run, stage_text
from mlir import ir
from targets_support import TARGETS, compile_for

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.ops import sort_parallel
from xlamlir.lowering.ops.sort_parallel import CHUNKS, GROUPS, PARALLEL_MIN, SCRATCH, chunk_shift
from xlamlir.runtime.compiler import clear_cache

BF16 = np.dtype(ml_dtypes.bfloat16)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def shape(dtype: object, dims: tuple[int, ...]) -> xm.Shape:
    return xm.Shape.array(xm.type_of(np.dtype(dtype)), dims)


def special_values(dtype: object, n: int, seed: int) -> np.ndarray:
    """Many ties; for floats +-NaN (one with a payload), +-0.0, +-inf; integers over
    their whole range, extremes included."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        wide = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x = np.where(rng.random(n) < 0.5, wide, rng.integers(0, 5, n).astype(dtype))
        x[:2] = [info.min, info.max]
        return x
    x = np.round(rng.standard_normal(n) * 100).astype(np.float32)  # ties
    x[rng.random(n) < 0.3] *= np.float32(1.001)
    payload_nan = np.array([0x7FC00123], np.uint32).view(np.float32)[0]
    specials = np.array([np.nan, -np.nan, payload_nan, -0.0, 0.0, np.inf, -np.inf], np.float32)
    pick = rng.random(n) < 0.05
    x[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
    return x.astype(dtype)


def order_keys(x: np.ndarray, nan_last: bool) -> np.ndarray:
    """Unsigned keys in the sort's ascending order: XLA's total order on floats (with
    every NaN one largest key when `nan_last`), value order on integers."""
    if x.dtype == np.bool_:
        return x.astype(np.uint64)
    width = 8 * x.dtype.itemsize
    bits = x.view(UINT[x.dtype.itemsize]).astype(np.uint64)
    sign = np.uint64(1 << (width - 1))
    if x.dtype.kind == "u":
        return bits
    if x.dtype.kind == "i":
        return bits ^ sign
    negative = (bits & sign) != 0
    keys = np.where(negative, ~bits & np.uint64((1 << width) - 1), bits | sign)
    if nan_last:
        keys = np.where(np.isnan(x.astype(np.float64)), np.uint64((1 << width) - 1), keys)
    return keys


def stable_order(keys: np.ndarray, descending: bool = False) -> np.ndarray:
    return np.argsort(~keys if descending else keys, kind="stable").astype(np.int32)


def assert_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.dtype == want.dtype, what
    if want.dtype.itemsize in UINT and want.dtype != np.bool_:
        got, want = got.view(UINT[want.dtype.itemsize]), want.view(UINT[want.dtype.itemsize])
    np.testing.assert_array_equal(got, want, err_msg=what)


def gt(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    return u.builder.gt(u, v)


def lt_total(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    return u.builder.compare(u, v, "LT", "TOTALORDER")


def gt_total(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    return u.builder.compare(u, v, "GT", "TOTALORDER")


def test_chunks_depend_on_the_size_alone() -> None:
    # Powers of two, at most CHUNKS of them, the last one possibly short (one element).
    for n in (PARALLEL_MIN, PARALLEL_MIN + 1, 3 * (1 << 16) + 1, 1 << 20, (1 << 20) + 7):
        size = 1 << chunk_shift(n)
        chunks = -(-n // size)
        assert chunks <= CHUNKS and (chunks - 1) * size < n <= chunks * size
        assert size < 2 * -(-n // CHUNKS)
    assert -(-(3 * (1 << 16) + 1) // (1 << chunk_shift(3 * (1 << 16) + 1))) == 4


# Around the threshold and the chunk boundaries: 4 full chunks, 3 chunks and one of one
# element, an odd size.
SIZES = [PARALLEL_MIN, 3 * (1 << 16) + 1, PARALLEL_MIN + 12345]
FLOATS = [np.float32, np.float64, np.float16, BF16]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda t: np.dtype(t).name)
def test_one_operand_every_type(dtype: object) -> None:
    # Keys alone move: ascending and descending, the default order (NaNs last) and XLA's
    # total order; values decoded back bit for bit, NaNs put back in their order.
    is_float = np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16
    arrays = [special_values(dtype, n, n) for n in SIZES]

    def build(b, *ps):
        out = []
        for p in ps:
            out += [b.sort(p), b.sort(p, gt_total if is_float else gt)]
            if is_float:
                out.append(b.sort(p, lt_total))
        return b.tuple(out)

    got = iter(run(build, *arrays))
    for x in arrays:
        what = f"n={len(x)}"
        assert_bits(next(got), x[stable_order(order_keys(x, True))], what)
        assert_bits(next(got), x[stable_order(order_keys(x, False), True)], what + " desc")
        if is_float:
            assert_bits(next(got), x[stable_order(order_keys(x, False))], what + " total")


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda t: np.dtype(t).name)
def test_keys_and_values_stable(dtype: object) -> None:
    # Several operands, the key second: (key, position) pairs move (keys <= 32 bits; wider
    # keys keep the sequential radix sort), the operands are gathered; ties keep their
    # index order both ways.
    n = SIZES[1]
    keys = special_values(dtype, n, 7)
    payload = np.random.default_rng(8).standard_normal(n).astype(np.float64)

    is_float = np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16
    kind = "TOTALORDER" if is_float else ("UNSIGNED" if np.dtype(dtype).kind in "ub" else "SIGNED")

    def by_second(_a, _b, k0, k1, *_):
        return k0.builder.compare(k0, k1, "LT", kind)

    def by_second_desc(_a, _b, k0, k1, *_):
        return k0.builder.compare(k0, k1, "GT", kind)

    def build(b, f, k):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return b.tuple([b.sort([f, k, iota], by_second, is_stable=True),
                        b.sort([f, k, iota], by_second_desc, is_stable=True)])

    (f1, k1, i1), (f2, k2, i2) = run(build, payload, keys)
    for (f, k, i), desc in (((f1, k1, i1), False), ((f2, k2, i2), True)):
        want = stable_order(order_keys(keys, False), desc)
        np.testing.assert_array_equal(i, want)
        assert_bits(k, keys[want])
        assert_bits(f, payload[want])


def test_argsort_total_order_floats() -> None:
    # jnp.argsort's form on floats (TOTALORDER): -NaN first, NaNs by payload, -0.0 < +0.0.
    n = SIZES[2]
    x = special_values(np.float32, n, 3)

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return b.tuple([b.sort([p, iota], lt_total, is_stable=True),
                        b.sort([p, iota], gt_total, is_stable=True)])

    (v1, i1), (v2, i2) = run(build, x)
    for (v, i), desc in (((v1, i1), False), ((v2, i2), True)):
        want = stable_order(order_keys(x, False), desc)
        np.testing.assert_array_equal(i, want)
        assert_bits(v, x[want])


def test_one_row_of_a_higher_rank_array() -> None:
    # [1, n] along 1, [n, 1] along 0, [1, n, 1] along 1 with an iota: viewed as 1-D.
    n = SIZES[2]
    x = special_values(np.float32, n, 5)

    def build(b, row, column, middle):
        iota = b.iota(xm.Shape.array(xm.S32, (1, n, 1)), 1)
        return b.tuple([b.sort(row, dimension=1), b.sort(column, dimension=0),
                        b.sort([middle, iota], dimension=1, is_stable=True)])

    r, c, (m, i) = run(build, x.reshape(1, n), x.reshape(n, 1), x.reshape(1, n, 1))
    want = stable_order(order_keys(x, True))
    assert_bits(r, x[want].reshape(1, n))
    assert_bits(c, x[want].reshape(n, 1))
    assert_bits(m, x[want].reshape(1, n, 1))
    np.testing.assert_array_equal(i, want.reshape(1, n, 1))
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (1, n))), dimension=1)
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK: tensor.collapse_shape
        CHECK: scf.forall (%{{.*}}) in (3) {
        CHECK: tensor.expand_shape
    """)


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_cpu(target: str) -> None:
    n = 1 << 20
    x = special_values(np.float32, n, 11)
    b = xm.XlaBuilder("t")
    p = b.parameter(0, shape(np.float32, (n,)))
    iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
    comp = b.build(b.tuple([b.sort(p), b.sort([p, iota], is_stable=True)]))
    s, (v, i) = compile_for(comp, target)(x)
    want = stable_order(order_keys(x, True))
    assert_bits(s, x[want])
    np.testing.assert_array_equal(i, want)
    assert_bits(v, x[want])


def test_sequential_pipeline_same_bits() -> None:
    # The foralls as plain loops on the calling thread (Pipeline.sequential(), what export
    # uses): the same result.
    n = SIZES[1]
    x = special_values(np.float32, n, 13)
    b = xm.XlaBuilder("t")
    p = b.parameter(0, shape(np.float32, (n,)))
    iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
    comp = b.build(b.tuple([b.sort(p, gt_total), b.sort([p, iota], is_stable=True)]))
    parallel = xm.compile(comp)(x)
    sequential = xm.compile(comp, pipeline=xm.Pipeline.default().sequential())(x)
    want = stable_order(order_keys(x, True))
    assert_bits(sequential[0], x[stable_order(order_keys(x, False), True)])
    np.testing.assert_array_equal(sequential[1][1], want)
    for got, ref in ((parallel[0], sequential[0]), (parallel[1][0], sequential[1][0]),
                     (parallel[1][1], sequential[1][1])):
        assert_bits(got, ref)


def test_parallel_radix_ir() -> None:
    # 2**20 f32: 4 chunks of 2**18, 2 streams each (8 rows of 2048 counts: the top 11
    # key bits). A forall counts per stream (and the NaNs); a second scatters the keys,
    # computed from the input, by the top digit; a forall of 16 groups of buckets on
    # tensors sorts each bucket by its 3 lower 7-bit digits (a table of 128 counts per
    # digit and group), or 2 of 11 bits for large buckets, and writes its slice of the
    # result; then the NaNs go back in order.
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (1 << 20,))))
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK: memref.alloc() : memref<8x2048xi32>
        CHECK: memref.alloc() : memref<16x3x128xi32>
        CHECK: memref.alloc() : memref<16x2x2048xi32>
        CHECK: scf.forall (%{{.*}}) in (4) {
        CHECK-NOT: memref<1048576xi32>
        CHECK: memref.store {{.*}} : memref<4xindex>
        CHECK-NOT: math.ctlz
        CHECK: scf.forall (%{{.*}}) in (4) {
        CHECK: tensor.extract {{.*}} : tensor<1048576xf32>
        CHECK: memref.store {{.*}} : memref<1048576xi32>
        CHECK: scf.forall (%{{.*}}) in (16) shared_outs
        CHECK: tensor.parallel_insert_slice {{.*}} : tensor<?xf32> into tensor<1048576xf32>
        CHECK-NOT: scf.forall
        CHECK: scf.for {{.*}} -> (index, tensor<1048576xf32>)
    """)


def test_parallel_radix_prefetches_and_scratch_ir() -> None:
    # 3 * 2**18 f32 (3 chunks; the scratch is not row-sized). The scatter prefetches
    # each bucket's position 2 KB (512 keys) ahead for writing; a bucket counts its
    # digits while prefetching its positions of the second buffer, which is the group's
    # part of the scratch (as a view indexed by row position) when the bucket fits in
    # it; its results are written in order after the passes.
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (3 << 18,))))
    check_ir(stage_text(b.build(), "linalg"), f"""
        CHECK-DAG: %[[AHEAD:.*]] = arith.constant 512 : index
        CHECK-DAG: %[[FITS:.*]] = arith.constant {SCRATCH} : index
        CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<{GROUPS * SCRATCH}xi32>
        CHECK: scf.forall (%{{{{.*}}}}) in (3) {{
        CHECK: scf.forall (%{{{{.*}}}}) in (3) {{
        CHECK: %[[NEXT:.*]] = arith.addi %[[POS:.*]], %[[AHEAD]] : index
        CHECK: %[[AT:.*]] = arith.minui %[[NEXT]], %c786431 : index
        CHECK: memref.prefetch %[[ROW:.*]][%[[AT]]], write, locality<3>, data : memref<786432xi32>
        CHECK: memref.store {{{{.*}}}}, %[[ROW]][%[[POS]]] : memref<786432xi32>
        CHECK: scf.forall (%{{{{.*}}}}) in (16) shared_outs
        CHECK: arith.cmpi ule, %{{{{.*}}}}, %[[FITS]] : index
        CHECK: %[[SPARE:.*]] = scf.if {{{{.*}}}} -> (memref<786432xi32, strided<[1], offset: ?>>)
        CHECK: memref.reinterpret_cast %[[SCRATCH]]
        CHECK: memref.cast
        CHECK: memref.load %[[ROW]]
        CHECK-NEXT: memref.prefetch %[[SPARE]][%{{{{.*}}}}], write, locality<3>, data
        CHECK: memref.store {{{{.*}}}}, %[[SPARE]]
        CHECK: memref.load %[[ROW]]
        CHECK: tensor.insert
        CHECK: tensor.parallel_insert_slice
    """)


@pytest.mark.parametrize("wide_key", [False, True])
def test_buckets_around_the_scratch_size(wide_key: bool) -> None:
    # Buckets of SCRATCH - 1, SCRATCH and SCRATCH + 1 elements (the last sorted in the
    # row-sized buffer, the others in their group's scratch) next to small ones; keys
    # and (key, index) pairs (i64 moved values) with ties.
    n = PARALLEL_MIN + 3 * SCRATCH
    rng = np.random.default_rng(5)
    sizes = [SCRATCH - 1, SCRATCH, SCRATCH + 1]
    tops = rng.permutation(np.arange(1, 2040, dtype=np.uint32))  # distinct top digits
    x = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    start = 0
    for top, size in zip(tops, sizes):
        x[start:start + size] = (np.uint32(top) << np.uint32(21)) | rng.integers(
            0, 1 << 21 if wide_key else 64, size, dtype=np.uint32)
        start += size
    x = x[rng.permutation(n)]
    want = stable_order(order_keys(x, True))

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return b.tuple([b.sort(p), b.sort([p, iota], is_stable=True)])

    keys, (values, order) = run(build, x)
    assert_bits(keys, x[want])
    np.testing.assert_array_equal(order, want)
    assert_bits(values, x[want])


def test_uneven_buckets() -> None:
    # Every element in one bucket (one group does all), a few buckets (most groups
    # empty), every bucket of the top digit used; ties keep their index order.
    n = SIZES[1]
    rng = np.random.default_rng(21)
    same = np.full(n, 7, np.int32)
    few = rng.choice(np.array([-5, 3, 1 << 24, -(1 << 30)], np.int32), n)
    spread = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    halves = rng.random(n).astype(np.float32)  # half of them in one bucket: [0.5, 1)

    def build(b, *ps):
        out = []
        for p in ps:
            iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
            out += [b.sort(p), b.sort([p, iota], is_stable=True)]
        return b.tuple(out)

    got = iter(run(build, same, few, spread, halves))
    for x in (same, few, spread, halves):
        want = stable_order(order_keys(x, True))
        assert_bits(next(got), x[want], str(x.dtype))
        v, i = next(got)
        np.testing.assert_array_equal(i, want)
        assert_bits(v, x[want])


def test_shorter_rows_stay_sequential() -> None:
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (PARALLEL_MIN - 1,))))
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK-NOT: scf.forall
        CHECK-NOT: memref.alloc
    """)


@pytest.mark.parametrize("case", ["small ints", "float ints", "one low digit", "one high digit"])
def test_keys_sharing_digits(case: str) -> None:
    # Keys in a narrow range share most digits within a bucket: those passes are copies
    # (lowering/ops/sort_parallel.py, `_sort_bucket`), the order the same, ties in index
    # order; a bucket whose varying digit is the first, the middle or the last pass.
    n = SIZES[1]
    rng = np.random.default_rng(31)
    x = {"small ints": rng.integers(-100, 100, n).astype(np.int32),
         "float ints": rng.integers(-100, 100, n).astype(np.float32),
         "one low digit": (rng.integers(0, 64, n) | (5 << 20)).astype(np.int32),
         "one high digit": ((rng.integers(0, 64, n) << 14) | 3).astype(np.int32)}[case]

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return b.tuple([b.sort(p), b.sort([p, iota], is_stable=True)])

    alone, (v, i) = run(build, x)
    want = stable_order(order_keys(x, True))
    assert_bits(alone, x[want], case)
    np.testing.assert_array_equal(i, want)
    assert_bits(v, x[want], case)


def _narrow_cases(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(41)
    one_value = np.full(n, -(1 << 30), np.int32)
    one_value[::7] = -(1 << 30) + 1
    return {
        "s32 [0, 2^20)": rng.integers(0, 1 << 20, n).astype(np.int32),
        "s32 [-100, 100]": rng.integers(-100, 101, n).astype(np.int32),
        "s32 extremes": rng.choice(np.array([-(2**31), -(2**31) + 3], np.int32), n),
        "s32 two values": one_value,
        "u32 [2^32 - 5000, 2^32)": rng.integers(2**32 - 5000, 2**32, n, dtype=np.uint64).astype(np.uint32),
        "u32 2047 values": rng.integers(0, 2047, n).astype(np.uint32),  # the digit's edge
        "u32 2049 values": rng.integers(0, 2049, n).astype(np.uint32),  # one more: s = 1
        # 1 and 4096 both present: 4095 spans 12 bits, yet 4096 >> 1 - 1 >> 1 = 2048 is one
        # past the digit's buckets: s = 2.
        "u32 [1, 4096]": np.concatenate([[1, 4096], rng.integers(1, 4097, n - 2)]).astype(np.uint32),
        "u16 [300, 900)": rng.integers(300, 900, n).astype(np.uint16),
        "s64 [-1000, 1000)": rng.integers(-1000, 1000, n).astype(np.int64),
        "f32 [1, 1.001)": (1 + rng.random(n) / 1000).astype(np.float32),
        "f32 +-0 and tiny": rng.choice(np.array([0.0, -0.0, 1e-45, -1e-45, 3e-45], np.float32), n),
        "f16 [1, 2)": (1 + rng.random(n)).astype(np.float16),
    }


@pytest.mark.parametrize("case", list(_narrow_cases(8)))
def test_keys_in_a_narrow_range(case: str) -> None:
    """Integer keys whose top digits fall in a few neighbouring buckets are counted again
    by a digit of their range (sort_parallel.py `_range_digit`): the stable sort's bits,
    alone and with (key, index) pairs, both ways; at the digit's edges (2047 and 2049
    values, the range's minimum at 0 and at the type's extremes), for 16-, 32- and 64-bit
    keys. Narrow floats (one binade, +-0 and subnormals) keep the top digit, as sorted."""
    n = SIZES[2]
    x = _narrow_cases(n)[case]
    is_float = x.dtype.kind == "f"
    kind = "TOTALORDER" if is_float else ("UNSIGNED" if x.dtype.kind == "u" else "SIGNED")

    def desc(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
        return u.builder.compare(u, v, "GT", kind)

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        pairs = [b.sort([p, iota], is_stable=True)] if x.dtype.itemsize <= 4 else []
        return b.tuple([b.sort(p), b.sort(p, desc), *pairs])

    got = run(build, x)
    up, down = stable_order(order_keys(x, True)), stable_order(order_keys(x, False), True)
    assert_bits(got[0], x[up], case)
    assert_bits(got[1], x[down], case + " desc")
    if x.dtype.itemsize <= 4:
        values, order = got[2]
        np.testing.assert_array_equal(order, up)
        assert_bits(values, x[up], case)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.uint16, np.int16, np.int64, np.uint64],
                         ids=lambda t: np.dtype(t).name)
def test_range_digit_on_any_keys(monkeypatch: pytest.MonkeyPatch, dtype: object) -> None:
    """The range path forced on every integer row (NARROW_SPAN above the bucket count):
    keys over their whole range, the type's extremes, ties; alone and as pairs."""
    monkeypatch.setattr(sort_parallel, "NARROW_SPAN", 1 << 12)
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", "off")
    clear_cache()  # nothing compiled with the usual span is reused
    n = SIZES[1]
    x = special_values(dtype, n, 13)
    pairs = np.dtype(dtype).itemsize <= 4

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return b.tuple([b.sort(p), *([b.sort([p, iota], is_stable=True)] if pairs else [])])

    try:
        got = run(build, x)
    finally:
        clear_cache()
    want = stable_order(order_keys(x, True))
    assert_bits(got[0], x[want])
    if pairs:
        values, order = got[1]
        np.testing.assert_array_equal(order, want)
        assert_bits(values, x[want])


def test_narrow_range_ir() -> None:
    # The extremes, the second count and the range digit's scatter: parallel loops that
    # run no iteration unless the first count found few neighbouring top digits.
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.int32, (SIZES[0],))))
    text = stage_text(b.build(), "linalg")
    # Count, scatter and buckets; then extremes, count again and the range digit's scatter.
    assert text.count("scf.forall (") == 6, text.count("scf.forall (")
    assert "math.ctlz" in text
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (SIZES[0],))))  # floats: the top digit only
    assert stage_text(b.build(), "linalg").count("scf.forall (") == 3


def test_the_kernel_loops_are_not_unrolled() -> None:
    """Every scalar loop of the radix kernel tells LLVM not to unroll it: unrolled, the 1M
    sort's JIT took 135-145 ms instead of 85-88, for 1-2% of its run time."""
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (1 << 20,))))
    text = stage_text(b.build(), "linalg")
    loops: list[tuple[bool, str]] = []
    with new_context():
        def visit(op: object) -> ir.WalkResult:
            if op.name == "scf.for":
                annotation = op.attributes["loop_annotation"] if "loop_annotation" in op.attributes else None
                inside, parent = False, op.parent
                while parent is not None:
                    inside, parent = inside or parent.name == "scf.forall", parent.parent
                loops.append((inside, str(annotation)))
            return ir.WalkResult.ADVANCE

        ir.Module.parse(text).operation.walk(visit)
    kernel = [annotation for inside, annotation in loops if inside]
    assert len(kernel) >= 25
    assert all("unroll = <disable = true>" in a for a in kernel)
