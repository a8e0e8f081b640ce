"""A 3x3 NHWC convolution, f32[8,56,56,64] x f32[3,3,64,64] "SAME", against numpy.

numpy has no convolution of its own: its side is the usual im2col form (a padded
copy, a `sliding_window_view` of the 3x3 windows reshaped to a [pixels, 9*64]
matrix, one matmul with the [9*64, 64] kernel on numpy's BLAS). Ours is the
default pipeline as it is (`linalg.conv_2d_nhwc_hwcf` on a zero-padded copy).
Checks the result first, then prints the median of a few timed runs (after a
warm-up) for both and the ratio (ours / numpy). Run from the repository root:
`python bench/conv.py [batch] [padding]`.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from timing import best_of

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


def main(batch: int = 8, padding: str = "SAME", repeats: int = 5) -> None:
    shape, kernel = (batch, 56, 56, 64), (3, 3, 64, 64)
    b = xm.XlaBuilder("conv3x3")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(xm.F32, shape)),
                           b.parameter(1, xm.Shape.array(xm.F32, kernel)), (1, 1), padding,
                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start
    assert "linalg.conv_2d_nhwc_hwcf" in exe.stages["linalg"]

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(kernel, dtype=np.float32)
    expected = numpy_conv(x.astype(np.float64), k.astype(np.float64), padding)
    # Sums of 576 products of unit normals: absolute errors around sqrt(576) * eps(f32).
    np.testing.assert_allclose(exe(x, k), expected, rtol=1e-4, atol=1e-3)

    ours = best_of(lambda: exe(x, k), repeats, 1)
    theirs = best_of(lambda: numpy_conv(x, k, padding), repeats, 1)
    flops = 2 * expected.size * 9 * 64
    print(f"conv {padding} f32[{','.join(map(str, shape))}] x f32[3,3,64,64] NHWC/HWIO "
          f"(compile {compile_s:.2f} s, median of {repeats})")
    print(f"  xlamlir {ours * 1e3:10.2f} ms  {flops / ours / 1e9:8.2f} GFLOP/s")
    print(f"  numpy   {theirs * 1e3:10.2f} ms  {flops / theirs / 1e9:8.2f} GFLOP/s  (im2col + matmul)")
    print(f"  ratio (xlamlir / numpy): {ours / theirs:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, sys.argv[2] if len(sys.argv) > 2 else "SAME")
