"""Large 2-D convolutions in other layouts, with strides or kernel dilations as stride-1
NHWC convolutions (lowering/ops/convolution.py `_nhwc`): one `conv_2d_nhwc_hwcf` per
phase on an NHWC copy of lhs, stride phases added, dilation phases placed, the result
transposed back.

The shapes are just large enough for the path (every phase at least SCHEDULED_MIN_FLOPS),
so the "tiled" stage schedules every phase as it does in real programs. Inputs are small
integers: exact sums, compared exactly with test_conv's reference. Then what a strided
window must not read (inf/NaN outside every window stays out), padding that a phase
reads alone (0 * inf), and the IR.
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
    # lhs, rhs, strides, padding, dimension numbers
    "3x3/2 NCHW": ((2, 64, 17, 15), (48, 64, 3, 3), (2, 2), ((1, 1), (1, 1)), NCHW),
    "3x4/(2,3) NHWC": ((2, 17, 25, 64), (3, 4, 64, 40), (2, 3), ((0, 2), (1, 0)), NHWC),
    "stride 1 NCHW": ((2, 32, 9, 10), (24, 32, 3, 3), (1, 1), ((1, 1), (1, 1)), NCHW),
    "stride 1 OIHW kernel": ((2, 9, 10, 32), (24, 32, 3, 2), (1, 1), ((0, 0), (0, 0)),
                             ("NHWC", "OIHW", "NHWC")),
    "1x1/2 NCHW": ((4, 64, 16, 15), (64, 64, 1, 1), (2, 2), ((0, 0), (0, 0)), NCHW),
    "5x3/(3,2) cropped, mixed": ((2, 23, 20, 64), (5, 3, 64, 40), (3, 2), ((-1, 2), (2, -1)),
                                 ("NHWC", "HWIO", "NCHW")),
    "other layouts": ((17, 2, 64, 13), (3, 24, 64, 3), (2, 1), ((1, 0), (0, 1)),
                      ("HNCW", "HOIW", "WCNH")),
    # kernel dilations: the outputs split into phases (then placed), alone or with a
    # stride along the other dimension
    "3x3 dilated 2 NHWC": ((2, 13, 14, 64), (3, 3, 64, 48), (1, 1), ((2, 2), (1, 3)), NHWC, (2, 2)),
    "dilated (3, 1), stride (1, 2) NCHW": ((2, 64, 17, 19), (40, 64, 3, 3), (1, 2), ((3, 1), (1, 1)),
                                           NCHW, (3, 1)),
    "dilation 4 > 3 output rows": ((2, 64, 7, 13), (40, 64, 2, 3), (1, 1), ((0, 0), (1, 1)), NCHW, (4, 1)),
}


def _scheduled(comp: xm.XlaComputation) -> bool:
    """Whether the "tiled" stage scheduled every phase: each became register tiles of
    vector.fma, none is left a convolution op."""
    text = stage_text(comp, "tiled")
    return "vector.fma" in text and "linalg.conv_2d_nhwc_hwcf" not in text


@pytest.mark.parametrize("name", list(CASES))
def test_against_reference(name: str) -> None:
    ls, rs, strides, padding, dn, *dilation = CASES[name]
    lhs, rhs = data(ls, seed=1), data(rs, seed=2)
    kwargs = dict(dimension_numbers=dn, rhs_dilation=dilation[0] if dilation else None)
    comp = build_conv(lhs, rhs, strides, padding, **kwargs)
    assert "conv_2d_nhwc_hwcf" in stage_text(comp, "linalg") and _scheduled(comp)
    got = xm.compile(comp)(lhs, rhs)
    assert_same(got, reference_conv(lhs, rhs, strides, padding, **kwargs))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_small_floats_accumulate_in_f32(dtype) -> None:
    ls, rs, strides, padding, dn = CASES["3x3/2 NCHW"]
    lhs, rhs = data(ls, dtype, seed=3), data(rs, dtype, seed=4)
    got = xm.compile(build_conv(lhs, rhs, strides, padding, dimension_numbers=dn))(lhs, rhs)
    assert_same(got, reference_conv(lhs, rhs, strides, padding, dimension_numbers=dn))


def test_cells_outside_every_window_are_never_read() -> None:
    """Only the products of a window are summed: inf and NaN where no window reaches (odd
    columns of a 1x1/2 convolution, the last row and column of a 3x3/2 VALID one) leave
    every result finite. A phase never adds a zero kernel tap times such a cell."""
    for ls, rs in (((8, 64, 16, 16), (64, 64, 1, 1)), ((2, 32, 12, 12), (32, 32, 3, 3))):
        lhs, rhs = data(ls, seed=5), data(rs, seed=6)
        if rs[2] == 1:
            lhs[:, :, :, 1::2] = np.inf
            lhs[:, :, 1::2, :] = np.nan
        else:  # windows at 0, 2, 4, 6, 8 cover rows and columns 0..10
            lhs[:, :, 11, :] = np.nan
            lhs[:, :, :, 11] = -np.inf
        valid = ((0, 0), (0, 0))
        got = xm.compile(build_conv(lhs, rhs, (2, 2), valid, dimension_numbers=NCHW))(lhs, rhs)
        assert np.isfinite(got).all()
        assert_same(got, reference_conv(lhs, rhs, (2, 2), valid, dimension_numbers=NCHW))


def test_padding_read_by_a_phase_alone() -> None:
    """H = 1, padding 2, window 3, stride 2: phase 1 reads only padding rows. Its zeros
    still multiply the kernel (XLA pads with zeros): an inf kernel tap gives NaN there."""
    lhs, rhs = data((16, 32, 1, 20), seed=7), data((32, 32, 3, 3), seed=8)
    rhs[0, :, 1, :] = np.inf  # output feature 0, kernel row 1 (phase 1)
    padding = ((2, 2), (1, 1))
    got = xm.compile(build_conv(lhs, rhs, (2, 1), padding, dimension_numbers=NCHW))(lhs, rhs)
    want = reference_conv(lhs, rhs, (2, 1), padding, dimension_numbers=NCHW)
    assert np.isnan(want[:, 0]).all() and np.isfinite(want[:, 1:]).all()
    assert_same(got, want)


def test_ir_phases_of_a_strided_nchw_convolution() -> None:
    ls, rs, strides, padding, dn = CASES["3x3/2 NCHW"]
    comp = build_conv(data(ls), data(rs), strides, padding, dimension_numbers=dn)
    # lhs to NHWC by vector tiles; per phase (py, px): the rows it reads copied into a
    # zero block (padding), the kernel taps py::2, px::2, a stride-1 convolution; the four
    # results added in order and transposed back to NCHW.
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: floordiv
        CHECK: vector.shuffle
        CHECK: tensor.extract_slice %{{.*}}[0, 1, 1, 0] [2, 8, 7, 64] [1, 2, 2, 1]
        CHECK: tensor.insert_slice {{.*}} into %{{.*}}[0, 1, 1, 0] [2, 8, 7, 64] [1, 1, 1, 1]
        CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [2, 2, 64, 48] [2, 2, 1, 1]
        CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1>
        CHECK-SAME: tensor<2x10x9x64xf32>, tensor<2x2x64x48xf32>
        CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<2x1x64x48xf32>
        CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x2x64x48xf32>
        CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x1x64x48xf32>
        CHECK: linalg.generic
        CHECK-COUNT-3: arith.addf
        CHECK: vector.shuffle
        CHECK-NOT: linalg.transpose {{.*}} tensor<2x9x8x48xf32>
    """)
    assert _scheduled(comp)


def test_ir_dilation_phases_are_placed() -> None:
    ls, rs, strides, padding, dn, dilation = CASES["3x3 dilated 2 NHWC"]
    comp = build_conv(data(ls), data(rs), strides, padding, dimension_numbers=dn, rhs_dilation=dilation)
    # Output rows and columns of each parity: a stride-1 convolution with the whole kernel
    # over the input rows and columns of that parity, inserted with stride 2; no sum.
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: arith.addf
        CHECK-COUNT-4: linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1>
        CHECK: tensor.insert_slice {{.*}}[0, 0, 0, 0] [2, 7, 7, 48] [1, 2, 2, 1]
        CHECK: tensor.insert_slice {{.*}}[0, 0, 1, 0] [2, 7, 7, 48] [1, 2, 2, 1]
        CHECK: tensor.insert_slice {{.*}}[0, 1, 0, 0] [2, 6, 7, 48] [1, 2, 2, 1]
        CHECK: tensor.insert_slice {{.*}}[0, 1, 1, 0] [2, 6, 7, 48] [1, 2, 2, 1]
        CHECK-NOT: linalg.conv
    """)


def test_stride_and_dilation_in_one_dimension_keep_the_generic() -> None:
    comp = build_conv(data((2, 13, 14, 64)), data((3, 3, 64, 48)), (2, 1), ((2, 2), (1, 1)),
                      dimension_numbers=NHWC, rhs_dilation=(2, 1))
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: conv_2d_nhwc_hwcf
        CHECK: linalg.generic
    """)


def test_small_convolutions_keep_the_named_ops() -> None:
    comp = build_conv(data((1, 4, 9, 9)), data((4, 4, 3, 3)), (2, 2), "SAME", dimension_numbers=NCHW)
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: conv_2d_nhwc_hwcf
        CHECK: linalg.generic
    """)
