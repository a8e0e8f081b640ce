"""FFT of f32[n] (n = 2**20 by default) made complex (`complex(x, 0)` in the computation,
so c64) against numpy.fft.fft of the same c64 array.

Checks the result against numpy in complex128 first, then prints the median of a
few timed runs after a warm-up for both, and the ratio (ours / numpy). A power of
two goes through the four-step Stockham path of lowering/ops/fft.py; any other n
(e.g. `python bench/fft.py 1000003`) through Bluestein. Run with
`python bench/fft.py [n]`.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from timing import median_time

import xlamlir as xm


def main(n: int = 1 << 20, repeats: int = 7) -> None:
    b = xm.XlaBuilder("fft")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
    b.fft(b.complex(x, b.constant(np.float32(0))), "FFT", (n,))
    start = time.perf_counter()
    exe = xm.compile(b.build())
    compile_s = time.perf_counter() - start

    signal = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    as_c64 = signal.astype(np.complex64)
    expected = np.fft.fft(signal.astype(np.complex128))
    error = np.abs(exe(signal) - expected).max() / np.abs(expected).max()
    assert error < 1e-5, f"relative error {error:.2e}"

    ours = median_time(lambda: exe(signal), repeats)
    theirs = median_time(lambda: np.fft.fft(as_c64), repeats)
    print(f"fft c64[{n}] (complex of an f32 input; compile {compile_s:.2f} s, median of {repeats}, "
          f"max relative error {error:.1e})")
    print(f"  xlamlir {ours * 1e3:10.2f} ms")
    print(f"  numpy   {theirs * 1e3:10.2f} ms")
    print(f"  ratio (xlamlir / numpy): {ours / theirs:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20)
