"""gather whose output rows are contiguous runs of the operand: vector row copies
(lowering/ops/indexing.py, `_gather_rows`).

Exact against the seeds' definition (test_gather_scatter.ref_gather) for every element
type, rows of whole and partial vectors, starts clamped along the minor dimension too,
several batch and offset dimensions, operand batching dimensions, every index type with
out-of-range starts; the IR (one index computation per row, vector copies); the forms
that keep the per-element generic.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir, stage_text
from test_gather_scatter import ALL_DTYPES, GD, INDEX_TYPES, _values, ref_gather

import xlamlir as xm

CASES = [
    # operand dims, indices dims, dimension numbers, slice sizes
    ((50, 64), (37, 1), GD((1,), (0,), (0,), 1), (1, 64)),  # embedding lookup, whole vectors
    ((50, 70), (37, 1), GD((1,), (0,), (0,), 1), (1, 70)),  # a masked last vector
    ((20, 50), (5, 3, 2), GD((2,), (0,), (0, 1), 2), (1, 40)),  # minor start clamped to [0, 10]
    ((9, 3, 40), (4, 6), GD((2, 3), (0,), (0,), 2), (1, 3, 40)),  # index_vector_dim == rank
    ((3, 7, 48), (3, 5, 1), GD((2,), (1,), (1,), 2, (0,), (0,)), (1, 1, 48)),  # batching dims
]


def _gather(x: np.ndarray, indices: np.ndarray, dn: GD, sizes) -> xm.XlaComputation:
    b = xm.XlaBuilder("gather")
    p = b.parameter(0, xm.Shape.array(xm.type_of(x.dtype), x.shape))
    i = b.parameter(1, xm.Shape.array(xm.type_of(indices.dtype), indices.shape))
    b.gather(p, i, dn, sizes)
    return b.build()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_against_reference(dtype) -> None:
    for k, (operand_dims, index_dims, dn, sizes) in enumerate(CASES):
        x = _values(np.dtype(dtype), operand_dims, seed=k)
        rng = np.random.default_rng(k)
        indices = rng.integers(-3, max(operand_dims) + 3, index_dims).astype(np.int32)
        got = xm.compile(_gather(x, indices, dn, sizes))(x, indices)
        np.testing.assert_array_equal(got, ref_gather(x, indices, dn, sizes), err_msg=str(k))


@pytest.mark.parametrize("index_type", INDEX_TYPES, ids=lambda d: np.dtype(d).name)
def test_index_types_clamp(index_type) -> None:
    info = np.iinfo(index_type)
    x = _values(np.dtype(np.float32), (30, 50), seed=1)
    dn = GD((1,), (0,), (0, 1), 1)
    starts = np.array([[info.min, info.max], [info.max, 3], [1, info.min], [29, 49], [0, 0]],
                      dtype=index_type)
    got = xm.compile(_gather(x, starts, dn, (1, 24)))(x, starts)
    np.testing.assert_array_equal(got, ref_gather(x, starts, dn, (1, 24)))


def test_ir_one_start_per_row_and_vector_copies() -> None:
    x = np.zeros((100, 64), np.float32)
    indices = np.zeros((512, 1), np.int32)
    text = stage_text(_gather(x, indices, GD((1,), (0,), (0,), 1), (1, 64)), "linalg")
    # Rows across the cores; the start index read and clamped once per row, then the row
    # copied 16 elements at a time (no tensor.extract of operand elements).
    check_ir(text, """
        CHECK-NOT: linalg.generic
        CHECK: scf.forall (%[[ROW:.*]]) in (512)
        CHECK: tensor.extract %{{.*}}[%[[ROW]], %{{.*}}] : tensor<512x1xi32>
        CHECK: arith.minsi
        CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %c16
        CHECK-NOT: tensor.extract
        CHECK: vector.transfer_read {{.*}} {in_bounds = [true]} : tensor<100x64xf32>, vector<16xf32>
        CHECK: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x64xf32>
        CHECK: tensor.parallel_insert_slice
    """)


@pytest.mark.parametrize("operand_dims, index_dims, dn, sizes, dtype", [
    ((50, 64), (37, 1), GD((0,), (1,), (1,), 1), (50, 1), np.float32),  # minor dim collapsed
    ((50, 6), (37, 1), GD((1,), (0,), (0,), 1), (1, 6), np.float32),  # rows shorter than 8
    ((50, 64), (37, 1), GD((1,), (0,), (0,), 1), (1, 64), np.complex64),  # no vector form
])
def test_other_gathers_keep_the_generic(operand_dims, index_dims, dn, sizes, dtype) -> None:
    x = np.zeros(operand_dims, dtype)
    indices = np.zeros(index_dims, np.int32)
    check_ir(stage_text(_gather(x, indices, dn, sizes), "linalg"), """
        CHECK: linalg.generic
        CHECK-NOT: vector.transfer_read
    """)
