"""Tests of the shape family: reshape, collapse, broadcast, transpose, rev, slice,
concat_in_dim, pad, iota, get_dimension_size, dynamic_slice, dynamic_update_slice
and `x[...]` indexing.

Numerics are compared exactly with numpy (data movement never rounds). To keep
compile counts low, `run_all` builds several results in one computation and
returns them through a single flattened concatenation (tuple results are not
needed for that). Then: the seeds' worked examples verbatim (001/003/004), edge
shapes (rank 0..4, zero-size dimensions), XLA's clamping of dynamic start
indices for every integer index type, a ShapeError test for every shape rule,
FileCheck tests of the `hlo` and `linalg` stages, and the text round trip
through `compile_mlir` (whose verifier re-runs the shape rules).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, run, stage_text

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"pred": np.dtype(np.bool_), "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
          "s32": np.dtype(np.int32), "s64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
          "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
          "f16": np.dtype(np.float16), "bf16": BF16, "f32": np.dtype(np.float32),
          "f64": np.dtype(np.float64), "c64": np.dtype(np.complex64),
          "c128": np.dtype(np.complex128)}
INDEX_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


# ---- helpers --------------------------------------------------------------------------------


def shape_of(a: np.ndarray) -> xm.Shape:
    return xm.Shape.array(xm.type_of(a.dtype), a.shape)


def data(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    """Distinct small values (exact in every type); complex ones get an imaginary part."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    n = math.prod(shape)
    values = (np.arange(n) % 100 + 1).reshape(shape)
    if dtype.kind == "c":
        return (values + 1j * (values % 7)).astype(dtype)
    return values.astype(dtype)


Build = Callable[..., xm.XlaOp]


def run_all(builds: Sequence[Build], *arrays: np.ndarray) -> list[np.ndarray]:
    """Compile one computation computing every `build(b, *params)` and return their values.

    The results (all of one element type) are flattened and concatenated into the
    single result, then split and reshaped here.
    """
    b = xm.XlaBuilder("shape_test")
    params = [b.parameter(i, shape_of(a)) for i, a in enumerate(arrays)]
    outs = [build(b, *params) for build in builds]
    flat = [b.reshape(o, (math.prod(o.shape.dimensions),)) for o in outs]
    b.concat_in_dim(flat, 0) if len(flat) > 1 else flat[0]
    result = xm.compile(b.build())(*arrays)
    values, offset = [], 0
    for o in outs:
        n = math.prod(o.shape.dimensions)
        values.append(result[offset:offset + n].reshape(o.shape.dimensions))
        offset += n
    return values


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype == BF16:  # compare bits: numpy's == on bfloat16 goes through float
        actual, expected = actual.view(np.uint16), expected.view(np.uint16)
    np.testing.assert_array_equal(actual, expected)


def reference_pad(x: np.ndarray, value, config: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """XLA's pad: interior padding first, then edge padding (negative crops)."""
    for d, (low, high, interior) in enumerate(config):
        n = x.shape[d]
        dilated_shape = list(x.shape)
        dilated_shape[d] = n + max(n - 1, 0) * interior
        dilated = np.full(dilated_shape, value, x.dtype)
        index = [slice(None)] * x.ndim
        index[d] = slice(None, None, interior + 1)
        dilated[tuple(index)] = x
        widths = [(0, 0)] * x.ndim
        widths[d] = (max(low, 0), max(high, 0))
        x = np.pad(dilated, widths, constant_values=value)
        index = [slice(None)] * x.ndim
        index[d] = slice(max(-low, 0), x.shape[d] - max(-high, 0))
        x = x[tuple(index)]
    return x


def clamp_start(start: int, dim: int, size: int) -> int:
    return min(max(int(start), 0), dim - size)


# ---- every op on every element type ---------------------------------------------------------

PAD_CONFIG = [(1, -1, 1), (0, 2, 0), (-1, 0, 2)]


def _data_movement(dtype: np.dtype) -> tuple[list[Build], list[np.ndarray], list[np.ndarray]]:
    x = data((2, 3, 4), dtype)
    if dtype == np.bool_:
        pad_value = np.asarray(True)
    else:  # -1 where it exists; unsigned types get a value with the top bit set
        pad_value = np.asarray(200 if dtype.kind == "u" else -1).astype(dtype)
    u = data((1, 2, 2), dtype, seed=2)

    def scalar(b, v):
        return b.constant(np.int32(v))

    builds: list[Build] = [
        lambda b, p, v, u: b.transpose(p, (2, 0, 1)),
        lambda b, p, v, u: b.transpose(p, (1, 2, 0)),
        lambda b, p, v, u: b.rev(p, (0, 2)),
        lambda b, p, v, u: b.rev(p, (1,)),
        lambda b, p, v, u: b.slice(p, (0, 1, 0), (2, 3, 4), (1, 1, 3)),
        lambda b, p, v, u: b.pad(p, v, PAD_CONFIG),
        lambda b, p, v, u: b.concat_in_dim([p, b.rev(p, (2,)), p], 2),
        lambda b, p, v, u: b.reshape(p, (4, 6)),
        lambda b, p, v, u: b.reshape(p, (6, 4), (2, 0, 1)),
        lambda b, p, v, u: b.collapse(p, (1, 2)),
        lambda b, p, v, u: b.broadcast(p, (2,)),
        lambda b, p, v, u: b.broadcast_in_dim(v, (2, 3), ()),
        lambda b, p, v, u: b.dynamic_slice(p, [scalar(b, 5), scalar(b, -3), scalar(b, 1)], (1, 2, 2)),
        lambda b, p, v, u: b.dynamic_update_slice(p, u, [scalar(b, 1), scalar(b, 1), scalar(b, 9)]),
        lambda b, p, v, u: p[..., ::-2],
        lambda b, p, v, u: p[1, :, -1],
    ]
    x_upd = x.copy()
    x_upd[1:2, 1:3, 2:4] = u
    expected = [
        x.transpose(2, 0, 1), x.transpose(1, 2, 0), x[::-1, :, ::-1], x[:, ::-1],
        x[0:2, 1:3, 0:4:3], reference_pad(x, pad_value, PAD_CONFIG),
        np.concatenate([x, x[:, :, ::-1], x], 2), x.reshape(4, 6),
        x.transpose(2, 0, 1).reshape(6, 4), x.reshape(2, 12), np.broadcast_to(x, (2, 2, 3, 4)),
        np.full((2, 3), pad_value), x[1:2, 0:2, 1:3], x_upd, x[..., ::-2], x[1, :, -1],
    ]
    return builds, [x, pad_value, u], expected


@pytest.mark.parametrize("name", list(DTYPES))
def test_data_movement_every_type(name: str) -> None:
    builds, arrays, expected = _data_movement(DTYPES[name])
    for actual, want in zip(run_all(builds, *arrays), expected, strict=True):
        assert_same(actual, want)


@pytest.mark.parametrize("name", ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16",
                                  "f32", "f64", "c64", "c128"])
def test_iota_every_accepted_type(name: str) -> None:
    dtype = DTYPES[name]
    builds = [lambda b, d=d: b.iota(xm.Shape.array(xm.type_of(dtype), (2, 3, 4)), d) for d in range(3)]
    expected = [np.broadcast_to(np.arange(n).reshape([-1 if i == d else 1 for i in range(3)]),
                                (2, 3, 4)).astype(dtype) for d, n in enumerate((2, 3, 4))]
    for actual, want in zip(run_all(builds), expected, strict=True):
        assert_same(actual, want)


def test_iota_wraps_in_narrow_integer_types() -> None:
    # XLA computes an integer iota in its own type: s8 wraps past 127, u8 past 255.
    for name in ("s8", "u8"):
        got = run(lambda b, n=name: b.iota(xm.Shape.array(xm.type_of(DTYPES[n]), (300,)), 0))
        assert_same(got, np.arange(300).astype(DTYPES[name]))


def test_iota_float_is_converted_integer_iota() -> None:
    # f16 iota above 2048 rounds like ConvertElementType of the integer iota.
    got = run(lambda b: b.iota(xm.Shape.array(xm.F16, (4099,)), 0))
    assert_same(got, np.arange(4099).astype(np.float16))


def test_get_dimension_size() -> None:
    x = data((2, 0, 7), np.float32)
    got = run_all([lambda b, p, d=d: b.get_dimension_size(p, d) for d in range(3)], x)
    for d, value in enumerate(got):
        assert_same(value, np.array(x.shape[d], np.int32))


# ---- the seeds' worked examples -------------------------------------------------------------

V = np.array([[[10, 11, 12], [15, 16, 17]],
              [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]],
              [[40, 41, 42], [45, 46, 47]]], np.float32)  # f32[4x2x3], seeds' Collapse/Reshape


def test_seed_collapse() -> None:
    """The seeds' Collapse example. Its two 2-D results are listed under swapped names
    (001/003/004 alike): by the rule in the same text, collapsing {0,1} of f32[4x2x3]
    gives 4*2 = 8 rows of 3 (what the seeds print for v12) and {1,2} gives 4 rows of
    2*3 = 6 (what they print for v01). We follow the rule, as XLA does."""
    v012, v01, v12 = run_all([lambda b, v: b.collapse(v, (0, 1, 2)),
                              lambda b, v: b.collapse(v, (0, 1)),
                              lambda b, v: b.collapse(v, (1, 2))], V)
    assert_same(v012, np.array([10, 11, 12, 15, 16, 17, 20, 21, 22, 25, 26, 27,
                                30, 31, 32, 35, 36, 37, 40, 41, 42, 45, 46, 47], np.float32))
    assert_same(v12, np.array([[10, 11, 12, 15, 16, 17], [20, 21, 22, 25, 26, 27],
                               [30, 31, 32, 35, 36, 37], [40, 41, 42, 45, 46, 47]], np.float32))
    assert_same(v01, np.array([[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
                               [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]], np.float32))


def test_seed_reshape() -> None:
    got = run_all([
        lambda b, v: b.reshape(v, (24,), (0, 1, 2)),
        lambda b, v: b.reshape(v, (8, 3), (0, 1, 2)),
        lambda b, v: b.reshape(v, (24,), (1, 2, 0)),
        lambda b, v: b.reshape(v, (8, 3), (1, 2, 0)),
        lambda b, v: b.reshape(v, (2, 6, 2), (1, 2, 0)),
        lambda b, v: b.reshape(v, (24,)),  # seed 001's two-argument form
        lambda b, v: b.reshape(v, (8, 3)),
    ], V)
    in_order = np.array([10, 11, 12, 15, 16, 17, 20, 21, 22, 25, 26, 27,
                         30, 31, 32, 35, 36, 37, 40, 41, 42, 45, 46, 47], np.float32)
    # D2: seeds 003/004 are right, seed 000's {10,11,12,20,...} is not.
    out_of_order = np.array([10, 20, 30, 40, 11, 21, 31, 41, 12, 22, 32, 42,
                             15, 25, 35, 45, 16, 26, 36, 46, 17, 27, 37, 47], np.float32)
    assert_same(got[0], in_order)
    assert_same(got[1], np.array([[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
                                  [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]], np.float32))
    assert_same(got[2], out_of_order)
    assert_same(got[3], np.array([[10, 20, 30], [40, 11, 21], [31, 41, 12], [22, 32, 42],
                                  [15, 25, 35], [45, 16, 26], [36, 46, 17], [27, 37, 47]], np.float32))
    assert_same(got[4], np.array([[[10, 20], [30, 40], [11, 21], [31, 41], [12, 22], [32, 42]],
                                  [[15, 25], [35, 45], [16, 26], [36, 46], [17, 27], [37, 47]]],
                                 np.float32))
    assert_same(got[5], in_order)
    assert_same(got[6], got[1])


def test_seed_reshape_scalar_and_one_element() -> None:
    assert_same(run(lambda b, x: b.reshape(x, (), (0, 1)), np.array([[5]], np.float32)),
                np.array(5, np.float32))
    assert_same(run(lambda b, x: b.reshape(x, (1, 1), ()), np.array(5, np.float32)),
                np.array([[5]], np.float32))
    # seed 001's Reshape(shape, operand): the target given as a Shape.
    target = xm.Shape.array(xm.F32, (1, 1))
    assert_same(run(lambda b, x: b.reshape(x, target), np.array(5, np.float32)),
                np.array([[5]], np.float32))


def test_seed_concatenate() -> None:
    a = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    b_ = np.array([[7, 8]], np.float32)
    one_d = run(lambda b: b.concat_in_dim([b.constant(np.array(v, np.float32))
                                           for v in ([2, 3], [4, 5], [6, 7])], 0))
    assert_same(one_d, np.array([2, 3, 4, 5, 6, 7], np.float32))
    assert_same(run(lambda b, x, y: b.concat_in_dim([x, y], 0), a, b_),
                np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32))


A = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
B = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], np.float32)


def test_seed_slice() -> None:
    assert_same(run(lambda b, a: b.slice(a, (2,), (4,)), A), np.array([2.0, 3.0], np.float32))
    assert_same(run(lambda b, x: b.slice(x, (2, 1), (4, 3)), B),
                np.array([[7.0, 8.0], [10.0, 11.0]], np.float32))


def test_seed_dynamic_slice() -> None:
    s32 = np.int32
    assert_same(run(lambda b, a: b.dynamic_slice(a, [b.constant(s32(2))], (2,)), A),
                np.array([2.0, 3.0], np.float32))
    assert_same(run(lambda b, x: b.dynamic_slice(x, [b.constant(s32(2)), b.constant(s32(1))], (2, 2)),
                    B), np.array([[7.0, 8.0], [10.0, 11.0]], np.float32))
    # seed 003's form: the start indices as one rank-1 array.
    assert_same(run(lambda b, x, s: b.dynamic_slice(x, s, (2, 2)), B, np.array([2, 1], np.int32)),
                np.array([[7.0, 8.0], [10.0, 11.0]], np.float32))


def test_seed_dynamic_update_slice() -> None:
    s32 = np.int32
    u1 = np.array([5.0, 6.0], np.float32)
    assert_same(run(lambda b, a, u: b.dynamic_update_slice(a, u, [b.constant(s32(2))]), A, u1),
                np.array([0.0, 1.0, 5.0, 6.0, 4.0], np.float32))
    u2 = np.array([[12.0, 13.0], [14.0, 15.0], [16.0, 17.0]], np.float32)
    got = run(lambda b, x, u: b.dynamic_update_slice(x, u, [b.constant(s32(1)), b.constant(s32(1))]),
              B, u2)
    assert_same(got, np.array([[0.0, 1.0, 2.0], [3.0, 12.0, 13.0], [6.0, 14.0, 15.0],
                               [9.0, 16.0, 17.0]], np.float32))


def test_seed_broadcast_iota_transpose_rev() -> None:
    assert_same(run(lambda b: b.broadcast(b.constant(np.float32(2.0)), (2, 3))),
                np.full((2, 3), 2.0, np.float32))
    rows, cols = run_all([lambda b: b.iota(xm.Shape.array(xm.S32, (4, 8)), 0),
                          lambda b: b.iota(xm.Shape.array(xm.S32, (4, 8)), 1)])
    assert_same(rows, np.repeat(np.arange(4, dtype=np.int32)[:, None], 8, 1))
    assert_same(cols, np.repeat(np.arange(8, dtype=np.int32)[None, :], 4, 0))
    # Transpose {1,2,0}: input_dims[permutation[i]] == output_dims[i] (a non-symmetric check).
    t, r = run_all([lambda b, v: b.transpose(v, (1, 2, 0)), lambda b, v: b.rev(v, (0, 2))], V)
    assert t.shape == (2, 3, 4)
    assert_same(t, V.transpose(1, 2, 0))
    assert_same(r, V[::-1, :, ::-1])


def test_pad_examples() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    zero = np.float32(0)
    cases = [
        [(0, 0, 0), (0, 0, 0)],  # all zero: identity (seeds 000/003/004)
        [(1, 2, 0), (0, 1, 0)],
        [(0, 0, 1), (0, 0, 2)],  # interior only
        [(-1, 0, 0), (0, -2, 0)],  # negative edges crop
        [(-1, -1, 2), (-2, 1, 1)],  # negative edges cut into the interior padding (D16 order)
        [(-4, 0, 2), (2, -6, 1)],  # crop down to padding only
    ]
    got = run_all([lambda b, p, v, c=c: b.pad(p, v, c) for c in cases], x, np.array(-7, np.float32))
    for c, value in zip(cases, got, strict=True):
        assert_same(value, reference_pad(x, np.float32(-7), c))
    assert_same(run(lambda b, p: b.pad(p, b.constant(zero), [(0, 0, 0), (1, 1, 0)]), x),
                np.pad(x, [(0, 0), (1, 1)]))


# ---- edge shapes: rank 0..4, zero-size dimensions -------------------------------------------


def test_rank_zero_to_four() -> None:
    s = data((), np.float32)
    x4 = data((2, 1, 3, 2), np.float32)
    got = run_all([
        lambda b, s, x: b.reshape(s, (1, 1, 1, 1)),
        lambda b, s, x: b.reshape(b.reshape(s, (1, 1)), ()),
        lambda b, s, x: b.transpose(s, ()),
        lambda b, s, x: b.rev(s, ()),
        lambda b, s, x: b.slice(s, (), ()),
        lambda b, s, x: b.pad(s, s, []),
        lambda b, s, x: b.broadcast(s, (2, 3)),
        lambda b, s, x: b.dynamic_slice(s, [], ()),
        lambda b, s, x: b.dynamic_update_slice(s, s, []),
        lambda b, s, x: s[...],
        lambda b, s, x: b.transpose(x, (3, 1, 0, 2)),
        lambda b, s, x: b.rev(x, (0, 2, 3)),
        lambda b, s, x: b.slice(x, (1, 0, 0, 1), (2, 1, 3, 2), (1, 1, 2, 1)),
        lambda b, s, x: b.pad(x, s, [(1, 0, 0), (0, 0, 1), (0, -1, 1), (1, 1, 0)]),
        lambda b, s, x: b.concat_in_dim([x, x], 3),
        lambda b, s, x: b.reshape(x, (3, 4)),
        lambda b, s, x: b.collapse(x, (0, 1, 2, 3)),
        lambda b, s, x: x[:, 0, ::-1, None, -1],
        lambda b, s, x: b.iota(xm.Shape.array(xm.F32, (2, 1, 3, 2)), 2),
    ], s, x4)
    expected = [
        s.reshape(1, 1, 1, 1), s, s, s, s, s, np.broadcast_to(s, (2, 3)), s, s, s,
        x4.transpose(3, 1, 0, 2), x4[::-1, :, ::-1, ::-1], x4[1:2, 0:1, 0:3:2, 1:2],
        reference_pad(x4, s, [(1, 0, 0), (0, 0, 1), (0, -1, 1), (1, 1, 0)]),
        np.concatenate([x4, x4], 3), x4.reshape(3, 4), x4.reshape(12), x4[:, 0, ::-1, None, -1],
        np.broadcast_to(np.arange(3, dtype=np.float32)[:, None], (2, 1, 3, 2)),
    ]
    for actual, want in zip(got, expected, strict=True):
        assert_same(actual, want)


def test_zero_size_dimensions() -> None:
    z = np.zeros((2, 0, 3), np.int32)
    x = data((2, 3), np.int32)
    v = np.array(9, np.int32)
    got = run_all([
        lambda b, z, x, v: b.reshape(z, (0, 6)),
        lambda b, z, x, v: b.reshape(z, (3, 0, 2, 1)),
        lambda b, z, x, v: b.transpose(z, (2, 1, 0)),
        lambda b, z, x, v: b.rev(z, (0, 1, 2)),
        lambda b, z, x, v: b.pad(z, v, [(0, 0, 0), (1, 1, 3), (0, 0, 1)]),  # empty operand padded
        lambda b, z, x, v: b.pad(x, v, [(-2, 0, 0), (0, 0, 0)]),  # cropped to nothing
        lambda b, z, x, v: b.concat_in_dim([z, z, z], 1),
        lambda b, z, x, v: b.concat_in_dim([b.slice(x, (0, 0), (2, 0)), x], 1),
        lambda b, z, x, v: b.slice(x, (1, 2), (1, 3)),  # an empty slice (D10)
        lambda b, z, x, v: b.slice(x, (2, 3), (2, 3), (5, 7)),
        lambda b, z, x, v: b.broadcast(x, (0,)),
        lambda b, z, x, v: b.dynamic_slice(x, [b.constant(np.int32(5)), b.constant(np.int32(-9))],
                                           (0, 2)),
        lambda b, z, x, v: b.dynamic_update_slice(x, b.slice(x, (0, 0), (0, 2)),
                                                  [b.constant(np.int32(1)), b.constant(np.int32(1))]),
        lambda b, z, x, v: b.dynamic_slice(z, [b.constant(np.int32(1))] * 3, (1, 0, 2)),
        lambda b, z, x, v: b.iota(xm.Shape.array(xm.S32, (0, 4)), 1),
        lambda b, z, x, v: x[1:1, ::-1],
        lambda b, z, x, v: x[::-1, 5:],
    ], z, x, v)
    expected = [
        np.zeros((0, 6), np.int32), np.zeros((3, 0, 2, 1), np.int32), np.zeros((3, 0, 2), np.int32),
        z, np.full((2, 2, 5), 9, np.int32), np.zeros((0, 3), np.int32), z,
        x, np.zeros((0, 1), np.int32), np.zeros((0, 0), np.int32), np.zeros((0, 2, 3), np.int32),
        np.zeros((0, 2), np.int32), x, np.zeros((1, 0, 2), np.int32), np.zeros((0, 4), np.int32),
        x[1:1, ::-1], x[::-1, 5:],
    ]
    for actual, want in zip(got, expected, strict=True):
        assert_same(actual, want)


# ---- dynamic start indices: XLA's clamp for every index type --------------------------------


def _index_values(name: str) -> list[int]:
    info = np.iinfo(DTYPES[name])
    values = {0, 1, 2, 3, 4, 6, 100, int(info.max), int(info.max) - 1}
    if info.min < 0:
        values |= {-1, -2, -5, int(info.min), int(info.min) + 1}
    else:
        values |= {int(info.max) // 2 + 1}  # the top bit set: must not read as negative
    return sorted(values)


@pytest.mark.parametrize("name", INDEX_TYPES)
def test_dynamic_slice_clamps_every_start(name: str) -> None:
    """start = clamp(start, 0, dim - size) in every dimension (D4, D5), for runtime indices
    of every integer type; unsigned values are never read as negative."""
    dtype = DTYPES[name]
    x = data((5, 7), np.float32)
    b = xm.XlaBuilder("ds")
    p = b.parameter(0, shape_of(x))
    i = b.parameter(1, xm.Shape.array(xm.type_of(dtype), ()))
    j = b.parameter(2, xm.Shape.array(xm.type_of(dtype), ()))
    b.dynamic_slice(p, [i, j], (2, 3))
    exe = xm.compile(b.build())
    values = _index_values(name)
    for si in values:
        for sj in values[::3]:
            a, c = clamp_start(si, 5, 2), clamp_start(sj, 7, 3)
            got = exe(x, np.array(si, dtype), np.array(sj, dtype))
            assert_same(got, x[a:a + 2, c:c + 3])


@pytest.mark.parametrize("name", INDEX_TYPES)
def test_dynamic_update_slice_clamps_every_start(name: str) -> None:
    dtype = DTYPES[name]
    x = data((4, 6), np.int16)
    u = -data((3, 2), np.int16)
    b = xm.XlaBuilder("dus")
    p, q = b.parameter(0, shape_of(x)), b.parameter(1, shape_of(u))
    i = b.parameter(2, xm.Shape.array(xm.type_of(dtype), ()))
    j = b.parameter(3, xm.Shape.array(xm.type_of(dtype), ()))
    b.dynamic_update_slice(p, q, [i, j])
    exe = xm.compile(b.build())
    values = _index_values(name)
    for si in values:
        for sj in values[1::3]:
            a, c = clamp_start(si, 4, 3), clamp_start(sj, 6, 2)
            want = x.copy()
            want[a:a + 3, c:c + 2] = u
            assert_same(exe(x, u, np.array(si, dtype), np.array(sj, dtype)), want)


def test_dynamic_ops_keep_operand_and_clamp_full_dims() -> None:
    # A slice as big as its dimension clamps that start to 0 whatever its value.
    x = data((3, 4), np.float64)
    big = np.array(2**31 - 1, np.int32)
    got = run_all([lambda b, p, i: b.dynamic_slice(p, [i, i], (3, 2)),
                   lambda b, p, i: b.dynamic_update_slice(p, b.neg(p), [i, i]),
                   lambda b, p, i: b.dynamic_slice(p, [b.neg(i), i], (1, 4))], x, big)
    assert_same(got[0], x[:, 2:4])
    assert_same(got[1], -x)
    assert_same(got[2], x[0:1, :])


def test_python_int_start_indices() -> None:
    # ints become constants of the other indices' type (s32 when all are ints).
    x = data((3, 4), np.float32)
    b = xm.XlaBuilder("t")
    p = b.parameter(0, shape_of(x))
    i = b.parameter(1, xm.Shape.array(xm.S64, ()))
    b.dynamic_slice(p, [i, 3], (2, 2))
    assert_same(xm.compile(b.build())(x, np.array(-4, np.int64)), x[0:2, 2:4])
    assert_same(run(lambda b, p: b.dynamic_slice(p, [2, np.uint8(1)], (1, 2)), x), x[2:3, 1:3])


# ---- x[...] basic indexing ------------------------------------------------------------------

INDEXES = [
    (), 1, -1, (0, 2), (-2, -1, -3), slice(None), slice(1, None), slice(None, None, -1),
    slice(None, None, 2), slice(None, None, -2), slice(-1, 0, -1), slice(5, -7, -3),
    slice(10, 20), slice(-100, 100, 4), slice(2, 1), (Ellipsis, 1), (1, Ellipsis), (Ellipsis,),
    (slice(None), -1, slice(None, None, -3)), (Ellipsis, slice(3, 0, -2)), (None, 1),
    (1, None, Ellipsis, None, -2), (slice(1, 3), slice(None, None, -1), 4), (np.int64(-1), np.int8(1)),
]


def test_indexing_matches_numpy() -> None:
    x = data((3, 4, 5), np.int32)
    got = run_all([lambda b, p, ix=ix: p[ix] for ix in INDEXES], x)
    for ix, value in zip(INDEXES, got, strict=True):
        assert_same(value, x[ix])


def test_indexing_builds_only_what_it_needs() -> None:
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.F32, (3, 4)))
    assert p[...] is p and p[:, :] is p and p[::1] is p
    assert p[1].opdef.name == "reshape" and p[1].operands[0].opdef.name == "slice"
    assert p[::-1].opdef.name == "reverse" and p[::-1].operands[0] is p
    assert p[:, 1:3].opdef.name == "slice"


@pytest.mark.parametrize("index", [3, -4, (0, 4), (0, -5), (0, 0, 0), (Ellipsis, Ellipsis), 1.0,
                                   True, [0, 1], np.array([1]), "a", (slice(None), [0])])
def test_indexing_errors(index) -> None:
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.F32, (3, 4)))
    with pytest.raises(xm.ShapeError):
        p[index]


def test_indexing_a_tuple_is_rejected() -> None:
    b = xm.XlaBuilder("t")
    t = b.tuple([b.constant(np.float32(1))])
    with pytest.raises(xm.ShapeError):
        t[0]


# ---- a ShapeError for every rule ------------------------------------------------------------


def _ops() -> tuple[xm.XlaBuilder, xm.XlaOp, xm.XlaOp, xm.XlaOp]:
    b = xm.XlaBuilder("errors")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 3, 4)))
    s = b.parameter(1, xm.Shape.array(xm.F32, ()))
    i = b.parameter(2, xm.Shape.array(xm.S32, ()))
    return b, x, s, i


ERRORS: dict[str, Callable[[xm.XlaBuilder, xm.XlaOp, xm.XlaOp, xm.XlaOp], object]] = {
    # reshape
    "reshape-element-count": lambda b, x, s, i: b.reshape(x, (5, 5)),
    "reshape-negative-size": lambda b, x, s, i: b.reshape(x, (-2, -12)),
    "reshape-dimensions-not-permutation": lambda b, x, s, i: b.reshape(x, (24,), (0, 1, 1)),
    "reshape-dimensions-wrong-length": lambda b, x, s, i: b.reshape(x, (24,), (0, 1)),
    "reshape-target-shape-type": lambda b, x, s, i: b.reshape(x, xm.Shape.array(xm.S32, (24,))),
    "reshape-float-size": lambda b, x, s, i: b.reshape(x, (24.0,)),
    "reshape-tuple": lambda b, x, s, i: b.reshape(b.tuple([x]), (24,)),
    # collapse
    "collapse-not-consecutive": lambda b, x, s, i: b.collapse(x, (0, 2)),
    "collapse-out-of-order": lambda b, x, s, i: b.collapse(x, (1, 0)),
    "collapse-out-of-range": lambda b, x, s, i: b.collapse(x, (2, 3)),
    "collapse-repeated": lambda b, x, s, i: b.collapse(x, (1, 1)),
    # broadcast
    "broadcast-negative": lambda b, x, s, i: b.broadcast(x, (2, -1)),
    "broadcast-not-ints": lambda b, x, s, i: b.broadcast(x, 3),
    # transpose
    "transpose-not-permutation": lambda b, x, s, i: b.transpose(x, (0, 1, 1)),
    "transpose-wrong-length": lambda b, x, s, i: b.transpose(x, (1, 0)),
    "transpose-out-of-range": lambda b, x, s, i: b.transpose(x, (0, 1, 3)),
    # rev
    "rev-out-of-range": lambda b, x, s, i: b.rev(x, (3,)),
    "rev-negative": lambda b, x, s, i: b.rev(x, (-1,)),
    "rev-duplicate": lambda b, x, s, i: b.rev(x, (1, 1)),
    # slice
    "slice-rank": lambda b, x, s, i: b.slice(x, (0, 0), (1, 1)),
    "slice-strides-rank": lambda b, x, s, i: b.slice(x, (0, 0, 0), (1, 1, 1), (1, 1)),
    "slice-negative-start": lambda b, x, s, i: b.slice(x, (-1, 0, 0), (1, 1, 1)),
    "slice-limit-beyond-dim": lambda b, x, s, i: b.slice(x, (0, 0, 0), (3, 1, 1)),
    "slice-start-after-limit": lambda b, x, s, i: b.slice(x, (2, 0, 0), (1, 1, 1)),
    "slice-stride-zero": lambda b, x, s, i: b.slice(x, (0, 0, 0), (1, 1, 1), (1, 0, 1)),
    "slice-stride-negative": lambda b, x, s, i: b.slice(x, (0, 0, 0), (1, 1, 1), (-1, 1, 1)),
    # concat_in_dim
    "concat-no-operands": lambda b, x, s, i: b.concat_in_dim([], 0),
    "concat-rank-0": lambda b, x, s, i: b.concat_in_dim([s, s], 0),
    "concat-dimension-range": lambda b, x, s, i: b.concat_in_dim([x, x], 3),
    "concat-negative-dimension": lambda b, x, s, i: b.concat_in_dim([x, x], -1),
    "concat-rank-mismatch": lambda b, x, s, i: b.concat_in_dim([x, b.reshape(x, (6, 4))], 0),
    "concat-dims-mismatch": lambda b, x, s, i: b.concat_in_dim([x, b.transpose(x, (0, 2, 1))], 0),
    "concat-type-mismatch": lambda b, x, s, i: b.concat_in_dim(
        [x, b.convert_element_type(x, xm.F64)], 0),
    # pad
    "pad-interior-negative": lambda b, x, s, i: b.pad(x, s, [(0, 0, 0), (0, 0, -1), (0, 0, 0)]),
    "pad-config-length": lambda b, x, s, i: b.pad(x, s, [(0, 0, 0)]),
    "pad-config-entry": lambda b, x, s, i: b.pad(x, s, [(0, 0), (0, 0), (0, 0)]),
    "pad-negative-result": lambda b, x, s, i: b.pad(x, s, [(-2, -1, 0), (0, 0, 0), (0, 0, 0)]),
    "pad-value-not-scalar": lambda b, x, s, i: b.pad(x, x, [(0, 0, 0)] * 3),
    "pad-value-type": lambda b, x, s, i: b.pad(x, b.constant(np.float64(0)), [(0, 0, 0)] * 3),
    # iota
    "iota-pred": lambda b, x, s, i: b.iota(xm.Shape.array(xm.PRED, (3,)), 0),
    "iota-rank-0": lambda b, x, s, i: b.iota(xm.Shape.array(xm.S32, ()), 0),
    "iota-dimension-range": lambda b, x, s, i: b.iota(xm.Shape.array(xm.S32, (3, 2)), 2),
    "iota-negative-dimension": lambda b, x, s, i: b.iota(xm.Shape.array(xm.S32, (3, 2)), -1),
    "iota-tuple-shape": lambda b, x, s, i: b.iota(xm.Shape.tuple([xm.Shape.array(xm.S32, (3,))]), 0),
    "iota-not-a-shape": lambda b, x, s, i: b.iota((3, 4), 0),
    # get_dimension_size
    "get-dimension-size-range": lambda b, x, s, i: b.get_dimension_size(x, 3),
    "get-dimension-size-scalar": lambda b, x, s, i: b.get_dimension_size(s, 0),
    "get-dimension-size-negative": lambda b, x, s, i: b.get_dimension_size(x, -1),
    # dynamic_slice
    "dynamic-slice-index-count": lambda b, x, s, i: b.dynamic_slice(x, [i, i], (1, 1, 1)),
    "dynamic-slice-sizes-length": lambda b, x, s, i: b.dynamic_slice(x, [i, i, i], (1, 1)),
    "dynamic-slice-size-too-big": lambda b, x, s, i: b.dynamic_slice(x, [i, i, i], (1, 4, 1)),
    "dynamic-slice-negative-size": lambda b, x, s, i: b.dynamic_slice(x, [i, i, i], (1, -1, 1)),
    "dynamic-slice-float-index": lambda b, x, s, i: b.dynamic_slice(x, [i, s, i], (1, 1, 1)),
    "dynamic-slice-pred-index": lambda b, x, s, i: b.dynamic_slice(
        x, [b.constant(True)] * 3, (1, 1, 1)),
    "dynamic-slice-mixed-index-types": lambda b, x, s, i: b.dynamic_slice(
        x, [i, b.constant(np.int64(0)), i], (1, 1, 1)),
    "dynamic-slice-index-not-scalar": lambda b, x, s, i: b.dynamic_slice(
        x, [i, i, b.constant(np.zeros((1, 1), np.int32))], (1, 1, 1)),
    "dynamic-slice-rank1-index-length": lambda b, x, s, i: b.dynamic_slice(
        x, b.constant(np.zeros(2, np.int32)), (1, 1, 1)),
    "dynamic-slice-index-not-a-list": lambda b, x, s, i: b.dynamic_slice(x, "abc", (1, 1, 1)),
    "dynamic-slice-int-index-overflows": lambda b, x, s, i: b.dynamic_slice(
        x, [b.constant(np.int8(0)), 300, 0], (1, 1, 1)),
    # dynamic_update_slice
    "dus-update-too-big": lambda b, x, s, i: b.dynamic_update_slice(
        x, b.broadcast(s, (2, 4, 4)), [i, i, i]),
    "dus-update-rank": lambda b, x, s, i: b.dynamic_update_slice(x, b.broadcast(s, (2, 3)), [i, i, i]),
    "dus-update-type": lambda b, x, s, i: b.dynamic_update_slice(
        x, b.convert_element_type(x, xm.F16), [i, i, i]),
    "dus-index-count": lambda b, x, s, i: b.dynamic_update_slice(x, x, [i]),
    "dus-float-index": lambda b, x, s, i: b.dynamic_update_slice(x, x, [s, s, s]),
    "dus-mixed-index-types": lambda b, x, s, i: b.dynamic_update_slice(
        x, x, [i, i, b.constant(np.uint32(0))]),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_shape_errors(case: str) -> None:
    b, x, s, i = _ops()
    with pytest.raises(xm.ShapeError) as info:
        ERRORS[case](b, x, s, i)
    assert str(info.value)  # names the op, the shapes and the rule


def test_shape_error_messages_name_op_shapes_and_rule() -> None:
    b, x, s, i = _ops()
    with pytest.raises(xm.ShapeError, match=r"slice\(f32\[2,3,4\]\).*greater than its limit"):
        b.slice(x, (2, 0, 0), (1, 1, 1))
    with pytest.raises(xm.ShapeError, match=r"collapse.*consecutive.*reshape"):
        b.collapse(x, (0, 2))
    with pytest.raises(xm.ShapeError, match=r"dynamic_slice.*same element type"):
        b.dynamic_slice(x, [i, b.constant(np.int8(0)), i], (1, 1, 1))


def test_inferred_shapes() -> None:
    b, x, s, i = _ops()
    assert b.slice(x, (0, 0, 1), (2, 3, 4), (2, 2, 2)).shape == xm.Shape.array(xm.F32, (1, 2, 2))
    assert b.slice(x, (1, 1, 1), (1, 1, 1)).shape == xm.Shape.array(xm.F32, (0, 0, 0))
    assert b.pad(x, s, [(-1, 2, 3), (0, 0, 0), (1, -5, 1)]).shape.dimensions == (6, 3, 3)
    assert b.concat_in_dim([x, x, x], 1).shape.dimensions == (2, 9, 4)
    assert b.get_dimension_size(x, 2).shape == xm.Shape.array(xm.S32, ())
    assert b.iota(xm.Shape.array(xm.U16, (3, 2), (0, 1)), 1).shape == xm.Shape.array(xm.U16, (3, 2))
    assert b.broadcast(x, (5, 6)).shape.dimensions == (5, 6, 2, 3, 4)
    assert b.collapse(x, (0,)) is x and b.collapse(x, ()) is x
    assert b.dynamic_slice(x, [i, i, i], (0, 3, 2)).shape.dimensions == (0, 3, 2)
    assert b.transpose(x, (1, 2, 0)).shape.dimensions == (3, 4, 2)


# ---- IR: the hlo and linalg stages ----------------------------------------------------------


def _comp(build: Build, *shapes: xm.Shape) -> xm.XlaComputation:
    b = xm.XlaBuilder("ir")
    params = [b.parameter(k, s) for k, s in enumerate(shapes)]
    build(b, *params)
    return b.build()


F32_234 = xm.Shape.array(xm.F32, (2, 3, 4))
F32_0 = xm.Shape.array(xm.F32, ())
U32_0 = xm.Shape.array(xm.U32, ())
S8_0 = xm.Shape.array(xm.S8, ())


def test_ir_reshape_with_dimensions() -> None:
    comp = _comp(lambda b, x: b.reshape(x, (6, 2, 2), (1, 2, 0)), F32_234)
    check_ir(comp.as_mlir_text(), """
        CHECK: "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 2, 0>}
        CHECK-SAME: (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
        CHECK: "xhlo.reshape"
        CHECK-SAME: new_sizes = array<i64: 6, 2, 2>
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: linalg.transpose ins(%{{.*}} : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<3x4x2xf32>)
        CHECK-SAME: permutation = [1, 2, 0]
        CHECK: tensor.collapse_shape %{{.*}} {{\\[}}[0, 1], [2]] : tensor<3x4x2xf32> into tensor<12x2xf32>
        CHECK: tensor.expand_shape %{{.*}} {{\\[}}[0, 1], [2]] output_shape [6, 2, 2]
    """)


def test_ir_slice_concat_rev() -> None:
    comp = _comp(lambda b, x: b.concat_in_dim([b.slice(x, (0, 0, 0), (2, 3, 4), (1, 1, 2)),
                                               b.rev(x, (0,))], 2), F32_234)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: #[[REV:.*]] = affine_map<(d0, d1, d2) -> (-d0 + 1, d1, d2)>
        CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [2, 3, 2] [1, 1, 2]
        CHECK-SAME: : tensor<2x3x4xf32> to tensor<2x3x2xf32>
        CHECK: linalg.generic {indexing_maps = [#[[REV]],
        CHECK: %[[E:.*]] = tensor.empty() : tensor<2x3x6xf32>
        CHECK: %[[I:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0, 0, 0] [2, 3, 2] [1, 1, 1]
        CHECK: tensor.insert_slice %{{.*}} into %[[I]][0, 0, 2] [2, 3, 4] [1, 1, 1]
    """)


def test_ir_pad() -> None:
    comp = _comp(lambda b, x, v: b.pad(x, v, [(1, -1, 1), (0, 0, 0), (-2, 3, 2)]), F32_234, F32_0)
    check_ir(comp.as_mlir_text(), """
        CHECK: "xhlo.pad"(%arg0, %arg1) {edge_padding_high = array<i64: -1, 0, 3>,
        CHECK-SAME: edge_padding_low = array<i64: 1, 0, -2>, interior_padding = array<i64: 1, 0, 2>}
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: %[[V:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
        CHECK: %[[F:.*]] = linalg.fill ins(%[[V]] : f32) outs(%{{.*}} : tensor<4x3x13xf32>)
        CHECK: %[[I:.*]] = tensor.insert_slice %{{.*}} into %[[F]][1, 0, 0] [2, 3, 4] [2, 1, 3]
        CHECK: tensor.extract_slice %[[I]][0, 0, 2] [3, 3, 11] [1, 1, 1]
    """)


def test_ir_dynamic_slice_clamps_before_index_cast() -> None:
    comp = _comp(lambda b, x, i, j: b.dynamic_slice(x, [i, j, i], (2, 2, 3)),
                 F32_234, S8_0, S8_0)
    check_ir(stage_text(comp, "linalg"), """
        CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
        CHECK-DAG: %[[HI:.*]] = arith.constant 1 : i64
        CHECK: %[[A:.*]] = tensor.extract %{{.*}}[] : tensor<i8>
        CHECK: %[[W:.*]] = arith.extsi %[[A]] : i8 to i64
        CHECK: %[[LO:.*]] = arith.maxsi %[[W]], %[[ZERO]] : i64
        CHECK: %[[C:.*]] = arith.minsi %[[LO]], %[[HI]] : i64
        CHECK: %[[J:.*]] = arith.index_cast %[[C]] : i64 to index
        CHECK: arith.extsi
        CHECK: arith.maxsi
        CHECK: arith.minsi
        CHECK: %[[K:.*]] = arith.index_cast
        CHECK: tensor.extract_slice %{{.*}}[0, %[[J]], %[[K]]] [2, 2, 3] [1, 1, 1]
    """)
    unsigned = _comp(lambda b, x, i: b.dynamic_update_slice(x, b.slice(x, (0, 0, 0), (2, 2, 2)),
                                                             [i, i, i]), F32_234, U32_0)
    check_ir(stage_text(unsigned, "linalg"), """
        CHECK: arith.extui %{{.*}} : i32 to i64
        CHECK-NOT: arith.maxsi
        CHECK: arith.minui
        CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, %{{.*}}, %{{.*}}] [2, 2, 2] [1, 1, 1]
    """)


def test_ir_iota_and_dimension_size() -> None:
    comp = _comp(lambda b, x: b.add(b.iota(xm.Shape.array(xm.F32, (2, 3, 4)), 1),
                                    b.broadcast(b.convert_element_type(
                                        b.get_dimension_size(x, 2), xm.F32), (2, 3, 4))), F32_234)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: arith.constant dense<4> : tensor<i32>
        CHECK: linalg.index 1 : index
        CHECK: arith.index_cast %{{.*}} : index to i64
        CHECK: arith.sitofp %{{.*}} : i64 to f32
    """)


# ---- text round trip: compile_mlir re-runs the shape rules ----------------------------------


def test_text_round_trip_and_verifier() -> None:
    x = data((2, 3, 4), np.float32)

    def build(b: xm.XlaBuilder, p: xm.XlaOp, i: xm.XlaOp) -> xm.XlaOp:
        y = b.pad(b.rev(b.transpose(p, (1, 0, 2)), (2,)), b.constant(np.float32(0)),
                  [(0, 1, 0), (1, 0, 1), (0, 0, 0)])
        z = b.dynamic_update_slice(y, b.slice(y, (0, 0, 0), (1, 2, 2)), [i, i, i])
        z = b.dynamic_slice(z, [i, b.get_dimension_size(p, 0), i], (3, 3, 4))
        return b.reshape(b.concat_in_dim([z, b.iota(xm.Shape.array(xm.F32, (3, 3, 4)), 1)], 0),
                         (6, 12))

    comp = _comp(build, shape_of(x), xm.Shape.array(xm.S32, ()))
    text = comp.as_mlir_text()
    exe = xm.compile_mlir(text)
    direct = xm.compile(comp)
    assert_same(exe(x, np.array(1, np.int32)), direct(x, np.array(1, np.int32)))
    bad = text.replace("new_sizes = array<i64: 6, 12>", "new_sizes = array<i64: 6, 13>")
    assert bad != text
    with pytest.raises(xm.CompileError, match="reshape"):
        xm.compile_mlir(bad)


def test_text_round_trip_unsigned_iota() -> None:
    comp = _comp(lambda b: b.rev(b.iota(xm.Shape.array(xm.U16, (2, 5)), 1), (1,)))
    text = comp.as_mlir_text()
    assert "element_type = ui16" in text
    assert_same(xm.compile_mlir(text)(), np.tile(np.arange(5, dtype=np.uint16)[::-1], (2, 1)))
    with pytest.raises(xm.CompileError, match="iota"):
        xm.compile_mlir(text.replace("iota_dimension = 1", "iota_dimension = 2"))


def test_pad_feeding_other_ops_keeps_its_data() -> None:
    # Regression: affine-loop-fusion once moved the fill after the copy, giving all zeros.
    b = xm.XlaBuilder("pad_consumers")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    padded = b.pad(x, b.constant(np.float32(-1)), [(1, 1, 0), (1, 1, 1)])
    total = b.reduce(padded, b.constant(np.float32(0)), lambda p, q: p + q, [0, 1])
    b.tuple([b.add(padded, padded), total])
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    expected = np.full((4, 7), -1, np.float32)
    expected[1:3, 1:6:2] = xv
    doubled, summed = xm.compile(b.build())(xv)
    np.testing.assert_array_equal(doubled, 2 * expected)
    assert summed == expected.sum()
