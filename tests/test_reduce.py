"""Tests of reduce, reduce_window and select_and_scatter against numpy references.

Written against the public API (../shared/API.md). Many reductions of one
parameter are built into one computation with a tuple result, so a test
compiles once. Integer-valued data keeps float sums exact where the
reassociation the spec allows (SEMANTICS 5.X) would otherwise need a
tolerance; random float data is compared with one.

Documented choices pinned here:
- reduce with no dimension to reduce gives `computation(init, x)` per element,
  and every output element takes the init value exactly once (the seeds'
  pseudo-code: `result <- init; result += x...`).
- reduce_window: "SAME" pads the dilated input for an output of
  ceil(size / stride), the odd cell on the high side (XLA's MakePadding, on
  dilated extents as jax.lax.padtype_to_pads); negative padding is rejected
  (XLA's InferReduceWindowShape).
- select_and_scatter never selects padding; a window of padding only scatters
  nothing (XLA:CPU); `select` sees the earlier element first, so GE keeps the
  first of equal maxima.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir

import xlamlir as xm

F32 = xm.Shape.array(xm.F32, ())


def shape(t: xm.PrimitiveType, dims: Sequence[int] = ()) -> xm.Shape:
    return xm.Shape.array(t, tuple(dims))


def compiled(build: Callable[..., object], *params: xm.Shape) -> xm.Executable:
    """Compile `build(b, *parameters)`; its return value (an op or a list) is the root."""
    b = xm.XlaBuilder("t")
    root = build(b, *(b.parameter(i, s) for i, s in enumerate(params)))
    return xm.compile(b.build(root))


def const(b: xm.XlaBuilder, value: object, dtype: object) -> xm.XlaOp:
    """A scalar constant; complex ones through `complex` (see the report on complex constants)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        part = np.float32 if dtype == np.complex64 else np.float64
        return b.complex(b.constant(part(np.real(value))), b.constant(part(np.imag(value))))
    return b.constant(np.asarray(value, dtype)[()])


def add(a: xm.XlaOp, x: xm.XlaOp) -> xm.XlaOp:
    return a + x


def maximum(a: xm.XlaOp, x: xm.XlaOp) -> xm.XlaOp:
    return a.builder.max(a, x)


def minimum(a: xm.XlaOp, x: xm.XlaOp) -> xm.XlaOp:
    return a.builder.min(a, x)


def scalar_computation(name: str, t: xm.PrimitiveType, fn: Callable[..., xm.XlaOp],
                       arity: int = 2) -> xm.XlaComputation:
    sub = xm.XlaBuilder(name)
    params = [sub.parameter(i, shape(t)) for i in range(arity)]
    return sub.build(fn(*params))


# -- references ---------------------------------------------------------------------------------

def ref_reduce_window(x: np.ndarray, init: object, fn: Callable, window: Sequence[int],
                      strides: Sequence[int] | None = None, base: Sequence[int] | None = None,
                      wdil: Sequence[int] | None = None,
                      padding: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
    """Straight from the definition: dilate and pad with init, then fold every window in
    lexicographic order, starting from init."""
    rank = x.ndim
    strides = strides or [1] * rank
    base = base or [1] * rank
    wdil = wdil or [1] * rank
    padding = padding or [(0, 0)] * rank
    dilated = [0 if n == 0 else (n - 1) * d + 1 for n, d in zip(x.shape, base)]
    padded = np.full([lo + d + hi for d, (lo, hi) in zip(dilated, padding)], init, x.dtype)
    padded[tuple(slice(lo, lo + d, b) for (lo, _), d, b in zip(padding, dilated, base))] = x
    extents = [(w - 1) * d + 1 for w, d in zip(window, wdil)]
    out_shape = [0 if e > p else (p - e) // s + 1 for p, e, s in zip(padded.shape, extents, strides)]
    out = np.empty(out_shape, x.dtype)
    for o in np.ndindex(*out_shape):
        acc = init
        for w in np.ndindex(*window):
            acc = fn(acc, padded[tuple(oi * s + wi * d for oi, wi, s, d in zip(o, w, strides, wdil))])
        out[o] = acc
    return out


def ref_select_and_scatter(operand: np.ndarray, source: np.ndarray, init: object,
                           select: Callable, scatter: Callable, window: Sequence[int],
                           strides: Sequence[int], padding: Sequence[tuple[int, int]]) -> np.ndarray:
    out = np.full(operand.shape, init, operand.dtype)
    for s in np.ndindex(*source.shape):
        best = None
        for w in np.ndindex(*window):
            p = tuple(si * st + wi - lo for si, st, wi, (lo, _) in zip(s, strides, w, padding))
            if not all(0 <= pi < n for pi, n in zip(p, operand.shape)):
                continue  # padding is never selected
            if best is None or not select(operand[best], operand[p]):
                best = p
        if best is not None:
            out[best] = scatter(out[best], source[s])
    return out


# -- reduce: builder results and the seeds' examples -------------------------------------------

def test_reduce_results_single_and_tuple(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(xm.F32, (2, 3)))
    y = b.parameter(1, shape(xm.S32, (2, 3)))
    zero, izero = b.constant(np.float32(0)), b.constant(np.int32(0))
    single = b.reduce(x, zero, add, [1])
    assert single.shape == shape(xm.F32, (2,))
    one = b.reduce([x], [zero], add, [0])
    assert one.shape == xm.Shape.tuple([shape(xm.F32, (3,))])
    pair = b.reduce([x, y], [zero, izero], lambda a, i, v, j: [a + v, i + j], (0, 1))
    assert pair.shape == xm.Shape.tuple([F32, shape(xm.S32)])
    assert b.get_tuple_element(pair, 1).shape == shape(xm.S32)
    # The last op built is the reduce's result, so build() without a root returns it.
    b.reduce(x, zero, add, [0])
    assert b.build().program_shape()[1] == shape(xm.F32, (3,))


def test_lists_of_one_give_one_tuples() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def build(b, p):
        zero = b.constant(np.float32(0))
        return [b.reduce([p], [zero], lambda a, v: [a + v], [1]),  # a 1-list from the callable too
                b.reduce_window([p], [zero], add, [1, 2])]

    (rows,), (pairs,) = compiled(build, shape(xm.F32, (2, 3)))(x)
    assert rows.tolist() == [3, 12]
    assert pairs.tolist() == [[1, 3], [7, 9]]


def test_reduce_seed_examples() -> None:
    # 2-D: [[1 2 3] [4 5 6]]; 1-D [10 11 12 13]; the 3-D array of 4 copies of it (D3).
    m = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    cube = np.stack([m] * 4)
    vec = np.array([10, 11, 12, 13], np.float32)

    def build(b, m_, cube_, vec_):
        z = b.constant(np.float32(0))
        return [b.reduce(m_, z, add, [0]), b.reduce(m_, z, add, [1]), b.reduce(vec_, z, add, [0]),
                b.reduce(cube_, z, add, [0]), b.reduce(cube_, z, add, [2]),
                b.reduce(cube_, z, add, [0, 1]), b.reduce(cube_, z, add, [2, 1, 0])]

    exe = compiled(build, shape(xm.F32, (2, 3)), shape(xm.F32, (4, 2, 3)), shape(xm.F32, (4,)))
    r = exe(m, cube, vec)
    assert r[0].tolist() == [5, 7, 9] and r[1].tolist() == [6, 15]
    assert r[2].tolist() == 46
    assert r[3].tolist() == [[4, 8, 12], [16, 20, 24]]  # seed 001/003, not seed 000 (D3)
    assert r[4].tolist() == [[6, 15]] * 4
    assert r[5].tolist() == [20, 28, 36]
    assert r[6].shape == () and r[6] == 84


def argmax_computation(m: xm.XlaOp, i: xm.XlaOp, v: xm.XlaOp, j: xm.XlaOp) -> list[xm.XlaOp]:
    """(max, argmax) with ties to the lower index, whatever the order of evaluation."""
    b = m.builder
    take = b.or_(b.gt(v, m), b.and_(b.eq(v, m), b.lt(j, i)))
    return [b.select(take, v, m), b.select(take, j, i)]


def test_reduce_argmax_ties_to_lower_index() -> None:
    x = np.array([[1, 3, 3, 0, 2], [5, 5, 1, 5, 0], [-1, -2, -3, -4, -5]], np.float32)

    def build(b, p):
        inits = [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))]
        across = b.constant(np.tile(np.arange(5, dtype=np.int32), (3, 1)))
        down = b.constant(np.tile(np.arange(3, dtype=np.int32)[:, None], (1, 5)))
        return [b.reduce([p, across], inits, argmax_computation, [1]),
                b.reduce([p, down], inits, argmax_computation, [0])]

    (values, indices), (col_values, col_indices) = compiled(build, shape(xm.F32, (3, 5)))(x)
    assert values.tolist() == [3, 5, -1] and indices.tolist() == [1, 0, 0]
    assert indices.dtype == np.int32
    assert col_values.tolist() == [5, 5, 3, 5, 2] and col_indices.tolist() == [1, 1, 0, 1, 0]


def test_reduce_seed_argmax_example() -> None:
    # Seed 001's f(max, argmax, value, index): value >= max takes (value, index); applied
    # in order it is the running argmax (data without ties: any order gives this).
    x = np.array([2.5, -1, 7, 3, 6.5, 7.25, 0], np.float32)

    def f(mx, am, value, index):
        b = mx.builder
        ge = b.ge(value, mx)
        return [b.select(ge, value, mx), b.select(ge, index, am)]

    def build(b, p):
        idx = b.constant(np.arange(7, dtype=np.int32))
        return b.reduce([p, idx], [b.constant(np.float32(-np.inf)), b.constant(np.int32(-1))],
                        f, [0])

    value, index = compiled(build, shape(xm.F32, (7,)))(x)
    assert value == np.float32(7.25) and index == 5


# -- reduce: numerics ---------------------------------------------------------------------------

SUM_TYPES = {"f32": (np.float32, 0), "f64": (np.float64, 0), "f16": (np.float16, 2e-3),
             "bf16": (ml_dtypes.bfloat16, 1.6e-2), "s32": (np.int32, 0), "u8": (np.uint8, 0),
             "c64": (np.complex64, 0)}


@pytest.mark.parametrize("name", SUM_TYPES)
def test_reduce_sum_per_type(name: str) -> None:
    dtype, rtol = SUM_TYPES[name]
    t = xm.type_of(np.dtype(dtype))
    rng = np.random.default_rng(len(name))
    x = rng.integers(0, 50, (3, 4, 5)).astype(dtype)
    if name == "c64":
        x = x + 1j * rng.integers(-9, 9, x.shape).astype(np.float32)
    if name == "u8":
        x = rng.integers(0, 256, x.shape).astype(np.uint8)  # the sums wrap modulo 256

    def build(b, p):
        z = const(b, 0, dtype)
        return [b.reduce(p, z, add, [0, 2]), b.reduce(p, z, add, [2]), b.reduce(p, z, add, [0, 1, 2])]

    r = compiled(build, shape(t, x.shape))(x)
    wide = x.astype(np.float64 if name in ("f16", "bf16") else x.dtype)
    for got, axes in zip(r, [(0, 2), (2,), (0, 1, 2)]):
        want = wide.sum(axis=axes, dtype=wide.dtype)
        assert got.dtype == np.dtype(dtype)
        if rtol:
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol)
        else:
            np.testing.assert_array_equal(got, want.astype(dtype))


def test_reduce_every_elementwise_combiner() -> None:
    rng = np.random.default_rng(1)
    xf = rng.integers(-4, 5, (3, 6)).astype(np.float32)
    xi = rng.integers(-1000, 1000, (3, 6)).astype(np.int32)
    xu = rng.integers(0, 256, (3, 6)).astype(np.uint8)

    def build(b, f, i, u):
        b_ = b

        def c(v, dt):
            return const(b_, v, dt)

        return [b.reduce(f, c(0, np.float32), add, [1]),
                b.reduce(f, c(1, np.float32), lambda a, x: a * x, [1]),
                b.reduce(f, c(-np.inf, np.float32), maximum, [1]),
                b.reduce(f, c(np.inf, np.float32), minimum, [0]),
                b.reduce(i, c(-1, np.int32), lambda a, x: a & x, [1]),
                b.reduce(i, c(0, np.int32), lambda a, x: a | x, [1]),
                b.reduce(i, c(0, np.int32), lambda a, x: a ^ x, [0]),
                b.reduce(i, c(np.iinfo(np.int32).min, np.int32), maximum, [1]),
                b.reduce(u, c(0, np.uint8), maximum, [1]),  # unsigned compare
                b.reduce(u, c(255, np.uint8), minimum, [1]),
                b.reduce(u, c(1, np.uint8), lambda a, x: a * x, [0])]  # wraps

    r = compiled(build, shape(xm.F32, (3, 6)), shape(xm.S32, (3, 6)), shape(xm.U8, (3, 6)))(xf, xi, xu)
    want = [xf.sum(1), xf.prod(1), xf.max(1), xf.min(0), np.bitwise_and.reduce(xi, 1),
            np.bitwise_or.reduce(xi, 1), np.bitwise_xor.reduce(xi, 0), xi.max(1), xu.max(1),
            xu.min(1), np.multiply.reduce(xu, 0, dtype=np.uint8)]
    for got, expected in zip(r, want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rank", [0, 1, 2, 3, 4])
def test_reduce_every_dimension_subset(rank: int) -> None:
    dims = (3, 2, 4, 2)[:rank]
    x = np.random.default_rng(rank).integers(-50, 50, dims).astype(np.float32)
    subsets = [s for k in range(rank + 1) for s in itertools.combinations(range(rank), k)]

    def build(b, p):
        # Subsets in reverse order too: `dimensions` is unordered.
        return [b.reduce(p, b.constant(np.float32(0)), add, list(reversed(s))) for s in subsets]

    r = compiled(build, shape(xm.F32, dims))(x)
    for got, s in zip(r, subsets):
        np.testing.assert_array_equal(got, x.sum(axis=s), err_msg=f"dims {s}")


def test_reduce_no_dimension_applies_the_computation_once() -> None:
    x = np.array([[1, 2], [3, 4]], np.int32)

    def build(b, p):
        ten = b.constant(np.int32(10))
        return [b.reduce(p, ten, add, []), b.reduce(p, ten, add, [1]),
                b.reduce(p, b.constant(np.int32(0)), lambda a, v: a - v, [])]

    same, rows, negated = compiled(build, shape(xm.S32, (2, 2)))(x)
    assert same.tolist() == [[11, 12], [13, 14]]  # f(init, x)
    assert rows.tolist() == [13, 17]  # init enters each output element once
    assert negated.tolist() == [[-1, -2], [-3, -4]]  # acc first, then the element


def test_reduce_zero_size_dimensions_give_init() -> None:
    def build(b, p):
        init = b.constant(np.float32(7))
        return [b.reduce(p, init, add, [0]), b.reduce(p, init, add, [1]),
                b.reduce(p, init, add, [0, 1])]

    r = compiled(build, shape(xm.F32, (0, 3)))(np.zeros((0, 3), np.float32))
    assert r[0].tolist() == [7, 7, 7]
    assert r[1].shape == (0,)
    assert r[2] == 7


def test_reduce_long_rows_split_into_lanes() -> None:
    # Trailing reduced blocks of 64+ elements take the vectorized (lane-split) path;
    # other computations and the init value still fold in once.
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, (3, 4, 32)).astype(np.int32)
    f = rng.standard_normal((5, 256)).astype(np.float32)
    f[2, 17] = np.nan

    def build(b, p, q):
        one = b.constant(np.int32(1))
        return [b.reduce(p, one, add, [1, 2]), b.reduce(p, one, add, [2]),
                b.reduce(p, b.constant(np.int32(0)), lambda a, v: a + v * v, [2]),
                b.reduce(q, b.constant(np.float32(-np.inf)), maximum, [1]),
                b.reduce(q, b.constant(np.float32(0)), add, [0, 1])]

    r = compiled(build, shape(xm.S32, x.shape), shape(xm.F32, f.shape))(x, f)
    np.testing.assert_array_equal(r[0], x.sum(axis=(1, 2)) + 1)
    np.testing.assert_array_equal(r[1], x.sum(axis=2) + 1)
    np.testing.assert_array_equal(r[2], (x * x).sum(axis=2))
    np.testing.assert_array_equal(r[3], f.max(axis=1))  # NaN propagates (row 2)
    assert np.isnan(r[4])


def test_reduce_float_sum_within_tolerance() -> None:
    x = np.random.default_rng(4).standard_normal((7, 300)).astype(np.float32)
    r = compiled(lambda b, p: b.reduce(p, b.constant(np.float32(0)), add, [1]),
                 shape(xm.F32, x.shape))(x)
    np.testing.assert_allclose(r, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_reduce_computation_forms() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    add_comp = scalar_computation("add_f32", xm.F32, add)

    def max_pair(m, i, v, j):
        b = m.builder
        return b.tuple([b.max(m, v), b.max(i, j)])  # a tuple root works like a list

    sub = xm.XlaBuilder("max_pair")
    params = [sub.parameter(n, shape(t)) for n, t in enumerate((xm.F32, xm.S32, xm.F32, xm.S32))]
    pair_comp = sub.build(max_pair(*params))

    def build(b, p):
        idx = b.constant(np.arange(12, dtype=np.int32).reshape(3, 4))
        inits = [b.constant(np.float32(-np.inf)), b.constant(np.int32(-1))]
        return [b.reduce(p, b.constant(np.float32(0)), add_comp, [0]),
                b.reduce(p, b.constant(np.float32(0)), add_comp, [1]),  # reused computation
                b.reduce([p, idx], inits, pair_comp, [1]),
                b.reduce(p, 0.0, add, [0])]  # a Python scalar init takes the operand's type

    r = compiled(build, shape(xm.F32, (3, 4)))(x)
    np.testing.assert_array_equal(r[0], x.sum(0))
    np.testing.assert_array_equal(r[1], x.sum(1))
    np.testing.assert_array_equal(r[2][0], x.max(1))
    np.testing.assert_array_equal(r[2][1], [3, 7, 11])
    np.testing.assert_array_equal(r[3], x.sum(0))


def test_module_text_round_trips() -> None:
    # All three ops, saved as text and compiled again (verified by the same shape rules).
    b = xm.XlaBuilder("rt")
    p = b.parameter(0, shape(xm.F32, (2, 3)))
    source = b.parameter(1, shape(xm.F32, (2, 1)))
    idx = b.constant(np.zeros((2, 3), np.int32))
    values = b.get_tuple_element(b.reduce(
        [p, idx], [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))],
        argmax_computation, [1]), 0)
    window = b.reduce_window(p, b.constant(np.float32(0)), add, [2, 2], [1, 2],
                             padding=[(1, 0), (0, 1)])
    scattered = b.select_and_scatter(p, ge, [1, 3], [1, 3], "VALID", source,
                                     b.constant(np.float32(0)), add)
    text = b.build([values, window, scattered]).as_mlir_text()
    x = np.array([[1, 5, 2], [7, 0, 7]], np.float32)
    got = xm.compile_mlir(text)(x, np.array([[5], [7]], np.float32))
    assert got[0].tolist() == [5, 7]
    np.testing.assert_array_equal(got[1], ref_reduce_window(x, np.float32(0), operator.add, [2, 2],
                                                            [1, 2], padding=[(1, 0), (0, 1)]))
    assert got[2].tolist() == [[0, 5, 0], [7, 0, 0]]
    # Parsed text is verified with the same shape rule: a dimension out of range is caught.
    bad = text.replace("dimensions = array<i64: 1>", "dimensions = array<i64: 2>")
    with pytest.raises(xm.CompileError, match="out of range"):
        xm.compile_mlir(bad)


def test_reduce_then_keepdims_broadcast() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def build(b, p):
        total = b.reduce(p, b.constant(np.float32(0)), add, [1])
        return b.broadcast_in_dim(total, [2, 1], [0])

    assert compiled(build, shape(xm.F32, (2, 3)))(x).tolist() == [[3], [12]]


# -- reduce: IR ----------------------------------------------------------------------------------

def test_reduce_add_ir() -> None:
    b = xm.XlaBuilder("sum_rows")
    p = b.parameter(0, shape(xm.F32, (2, 3)))
    b.reduce(p, b.constant(np.float32(0)), add, [1])
    exe = xm.compile(b.build())
    check_ir(exe.stages["hlo"], """
        CHECK: "xhlo.reduce"(%arg0, %0) {computation = @[[COMP:[a-z_]+]], dimensions = array<i64: 1>
        CHECK-SAME: -> tensor<2xf32>
        CHECK: func.func private @[[COMP]](%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32>
        CHECK-NEXT: "xhlo.add"(%arg0, %arg1)
    """)
    check_ir(exe.stages["linalg"], """
        CHECK: linalg.fill
        CHECK: linalg.reduce { arith.addf } ins(%{{.*}} : tensor<2x3xf32>)
        CHECK-SAME: outs(%{{.*}} : tensor<2xf32>) dimensions = [1]
        CHECK-NOT: xhlo.
    """)


def test_reduce_argmax_ir() -> None:
    b = xm.XlaBuilder("argmax")
    p = b.parameter(0, shape(xm.F32, (2, 5)))
    idx = b.constant(np.zeros((2, 5), np.int32))
    b.reduce([p, idx], [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))],
             argmax_computation, [1])
    check_ir(xm.compile(b.build()).stages["linalg"], """
        CHECK: %{{.*}}:2 = linalg.reduce ins(%{{.*}}, %{{.*}} : tensor<2x5xf32>, tensor<2x5xi32>)
        CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xi32>) dimensions = [1]
        CHECK: (%[[V:.*]]: f32, %[[J:.*]]: i32, %[[M:.*]]: f32, %[[I:.*]]: i32)
        CHECK-DAG: arith.cmpf ogt, %[[V]], %[[M]] : f32
        CHECK-DAG: arith.cmpf oeq, %[[V]], %[[M]] : f32
        CHECK-DAG: arith.cmpi slt, %[[J]], %[[I]] : i32
        CHECK: %[[TAKE:.*]] = arith.ori
        CHECK: arith.select %[[TAKE]], %[[V]], %[[M]] : f32
        CHECK: arith.select %[[TAKE]], %[[J]], %[[I]] : i32
        CHECK: linalg.yield
    """)


# -- reduce: shape errors ------------------------------------------------------------------------

def test_reduce_shape_errors(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(xm.F32, (2, 3)))
    y = b.parameter(1, shape(xm.S32, (3, 2)))
    z = b.constant(np.float32(0))
    iz = b.constant(np.int32(0))
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: b.reduce([x, x], [z], add, [0]), "one init value per operand"),
        (lambda: b.reduce([], [], add, [0]), "at least one operand"),
        (lambda: b.reduce([x, y], [z, iz], lambda a, i, v, j: [a, i], [0]), "same dimensions"),
        (lambda: b.reduce(x, b.constant(np.zeros(2, np.float32)), add, [0]), "must be a scalar"),
        (lambda: b.reduce(x, iz, add, [0]), "element type"),
        (lambda: b.reduce(x, z, add, [2]), "out of range"),
        (lambda: b.reduce(x, z, add, [-1]), "out of range"),
        (lambda: b.reduce(x, z, add, [1, 1]), "repeat"),
        (lambda: b.reduce(x, z, add, [0.5]), "sequence of ints"),
        (lambda: b.reduce(x, z, add, 0), "sequence of ints"),
        (lambda: b.reduce(x, z, lambda a, v, w: a, [0]), "must take 2 parameters"),
        (lambda: b.reduce(x, z, scalar_computation("three", xm.F32, lambda *p: p[0], 3), [0]),
         "takes"),
        (lambda: b.reduce(x, z, scalar_computation("s32", xm.S32, add), [0]), "takes"),
        (lambda: b.reduce([x, x], [z, z], add, [0]), "must take 4 parameters"),
        (lambda: b.reduce([x, x], [z, z], lambda a, c, v, w: a + v, [0]), "tuple of 2"),
        (lambda: b.reduce(x, z, lambda a, v: [a, v], [0]), "tuple of 2"),
        (lambda: b.reduce(x, z, lambda a, v: a.builder.convert_element_type(a, xm.F64), [0]),
         "differs from its result"),
        (lambda: b.reduce(x, z, lambda a, v: a.builder.broadcast_in_dim(a, [2], []), [0]),
         "scalars"),
        (lambda: b.reduce(x, z, lambda a, v: a + z, [0]), "closed"),  # an outer op inside
        (lambda: b.reduce(x, z, 5, [0]), "callable"),
        (lambda: b.reduce(b.tuple([x]), z, add, [0]), "arrays"),
    ]
    for build, message in cases:
        with pytest.raises(xm.ShapeError, match=message):
            build()


def test_reduce_of_an_other_builders_operand_is_rejected(b: xm.XlaBuilder) -> None:
    other = xm.XlaBuilder("other")
    x = other.parameter(0, shape(xm.F32, (2,)))
    with pytest.raises(xm.ShapeError, match="belongs to builder"):
        b.reduce(x, b.constant(np.float32(0)), add, [0])


def test_reduce_of_a_non_scalar_computation_fails_clearly() -> None:
    # A computation the lowering cannot turn into scalar code is a CompileError naming it.
    def nested(a, v):
        sb = a.builder
        row = sb.broadcast_in_dim(v, [3], [])
        return a + sb.reduce(row, sb.constant(np.float32(0)), add, [0])

    b = xm.XlaBuilder("nested")
    p = b.parameter(0, shape(xm.F32, (2, 3)))
    b.reduce(p, b.constant(np.float32(0)), nested, [1])
    with pytest.raises(xm.CompileError) as info:
        xm.compile(b.build())
    assert "not a scalar computation" in str(info.value.__cause__)


# -- pred ----------------------------------------------------------------------------------------

def test_reduce_pred_and_or() -> None:
    x = np.array([[1, 1, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]], bool)
    long = np.ones((2, 64), bool)
    long[1, 40] = False

    def build(b, p, q):
        def and_(a, v):
            return a.builder.and_(a, v)

        def or_(a, v):
            return a.builder.or_(a, v)

        return [b.reduce(p, b.constant(True), and_, [1]),
                b.reduce(p, b.constant(False), or_, [1]),
                b.reduce(p, b.constant(False), or_, [0, 1]),
                b.reduce(p, b.constant(True), and_, [0]),
                b.reduce_window(p, b.constant(False), or_, [1, 2], [1, 2]),
                b.reduce(q, b.constant(True), and_, [1]),  # the lane-split path
                b.reduce(p, b.constant(False), lambda a, v: a + v, [1])]  # pred add is or

    r = compiled(build, shape(xm.PRED, x.shape), shape(xm.PRED, long.shape))(x, long)
    assert r[0].tolist() == [True, False, False]
    assert r[1].tolist() == [True, True, False]
    assert r[2].shape == () and r[2] == np.True_
    assert r[3].tolist() == [False, False, False, False]
    assert r[4].tolist() == [[True, True], [True, True], [False, False]]
    assert r[5].tolist() == [True, False]
    assert r[6].tolist() == [True, True, False]
    assert r[0].dtype == np.bool_


# -- reduce_window -------------------------------------------------------------------------------

def test_reduce_window_seed_examples() -> None:
    # Seed 001 example 1: max over 2x3 windows, stride 2x3, VALID, init MinValue(F32) = -inf (D7).
    m = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    v = np.array([10000, 1000, 100, 10, 1], np.float32)
    d = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    fmax = np.float32(np.finfo(np.float32).max)
    max_comp = scalar_computation("max", xm.F32, maximum)

    def build(b, m_, v_, d_):
        big = b.constant(fmax)
        return [b.reduce_window(m_, b.constant(np.float32(-np.inf)), max_comp, [2, 3], [2, 3],
                                padding="VALID"),
                b.reduce_window(v_, big, minimum, [3], [2], padding="VALID"),
                b.reduce_window(v_, big, minimum, [3], [2], padding="SAME"),
                # Example 2 (StableHLO): base dilation, window dilation, padding, init 0.
                b.reduce_window(d_, b.constant(np.int32(0)), add, window_dimensions=[2, 1],
                                window_strides=[4, 1], base_dilations=[2, 1],
                                window_dilations=[3, 1], padding=[(2, 1), (0, 0)])]

    r = compiled(build, shape(xm.F32, (4, 6)), shape(xm.F32, (5,)), shape(xm.S32, (3, 2)))(m, v, d)
    np.testing.assert_array_equal(r[0], m.reshape(2, 2, 2, 3).max(axis=(1, 3)))
    assert r[1].tolist() == [100, 1]
    assert r[2].tolist() == [1000, 10, 1]
    assert r[3].tolist() == [[0, 0], [3, 4]]


WINDOW_CASES = [  # (window, strides, base dilations, window dilations, padding) on a 5x6 operand
    ([2, 2], None, None, None, None),
    ([1, 1], None, None, None, None),
    ([3, 2], [2, 1], None, None, None),
    ([2, 3], [1, 2], None, None, [(1, 0), (2, 2)]),
    ([2, 2], [1, 1], [2, 1], None, None),
    ([2, 2], [2, 3], [1, 3], [2, 1], [(0, 3), (1, 1)]),
    ([3, 3], [1, 1], None, [2, 2], [(1, 1), (0, 0)]),
    ([5, 6], None, None, None, None),
    ([6, 1], None, None, None, None),  # larger than the operand: no window fits
    ([1, 4], [3, 1], [3, 2], [1, 2], [(4, 4), (1, 0)]),
]


@pytest.mark.parametrize("op_name", ["add", "max"])
def test_reduce_window_against_reference(op_name: str) -> None:
    x = np.random.default_rng(6).integers(-20, 20, (5, 6)).astype(np.float32)
    fn, init = (add, 0.0) if op_name == "add" else (maximum, -np.inf)
    np_fn = operator.add if op_name == "add" else max

    def build(b, p):
        return [b.reduce_window(p, b.constant(np.float32(init)), fn, *case) for case in WINDOW_CASES]

    r = compiled(build, shape(xm.F32, x.shape))(x)
    for got, case in zip(r, WINDOW_CASES):
        want = ref_reduce_window(x, np.float32(init), np_fn, *case)
        np.testing.assert_array_equal(got, want, err_msg=str(case))


def test_reduce_window_same_padding_shapes() -> None:
    # SAME: output size ceil(n / stride); the odd padding cell goes to the high side.
    x = np.arange(1, 8, dtype=np.int32)

    def build(b, p):
        z = b.constant(np.int32(0))
        return [b.reduce_window(p, z, add, [2], [1], padding="SAME"),
                b.reduce_window(p, z, add, [3], [3], padding="SAME"),
                b.reduce_window(p, z, add, [4], [2], padding="same"),
                b.reduce_window(p, z, add, [2], [1], window_dilations=[3], padding="SAME"),
                b.reduce_window(p, z, add, [2], [2], base_dilations=[2], padding="SAME")]

    r = compiled(build, shape(xm.S32, (7,)))(x)
    assert r[0].tolist() == (x + np.append(x[1:], 0)).tolist()  # pad (0, 1)
    assert r[1].tolist() == [3, 12, 13]  # pad (1, 1): windows [0 1 2] [3 4 5] [6 7 0]
    assert r[2].tolist() == ref_reduce_window(x, 0, operator.add, [4], [2],
                                              padding=[(1, 2)]).tolist()
    assert r[3].tolist() == ref_reduce_window(x, 0, operator.add, [2], [1], wdil=[3],
                                              padding=[(1, 2)]).tolist()
    assert len(r[4]) == 7  # dilated extent 13, stride 2
    assert r[4].tolist() == ref_reduce_window(x, 0, operator.add, [2], [2], base=[2],
                                              padding=[(0, 1)]).tolist()


def test_reduce_window_ranks_types_and_empty() -> None:
    rng = np.random.default_rng(7)
    x4 = rng.integers(0, 9, (2, 4, 4, 3)).astype(np.float32)
    s0 = np.array(5, np.int32)
    u = rng.integers(0, 256, (6,)).astype(np.uint8)
    h = rng.integers(-8, 8, (4, 4)).astype(np.float16)
    e = np.zeros((0, 3), np.float32)
    c = np.array([1 + 2j, 3 - 1j, -2 + 0.5j, 4j], np.complex64)

    def build(b, p4, p0, pu, ph, pe, pc):
        return [b.reduce_window(p4, b.constant(np.float32(-np.inf)), maximum, [1, 2, 2, 1],
                                [1, 2, 2, 1]),  # NHWC max pool
                b.reduce_window(p0, b.constant(np.int32(1)), add, []),
                b.reduce_window(pu, b.constant(np.uint8(0)), maximum, [3], [1]),
                b.reduce_window(ph, b.constant(np.float16(0)), add, [2, 2], [2, 2]),
                b.reduce_window(pe, b.constant(np.float32(3)), add, [1, 2], padding="SAME"),
                b.reduce_window(pc, const(b, 0, np.complex64), add, [2])]

    r = compiled(build, shape(xm.F32, x4.shape), shape(xm.S32), shape(xm.U8, (6,)),
                 shape(xm.F16, (4, 4)), shape(xm.F32, (0, 3)), shape(xm.C64, (4,)))(x4, s0, u, h, e, c)
    np.testing.assert_array_equal(r[0], x4.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4)))
    assert r[1].shape == () and r[1] == 6  # f(init, x)
    np.testing.assert_array_equal(r[2], [max(u[i:i + 3]) for i in range(4)])
    np.testing.assert_array_equal(r[3], h.reshape(2, 2, 2, 2).sum(axis=(1, 3)))
    assert r[4].shape == (0, 3)
    np.testing.assert_allclose(r[5], c[:-1] + c[1:])


def test_reduce_window_variadic_argmax() -> None:
    x = np.array([3, 1, 4, 4, 5, 9, 2, 6, 5, 3], np.float32)

    def build(b, p):
        idx = b.constant(np.arange(10, dtype=np.int32))
        inits = [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))]
        return b.reduce_window([p, idx], inits, argmax_computation, [3], [2], padding="SAME")

    values, indices = compiled(build, shape(xm.F32, (10,)))(x)
    # SAME, window 3, stride 2 on 10 elements: 5 windows, padding (0, 1).
    assert values.tolist() == [4, 5, 9, 6, 5]
    assert indices.tolist() == [2, 4, 5, 7, 8]


def cumulative(b: xm.XlaBuilder, x: xm.XlaOp | list[xm.XlaOp], init: xm.XlaOp | list[xm.XlaOp],
               computation: Callable[..., object], axis: int) -> xm.XlaOp:
    """XLA's cumulative-op idiom: a window of the whole axis, padding (n - 1, 0)."""
    dims = (x[0] if isinstance(x, list) else x).shape.dimensions
    window = [dims[d] if d == axis else 1 for d in range(len(dims))]
    padding = [(dims[d] - 1, 0) if d == axis else (0, 0) for d in range(len(dims))]
    return b.reduce_window(x, init, computation, window, [1] * len(dims), padding=padding)


SCAN_CASES = [  # (dtype, op, numpy accumulate, init)
    (np.float32, "add", np.add, 0.0), (np.float32, "max", np.fmax, -np.inf),
    (np.float64, "add", np.add, -0.0), (np.float32, "mul", np.multiply, 1.0),
    (np.int32, "add", np.add, 0), (np.uint8, "add", np.add, 0), (np.int64, "min", np.minimum, 2**63 - 1),
    (np.int8, "mul", np.multiply, 1),
]


@pytest.mark.parametrize("dims,axis", [((2,), 0), ((17,), 0), ((1000,), 0), ((3, 17), 1),
                                       ((3, 17), 0), ((2, 5, 16), 1), ((4, 3, 2), 0),
                                       ((2, 3, 33), 2)])
def test_reduce_window_prefix_scan(dims: tuple[int, ...], axis: int) -> None:
    # The scan computes each window's in-order fold exactly (no reassociation): float
    # sums equal numpy's sequential accumulate bit for bit; integers wrap.
    rng = np.random.default_rng(len(dims) * 10 + axis)
    ops = {"add": add, "max": lambda a, x: a.builder.max(a, x), "min": lambda a, x: a.builder.min(a, x),
           "mul": lambda a, x: a * x}
    arrays = []
    for dtype, _, _, _ in SCAN_CASES:
        if np.dtype(dtype).kind == "f":
            x = rng.standard_normal(dims).astype(dtype) * 1e3
        else:
            x = rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 4, dims).astype(dtype)
        arrays.append(x)
    mul_case = [i for i, c in enumerate(SCAN_CASES) if c[1] == "mul" and c[0] == np.float32][0]
    arrays[mul_case] = (1 + arrays[mul_case] / 1e4).astype(np.float32)  # no overflow

    def build(b, *ps):
        return [cumulative(b, p, b.constant(np.asarray(init, dtype)[()]), ops[op], axis)
                for p, (dtype, op, _, init) in zip(ps, SCAN_CASES)]

    got = compiled(build, *(shape(xm.type_of(x.dtype), dims) for x in arrays))(*arrays)
    for r, x, (dtype, op, ufunc, _) in zip(got, arrays, SCAN_CASES):
        want = ufunc.accumulate(x, axis=axis, dtype=dtype)
        assert r.dtype == want.dtype
        np.testing.assert_array_equal(r, want, err_msg=f"{np.dtype(dtype)} {op}")


def test_reduce_window_prefix_scan_other_inits_and_variadic() -> None:
    # An init that is not an identity (1 for add: f(init, init) != init) keeps the window
    # loops: output i adds the init once per padding cell. A variadic running argmax,
    # and bf16, NaN and -0.0 sums are exact too.
    x = np.array([[3, 1, 4, 4, 5, 9, 2, 6, 5, 3]], np.float32)
    h = np.array([1.5, -0.0, np.nan, 2.25, -1], ml_dtypes.bfloat16)
    z = np.array([-0.0, -0.0, 0.0, -0.0], np.float32)

    def build(b, p, hp, zp):
        idx = b.constant(np.arange(10, dtype=np.int32).reshape(1, 10))
        inits = [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))]
        return [cumulative(b, p, b.constant(np.float32(1)), add, 1),
                cumulative(b, [p, idx], inits, argmax_computation, 1),
                cumulative(b, hp, b.constant(np.zeros((), ml_dtypes.bfloat16)), add, 0),
                cumulative(b, zp, b.constant(np.float32(-0.0)), add, 0),
                cumulative(b, zp, b.constant(np.float32(0.0)), add, 0)]

    ones, (values, indices), hs, neg, pos = compiled(
        build, shape(xm.F32, (1, 10)), shape(xm.BF16, (5,)), shape(xm.F32, (4,)))(x, h, z)
    np.testing.assert_array_equal(ones, np.cumsum(x, axis=1) + np.arange(10, 0, -1))
    assert values.tolist() == [[3, 3, 4, 4, 5, 9, 9, 9, 9, 9]]
    assert indices.tolist() == [[0, 0, 2, 2, 4, 5, 5, 5, 5, 5]]
    assert hs.astype(np.float32)[:2].tolist() == [1.5, 1.5] and np.isnan(hs.astype(np.float32)[2:]).all()
    assert np.signbit(neg).tolist() == [True, True, False, False]
    assert np.signbit(pos).tolist() == [False, False, False, False]


def test_reduce_window_prefix_scan_init_parameter() -> None:
    # With the init a parameter, f(init, init) == init is decided at run time: 0 scans,
    # 5 takes the window loops (5 added once per padding cell as well).
    x = np.arange(1, 41, dtype=np.int32).reshape(2, 20)
    exe = compiled(lambda b, p, i: cumulative(b, p, i, add, 1), shape(xm.S32, (2, 20)), shape(xm.S32))
    np.testing.assert_array_equal(exe(x, np.int32(0)), np.cumsum(x, axis=1))
    np.testing.assert_array_equal(exe(x, np.int32(5)), np.cumsum(x, axis=1) + 5 * np.arange(20, 0, -1))


def test_reduce_window_prefix_scan_ir() -> None:
    # The scan: one forall iteration per leading index, sequential along the axis, an
    # inner loop over the trailing elements. The check f(init, init) == init folds away
    # for a constant init; with a parameter it stays, the window loops in its else.
    b = xm.XlaBuilder("cumsum")
    p = b.parameter(0, shape(xm.F32, (4, 100, 8)))
    cumulative(b, p, b.constant(np.float32(0)), add, 1)
    check_ir(xm.compile(b.build()).stages["linalg"], """
        CHECK-NOT: scf.if
        CHECK: scf.forall (%[[P:.*]]) in (4)
        CHECK: scf.for %{{.*}} = %c0 to %c8
        CHECK: scf.for %[[I:.*]] = %c1 to %c100
        CHECK: scf.for %[[Q:.*]] = %c0 to %c8
        CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[Q]]] : tensor<100x8xf32>
        CHECK: arith.addf
        CHECK: tensor.insert %{{.*}}[%[[I]], %[[Q]]] : tensor<100x8xf32>
        CHECK-NOT: linalg.generic
    """)
    b = xm.XlaBuilder("cumsum_any_init")
    p = b.parameter(0, shape(xm.S32, (100,)))
    cumulative(b, p, b.parameter(1, shape(xm.S32, ())), add, 0)
    check_ir(xm.compile(b.build()).stages["linalg"], """
        CHECK: %[[SAME:.*]] = arith.cmpi eq
        CHECK: scf.if %[[SAME]] -> (tensor<100xi32>)
        CHECK-NOT: scf.forall
        CHECK: scf.for %{{.*}} = %c1 to %c100
        CHECK: } else {
        CHECK: linalg.generic
        CHECK-SAME: "reduction"
    """)


def test_reduce_window_ir() -> None:
    b = xm.XlaBuilder("sum_pool")
    p = b.parameter(0, shape(xm.F32, (1, 4, 4, 2)))
    b.reduce_window(p, b.constant(np.float32(0)), add, [1, 2, 2, 1], [1, 2, 2, 1])
    exe = xm.compile(b.build())
    check_ir(exe.stages["hlo"], """
        CHECK: "xhlo.reduce_window"
        CHECK-SAME: base_dilations = array<i64: 1, 1, 1, 1>
        CHECK-SAME: padding = array<i64: 0, 0, 0, 0, 0, 0, 0, 0>
        CHECK-SAME: window_dimensions = array<i64: 1, 2, 2, 1>
        CHECK-SAME: window_strides = array<i64: 1, 2, 2, 1>
    """)
    check_ir(exe.stages["linalg"], """
        CHECK: #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 * 2 + d3, d2 * 2 + d4, d5)>
        CHECK: linalg.generic
        CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction",
        CHECK-SAME: "parallel"]
        CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: i8, %[[ACC:.*]]: f32):
        CHECK-NEXT: arith.addf %[[ACC]], %[[X]] : f32
    """)


def test_reduce_window_shape_errors(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(xm.F32, (4, 4)))
    y = b.parameter(1, shape(xm.F32, (4, 3)))
    z = b.constant(np.float32(0))
    rw = b.reduce_window
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: rw(x, z, add, [2]), "window_dimensions has 1 entries but the operand has rank 2"),
        (lambda: rw(x, z, add, [2, 2], [1]), "window_strides has 1 entries"),
        (lambda: rw(x, z, add, [2, 2], [1, 0]), "stride 1 must be positive"),
        (lambda: rw(x, z, add, [2, 2], [-1, 1]), "stride 0 must be positive"),
        (lambda: rw(x, z, add, [2, 0]), "window dimension 1 must be positive"),
        (lambda: rw(x, z, add, [2, 2], base_dilations=[0, 1]), "base dilation"),
        (lambda: rw(x, z, add, [2, 2], window_dilations=[1, 0]), "window dilation"),
        (lambda: rw(x, z, add, [2, 2], base_dilations=[1]), "base_dilations has 1 entries"),
        (lambda: rw(x, z, add, [2, 2], padding=[(0, 0)]), "padding has 1 entries"),
        (lambda: rw(x, z, add, [2, 2], padding=[(0, -1), (0, 0)]), "must not be negative"),
        (lambda: rw(x, z, add, [2, 2], padding=[(0, 0, 0), (0, 0)]), "pairs"),
        (lambda: rw(x, z, add, [2, 2], padding=[1, 1]), "sequence of ints"),
        (lambda: rw(x, z, add, [2, 2], padding="FULL"), "'SAME', 'VALID'"),
        (lambda: rw(x, z, add, [2, 2], padding=3), "'SAME', 'VALID'"),
        (lambda: rw(x, z, add, "22"), "sequence of ints"),
        (lambda: rw([x, y], [z, z], lambda a, c, v, w: [a, c], [1, 1]), "same dimensions"),
        (lambda: rw(x, b.constant(np.int32(0)), add, [2, 2]), "element type"),
        (lambda: rw(x, z, lambda a: a, [2, 2]), "must take 2 parameters"),
        (lambda: rw(x, z, lambda a, v: a.builder.lt(a, v), [2, 2]), "differs from its result"),
        (lambda: rw([x], [z, z], add, [2, 2]), "one init value per operand"),
    ]
    for build, message in cases:
        with pytest.raises(xm.ShapeError, match=message):
            build()


# -- select_and_scatter --------------------------------------------------------------------------

def ge(a: xm.XlaOp, c: xm.XlaOp) -> xm.XlaOp:
    return a.builder.ge(a, c)


def test_select_and_scatter_seed_overlap_figure() -> None:
    # Seed 001/003 figure (2): the 9 is the maximum of both top windows (3x3, stride 2), so
    # it receives 2 + 6 = 8; the bottom windows send 3 to the 7 and 1 to the 10.
    operand = np.array([[7, 2, 5, 3, 8],
                        [3, 8, 9, 3, 4],
                        [1, 5, 7, 5, 6],
                        [0, 6, 2, 10, 2],
                        [4, 1, 3, 2, 7]], np.float32)
    source = np.array([[2, 6], [3, 1]], np.float32)

    def build(b, op_, src):
        return b.select_and_scatter(op_, ge, [3, 3], [2, 2], "VALID", src,
                                    b.constant(np.float32(0)), add)

    out = compiled(build, shape(xm.F32, (5, 5)), shape(xm.F32, (2, 2)))(operand, source)
    assert out[1, 2] == 8
    expected = np.zeros((5, 5), np.float32)
    expected[1, 2], expected[2, 2], expected[3, 3] = 8, 3, 1
    np.testing.assert_array_equal(out, expected)


def test_select_and_scatter_stablehlo_example() -> None:
    # StableHLO spec example: window [3, 1], strides [2, 1], padding [[0, 1], [0, 0]], GE, add.
    operand = np.array([[1, 5], [2, 5], [3, 6], [4, 4]], np.int64)
    source = np.array([[5, 6], [7, 8]], np.int64)
    ge_comp = xm.XlaBuilder("ge")
    ge_comp.ge(ge_comp.parameter(0, shape(xm.S64)), ge_comp.parameter(1, shape(xm.S64)))
    add_comp = scalar_computation("add", xm.S64, add)

    def build(b, op_, src):
        return b.select_and_scatter(op_, ge_comp.build(), [3, 1], [2, 1], [(0, 1), (0, 0)], src,
                                    b.constant(np.int64(0)), add_comp)

    out = compiled(build, shape(xm.S64, (4, 2)), shape(xm.S64, (2, 2)))(operand, source)
    assert out.tolist() == [[0, 0], [0, 0], [5, 14], [7, 0]]


SAS_CASES = [  # (window, strides, padding) on a 5x6 operand
    ([2, 2], [2, 2], "VALID"),
    ([3, 3], [1, 1], "VALID"),
    ([3, 2], [2, 1], "SAME"),
    ([2, 3], [1, 2], [(1, 2), (0, 1)]),
    ([1, 1], [1, 1], "VALID"),
    ([3, 3], [3, 3], [(2, 2), (2, 2)]),  # windows of padding only scatter nothing
]


def same_padding(dims: Sequence[int], window: Sequence[int],
                 strides: Sequence[int]) -> list[tuple[int, int]]:
    """XLA's MakePadding for SAME: output ceil(n / stride), the odd cell on the high side."""
    pads = []
    for n, w, s in zip(dims, window, strides):
        total = max(0, (-(-n // s) - 1) * s + w - n)
        pads.append((total // 2, total - total // 2))
    return pads


def test_select_and_scatter_against_reference() -> None:
    rng = np.random.default_rng(8)
    operand = rng.integers(0, 4, (5, 6)).astype(np.float32)  # many ties: GE keeps the first
    cases = []
    for window, strides, padding in SAS_CASES:
        if padding == "VALID":
            pads = [(0, 0)] * 2
        elif padding == "SAME":
            pads = same_padding(operand.shape, window, strides)
        else:
            pads = padding
        out_dims = ref_reduce_window(operand, 0, operator.add, window, strides, padding=pads).shape
        cases.append((window, strides, padding, pads, rng.integers(1, 10, out_dims).astype(np.float32)))

    def build(b, op_, *srcs):
        return [b.select_and_scatter(op_, ge, w, s, pad, src, b.constant(np.float32(0.5)), add)
                for (w, s, pad, _, _), src in zip(cases, srcs)]

    exe = compiled(build, shape(xm.F32, (5, 6)), *(shape(xm.F32, c[4].shape) for c in cases))
    for got, (window, strides, padding, pads, src) in zip(exe(operand, *(c[4] for c in cases)), cases):
        want = ref_select_and_scatter(operand, src, np.float32(0.5), operator.ge, operator.add,
                                      window, strides, pads)
        np.testing.assert_array_equal(got, want, err_msg=str((window, strides, padding)))


def test_select_and_scatter_min_select_rank_and_types() -> None:
    # LE selects the first minimum; int32 with a max scatter; rank 1 and rank 3; empty source.
    x = np.array([4, 2, 2, 7, 1, 1, 9], np.int32)
    src = np.array([10, 20, 30], np.int32)
    cube = np.random.default_rng(9).integers(0, 5, (2, 4, 4)).astype(np.float64)
    csrc = np.ones((2, 2, 2), np.float64)

    def build(b, p, s, c, cs):
        le = lambda a, d: a.builder.le(a, d)  # noqa: E731
        return [b.select_and_scatter(p, le, [3], [2], "VALID", s, b.constant(np.int32(-1)), maximum),
                b.select_and_scatter(c, ge, [1, 2, 2], [1, 2, 2], "VALID", cs,
                                     b.constant(np.float64(0)), add)]

    r = compiled(build, shape(xm.S32, (7,)), shape(xm.S32, (3,)), shape(xm.F64, cube.shape),
                 shape(xm.F64, csrc.shape))(x, src, cube, csrc)
    # windows [4 2 2] [2 7 1] [1 1 9]: minima at 1, 4, 4 -> max(-1, 10), max(max(-1, 20), 30)
    assert r[0].tolist() == [-1, 10, -1, -1, 30, -1, -1]
    np.testing.assert_array_equal(r[1], ref_select_and_scatter(
        cube, csrc, 0.0, operator.ge, operator.add, [1, 2, 2], [1, 2, 2], [(0, 0)] * 3))

    empty = compiled(lambda b, p, s: b.select_and_scatter(p, ge, [3], [1], "VALID", s,
                                                          b.constant(np.float32(2)), add),
                     shape(xm.F32, (2,)), shape(xm.F32, (0,)))
    assert empty(np.zeros(2, np.float32), np.zeros(0, np.float32)).tolist() == [2, 2]


def test_select_and_scatter_ir() -> None:
    b = xm.XlaBuilder("pool_grad")
    p = b.parameter(0, shape(xm.F32, (4, 4)))
    s = b.parameter(1, shape(xm.F32, (2, 2)))
    b.select_and_scatter(p, ge, [2, 2], [2, 2], "VALID", s, b.constant(np.float32(0)), add)
    exe = xm.compile(b.build())
    check_ir(exe.stages["hlo"], """
        CHECK: "xhlo.select_and_scatter"(%arg0, %arg1, %0)
        CHECK-SAME: scatter = @[[SCATTER:[a-z_0-9]+]]
        CHECK-SAME: select = @[[SELECT:[a-z_0-9]+]]
        CHECK-DAG: func.func private @[[SELECT]]({{.*}}) -> tensor<i1>
        CHECK-DAG: func.func private @[[SCATTER]]({{.*}}) -> tensor<f32>
    """)
    check_ir(exe.stages["linalg"], """
        CHECK: linalg.generic
        CHECK-SAME: iterator_types = ["parallel", "reduction", "reduction", "parallel"]
        CHECK: arith.cmpf
        CHECK: scf.for
        CHECK: scf.for
        CHECK: scf.if
        CHECK: arith.addf
        CHECK: tensor.insert
    """)


def test_select_and_scatter_shape_errors(b: xm.XlaBuilder) -> None:
    x = b.parameter(0, shape(xm.F32, (4, 4)))
    src = b.parameter(1, shape(xm.F32, (2, 2)))
    isrc = b.parameter(2, shape(xm.S32, (2, 2)))
    z = b.constant(np.float32(0))
    sas = b.select_and_scatter
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: sas(x, ge, [2, 2], [1, 1], "VALID", src, z, add), "source must have the shape"),
        (lambda: sas(x, ge, [2], [2], "VALID", src, z, add), "window_dimensions has 1 entries"),
        (lambda: sas(x, ge, [2, 2], [2, 0], "VALID", src, z, add), "stride 1 must be positive"),
        (lambda: sas(x, ge, [2, 2], [2, 2], [(0, -1), (0, 0)], src, z, add), "negative"),
        (lambda: sas(x, ge, [2, 2], [2, 2], "FULL", src, z, add), "'SAME', 'VALID'"),
        (lambda: sas(x, add, [2, 2], [2, 2], "VALID", src, z, add), "must return pred"),
        (lambda: sas(x, lambda a: a, [2, 2], [2, 2], "VALID", src, z, add), "must take 2"),
        (lambda: sas(x, scalar_computation("ge_s32", xm.S32, ge), [2, 2], [2, 2], "VALID", src,
                     z, add), "takes"),
        (lambda: sas(x, ge, [2, 2], [2, 2], "VALID", src, z, ge), "scatter computation"),
        (lambda: sas(x, ge, [2, 2], [2, 2], "VALID", isrc, z, add), "source"),
        (lambda: sas(x, ge, [2, 2], [2, 2], "VALID", src, b.constant(np.int32(0)), add),
         "init value"),
        (lambda: sas(x, ge, [2, 2], [2, 2], "VALID", src, b.constant(np.zeros(2, np.float32)),
                     add), "must be a scalar"),
        (lambda: sas(x, lambda a, c: a.builder.ge(a, z), [2, 2], [2, 2], "VALID", src, z, add),
         "closed"),
    ]
    for build, message in cases:
        with pytest.raises(xm.ShapeError, match=message):
            build()
