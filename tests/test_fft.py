"""Tests of fft: numerics against numpy.fft, shape rules, the lowering's IR.

The reference is numpy.fft in float64/complex128 (fftn/ifftn/rfftn/irfftn over the
trailing axes). Lengths cover the three algorithms of the lowering: powers of two
(Stockham; the last axis by the four-step method), short other lengths (direct
DFT) and longer ones (Bluestein). Errors are measured relative to the largest
output magnitude: ~1e-6 for c64, ~1e-13 for c128.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir, stage_text

import xlamlir as xm

TOL = {np.complex64: 2e-6, np.complex128: 1e-13, np.float32: 2e-6, np.float64: 1e-13}
REAL_OF = {np.complex64: np.float32, np.complex128: np.float64}


def build(shape: xm.Shape, kind: str, lengths) -> xm.XlaComputation:
    b = xm.XlaBuilder("fft")
    b.fft(b.parameter(0, shape), kind, lengths)
    return b.build()


def run(x: np.ndarray, kind: str, lengths) -> np.ndarray:
    return xm.compile(build(xm.Shape.array(xm.type_of(x.dtype), x.shape), kind, lengths))(x)


def reference(x: np.ndarray, kind: str, lengths) -> np.ndarray:
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if kind == "FFT":
        return np.fft.fftn(wide, axes=axes)
    if kind == "IFFT":
        return np.fft.ifftn(wide, axes=axes)
    if kind == "RFFT":
        return np.fft.rfftn(wide, axes=axes)
    return np.fft.irfftn(wide, s=lengths, axes=axes)


def operand(kind: str, dims: tuple[int, ...], lengths, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dims = list(dims)
    if kind == "RFFT":
        return rng.standard_normal(dims).astype(REAL_OF[dtype])
    if kind == "IRFFT":
        dims[-1] = lengths[-1] // 2 + 1
    return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)


def check(x: np.ndarray, kind: str, lengths, dtype) -> None:
    out = run(x, kind, lengths)
    ref = reference(x, kind, lengths)
    assert out.shape == ref.shape
    expected_dtype = REAL_OF[dtype] if kind == "IRFFT" else dtype
    assert out.dtype == expected_dtype
    scale = max(1.0, float(np.abs(ref).max()))
    assert float(np.abs(out - ref).max()) <= TOL[dtype] * scale, (kind, x.shape, lengths)


CASES = [  # (fft_type, operand dims, fft_length): 1, 2 and 3 axes, every algorithm, batches
    ("FFT", (8,), (8,)),
    ("IFFT", (2, 12), (12,)),
    ("RFFT", (5,), (5,)),
    ("IRFFT", (8,), (8,)),
    ("FFT", (3, 64), (64,)),  # four-step on the last axis
    ("IFFT", (2, 64), (64,)),
    ("RFFT", (2, 128), (128,)),
    ("IRFFT", (2, 64), (64,)),
    ("FFT", (2, 40), (40,)),  # Bluestein
    ("IRFFT", (40,), (40,)),
    ("RFFT", (100,), (100,)),
    ("FFT", (4, 6), (4, 6)),
    ("IRFFT", (4, 6), (4, 6)),
    ("RFFT", (64, 2), (64, 2)),  # Stockham on a leading axis
    ("IFFT", (64, 3), (64, 3)),
    ("FFT", (2, 3, 4, 5), (3, 4, 5)),
    ("IRFFT", (2, 3, 4, 5), (3, 4, 5)),
    ("RFFT", (2, 33, 3), (33, 3)),
    ("FFT", (2, 64, 4, 2), (64, 4, 2)),
]


@pytest.mark.parametrize("kind, dims, lengths", CASES, ids=[f"{c[0]}{list(c[2])}" for c in CASES])
def test_matches_numpy_c64(kind: str, dims, lengths) -> None:
    check(operand(kind, dims, lengths, np.complex64), kind, lengths, np.complex64)


@pytest.mark.parametrize("kind, dims, lengths", [
    ("FFT", (16,), (16,)), ("IRFFT", (3, 48), (48,)), ("RFFT", (4, 19), (4, 19)),
    ("IFFT", (128, 2), (128, 2)),
])
def test_matches_numpy_c128(kind: str, dims, lengths) -> None:
    check(operand(kind, dims, lengths, np.complex128, seed=1), kind, lengths, np.complex128)


@pytest.mark.parametrize("n", [1, 2, 3, 31, 97, 1024, 8193])
def test_lengths(n: int) -> None:
    check(operand("FFT", (n,), (n,), np.complex64, seed=n), "FFT", (n,), np.complex64)


def test_impulse_and_constant() -> None:
    impulse = np.zeros(8, np.complex64)
    impulse[0] = 1
    np.testing.assert_array_equal(run(impulse, "FFT", (8,)), np.ones(8))
    np.testing.assert_allclose(run(np.full(6, 2, np.complex64), "FFT", (6,)), [12, 0, 0, 0, 0, 0],
                               atol=1e-6)


def test_ifft_inverts_fft() -> None:
    x = operand("FFT", (3, 10, 16), (10, 16), np.complex128)
    b = xm.XlaBuilder("roundtrip")
    p = b.parameter(0, xm.Shape.array(xm.C128, x.shape))
    b.fft(b.fft(p, "FFT", (10, 16)), "IFFT", (10, 16))
    np.testing.assert_allclose(xm.compile(b.build())(x), x, atol=1e-13)


def test_irfft_needs_fft_length() -> None:
    """RFFT(16) and RFFT(17) have the same shape (seed 004); IRFFT's fft_length decides."""
    s16, s17 = xm.Shape.array(xm.F32, (16,)), xm.Shape.array(xm.F32, (17,))
    assert build(s16, "RFFT", (16,)).program_shape()[1] == build(s17, "RFFT", (17,)).program_shape()[1]
    spectrum = operand("IRFFT", (9,), (16,), np.complex64)
    for n in (16, 17):
        out = run(spectrum, "IRFFT", (n,))
        assert out.shape == (n,)
        np.testing.assert_allclose(out, np.fft.irfft(spectrum.astype(np.complex128), n), atol=2e-6)


def test_irfft_ignores_the_imaginary_parts_of_dc_and_nyquist() -> None:
    spectrum = np.array([1 + 5j, 2 - 1j, 3 + 2j, 4 - 7j, -1 + 9j], np.complex64)  # n = 8
    np.testing.assert_allclose(run(spectrum, "IRFFT", (8,)), np.fft.irfft(spectrum, 8), atol=1e-6)


def test_rfft_of_a_real_signal_has_hermitian_symmetry() -> None:
    x = operand("RFFT", (4, 6), (4, 6), np.complex64)
    full = run(x.astype(np.complex64), "FFT", (4, 6))
    half = run(x, "RFFT", (4, 6))
    np.testing.assert_allclose(half, full[:, :4], atol=1e-5)


def test_larger_transform_accuracy() -> None:
    x = operand("FFT", (4096,), (4096,), np.complex64, seed=3)
    out = run(x, "FFT", (4096,))
    ref = np.fft.fft(x.astype(np.complex128))
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-6


def test_zero_sized() -> None:
    assert run(np.zeros((0, 8), np.complex64), "FFT", (8,)).shape == (0, 8)
    assert run(np.zeros((3, 0), np.float32), "RFFT", (0,)).shape == (3, 0)
    assert run(np.zeros((2, 5), np.complex64), "IRFFT", (0,)).shape == (2, 0)


@pytest.mark.parametrize("shape, kind, lengths, rule", [
    (xm.Shape.array(xm.C64, (8,)), "DCT", (8,), "fft_type must be one of"),
    (xm.Shape.array(xm.C64, (2, 2, 2, 2)), "FFT", (2, 2, 2, 2), "1 to 3 entries"),
    (xm.Shape.array(xm.C64, (8,)), "FFT", (), "1 to 3 entries"),
    (xm.Shape.array(xm.C64, (8,)), "FFT", (-8,), ">= 0"),
    (xm.Shape.array(xm.C64, (8,)), "FFT", (2, 4), "fewer dimensions"),
    (xm.Shape.array(xm.C64, (8,)), "FFT", (4,), "must equal fft_length"),
    (xm.Shape.array(xm.F32, (8,)), "FFT", (8,), "c64 or c128"),
    (xm.Shape.array(xm.C64, (8,)), "RFFT", (8,), "f32 or f64"),
    (xm.Shape.array(xm.F32, (8,)), "RFFT", (7,), "must equal fft_length"),
    (xm.Shape.array(xm.F32, (8,)), "IRFFT", (8,), "c64 or c128"),
    (xm.Shape.array(xm.C64, (8,)), "IRFFT", (8,), r"takes trailing dimensions \[5\]"),
    (xm.Shape.array(xm.C64, (3, 5)), "IRFFT", (4, 8), r"\[4, 5\]"),
])
def test_shape_errors(b: xm.XlaBuilder, shape: xm.Shape, kind: str, lengths, rule: str) -> None:
    with pytest.raises(xm.ShapeError, match=rule):
        b.fft(b.parameter(0, shape), kind, lengths)


def test_result_shapes(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, xm.Shape.array(xm.F64, (2, 6, 10)))
    assert b.fft(x, "RFFT", (6, 10)).shape == xm.Shape.array(xm.C128, (2, 6, 6))
    y = b.parameter(1, xm.Shape.array(xm.C64, (2, 6, 6)))
    assert b.fft(y, "IRFFT", [6, 11]).shape == xm.Shape.array(xm.F32, (2, 6, 11))
    assert b.fft(y, "ifft", np.array([6, 6])).shape == y.shape


def test_ir(b: xm.XlaBuilder) -> None:
    b.fft(b.parameter(0, xm.Shape.array(xm.C64, (64, 2))), "FFT", (64, 2))
    comp = b.build()
    check_ir(stage_text(comp, "hlo"), """
        CHECK: "xhlo.fft"(%arg0) {fft_length = array<i64: 64, 2>, fft_type = "FFT"}
        CHECK-SAME: (tensor<64x2xcomplex<f32>>) -> tensor<64x2xcomplex<f32>>
    """)
    # Planar f32: a direct DFT along the short axis, then the first radix-4 Stockham pass
    # of the 64-point axis (its loop ranges given by a 4 x L x r/4 shape operand).
    check_ir(stage_text(comp, "linalg"), """
        CHECK: complex.re
        CHECK: iterator_types = ["parallel", "parallel", "reduction"]
        CHECK: linalg.generic
        CHECK-SAME: ins({{.*}} : tensor<4x1x16xi8>, tensor<64x2xf32>
        CHECK: arith.mulf {{.*}} : f32
        CHECK: complex.create
        CHECK-NOT: xhlo.
    """)
    # No view of a loop's output anywhere (see lowering/fft.py).
    linalg = stage_text(comp, "linalg")
    for view in ("tensor.expand_shape", "tensor.collapse_shape", "tensor.extract_slice",
                 "tensor.insert_slice"):
        assert view not in linalg
