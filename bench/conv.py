"""A 3x3 NHWC convolution, f32[8,56,56,64] x f32[3,3,64,64] "SAME", against numpy (and JAX).

numpy has no convolution of its own: its side is the usual im2col form (a padded
copy, a `sliding_window_view` of the 3x3 windows reshaped to a [pixels, 9*64]
matrix, one matmul with the [9*64, 64] kernel on numpy's BLAS). Ours is the
default pipeline: `linalg.conv_2d_nhwc_hwcf` on a zero-padded copy, scheduled by
the "tiled" stage (split across cores by batch, 6 pixels x 16 channels register
tiles, vectorized 1-D convolutions; lowering/passes/schedules.py). Checks the result
first, then times ours, numpy and JAX (each in its own block of calls) and reports medians.
`workloads()` is what bench/suite.py runs for this row. Run from the repository
root: `python bench/conv.py [batch] [padding]`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from peers import jax, jax_compile
from timing import Measurement, Workload, compile_ours, medians

import xlamlir as xm


def numpy_conv(x: np.ndarray, k: np.ndarray, padding: str) -> np.ndarray:
    """im2col + matmul: the 3x3 windows of the (padded) input times the flattened kernel."""
    if padding == "SAME":
        x = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, w, c = x.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))  # n,oh,ow,c,3,3
    oh, ow = windows.shape[1:3]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, 9 * c)
    return (cols @ k.reshape(9 * c, -1)).reshape(n, oh, ow, -1)


def conv3x3(batch: int = 8, padding: str = "SAME", rounds: int = 7) -> Measurement:
    shape, kernel = (batch, 56, 56, 64), (3, 3, 64, 64)
    b = xm.XlaBuilder("conv3x3")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(xm.F32, shape)),
                           b.parameter(1, xm.Shape.array(xm.F32, kernel)), (1, 1), padding,
                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
    (exe,), compile_s = compile_ours(b.build())
    assert "vector.fma" in exe.stages["tiled"], "the convolution schedule did not apply"

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(kernel, dtype=np.float32)
    expected = numpy_conv(x.astype(np.float64), k.astype(np.float64), padding)
    # Sums of 576 products of unit normals: absolute errors around sqrt(576) * eps(f32).
    np.testing.assert_allclose(exe(x, k), expected, rtol=1e-4, atol=1e-3)
    jax_call = jax_compile_s = None
    if jax is not None:
        to_numpy, jax_call, jax_compile_s = jax_compile(lambda x, k: jax.lax.conv_general_dilated(
            x, k, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")), (x, k))
        np.testing.assert_allclose(to_numpy(), expected, rtol=1e-4, atol=1e-3)
    ours, theirs, jax_s = medians([lambda: exe(x, k), lambda: numpy_conv(x, k, padding), jax_call], rounds)
    return Measurement(ours_s=ours, numpy_s=theirs, jax_s=jax_s, compile_s=compile_s,
                       work=2 * expected.size * 9 * 64, unit="GFLOP/s", jax_compile_s=jax_compile_s)


def workloads() -> list[Workload]:
    """The issue's convolution row, for bench/suite.py."""
    return [Workload("conv 3x3 NHWC [8,56,56,64]x[3,3,64,64] SAME", conv3x3, 18.8e-3)]


def main(batch: int = 8, padding: str = "SAME") -> None:
    r: Any = conv3x3(batch, padding)
    gflop = r.work / 1e9
    print(f"conv {padding} f32[{batch},56,56,64] x f32[3,3,64,64] NHWC/HWIO "
          f"(compile {r.compile_s * 1e3:.0f} ms, medians)")
    print(f"  xlamlir {r.ours_s * 1e3:10.2f} ms  {gflop / r.ours_s:8.2f} GFLOP/s")
    print(f"  numpy   {r.numpy_s * 1e3:10.2f} ms  {gflop / r.numpy_s:8.2f} GFLOP/s  (im2col + matmul)")
    if r.jax_s is not None:
        print(f"  jax     {r.jax_s * 1e3:10.2f} ms  {gflop / r.jax_s:8.2f} GFLOP/s")
    print(f"  ratio (xlamlir / numpy): {r.ours_s / r.numpy_s:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, sys.argv[2] if len(sys.argv) > 2 else "SAME")
