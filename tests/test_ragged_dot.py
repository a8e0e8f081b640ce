"""Tests of ragged_dot (chlo.ragged_dot): the three modes against the numpy oracle
(tests/reference.py `_ragged_dot`, written from XLA's ragged_dot_rewriter.cc and
jax's reference implementation), a hand-computed example, edge cases and every
shape rule.

Inputs are small integers, so float results are exact in every type and compared
exactly.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import reference
from conftest import data, run

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
RD = xm.RaggedDotDimensionNumbers
DN = xm.DotDimensionNumbers
# lhs [m, k], rhs [g, k, n]: jax.lax.ragged_dot's layout.
MK_GKN = RD(DN((1,), (1,)), (0,), (0,))


def ragged(dnums: RD, preferred=None):
    return lambda b, x, w, g: b.ragged_dot(x, w, g, dnums, preferred_element_type=preferred)


def expected(lhs, rhs, gs, dnums: RD, out_dtype) -> np.ndarray:
    return reference._ragged_dot(lhs, rhs, gs, dnums.as_dict(), np.dtype(out_dtype))


def check(lhs, rhs, gs, dnums: RD, preferred=None) -> np.ndarray:
    got = run(ragged(dnums, preferred), lhs, rhs, gs)
    want = expected(lhs, rhs, gs, dnums, preferred or lhs.dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


def test_hand_computed_example():
    """Rows 0-1 use rhs[0], no row uses rhs[1], rows 2-3 use rhs[2]; the sizes sum to 4 of
    5 rows, so row 4 is in no group and stays zero (XLA's mask semantics)."""
    lhs = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]], np.float32)
    rhs = np.array([[[1], [0]], [[100], [100]], [[0], [1]]], np.float32)
    gs = np.array([2, 0, 2], np.int32)
    got = run(ragged(MK_GKN), lhs, rhs, gs)
    np.testing.assert_array_equal(got, [[1], [3], [6], [8], [0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16, np.int32, np.int8, np.uint8,
                                   np.complex64])
def test_non_contracting_types(dtype):
    check(data((7, 3), dtype, 1), data((3, 3, 4), dtype, 2), np.array([2, 1, 3], np.int32), MK_GKN)


def test_pred_is_or_of_ands():
    check(data((6, 3), np.bool_, 1), data((2, 3, 2), np.bool_, 2), np.array([2, 3], np.int32), MK_GKN)


def test_preferred_type_widens_int8():
    lhs = np.full((4, 16), 100, np.int8)
    rhs = np.full((2, 16, 1), 100, np.int8)
    got = check(lhs, rhs, np.array([1, 3], np.int64), MK_GKN, preferred=np.int32)
    assert got[0, 0] == 160000


_SIZES = {"exact": [2, 3, 2], "empty-groups": [0, 7, 0], "all-empty": [0, 0, 0], "short": [1, 1, 1],
          "past-the-end": [5, 5, 5], "negative": [3, -1, 4]}


# An unsigned group_sizes has no negative sizes: that combination is not a case.
@pytest.mark.parametrize("gs_dtype, sizes", [
    pytest.param(t, sizes, id=f"{np.dtype(t).name}-{name}")
    for t in (np.int32, np.int64, np.uint32, np.int8) for name, sizes in _SIZES.items()
    if not (t == np.uint32 and min(sizes) < 0)])
def test_group_sizes(gs_dtype, sizes):
    """Sizes summing to less than the dimension leave the remaining rows zero; past the end
    they are cut; a negative size moves the later groups back (running sums, as XLA)."""
    check(data((7, 3), np.float32, 1), data((3, 3, 2), np.float32, 2), np.array(sizes, gs_dtype), MK_GKN)


def test_non_contracting_with_batch_and_per_batch_groups():
    """lhs [b, m, k], rhs [b, g, k, n], group_sizes [b, g]: every batch has its own groups."""
    dnums = RD(DN((2,), (2,), (0,), (0,)), (1,), (1,))
    gs = np.array([[1, 4], [5, 0]], np.int32)
    got = check(data((2, 5, 3), np.float32, 1), data((2, 2, 3, 4), np.float32, 2), gs, dnums)
    assert got.shape == (2, 5, 4)


def test_non_contracting_outer_free_dimension_in_group_sizes():
    """XLA's mhlo test layout: lhs [19, 11, 5] ragged in dimension 1, group_sizes [19, 3]."""
    dnums = RD(DN((2,), (1,)), (1,), (0,))
    gs = np.random.default_rng(0).integers(0, 5, (4, 3)).astype(np.int64)
    check(data((4, 6, 2), np.float32, 1), data((3, 2, 3), np.float32, 2), gs, dnums)


def test_rhs_group_dimension_in_the_middle():
    dnums = RD(DN((1,), (0,)), (0,), (2,))
    check(data((6, 3), np.float32, 1), data((3, 4, 2), np.float32, 2), np.array([3, 3], np.int32), dnums)


def test_contracting_mode_has_a_group_dimension_first():
    """lhs [m, k], rhs [k, n], ragged k: one [m, n] result per group of k."""
    dnums = RD(DN((1,), (0,)), (1,))
    lhs, rhs = data((3, 7), np.float32, 1), data((7, 2), np.float32, 2)
    got = check(lhs, rhs, np.array([2, 0, 4], np.int32), dnums)
    assert got.shape == (3, 3, 2)
    np.testing.assert_array_equal(got[0], lhs[:, :2] @ rhs[:2])
    np.testing.assert_array_equal(got[1], 0)
    np.testing.assert_array_equal(got[2], lhs[:, 2:6] @ rhs[2:6])


def test_contracting_mode_with_batch_and_two_contracting_dimensions():
    """XLA's mhlo test layout: lhs [11, 19, 5] contracting {1, 2}, ragged 2, group_sizes
    [19, 3] (the contracting dimension before the ragged one)."""
    dnums = RD(DN((1, 2), (0, 1)), (2,))
    gs = np.random.default_rng(1).integers(0, 3, (4, 3)).astype(np.int32)
    check(data((2, 4, 5), np.float32, 1), data((4, 5, 3), np.float32, 2), gs, dnums)
    dnums = RD(DN((2,), (1,), (0,), (0,)), (2,))
    check(data((2, 3, 5), np.int32, 1), data((2, 5, 2), np.int32, 2), np.array([[2, 3], [5, 0]], np.int32),
          dnums)


def test_batch_mode_is_dot_general():
    dnums = RD(DN((2,), (1,), (0,), (0,)), (0,))
    lhs, rhs = data((3, 2, 4), np.float32, 1), data((3, 4, 5), np.float32, 2)
    got = check(lhs, rhs, np.array([1, 0], np.int32), dnums)
    np.testing.assert_array_equal(got, lhs @ rhs)


@pytest.mark.parametrize("shapes", [((0, 3), (2, 3, 4), 2), ((5, 0), (2, 0, 4), 2), ((5, 3), (0, 3, 4), 0),
                                    ((5, 3), (2, 3, 0), 2)], ids=["m=0", "k=0", "g=0", "n=0"])
def test_zero_size_dimensions(shapes):
    lhs_shape, rhs_shape, g = shapes
    gs = np.full((g,), 2, np.int32)
    check(data(lhs_shape, np.float32, 1), data(rhs_shape, np.float32, 2), gs, MK_GKN)


def test_jax_layout_is_a_batch_matmul():
    """lhs [m, k], rhs [g, k, n]: the masked lhs [g, m, k] times rhs as linalg.batch_matmul,
    which the matmul schedule packs and tiles (a generic over (m, n, g, k) it leaves alone);
    other layouts are one generic."""
    b = xm.XlaBuilder("t")
    x = b.parameter(0, xm.Shape.array(xm.F32, (256, 128)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (4, 128, 128)))
    g = b.parameter(2, xm.Shape.array(xm.S32, (4,)))
    stages = xm.compile(b.build(b.ragged_dot(x, w, g, MK_GKN))).stages
    assert "linalg.batch_matmul" in stages["fused"] and "linalg.batch_matmul" not in stages["tiled"]
    b = xm.XlaBuilder("t")
    x = b.parameter(0, xm.Shape.array(xm.F32, (64, 32)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (32, 4, 16)))
    g = b.parameter(2, xm.Shape.array(xm.S32, (4,)))
    stages = xm.compile(b.build(b.ragged_dot(x, w, g, RD(DN((1,), (0,)), (0,), (1,))))).stages
    assert "batch_matmul" not in stages["linalg"]


@pytest.mark.parametrize("layout", [(1, 0), (0, 0), (1, 1), (0, 1)])
def test_ragged_contracting_rank_2_is_a_batch_matmul(layout):
    """The weight gradient of jax.lax.ragged_dot: both operands masked per group into
    [g, m, k] and [g, k, n] (each read in its own layout), one batch_matmul."""
    lc, rc = layout
    lhs = data((3, 7) if lc == 1 else (7, 3), np.float32, 1)
    rhs = data((7, 2) if rc == 0 else (2, 7), np.float32, 2)
    dnums = RD(DN((lc,), (rc,)), (lc,))
    got = check(lhs, rhs, np.array([2, 0, 6], np.int32), dnums)
    a, w = (lhs if lc == 1 else lhs.T), (rhs if rc == 0 else rhs.T)
    np.testing.assert_array_equal(got[0], a[:, :2] @ w[:2])
    np.testing.assert_array_equal(got[2], a[:, 2:] @ w[2:])
    b = xm.XlaBuilder("t")
    params = [b.parameter(i, xm.Shape.array(xm.F32, s)) for i, s in enumerate((lhs.shape, rhs.shape))]
    g = b.parameter(2, xm.Shape.array(xm.S32, (3,)))
    assert "linalg.batch_matmul" in xm.compile(b.build(b.ragged_dot(*params, g, dnums))).stages["linalg"]


def test_another_groups_infinity_reaches_masked_rows_as_nan():
    """XLA multiplies the zero-masked lhs by every group's rhs (ragged_dot_rewriter.cc),
    so 0 * inf = NaN in rows of other groups; the oracle does the same."""
    lhs = np.ones((2, 1), np.float32)
    rhs = np.array([[[1.0]], [[np.inf]]], np.float32)
    got = check(lhs, rhs, np.array([1, 1], np.int32), MK_GKN)
    assert np.isnan(got[0, 0]) and np.isinf(got[1, 0])


def test_random_f32_with_tolerance():
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((40, 32)).astype(np.float32)
    rhs = rng.standard_normal((4, 32, 8)).astype(np.float32)
    gs = np.array([10, 0, 25, 3], np.int32)
    got = run(ragged(MK_GKN), lhs, rhs, gs)
    np.testing.assert_allclose(got, expected(lhs, rhs, gs, MK_GKN, np.float32), rtol=1e-5, atol=1e-5)


def test_dimension_numbers_forms():
    assert RD.of({"dot_dimension_numbers": (((1,), (1,)), ((), ())), "lhs_ragged_dimensions": [0],
                  "rhs_group_dimensions": [0]}) == MK_GKN
    assert RD((((1,), (1,)), ((), ())), [0], [0]) == MK_GKN
    assert hash(MK_GKN) == hash(RD(DN([1], [1]), (0,), (0,)))
    with pytest.raises(xm.ShapeError, match="RaggedDotDimensionNumbers"):
        RD.of(3)
    with pytest.raises(xm.ShapeError, match="lhs_ragged_dimensions"):
        RD.of({"dot_dimension_numbers": DN((1,), (1,))})


def build_error(lhs_shape, rhs_shape, gs_shape, dnums, gs_type=xm.S32, rhs_type=xm.F32):
    b = xm.XlaBuilder("e")
    x = b.parameter(0, xm.Shape.array(xm.F32, lhs_shape))
    w = b.parameter(1, xm.Shape.array(rhs_type, rhs_shape))
    g = b.parameter(2, xm.Shape.array(gs_type, gs_shape))
    b.ragged_dot(x, w, g, dnums)


@pytest.mark.parametrize("args, message", [
    (((5, 3), (2, 3, 4), (2,), MK_GKN, xm.F32), "integer element type"),
    (((5, 3), (2, 3, 4), (2,), MK_GKN, xm.PRED), "integer element type"),
    (((5, 3), (2, 3, 4), (), MK_GKN), "rank >= 1"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (), (0,))), "exactly one lhs ragged dimension"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (0, 1), (0,))), "exactly one lhs ragged dimension"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (2,), (0,))), "ragged dimension 2 is out of range"),
    (((4, 5, 3), (2, 3, 4), (5, 2), RD(DN((2,), (1,)), (1,), (0,))), r"shape \[4, 'g'\] or \[g\]"),
    (((4, 5, 3), (2, 3, 4), (4, 1, 2), RD(DN((2,), (1,)), (1,), (0,))), r"shape \[4, 'g'\]"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (0,), (3,))), "group dimension 3 is out of range"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (0,), (1,))), "also a batch or contracting"),
    (((5, 3), (3, 4), (2,), RD(DN((1,), (0,)), (1,), (1,))), "no group dimension"),
    (((2, 5, 3), (2, 3, 4), (2,), RD(DN((2,), (1,), (0,), (0,)), (0,), (2,))), "no group dimension"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,)), (0,))), "exactly one group dimension"),
    (((5, 3), (2, 3, 4), (3,), MK_GKN), "has size 2, group_sizes counts 3 groups"),
    (((5, 3), (2, 4, 4), (2,), MK_GKN), "contracting dimension sizes differ"),
    (((5, 3), (2, 3, 4), (2,), RD(DN((1,), (1,), (0,), ()), (0,), (0,))), "same number of batch"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_shape_rules(args, message):
    with pytest.raises(xm.ShapeError, match=message) as e:
        build_error(*args)
    assert "ragged_dot" in str(e.value)


def test_mixed_element_types_need_preferred_type():
    with pytest.raises(xm.ShapeError, match="same element type"):
        build_error((5, 3), (2, 3, 4), (2,), MK_GKN, rhs_type=xm.F64)


def test_hlo_text_round_trips_through_the_verifier():
    b = xm.XlaBuilder("t")
    x = b.parameter(0, xm.Shape.array(xm.F32, (5, 3)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (2, 3, 4)))
    g = b.parameter(2, xm.Shape.array(xm.S64, (2,)))
    text = b.build(b.ragged_dot(x, w, g, MK_GKN)).as_mlir_text()
    assert '"xhlo.ragged_dot"' in text and "lhs_ragged_dimensions = array<i64: 0>" in text
    exe = xm.compile_mlir(text)
    lhs, rhs = data((5, 3), np.float32, 1), data((2, 3, 4), np.float32, 2)
    gs = np.array([2, 2], np.int64)
    np.testing.assert_array_equal(exe(lhs, rhs, gs), expected(lhs, rhs, gs, MK_GKN, np.float32))


JAX_CASES = [
    ((7, 3), (3, 3, 4), [2, -1, 4], RD(DN((1,), (1,)), (0,), (0,))),
    ((7, 3), (3, 3, 4), [2, 3, 9], RD(DN((1,), (1,)), (0,), (0,))),
    ((2, 5, 3), (2, 2, 3, 4), [[1, 4], [5, 0]], RD(DN((2,), (2,), (0,), (0,)), (1,), (1,))),
    ((3, 7), (7, 2), [2, 0, 4], RD(DN((1,), (0,)), (1,))),
    ((2, 3, 5), (2, 5, 2), [[2, 3], [5, 0]], RD(DN((2,), (1,), (0,), (0,)), (2,))),
    ((3, 2, 4), (3, 4, 5), [1, 0], RD(DN((2,), (1,), (0,), (0,)), (0,))),
]


def _jax_ragged(dnums: RD):
    lax = pytest.importorskip("jax").lax
    d = dnums.dot_dimension_numbers
    return lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=((d.lhs_contracting_dimensions, d.rhs_contracting_dimensions),
                               (d.lhs_batch_dimensions, d.rhs_batch_dimensions)),
        lhs_ragged_dimensions=list(dnums.lhs_ragged_dimensions),
        rhs_group_dimensions=list(dnums.rhs_group_dimensions))


@pytest.mark.parametrize("case", JAX_CASES, ids=lambda c: f"{c[0]}x{c[1]}")
def test_matches_jax_on_cpu(case):
    """jax's ragged_dot_general on XLA:CPU (exact: small integers), and the chlo.ragged_dot
    jax emits for other platforms imported (as one ragged_dot)."""
    jax = pytest.importorskip("jax")
    lhs_shape, rhs_shape, sizes, dnums = case
    lhs, rhs, gs = data(lhs_shape, np.float32, 1), data(rhs_shape, np.float32, 2), np.array(sizes, np.int32)
    f = jax.jit(lambda a, b, g: jax.lax.ragged_dot_general(a, b, g, _jax_ragged(dnums)))
    want = np.asarray(f(lhs, rhs, gs))
    np.testing.assert_array_equal(check(lhs, rhs, gs, dnums), want)
    text = f.trace(lhs, rhs, gs).lower(lowering_platforms=("tpu",)).as_text()
    assert "chlo.ragged_dot" in text
    imported = xm.import_stablehlo(text)
    assert imported.as_mlir_text().count("xhlo.ragged_dot") == 1
    np.testing.assert_array_equal(run(imported, lhs, rhs, gs), want)


def test_f8_operands_with_an_f32_result():
    """f8 inputs (small integers: exact) accumulate in the f32 result."""
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)
    check(data((7, 3), f8, 1), data((3, 3, 4), f8, 2), np.array([2, 1, 3], np.int32), MK_GKN,
          preferred=np.float32)
