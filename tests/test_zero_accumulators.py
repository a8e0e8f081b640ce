"""Register tiles of a scheduled product whose K fits one cache block, and of a scheduled
convolution, start from zero in registers, with no zero fill of C
(lowering/passes/zero_accumulators.py). Products blocked along K, and those with a
fused epilogue, keep the fill and the reads.

Checked on the tiled IR for both tile shapes (AVX2 6 x 16, AVX-512 8 x 32, one and two
cores), exactly against numpy on small integers at odd sizes (a peeled row tile, a
narrower column part), with signed zeros, and bit for bit across target CPUs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from targets_support import TARGETS, compile_for
from test_conv import reference_conv

import xlamlir as xm
from xlamlir.lowering.passes import schedules

TILES = [schedules.Params(threads=2, mr=6, nr=16), schedules.Params(threads=2, mr=8, nr=32),
         schedules.Params(threads=1, mr=8, nr=32)]
_PIPELINES = {id(p): xm.Pipeline.default().replace("tiled", schedules.scheduler(p)) for p in TILES}
tiles = pytest.mark.parametrize("p", TILES, ids=lambda p: f"{p.mr}x{p.nr}-{p.threads}t")
ZERO_FILL = "vector.transfer_write %cst"  # the fill loop writes the zero constant
NHWC = ("NHWC", "HWIO", "NHWC")


@pytest.fixture(autouse=True)
def _strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedules, "STRICT", True)


def _matmul(m: int, k: int, n: int, batch: int = 0) -> xm.XlaComputation:
    b = xm.XlaBuilder("mm")
    lead = (batch,) if batch else ()
    x = b.parameter(0, xm.Shape.array(xm.F32, (*lead, m, k)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (*lead, k, n)))
    if batch:
        b.dot_general(x, y, xm.DotDimensionNumbers((2,), (1,), (0,), (0,)))
    else:
        b.dot(x, y)
    return b.build()


def _ints(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)


def _accumulators_from_zero(tiled: str, p: schedules.Params) -> bool:
    return f"iter_args(%arg14 = %cst) -> (vector<{p.mr}x1x{p.nr}xf32>)" in tiled or any(
        "= %cst" in line and f"-> (vector<{p.mr}x1x{p.nr}xf32>)" in line and "scf.for" in line
        for line in tiled.splitlines())


@tiles
@pytest.mark.parametrize("shape", [(101, 200, 45, 0), (67, 64, 64, 3)], ids=["2-D odd", "batched"])
def test_k_in_one_block_starts_from_zero(p: schedules.Params, shape: tuple[int, ...]) -> None:
    m, k, n, batch = shape
    exe = xm.compile(_matmul(m, k, n, batch), _PIPELINES[id(p)])
    tiled = exe.stages["tiled"]
    assert _accumulators_from_zero(tiled, p)
    assert ZERO_FILL not in tiled
    lead = (batch,) if batch else ()
    x, y = _ints((*lead, m, k), 1), _ints((*lead, k, n), 2)
    x[..., 3, :] = -0.0  # a row of -0 products: +0 + (-0) is +0, as from the fill
    got = exe(x, y)
    np.testing.assert_array_equal(got, np.matmul(x.astype(np.float64), y.astype(np.float64)))
    assert not np.signbit(got[..., 3, :]).any()


@tiles
def test_k_in_several_blocks_keeps_the_fill(p: schedules.Params) -> None:
    exe = xm.compile(_matmul(70, 1024, 64), _PIPELINES[id(p)])
    tiled = exe.stages["tiled"]
    assert not _accumulators_from_zero(tiled, p) and ZERO_FILL in tiled
    x, y = _ints((70, 1024), 3), _ints((1024, 64), 4)
    np.testing.assert_array_equal(exe(x, y), x.astype(np.float64) @ y.astype(np.float64))


def test_fused_epilogue_keeps_the_fill() -> None:
    p = TILES[1]
    b = xm.XlaBuilder("dense")
    x = b.parameter(0, xm.Shape.array(xm.F32, (96, 128)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (128, 64)))
    b.max(b.dot(x, w), b.broadcast(b.constant(np.float32(0)), (96, 64)))
    exe = xm.compile(b.build(), _PIPELINES[id(p)])
    assert ZERO_FILL in exe.stages["tiled"]
    xs, ws = _ints((96, 128), 5), _ints((128, 64), 6)
    np.testing.assert_array_equal(exe(xs, ws), np.maximum(xs.astype(np.float64) @ ws, 0))


def test_same_bits_on_every_target() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((101, 200), dtype=np.float32)
    y = rng.standard_normal((200, 45), dtype=np.float32)
    comp = _matmul(101, 200, 45)
    results = [compile_for(comp, t)(x, y) for t in TARGETS]
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))
    np.testing.assert_allclose(results[0], x.astype(np.float64) @ y, rtol=1e-5, atol=1e-4)


def _conv(lhs: tuple[int, ...], rhs: tuple[int, ...], stride: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("conv")
    x, w = (b.parameter(i, xm.Shape.array(xm.F32, s)) for i, s in enumerate((lhs, rhs)))
    b.conv_general_dilated(x, w, (stride, stride), [(1, 1), (1, 1)], dimension_numbers=NHWC)
    return b.build()


@tiles
@pytest.mark.parametrize("lhs, rhs, stride", [((3, 13, 11, 16), (3, 3, 16, 45), 1),
                                              ((2, 30, 27, 20), (3, 3, 20, 40), 2)], ids=["odd", "strided"])
def test_convolution_starts_from_zero(p: schedules.Params, lhs, rhs, stride: int) -> None:
    """A convolution's window and channel loops are one nest per tile: no fill, exact sums
    with the peeled pixel and channel tiles."""
    exe = xm.compile(_conv(lhs, rhs, stride), _PIPELINES[id(p)])
    tiled = exe.stages["tiled"]
    fr = min(p.nr, rhs[-1])
    # The output's fill wrote vector<fr> rows; the input's padding keeps its own (4-D) fill.
    assert not any(ZERO_FILL in line and f": vector<{fr}xf32>," in line for line in tiled.splitlines())
    assert re.search(rf"scf.for .* = %cst(_\d+)?\) -> \(vector<\d+x{fr}xf32>\)", tiled)
    x, w = _ints(lhs, 7), _ints(rhs, 8)
    x[0, 2, :, :] = -0.0
    expected = reference_conv(x, w, (stride, stride), ((1, 1), (1, 1)), dimension_numbers=NHWC)
    np.testing.assert_array_equal(exe(x, w), expected)


def test_convolution_same_bits_on_every_target() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 30, 27, 20), dtype=np.float32)
    w = rng.standard_normal((3, 3, 20, 40), dtype=np.float32)
    comp = _conv(x.shape, w.shape, 2)
    results = [compile_for(comp, t)(x, w) for t in TARGETS]
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))


@pytest.mark.parametrize("target, tiles", [("x86-64-v4", (8, 32, 8, 1024)), ("x86-64-v3", (6, 16, 16, 1024))])
def test_blocks_span_1024_deep(target: str, tiles: tuple[int, int, int, int]) -> None:
    """Both register tiles' cache blocks are 1024 deep (8 panels of 32 with AVX-512, 16 of
    16 with AVX2): a 1024-deep product is one block and starts from zero; 2048 deep is two
    blocks and keeps the fill. On any machine (targets_support.compile_for)."""
    p = schedules.Params.for_target(target)
    assert (p.mr, p.nr, p.nc, p.kc) == tiles
    for k, one_block in ((1024, True), (2048, False)):
        exe = compile_for(_matmul(40, k, 64), target)
        tiled = exe.stages["tiled"]
        assert _accumulators_from_zero(tiled, p) == one_block and (ZERO_FILL in tiled) != one_block
        x, y = _ints((40, k), 10), _ints((k, 64), 11)
        np.testing.assert_array_equal(exe(x, y), x.astype(np.float64) @ y.astype(np.float64))
