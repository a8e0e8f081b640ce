"""Helpers of the math-polynomial tests (test_log_polynomials, test_trig_polynomials,
test_f64_polynomials): a one-op program, ulp errors, and the same-bits check."""

from __future__ import annotations

import numpy as np
from targets_support import TARGETS, target_options

import xlamlir as xm


def unary(method: str, shape: tuple[int, ...], element: xm.PrimitiveType = xm.F32,
          **options: object) -> xm.Executable:
    b = xm.XlaBuilder(method)
    getattr(b, method)(b.parameter(0, xm.Shape.array(element, shape)))
    return xm.compile(b.build(), **options)


def ulp_error(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|actual - exact| in ulps of f32 at the exact value (subnormal spacing below)."""
    rounded = exact.astype(np.float32)
    ulp = np.maximum(np.spacing(np.abs(rounded)).astype(np.float64), float(np.spacing(np.float32(0))))
    return np.abs(actual.astype(np.float64) - exact) / ulp


def assert_same_bits_everywhere(method: str, x: np.ndarray, element: xm.PrimitiveType = xm.F32,
                                stride: int = 37) -> None:
    """`method` of `x` gives the same bits as a vector program, as a scalar one (every
    `stride`-th value) and for every target CPU."""
    view = np.uint64 if x.dtype == np.float64 else np.uint32
    want = unary(method, x.shape, element)(x)
    scalar = unary(method, (), element)
    np.testing.assert_array_equal(np.array([scalar(v) for v in x[::stride]]).view(view),
                                  want[::stride].view(view))
    for target in TARGETS:
        got = unary(method, x.shape, element, **target_options(target))(x)
        np.testing.assert_array_equal(got.view(view), want.view(view), err_msg=target)
