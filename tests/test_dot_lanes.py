"""Matrix-vector dots summed in vector lanes (lowering/ops/dot_lanes.py).

The IR tests show the split (a [..., K/16, 16] view, the chunk loop a reduction
outside the lanes) and that the vectorized stage runs it on 16-lane vectors; the
numeric tests compare every accumulation type with a float64 / wrapped-integer
reference, including depths the split does not apply to.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir

import xlamlir as xm


def _matvec(lhs_dims: tuple[int, ...], k: int, dtype: np.dtype) -> xm.XlaComputation:
    b = xm.XlaBuilder("mv")
    a = b.parameter(0, xm.Shape.array(dtype, (*lhs_dims, k)))
    x = b.parameter(1, xm.Shape.array(dtype, (k,)))
    b.dot_general(a, x, xm.DotDimensionNumbers((len(lhs_dims),), (0,), (), ()))
    return b.build()


def _batched_matvec(batch: int, rows: int, k: int, dtype: np.dtype) -> xm.XlaComputation:
    b = xm.XlaBuilder("bmv")
    a = b.parameter(0, xm.Shape.array(dtype, (batch, rows, k)))
    x = b.parameter(1, xm.Shape.array(dtype, (batch, k)))
    b.dot_general(a, x, xm.DotDimensionNumbers((2,), (1,), (0,), (0,)))
    return b.build()


def test_batched_matvec_sums_in_lanes_on_register_tiles() -> None:
    exe = xm.compile(_batched_matvec(2, 40, 256, np.float32))
    linalg = exe.stages["linalg"]
    assert "tensor<2x40x16x16xf32>" in linalg and "tensor<2x16x16xf32>" in linalg
    assert '["parallel", "parallel", "reduction", "parallel"]' in linalg
    # The "tiled" stage (lowering/passes/lane_schedules.py): 8 rows of partials per step,
    # 8 accumulators of 16 lanes carried in registers across the chunk loop, one mulf and
    # one addf per row (no fma); the fold of the lanes (one generic) is left as it is.
    check_ir(exe.stages["tiled"], """
        CHECK: scf.for {{.*}} step %c8
        CHECK-COUNT-8: vector.transfer_read {{.*}} : tensor<1x8x16xf32>, vector<1x1x16xf32>
        CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<1x1x16xf32>, vector<1x1x16xf32>, {{.*}}) {
        CHECK-COUNT-8: arith.mulf {{.*}} : vector<1x1x1x16xf32>
        CHECK: scf.yield
        CHECK-COUNT-8: vector.transfer_write {{.*}} : vector<1x1x16xf32>, tensor<1x8x16xf32>
        CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
    """)
    assert exe.stages["tiled"].count("linalg.generic") == 1
    assert "vector.fma" not in exe.stages["tiled"]


def test_matvec_rows_are_vector_code() -> None:
    """A plain [M, K] f32 matrix times a vector (lowering/ops/lane_rows.py): one 16-lane
    accumulator per row, CHAINS rows' accumulators carried by one chunk loop, 16 rows
    folded by 64 shuffles into one vector write; no partials buffer, no fill, no generic."""
    exe = xm.compile(_matvec((40,), 256, np.float32))
    linalg = exe.stages["linalg"]
    assert "linalg.generic" not in linalg and "linalg.fill" not in linalg
    # The whole block of 16 rows: 64; the last 8 rows: fewer (shuffles of zeros fold).
    assert 64 < linalg.count("vector.shuffle") <= 2 * 64
    four = ", ".join(["vector<16xf32>"] * 4)
    check_ir(linalg, """
        CHECK: scf.for {{.*}} = %c0 to %c32 step %c16 iter_args({{.*}}) -> (tensor<40xf32>)
        CHECK-COUNT-4: scf.for {{.*}} = %c0 to %c256 step %c16 iter_args({{.*}}) -> (FOUR)
        CHECK: vector.transfer_write {{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<40xf32>
        CHECK-COUNT-2: scf.for {{.*}} = %c0 to %c256 step %c16 iter_args({{.*}}) -> (FOUR)
        CHECK: vector.transfer_write {{.*}}[%c32] : vector<16xf32>, tensor<40xf32>
    """.replace("FOUR", four))
    bufferized = exe.stages["bufferized"]
    assert "memref<40x16xf32>" not in bufferized and "linalg.fill" not in bufferized
    assert "vector.fma" not in exe.stages["loops"]


def test_converted_operands_keep_the_generics() -> None:
    """bf16 operands widened to f32: the widening stays fused into the generics' loads
    instead of a converted copy of the matrix."""
    linalg = xm.compile(_matvec((40,), 256, np.dtype(ml_dtypes.bfloat16))).stages["linalg"]
    assert "tensor<40x16x16xf32>" in linalg and "vector.shuffle" not in linalg


@pytest.mark.parametrize("k", [64, 70, 48])
def test_short_or_ragged_depths_keep_the_named_op(k: int) -> None:
    linalg = xm.compile(_matvec((8,), k, np.float32)).stages["linalg"]
    assert ("linalg.matvec" in linalg) == (k != 64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.dtype(ml_dtypes.bfloat16), np.float16,
                                   np.int32, np.int64, np.uint8, np.int16])
@pytest.mark.parametrize("lhs_dims", [(), (1,), (33,), (3, 5)])
def test_matches_reference(dtype: np.dtype, lhs_dims: tuple[int, ...]) -> None:
    k = 128
    rng = np.random.default_rng(11)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, (*lhs_dims, k), dtype=dtype, endpoint=True)
        x = rng.integers(info.min, info.max, (k,), dtype=dtype, endpoint=True)
        # Integers wrap in the result type: sum in Python ints, then wrap, compared unsigned.
        bits = 8 * dtype.itemsize
        wide = (a.astype(object) * x.astype(object)).sum(axis=-1) % (1 << bits)
        got = np.asarray(xm.compile(_matvec(lhs_dims, k, dtype))(a, x)).view(f"u{dtype.itemsize}")
        np.testing.assert_array_equal(got.astype(object), wide)
        return
    a = rng.standard_normal((*lhs_dims, k)).astype(dtype)
    x = rng.standard_normal(k).astype(dtype)
    got = np.asarray(xm.compile(_matvec(lhs_dims, k, dtype))(a, x)).astype(np.float64)
    expected = a.astype(np.float64) @ x.astype(np.float64)
    tol = {np.float32: 1e-5, np.float64: 1e-12}.get(dtype.type, 1e-2)
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * 10)


# (lhs, rhs, dimension numbers, numpy's einsum): batched matrix-vector products, the
# vector on either side.
BATCHED = [
    ((2, 3, 40, 64), (2, 3, 64), xm.DotDimensionNumbers((3,), (2,), (0, 1), (0, 1)), "bhmk,bhk->bhm"),
    ((2, 3, 64), (2, 3, 48, 64), xm.DotDimensionNumbers((2,), (3,), (0, 1), (0, 1)), "bhk,bhsk->bhs"),
    ((4, 128), (128,), xm.DotDimensionNumbers((1,), (0,)), "mk,k->m"),
    ((128,), (5, 128), xm.DotDimensionNumbers((0,), (1,)), "k,nk->n"),
    ((6, 80), (6, 80), xm.DotDimensionNumbers((1,), (1,), (0,), (0,)), "bk,bk->b"),
]


@pytest.mark.parametrize("lhs, rhs, dims, spec", BATCHED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_batched_and_vector_lhs_products(lhs: tuple[int, ...], rhs: tuple[int, ...],
                                         dims: xm.DotDimensionNumbers, spec: str, dtype: np.dtype) -> None:
    b = xm.XlaBuilder("bmv")
    x_param, y_param = b.parameter(0, xm.Shape.array(dtype, lhs)), b.parameter(1, xm.Shape.array(dtype, rhs))
    b.dot_general(x_param, y_param, dims)
    exe = xm.compile(b.build())
    # Split in lanes: the chunk loop a reduction, the 16 lanes parallel and innermost.
    assert re.search(r'iterator_types = \[("parallel", )*"reduction", "parallel"\]', exe.stages["linalg"])
    rng = np.random.default_rng(9)
    x = rng.integers(-50, 50, lhs).astype(dtype)
    y = rng.integers(-50, 50, rhs).astype(dtype)
    expected = np.einsum(spec, x.astype(np.int64), y.astype(np.int64))
    np.testing.assert_array_equal(exe(x, y), expected.astype(dtype))  # small integers: exact sums


def test_special_values_propagate() -> None:
    a = np.ones((3, 64), np.float32)
    a[0, 5], a[1, 63], a[2, 0] = np.inf, np.nan, -np.inf
    x = np.ones(64, np.float32)
    x[17] = -0.0
    got = xm.compile(_matvec((3,), 64, np.float32))(a, x)
    np.testing.assert_array_equal(np.isnan(got), [False, True, False])
    assert got[0] == np.inf and got[2] == -np.inf
    zeros = xm.compile(_matvec((), 64, np.float32))(np.full(64, -0.0, np.float32), np.ones(64, np.float32))
    assert np.signbit(zeros) == np.signbit(np.float32(0) + np.float32(-0.0))


def test_large_matvec_rows_split_across_cores() -> None:
    """[1024, 1024] (lane_rows.PARALLEL_MIN_ELEMENTS and more): the blocks of 16 rows on
    the cores, each writing its own 16 elements; the same bits as on one core."""
    exe = xm.compile(_matvec((1024,), 1024, np.float32))
    check_ir(exe.stages["linalg"], """
        CHECK: scf.forall ({{.*}}) in (64) shared_outs({{.*}}) -> (tensor<1024xf32>)
        CHECK: tensor.extract_slice {{.*}} [16] [1] : tensor<1024xf32> to tensor<16xf32>
        CHECK: vector.transfer_write {{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<16xf32>
        CHECK: tensor.parallel_insert_slice {{.*}} [16] [1] : tensor<16xf32> into tensor<1024xf32>
    """)
    rng = np.random.default_rng(4)
    a, x = rng.standard_normal((1024, 1024)).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    got = exe(a, x)
    sequential = xm.compile(_matvec((1024,), 1024, np.float32), xm.Pipeline.default().sequential())
    np.testing.assert_array_equal(got.view(np.uint32), sequential(a, x).view(np.uint32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ x, rtol=1e-4, atol=1e-3)
