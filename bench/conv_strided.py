"""Strided and dilated 2-D f32 convolutions (ResNet's downsampling 3x3/2 in NCHW and NHWC,
a dilated 3x3) against JAX: run time (medians) and compile time (wall and process CPU:
the CPU time is what the other users of the machine see).

These take lowering/ops/convolution.py's `_nhwc` path: one strided/dilated
`conv_2d_nhwc_hwcf` on a padded NHWC copy, scheduled by the "tiled" stage. The result is
checked against JAX first. Run from the repository root: `python bench/conv_strided.py`.
"""

from __future__ import annotations

import resource
import time

import numpy as np
from peers import jax, jax_compile
from timing import medians

import xlamlir as xm
from xlamlir.runtime.compiler import clear_cache

NCHW, NHWC = ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")
CASES = {
    # lhs, rhs, strides, padding, dimension numbers, kernel dilation
    "3x3/2 NCHW [8,64,56,56]x[64,64,3,3]": ((8, 64, 56, 56), (64, 64, 3, 3), (2, 2), ((1, 1), (1, 1)), NCHW,
                                           (1, 1)),
    "3x3/2 NHWC [8,56,56,64]x[3,3,64,64]": ((8, 56, 56, 64), (3, 3, 64, 64), (2, 2), ((1, 1), (1, 1)), NHWC,
                                           (1, 1)),
    "3x3 dilation 2 NHWC [8,56,56,64]": ((8, 56, 56, 64), (3, 3, 64, 64), (1, 1), ((2, 2), (2, 2)), NHWC,
                                        (2, 2)),
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(rounds: int = 15) -> None:
    rng = np.random.default_rng(0)
    for name, (ls, rs, strides, padding, dn, dilation) in CASES.items():
        b = xm.XlaBuilder("conv")
        lhs, rhs = b.parameter(0, xm.Shape.array(xm.F32, ls)), b.parameter(1, xm.Shape.array(xm.F32, rs))
        b.conv_general_dilated(lhs, rhs, strides, padding, rhs_dilation=dilation, dimension_numbers=dn)
        clear_cache()
        cpu, wall = _cpu(), time.perf_counter()
        exe = xm.compile(b.build())
        cpu, wall = _cpu() - cpu, time.perf_counter() - wall
        assert "vector.fma" in exe.stages["tiled"], "the convolution schedule did not apply"
        x, k = rng.standard_normal(ls, dtype=np.float32), rng.standard_normal(rs, dtype=np.float32)
        jax_call, jax_s = None, None
        if jax is not None:
            to_numpy, jax_call, jax_s = jax_compile(lambda x, k: jax.lax.conv_general_dilated(
                x, k, strides, padding, rhs_dilation=dilation, dimension_numbers=dn), (x, k))
            np.testing.assert_allclose(exe(x, k), to_numpy(), rtol=1e-4, atol=1e-3)
        ours, theirs = medians([lambda: exe(x, k), jax_call], rounds)
        line = f"{name:38s} ours {ours * 1e3:7.2f} ms, compile {wall:5.2f} s wall {cpu:5.2f} s CPU"
        if theirs is not None:
            line += f"  | jax {theirs * 1e3:7.2f} ms (compile {jax_s:4.2f} s)  ratio {ours / theirs:4.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
