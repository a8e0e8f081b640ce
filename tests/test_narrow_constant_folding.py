"""Narrow-float ops on constants give the bits they give at run time.

Canonicalization folds arith ops whose operands are constants with LLVM's APFloat, whose
narrow-float semantics are not XLA's: a constant inf or NaN converted to f4E2M1FN hit an
`UNREACHABLE` in APFloat and aborted the Python process, f8E8M0FNU(-2) folded to 2 (NaN
at run time), and NaN payloads survived negation and conversion. The narrow floats are
now integer code before the first canonicalize (lowering/passes/soft_float.py,
`expand_narrow_floats`). Each program below computes every op once on a parameter and
once on a splat constant (which the pipeline folds), and the two must agree bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from narrow_support import NARROW_FLOATS, all_bits

import xlamlir as xm

F32_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 3.0, -2.0, 0.1, 1e-40, -1e-40, 1e30, -1e30, np.inf,
                       -np.inf, np.nan, -np.nan, 448.0, 464.0, 57344.0, 61440.0, 6.5, 0.75],
                      np.float32)
INT_VALUES = np.array([0, 1, -1, -2, 3, 7, 1000, -1000, 2**24 + 1, 2**30 + 2**29 + 1], np.int32)


# Zeros, the smallest and largest values, the infinities and NaNs where the types keep them
# (high exponents), of both signs; cut to the type's width (f4E2M1FN: 4 bits).
PATTERNS = [0x00, 0x01, 0x07, 0x08, 0x38, 0x40, 0x77, 0x78, 0x7B, 0x7C, 0x7D, 0x7E, 0x7F, 0x80,
            0x81, 0xB8, 0xFB, 0xFC, 0xFE, 0xFF]


def _patterns(t) -> np.ndarray:
    every = all_bits(t)
    return every[sorted({p % every.size for p in PATTERNS})]


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint8 if x.dtype.itemsize == 1 else f"u{x.dtype.itemsize}")


@pytest.mark.parametrize("t", NARROW_FLOATS, ids=str)
def test_folded_narrow_ops_match_run_time(t):
    dt = xm.dtype_of(t)
    patterns = _patterns(t)
    ops = [
        ("to f32", patterns, lambda b, x: b.convert_element_type(x, np.float32)),
        ("neg", patterns, lambda b, x: b.neg(x)),
        ("x + x", patterns, lambda b, x: b.add(x, x)),
        ("from f32", F32_VALUES, lambda b, x: b.convert_element_type(x, dt)),
        ("from s32", INT_VALUES, lambda b, x: b.convert_element_type(x, dt)),
    ]
    b = xm.XlaBuilder("fold")
    outs = []
    for i, (_, values, fn) in enumerate(ops):
        outs.append(fn(b, b.parameter(i, xm.Shape.array(values.dtype, values.shape))))
        outs += [fn(b, b.broadcast(b.constant(v), [1])) for v in values]
    got = xm.compile(b.build(outs))(*[values for _, values, _ in ops])
    at = 0
    for name, values, _ in ops:
        run_time, folded = got[at], np.concatenate(got[at + 1:at + 1 + values.size])
        at += 1 + values.size
        differ = _bits(run_time) != _bits(folded)
        assert not differ.any(), (f"{name}: inputs {values[differ]} give {run_time[differ]} at run "
                                  f"time, {folded[differ]} folded")
