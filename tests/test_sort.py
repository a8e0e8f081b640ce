"""Tests of sort and top_k against Python/numpy references.

Written against the public API (../shared/API.md). Documented choices pinned
here (SEMANTICS.md 5.E, D14):
- The default comparator sorts ascending in XLA's total order (-0.0 before
  +0.0) with every NaN last, whatever its sign (the API's "NaNs last"; XLA's
  total order would put a negative NaN first).
- The sort is stable even with is_stable=False (a merge sort, or a radix sort
  for the recognised comparators, or a selection when only a prefix is read),
  so equal keys keep their order; tests of is_stable=False use keys without
  ties or only check the order of the keys.
- top_k: ties toward the lower index, NaN counts as the largest value,
  `largest=False` gives the smallest k in ascending order; a `comparator`
  (seed 004's form) may replace `largest`.
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


def shape(dtype: object, dims: Sequence[int] = ()) -> xm.Shape:
    return xm.Shape.array(xm.type_of(np.dtype(dtype)), tuple(dims))


# -- references ---------------------------------------------------------------------------------

def sort_key(v: object) -> tuple:
    """The default order: total order on floats (-0.0 < +0.0), all NaNs last."""
    if isinstance(v, (np.floating, float)) or np.asarray(v).dtype == BF16:
        f = float(v)
        if math.isnan(f):
            return (1, 0.0, 0)
        return (0, f, 0 if math.copysign(1.0, f) < 0 else 1)
    return (0, int(v), 0)


def ref_order(row: np.ndarray, descending: bool = False) -> list[int]:
    """Positions of `row` in stable sorted order (descending keeps equal keys in index order)."""
    return sorted(range(len(row)), key=lambda i: sort_key(row[i]), reverse=descending)


def ref_sort(x: np.ndarray, axis: int = -1, descending: bool = False) -> np.ndarray:
    moved = np.moveaxis(x, axis, -1)
    out = np.empty_like(moved)
    for idx in np.ndindex(*moved.shape[:-1]):
        out[idx] = moved[idx][ref_order(moved[idx], descending)]
    return np.moveaxis(out, -1, axis)


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Equal values, dtypes and (for floats) signs of zero; NaNs in the same places."""
    assert got.dtype == want.dtype, what
    if want.dtype == BF16:  # numpy's NaN-aware comparison needs a numpy float type
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=what)


def values(dtype: object, dims: Sequence[int], seed: int = 0, spread: int = 20) -> np.ndarray:
    """Random values with repeats (ties matter), over the type's range where it is small."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, dims).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, min(spread, np.iinfo(dtype).max), dims).astype(dtype)
    return (rng.integers(-spread, spread, dims) / (1 if dtype.kind == "i" else 4)).astype(dtype)


# -- the seeds' examples ------------------------------------------------------------------------

@pytest.mark.parametrize("is_stable", [False, True])
def test_sort_seed_example(is_stable: bool) -> None:
    # Seeds 001/004: operand0 = [3, 1], operand1 = [42, 50], operand2 = [-3.0, 1.1], a
    # comparator comparing operand0 with less-than -> ([1, 3], [50, 42], [1.1, -3.0]).
    def build(b, a, c, d):
        return b.sort([a, c, d], lambda x0, y0, *_: x0.builder.lt(x0, y0), is_stable=is_stable)

    a, c, d = run(build, np.array([3, 1], np.int32), np.array([42, 50], np.int32),
                  np.array([-3.0, 1.1], np.float32))
    assert a.tolist() == [1, 3] and c.tolist() == [50, 42]
    assert d.tolist() == pytest.approx([1.1, -3.0])


def test_top_k_seed_example() -> None:
    # Seed 004: strict >, k=1 on [[0.1, 0.3, 0.1], [0.7, 0.2, -0.1]] -> ([[0.3], [0.7]], [[1], [0]]).
    x = np.array([[0.1, 0.3, 0.1], [0.7, 0.2, -0.1]], np.float32)
    values_, indices = run(lambda b, p: b.top_k(p, 1), x)
    assert values_.tolist() == [[x[0, 1]], [x[1, 0]]] and indices.tolist() == [[1], [0]]
    assert indices.dtype == np.int32
    by_comparator = run(lambda b, p: b.top_k(p, 1, comparator=lambda u, v: u.builder.gt(u, v)), x)
    assert by_comparator[0].tolist() == values_.tolist()
    assert by_comparator[1].tolist() == [[1], [0]]


# -- the default order --------------------------------------------------------------------------

SORT_DTYPES = [np.float32, np.float64, np.float16, BF16, np.int8, np.int32, np.int64, np.uint8,
               np.uint32, np.uint64, np.bool_]


def test_sort_default_order_for_element_types() -> None:
    arrays = [values(t, (3, 9), seed) for seed, t in enumerate(SORT_DTYPES)]
    # Extremes of the wide integer types (signed vs unsigned compares).
    arrays[6][0, :3] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1]
    arrays[9][0, :3] = [np.iinfo(np.uint64).max, 2 ** 63, 1]
    results = run(lambda b, *ps: [b.sort(p) for p in ps], *arrays)
    for x, got in zip(arrays, results):
        assert_same(got, ref_sort(x), str(x.dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16])
def test_sort_float_special_values(dtype: object) -> None:
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
    row = np.array([np.nan, 1.0, -0.0, np.inf, neg_nan, 0.0, -np.inf, -1.0, 0.0, -0.0, np.nan,
                    1e-40, -2.5], np.float32).astype(dtype)
    x = np.stack([row, row[::-1]])
    got = run(lambda b, p: b.sort(p), x)
    assert_same(got, ref_sort(x), str(np.dtype(dtype)))
    for r in got.astype(np.float32):
        assert np.isnan(r[-3:]).all() and not np.isnan(r[:-3]).any()  # every NaN last
        signs = np.signbit(r[r == 0]).tolist()  # 1e-40 is 0 in f16 and bf16
        assert len(signs) >= 4 and signs == sorted(signs, reverse=True)  # -0.0 first
        assert r[0] == -np.inf


def test_sort_complex_by_real_then_imaginary() -> None:
    # No XLA default exists for complex numbers (LT is not defined on them); ours orders
    # them like numpy, by real part, then imaginary part, each in the float order above.
    nan = np.nan
    x = np.array([1 + 2j, 1 + 1j, complex(nan, 0), -1 + 5j, 1 - 0j, complex(1, nan), 0 + 0j,
                  complex(-0.0, 3)], np.complex64)
    got = run(lambda b, p: b.sort(p), x)
    order = sorted(range(len(x)), key=lambda i: (sort_key(x[i].real), sort_key(x[i].imag)))
    np.testing.assert_array_equal(got, x[order])
    assert got.dtype == np.complex64 and np.signbit(got[0].real)


def test_sort_dimensions_and_ranks() -> None:
    cube = values(np.float32, (3, 4, 5), 1)
    vec = values(np.int32, (6,), 2)
    one = values(np.float32, (4, 1), 3)
    empty = np.zeros((0, 3), np.float32)
    empty_row = np.zeros((2, 0), np.float32)

    def build(b, c, v, o, e, er):
        return [b.sort(c, dimension=0), b.sort(c, dimension=1), b.sort(c, dimension=2),
                b.sort(c, dimension=-3), b.sort(v, dimension=0), b.sort(o), b.sort(o, dimension=0),
                b.sort(e, dimension=0), b.sort(e), b.sort(er)]

    got = run(build, cube, vec, one, empty, empty_row)
    for r, (x, axis) in zip(got, [(cube, 0), (cube, 1), (cube, 2), (cube, 0), (vec, 0), (one, 1),
                                  (one, 0), (empty, 0), (empty, 1), (empty_row, 1)]):
        assert_same(r, ref_sort(x, axis))


def test_sort_lengths_not_powers_of_two() -> None:
    rng = np.random.default_rng(7)
    lengths = list(range(1, 18)) + [31, 100, 1000]
    arrays = [rng.standard_normal(n).astype(np.float32) for n in lengths]
    for x, got in zip(arrays, run(lambda b, *ps: [b.sort(p) for p in ps], *arrays)):
        assert_same(got, np.sort(x), f"n={len(x)}")


# -- several operands, stability, comparators ---------------------------------------------------

def test_sort_keys_values_stable_on_ties() -> None:
    keys = values(np.int32, (2, 40), 5, spread=4)  # many ties
    vals = np.arange(80, dtype=np.float32).reshape(2, 40)

    def build(b, k, v):
        return b.sort([k, v], is_stable=True)

    got_keys, got_vals = run(build, keys, vals)
    order = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(got_keys, np.take_along_axis(keys, order, 1))
    np.testing.assert_array_equal(got_vals, np.take_along_axis(vals, order, 1))


def test_argsort_with_iota() -> None:
    x = values(np.float64, (3, 11), 9)
    x[0, 4] = np.nan

    def build(b, p):
        iota = b.iota(xm.Shape.array(xm.S32, x.shape), 1)
        return b.sort([p, iota], dimension=1, is_stable=True)

    sorted_x, indices = run(build, x)
    want = np.array([ref_order(row) for row in x])
    np.testing.assert_array_equal(indices, want)
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(sorted_x, np.take_along_axis(x, want, 1))


def test_sort_custom_comparators() -> None:
    keys = values(np.int32, (12,), 11, spread=3)
    minor = values(np.uint8, (12,), 12, spread=5)
    f = values(np.float32, (12,), 13)
    sub = xm.XlaBuilder("greater")
    greater = sub.build(sub.gt(sub.parameter(0, shape(np.float32)),
                               sub.parameter(1, shape(np.float32))))

    def lexicographic(k0, k1, m0, m1):
        b = k0.builder
        return b.or_(b.lt(k0, k1), b.and_(b.eq(k0, k1), b.gt(m0, m1)))

    def build(b, k, m, x):
        return [b.sort([k, m], lexicographic),  # keys ascending, ties by minor descending
                b.sort(x, greater),  # an XlaComputation: descending
                b.sort(x, lambda u, v: u.builder.compare(u, v, "GT", "TOTALORDER"),
                       is_stable=True)]

    (k_sorted, m_sorted), desc, desc_total = run(build, keys, minor, f)
    order = sorted(range(12), key=lambda i: (keys[i], -int(minor[i])))
    np.testing.assert_array_equal(k_sorted, keys[order])
    np.testing.assert_array_equal(m_sorted, minor[order])
    np.testing.assert_array_equal(desc, np.sort(f)[::-1])
    np.testing.assert_array_equal(desc_total, np.sort(f)[::-1])


def test_sort_results_single_list_and_root(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(np.float32, (2, 3)))
    y = b.parameter(1, shape(np.int32, (2, 3)))
    assert b.sort(x).shape == shape(np.float32, (2, 3))
    assert b.sort([x]).shape == xm.Shape.tuple([shape(np.float32, (2, 3))])
    pair = b.sort([x, y], dimension=0)
    assert pair.shape == xm.Shape.tuple([shape(np.float32, (2, 3)), shape(np.int32, (2, 3))])
    b.sort(x, dimension=0)
    assert b.build().program_shape()[1] == shape(np.float32, (2, 3))
    # A parameter with a column-major layout still gives a default-layout result.
    z = b.parameter(2, xm.Shape.array(xm.F32, (2, 3), (0, 1)))
    assert b.sort(z).shape.layout == xm.Layout((1, 0))


def test_sort_hlo_text_round_trip() -> None:
    b = xm.XlaBuilder("rt")
    x = b.parameter(0, shape(np.float32, (5,)))
    i = b.iota(xm.Shape.array(xm.S32, (5,)), 0)
    b.sort([x, i])
    text = b.build().as_mlir_text()
    x_val = np.array([3, -1, 2, np.nan, -1], np.float32)
    _, indices = xm.compile_mlir(text)(x_val)
    assert indices.tolist() == [1, 4, 2, 0, 3]


# -- top_k --------------------------------------------------------------------------------------

def ref_top_k(x: np.ndarray, k: int, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    flat = x.reshape(-1, x.shape[-1])
    idx = np.array([ref_order(row, descending=largest)[:k] for row in flat], np.int32)
    idx = idx.reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, idx.astype(np.int64), -1), idx


def test_top_k_ties_toward_lower_index() -> None:
    x = np.array([[1, 3, 3, 0, 3, 1], [5, 5, 5, 5, 5, 5], [2, 1, 2, 1, 2, 1]], np.int32)

    def build(b, p):
        return [b.top_k(p, 4), b.top_k(p, 4, largest=False), b.top_k(p, 0), b.top_k(p, 6)]

    (v, i), (sv, si), (zv, zi), (av, ai) = run(build, x)
    assert i.tolist() == [[1, 2, 4, 0], [0, 1, 2, 3], [0, 2, 4, 1]]
    assert v.tolist() == [[3, 3, 3, 1], [5, 5, 5, 5], [2, 2, 2, 1]]
    assert si.tolist() == [[3, 0, 5, 1], [0, 1, 2, 3], [1, 3, 5, 0]]
    assert sv.tolist() == [[0, 1, 1, 3], [5, 5, 5, 5], [1, 1, 1, 2]]
    assert zv.shape == (3, 0) and zi.shape == (3, 0) and zi.dtype == np.int32
    np.testing.assert_array_equal(ai, ref_top_k(x, 6)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int32, np.uint8, np.int8])
def test_top_k_element_types(dtype: object) -> None:
    x = values(dtype, (2, 3, 8), 17, spread=6)
    if np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16:
        x[0, 0, 5] = np.nan  # the largest value
        x[0, 1, 2] = -np.inf

    def build(b, p):
        return [b.top_k(p, 3), b.top_k(p, 5, largest=False)]

    (v, i), (sv, si) = run(build, x)
    want_v, want_i = ref_top_k(x, 3)
    np.testing.assert_array_equal(i, want_i)
    assert_same(v, want_v)
    want_sv, want_si = ref_top_k(x, 5, largest=False)
    np.testing.assert_array_equal(si, want_si)
    assert_same(sv, want_sv)


def test_top_k_comparators() -> None:
    x = np.array([4, -7, 4, 2, -7, 9], np.float32)
    sub = xm.XlaBuilder("less")
    less = sub.build(sub.lt(sub.parameter(0, shape(np.float32)), sub.parameter(1, shape(np.float32))))

    def by_magnitude(u, v):
        b = u.builder
        return b.gt(b.abs(u), b.abs(v))

    def build(b, p):
        return [b.top_k(p, 3, comparator=less), b.top_k(p, 4, comparator=by_magnitude)]

    (lv, li), (mv, mi) = run(build, x)
    assert li.tolist() == [1, 4, 3] and lv.tolist() == [-7, -7, 2]
    assert mi.tolist() == [5, 1, 4, 0] and mv.tolist() == [9, -7, -7, 4]


# -- shape errors -------------------------------------------------------------------------------

def test_sort_shape_errors(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(np.float32, (2, 3)))
    y = b.parameter(1, shape(np.int32, (3, 2)))
    s = b.parameter(2, shape(np.float32))
    t = b.parameter(3, xm.Shape.tuple([shape(np.float32, (2,))]))
    lt = lambda u, v, *_: u.builder.lt(u, v)  # noqa: E731
    with pytest.raises(xm.ShapeError, match="at least one operand"):
        b.sort([])
    with pytest.raises(xm.ShapeError, match="same dimensions"):
        b.sort([x, y])
    with pytest.raises(xm.ShapeError, match="dimension 2 is out of range for rank 2"):
        b.sort(x, dimension=2)
    with pytest.raises(xm.ShapeError, match="out of range"):
        b.sort(x, dimension=-3)
    with pytest.raises(xm.ShapeError, match="scalar cannot be sorted"):
        b.sort(s)
    with pytest.raises(xm.ShapeError, match="must be arrays"):
        b.sort(t)
    with pytest.raises(xm.ShapeError, match="must be an int"):
        b.sort(x, dimension=1.0)
    with pytest.raises(xm.ShapeError, match="must be a bool"):
        b.sort(x, is_stable="yes")
    # Comparator signatures: arity (callable or computation), parameter types, result type.
    with pytest.raises(xm.ShapeError, match="must take 2 parameters"):
        b.sort(x, lambda u, v, w: u.builder.lt(u, v))
    with pytest.raises(xm.ShapeError, match="must take 4 parameters"):
        b.sort([x, x], lambda u, v: u.builder.lt(u, v))
    with pytest.raises(xm.ShapeError, match="pred"):
        b.sort(x, lambda u, v: u + v)
    with pytest.raises(xm.ShapeError, match="pred"):
        b.sort(x, lambda u, v: [u.builder.lt(u, v), u.builder.lt(v, u)])
    sub = xm.XlaBuilder("s32_less")
    s32_less = sub.build(sub.lt(sub.parameter(0, shape(np.int32)), sub.parameter(1, shape(np.int32))))
    with pytest.raises(xm.ShapeError, match="takes"):
        b.sort(x, s32_less)
    with pytest.raises(xm.ShapeError, match="XlaComputation or a callable"):
        b.sort(x, "LT")
    assert lt  # the happy path builds
    b.sort([x, x], lt)


def test_comparator_types_checked_on_parsed_text() -> None:
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, shape(np.float32, (3,)))
    b.sort(x)
    text = b.build().as_mlir_text()
    broken = text.replace("dimension = 0", "dimension = 1")
    with pytest.raises(xm.CompileError, match="out of range"):
        xm.compile_mlir(broken)


def test_top_k_shape_errors(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(np.float32, (2, 3)))
    s = b.parameter(1, shape(np.float32))
    with pytest.raises(xm.ShapeError, match="out of range"):
        b.top_k(x, 4)
    with pytest.raises(xm.ShapeError, match="out of range"):
        b.top_k(x, -1)
    with pytest.raises(xm.ShapeError, match="rank >= 1"):
        b.top_k(s, 1)
    with pytest.raises(xm.ShapeError, match="must be an int"):
        b.top_k(x, 1.5)
    with pytest.raises(xm.ShapeError, match="must be a bool"):
        b.top_k(x, 1, largest=None)
    with pytest.raises(xm.ShapeError, match="must take 2 parameters"):
        b.top_k(x, 1, comparator=lambda u: u)
    with pytest.raises(xm.ShapeError, match="pred"):
        b.top_k(x, 1, comparator=lambda u, v: u + v)
    values_, indices = (b.get_tuple_element(b.top_k(x, 2), i) for i in (0, 1))
    assert values_.shape == shape(np.float32, (2, 2)) and indices.shape == shape(np.int32, (2, 2))


# -- the fast paths: radix sort, partial selection ------------------------------------------------

ALL_DTYPES = [np.float32, np.float64, np.float16, BF16, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
SIZES = [1, 2, 15, 16, 17, 33, 1000, 4097]  # around the merge/radix (16) and selection (32) bounds


def special_values(dtype: object, n: int, seed: int) -> np.ndarray:
    """`n` values with many ties and, for floats, +-NaN (with payloads), +-0.0, +-inf and
    large magnitudes; integers over their whole range."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        wide = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        return np.where(rng.random(n) < 0.5, wide, rng.integers(0, 5, n).astype(dtype))
    x = (rng.integers(-6, 6, n) / 2).astype(np.float32)
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
    payload_nan = np.array([0x7FC00123], np.uint32).view(np.float32)[0]
    specials = np.array([np.nan, neg_nan, payload_nan, -0.0, 0.0, np.inf, -np.inf, 3e4, -3e4,
                         1e-3], np.float32)
    pick = rng.random(n) < 0.3
    x[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
    return x.astype(dtype)


def total_order_key(v: object) -> tuple:
    """XLA's total order (compare TOTALORDER): by the sign-flipped bits, so -NaN first and
    NaNs ordered by payload; integers by value."""
    a = np.asarray(v)
    if a.dtype.kind in "iub":
        return (int(a),)
    bits = int(a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]))
    sign = 1 << (8 * a.dtype.itemsize - 1)
    return ((sign - 1 - (bits ^ sign)) if bits & sign else bits + sign,)


def stable_order(x: np.ndarray, key: Callable[[object], tuple], descending: bool = False
                 ) -> np.ndarray:
    """Per row of the last axis: positions in stable order (ties by index, also when
    descending)."""
    sign = -1 if descending else 1
    rows = x.reshape(-1, x.shape[-1])
    order = [sorted(range(len(r)), key=lambda i, r=r: (tuple(sign * k for k in key(r[i])), i))
             for r in rows]
    return np.array(order, np.int64).reshape(x.shape)


def gt_total(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    return u.builder.compare(u, v, "GT", "TOTALORDER")


def lt_total_swapped(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    """jnp.sort's comparator with the parameters the other way round: v < u, descending."""
    return u.builder.compare(v, u, "LT", "TOTALORDER")


def lt_total_raw(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    """jnp.sort's comparator: compare LT TOTALORDER, no NaN rewrite."""
    return u.builder.compare(u, v, "LT", "TOTALORDER")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda t: np.dtype(t).name)
def test_radix_sort_every_type_and_size(dtype: object) -> None:
    # The recognised comparators (default, TOTALORDER both ways, integer LT/GT) on rows
    # of every boundary size, with an iota operand: is_stable=True pins the order of ties.
    is_float = np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16
    arrays = [special_values(dtype, n, n) for n in SIZES]
    matrix = special_values(dtype, 3 * 17, 5).reshape(3, 17)

    def iota(b: xm.XlaBuilder, p: xm.XlaOp) -> xm.XlaOp:
        return b.iota(xm.Shape.array(xm.S32, p.shape.dimensions), p.shape.rank - 1)

    def build(b, m, *ps):
        out = []
        for p in ps:
            out.append(b.sort([p, iota(b, p)], is_stable=True))
            descending = gt_total if is_float else (lambda u, v, *_: u.builder.gt(u, v))
            out.append(b.sort([p, iota(b, p)], descending, is_stable=True))
        out.append(b.sort([m, iota(b, m)], is_stable=True))
        if is_float:
            out.append(b.sort([ps[-1], iota(b, ps[-1])], lt_total_raw, is_stable=True))
            out.append(b.sort([ps[-1], iota(b, ps[-1])], lt_total_swapped, is_stable=True))
        return out

    got = iter(run(build, matrix, *arrays))
    default_key = sort_key if is_float else (lambda v: (int(v),))
    descending_key = total_order_key if is_float else default_key
    for x in arrays:
        for key, desc in ((default_key, False), (descending_key, True)):
            values_, indices = next(got)
            want = stable_order(x, key, desc)
            np.testing.assert_array_equal(indices, want, err_msg=f"n={len(x)} desc={desc}")
            assert_same(values_, x[want], f"n={len(x)}")
    values_, indices = next(got)
    np.testing.assert_array_equal(indices, stable_order(matrix, default_key))
    if is_float:
        x = arrays[-1]
        for desc in (False, True):
            values_, indices = next(got)
            np.testing.assert_array_equal(indices, stable_order(x, total_order_key, desc))
            assert_same(values_, x[indices])


def nan_last_descending(u: xm.XlaOp, v: xm.XlaOp, *_: xm.XlaOp) -> xm.XlaOp:
    """The default comparator's pattern (every NaN as +NaN) the other way round."""
    b = u.builder
    nan = b.constant(np.array(np.nan, u.shape.dtype))
    return b.compare(b.select(b.ne(v, v), nan, v), b.select(b.ne(u, u), nan, u), "LT", "TOTALORDER")


def test_radix_sort_long_rows() -> None:
    # Rows of 2**16 or more take 11-bit digits (the last digit narrower: 32 = 11+11+10,
    # 64 = 5 x 11 + 9, 16 = 11 + 5, 8 bits in one digit); single operands move their keys
    # alone, NaNs put back in order (last, or first when descending); several operands
    # move (key, position) pairs (keys up to 32 bits) or keys and operands (64 bits).
    n = 70001
    f = special_values(np.float32, n, 1)
    d = special_values(np.float64, n, 2)
    s = special_values(np.int64, n, 3)
    u = special_values(np.uint16, n, 4)
    c = special_values(np.int8, n, 5)

    def build(b, fp, dp, sp, up, cp):
        iota = b.iota(xm.Shape.array(xm.S32, (n,)), 0)
        return [b.sort(fp), b.sort(fp, nan_last_descending), b.sort(dp, gt_total),
                b.sort([dp, iota], is_stable=True), b.sort(sp), b.sort(up), b.sort(cp),
                b.sort([sp, iota], lambda x, y, *_: x.builder.gt(x, y), is_stable=True),
                b.sort([up, fp, iota], lambda x, y, *_: x.builder.gt(x, y), is_stable=True)]

    fa, fd, dd, (dv, di), sa, ua, ca, (sv, si), (uk, uf, ui) = run(build, f, d, s, u, c)
    # u16 keys packed with positions, two operands gathered.
    want = np.argsort(-u.astype(np.int64), kind="stable")
    np.testing.assert_array_equal(ui, want.astype(np.int32))
    np.testing.assert_array_equal(uk, u[want])
    assert_same(uf, f[want])
    assert_same(fa, f[stable_order(f, sort_key)])
    assert_same(fd, f[stable_order(f, sort_key, descending=True)])
    assert np.isnan(fd[:10]).all() and np.isnan(fa[-10:]).all()
    assert_same(dd, d[stable_order(d, total_order_key, descending=True)])
    np.testing.assert_array_equal(di, stable_order(d, sort_key))
    assert_same(dv, d[di])
    np.testing.assert_array_equal(sa, np.sort(s))
    np.testing.assert_array_equal(ua, np.sort(u))
    np.testing.assert_array_equal(ca, np.sort(c))
    np.testing.assert_array_equal(si, np.argsort(-s.astype(object), kind="stable").astype(np.int32))
    np.testing.assert_array_equal(sv, s[si])


def test_radix_sort_several_operands_and_dimensions() -> None:
    # The key is the second operand (comparator on parameters 2, 3); the others follow
    # it; rows along a middle and a first dimension of a 3-D array; ties stay in order.
    keys = values(np.int16, (4, 17, 3), 3, spread=3)
    floats = values(np.float64, (4, 17, 3), 4)
    flags = values(np.bool_, (4, 17, 3), 5)

    def by_second(_a, _b, k0, k1, *_):
        return k0.builder.lt(k0, k1)

    def build(b, f, k, g):
        return [b.sort([f, k, g], by_second, dimension=1, is_stable=True),
                b.sort([f, k, g], by_second, dimension=0, is_stable=True)]

    for axis, (sf, sk, sg) in zip((1, 0), run(build, floats, keys, flags)):
        order = np.argsort(keys, axis=axis, kind="stable")
        np.testing.assert_array_equal(sk, np.take_along_axis(keys, order, axis))
        np.testing.assert_array_equal(sf, np.take_along_axis(floats, order, axis))
        np.testing.assert_array_equal(sg, np.take_along_axis(flags, order, axis))


def test_jnp_argsort_from_stablehlo_takes_the_radix_sort() -> None:
    # jnp.argsort's module: (x, iota) with compare LT TOTALORDER on the keys alone, no NaN
    # rewrite: XLA's total order, -NaN first.
    text = """module {
      func.func public @main(%arg0: tensor<3x40xf32>) -> (tensor<3x40xf32>, tensor<3x40xi32>) {
        %0 = stablehlo.iota dim = 1 : tensor<3x40xi32>
        %1:2 = "stablehlo.sort"(%arg0, %0) <{dimension = 1 : i64, is_stable = true}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
          %2 = stablehlo.compare  LT, %a, %b,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
          stablehlo.return %2 : tensor<i1>
        }) : (tensor<3x40xf32>, tensor<3x40xi32>) -> (tensor<3x40xf32>, tensor<3x40xi32>)
        return %1#0, %1#1 : tensor<3x40xf32>, tensor<3x40xi32>
      }
    }"""
    exe = xm.compile(xm.import_stablehlo(text))
    check_ir(exe.stages["linalg"], """
        CHECK: scf.forall
        CHECK: tensor<1024xi32>
    """)
    x = special_values(np.float32, 120, 9).reshape(3, 40)
    got, indices = exe(x)
    want = stable_order(x, total_order_key)
    np.testing.assert_array_equal(indices, want)
    assert_same(got, np.take_along_axis(x, want, 1))


def test_unrecognised_comparators_keep_the_merge_sort() -> None:
    # FLOAT compares (-0.0 == +0.0: ties keep their order) and two-key orders.
    x = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0], np.float32)
    k = np.array([2, 1, 2, 1, 0, 2], np.int32)
    m = np.array([5, 3, 7, 1, 2, 0], np.uint8)

    def two_keys(k0, k1, m0, m1):
        b = k0.builder
        return b.or_(b.lt(k0, k1), b.and_(b.eq(k0, k1), b.lt(m0, m1)))

    def build(b, p, kk, mm):
        return [b.sort(p, lambda u, v: u.builder.lt(u, v), is_stable=True), b.sort([kk, mm], two_keys)]

    plain, (sk, sm) = run(build, x, k, m)
    assert np.signbit(plain).tolist() == [True, False, True, True, False, False]
    assert plain.tolist() == [-1.0, 0.0, -0.0, -0.0, 0.0, 1.0]
    assert sk.tolist() == [0, 1, 1, 2, 2, 2] and sm.tolist() == [2, 1, 3, 0, 5, 7]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda t: np.dtype(t).name)
def test_top_k_selection_every_type_and_size(dtype: object, largest: bool) -> None:
    # k up to MAX_SELECTED (32) takes the selection path; 33 sorts fully. Rows of many
    # ties, NaNs of both signs (NaN is the largest value).
    sizes = [1, 2, 16, 17, 33, 1000, 4097]
    cases = [(special_values(dtype, n, 7 * n), k) for n in sizes for k in (1, 3, 32, 33) if k <= n]
    matrix = special_values(dtype, 2 * 3 * 40, 1).reshape(2, 3, 40)

    def build(b, m, *ps):
        return [b.top_k(p, k, largest=largest) for p, (_, k) in zip(ps, cases)] + [
            b.top_k(m, 5, largest=largest)]

    got = run(build, matrix, *(x for x, _ in cases))
    key = sort_key if (np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16) else (lambda v: (int(v),))
    for (values_, indices), (x, k) in zip(got, cases + [(matrix, 5)]):
        order = stable_order(x, key, descending=largest)[..., :k]
        np.testing.assert_array_equal(indices, order, err_msg=f"{x.shape} k={k}")
        assert indices.dtype == np.int32
        assert_same(values_, np.take_along_axis(x, order, -1))


def test_sorts_read_through_slices() -> None:
    # A user's slice of a sort (also not from 0, several operands, other dimensions)
    # reads a prefix: selection. A sort also read whole, or past 32, sorts fully.
    x = values(np.float32, (5, 50), 21, spread=6)
    i = values(np.int32, (5, 50), 22)

    def build(b, p, q):
        s = b.sort([p, q], is_stable=True)
        head = [b.slice(b.get_tuple_element(s, 0), [1, 2], [4, 9]),
                b.slice(b.get_tuple_element(s, 1), [0, 0], [5, 4])]
        whole = b.sort(p, is_stable=True)
        cols = b.sort(q, dimension=0, is_stable=True)
        return head + [b.slice(whole, [0, 0], [5, 3]), whole, b.slice(cols, [0, 0], [2, 50]),
                       b.slice(b.sort(p), [0, 0], [5, 40])]

    a, c, d, whole, cols, wide = run(build, x, i)
    order = np.argsort(x, axis=1, kind="stable")
    np.testing.assert_array_equal(a, np.take_along_axis(x, order, 1)[1:4, 2:9])
    np.testing.assert_array_equal(c, np.take_along_axis(i, order, 1)[:, :4])
    np.testing.assert_array_equal(d, np.sort(x, axis=1)[:, :3])
    np.testing.assert_array_equal(whole, np.sort(x, axis=1))
    np.testing.assert_array_equal(cols, np.sort(i, axis=0)[:2])
    np.testing.assert_array_equal(wide, np.sort(x, axis=1)[:, :40])


def test_top_k_selection_custom_comparator_worst_case() -> None:
    # Ascending rows for a largest-k: every element enters the buffer (the O(n k) case);
    # a comparator on magnitudes has ties between x and -x.
    x = np.arange(-300, 300, dtype=np.int32).reshape(2, 300)

    def by_magnitude(u, v):
        b = u.builder
        return b.gt(b.abs(u), b.abs(v))

    (v, i), (mv, mi) = run(lambda b, p: [b.top_k(p, 7), b.top_k(p, 5, comparator=by_magnitude)], x)
    np.testing.assert_array_equal(i, np.tile(np.arange(299, 292, -1, dtype=np.int32), (2, 1)))
    np.testing.assert_array_equal(v, np.take_along_axis(x, i.astype(np.int64), 1))
    assert mi[0].tolist() == [0, 1, 2, 3, 4] and mv[0].tolist() == [-300, -299, -298, -297, -296]
    assert mi[1].tolist() == [299, 298, 297, 296, 295]


# -- IR ----------------------------------------------------------------------------------------

def test_sort_ir() -> None:
    b = xm.XlaBuilder("ir")
    x = b.parameter(0, shape(np.float32, (2, 17)))
    y = b.parameter(1, shape(np.uint8, (2, 17)))
    b.sort([x, y], dimension=1)
    comp = b.build()
    check_ir(comp.as_mlir_text(), """
        CHECK: "xhlo.sort"(%arg0, %arg1)
        CHECK-SAME: comparator = @[[CMP:[a-z_0-9]+]]
        CHECK-SAME: dimension = 1 : i64
        CHECK-SAME: is_stable = false
        CHECK-SAME: -> (tensor<2x17xf32>, tensor<2x17xui8>)
        CHECK: func.func private @[[CMP]](%arg0: tensor<f32>, %arg1: tensor<f32>,
        CHECK-SAME: %arg2: tensor<ui8>, %arg3: tensor<ui8>) -> tensor<i1>
        CHECK: "xhlo.compare"(%{{.*}}) {compare_type = "TOTALORDER", comparison_direction = "LT"}
    """)
    # The default order on rows longer than 16: a radix sort, one row per scf.forall
    # iteration. One loop counts the 4 digits of every key (histograms of 4 x 256) and
    # packs (key, position) in an i64; 4 passes scatter those; a last loop gathers the
    # operands into the results.
    check_ir(stage_text(comp, "linalg"), """
        CHECK: scf.forall
        CHECK: scf.for {{.*}} -> (tensor<17xi64>, tensor<1024xi32>)
        CHECK: arith.shli
        CHECK: scf.for {{.*}} -> (i32, tensor<256xi32>)
        CHECK: scf.for {{.*}} -> (tensor<256xi32>, tensor<17xi64>)
        CHECK: scf.for {{.*}} -> (i32, tensor<256xi32>)
        CHECK: scf.for {{.*}} -> (tensor<256xi32>, tensor<17xi64>)
        CHECK: scf.for {{.*}} -> (i32, tensor<256xi32>)
        CHECK: scf.for {{.*}} -> (tensor<256xi32>, tensor<17xi64>)
        CHECK: scf.for {{.*}} -> (i32, tensor<256xi32>)
        CHECK: scf.for {{.*}} -> (tensor<256xi32>, tensor<17xi64>)
        CHECK: scf.for {{.*}} -> (tensor<17xf32>, tensor<17xi8>)
        CHECK: arith.trunci {{.*}} : i64 to i32
        CHECK-NOT: xhlo.
        CHECK: scf.forall.in_parallel
        CHECK-NEXT: tensor.parallel_insert_slice {{.*}} : tensor<17xf32> into tensor<2x17xf32>
        CHECK-NEXT: tensor.parallel_insert_slice {{.*}} : tensor<17xi8> into tensor<2x17xi8>
    """)


def test_radix_sort_long_row_ir() -> None:
    # One operand of 2**16 elements: 11-bit digits (3 histograms of 2048 for 32-bit keys),
    # the keys alone move (i32 tensors), the last pass writes the decoded f32 values,
    # then a loop puts the NaNs back (no trip without NaNs). No forall for one row.
    b = xm.XlaBuilder("ir")
    b.sort(b.parameter(0, shape(np.float32, (1 << 16,))))
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK-NOT: scf.forall
        CHECK: scf.for {{.*}} -> (tensor<65536xi32>, tensor<6144xi32>, index)
        CHECK: scf.for {{.*}} -> (i32, tensor<2048xi32>)
        CHECK: scf.for {{.*}} -> (tensor<2048xi32>, tensor<65536xi32>)
        CHECK: scf.for {{.*}} -> (i32, tensor<2048xi32>)
        CHECK: scf.for {{.*}} -> (tensor<2048xi32>, tensor<65536xi32>)
        CHECK: scf.for {{.*}} -> (i32, tensor<2048xi32>)
        CHECK: scf.for {{.*}} -> (tensor<2048xi32>, tensor<65536xf32>)
        CHECK: arith.select
        CHECK: scf.for {{.*}} -> (index, tensor<65536xf32>)
    """)


def test_sort_merge_ir() -> None:
    # A comparator the radix sort does not handle (FLOAT compare): one row per forall
    # iteration, three merge passes (widths 1, 2, 4) for rows of 5; each merges with scf
    # loops.
    b = xm.XlaBuilder("ir")
    x = b.parameter(0, shape(np.float32, (2, 5)))
    b.sort(x, lambda u, v: u.builder.lt(u, v))
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK: scf.forall
        CHECK-COUNT-3: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1 iter_args
        CHECK: tensor.extract
        CHECK: arith.cmpf olt
        CHECK: arith.select
        CHECK: tensor.insert
    """)
    # Rows of at most 16 are merge-sorted whatever the comparator; a recognised order
    # compares keys (unsigned: the sign bit flipped), not through the comparator.
    b = xm.XlaBuilder("short")
    b.sort(b.parameter(0, shape(np.int32, (16,))))
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK-NOT: tensor<256xi32>
        CHECK: %[[K1:.*]] = arith.xori %{{.*}}, %c-2147483648_i32
        CHECK: %[[K2:.*]] = arith.xori %{{.*}}, %c-2147483648_i32
        CHECK: arith.cmpi ult, %[[K1]], %[[K2]]
        CHECK-NOT: arith.cmpi slt, {{.*}} : i32
    """)


def test_top_k_selection_ir() -> None:
    # top_k(3) of rows of 100: buffers of 3 per row, filled in one pass, rows in a forall.
    b = xm.XlaBuilder("ir")
    x = b.parameter(0, shape(np.float32, (4, 100)))
    b.top_k(x, 3)
    check_ir(stage_text(b.build(), "linalg"), """
        CHECK: scf.forall
        CHECK: scf.for %{{.*}} = %c0 to %c100 step %c1 iter_args({{.*}}) -> (tensor<3xf32>, tensor<3xi32>)
        CHECK: scf.if
        CHECK: tensor.parallel_insert_slice {{.*}} : tensor<3xf32> into tensor<4x100xf32>
        CHECK-NOT: tensor<256xi32>
    """)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 6])  # one row: the radix sort; 6: the network
def test_nans_put_back_around_the_vector_scan(dtype: object, rows: int) -> None:
    # place_nans tests 512 bits of a row at once and only such a vector holding a NaN
    # element by element: NaNs at the first and last lane of a vector, in the tail past
    # the last whole vector, rows of NaNs only and rows without one; payloads and signs
    # in their order, last ascending and first descending.
    dtype = np.dtype(dtype)
    lanes = 512 // (8 * dtype.itemsize)
    bits = np.dtype(f"u{dtype.itemsize}")
    # Quiet NaNs with payloads, a negative one, a signaling one, the plain one.
    payloads = np.array({2: [0x7E01, 0xFE00, 0x7C01, 0x7E00] if dtype == np.float16
                         else [0x7FC1, 0xFFC0, 0x7F81, 0x7FC0],
                         4: [0x7FC00123, 0xFFC00001, 0x7F800001, 0x7FC00000],
                         8: [0x7FF8000000000123, 0xFFF8000000000001, 0x7FF0000000000001,
                             0x7FF8000000000000]}[dtype.itemsize], bits).view(dtype)
    for n in (3 * lanes + 5, 2 * lanes, lanes + 1):
        x = values(dtype, (rows, n), seed=n)
        x[x != x] = 0  # NaNs only where placed below
        spots = [0, lanes - 1, lanes, n - 1] + ([2 * lanes - 1, 2 * lanes] if n > 2 * lanes else [])
        for i, spot in enumerate(spots):
            x[0, spot] = payloads[i % len(payloads)]
        if rows > 1:
            x[1] = payloads[3]
            x[1, ::3] = payloads[0]
            x[3, n - 1] = payloads[1]
        row = x[0] if rows == 1 else x
        ascending, descending = run(lambda b, p: [b.sort(p), b.sort(p, nan_last_descending)], row)
        for got, desc in ((ascending, False), (descending, True)):
            want = row[..., stable_order(row.reshape(rows, n), sort_key, desc).reshape(row.shape)] \
                if rows == 1 else np.take_along_axis(row, stable_order(row, sort_key, desc), -1)
            np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=f"n={n} desc={desc}")


def test_the_nan_scan_is_a_vector_test_per_512_bits() -> None:
    b = xm.XlaBuilder("nan_scan")
    b.sort(b.parameter(0, shape(np.float32, (8, 100))))
    text = stage_text(b.build(), "linalg")
    # One 16-lane read and OR-reduction per vector; the 4 elements past the last whole
    # vector and a vector holding a NaN element by element.
    assert "vector.transfer_read" in text and "vector<16xf32>" in text
    assert text.count("vector.reduction <or>") == 1
