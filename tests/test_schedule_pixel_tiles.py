"""The convolution schedule's pixel tile (lowering/passes/schedules.py `_pixel_tile`): an
output width that MR does not divide takes a divisor just below MR when there is one
(28 = 4 x 7 with MR = 8: no peeled 4-pixel tile), else MR and a peeled rest. Checked on
the tiled IR for both tile shapes (AVX2 6 x 16, AVX-512 8 x 32), against an exact
reference (small integers), and bit for bit across target CPUs.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import data
from targets_support import TARGETS, compile_for
from test_conv import assert_same, reference_conv

import xlamlir as xm
from xlamlir.lowering.passes import schedules

TILES = {"6x16": schedules.Params(threads=2, mr=6, nr=16), "8x32": schedules.Params(threads=2, mr=8, nr=32)}
_PIPELINES = {name: xm.Pipeline.default().replace("tiled", schedules.scheduler(p))
              for name, p in TILES.items()}


@pytest.fixture(autouse=True)
def _strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedules, "STRICT", True)


def _conv(batch: int, hw: int, c: int, f: int, stride: int = 1) -> xm.XlaComputation:
    b = xm.XlaBuilder("conv")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(xm.F32, (batch, hw, hw, c))),
                           b.parameter(1, xm.Shape.array(xm.F32, (3, 3, c, f))), (stride, stride),
                           [(1, 1), (1, 1)], dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return b.build()


@pytest.mark.parametrize("ow, mr, expected", [
    (28, 8, 7), (14, 8, 7), (56, 8, 8), (5, 8, 5), (8, 8, 8), (12, 8, 8), (27, 8, 8),
    (15, 6, 5), (28, 6, 6), (10, 6, 5), (4, 6, 4), (1, 8, 1)])
def test_pixel_tile(ow: int, mr: int, expected: int) -> None:
    assert schedules._pixel_tile(ow, mr) == expected


@pytest.mark.parametrize("name, hw, stride, pixels, peeled", [
    ("8x32", 56, 2, 7, False),  # ow 28: 4 tiles of 7
    ("8x32", 27, 1, 8, True),  # ow 27: no divisor in 7..8, 3 tiles of 8 and a peeled 3
    ("6x16", 30, 2, 5, False),  # ow 15: 3 tiles of 5
])
def test_tiled_ir_and_result(name: str, hw: int, stride: int, pixels: int, peeled: bool) -> None:
    p = TILES[name]
    comp = _conv(2, hw, 16, 40, stride)
    exe = xm.compile(comp, _PIPELINES[name])
    script = schedules.last_script()
    assert f"registers {pixels} pixels x {p.nr} channels" in script
    tiled = exe.stages["tiled"]
    assert f"vector<{pixels}x{p.nr}xf32>" in tiled
    ow = (hw - 1) // stride + 1
    rest = ow % pixels
    assert (f"vector<{rest}x{p.nr}xf32>" in tiled) == peeled
    lhs, rhs = data((2, hw, hw, 16), seed=1), data((3, 3, 16, 40), seed=2)
    expected = reference_conv(lhs, rhs, (stride, stride), ((1, 1), (1, 1)),
                              dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert_same(exe(lhs, rhs), expected)


def test_same_bits_on_every_target() -> None:
    """Fractional inputs (rounded sums) with an output width of 28: 7-pixel tiles with
    AVX-512, 6-pixel tiles and a peeled rest else; each pixel's sum is the same."""
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((2, 56, 56, 16), dtype=np.float32)
    rhs = rng.standard_normal((3, 3, 16, 40), dtype=np.float32)
    comp = _conv(2, 56, 16, 40, stride=2)
    results = [compile_for(comp, t)(lhs, rhs) for t in TARGETS]
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))
    expected = reference_conv(lhs, rhs, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-4)
