"""f64 exp, log and tanh as vector code (lowering/passes/approximations.py: fdlibm's
e_exp.c and e_log.c, Cephes' tanh.c) instead of one libm call per element: within 1 ulp
(tanh 1.5) against a 50-digit decimal reference, the special values, NaN bits,
subnormals, and the same bits scalar or vector on every target."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import polynomial_support
import pytest

import xlamlir as xm

F64 = xm.F64


def unary(method: str, shape: tuple[int, ...], **options: object) -> xm.Executable:
    return polynomial_support.unary(method, shape, F64, **options)


def ulp_errors(got: np.ndarray, x: np.ndarray, exact: Callable[[Decimal], Decimal]) -> np.ndarray:
    errors = []
    with decimal.localcontext() as context:
        context.prec = 50
        for g, v in zip(got.tolist(), x.tolist()):
            e = exact(Decimal(v))
            nearest = float(e)
            spacing = float(np.spacing(abs(nearest))) if nearest else float(np.spacing(0.0))
            errors.append(float(abs(Decimal(g) - e) / Decimal(spacing)))
    return np.array(errors)


def test_exp_within_one_ulp() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-745, 709.7, 3000), rng.uniform(-1, 1, 1000),
                        rng.uniform(-745.1, -708, 1000),  # subnormal results
                        rng.uniform(-1e-8, 1e-8, 200), [709.78, -745.13, 1e-300, -1e-300]])
    exe = unary("exp", x.shape)
    assert "math.exp" not in exe.stages["loops"] and "llvm.intr.exp" not in exe.stages["llvm"]
    error = ulp_errors(exe(x), x, lambda d: d.exp())
    assert error.max() <= 1.0, (error.max(), x[np.argmax(error)])


def test_log_within_one_ulp_over_every_binade() -> None:
    bits = np.random.default_rng(2).integers(1, 0x7FF0000000000000, 5000, dtype=np.int64)
    x = np.concatenate([bits.view(np.float64), [5e-324, 2.2250738585072014e-308, 1.0, 2.0, 0.5,
                                                 np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0)]])
    exe = unary("log", x.shape)
    assert "math.log" not in exe.stages["loops"] and "llvm.intr.log" not in exe.stages["llvm"]
    error = ulp_errors(exe(x), x, lambda d: d.ln())
    assert error.max() <= 1.0, (error.max(), x[np.argmax(error)])


def _tanh(d: Decimal) -> Decimal:
    if abs(d) < Decimal("1e-6"):  # (e^2x - 1) / (e^2x + 1) would cancel to 0 at 50 digits
        return d - d**3 / 3 + 2 * d**5 / 15
    e2 = (2 * d).exp()
    return (e2 - 1) / (e2 + 1)


def test_tanh_within_one_and_a_half_ulp() -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-25, 25, 2000), rng.uniform(-1, 1, 2000), rng.uniform(0.6, 0.7, 500),
                        rng.uniform(-1e-7, 1e-7, 200), [0.625, np.nextafter(0.625, 1.0), 21.99, 1e-300]])
    exe = unary("tanh", x.shape)
    assert "math.tanh" not in exe.stages["loops"]
    error = ulp_errors(exe(x), x, _tanh)
    assert error.max() <= 1.5, (error.max(), x[np.argmax(error)])


SPECIAL = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, 1.0, 5e-324, 710.0, -746.0, 709.78, -745.13, -1e-300])


@pytest.mark.parametrize("method", ["exp", "log", "tanh"])
def test_special_values(method: str) -> None:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want = getattr(np, method)(SPECIAL)
    got = unary(method, SPECIAL.shape)(SPECIAL)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    same = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[same], want[same])
    np.testing.assert_allclose(got[~same], want[~same], rtol=4e-16)
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want[:2]))  # tanh(-0) = -0
    invalid = np.isnan(want)
    assert (got[invalid].view(np.uint64) == 0xFFF8000000000000).all()  # x86's default NaN


@pytest.mark.parametrize("method", ["exp", "log", "tanh"])
def test_nan_operand_is_the_result_quieted(method: str) -> None:
    bits = np.array([0x7FF8000000000001, 0xFFF0000000000123, 0x7FF4000000000000], np.uint64)
    got = unary(method, bits.shape)(bits.view(np.float64)).view(np.uint64)
    np.testing.assert_array_equal(got, bits | np.uint64(0x0008000000000000))


@pytest.mark.parametrize("method", ["exp", "log", "tanh"])
def test_same_bits_scalar_vector_and_every_target(method: str) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.integers(1, 0x7FF0000000000000, 997, dtype=np.int64).view(np.float64)
                        if method == "log" else rng.uniform(-745, 709, 997), SPECIAL])
    polynomial_support.assert_same_bits_everywhere(method, x, F64)
