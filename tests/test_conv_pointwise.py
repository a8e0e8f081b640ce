"""1x1 unit-stride unpadded channels-last f32 convolutions lowered as the matmul they are
(lowering/ops/convolution.py `_pointwise`): [N * spatial, C] x [C, O] on views of the
operands, scheduled by the matmul schedule (lowering/passes/schedules.py), computed in
place in the output buffer (no copy).

Shapes just large enough for the schedule (SCHEDULED_MIN_FLOPS) and odd: rows, channels
and output features not multiples of the register tile. Small-integer inputs sum
exactly, compared exactly with test_conv's reference; fractional ones are compared
bit for bit across target CPUs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import data, stage_text
from targets_support import TARGETS, compile_for
from test_conv import assert_same, build_conv, reference_conv

import xlamlir as xm
from xlamlir.lowering.passes import schedules

NHWC = ("NHWC", "HWIO", "NHWC")
CASES = {
    # lhs, rhs, dimension numbers
    "NHWC/HWIO odd": ((3, 7, 11, 37), (1, 1, 37, 45), NHWC),
    "batch 1, wide": ((1, 9, 13, 64), (1, 1, 64, 100), NHWC),
    "OIHW kernel": ((2, 15, 13, 40), (45, 40, 1, 1), ("NHWC", "OIHW", "NHWC")),
    "1-D": ((5, 63, 48), (1, 48, 70), ("NWC", "WIO", "NWC")),
    "3-D": ((2, 3, 5, 7, 40), (1, 1, 1, 40, 36), ("NDHWC", "DHWIO", "NDHWC")),
    "spatial dims swapped": ((2, 11, 7, 40), (1, 1, 40, 49), ("NWHC", "HWIO", "NWHC")),
}


@pytest.fixture(autouse=True)
def _strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedules, "STRICT", True)  # a failing schedule raises


def _build(name: str, dtype=np.float32, seed: int = 0) -> tuple[xm.XlaComputation, np.ndarray, np.ndarray]:
    ls, rs, dn = CASES[name]
    lhs, rhs = data(ls, dtype, seed=seed), data(rs, dtype, seed=seed + 1)
    n = len(ls) - 2
    return build_conv(lhs, rhs, (1,) * n, ((0, 0),) * n, dimension_numbers=dn), lhs, rhs


@pytest.mark.parametrize("name", list(CASES))
def test_against_reference(name: str) -> None:
    comp, lhs, rhs = _build(name)
    linalg = stage_text(comp, "linalg")
    assert "conv_" not in linalg and ("linalg.matmul" in linalg or "linalg.generic" in linalg)
    assert "vector.fma" in stage_text(comp, "tiled")
    n = lhs.ndim - 2
    assert_same(xm.compile(comp)(lhs, rhs), reference_conv(lhs, rhs, (1,) * n, ((0, 0),) * n,
                                                           dimension_numbers=CASES[name][2]))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_small_floats_keep_the_scheduled_convolution(dtype) -> None:
    """Converted operands would be folded into a matmul's body (unscheduled): they stay a
    convolution, which the schedule takes after the conversions."""
    comp, lhs, rhs = _build("NHWC/HWIO odd", dtype, seed=3)
    assert "conv_2d_nhwc_hwcf" in stage_text(comp, "linalg")
    assert "vector.fma" in stage_text(comp, "tiled")
    assert_same(xm.compile(comp)(lhs, rhs), reference_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)),
                                                           dimension_numbers=NHWC))


# The register tiles of either schedule (6 x 16 AVX2, 8 x 32 AVX-512), whatever this machine
# has (targets_support.compile_for).
TILE_TARGETS = ("x86-64-v3", "x86-64-v4")
# K = 37 has no divisor from 2 to 8: B is packed one row per vector step. 45 features on 2
# cores: two 16-wide panels (split across the cores, each packing its own inside the parallel
# loop) or one 32-wide panel (rows split, B packed in a loop of its own), and a 13-wide rest;
# 77: two 32-wide panels, so the 8 x 32 tiles pack inside the parallel loop too.
IN_PLACE = {"NHWC/HWIO odd": CASES["NHWC/HWIO odd"][:2], "77 features": ((3, 7, 11, 37), (1, 1, 37, 77))}


def _for_target(target: str, lhs: np.ndarray, rhs: np.ndarray) -> tuple[xm.Executable, np.ndarray]:
    comp = build_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), dimension_numbers=NHWC)
    exe = compile_for(comp, target)
    return exe, exe(lhs, rhs)


@pytest.mark.parametrize("name", list(IN_PLACE))
@pytest.mark.parametrize("target", TILE_TARGETS)
def test_computed_in_the_output_buffer(target: str, name: str) -> None:
    """The product is written through views of the output: the only buffers are the packed
    kernel panels, and nothing is copied, with either register tile. (A one-row packing step
    inside the parallel loop was once folded to a copy of B's slice: a memref.copy.)"""
    ls, rs = IN_PLACE[name]
    lhs, rhs = data(ls), data(rs, seed=1)
    exe, got = _for_target(target, lhs, rhs)
    p = schedules.Params.for_target(target)
    assert f"vector<{p.mr}x1x{p.nr}xf32>" in exe.stages["tiled"]  # the target's register tile
    text = exe.stages["bufferized"]
    assert "memref.copy" not in text and "linalg.copy" not in text
    assert text.count("memref.alloc") == 2  # B packed: the whole panels and the narrower rest
    assert_same(got, reference_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), dimension_numbers=NHWC))


def test_edge_values() -> None:
    """NaN, infinities and signed zeros go through the same products and sums as numpy's."""
    comp, lhs, rhs = _build("batch 1, wide", seed=5)
    lhs = lhs.copy()
    lhs[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    lhs[0, 1, 2, :] = -0.0
    rhs = rhs.copy()
    rhs[0, 0, 5, :] = -0.0
    got = xm.compile(comp)(lhs, rhs)
    x = lhs.reshape(-1, lhs.shape[-1]).astype(np.float64)
    w = rhs.reshape(rhs.shape[2], -1).astype(np.float64)
    expected = np.zeros((x.shape[0], w.shape[1]))
    with np.errstate(invalid="ignore"):  # inf * 0
        for c in range(x.shape[1]):  # in order, from +0: the sum the kernel computes
            expected = expected + x[:, c:c + 1] * w[c]
    np.testing.assert_array_equal(got.reshape(expected.shape), expected.astype(np.float32))
    assert np.signbit(got[0, 1, 2]).sum() == 0  # -0 products summed from +0 give +0


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_same_bits_on_every_target(name: str) -> None:
    """Fractional inputs (rounded sums): the result does not depend on the target's tiles
    (6 x 16 or 8 x 32, packing inside the parallel loop or in its own)."""
    ls, rs = IN_PLACE[name]
    rng = np.random.default_rng(7)
    lhs, rhs = rng.standard_normal(ls, dtype=np.float32), rng.standard_normal(rs, dtype=np.float32)
    results = [_for_target(t, lhs, rhs)[1] for t in TARGETS]
    for got in results[1:]:
        np.testing.assert_array_equal(got.view(np.uint32), results[0].view(np.uint32))
    expected = lhs.reshape(-1, ls[-1]).astype(np.float64) @ rhs.reshape(ls[-1], -1).astype(np.float64)
    np.testing.assert_allclose(results[0].reshape(expected.shape), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("strides, padding", [((2, 2), ((0, 0), (0, 0))), ((1, 1), ((1, 0), (0, 1)))],
                         ids=["strided", "padded"])
def test_strided_or_padded_keep_the_convolution(strides, padding) -> None:
    lhs, rhs = data((3, 16, 21, 37), seed=1), data((1, 1, 37, 45), seed=2)
    comp = build_conv(lhs, rhs, strides, padding, dimension_numbers=NHWC)
    text = stage_text(comp, "linalg")
    assert "conv_2d_nhwc_hwcf" in text and "linalg.matmul" not in text
    expected = reference_conv(lhs, rhs, strides, padding, dimension_numbers=NHWC)
    assert_same(xm.compile(comp)(lhs, rhs), expected)


@pytest.mark.parametrize("shape", [(3, 7, 11, 0), (0, 7, 11, 37)], ids=["no channels", "no batch"])
def test_empty(shape) -> None:
    lhs, rhs = data(shape), data((1, 1, shape[-1], 45), seed=1)
    comp = build_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), dimension_numbers=NHWC)
    assert_same(xm.compile(comp)(lhs, rhs), reference_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)),
                                                           dimension_numbers=NHWC))
