"""IR tests of the performance pipeline: fusion into one loop, vector ops in the
"vectorized" stage, multi-core splitting of large ops, and the accuracy of the
f32 exp/tanh polynomials (lowering/approximations.py), each checked against numpy."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm
from xlamlir.lowering.passes.row_softmax import rows_softmax
from xlamlir.runtime.compiler import clear_cache

F32 = xm.F32


def f32(*dims: int) -> xm.Shape:
    return xm.Shape.array(F32, dims)


def compile_unary(method: str, n: int) -> xm.Executable:
    b = xm.XlaBuilder(method)
    getattr(b, method)(b.parameter(0, f32(n)))
    return xm.compile(b.build())


def axpy(n: int) -> xm.Executable:
    b = xm.XlaBuilder("axpy")
    a, x, y = b.parameter(0, f32()), b.parameter(1, f32(n)), b.parameter(2, f32(n))
    b.add(b.mul(a, x), y)
    return xm.compile(b.build())


def softmax(rows: int, cols: int, generics: bool = False) -> xm.Executable:
    """`generics`: without rows_softmax (lowering/passes/row_softmax.py), which makes a
    softmax one loop over rows: its five generics through the vectorizer."""
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, f32(rows, cols))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (rows, cols), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.div(e, b.broadcast_in_dim(s, (rows, cols), [0]))
    pipeline = xm.Pipeline.default()
    if generics:
        pipeline.replace("fused", [p for p in pipeline.passes("fused") if p is not rows_softmax])
    return xm.compile(b.build(), pipeline=pipeline)


# ---------------------------------------------------------------- vector ops per workload

@pytest.mark.parametrize("n", [1 << 20, 1000, 40, 7])
def test_axpy_vectorized_and_correct(n: int) -> None:
    exe = axpy(n)
    vectorized = exe.stages["vectorized"]
    if n >= 16:
        assert "vector<16xf32>" in vectorized and "in_bounds = [true]" in vectorized
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    np.testing.assert_allclose(exe(np.float32(2.5), x, y), np.float32(2.5) * x + y, rtol=1e-6)


def test_large_elementwise_split_across_cores() -> None:
    exe = axpy(1 << 20)
    assert "scf.forall" in exe.stages["vectorized"]
    assert "mlirAsyncRuntime" in exe.stages["llvm"]


def test_tanh_chain_is_one_vector_loop_without_libm() -> None:
    n = 1 << 16
    b = xm.XlaBuilder("chain")
    x, y, z = (b.parameter(i, f32(n)) for i in range(3))
    b.add(b.mul(b.tanh(b.add(b.mul(x, y), z)), b.constant(np.float32(0.5))), b.exp(b.neg(x)))
    exe = xm.compile(b.build())
    assert exe.stages["fused"].count("linalg.generic") == 1  # one fused loop nest
    vectorized = exe.stages["vectorized"]
    assert "math.tanh %" in vectorized and ": vector<16xf32>" in vectorized
    assert "math.exp" not in exe.stages["loops"] and "math.tanh" not in exe.stages["loops"]
    assert "tanhf" not in exe.stages["llvm"] and "expf" not in exe.stages["llvm"]
    rng = np.random.default_rng(0)
    xv, yv, zv = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    expected = np.tanh(xv * yv + zv) * np.float32(0.5) + np.exp(-xv)
    np.testing.assert_allclose(exe(xv, yv, zv), expected, rtol=2e-6, atol=1e-6)


def row_sum(rows: int, cols: int) -> xm.Executable:
    b = xm.XlaBuilder("row_sum")
    b.reduce(b.parameter(0, f32(rows, cols)), b.constant(np.float32(0)), lambda a, v: a + v, [1])
    return xm.compile(b.build())


@pytest.mark.parametrize(("rows", "cols"), [(256, 512), (5, 48), (3, 100)])
def test_row_sum_correct(rows: int, cols: int) -> None:
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    np.testing.assert_allclose(row_sum(rows, cols)(x), x.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_row_sum_vectorized() -> None:
    # The lane split's chunk loop carries a 16-lane accumulator in registers (the
    # hoisted transfers become loop-carried vectors).
    vectorized = row_sum(256, 512).stages["vectorized"]
    assert "vector.transfer_read" in vectorized
    assert "iter_args" in vectorized and "-> (vector<16xf32>)" in vectorized


def test_large_row_sum_split_across_cores() -> None:
    exe = row_sum(2048, 512)
    assert "scf.forall" in exe.stages["vectorized"]
    x = np.random.default_rng(6).standard_normal((2048, 512), dtype=np.float32)
    np.testing.assert_allclose(exe(x), x.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_softmax_reductions_vectorized() -> None:
    # The exact NaN-propagating max is several ops per element: it vectorizes as an
    # elementwise accumulation too.
    vectorized = softmax(128, 256, generics=True).stages["vectorized"]
    assert vectorized.count("-> (vector<16xf32>)") >= 2  # the max and the sum


@pytest.mark.parametrize(("rows", "cols"), [(64, 64), (128, 256), (7, 40)])
def test_softmax_vectorized_and_correct(rows: int, cols: int) -> None:
    exe = softmax(rows, cols)
    assert "vector<16xf32>" in exe.stages["vectorized"]  # the exp and the division
    x = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32) * 4
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(exe(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-8)


def test_reduction_fold_is_not_fused_into_broadcasting_consumer() -> None:
    # The lanes' fold must stay its own loop: fused into x / sum[:, None] it ran once per
    # column and, once bufferized, accumulated into the row sums (softmax was wrong).
    exe = softmax(32, 64, generics=True)
    assert "reduction" in exe.stages["fused"]


def test_transpose_plus_vectorized() -> None:
    b = xm.XlaBuilder("transpose_add")
    x, y = b.parameter(0, f32(64, 48)), b.parameter(1, f32(48, 64))
    b.add(b.transpose(x, [1, 0]), y)
    exe = xm.compile(b.build())
    assert "vector<" in exe.stages["vectorized"]
    rng = np.random.default_rng(3)
    xv, yv = rng.standard_normal((64, 48), dtype=np.float32), rng.standard_normal((48, 64), dtype=np.float32)
    np.testing.assert_array_equal(exe(xv, yv), xv.T + yv)


def test_broadcast_operand_vectorized() -> None:
    b = xm.XlaBuilder("bias")
    x, bias = b.parameter(0, f32(32, 96)), b.parameter(1, f32(96))
    b.max(b.add(x, b.broadcast_in_dim(bias, (32, 96), [1])), b.constant(np.float32(0)))
    exe = xm.compile(b.build())
    assert "vector<16xf32>" in exe.stages["vectorized"]
    rng = np.random.default_rng(4)
    xv, bv = rng.standard_normal((32, 96), dtype=np.float32), rng.standard_normal(96, dtype=np.float32)
    np.testing.assert_array_equal(exe(xv, bv), np.maximum(xv + bv, 0))


def test_destroying_a_parallel_executable_keeps_others_working() -> None:
    first = axpy(1 << 20)
    x = np.ones(1 << 20, np.float32)
    clear_cache()
    second = axpy(1 << 20 | 16)
    del first
    gc.collect()  # the async runtime must outlive any one engine
    xs = np.ones(1 << 20 | 16, np.float32)
    np.testing.assert_array_equal(second(np.float32(2), xs, xs), np.full_like(xs, 3))
    third = axpy(1 << 20)
    np.testing.assert_array_equal(third(np.float32(2), x, x), np.full_like(x, 3))


# ---------------------------------------------------------------- polynomial accuracy

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30, -1e-30, 0.0004, -0.0004,
                  88.72, 88.73, 89.0, -87.3, -103.9, -103.97, -104.0, -200.0, 7.9, 8.0, 9.0, 9.2,
                  -9.2, 20.0, -20.0, 0.5, -0.5, 1.0, -1.0], dtype=np.float32)


def _grid(lo: float, hi: float) -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.concatenate([EDGES, rng.uniform(lo, hi, 200_000), rng.uniform(-1, 1, 50_000),
                           rng.uniform(-0.01, 0.01, 20_000)]).astype(np.float32)


def _ulp_error(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    rounded = exact.astype(np.float32)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    ulp = np.maximum(ulp, float(np.spacing(np.float32(0))))  # subnormal results: absolute
    return np.abs(actual.astype(np.float64) - exact) / ulp


@pytest.mark.parametrize(("method", "fn", "lo", "hi", "max_ulp"), [
    ("exp", np.exp, -110.0, 90.0, 2.0),
    ("tanh", np.tanh, -12.0, 12.0, 6.0),
])
def test_polynomial_accuracy(method: str, fn, lo: float, hi: float, max_ulp: float) -> None:
    x = _grid(lo, hi)
    exe = compile_unary(method, x.size)
    assert f"math.{method}" not in exe.stages["loops"]  # the polynomial replaced it
    actual = exe(x)
    with np.errstate(over="ignore"):
        exact = fn(x.astype(np.float64))
        rounded = exact.astype(np.float32)
    special = ~np.isfinite(rounded)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(rounded))
    np.testing.assert_array_equal(actual[special & ~np.isnan(rounded)], rounded[special & ~np.isnan(rounded)])
    error = _ulp_error(actual[~special], exact[~special])
    assert error.max() <= max_ulp, (error.max(), x[~special][np.argmax(error)])


def test_polynomial_signed_zero_and_limits() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 50.0, -50.0], dtype=np.float32)
    tanh = compile_unary("tanh", x.size)(x)
    np.testing.assert_array_equal(tanh, np.tanh(x))
    assert np.signbit(tanh[1]) and not np.signbit(tanh[0])
    exp = compile_unary("exp", x.size)(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(exp[:4], np.exp(x[:4]))


# ---------------------------------------------------------------- lane-split reductions

def _lane_case(dtype, op: str, init: object, x: np.ndarray, expected: np.ndarray) -> None:
    b = xm.XlaBuilder(f"lanes_{op}")
    p = b.parameter(0, xm.Shape.array(xm.type_of(np.dtype(dtype)), x.shape))
    combine = {"add": lambda a, v: a + v, "mul": lambda a, v: a * v,
               "max": lambda a, v: a.builder.max(a, v), "min": lambda a, v: a.builder.min(a, v),
               "and": lambda a, v: a & v, "or": lambda a, v: a | v, "xor": lambda a, v: a ^ v}[op]
    b.reduce(p, b.constant(np.asarray(init, dtype=dtype)[()]), combine, [1])
    exe = xm.compile(b.build())
    got = exe(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.view(np.uint8), expected.astype(dtype).view(np.uint8),
                                  err_msg=f"{np.dtype(dtype)} {op}: {got} vs {expected}")


def test_lane_split_identities_are_exact() -> None:
    # Rows of 64+ elements (multiples of 16) start their 16 lanes at the combiner's
    # identity: bit-exact results for -0.0, NaN, infinities, unsigned and narrow types.
    rng = np.random.default_rng(7)
    neg_zero = np.full((3, 64), -0.0, np.float32)
    _lane_case(np.float32, "add", -0.0, neg_zero, np.full(3, -0.0, np.float32))
    mixed = neg_zero.copy()
    mixed[1, 40] = 0.0
    _lane_case(np.float32, "max", -np.inf, mixed, np.array([-0.0, 0.0, -0.0], np.float32))
    _lane_case(np.float32, "min", np.inf, -mixed, np.array([0.0, -0.0, 0.0], np.float32))
    f = rng.standard_normal((4, 96)).astype(np.float32)
    f[0, 5], f[1, 95], f[2, 3] = np.nan, np.inf, -np.inf
    f[3] = -np.inf
    _lane_case(np.float32, "max", -np.inf, f, f.max(axis=1))
    _lane_case(np.float32, "min", np.inf, f, f.min(axis=1))
    small = rng.integers(-3, 4, (3, 64)).astype(np.float64)
    _lane_case(np.float64, "add", 5.0, small, small.sum(axis=1) + 5)  # init enters once
    _lane_case(np.float16, "max", -np.inf, small.astype(np.float16), small.max(axis=1))
    _lane_case(ml_dtypes.bfloat16, "min", np.inf, small.astype(ml_dtypes.bfloat16), small.min(axis=1))
    _lane_case(np.float32, "mul", 1.0, np.sign(small).astype(np.float32) + 0,
               np.prod(np.sign(small), axis=1))
    u32 = rng.integers(0, 1 << 32, (3, 80), dtype=np.uint64).astype(np.uint32)
    _lane_case(np.uint32, "max", 0, u32, u32.max(axis=1))
    _lane_case(np.uint32, "min", 0xFFFFFFFF, u32, u32.min(axis=1))
    s8 = rng.integers(-128, 128, (3, 64)).astype(np.int8)
    _lane_case(np.int8, "max", -128, s8, s8.max(axis=1))
    _lane_case(np.int8, "min", 127, s8, s8.min(axis=1))
    _lane_case(np.int8, "add", 3, s8, (s8.sum(axis=1, dtype=np.int64) + 3).astype(np.int8))
    s64 = rng.integers(-(1 << 40), 1 << 40, (2, 64), dtype=np.int64)
    _lane_case(np.int64, "and", -1, s64, np.bitwise_and.reduce(s64, axis=1))
    _lane_case(np.int64, "or", 0, s64, np.bitwise_or.reduce(s64, axis=1))
    _lane_case(np.int64, "xor", 0, s64, np.bitwise_xor.reduce(s64, axis=1))
    pred = rng.random((4, 64)) < 0.97
    pred[3] = True
    _lane_case(np.bool_, "and", True, pred, pred.all(axis=1))
    _lane_case(np.bool_, "or", False, ~pred, (~pred).any(axis=1))
    _lane_case(np.bool_, "max", False, ~pred, (~pred).any(axis=1))
    _lane_case(np.bool_, "min", True, pred, pred.all(axis=1))


# ---------------------------------------------------------------- while loop state in place

def _counting_loop(n: int, trips: int, reverse: bool = False) -> xm.Executable:
    b = xm.XlaBuilder("loop")
    x = b.parameter(0, f32(n))

    def cond(t):
        bb = t.builder
        return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(trips)))

    def body(t):
        bb = t.builder
        i, v = bb.get_tuple_element(t, 0), bb.get_tuple_element(t, 1)
        if reverse:  # reads the old state out of order: updating in place would be wrong
            v = bb.rev(v, [0])
        return bb.tuple([bb.add(i, bb.constant(np.int32(1))),
                         bb.add(bb.mul(v, bb.constant(np.float32(0.5))), bb.constant(np.float32(1)))])

    loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
    return xm.compile(b.build(b.get_tuple_element(loop, 1)))


def test_while_state_updated_in_place() -> None:
    # No buffer is allocated or copied per iteration: the body writes the loop-carried
    # buffers and the condition is scalar code.
    exe = _counting_loop(16, 10)
    loop = exe.stages["bufferized"].split("scf.while", 1)[1].split("scf.yield", 1)[0]
    assert "memref.alloc" not in loop and "memref.copy" not in loop
    x = np.arange(16, dtype=np.float32)
    expected = x.copy()
    for _ in range(10):
        expected = expected * np.float32(0.5) + np.float32(1)
    np.testing.assert_array_equal(exe(x), expected)


def test_while_state_read_out_of_order_stays_correct() -> None:
    exe = _counting_loop(7, 5, reverse=True)
    x = np.arange(7, dtype=np.float32)
    expected = x.copy()
    for _ in range(5):
        expected = expected[::-1] * np.float32(0.5) + np.float32(1)
    np.testing.assert_array_equal(exe(x), expected)


def test_split_follows_the_affinity_and_never_changes_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # The outermost parallel loop is split over the cores this process may use (its
    # affinity, not the machine's count); each output is computed the same way either way.
    from xlamlir.lowering.passes import vectorize

    x = np.random.default_rng(7).standard_normal((2048, 512), dtype=np.float32)
    monkeypatch.setattr(vectorize.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    clear_cache()
    one = row_sum(2048, 512)
    monkeypatch.setattr(vectorize.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    clear_cache()
    three = row_sum(2048, 512)
    clear_cache()
    assert "scf.forall" not in one.stages["vectorized"]
    assert "scf.forall (%arg2) in (3)" in three.stages["vectorized"]
    np.testing.assert_array_equal(one(x), three(x))
