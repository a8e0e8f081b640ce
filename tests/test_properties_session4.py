"""Property tests of the fast paths that landed in session 4, against independent oracles.

Each path has a size threshold below which the differential fuzzer's small programs never
reach it, so the shapes here are chosen to take it (and a few to sit just beside it):

- strided and dilated convolutions as one scheduled NHWC convolution on a relaid-out,
  padded copy (lowering/ops/convolution.py, `_nhwc`), checked against `direct_conv`
  below (a loop over the kernel taps in float64, written from the spec, not from the
  library or tests/reference.py);
- reduce_window pooling as vector loops (lowering/ops/window_vectors.py), with NaN, -0.0
  and infinities in the input;
- transposes by tiles (lowering/ops/transpose_tiles.py): every permutation of rank 2..4;
- gather as row copies (lowering/ops/indexing.py) with out-of-range starts;
- matrix-vector dots in lanes (lowering/ops/dot_lanes.py) at depths around 64 and 16 | K;
- batched dots with odd sizes.

Inputs are small integers, so every float sum is exact and results compare bit for bit
whatever order the library adds in. Several ops share one computation where possible
(compile time dominates the runtime).
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest
from reference import evaluate

import xlamlir as xm

CD = xm.ConvDimensionNumbers


def _dn(lp, kp, op_) -> xm.ConvDimensionNumbers:
    """Dimension numbers from the positions of (N, C, spatial...) in lhs, (O, I, spatial...)
    in the kernel and (N, C, spatial...) in the output."""
    return CD(input_batch_dimension=lp[0], input_feature_dimension=lp[1],
              input_spatial_dimensions=tuple(lp[2:]), kernel_output_feature_dimension=kp[0],
              kernel_input_feature_dimension=kp[1], kernel_spatial_dimensions=tuple(kp[2:]),
              output_batch_dimension=op_[0], output_feature_dimension=op_[1],
              output_spatial_dimensions=tuple(op_[2:]))


NHWC, HWIO = (0, 3, 1, 2), (3, 2, 0, 1)
NCHW, OIHW = (0, 1, 2, 3), (0, 1, 2, 3)
HWCN = (3, 2, 0, 1)


def direct_conv(lhs, rhs, strides, pads, lhs_dil, rhs_dil, lp, kp, op_, fg=1, bg=1) -> np.ndarray:
    """The convolution by its definition: out[n, o, y...] = sum over the group's input
    features c and the taps w of P[n', c, y * stride + w * rhs_dil] * K[o, c, w], P being
    lhs dilated and padded (negative padding crops), in float64."""
    x = np.asarray(lhs, np.float64).transpose(lp)
    k = np.asarray(rhs, np.float64).transpose(kp)
    n_sp = x.ndim - 2
    for d in range(n_sp):  # lhs dilation: holes of zeros
        if lhs_dil[d] > 1:
            shape = list(x.shape)
            shape[2 + d] = (shape[2 + d] - 1) * lhs_dil[d] + 1
            y = np.zeros(shape)
            index = [slice(None)] * x.ndim
            index[2 + d] = slice(None, None, lhs_dil[d])
            y[tuple(index)] = x
            x = y
    for d, (lo, hi) in enumerate(pads):
        width = [(0, 0)] * x.ndim
        width[2 + d] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, width)
        index = [slice(None)] * x.ndim
        index[2 + d] = slice(max(-lo, 0), x.shape[2 + d] - max(-hi, 0))
        x = x[tuple(index)]
    n, c = x.shape[:2]
    o, ci = k.shape[:2]
    window = k.shape[2:]
    eff = [(w - 1) * r + 1 for w, r in zip(window, rhs_dil)]
    out_sp = [max(0, (x.shape[2 + d] - eff[d]) // strides[d] + 1) for d in range(n_sp)]
    nb, og = n // bg, o // (fg * bg)
    out = np.zeros((nb, o, *out_sp))
    for group in range(fg * bg):
        f, b = (group, 0) if fg > 1 else (0, group)
        xs = x[b * nb:(b + 1) * nb, f * ci:(f + 1) * ci]
        ks = k[group * og:(group + 1) * og]
        for taps in itertools.product(*(range(w) for w in window)):
            index = [slice(None), slice(None)] + [
                slice(t * r, t * r + strides[d] * (out_sp[d] - 1) + 1, strides[d])
                for d, (t, r) in enumerate(zip(taps, rhs_dil))]
            out[:, group * og:(group + 1) * og] += np.einsum(
                "nc...,oc->no...", xs[tuple(index)], ks[(slice(None), slice(None), *taps)])
    return out.transpose(np.argsort(op_))


# (dtype, batch, in features, out features, spatial, kernel, strides, padding, rhs dilation,
#  lhs layout, kernel layout, out layout, NHWC convolution expected)
CONVS = [
    # 3x3/2, the ResNet downsampling form
    (np.float32, 1, 32, 32, (32, 32), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), NHWC, HWIO, NHWC, True),
    # channels first, padding larger than the kernel, odd sizes
    (np.float32, 1, 32, 32, (31, 31), (3, 3), (2, 2), ((4, 3), (3, 5)), (1, 1), NCHW, OIHW, NCHW, True),
    # 1x1 projection with stride 2, odd input, two images
    (np.float32, 2, 32, 32, (33, 33), (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), NHWC, HWIO, NHWC, True),
    # a stride larger than the window, a wide window along the other dimension
    (np.float32, 1, 32, 32, (50, 18), (2, 3), (3, 1), ((0, 0), (0, 0)), (1, 1), NHWC, HWIO, NCHW, True),
    # kernel dilations, cropping (negative) padding, mixed layouts
    (np.float32, 1, 32, 32, (24, 25), (3, 3), (1, 1), ((-1, 2), (2, -1)), (2, 3), NCHW, HWIO, NHWC, True),
    # a dilation larger than the output rows
    (np.float32, 1, 64, 64, (16, 18), (3, 3), (1, 1), ((0, 0), (0, 0)), (6, 1), NHWC, HWIO, NHWC, True),
    # a stride along one dimension, a dilation along the other; kernel HWCN-like order
    (np.float32, 1, 32, 32, (33, 20), (3, 2), (2, 1), ((1, 0), (0, 1)), (1, 2), NCHW, HWCN, NCHW, True),
    # f16 operands accumulate in f32 (small integers: the f16 result is exact)
    (np.float16, 1, 32, 32, (32, 32), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), NHWC, HWIO, NHWC, None),
    # both a stride and a dilation along one dimension
    (np.float32, 1, 32, 32, (30, 30), (3, 3), (2, 1), ((1, 1), (1, 1)), (2, 1), NHWC, HWIO, NHWC, True),
    # stride 3 and dilation 2 on both, padding wider than the window, cropping, out NCHW
    (np.float32, 1, 16, 16, (40, 40), (3, 3), (3, 3), ((5, 4), (0, -2)), (2, 2), NHWC, HWIO, NCHW, True),
    # three images, 3 in and 5 out features (no vector multiple), channels first
    (np.float32, 3, 3, 5, (91, 45), (3, 3), (2, 1), ((1, 1), (0, 0)), (1, 1), NCHW, OIHW, NCHW, True),
    # one output row (its stride is moot), a dilated window along the columns
    (np.float32, 2, 32, 32, (3, 40), (3, 3), (2, 1), ((0, 0), (1, 1)), (1, 2), NHWC, HWIO, NHWC, True),
    # below the scheduling threshold: the generic
    (np.float32, 1, 8, 8, (9, 9), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), NCHW, OIHW, NCHW, False),
]


def _layout_dims(positions, sizes) -> list[int]:
    dims = [0] * len(positions)
    for p, s in zip(positions, sizes):
        dims[p] = s
    return dims


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_strided_convolution_matches_direct(case):
    dtype, n, cin, cout, spatial, kernel, strides, pads, rdil, lp, kp, op_, nhwc = CONVS[case]
    rng = np.random.default_rng(case)
    lhs = rng.integers(-2, 3, _layout_dims(lp, (n, cin, *spatial))).astype(dtype)
    rhs = rng.integers(-2, 3, _layout_dims(kp, (cout, cin, *kernel))).astype(dtype)
    b = xm.XlaBuilder("conv")
    x = b.parameter(0, xm.Shape.array(dtype, lhs.shape))
    k = b.parameter(1, xm.Shape.array(dtype, rhs.shape))
    b.conv_general_dilated(x, k, strides, list(pads), None, rdil, _dn(lp, kp, op_))
    exe = xm.compile(b.build())
    got = exe(lhs, rhs)
    want = direct_conv(lhs, rhs, strides, pads, (1, 1), rdil, lp, kp, op_)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float64), want)
    if nhwc is not None:
        assert ("conv_2d_nhwc_hwcf" in exe.stages["linalg"]) == nhwc


def test_direct_conv_agrees_with_reference_on_groups_and_lhs_dilation():
    """The test's own oracle against tests/reference.py where they overlap, with the
    options the NHWC path refuses (feature and batch groups, lhs dilation)."""
    rng = np.random.default_rng(7)
    b = xm.XlaBuilder("conv")
    lhs = rng.integers(-3, 4, (4, 5, 6, 4)).astype(np.float32)  # NHWC, 4 features
    rhs = rng.integers(-3, 4, (2, 3, 2, 4)).astype(np.float32)  # HWIO, 2 in per group, 4 out
    x = b.parameter(0, xm.Shape.array(np.float32, lhs.shape))
    k = b.parameter(1, xm.Shape.array(np.float32, rhs.shape))
    grouped = b.conv_general_dilated(x, k, (2, 1), [(1, 2), (0, 1)], (2, 1), (1, 2), _dn(NHWC, HWIO, NHWC),
                                     feature_group_count=2)
    rhs2 = rng.integers(-3, 4, (2, 3, 4, 4)).astype(np.float32)
    k2 = b.parameter(2, xm.Shape.array(np.float32, rhs2.shape))
    batched = b.conv_general_dilated(x, k2, (1, 2), [(0, 0), (1, 1)], None, None, _dn(NHWC, HWIO, NHWC),
                                     batch_group_count=2)
    comp = b.build([grouped, batched])
    want = evaluate(comp, [lhs, rhs, rhs2])
    got = xm.compile(comp)(lhs, rhs, rhs2)
    mine = [direct_conv(lhs, rhs, (2, 1), [(1, 2), (0, 1)], (2, 1), (1, 2), NHWC, HWIO, NHWC, fg=2),
            direct_conv(lhs, rhs2, (1, 2), [(0, 0), (1, 1)], (1, 1), (1, 1), NHWC, HWIO, NHWC, bg=2)]
    for g, w, m in zip(got, want, mine):
        np.testing.assert_array_equal(np.asarray(w, np.float64), m)
        np.testing.assert_array_equal(g, w)


def test_reference_skips_kernel_dilation_holes():
    """tests/reference.py used to dilate the kernel with zero taps, whose products with an
    inf or NaN under a hole made NaN where the library (and the definition: the holes are
    not read) sums only the taps; padding zeros still multiply an inf tap (NaN), in both."""
    rng = np.random.default_rng(4)
    lhs = rng.integers(-2, 3, (1, 4, 9, 9)).astype(np.float32)
    lhs[0, :, 1::2, :] = np.nan  # under the holes of every window of rows 0, 2, 4...
    rhs = rng.integers(-2, 3, (4, 4, 3, 3)).astype(np.float32)
    rhs[0, 0, 0, 0] = np.inf
    b = xm.XlaBuilder("holes")
    x = b.parameter(0, xm.Shape.array(np.float32, lhs.shape))
    k = b.parameter(1, xm.Shape.array(np.float32, rhs.shape))
    b.conv_general_dilated(x, k, (2, 1), [(0, 0), (1, 0)], None, (2, 3), _dn(NCHW, OIHW, NCHW))
    comp = b.build()
    got = xm.compile(comp)(lhs, rhs)
    with np.errstate(invalid="ignore"):
        want = direct_conv(lhs, rhs, (2, 1), [(0, 0), (1, 0)], (1, 1), (2, 3), NCHW, OIHW, NCHW)
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(evaluate(comp, [lhs, rhs]), want.astype(np.float32))
    np.testing.assert_array_equal(got, want.astype(np.float32))


# -- reduce_window pooling ------------------------------------------------------------------------

def _special_values(rng, shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-4, 5, shape).astype(dtype)
        pool = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype)
        mask = rng.random(shape) < 0.15
        x[mask] = pool[rng.integers(0, len(pool), shape)][mask]
        return x
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -5), 6, shape).astype(dtype)
    mask = rng.random(shape) < 0.1
    x[mask] = np.array([info.min, info.max], dtype)[rng.integers(0, 2, shape)][mask]
    return x


def _same_bits(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind == "f":  # any NaN for NaN (which one an add of two NaNs gives is open)
        nan = np.isnan(got)
        return bool(np.array_equal(nan, np.isnan(want)) and
                    np.array_equal(got[~nan].view(np.uint8 if got.itemsize == 1 else f"u{got.itemsize}"),
                                   want[~nan].view(np.uint8 if got.itemsize == 1 else f"u{got.itemsize}")))
    return bool(np.array_equal(got, want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int16])
def test_pooling_matches_reference(dtype):
    """Random pooling windows (NHWC, the channels untouched) with strides, padding and
    window dilations; max, min, add (from a +0 and a -0 init), both operand orders."""
    rng = np.random.default_rng(int(np.dtype(dtype).num))
    lanes = 64 // np.dtype(dtype).itemsize
    channels = int(rng.choice([lanes // 2, lanes - 1, lanes + 3, 2 * lanes + 1]))
    shape = (2, int(rng.integers(3, 9)), int(rng.integers(3, 9)), channels)
    x = _special_values(rng, shape, dtype)
    b = xm.XlaBuilder("pool")
    p = b.parameter(0, xm.Shape.array(dtype, shape))
    floating = np.dtype(dtype).kind == "f"
    kinds = [("max", lambda a, c: a.builder.max(a, c)), ("min", lambda a, c: a.builder.min(c, a)),
             ("add", lambda a, c: a + c), ("add", lambda a, c: c + a)]
    outs = []
    for i, (kind, fn) in enumerate(kinds):
        window = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4)), 1)
        if math.prod(window) == 1:
            window = (1, 2, 2, 1)
        strides = (1, int(rng.integers(1, 4)), int(rng.integers(1, 3)), 1)
        dil = (1, int(rng.integers(1, 3)), int(rng.integers(1, 3)), 1)
        pads = [(0, 0)] + [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(2)] + [(0, 0)]
        if floating:
            init = {"max": -np.inf, "min": np.inf}.get(kind, -0.0 if i == 3 else 0.0)
        else:
            info = np.iinfo(dtype)
            init = {"max": info.min, "min": info.max}.get(kind, 0)
        outs.append(b.reduce_window(p, b.constant(np.array(init, dtype)), fn, window, strides,
                                    None, dil, pads))
    comp = b.build(outs)
    exe = xm.compile(comp)
    got = exe(x)
    want = evaluate(comp, [x])
    for k, (g, w) in enumerate(zip(got, want)):
        assert _same_bits(g, w), f"output {k} ({kinds[k][0]}) differs"


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pooling_with_an_empty_output(dtype):
    """A dilated window wider than the input: an empty result, not a compile error (the
    vector loops and the window generic both indexed past the operand)."""
    b = xm.XlaBuilder("pool")
    p = b.parameter(0, xm.Shape.array(dtype, (2, 4, 3, 16)))
    init = b.constant(np.array(0, dtype))
    one = b.reduce_window(p, init, lambda a, c: a.builder.max(a, c), (1, 2, 3, 1), None, None,
                          (1, 1, 2, 1), [(0, 0)] * 4)
    two = b.reduce_window([p, p], [init, init],
                          lambda a, c, x, y: (a.builder.add(a, x), a.builder.max(c, y)),
                          (1, 5, 1, 1))
    got = xm.compile(b.build([one, two]))(np.ones((2, 4, 3, 16), dtype))
    assert got[0].shape == (2, 3, 0, 16) and got[0].dtype == dtype
    assert [g.shape for g in got[1]] == [(2, 0, 3, 16)] * 2


# -- transposes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,dims", [
    (np.float32, (9, 17)), (np.float32, (3, 17, 9)), (np.float32, (2, 9, 3, 17)),
    (np.uint8, (33, 65)), (np.uint8, (2, 33, 3, 35)), (np.float64, (5, 4, 7, 9)),
    (np.int16, (17, 3, 19)), (ml_dtypes.bfloat16, (3, 17, 2, 19)),
])
def test_every_permutation(dtype, dims):
    """Every permutation of the rank in one computation, sizes around one tile (8 f32,
    32 bytes) and odd ones; the results must be numpy's transposes exactly."""
    x = np.arange(math.prod(dims)).reshape(dims).astype(dtype)
    b = xm.XlaBuilder("transpose")
    p = b.parameter(0, xm.Shape.array(dtype, dims))
    perms = [perm for perm in itertools.permutations(range(len(dims))) if perm != tuple(range(len(dims)))]
    comp = b.build([b.transpose(p, list(perm)) for perm in perms])
    got = xm.compile(comp)(x)
    for perm, g in zip(perms, got):
        np.testing.assert_array_equal(np.asarray(g), x.transpose(perm), err_msg=f"perm {perm}")


# -- gather rows ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64, np.float16])
def test_gather_rows_clamped(dtype):
    """Rows of a 2-D table and a window of a 3-D one at random starts, many out of range
    (negative, past the end, the minor one too): clamped so the slice fits."""
    rng = np.random.default_rng(3)
    lanes = 64 // np.dtype(dtype).itemsize
    cols = lanes + 5
    table = (rng.integers(-100, 100, (13, cols))).astype(dtype)
    cube = (rng.integers(-100, 100, (4, 6, 2 * lanes + 3))).astype(dtype)
    rows = rng.integers(-20, 30, (7, 1)).astype(np.int32)
    starts = rng.integers(-40, 80, (3, 5, 3)).astype(np.int64)
    b = xm.XlaBuilder("gather")
    t = b.parameter(0, xm.Shape.array(dtype, table.shape))
    c = b.parameter(1, xm.Shape.array(dtype, cube.shape))
    r = b.parameter(2, xm.Shape.array(np.int32, rows.shape))
    s = b.parameter(3, xm.Shape.array(np.int64, starts.shape))
    GD = xm.GatherDimensionNumbers
    whole = b.gather(t, r, GD((1,), (0,), (0,), 1), (1, cols))
    part = b.gather(t, r, GD((1,), (0,), (0,), 1), (1, lanes // 2 + 1))
    window = b.gather(c, s, GD((2, 3), (0,), (0, 1, 2), 2), (1, 2, lanes + 1))
    comp = b.build([whole, part, window])
    args = [table, cube, rows, starts]
    got = xm.compile(comp)(*args)
    want = evaluate(comp, args)
    # Independently: clamp the starts by hand.
    r0 = np.clip(rows[:, 0], 0, 12)
    np.testing.assert_array_equal(got[0], table[r0])
    np.testing.assert_array_equal(got[1], table[r0, :lanes // 2 + 1])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    i0 = np.clip(starts[..., 0], 0, 3)
    i1 = np.clip(starts[..., 1], 0, 4)
    i2 = np.clip(starts[..., 2], 0, lanes + 2)
    for idx in np.ndindex(3, 5):
        expect = cube[i0[idx], i1[idx]:i1[idx] + 2, i2[idx]:i2[idx] + lanes + 1]
        np.testing.assert_array_equal(got[2][idx], expect)


# -- dots ------------------------------------------------------------------------------------------

DN = xm.DotDimensionNumbers


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.float16])
def test_matrix_vector_dots_around_lane_depths(dtype):
    """W h, x W^T (the vector first), batched per head, at depths 48 (not a lane path),
    64 (the smallest), 80, 63 and 65 (not multiples of 16) and 128."""
    rng = np.random.default_rng(11)
    b = xm.XlaBuilder("matvec")
    args, outs, wants = [], [], []

    def param(a):
        args.append(a)
        return b.parameter(len(args) - 1, xm.Shape.array(a.dtype, a.shape))

    def ints(*shape):
        return rng.integers(-3, 4, shape).astype(dtype)

    for k in (48, 64, 80, 63, 65, 128):
        w, h = ints(5, k), ints(k)
        outs.append(b.dot_general(param(w), param(h), DN([1], [0])))
        wants.append(w.astype(np.int64) @ h.astype(np.int64))
        hh, w2 = ints(k), ints(3, k)
        outs.append(b.dot_general(param(hh), param(w2), DN([0], [1])))
        wants.append(w2.astype(np.int64) @ hh.astype(np.int64))
        q, kk = ints(2, k), ints(2, 7, k)  # one query per head against its keys
        outs.append(b.dot_general(param(q), param(kk), DN([1], [2], [0], [0])))
        wants.append(np.einsum("bk,bnk->bn", q.astype(np.int64), kk.astype(np.int64)))
    got = xm.compile(b.build(outs))(*args)
    for i, (g, w) in enumerate(zip(got, wants)):
        if np.dtype(dtype).kind == "i":  # wrapping in the element type
            w = w.astype(dtype)
        np.testing.assert_array_equal(np.asarray(g), w.astype(dtype), err_msg=f"dot {i}")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.float16])
def test_batched_dots_odd_sizes(dtype):
    """Batched matmuls with odd sizes, the batch dimension leading or not, contracting
    either side's minor dimension."""
    rng = np.random.default_rng(5)
    b = xm.XlaBuilder("batched")
    args, outs, wants = [], [], []

    def param(a):
        args.append(a)
        return b.parameter(len(args) - 1, xm.Shape.array(a.dtype, a.shape))

    for bs, m, k, n in ((3, 5, 7, 9), (2, 17, 33, 15), (5, 1, 31, 17), (1, 33, 65, 3)):
        x, y = rng.integers(-3, 4, (bs, m, k)).astype(dtype), rng.integers(-3, 4, (bs, k, n)).astype(dtype)
        outs.append(b.dot_general(param(x), param(y), DN([2], [1], [0], [0])))
        wants.append(np.einsum("bmk,bkn->bmn", x.astype(np.int64), y.astype(np.int64)))
        yt = np.ascontiguousarray(y.transpose(2, 0, 1))  # [n, b, k]: batch in the middle
        outs.append(b.dot_general(param(x), param(yt), DN([2], [2], [0], [1])))
        wants.append(np.einsum("bmk,nbk->bmn", x.astype(np.int64), yt.astype(np.int64)))
    got = xm.compile(b.build(outs))(*args)
    for i, (g, w) in enumerate(zip(got, wants)):
        np.testing.assert_array_equal(np.asarray(g), w.astype(dtype), err_msg=f"dot {i}")


# -- bounded dynamic shapes --------------------------------------------------------------------------

def test_dynamic_dimension_reductions_and_dots_ignore_the_padding():
    """A runtime size set on dimension 1 (clamped to [0, bound]): sums, maxima, a dot
    contracting it and an elementwise op before a reduction see only the valid prefix;
    the other dimension's reduction keeps the valid prefix of the dynamic one."""
    rng = np.random.default_rng(2)
    x = rng.integers(-9, 10, (5, 7)).astype(np.float32)
    z = rng.integers(-9, 10, (7, 3)).astype(np.float32)
    b = xm.XlaBuilder("dyn")
    p = b.parameter(0, xm.Shape.array(np.float32, x.shape))
    q = b.parameter(1, xm.Shape.array(np.float32, z.shape))
    n = b.parameter(2, xm.Shape.array(np.int32, ()))
    y = b.set_dimension_size(p, n, 1)
    zd = b.set_dimension_size(q, n, 0)
    zero, low = b.constant(np.float32(0)), b.constant(np.float32(-np.inf))
    outs = [b.reduce(y, zero, lambda u, v: u + v, [1]),
            b.reduce(y, low, lambda u, v: u.builder.max(u, v), [1]),
            b.get_dimension_size(y, 1),
            b.dot_general(y, zd, DN([1], [0])),
            b.reduce(b.mul(y, b.constant(np.float32(2))), zero, lambda u, v: u + v, [0, 1]),
            b.reduce(y, zero, lambda u, v: u + v, [0])]
    exe = xm.compile(b.build(outs))
    for size in (0, 3, 7, 9, -1):
        k = min(max(size, 0), 7)
        got = exe(x, z, np.int32(size))
        valid = x[:, :k]
        np.testing.assert_array_equal(got[0], valid.sum(1), err_msg=f"sum, size {size}")
        np.testing.assert_array_equal(got[1], valid.max(1) if k else np.full(5, -np.inf, np.float32))
        assert int(got[2]) == k
        np.testing.assert_array_equal(got[3], valid @ z[:k])
        assert float(got[4]) == 2 * valid.sum()
        np.testing.assert_array_equal(np.asarray(got[5])[:k], valid.sum(0))


# -- dot algorithms ----------------------------------------------------------------------------------

# Largest error of each preset on f32 operands, relative to sum |x| |y|: one bf16 (tf32)
# rounding or truncation of each operand, or the parts the split presets leave out.
ALGORITHM_ERRORS = {"BF16_BF16_F32": 2.0**-7, "BF16_BF16_F32_X3": 2.0**-14, "BF16_BF16_F32_X6": 2.0**-19,
                    "BF16_BF16_F32_X9": 2.0**-19, "TF32_TF32_F32": 2.0**-9, "TF32_TF32_F32_X3": 2.0**-18,
                    "F32_F32_F32": 2.0**-20}


def test_dot_algorithms_within_their_precision():
    """Each f32 preset within its precision of the exact product (batched, odd sizes), the
    less precise ones measurably off (the algorithm is applied, not ignored),
    BF16_BF16_F32 exactly the product of the bf16-rounded operands where that sum is exact,
    and an infinite operand giving inf in the split presets (whose low parts are NaN)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, (2, 5, 33)).astype(np.float32)
    y = rng.uniform(-2, 2, (2, 33, 7)).astype(np.float32)
    small_x = rng.uniform(1, 2, (3, 4)).astype(np.float32)  # products of bf16 values in [1, 4):
    small_y = rng.uniform(1, 2, (4, 2)).astype(np.float32)  # 4 of them sum exactly in f32
    inf_x = np.ones((2, 3), np.float32) * np.float32(1.1)
    inf_x[0, 1] = np.inf
    inf_y = np.full((3, 2), 1.3, np.float32)
    arrays = [x, y, small_x, small_y, inf_x, inf_y]
    b = xm.XlaBuilder("algorithms")
    ps = [b.parameter(i, xm.Shape.array(a.dtype, a.shape)) for i, a in enumerate(arrays)]
    outs = []
    for name in ALGORITHM_ERRORS:
        outs.append(b.dot_general(ps[0], ps[1], DN([2], [1], [0], [0]), algorithm=name))
        outs.append(b.dot_general(ps[4], ps[5], DN([1], [0]), algorithm=name))
    outs.append(b.dot_general(ps[2], ps[3], DN([1], [0]), algorithm="BF16_BF16_F32"))
    got = xm.compile(b.build(outs))(*arrays)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    exact = np.einsum("bmk,bkn->bmn", x64, y64)
    scale = np.einsum("bmk,bkn->bmn", np.abs(x64), np.abs(y64))
    for i, (name, tolerance) in enumerate(ALGORITHM_ERRORS.items()):
        error = float(np.max(np.abs(got[2 * i].astype(np.float64) - exact) / scale))
        assert error <= tolerance, f"{name}: relative error {error:.3g} > {tolerance:.3g}"
        if name in ("BF16_BF16_F32", "TF32_TF32_F32"):
            assert error > tolerance / 2**8, f"{name}: error {error:.3g}: operands not rounded?"
        row = got[2 * i + 1]
        assert np.all(np.isposinf(row[0])) and np.all(np.isfinite(row[1])), f"{name} with inf: {row}"
    rounded = [a.astype(ml_dtypes.bfloat16).astype(np.float64) for a in (small_x, small_y)]
    np.testing.assert_array_equal(got[-1], (rounded[0] @ rounded[1]).astype(np.float32))


def test_scheduled_contractions_with_odd_sizes():
    """Products above the scheduling threshold (2 * 64^3 flops) at sizes that are no
    multiple of any register tile: a matmul with a bias + relu epilogue, batched products
    (one element, two batch dimensions, the rhs transposed as in Q K^T), a flatten before
    the dot and a reshape after it (rebuilt by split_contractions)."""
    rng = np.random.default_rng(13)
    b = xm.XlaBuilder("scheduled")
    args, outs, wants = [], [], []

    def param(*shape):
        a = rng.integers(-3, 4, shape).astype(np.float32)
        args.append(a)
        return b.parameter(len(args) - 1, xm.Shape.array(np.float32, shape)), a.astype(np.int64)

    (x, xv), (w, wv), (bias, bv) = param(129, 67), param(67, 131), param(131)
    y = b.add(b.dot_general(x, w, DN([1], [0])), bias, [1])
    outs.append(b.max(y, b.constant(np.float32(0))))
    wants.append(np.maximum(xv @ wv + bv, 0))
    for lhs_shape, rhs_shape, dn, spec in (
            ((3, 67, 65), (3, 65, 71), DN([2], [1], [0], [0]), "bmk,bkn->bmn"),
            ((1, 97, 65), (1, 65, 83), DN([2], [1], [0], [0]), "bmk,bkn->bmn"),
            ((2, 2, 33, 65), (2, 2, 65, 67), DN([3], [2], [0, 1], [0, 1]), "abmk,abkn->abmn"),
            ((2, 67, 64), (2, 71, 64), DN([2], [2], [0], [0]), "bmk,bnk->bmn")):
        (p, pv), (q, qv) = param(*lhs_shape), param(*rhs_shape)
        outs.append(b.dot_general(p, q, dn))
        wants.append(np.einsum(spec, pv, qv))
    (f, fv), (g, gv) = param(64, 4, 33), param(132, 67)
    product = b.dot_general(b.reshape(f, [64, 132]), g, DN([1], [0]))
    outs.append(product)
    wants.append(fv.reshape(64, 132) @ gv)
    outs.append(b.reshape(product, [8, 8, 67]))
    wants.append((fv.reshape(64, 132) @ gv).reshape(8, 8, 67))
    got = xm.compile(b.build(outs))(*args)
    for i, (o, want) in enumerate(zip(got, wants)):
        np.testing.assert_array_equal(np.asarray(o), want.astype(np.float32), err_msg=f"output {i}")


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_reductions_of_a_broadcast_constant(dtype):
    """The summed value does not vary along the reduction (a broadcast constant folded into
    the body): linalg's vectorizer added it once per output instead of once per window cell
    (reduce_window of ones over windows of 2 gave 1 for the vectorized outputs; found by the
    differential fuzzer, seed 61481, a variadic reduce_window whose other result was dead).
    One program each: the bug needs the sum to be the program's only loop nest."""
    def ones(b, dims):
        return b.broadcast(b.constant(np.array(1, dtype)), dims)

    programs = [
        (lambda b, z: b.reduce_window(ones(b, [64]), z, lambda a, c: a + c, [2], [1]), np.full(63, 2, dtype)),
        (lambda b, z: b.reduce_window(ones(b, [64]), z, lambda a, c: a + c, [3], [1]), np.full(62, 3, dtype)),
        (lambda b, z: b.get_tuple_element(b.reduce_window(
            [b.parameter(0, xm.Shape.array(np.uint8, (64,))), ones(b, [64])], [b.constant(np.uint8(0)), z],
            lambda a, c, e, f: [a.builder.max(a, e), c + f], [2], [1]), 1), np.full(63, 2, dtype)),
    ]
    for i, (build, want) in enumerate(programs):
        b = xm.XlaBuilder("constant_sums")
        root = build(b, b.constant(np.array(0, dtype)))
        exe = xm.compile(b.build(root))
        got = exe(np.zeros(64, np.uint8)) if i == 2 else exe()
        np.testing.assert_array_equal(got, want, err_msg=f"program {i}")
