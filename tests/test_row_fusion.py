"""Row reductions fused with their consumer into one loop over blocks of rows
(lowering/passes/row_fusion.py): the structure, which producers are left out, and the
same bits as the unfused program for every dtype the schedules take, edge values included."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.lowering.passes import row_fusion
from xlamlir.lowering.passes.row_fusion import fuse_rows


def without_row_fusion() -> xm.Pipeline:
    passes = xm.Pipeline.default().passes("fused")
    k = next(i for i, p in enumerate(passes) if p is fuse_rows)
    return xm.Pipeline.default().replace("fused", passes[:k] + passes[k + 1:])


def layer_norm(dtype: Any, rows: int, cols: int, also_mean: bool = False) -> xm.XlaComputation:
    b = xm.XlaBuilder("layer_norm")
    x = b.parameter(0, xm.Shape.array(dtype, (rows, cols)))
    g = b.parameter(1, xm.Shape.array(dtype, (cols,)))
    beta = b.parameter(2, xm.Shape.array(dtype, (cols,)))
    np_type = np.float64 if dtype == xm.F64 else np.float32
    zero = b.constant(np_type(0))

    def row_sum(v: Any) -> Any:
        return b.reduce(v, zero, lambda a, e: a + e, [1])

    mean = row_sum(x) * (1.0 / cols)
    xc = x - b.broadcast_in_dim(mean, (rows, cols), [0])
    var = row_sum(xc * xc) * (1.0 / cols)
    scale = b.broadcast_in_dim(b.rsqrt(var + 1e-5), (rows, cols), [0])
    out = xc * scale * b.broadcast_in_dim(g, (rows, cols), [1]) + b.broadcast_in_dim(beta, (rows, cols), [1])
    return b.build(b.tuple([out, mean]) if also_mean else out)


def loops_in(stage: str) -> int:
    return len(re.findall(r"scf\.forall \(", stage))


def top_level_generics(stage: str) -> int:
    """linalg ops at the function's top level (4 spaces of indentation)."""
    return len(re.findall(r"^    %\S+ = linalg\.generic", stage, flags=re.M))


def same_bits(comp: xm.XlaComputation, args: list[np.ndarray]) -> Any:
    fused, plain = xm.compile(comp), xm.compile(comp, without_row_fusion())
    got, expected = fused(*args), plain(*args)
    listed = [list(v) if isinstance(v, tuple) else [v] for v in (got, expected)]
    for a, e in zip(*listed):
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))
    return fused, got


def normal(rng: np.random.Generator, dtype: Any, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("rows,cols", [(512, 1024), (1000, 96), (37, 2048), (16384, 64)])
def test_layer_norm_is_one_loop_over_row_blocks_with_the_same_bits(rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows)
    args = normal(rng, np.float32, (rows, cols), (cols,), (cols,))
    exe, got = same_bits(layer_norm(xm.F32, rows, cols), args)
    fused = exe.stages["fused"]
    # The two lane-split sums, their folds and the result: all in the loop.
    assert loops_in(fused) == 1 and top_level_generics(fused) == 0
    # Blocks of rows, not a partial one (static shapes): the block divides the rows.
    block = int(re.search(rf"tensor\.extract_slice %\S+\[%\S+, 0\] \[(\d+), {cols}\]", fused).group(1))
    assert rows % block == 0 and block * cols * 4 <= row_fusion.ROW_BLOCK_BYTES
    # The blocks' reads are vectors (the schedules take strided blocks of rows).
    assert "vector<16xf32>" in exe.stages["vectorized"]
    x, g, beta = (a.astype(np.float64) for a in args)
    xc = x - x.mean(axis=1, keepdims=True)
    reference = xc / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 1e-5) * g + beta
    np.testing.assert_allclose(got, reference, rtol=2e-4, atol=2e-4)


def test_a_value_used_outside_the_loop_is_computed_once_before_it() -> None:
    """The row means are returned too: they stay a generic of their own, which the loop
    reads (fusing them would compute them twice)."""
    rows, cols = 256, 512
    args = normal(np.random.default_rng(3), np.float32, (rows, cols), (cols,), (cols,))
    exe, (out, mean) = same_bits(layer_norm(xm.F32, rows, cols, also_mean=True), args)
    fused = exe.stages["fused"]
    assert loops_in(fused) == 1
    assert top_level_generics(fused) >= 2  # the lane-split sum of x and its fold
    np.testing.assert_allclose(mean, args[0].mean(axis=1), rtol=1e-5, atol=1e-6)


def test_edge_values_in_rows_give_the_same_bits_in_f64() -> None:
    rows, cols = 128, 512
    rng = np.random.default_rng(5)
    x, g, beta = normal(rng, np.float64, (rows, cols), (cols,), (cols,))
    x[0, 3], x[1, 0], x[2, 7], x[3, :] = np.nan, np.inf, -np.inf, -0.0
    x[4, :] = np.finfo(np.float64).max
    exe, got = same_bits(layer_norm(xm.F64, rows, cols), [x, g, beta])
    assert loops_in(exe.stages["fused"]) == 1
    assert np.isnan(got[:3]).all() and not np.isnan(got[5:]).any()


def rows_minus_sum(dtype: Any, np_type: Any, rows: int, cols: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("rows_minus_sum")
    x = b.parameter(0, xm.Shape.array(dtype, (rows, cols)))
    total = b.reduce(x, b.constant(np_type(0)), lambda a, e: a + e, [1])
    return b.build(x * b.constant(np_type(3)) - b.broadcast_in_dim(total, (rows, cols), [0]))


@pytest.mark.parametrize("dtype,np_type", [(xm.S32, np.int32), (xm.S64, np.int64)])
def test_integer_rows_wrap_the_same_with_extremes(dtype: Any, np_type: Any) -> None:
    rows, cols = 256, 256
    info = np.iinfo(np_type)
    x = np.random.default_rng(7).integers(info.min, info.max, (rows, cols), dtype=np_type)
    x[0, :] = info.max
    x[1, :] = info.min
    exe, got = same_bits(rows_minus_sum(dtype, np_type, rows, cols), [x])
    assert loops_in(exe.stages["fused"]) == 1
    with np.errstate(over="ignore"):
        expected = x * np_type(3) - x.sum(axis=1, dtype=np_type)[:, None]
    np.testing.assert_array_equal(got, expected)


def test_column_reductions_and_small_results_are_not_fused() -> None:
    b = xm.XlaBuilder("columns")
    x = b.parameter(0, xm.Shape.array(xm.F32, (512, 256)))
    total = b.reduce(x, b.constant(np.float32(0)), lambda a, e: a + e, [0])
    columns = b.build(x - b.broadcast_in_dim(total, (512, 256), [1]))
    assert loops_in(xm.compile(columns).stages["fused"]) == 0
    small = layer_norm(xm.F32, 16, 64)  # 1,024 elements: all in L1 anyway
    assert loops_in(xm.compile(small).stages["fused"]) == 0
