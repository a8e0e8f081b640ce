"""f32 log and log1p as polynomials (lowering/passes/approximations.py) instead of one
libm call per element: accuracy over every binade (subnormals included), the special
values of SEMANTICS.md, NaN bits, and the same bits scalar or vector, on every target."""

from __future__ import annotations

import numpy as np
import pytest
from polynomial_support import assert_same_bits_everywhere, ulp_error, unary

import xlamlir as xm

F32 = xm.F32


def positive_floats(n: int, seed: int) -> np.ndarray:
    """Random bit patterns of every positive finite float: each binade equally often."""
    bits = np.random.default_rng(seed).integers(1, 0x7F800000, n, dtype=np.int64)
    return bits.astype(np.uint32).view(np.float32)


def test_log_within_one_ulp_everywhere() -> None:
    x = np.concatenate([positive_floats(400_000, 1), np.float32([1, 2, 0.5, 1e-45, 3.4e38]),
                        np.random.default_rng(2).uniform(0.5, 2, 100_000).astype(np.float32)])
    exe = unary("log", x.shape)
    assert "math.log" not in exe.stages["loops"] and "logf" not in exe.stages["llvm"]
    error = ulp_error(exe(x), np.log(x.astype(np.float64)))
    assert error.max() <= 1.0, (error.max(), x[np.argmax(error)])


def test_log1p_within_three_ulp_and_exact_near_zero() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-1, 1, 200_000), rng.uniform(-1e-6, 1e-6, 50_000),
                        10.0 ** rng.uniform(-38, 38, 100_000), -(10.0 ** rng.uniform(-38, -0.01, 50_000)),
                        [1e-45, -1e-45, 1e-30, 2.0**-24, -(2.0**-25)]]).astype(np.float32)
    exe = unary("log1p", x.shape)
    assert "math.log1p" not in exe.stages["loops"] and "log1pf" not in exe.stages["llvm"]
    got = exe(x)
    error = ulp_error(got, np.log1p(x.astype(np.float64)))
    assert error.max() <= 3.0, (error.max(), x[np.argmax(error)])
    tiny = np.abs(x) < 2.0**-25  # 1 + x rounds to 1: log1p(x) is x, exactly
    np.testing.assert_array_equal(got[tiny], x[tiny])


SPECIAL = np.float32([0.0, -0.0, -1.0, -1e-45, np.inf, -np.inf, 1.0, 1e-45, 3.4e38, -2.0])


@pytest.mark.parametrize("method", ["log", "log1p"])
def test_special_values(method: str) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        want = getattr(np, method)(SPECIAL)
    got = unary(method, SPECIAL.shape)(SPECIAL)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # log1p(-0) = -0
    # An invalid argument gives x86's default NaN (negative, quiet), as libm did.
    invalid = np.isnan(want)
    assert invalid.any() and (got[invalid].view(np.uint32) == 0xFFC00000).all()


@pytest.mark.parametrize("method", ["log", "log1p"])
def test_nan_operand_is_the_result_quieted(method: str) -> None:
    bits = np.uint32([0x7FC00001, 0xFFC12345, 0x7F800001, 0xFFBFFFFF, 0x7FFFFFFF])
    got = unary(method, bits.shape)(bits.view(np.float32)).view(np.uint32)
    np.testing.assert_array_equal(got, bits | 0x00400000)


@pytest.mark.parametrize("method", ["log", "log1p"])
def test_same_bits_scalar_vector_and_every_target(method: str) -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([positive_floats(997, 5), rng.uniform(-1, 1, 1000).astype(np.float32), SPECIAL])
    assert_same_bits_everywhere(method, x)


@pytest.mark.parametrize(("element", "mantissa_bits"), [(xm.F16, 10), (xm.BF16, 7)])
def test_half_types_are_computed_through_the_f32_polynomial(element: object, mantissa_bits: int) -> None:
    dtype = xm.dtype_of(element)
    x = np.random.default_rng(6).uniform(0.01, 100, 4096).astype(dtype)
    b = xm.XlaBuilder("log16")
    b.log(b.parameter(0, xm.Shape.array(element, x.shape)))
    exe = xm.compile(b.build())
    assert "logf" not in exe.stages["llvm"]
    exact = np.log(x.astype(np.float64))
    got = exe(x).astype(np.float64)
    # Within one ulp of the half type (f32 within 1 ulp, then one rounding).
    assert (np.abs(got - exact) <= np.abs(exact) * 2.0**-mantissa_bits + 1e-30).all()
