"""Matrix-vector products as row-by-row vector code (lowering/ops/lane_rows.py).

The kernel must give the bits of the generics' lane sums (lowering/ops/dot_lanes.py)
that every other matrix-vector product takes: the same product with a batch dimension
of 1 goes through those generics, so the two are compared bit for bit on every target
CPU, at row counts around the 16-row blocks, with NaN payloads, infinities and -0.0 (one
special value per row: which NaN a sum of several returns is not guaranteed), with the
vector on either side, and with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from targets_support import TARGETS, target_options

import xlamlir as xm
from xlamlir.lowering.ops import lane_rows


def _product(rows: int, k: int, dtype: np.dtype, batch: bool, vector_first: bool) -> xm.XlaComputation:
    """matrix[rows, k] . x[k] (x . matrix^T when `vector_first`), with a leading batch
    dimension of 1 on both operands when `batch`."""
    b = xm.XlaBuilder("mv")
    lead = (1,) if batch else ()
    a = b.parameter(0, xm.Shape.array(dtype, (*lead, rows, k)))
    x = b.parameter(1, xm.Shape.array(dtype, (*lead, k)))
    n = len(lead)
    batch_dims = (tuple(range(n)), tuple(range(n)))
    if vector_first:
        b.dot_general(x, a, xm.DotDimensionNumbers((n,), (n + 1,), *batch_dims))
    else:
        b.dot_general(a, x, xm.DotDimensionNumbers((n + 1,), (n,), *batch_dims))
    return b.build()


def _special_rows(rows: int, k: int, dtype: np.dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, k)).astype(dtype)
    payload = {8: np.uint64(0x7FF4000000000001), 4: np.uint32(0x7FA00001)}[a.dtype.itemsize]
    nan = np.array([payload]).view(a.dtype)[0]
    for r in range(rows):
        if r % 5 < 4:
            a[r, rng.integers(k)] = [nan, np.inf, -np.inf, -0.0][r % 5]
    return a


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, k", [(16, 64), (17, 80), (40, 256), (100, 96), (256, 256)])
@pytest.mark.parametrize("vector_first", [False, True])
def test_bits_equal_the_generics(target: str, dtype: np.dtype, rows: int, k: int, vector_first: bool) -> None:
    a = _special_rows(rows, k, dtype, rows + k)
    x = np.random.default_rng(k).standard_normal(k).astype(dtype)
    x[1] = -0.0
    exe = xm.compile(_product(rows, k, dtype, False, vector_first), **target_options(target))
    assert "vector.shuffle" in exe.stages["linalg"]
    got = np.asarray(exe(a, x))
    generics = xm.compile(_product(rows, k, dtype, True, vector_first), **target_options(target))
    assert "vector.shuffle" not in generics.stages["linalg"]
    np.testing.assert_array_equal(_bits(got), _bits(np.asarray(generics(a[None], x[None]))[0]))
    nan_rows = np.isnan(a).any(axis=-1)
    assert np.isnan(got[nan_rows]).all() and not np.signbit(got[nan_rows]).any()
    finite = np.isfinite(a).all(axis=-1)
    expected = a[finite].astype(np.float64) @ x.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[finite], expected, rtol=tol, atol=tol * 10)


def test_zero_rows_sum_to_positive_zero() -> None:
    a = np.full((20, 64), -0.0, np.float32)
    got = xm.compile(_product(20, 64, np.float32, False, False))(a, np.ones(64, np.float32))
    assert not np.signbit(got).any()  # 0 + -0 = +0, as the generics' fold


@pytest.mark.parametrize("rows, k", [(8, 64), (15, 64), (16, 1024 + 16)])
def test_few_rows_or_long_rows_keep_the_generics(rows: int, k: int) -> None:
    assert "vector.shuffle" not in xm.compile(_product(rows, k, np.float32, False, False)).stages["linalg"]
    assert "vector.shuffle" in xm.compile(_product(16, 1024, np.float32, False, False)).stages["linalg"]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_rows_of_a_product_on_the_cores_take_the_rows(dtype: np.dtype) -> None:
    """K > MAX_DEPTH with M x K >= PARALLEL_MIN_ELEMENTS: the rows' kernel on the cores
    (the generics would run on one), the generics' bits."""
    rows, k = 128, 2064
    assert rows * k >= lane_rows.PARALLEL_MIN_ELEMENTS and k > lane_rows.MAX_DEPTH
    a = _special_rows(rows, k, dtype, 7)
    x = np.random.default_rng(8).standard_normal(k).astype(dtype)
    exe = xm.compile(_product(rows, k, dtype, False, False))
    assert "vector.shuffle" in exe.stages["linalg"] and "scf.forall" in exe.stages["linalg"]
    generics = xm.compile(_product(rows, k, dtype, True, False))
    np.testing.assert_array_equal(_bits(exe(a, x)), _bits(np.asarray(generics(a[None], x[None]))[0]))
