"""Tests of gather and scatter against numpy references written from the spec's definitions.

Written against the public API (../shared/API.md); the dimension-number
records come from `xlamlir.dialect.ops_indexing` (exported as
`xm.GatherDimensionNumbers` / `xm.ScatterDimensionNumbers`).

Documented choices pinned here (SEMANTICS.md 5.I):
- gather clamps every start index into [0, dim - slice_size] (the slice fits).
- scatter skips a whole update window when its start is out of
  [0, dim - window_size] on any indexed dimension (XLA's ScatterExpander),
  even where part of the window would fit; StableHLO would apply that part.
- scatter's update_computation gets (current..., update...) in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, stage_text

import xlamlir as xm
from xlamlir.dialect.ops_indexing import GatherDimensionNumbers, ScatterDimensionNumbers

GD, SD = GatherDimensionNumbers, ScatterDimensionNumbers
BF16 = np.dtype(ml_dtypes.bfloat16)


def shape(dtype: object, dims: Sequence[int] = ()) -> xm.Shape:
    return xm.Shape.array(xm.type_of(np.dtype(dtype)), tuple(dims))


def compiled(build: Callable[..., object], *arrays: np.ndarray) -> Callable[[], object]:
    """Compile `build(b, *parameters)` for parameters shaped like `arrays`; calling the
    result runs it on `arrays`."""
    b = xm.XlaBuilder("t")
    params = [b.parameter(i, shape(a.dtype, a.shape)) for i, a in enumerate(arrays)]
    exe = xm.compile(b.build(build(b, *params)))
    return lambda: exe(*arrays)


# -- references ---------------------------------------------------------------------------------

def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> tuple[np.ndarray, list[int]]:
    """The indices with the implicit trailing 1 made explicit, and their batch positions."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    return indices, [d for d in range(indices.ndim) if d != index_vector_dim]


def _vector_element(indices: np.ndarray, at: dict[int, int], ivd: int, k: int) -> int:
    return int(indices[tuple(k if d == ivd else at[d] for d in range(indices.ndim))])


def ref_gather(operand: np.ndarray, indices: np.ndarray, dn: GD,
               slice_sizes: Sequence[int]) -> np.ndarray:
    """Seed 001/004's formal definition, starts clamped as StableHLO specifies."""
    idx, positions = _index_vectors(indices, dn.index_vector_dim)
    removed = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    offset_sizes = iter(s for d, s in enumerate(slice_sizes) if d not in removed)
    batch_sizes = iter(idx.shape[d] for d in positions)
    rank = len(dn.offset_dims) + len(positions)
    out_shape = [next(offset_sizes) if i in dn.offset_dims else next(batch_sizes)
                 for i in range(rank)]
    offset_operand_dims = [d for d in range(operand.ndim) if d not in removed]
    out = np.zeros(out_shape, operand.dtype)
    for o in np.ndindex(*out_shape):
        at = dict(zip(positions, (o[i] for i in range(rank) if i not in dn.offset_dims)))
        full = [0] * operand.ndim
        for k, d in enumerate(dn.start_index_map):
            start = _vector_element(idx, at, dn.index_vector_dim, k)
            full[d] = min(max(start, 0), operand.shape[d] - slice_sizes[d])
        for od, sd in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            full[od] = at[sd]
        for d, i in zip(offset_operand_dims, dn.offset_dims):
            full[d] += o[i]
        out[o] = operand[tuple(full)]
    return out


def ref_scatter(operands: Sequence[np.ndarray], indices: np.ndarray,
                updates: Sequence[np.ndarray], fn: Callable[..., Sequence[object]],
                dn: SD) -> list[np.ndarray]:
    """Seed 001/004's definition with XLA's bounds rule: a window applies entirely or not at
    all. Index vectors in row-major order, each window in row-major order."""
    outs = [np.array(o, copy=True) for o in operands]
    idx, positions = _index_vectors(indices, dn.index_vector_dim)
    u = updates[0]
    scatter_dims = [d for d in range(u.ndim) if d not in dn.update_window_dims]
    removed = set(dn.inserted_window_dims) | set(dn.input_batching_dims)
    window_operand_dims = [d for d in range(outs[0].ndim) if d not in removed]
    window = [1] * outs[0].ndim
    for d, ud in zip(window_operand_dims, dn.update_window_dims):
        window[d] = u.shape[ud]
    for g in np.ndindex(*[u.shape[d] for d in scatter_dims]):
        at = dict(zip(positions, g))
        start = [0] * outs[0].ndim
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            start[d] = _vector_element(idx, at, dn.index_vector_dim, k)
        if not all(0 <= s <= n - w for s, n, w in zip(start, outs[0].shape, window)):
            continue
        for od, sd in zip(dn.input_batching_dims, dn.scatter_indices_batching_dims):
            start[od] = at[sd]
        for w in np.ndindex(*[u.shape[d] for d in dn.update_window_dims]):
            u_index = [0] * u.ndim
            for d, i in zip(scatter_dims, g):
                u_index[d] = i
            for d, i in zip(dn.update_window_dims, w):
                u_index[d] = i
            full = list(start)
            for d, i in zip(window_operand_dims, w):
                full[d] += i
            new = fn(*[o[tuple(full)] for o in outs], *[x[tuple(u_index)] for x in updates])
            for o, value in zip(outs, new):
                o[tuple(full)] = value
    return outs


def test_references_reproduce_the_stablehlo_examples() -> None:
    """The references themselves against the spec's published results (below)."""
    operand, indices = _stablehlo_operand(), _stablehlo_indices()
    assert ref_gather(operand, indices, BATCHED_GATHER, (1, 1, 2, 2)).tolist() == BATCHED_GATHER_RESULT
    (out,) = ref_scatter([operand], indices, [np.ones((2, 2, 3, 2, 2), np.int64)],
                         lambda x, y: [x + y], BATCHED_SCATTER)
    assert out.tolist() == BATCHED_SCATTER_RESULT


# -- the seeds' examples ------------------------------------------------------------------------

def _stablehlo_operand() -> np.ndarray:
    return np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2)


def _stablehlo_indices() -> np.ndarray:
    return np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                     [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], np.int64)


# StableHLO's gather/scatter examples with batching dimensions (seed 001 "Scatter -
# Example 1 - StableHLO" walks through the scatter one); results from StableHLO's
# interpreter tests.
BATCHED_GATHER = GD(offset_dims=(3, 4), collapsed_slice_dims=(1,), start_index_map=(2, 1),
                    index_vector_dim=3, operand_batching_dims=(0,),
                    start_indices_batching_dims=(1,))
BATCHED_GATHER_RESULT = [
    [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
     [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
    [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
     [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]]
BATCHED_SCATTER = SD(update_window_dims=(3, 4), inserted_window_dims=(1,),
                     scatter_dims_to_operand_dims=(2, 1), index_vector_dim=3,
                     input_batching_dims=(0,), scatter_indices_batching_dims=(1,))
BATCHED_SCATTER_RESULT = [
    [[[3, 4], [6, 7], [6, 7], [7, 8]], [[9, 10], [11, 12], [15, 16], [17, 18]],
     [[17, 18], [19, 20], [22, 23], [24, 25]]],
    [[[25, 26], [28, 29], [30, 31], [31, 32]], [[35, 36], [38, 39], [38, 39], [39, 40]],
     [[41, 42], [44, 45], [46, 47], [47, 48]]]]


def test_gather_stablehlo_examples() -> None:
    operand, indices = _stablehlo_operand(), _stablehlo_indices()
    plain = GD(offset_dims=(2, 3), collapsed_slice_dims=(0,), start_index_map=(1, 0),
               index_vector_dim=2)

    def build(b, x, x3, i, i3):
        return [b.gather(x, i, BATCHED_GATHER, (1, 1, 2, 2)), b.gather(x3, i3, plain, (1, 2, 2))]

    batched, unbatched = compiled(build, operand, operand[0], indices, indices[0])()
    assert batched.tolist() == BATCHED_GATHER_RESULT
    # The [0, 9] start clamps to [2, 0]: rows 2..3 of operand[0][0] (StableHLO's result).
    assert unbatched.tolist() == [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                                  [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]]


def test_gather_seed_slices_of_a_16x11_array() -> None:
    # Seeds 001/004: 5 slices of [8,6] from [16,11] at S64[5,2] positions, then the same
    # with [4,5,2] indices (batch dims G0, G1); output [G, O0, O1] = input[X + O0, Y + O1].
    x = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)
    starts = np.array([[0, 0], [8, 5], [3, 2], [15, 10], [-4, 7]], np.int64)  # last two clamp
    grid = np.random.default_rng(0).integers(-2, 12, (4, 5, 2)).astype(np.int64)
    dn = GD(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1),
            index_vector_dim=1)
    dn3 = GD(offset_dims=(2, 3), collapsed_slice_dims=(), start_index_map=(0, 1),
             index_vector_dim=2)

    def build(b, p, s, g):
        return [b.gather(p, s, dn, (8, 6)), b.gather(p, g, dn3, (8, 6))]

    five, grid_out = compiled(build, x, starts, grid)()
    assert five.shape == (5, 8, 6) and grid_out.shape == (4, 5, 8, 6)
    for (gx, gy), got in zip(starts, five):
        sx, sy = min(max(gx, 0), 8), min(max(gy, 0), 5)
        np.testing.assert_array_equal(got, x[sx:sx + 8, sy:sy + 6])
    np.testing.assert_array_equal(grid_out, ref_gather(x, grid, dn3, (8, 6)))


def test_gather_tf_gather_nd_example() -> None:
    # Seeds 001/004: start_index_map [0], collapsed [0], offset_dims [2], slice [1, 11]:
    # output [G0, G1, O0] = input[GatherIndices[G0, G1, 0], O0], whole rows.
    x = np.arange(16 * 11, dtype=np.int32).reshape(16, 11)
    rows = np.array([[[3], [0], [15]], [[7], [7], [1]]], np.int32)
    dn = GD(offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=2)
    # The same with index_vector_dim == rank (the implicit trailing 1).
    implicit = GD(offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,),
                  index_vector_dim=2)

    def build(b, p, r, r2):
        return [b.gather(p, r, dn, (1, 11)), b.gather(p, r2, implicit, [1, 11])]

    nd, flat = compiled(build, x, rows, rows[..., 0])()
    np.testing.assert_array_equal(nd, x[rows[..., 0]])
    np.testing.assert_array_equal(flat, x[rows[..., 0]])


def test_scatter_stablehlo_examples() -> None:
    operand, indices = _stablehlo_operand(), _stablehlo_indices()
    plain = SD(update_window_dims=(2, 3), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(1, 0), index_vector_dim=2)
    plain_indices = np.array([[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [0, 9]]], np.int64)

    def build(b, x, i, u, x3, i3, u3):
        return [b.scatter(x, i, u, lambda c, v: c + v, BATCHED_SCATTER),
                b.scatter(x3, i3, u3, lambda c, v: c + v, plain)]

    batched, unbatched = compiled(build, operand, indices, np.ones((2, 2, 3, 2, 2), np.int64),
                                  operand[0], plain_indices, np.ones((2, 3, 2, 2), np.int64))()
    assert batched.tolist() == BATCHED_SCATTER_RESULT
    # The [0, 9] window (operand start [9, 0, 0]) is out of bounds and skipped.
    assert unbatched.tolist() == [[[1, 2], [5, 6], [7, 8], [7, 8]],
                                  [[10, 11], [12, 13], [14, 15], [16, 17]],
                                  [[18, 19], [20, 21], [21, 22], [23, 24]]]


# -- gather numerics ----------------------------------------------------------------------------

def _values(dtype: np.dtype, dims: Sequence[int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, dims).astype(bool)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.integers(-9, 9, dims) + 1j * rng.integers(-9, 9, dims)).astype(dtype)
    if np.issubdtype(dtype, np.unsignedinteger):
        return rng.integers(0, 250, dims).astype(dtype)
    return rng.integers(-100, 100, dims).astype(dtype)


ALL_DTYPES = [np.float32, np.float64, np.int32, np.uint8, BF16, np.bool_, np.float16,
              np.int64, np.complex64]


def test_gather_element_types() -> None:
    dn = GD(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1)
    indices = np.array([[4], [0], [2], [9]], np.int32)
    arrays = [_values(np.dtype(t), (5, 3), seed) for seed, t in enumerate(ALL_DTYPES)]

    def build(b, i, *xs):
        return [b.gather(x, i, dn, (1, 3)) for x in xs]

    for x, got in zip(arrays, compiled(build, indices, *arrays)()):
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, x[np.minimum(indices[:, 0], 4)])


INDEX_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def test_gather_index_types_and_clamping() -> None:
    # Starts below 0 clamp to 0, above dim - size to dim - size, whatever the index type:
    # unsigned ones are never negative (u8 200, u64 2**63 + 5 clamp high).
    x = np.arange(10, dtype=np.float32)
    dn = GD(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,), index_vector_dim=1)
    raw = {np.dtype(t): np.array([[0], [3], [7], [9]], t) for t in INDEX_TYPES}
    raw[np.dtype(np.int8)] = np.array([[-128], [-1], [127], [6]], np.int8)
    raw[np.dtype(np.uint8)] = np.array([[200], [255], [1], [6]], np.uint8)
    raw[np.dtype(np.int64)] = np.array([[-(2 ** 63)], [2 ** 40], [-2 ** 40], [5]], np.int64)
    raw[np.dtype(np.uint64)] = np.array([[2 ** 63 + 5], [2 ** 64 - 1], [2 ** 32], [2]], np.uint64)
    index_arrays = list(raw.values())

    def build(b, p, *idx):
        return [b.gather(p, i, dn, (4,)) for i in idx]

    for idx, got in zip(index_arrays, compiled(build, x, *index_arrays)()):
        starts = np.array([min(max(int(s), 0), 6) for s in idx[:, 0]])
        np.testing.assert_array_equal(got, x[starts[:, None] + np.arange(4)], err_msg=str(idx.dtype))


GATHER_CASES = [
    # operand dims, indices dims, dimension numbers, slice sizes
    ((6, 5), (3, 2), GD((1, 2), (), (0, 1), 1), (2, 3)),
    ((6, 5), (2, 3), GD((0, 2), (), (1, 0), 0), (4, 1)),  # index vector first, offsets around it
    ((4, 5, 3), (2, 2, 1), GD((2,), (0, 2), (2,), 2), (1, 5, 1)),
    ((4, 5, 3), (3,), GD((1, 2, 3), (), (1,), 1), (4, 2, 3)),  # index_vector_dim == rank
    ((2, 5, 4), (3, 2, 1), GD((2, 3), (), (1,), 2, (0,), (1,)), (1, 3, 2)),
    ((3, 2, 6), (6, 4, 2, 1), GD((), (0,), (0,), 3, (1, 2), (2, 0)), (1, 1, 1)),
    ((5,), (), GD((0,), (), (0,), 0), (2,)),  # a scalar index
]


@pytest.mark.parametrize("case", range(len(GATHER_CASES)))
def test_gather_against_reference(case: int) -> None:
    operand_dims, index_dims, dn, sizes = GATHER_CASES[case]
    rng = np.random.default_rng(case)
    x = rng.standard_normal(operand_dims).astype(np.float32)
    bound = max(operand_dims) + 2
    indices = rng.integers(-2, bound, index_dims).astype(np.int32)
    (got,) = compiled(lambda b, p, i: [b.gather(p, i, dn, sizes)], x, indices)()
    np.testing.assert_array_equal(got, ref_gather(x, indices, dn, sizes))


def test_gather_zero_sizes_and_dict_dimension_numbers() -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    dn = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0],
          "index_vector_dim": 1}

    corner = GD(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(),
                index_vector_dim=1)

    def build(b, p, i, none, vectors_of_0):
        return [b.gather(p, i, dn, (1, 0)),  # a zero slice size
                b.gather(p, none, dn, (1, 3)),  # no index vectors
                b.gather(p, i, GD.of(dn), np.array([1, 3]), indices_are_sorted=True),
                b.gather(p, vectors_of_0, corner, (2, 2))]  # empty index vectors: start 0

    empty_slice, no_indices, rows, corners = compiled(
        build, x, np.array([[1], [3]], np.int32), np.zeros((0, 1), np.int32),
        np.zeros((3, 0), np.uint16))()
    assert empty_slice.shape == (2, 0) and no_indices.shape == (0, 3)
    np.testing.assert_array_equal(rows, x[[1, 3]])
    np.testing.assert_array_equal(corners, np.stack([x[:2, :2]] * 3))


# -- scatter numerics ---------------------------------------------------------------------------

ROWS = SD(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
          index_vector_dim=1)


def _replace(_current: xm.XlaOp, update: xm.XlaOp) -> xm.XlaOp:
    return update


def test_scatter_update_computations() -> None:
    # Unique indices, so the result does not depend on the order of the updates.
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 4
    idx = np.array([[4], [1], [2]], np.int32)
    upd = np.array([[2, -3, 5], [7, 1, -1], [0.5, 2, -8]], np.float32)
    fns = {
        "add": (lambda c, u: c + u, lambda c, u: c + u),
        "multiply": (lambda c, u: c * u, lambda c, u: c * u),
        "max": (lambda c, u: c.builder.max(c, u), max),
        "replace": (_replace, lambda c, u: u),
        # Not commutative: pins the argument order (current, update).
        "custom": (lambda c, u: c * 2 - u, lambda c, u: c * 2 - u),
    }

    def build(b, p, i, u):
        return [b.scatter(p, i, u, fn, ROWS) for fn, _ in fns.values()]

    for (name, (_, ref)), got in zip(fns.items(), compiled(build, x, idx, upd)()):
        (want,) = ref_scatter([x], idx, [upd], lambda c, u, f=ref: [f(c, u)], ROWS)
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_scatter_skips_whole_windows_out_of_bounds() -> None:
    # Windows of 3 along a dimension of 5: valid starts are 0..2. Start 3 would cover
    # 3, 4, 5: partly out of bounds, so XLA skips all of it (StableHLO would update 3, 4).
    x = np.zeros((2, 5), np.int32)
    dn = SD(update_window_dims=(1,), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0, 1), index_vector_dim=1)
    idx = np.array([[0, 2], [1, 3], [1, -1], [0, 100], [2, 0], [-1, 0], [1, 0]], np.int32)
    upd = np.tile(np.array([1, 10, 100], np.int32), (7, 1)) * np.arange(1, 8, dtype=np.int32)[:, None]
    (got,) = compiled(lambda b, p, i, u: [b.scatter(p, i, u, lambda c, v: c + v, dn)],
                      x, idx, upd)()
    assert got.tolist() == [[0, 0, 1, 10, 100], [7, 70, 700, 0, 0]]
    np.testing.assert_array_equal(got, ref_scatter([x], idx, [upd], lambda c, v: [c + v], dn)[0])


def test_scatter_duplicates_combine() -> None:
    x = np.zeros(4, np.int32)
    dn = SD(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
            index_vector_dim=1)
    idx = np.array([[1], [3], [1], [1], [0], [3]], np.int64)
    upd = np.array([1, 2, 3, 4, 5, 6], np.int32)
    (got,) = compiled(lambda b, p, i, u: [b.scatter(p, i, u, lambda c, v: c + v, dn,
                                                    indices_are_sorted=False)], x, idx, upd)()
    assert got.tolist() == [5, 8, 0, 8]


def test_scatter_element_and_index_types() -> None:
    dtypes = ALL_DTYPES
    combine = {np.dtype(np.bool_): lambda c, u: c.builder.or_(c, u)}
    xs = [_values(np.dtype(t), (4, 3), seed) for seed, t in enumerate(dtypes)]
    ups = [_values(np.dtype(t), (2, 3), seed + 20) for seed, t in enumerate(dtypes)]
    index_arrays = [np.array([[3], [1]], t) for t in INDEX_TYPES]

    def build(b, *params):
        ps, us, ids = params[:len(xs)], params[len(xs):2 * len(xs)], params[2 * len(xs):]
        out = [b.scatter(p, ids[k % len(ids)], u,
                         combine.get(p.shape.dtype, lambda c, v: c + v), ROWS)
               for k, (p, u) in enumerate(zip(ps, us))]
        # Every index type, once each, on the f32 operand.
        out += [b.scatter(ps[0], i, us[0], _replace, ROWS) for i in ids]
        return out

    results = compiled(build, *xs, *ups, *index_arrays)()
    for k, (x, u, got) in enumerate(zip(xs, ups, results)):
        idx = index_arrays[k % len(index_arrays)]
        fn = (lambda c, v: [c | v]) if x.dtype == np.bool_ else (lambda c, v: [c + v])
        with np.errstate(over="ignore"):  # u8 sums wrap, as XLA's do
            (want,) = ref_scatter([x], idx.astype(np.int64), [u], fn, ROWS)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, want, err_msg=str(x.dtype))
    for idx, got in zip(index_arrays, results[len(xs):]):
        want = xs[0].copy()
        want[[3, 1]] = ups[0]
        np.testing.assert_array_equal(got, want, err_msg=str(idx.dtype))


def test_scatter_variadic() -> None:
    # Two operands of different types updated together: keep the smaller value and its tag,
    # ties to the smaller tag (commutative, so duplicates may come in any order).
    values = np.array([5, 5, 5, 5], np.float32)
    tags = np.array([0, 0, 0, 0], np.int32)
    idx = np.array([[2], [0], [2], [3], [2]], np.int32)
    new_values = np.array([4, 9, 1, 5, 1], np.float32)
    new_tags = np.array([10, 11, 12, 13, 14], np.int32)
    dn = SD(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
            index_vector_dim=1)

    def keep_min(v, t, nv, nt):
        b = v.builder
        take = b.or_(b.lt(nv, v), b.and_(b.eq(nv, v), b.lt(nt, t)))
        return [b.select(take, nv, v), b.select(take, nt, t)]

    def build(b, v, t, i, nv, nt):
        pair = b.scatter([v, t], i, [nv, nt], keep_min, dn)
        assert pair.shape.is_tuple() and len(pair.shape.tuple_shapes) == 2
        one = b.scatter([v], i, [nv], lambda c, u: [c + u], dn)  # a list of one: a 1-tuple
        return [pair, one]

    (got_values, got_tags), (sums,) = compiled(build, values, tags, idx, new_values, new_tags)()
    assert got_values.tolist() == [5, 5, 1, 5] and got_tags.tolist() == [0, 0, 12, 0]
    assert got_tags.dtype == np.int32
    assert sums.tolist() == [14, 5, 11, 10]


def test_scatter_xla_computation_and_inputs_untouched() -> None:
    sub = xm.XlaBuilder("mul")
    a, c = sub.parameter(0, shape(np.int32)), sub.parameter(1, shape(np.int32))
    mul = sub.build(a * c)
    x = np.arange(1, 7, dtype=np.int32).reshape(3, 2)
    before = x.copy()
    idx = np.array([[2], [0]], np.int32)
    upd = np.array([[10, 100], [-1, 2]], np.int32)
    (got,) = compiled(lambda b, p, i, u: [b.scatter(p, i, u, mul, ROWS, unique_indices=True)],
                      x, idx, upd)()
    assert got.tolist() == [[-1, 4], [3, 4], [50, 600]]
    np.testing.assert_array_equal(x, before)  # the argument buffer is not written


SCATTER_CASES = [
    # operand dims, indices dims, updates dims, dimension numbers
    ((6, 5), (3, 2), (3, 2, 3), SD((1, 2), (), (0, 1), 1)),
    ((6, 5), (1, 4), (2, 4), SD((0,), (1,), (1,), 0)),  # index vector first, window first
    ((4, 5, 3), (2, 2, 1), (2, 2, 5), SD((2,), (0, 2), (2,), 2)),
    ((4, 5, 3), (3,), (2, 2, 3, 3), SD((0, 1, 3), (), (0,), 1)),  # index_vector_dim == rank
    ((2, 5, 4), (3, 2, 1), (3, 2, 3, 2), SD((2, 3), (), (1,), 2, (0,), (1,))),
    ((3, 2, 6), (6, 4, 2, 1), (6, 4, 2), SD((), (0,), (0,), 3, (1, 2), (2, 0))),
]


@pytest.mark.parametrize("case", range(len(SCATTER_CASES)))
def test_scatter_against_reference(case: int) -> None:
    operand_dims, index_dims, update_dims, dn = SCATTER_CASES[case]
    rng = np.random.default_rng(case)
    x = rng.integers(-50, 50, operand_dims).astype(np.float64)
    indices = rng.integers(-1, max(operand_dims) + 1, index_dims).astype(np.int64)
    upd = rng.integers(-50, 50, update_dims).astype(np.float64)
    (got,) = compiled(lambda b, p, i, u: [b.scatter(p, i, u, lambda c, v: c + v, dn)],
                      x, indices, upd)()
    (want,) = ref_scatter([x], indices, [upd], lambda c, v: [c + v], dn)
    np.testing.assert_array_equal(got, want)


def test_scatter_zero_size_updates() -> None:
    x = np.arange(4, dtype=np.float32)
    dn = SD(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
            index_vector_dim=1)
    (got,) = compiled(lambda b, p, i, u: [b.scatter(p, i, u, _replace, dn)],
                      x, np.zeros((0, 1), np.int32), np.zeros((0,), np.float32))()
    np.testing.assert_array_equal(got, x)


# -- shape errors -------------------------------------------------------------------------------

def _gather_error(b: xm.XlaBuilder, operand: tuple, indices: tuple, dn: object,
                  sizes: Sequence[int], index_type: object = np.int32) -> str:
    p = b.parameter(0, shape(np.float32, operand))
    i = b.parameter(1, shape(index_type, indices))
    with pytest.raises(xm.ShapeError) as e:
        b.gather(p, i, dn, sizes)
    assert "gather" in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("operand,indices,dn,sizes,index_type,message", [
    ((4, 3), (2, 1), GD((1,), (0,), (0,), 1), (1, 3), np.float32, "integer element type"),
    ((4, 3), (2, 1), GD((1,), (0,), (0,), 3), (1, 3), np.int32, "index_vector_dim 3"),
    ((4, 3), (2, 1), GD((1,), (0,), (0,), 1), (1, 3, 1), np.int32, "slice_sizes"),
    ((4, 3), (2, 1), GD((1,), (0,), (0,), 1), (1, 4), np.int32, "out of range [0, 3]"),
    ((4, 3), (2, 1), GD((1,), (0,), (0,), 1), (2, 3), np.int32, "slice size 1"),
    ((4, 3), (2, 1), GD((1,), (0,), (0, 1), 1), (1, 3), np.int32, "one entry per element"),
    ((4, 3), (2, 2), GD((1,), (0,), (0, 0), 1), (1, 3), np.int32, "repeat"),
    ((4, 3), (2, 1), GD((1,), (0,), (2,), 1), (1, 3), np.int32, "out of range"),
    ((4, 3), (2, 1), GD((0, 1), (0,), (0,), 1), (1, 3), np.int32, "one entry per operand"),
    ((4, 3), (2, 1), GD((2,), (0,), (0,), 1), (1, 3), np.int32, "offset_dims"),
    ((4, 3, 2), (2, 1), GD((2, 1), (0,), (0,), 1), (1, 3, 2), np.int32, "sorted"),
    ((4, 3), (4, 1), GD((1,), (0,), (0,), 1, (0,), (0,)), (1, 3), np.int32, "both"),
    ((4, 3), (2, 1), GD((1,), (), (0,), 1, (0,), (1,)), (1, 3), np.int32, "index_vector_dim"),
    ((4, 3), (2, 1), GD((1,), (), (0,), 1, (0,), (0,)), (1, 3), np.int32, "sizes differ"),
    ((4, 3), (4, 1), GD((1,), (), (0,), 1, (0,), (0,)), (1, 3), np.int32, "both"),
    ((4, 3), (4, 1), GD((), (0,), (1,), 1, (1,), ()), (1, 1), np.int32, "same length"),
])
def test_gather_shape_errors(b: xm.XlaBuilder, operand, indices, dn, sizes, index_type,
                             message) -> None:
    assert message in _gather_error(b, operand, indices, dn, sizes, index_type)


def test_gather_dimension_number_records(b: xm.XlaBuilder) -> None:
    dn = GD([1], np.array([0]), (0,), np.int64(1))
    assert dn == GD((1,), (0,), (0,), 1) and hash(dn) == hash(GD((1,), (0,), (0,), 1))
    assert dn.operand_batching_dims == () and isinstance(dn.index_vector_dim, int)
    with pytest.raises(xm.ShapeError):
        GD((1,), (0,), (0,), 1.5)
    with pytest.raises(xm.ShapeError):
        GD("1", (0,), (0,), 1)
    with pytest.raises(xm.ShapeError, match="missing"):
        GD.of({"offset_dims": (1,)})
    with pytest.raises(xm.ShapeError, match="unknown"):
        SD.of({"update_window_dims": (1,), "inserted_window_dims": (), "bogus": 1,
               "scatter_dims_to_operand_dims": (0,), "index_vector_dim": 1})
    p = b.parameter(0, shape(np.float32, (4, 3)))
    with pytest.raises(xm.ShapeError):
        b.gather(p, p, ((1,), (0,), (0,), 1), (1, 3))  # a bare tuple is not dimension numbers


def _scatter_error(b: xm.XlaBuilder, operand: tuple, indices: tuple, updates: tuple, dn: object,
                   fn: object = None, index_type: object = np.int32,
                   update_type: object = np.float32) -> str:
    p = b.parameter(0, shape(np.float32, operand))
    i = b.parameter(1, shape(index_type, indices))
    u = b.parameter(2, shape(update_type, updates))
    with pytest.raises(xm.ShapeError) as e:
        b.scatter(p, i, u, fn or (lambda c, v: c + v), dn)
    assert "scatter" in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("operand,indices,updates,dn,message", [
    ((4, 3), (2, 1), (2, 3), SD((1,), (0,), (0,), 3), "index_vector_dim 3"),
    ((4, 3), (2, 1), (2, 3), SD((2,), (0,), (0,), 1), "update_window_dims"),
    ((4, 3), (2, 1), (2, 3), SD((1,), (2,), (0,), 1), "inserted_window_dims"),
    ((4, 3), (2, 1), (2, 3), SD((1,), (0,), (0, 1), 1), "one entry per element"),
    ((4, 3), (2, 1), (2, 3), SD((1,), (0,), (3,), 1), "out of range"),
    ((4, 3), (2, 1), (2, 3), SD((0, 1), (0,), (0,), 1), "one entry per operand"),
    ((4, 3), (2, 1), (2, 3, 1), SD((1,), (0,), (0,), 1), "rank"),
    ((4, 3), (2, 1), (2, 4), SD((1,), (0,), (0,), 1), "more than"),
    ((4, 3), (2, 1), (3, 3), SD((1,), (0,), (0,), 1), "scatter dimension"),
    ((4, 3, 2), (2, 1), (2, 3, 2), SD((1, 2), (0, 0), (0,), 1), "repeat"),
    ((4, 3, 2), (2, 1), (2, 3, 2), SD((2, 1), (0,), (0,), 1), "sorted"),
    ((4, 3), (4, 1), (4, 3), SD((1,), (), (0,), 1, (0,), (0,)), "both"),
    ((4, 3), (2, 1), (2, 3), SD((1,), (), (1,), 1, (0,), (0,)), "sizes differ"),
])
def test_scatter_shape_errors(b: xm.XlaBuilder, operand, indices, updates, dn, message) -> None:
    assert message in _scatter_error(b, operand, indices, updates, dn)


def test_scatter_operand_and_computation_errors(b: xm.XlaBuilder) -> None:
    assert "integer element type" in _scatter_error(b, (4, 3), (2, 1), (2, 3), ROWS,
                                                    index_type=np.float32)
    b2 = xm.XlaBuilder("t2")
    assert "element type" in _scatter_error(b2, (4, 3), (2, 1), (2, 3), ROWS, update_type=np.int32)
    c = xm.XlaBuilder("c")
    p = c.parameter(0, shape(np.float32, (4, 3)))
    q = c.parameter(1, shape(np.float32, (5, 3)))
    i = c.parameter(2, shape(np.int32, (2, 1)))
    u = c.parameter(3, shape(np.float32, (2, 3)))
    add = lambda x, y: x + y  # noqa: E731
    with pytest.raises(xm.ShapeError, match="same dimensions"):
        c.scatter([p, q], i, [u, u], lambda a, b_, x, y: [a + x, b_ + y], ROWS)
    with pytest.raises(xm.ShapeError, match="one updates array per operand"):
        c.scatter([p, p], i, [u], add, ROWS)
    with pytest.raises(xm.ShapeError, match="at least one operand"):
        c.scatter([], i, [], add, ROWS)
    with pytest.raises(xm.ShapeError, match="2 parameters"):
        c.scatter(p, i, u, lambda x: x, ROWS)
    with pytest.raises(xm.ShapeError, match="4 parameters"):
        c.scatter([p, p], i, [u, u], add, ROWS)
    with pytest.raises(xm.ShapeError, match="must return"):
        c.scatter([p, p], i, [u, u], lambda a, b_, x, y: a + x, ROWS)
    with pytest.raises(xm.ShapeError, match="result 0"):
        c.scatter(p, i, u, lambda x, y: c_eq(x, y), ROWS)
    s32 = xm.XlaBuilder("s32")
    wrong = s32.build(s32.parameter(0, shape(np.int32)) + s32.parameter(1, shape(np.int32)))
    with pytest.raises(xm.ShapeError, match="takes"):
        c.scatter(p, i, u, wrong, ROWS)
    with pytest.raises(xm.ShapeError, match="bool"):
        c.scatter(p, i, u, add, ROWS, unique_indices=1)


def c_eq(x: xm.XlaOp, y: xm.XlaOp) -> xm.XlaOp:
    return x.builder.eq(x, y)


# -- IR ----------------------------------------------------------------------------------------

def test_gather_scatter_ir() -> None:
    b = xm.XlaBuilder("ir")
    x = b.parameter(0, shape(np.float32, (5, 3)))
    i = b.parameter(1, shape(np.uint8, (2, 1)))
    g = b.gather(x, i, GD((1,), (0,), (0,), 1), (1, 3))
    s = b.scatter(x, i, g, lambda c, u: c + u, ROWS)
    comp = b.build([g, s])
    check_ir(comp.as_mlir_text(), """
        CHECK: "xhlo.gather"(%arg0, %arg1)
        CHECK-SAME: collapsed_slice_dims = array<i64: 0>
        CHECK-SAME: index_vector_dim = 1 : i64
        CHECK-SAME: offset_dims = array<i64: 1>
        CHECK-SAME: slice_sizes = array<i64: 1, 3>
        CHECK-SAME: -> tensor<2x3xf32>
        CHECK: "xhlo.scatter"(%arg0, %arg1, %0)
        CHECK-SAME: update_computation = @[[COMP:[a-z_0-9]+]]
        CHECK-SAME: update_window_dims = array<i64: 1>
        CHECK: func.func private @[[COMP]](%arg0: tensor<f32>, %arg1: tensor<f32>)
        CHECK: xhlo.add
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: linalg.generic
        CHECK: tensor.extract %{{.*}} : tensor<2x1xi8>
        CHECK: arith.extui
        CHECK: arith.minui
        CHECK: tensor.extract
        CHECK: linalg.yield
        CHECK: scf.for
        CHECK: arith.cmpi ule
        CHECK: scf.if
        CHECK: scf.for
        CHECK: arith.addf
        CHECK: tensor.insert
    """)


def test_hlo_text_round_trip() -> None:
    # Parsed text runs the same shape rules (dialect/verify.py) and lowers the same way.
    b = xm.XlaBuilder("rt")
    x = b.parameter(0, shape(np.int32, (4, 3)))
    i = b.parameter(1, shape(np.int64, (2, 1)))
    g = b.gather(x, i, GD((1,), (0,), (0,), 1), (1, 3))
    b.scatter([x, x], i, [g, g], lambda c, d, u, v: [c + u, d * v], ROWS)
    text = b.build().as_mlir_text()
    exe = xm.compile_mlir(text)
    xs = np.arange(12, dtype=np.int32).reshape(4, 3)
    sums, products = exe(xs, np.array([[3], [9]], np.int64))  # 9 is skipped
    assert sums.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [18, 20, 22]]
    assert products.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [81, 100, 121]]
    with pytest.raises(xm.CompileError, match="inserted_window_dims"):
        xm.compile_mlir(text.replace("inserted_window_dims = array<i64: 0>",
                                     "inserted_window_dims = array<i64: 5>"))


def test_results_and_build_root(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(np.float32, (4, 3)))
    i = b.parameter(1, shape(np.int32, (2, 1)))
    u = b.parameter(2, shape(np.float32, (2, 3)))
    single = b.scatter(x, i, u, _replace, ROWS)
    assert single.shape == shape(np.float32, (4, 3))
    assert b.build().program_shape()[1] == shape(np.float32, (4, 3))
    pair = b.scatter([x, x], i, [u, u], lambda a, c, d, e: [d, e], ROWS)
    assert pair.shape == xm.Shape.tuple([shape(np.float32, (4, 3))] * 2)

