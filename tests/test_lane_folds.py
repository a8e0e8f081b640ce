"""Matrix-vector products' folds of 16 lanes per row as 16 x 16 transposes
(lowering/passes/lane_folds.py) and a while body's fixed-size temporaries allocated once
(buffer-loop-hoisting).

The IR tests show the fold's shuffles instead of gathers and no allocation left in a
while body; the numeric tests compare the transposed fold bit for bit with the generic
fold it replaces (the same pipeline without the pass), on every target CPU, at row
counts around the 16-row blocks, with NaN, infinities and -0.0, and with numpy.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS, target_options
from test_aligned_loop_inputs import rnn

import xlamlir as xm
from xlamlir.lowering.passes.lane_folds import transposed_lane_folds


def _matvec(rows: tuple[int, ...], k: int, dtype: np.dtype) -> xm.XlaComputation:
    b = xm.XlaBuilder("mv")
    a = b.parameter(0, xm.Shape.array(dtype, (*rows, k)))
    x = b.parameter(1, xm.Shape.array(dtype, (k,)))
    b.dot_general(a, x, xm.DotDimensionNumbers((len(rows),), (0,), (), ()))
    return b.build()


def _row_sums(rows: int, k: int, dtype: np.dtype) -> xm.XlaComputation:
    b = xm.XlaBuilder("rows")
    x = b.parameter(0, xm.Shape.array(dtype, (rows, k)))
    b.reduce(x, b.constant(np.zeros((), dtype)), lambda p, q: p.builder.add(p, q), [1])
    return b.build()


def _without_pass() -> xm.Pipeline:
    p = xm.Pipeline.default()
    return p.replace("vectorized", [s for s in p.passes("vectorized") if s is not transposed_lane_folds])


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def test_matvec_fold_is_shuffles_not_gathers() -> None:
    # [2, 128, K]: the generics' path (a plain [M, K] matrix is lowering/ops/lane_rows.py's).
    exe = xm.compile(_matvec((2, 128), 256, np.float32))
    assert "vector.shuffle" not in exe.stages["bufferized"]
    vectorized = exe.stages["vectorized"]
    # One block of 16 rows: 16 row loads, 4 rounds of 16 shuffles, y's vector and 16 adds.
    assert vectorized.count("vector.shuffle") == 64
    assert re.search(r"scf.for %\w+ = %c0 to %c256 step %c16", vectorized)
    assert '["parallel", "reduction"]' not in vectorized
    assert "linalg.generic" not in vectorized.split("vector.shuffle")[0].split("step %c16")[-1]


def test_fewer_than_16_rows_keep_the_generic() -> None:
    vectorized = xm.compile(_matvec((15,), 64, np.float32)).stages["vectorized"]
    assert "vector.shuffle" not in vectorized


def test_rnn_body_allocates_nothing_and_runs_on_the_calling_thread() -> None:
    exe = xm.compile(rnn(3, 256))
    bufferized = exe.stages["bufferized"]
    body = bufferized[bufferized.index("} do {"):]
    assert "memref.alloc" not in body, "a while body's temporaries are allocated before the loop"
    assert "memref.alloc" in bufferized[:bufferized.index("} do {")]
    # A 256 x 256 matrix-vector product per step is too little work to wake the thread pool.
    assert "scf.forall" not in bufferized and "scf.parallel" not in exe.stages["loops"]
    assert "async" not in exe.stages["llvm"]


def test_rnn_matches_numpy() -> None:
    steps, n = 7, 256
    rng = np.random.default_rng(3)
    w, u = (rng.standard_normal((n, n)).astype(np.float32) / np.float32(16) for _ in range(2))
    xs, h = rng.standard_normal((steps, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    got = xm.compile(rnn(steps, n))(w, u, xs, h)
    expected = h.astype(np.float64)
    for x_t in xs.astype(np.float64):
        expected = np.tanh(w.astype(np.float64) @ expected + u.astype(np.float64) @ x_t)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _special(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Normal values with at most one special value per row (NaN with a payload, +-inf or
    -0.0): which NaN a sum of several returns is not guaranteed (docs/numerics.md), one
    NaN is returned quieted."""
    a = rng.standard_normal(shape).astype(dtype)
    rows = a.reshape(-1, shape[-1])
    payload = {8: np.uint64(0x7FF4000000000001), 4: np.uint32(0x7FA00001), 2: np.uint16(0x7FA1)}
    nan = np.array([payload[a.dtype.itemsize]]).view(a.dtype)[0]  # a signalling NaN with a payload
    for r in range(rows.shape[0]):
        kind = r % 5
        if kind < 4:
            rows[r, rng.integers(shape[-1])] = [nan, np.inf, -np.inf, -0.0][kind]
    return a


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # bf16 signalling NaNs
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.dtype(ml_dtypes.bfloat16)])
@pytest.mark.parametrize("rows", [(16,), (17,), (45,), (3, 11), (2, 3, 16)])
def test_matvec_bits_equal_the_generic_fold(target: str, dtype: np.dtype, rows: tuple[int, ...]) -> None:
    k = 80
    rng = np.random.default_rng(sum(rows) + k)
    a, x = _special((*rows, k), dtype, rng), rng.standard_normal(k).astype(dtype)
    x[3] = -0.0
    comp = _matvec(rows, k, dtype)
    exe = xm.compile(comp, **target_options(target))
    assert "vector.shuffle" in exe.stages["vectorized"]
    got = np.asarray(exe(a, x))
    generic = xm.compile(comp, **target_options(target, _without_pass()))
    np.testing.assert_array_equal(_bits(got), _bits(generic(a, x)))
    finite = np.isfinite(a).all(axis=-1)
    expected = a.astype(np.float64) @ x.astype(np.float64)
    tol = {np.float32: 1e-4, np.float64: 1e-12}.get(np.dtype(dtype).type, 3e-2)
    np.testing.assert_allclose(got.astype(np.float64)[finite], expected[finite], rtol=tol, atol=tol * 10)
    assert np.isnan(got.astype(np.float64)[np.isnan(a).any(axis=-1)]).all()
    assert not np.signbit(got[np.isnan(a).any(axis=-1)]).any()  # the lone NaN's sign, kept


def test_reduce_folds_keep_the_generic() -> None:
    """A reduce's lane fold is not marked: it stays a generic (module docstring)."""
    exe = xm.compile(_row_sums(64, 256, np.float32))
    assert "vector.shuffle" not in exe.stages["vectorized"]
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    np.testing.assert_allclose(exe(x), x.astype(np.float64).sum(axis=-1), rtol=1e-5, atol=1e-4)


def test_zero_and_negative_zero_rows() -> None:
    a = np.full((32, 64), -0.0, np.float32)
    x = np.ones(64, np.float32)
    got = xm.compile(_matvec((32,), 64, np.float32))(a, x)
    # The sum starts at +0: +0 + -0 = +0, as the generic fold computes it.
    assert not np.signbit(got).any()
