"""f32 sin and cos as vector code (lowering/passes/approximations.py): reduced by pi/2 in
f64, fdlibm's kernels in f64, one rounding; libm only for |x| >= 65536. Checked against
float64 numpy over every binade, at the floats nearest each multiple of pi/2 (where the
reduction loses most), the special values, and for the same bits on every target."""

from __future__ import annotations

import re

import numpy as np
import pytest
from polynomial_support import assert_same_bits_everywhere, ulp_error, unary

import xlamlir as xm
from xlamlir.lowering.passes import approximations

F32 = xm.F32
LIMIT = approximations._TRIG_LIMIT


def near_multiples_of_half_pi() -> np.ndarray:
    """The two floats around k pi/2 for every k the reduction serves (|x| < LIMIT)."""
    k = np.arange(1, int(LIMIT / (np.pi / 2)) + 1, dtype=np.float64)
    centers = (k * (np.pi / 2)).astype(np.float32)
    x = np.concatenate([centers, np.nextafter(centers, np.float32(np.inf)),
                        np.nextafter(centers, np.float32(0))])
    x = x[np.abs(x) < LIMIT]
    return np.concatenate([x, -x])


def every_binade(n: int, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 0x7F800000, n, dtype=np.int64).astype(np.uint32)
    x = bits.view(np.float32)
    return np.where(np.random.default_rng(seed + 1).integers(0, 2, n) == 1, -x, x)


@pytest.mark.parametrize("method", ["sin", "cos"])
def test_within_one_ulp(method: str) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([every_binade(300_000, 1), near_multiples_of_half_pi(),
                        rng.uniform(-10, 10, 100_000).astype(np.float32),
                        rng.uniform(-LIMIT * 2, LIMIT * 2, 2_000).astype(np.float32)])
    got = unary(method, x.shape)(x)
    exact = getattr(np, method)(x.astype(np.float64))
    error = ulp_error(got, exact)
    assert error.max() <= 1.0, (error.max(), x[np.argmax(error)])


@pytest.mark.parametrize("method", ["sin", "cos"])
def test_the_polynomial_replaces_libm_in_the_vector_loop(method: str) -> None:
    exe = unary(method, (4096,))
    loops = exe.stages["loops"]
    # libm remains only in the rare branch for huge arguments, on scalars.
    assert re.search(rf"math\.{method} %\S+ : f32", loops)
    assert not re.search(rf"math\.{method} %\S+ : vector", loops)
    assert "vector.reduction <or>" in loops


@pytest.mark.parametrize("method", ["sin", "cos"])
def test_special_values(method: str) -> None:
    x = np.float32([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 1e-30, 3.4e38, -3.4e38, LIMIT,
                    np.nextafter(np.float32(LIMIT), np.float32(0)), 1e9])
    with np.errstate(invalid="ignore"):
        want = getattr(np, method)(x)
    got = unary(method, x.shape)(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert (ulp_error(got[finite], getattr(np, method)(x[finite].astype(np.float64))) <= 1).all()
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want[:2]))  # sin(-0) = -0
    # inf gives x86's default NaN (inf - inf), as libm does.
    assert (got[2:4].view(np.uint32) == 0xFFC00000).all()


@pytest.mark.parametrize("method", ["sin", "cos"])
def test_nan_operand_is_the_result_quieted(method: str) -> None:
    bits = np.uint32([0x7FC00001, 0xFFC12345, 0x7F800001, 0xFFBFFFFF])
    got = unary(method, bits.shape)(bits.view(np.float32)).view(np.uint32)
    np.testing.assert_array_equal(got, bits | 0x00400000)


@pytest.mark.parametrize("method", ["sin", "cos"])
def test_same_bits_scalar_vector_and_every_target(method: str) -> None:
    x = np.concatenate([every_binade(997, 5), near_multiples_of_half_pi()[::500],
                        np.float32([0.0, -0.0, 1.0, 1e6, -2e7])])
    assert_same_bits_everywhere(method, x, stride=41)
