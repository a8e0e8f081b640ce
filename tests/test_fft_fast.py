"""Tests of fft's fast paths (lowering/ops/fft.py, fft_vector.py): real transforms of even
length as complex ones of half the length, Stockham passes as vector loops, and the same
bits on every x86-64 target. Numerics against numpy.fft in float64 (see test_fft.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import stage_text
from test_fft import build, check, operand, run
from test_targets import TARGETS

import xlamlir as xm


@pytest.mark.parametrize("kind, dims, lengths, dtype", [
    # Half lengths of every class: direct (m <= 32), power of two, Bluestein; past
    # CONSTANT_MAX the twiddles come from run-time root tables (any period).
    ("RFFT", (3, 4), (4,), np.complex64),
    ("RFFT", (2, 64), (64,), np.complex64),
    ("RFFT", (130,), (130,), np.complex64),
    ("RFFT", (1 << 16,), (1 << 16,), np.complex64),
    ("RFFT", (40002,), (40002,), np.complex64),
    ("RFFT", (3, 16, 256), (16, 256), np.complex128),
    ("IRFFT", (2, 4), (4,), np.complex64),
    ("IRFFT", (3, 128), (128,), np.complex64),
    ("IRFFT", (98,), (98,), np.complex128),
    ("IRFFT", (1 << 15,), (1 << 15,), np.complex64),
    ("IRFFT", (33334,), (33334,), np.complex64),
    ("IRFFT", (5, 8, 64), (5, 8, 64), np.complex64),
])
def test_packed_real_transforms_match_numpy(kind: str, dims, lengths, dtype) -> None:
    check(operand(kind, dims, lengths, dtype, seed=len(dims)), kind, lengths, dtype)


def test_irfft_packed_ignores_dc_and_nyquist_imaginary_parts() -> None:
    spectrum = operand("IRFFT", (64,), (64,), np.complex64, seed=5)
    np.testing.assert_allclose(run(spectrum, "IRFFT", (64,)), np.fft.irfft(spectrum, 64), atol=1e-6)


def test_rfft_is_a_complex_transform_of_half_the_length() -> None:
    """RFFT(2048): the operand is read as 1024 complex values (even + i odd), transformed
    by the four-step method as 32 x 32, and the 1025 outputs formed from them; no planar
    2048-point tensor is ever made."""
    linalg = stage_text(build(xm.Shape.array(xm.F32, (2048,)), "RFFT", (2048,)), "linalg")
    assert "tensor<1024xf32>" in linalg and "tensor<32x32xf32>" in linalg
    assert "tensor<1025xf32>" in linalg
    assert "complex.re" not in linalg  # the real operand is never split into planes
    assert linalg.count("tensor<2048xf32>") == linalg.count("%arg0") + 1  # the operand's type only


def test_stockham_passes_are_vector_loops() -> None:
    """FFT(4096) by the four-step method as 64 x 64: the radix-4 passes of both 64-point
    transforms read and write whole vectors of 16 f32 lanes along the rows (4 reads and
    4 writes per plane), the 4-point DFT by additions alone; one loop over the passes
    (its code once per transform, not once per pass), pass 0 reading the operand's
    buffer in place."""
    linalg = stage_text(build(xm.Shape.array(xm.C64, (4096,)), "FFT", (4096,)), "linalg")
    assert linalg.count("vector.transfer_read") == 2 * 4 * 2
    assert linalg.count("vector.transfer_write") == 2 * 4 * 2
    assert linalg.count("read_only") == 2 * 2
    assert "vector<16xf32>" in linalg
    assert linalg.count("restrict writable : memref") == 2 * 2  # each transform's result planes
    assert linalg.count("memref.alloc") == 2 * 4  # two ping-pong buffers per plane
    bufferized = stage_text(build(xm.Shape.array(xm.C64, (4096,)), "FFT", (4096,)), "bufferized")
    assert "memref.copy" not in bufferized  # the passes' buffers are written in place


@pytest.mark.parametrize("kind, dims, lengths, dtype", [
    ("FFT", (4096,), (4096,), np.complex64),  # 64 x 64: 3 radix-4 passes each
    ("FFT", (1 << 20,), (1 << 20,), np.complex64),  # 1024 x 1024: 5 each
    ("FFT", (3, 1 << 13), (1 << 13,), np.complex128),  # 64 x 128: a radix-2 pass after the loop
    ("IFFT", (2, 1 << 15), (1 << 15,), np.complex64),  # 128 x 256
    ("FFT", (512, 32), (512, 32), np.complex64),  # not the last axis: no flat views
    ("RFFT", (1 << 16,), (1 << 16,), np.complex64),
    ("IRFFT", (2, 1 << 14 | 1), (1 << 15,), np.complex64),
])
def test_looped_passes_give_the_unrolled_passes_bits(kind: str, dims, lengths, dtype,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop over the radix-4 passes (fft_vector.looped_stockham) computes every value
    as the unrolled passes do: same bits, and numpy's values, at NaN and inf too."""
    from xlamlir.lowering.ops import fft_vector
    from xlamlir.runtime.compiler import clear_cache

    x = operand(kind, dims, lengths, dtype, seed=5)
    flat = x.reshape(-1)
    flat[3] = np.inf if kind == "FFT" else flat[3]
    flat[-2] = np.nan if kind == "IFFT" else flat[-2]
    comp = build(xm.Shape.array(xm.type_of(x.dtype), x.shape), kind, lengths)
    clear_cache()
    looped = xm.compile(comp)
    assert "restrict writable : memref" in looped.stages["linalg"]
    monkeypatch.setattr(fft_vector, "LOOPED_MIN_PASSES", 99)
    clear_cache()
    unrolled = xm.compile(comp)
    clear_cache()
    assert "restrict writable : memref" not in unrolled.stages["linalg"]
    got, expected = looped(x), unrolled(x)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    if np.isfinite(x).all():
        check(x, kind, lengths, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_fft_same_bits_on_every_target(target: str) -> None:
    """Vector passes, four-step twiddles, Bluestein and the packed real transforms give the
    same bits whatever the vector width (no fused multiply-add anywhere)."""
    cases = [("FFT", (8, 4096), (4096,)), ("FFT", (6, 100), (6, 100)), ("RFFT", (3, 1024), (1024,)),
             ("IRFFT", (16, 96), (16, 96))]
    for kind, dims, lengths in cases:
        x = operand(kind, dims, lengths, np.complex64, seed=11)
        comp = build(xm.Shape.array(xm.type_of(x.dtype), x.shape), kind, lengths)
        host = xm.compile(comp)(x)
        got = xm.compile(comp, target_cpu=target)(x)
        np.testing.assert_array_equal(got.view(np.uint32), host.view(np.uint32), err_msg=f"{kind}{dims}")
        check(x, kind, lengths, np.complex64)


def test_long_transforms_take_their_root_tables_as_constants() -> None:
    """Past CONSTANT_MAX the twiddles come from two short f64 root tables: constants
    (cos and sin from the C library at compile time), not sin/cos loops run at every call."""
    kind, dims, lengths = "FFT", (1 << 15,), (1 << 15,)
    linalg = stage_text(build(xm.Shape.array(xm.C64, dims), kind, lengths), "linalg")
    assert "math.sin" not in linalg and "math.cos" not in linalg
    assert "tensor<256xf64>" in linalg  # S = 256 >= sqrt(32768): w**lo, lo < S
    check(operand(kind, dims, lengths, np.complex64, seed=9), kind, lengths, np.complex64)


@pytest.mark.parametrize("kind, dims, dtype", [
    ("FFT", (1 << 15,), np.complex64),  # 128 x 256: both tile dimensions whole tiles
    ("IFFT", (2, 1 << 17), np.complex128),  # 256 x 512, f64 tiles of 4 lanes
    ("RFFT", (1 << 16,), np.complex64),  # a 32768-point complex transform inside
])
def test_long_transforms_transpose_by_vector_tiles(kind: str, dims, dtype,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Past CONSTANT_MAX, planes of TILED_TRANSPOSE_MIN_BYTES (lowered here) are transposed
    by transpose_tiles' vector tiles in the four-step method (the twiddles then read in
    order): the same bits as the element-by-element transposed read, NaN and inf
    included, and numpy's values."""
    from xlamlir.lowering.ops import fft, transpose_tiles
    from xlamlir.runtime.compiler import clear_cache

    monkeypatch.setattr(fft, "TILED_TRANSPOSE_MIN_BYTES", 0)

    lengths = dims[-1:]
    x = operand(kind, dims, lengths, dtype, seed=7)
    flat = x.reshape(-1)
    flat[5], flat[-3] = np.inf, np.nan
    comp = build(xm.Shape.array(xm.type_of(x.dtype), x.shape), kind, lengths)
    clear_cache()
    tiled = xm.compile(comp)
    assert "vector.shuffle" in tiled.stages["linalg"]
    monkeypatch.setattr(transpose_tiles, "applies", lambda *args: False)
    clear_cache()
    gathered = xm.compile(comp)
    clear_cache()
    assert "vector.shuffle" not in gathered.stages["linalg"]
    np.testing.assert_array_equal(tiled(x).view(np.uint8), gathered(x).view(np.uint8))
    check(operand(kind, dims, lengths, dtype, seed=7), kind, lengths, dtype)


def test_small_planes_keep_the_transposed_reads() -> None:
    """Below TILED_TRANSPOSE_MIN_BYTES (2**18 f32 points: 1 MB planes) no vector tiles: the
    planes are in L2, the element reads as fast, and the tiles would cost compile time."""
    from xlamlir.lowering.ops import fft

    n = fft.TILED_TRANSPOSE_MIN_BYTES // 8
    assert n > fft.CONSTANT_MAX
    linalg = stage_text(build(xm.Shape.array(xm.C64, (n,)), "FFT", (n,)), "linalg")
    assert "vector.shuffle" not in linalg
