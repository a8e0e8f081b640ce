"""Transposes that move the minor dimension: vector tiles (lowering/ops/transpose_tiles.py).

Exact against numpy for every element type with a vector form (and the ones without,
which keep linalg.transpose), shapes whose tile dimensions are and are not multiples of
the tile, other dimensions before, between and after them; the same bits on every
target; the IR (vector.transpose, no linalg.transpose) and the fallbacks.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, run, stage_text
from test_targets import TARGETS

import xlamlir as xm
from xlamlir.lowering.ops import transpose_tiles

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.float16, ml_dtypes.bfloat16, np.float32,
          np.int32, np.uint32, np.float64, np.int64, np.uint64, np.bool_, np.complex64]
CASES = [
    ((64, 64), (1, 0)),  # whole tiles of every width
    ((40, 33), (1, 0)),  # masked edge tiles
    ((3, 17, 9, 35), (0, 3, 1, 2)),  # a dimension between the tile dimensions
    ((5, 36, 7, 40), (3, 2, 0, 1)),
    ((33, 2, 48), (2, 1, 0)),
    ((19, 70, 3), (2, 0, 1)),  # minor dimension narrower than a tile: linalg.transpose
    ((19, 70, 3), (1, 2, 0)),  # ... but staying with the one before it: [19, 210] tiled
    # Runs of dimensions that stay together, tiled as one (transpose_tiles.tiled):
    ((40, 12, 3, 3), (2, 3, 1, 0)),  # OIHW -> HWIO: [40, 12, 9] -> [9, 12, 40]
    ((5, 7, 9, 11), (2, 3, 0, 1)),  # [35, 99] -> [99, 35]
    ((6, 4, 40), (2, 0, 1)),  # [24, 40] -> [40, 24]
]


def _values(shape: tuple[int, ...], dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.random.default_rng(1).random(shape) < 0.5
    values = np.arange(int(np.prod(shape))).reshape(shape) % 120 + 1
    return (values + 1j * (values % 7)).astype(dtype) if dtype.kind == "c" else values.astype(dtype)


def _transpose(shape: tuple[int, ...], dtype, perm: tuple[int, ...]) -> xm.XlaComputation:
    b = xm.XlaBuilder("transpose")
    b.transpose(b.parameter(0, xm.Shape.array(xm.type_of(np.dtype(dtype)), shape)), perm)
    return b.build()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_type_and_shape(dtype) -> None:
    for shape, perm in CASES:
        x = _values(shape, dtype)
        got = run(_transpose(shape, dtype, perm), x)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, x.transpose(perm), err_msg=f"{shape} {perm}")


def test_special_float_bits_are_moved_unchanged() -> None:
    """NaN payloads, -0.0, infinities and subnormals: a transpose only moves bits."""
    bits = np.random.default_rng(2).integers(0, 1 << 32, (24, 40), dtype=np.uint64).astype(np.uint32)
    bits[0, :4] = [0x7FC00001, 0xFFC00123, 0x80000000, 0x00000001]  # NaNs, -0, subnormal
    x = bits.view(np.float32)
    got = run(_transpose(x.shape, np.float32, (1, 0)), x)
    np.testing.assert_array_equal(got.view(np.uint32), bits.T)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape, dtype", [
    ((3, 40, 5, 36), np.float16),
    ((2, 301, 3, 275), np.float32),  # from PARALLEL_MIN_BYTES: the cores' slabs
], ids=["small", "parallel"])
def test_same_bits_on_every_target(target: str, shape, dtype) -> None:
    x = _values(shape, dtype)
    got = run(_transpose(x.shape, dtype, (0, 3, 2, 1)), x, target_cpu=target)
    np.testing.assert_array_equal(got, x.transpose(0, 3, 2, 1))


def test_ir_is_vector_tiles() -> None:
    text = stage_text(_transpose((3, 40, 5, 36), np.float32, (0, 3, 2, 1)), "linalg")
    # Whole 8 x 8 f32 tiles: 8 contiguous row reads along x's minor dimension, 3 rounds of
    # 8 two-vector shuffles, 8 contiguous row writes of the result. Then the last 4 columns
    # of x (36 = 32 + 4): masked 8 x 8 transfers around a vector.transpose.
    check_ir(text, """
        CHECK-NOT: linalg.transpose
        CHECK: scf.for
        CHECK-COUNT-8: vector.transfer_read {{.*}} {in_bounds = [true]} : tensor<3x40x5x36xf32>, vector<8xf32>
        CHECK-COUNT-24: vector.shuffle
        CHECK-COUNT-8: vector.transfer_write {{.*}} {in_bounds = [true]} : vector<8xf32>, tensor<3x36x5x40x
        CHECK: vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c32]
        CHECK-SAME: tensor<3x40x5x36xf32>, vector<8x8xf32>
        CHECK-NEXT: vector.transpose %{{.*}}, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
        CHECK-NEXT: vector.transfer_write
        CHECK-SAME: vector<8x8xf32>, tensor<3x36x5x40xf32>
    """)


def test_runs_of_dimensions_are_tiled_as_one() -> None:
    # A convolution's OIHW kernel as HWIO: H and W stay together, a run 9 long (a tile
    # of f32 and an edge), where each alone (3) is narrower than a tile.
    check_ir(stage_text(_transpose((128, 64, 3, 3), np.float32, (2, 3, 1, 0)), "linalg"), r"""
        CHECK-NOT: linalg.transpose
        CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]]
        CHECK-SAME: tensor<128x64x3x3xf32> into tensor<128x64x9xf32>
        CHECK: vector.shuffle
        CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] output_shape [3, 3, 64, 128]
        CHECK-SAME: tensor<9x64x128xf32>
    """)
    b = xm.XlaBuilder("conv")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 16, 10, 10)))
    k = b.parameter(1, xm.Shape.array(xm.F32, (32, 16, 3, 3)))
    b.conv_general_dilated(x, k, (2, 2), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW"))
    assert "linalg.transpose" not in stage_text(b.build(), "linalg")


@pytest.mark.parametrize("shape, perm, dtype", [
    ((19, 70, 3), (2, 0, 1), np.float32),  # the minor dimension is less than a tile
    ((40, 33), (1, 0), np.complex64),  # no vector form
    ((4, 40, 33), (1, 0, 2), np.float32),  # the minor dimension stays: row copies already
])
def test_fallback_is_linalg_transpose(shape, perm, dtype) -> None:
    check_ir(stage_text(_transpose(shape, dtype, perm), "linalg"), """
        CHECK: linalg.transpose
        CHECK-NOT: vector.transpose
    """)


# From PARALLEL_MIN_BYTES the cores split x's minor dimension into slabs of the result:
# chunks of a whole BLOCK (4096), of a divisor of it (520 = 13 x 40), of one tile (536 =
# 67 x 8, then 3 edge columns), with the edge rows and columns after the parallel loop,
# other dimensions before, between and after the tile dimensions.
PARALLEL_CASES = [
    ((136, 4096), (1, 0), np.float32),
    ((1030, 520), (1, 0), np.int8),
    ((1030, 539), (1, 0), np.uint8),
    ((2, 301, 3, 275), (0, 3, 2, 1), np.float32),
    ((3, 136, 5, 203), (3, 0, 2, 1), np.float16),
    ((70, 5, 1037), (2, 1, 0), np.int64),
]


@pytest.mark.parametrize("shape, perm, dtype", PARALLEL_CASES, ids=str)
def test_parallel_slabs_are_exact(shape, perm, dtype) -> None:
    x = _values(shape, dtype)
    assert x.nbytes >= transpose_tiles.PARALLEL_MIN_BYTES
    comp = _transpose(shape, dtype, perm)
    np.testing.assert_array_equal(run(comp, x), x.transpose(perm))
    check_ir(stage_text(comp, "linalg"), """
        CHECK: scf.forall
        CHECK: tensor.extract_slice
        CHECK: vector.shuffle
        CHECK: tensor.parallel_insert_slice
    """)


def test_parallel_result_is_written_in_place() -> None:
    """Each iteration's slab is the result's own memory: no allocation, no copy."""
    bufferized = stage_text(_transpose((1024, 520), np.float32, (1, 0)), "bufferized")
    assert "scf.forall" in bufferized
    assert "memref.alloc" not in bufferized and "memref.copy" not in bufferized


def test_small_transposes_stay_on_the_calling_thread() -> None:
    x = _values((200, 136), np.float32)
    assert x.nbytes < transpose_tiles.PARALLEL_MIN_BYTES
    check_ir(stage_text(_transpose(x.shape, np.float32, (1, 0)), "linalg"), "CHECK-NOT: scf.forall")
