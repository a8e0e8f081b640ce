"""Large 2-D convolutions in other layouts, with strides and/or kernel dilations, as one
`conv_2d_nhwc_hwcf` with those strides and dilations (lowering/ops/convolution.py
`_nhwc`) on a padded NHWC copy of lhs, the result transposed back; the "tiled" stage
schedules it (lowering/passes/schedules.py `_conv_plan`: register tiles reading the
strided, dilated windows in place).

The shapes are just large enough for the path (SCHEDULED_MIN_FLOPS) and odd where they
can be: output widths that leave a peeled pixel tile, channel counts that leave a
narrower channel tile, padding on either side, negative padding. Inputs are small
integers: exact sums, compared exactly with test_conv's reference. Then what a strided
window must not read (inf/NaN outside every window stays out), and the IR.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, data, stage_text
from test_conv import assert_same, build_conv, reference_conv

import xlamlir as xm

NCHW = ("NCHW", "OIHW", "NCHW")
NHWC = ("NHWC", "HWIO", "NHWC")
CASES = {
    # lhs, rhs, strides, padding, dimension numbers[, kernel dilation]
    "3x3/2 NCHW": ((2, 64, 17, 15), (48, 64, 3, 3), (2, 2), ((1, 1), (1, 1)), NCHW),
    "3x3/2 NHWC, batch 1, odd": ((1, 29, 31, 37), (3, 3, 37, 41), (2, 2), ((1, 0), (0, 1)), NHWC),
    "3x4/(2,3) NHWC, batch 3": ((3, 17, 25, 64), (3, 4, 64, 40), (2, 3), ((0, 2), (1, 0)), NHWC),
    "stride 1 NCHW": ((2, 32, 9, 10), (24, 32, 3, 3), (1, 1), ((1, 1), (1, 1)), NCHW),
    "stride 1 OIHW kernel": ((2, 9, 10, 32), (24, 32, 3, 2), (1, 1), ((0, 0), (0, 0)),
                             ("NHWC", "OIHW", "NHWC")),
    "1x1/2 NCHW": ((4, 64, 16, 15), (64, 64, 1, 1), (2, 2), ((0, 0), (0, 0)), NCHW),
    "5x3/(3,2) cropped, mixed": ((2, 23, 20, 64), (5, 3, 64, 40), (3, 2), ((-1, 2), (2, -1)),
                                 ("NHWC", "HWIO", "NCHW")),
    "other layouts": ((17, 2, 64, 13), (3, 24, 64, 3), (2, 1), ((1, 0), (0, 1)),
                      ("HNCW", "HOIW", "WCNH")),
    "3x3 dilated 2 NHWC": ((2, 13, 14, 64), (3, 3, 64, 48), (1, 1), ((2, 2), (1, 3)), NHWC, (2, 2)),
    "dilated (3, 1), stride (1, 2) NCHW": ((2, 64, 17, 19), (40, 64, 3, 3), (1, 2), ((3, 1), (1, 1)),
                                           NCHW, (3, 1)),
    "dilation 4 > 3 output rows": ((2, 64, 7, 13), (40, 64, 2, 3), (1, 1), ((0, 0), (1, 1)), NCHW, (4, 1)),
    "stride 2 and dilation 2 in one dimension": ((2, 13, 14, 64), (3, 3, 64, 48), (2, 1), ((2, 2), (1, 1)),
                                                NHWC, (2, 2)),
    "stride 3, dilation 2, odd, batch 5": ((5, 27, 23, 19), (3, 2, 19, 33), (3, 2), ((1, 2), (0, 3)),
                                           NHWC, (2, 3)),
}


def _scheduled(comp: xm.XlaComputation) -> bool:
    """Whether the "tiled" stage scheduled the convolution: register tiles of vector.fma,
    no convolution op left."""
    text = stage_text(comp, "tiled")
    return "vector.fma" in text and "linalg.conv_2d_nhwc_hwcf" not in text


@pytest.mark.parametrize("name", list(CASES))
def test_against_reference(name: str) -> None:
    ls, rs, strides, padding, dn, *dilation = CASES[name]
    lhs, rhs = data(ls, seed=1), data(rs, seed=2)
    kwargs = dict(dimension_numbers=dn, rhs_dilation=dilation[0] if dilation else None)
    comp = build_conv(lhs, rhs, strides, padding, **kwargs)
    assert stage_text(comp, "linalg").count("conv_2d_nhwc_hwcf") == 1 and _scheduled(comp)
    got = xm.compile(comp)(lhs, rhs)
    assert_same(got, reference_conv(lhs, rhs, strides, padding, **kwargs))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("name", ["3x3/2 NCHW", "stride 3, dilation 2, odd, batch 5"])
def test_small_floats_accumulate_in_f32(dtype, name: str) -> None:
    ls, rs, strides, padding, dn, *dilation = CASES[name]
    kwargs = dict(dimension_numbers=dn, rhs_dilation=dilation[0] if dilation else None)
    lhs, rhs = data(ls, dtype, seed=3), data(rs, dtype, seed=4)
    comp = build_conv(lhs, rhs, strides, padding, **kwargs)
    assert _scheduled(comp)
    assert_same(xm.compile(comp)(lhs, rhs), reference_conv(lhs, rhs, strides, padding, **kwargs))


def test_fractional_values_match_a_float64_sum() -> None:
    """Values that do not sum exactly: within f32 rounding of the float64 sum."""
    ls, rs, strides, padding, dn, dilation = CASES["stride 3, dilation 2, odd, batch 5"]
    rng = np.random.default_rng(9)
    lhs, rhs = rng.standard_normal(ls).astype(np.float32), rng.standard_normal(rs).astype(np.float32)
    kwargs = dict(dimension_numbers=dn, rhs_dilation=dilation)
    got = xm.compile(build_conv(lhs, rhs, strides, padding, **kwargs))(lhs, rhs)
    want = reference_conv(lhs.astype(np.float64), rhs.astype(np.float64), strides, padding, **kwargs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_cells_outside_every_window_are_never_read() -> None:
    """Only the products of a window are summed: inf and NaN where no window reaches (odd
    columns of a 1x1/2 convolution, the last row and column of a 3x3/2 VALID one, the
    holes of a dilated kernel's only window) leave every result finite, equal to the
    result with zeros there (the reference multiplies a dilated kernel's zero taps, so
    it is given zeros)."""
    for ls, rs, dilation in (((8, 64, 16, 16), (64, 64, 1, 1), None), ((2, 32, 12, 12), (32, 32, 3, 3), None),
                             ((8, 64, 5, 5), (64, 64, 3, 3), (2, 2))):
        clean, rhs = data(ls, seed=5), data(rs, seed=6)
        lhs = clean.copy()
        strides = (1, 1) if dilation else (2, 2)
        if dilation:  # one window, at rows and columns 0, 2, 4
            lhs[:, :, 1::2, :] = np.nan
            lhs[:, :, :, 3] = np.inf
        elif rs[2] == 1:
            lhs[:, :, :, 1::2] = np.inf
            lhs[:, :, 1::2, :] = np.nan
        else:  # windows at 0, 2, 4, 6, 8 cover rows and columns 0..10
            lhs[:, :, 11, :] = np.nan
            lhs[:, :, :, 11] = -np.inf
        valid = ((0, 0), (0, 0))
        kwargs = dict(dimension_numbers=NCHW, rhs_dilation=dilation)
        comp = build_conv(lhs, rhs, strides, valid, **kwargs)
        assert _scheduled(comp)
        got = xm.compile(comp)(lhs, rhs)
        assert np.isfinite(got).all()
        clean[~np.isfinite(lhs)] = 0
        assert_same(got, reference_conv(clean, rhs, strides, valid, **kwargs))


def test_padding_times_an_inf_tap_is_nan() -> None:
    """H = 1, padding 2, window 3, stride 2: kernel row 1 meets only padding rows. Its zeros
    still multiply the kernel (XLA pads with zeros): an inf kernel tap gives NaN there."""
    lhs, rhs = data((16, 32, 1, 20), seed=7), data((32, 32, 3, 3), seed=8)
    rhs[0, :, 1, :] = np.inf  # output feature 0, kernel row 1
    padding = ((2, 2), (1, 1))
    got = xm.compile(build_conv(lhs, rhs, (2, 1), padding, dimension_numbers=NCHW))(lhs, rhs)
    want = reference_conv(lhs, rhs, (2, 1), padding, dimension_numbers=NCHW)
    assert np.isnan(want[:, 0]).all() and np.isfinite(want[:, 1:]).all()
    assert_same(got, want)


def test_ir_one_strided_convolution() -> None:
    ls, rs, strides, padding, dn = CASES["3x3/2 NCHW"]
    comp = build_conv(data(ls), data(rs), strides, padding, dimension_numbers=dn)
    # lhs to NHWC by vector tiles, copied into a zero block (padding), one convolution
    # with strides 2, the result transposed back to NCHW.
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: floordiv
        CHECK: vector.shuffle
        CHECK: tensor.insert_slice {{.*}} into %{{.*}}[0, 1, 1, 0] [2, 17, 15, 64] [1, 1, 1, 1]
        CHECK-SAME: into tensor<2x19x17x64xf32>
        CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2>
        CHECK-SAME: tensor<2x19x17x64xf32>, tensor<3x3x64x48xf32>
        CHECK-SAME: tensor<2x9x8x48xf32>
        CHECK-NOT: linalg.conv
        CHECK: vector.shuffle
    """)
    assert _scheduled(comp)


def test_ir_stride_and_dilation_in_one_convolution() -> None:
    ls, rs, strides, padding, dn, dilation = CASES["stride 2 and dilation 2 in one dimension"]
    comp = build_conv(data(ls), data(rs), strides, padding, dimension_numbers=dn, rhs_dilation=dilation)
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: linalg.generic
        CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<2> : tensor<2xi64>, strides = dense<[2, 1]>
        CHECK-NOT: linalg.conv
    """)
    assert _scheduled(comp)


def test_small_convolutions_keep_the_generic() -> None:
    comp = build_conv(data((1, 4, 9, 9)), data((4, 4, 3, 3)), (2, 2), "SAME", dimension_numbers=NCHW)
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: conv_2d_nhwc_hwcf
        CHECK: linalg.generic
    """)
