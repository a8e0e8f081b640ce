"""Bounded dynamic shapes (issue #16): set_dimension_size, get_dimension_size of a dynamic
dimension, remove_dynamic_dimension_size, dynamic_reshape, and the ops consuming dynamic
dimensions (checked against numpy on the valid region)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, stage_text
from reference import evaluate

import xlamlir as xm
from xlamlir import Shape, ShapeError
from xlamlir.dialect.ops_dynamic import slice_to_sizes
from xlamlir.runtime.compiler import clear_cache

S32 = Shape.scalar(xm.S32)
BOUND = 10
SIZES = [0, 1, BOUND - 1, BOUND]
DTYPES = [np.float32, np.float64, np.int32, np.uint8, ml_dtypes.bfloat16]


def compile_dynamic(build, *shapes: Shape) -> xm.Executable:
    """Compile `build(b, *params)` with one parameter per shape; the last is the size."""
    b = xm.XlaBuilder("dyn")
    params = [b.parameter(i, s) for i, s in enumerate(shapes)]
    return xm.compile(b.build(build(b, *params)))


def data(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 5, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def close(got: np.ndarray, want: np.ndarray, dtype: type) -> bool:
    if np.issubdtype(dtype, np.integer):
        return got.shape == want.shape and np.array_equal(got, want.astype(dtype))
    tol = 0.1 if dtype is ml_dtypes.bfloat16 else 1e-5
    return got.shape == want.shape and np.allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


# -- the seed's example ------------------------------------------------------------------------


@pytest.mark.parametrize("size, reducer, expected", [
    (5, "add", 15.0), (5, "mul", 120.0), (6, "add", 21.0),
])  # fmt: skip
def test_seed_example(size: int, reducer: str, expected: float) -> None:
    b = xm.XlaBuilder("seed")
    v = b.constant(np.arange(1, 11, dtype=np.float32))
    padded = b.set_dimension_size(v, b.constant(np.int32(size)), 0)
    assert padded.shape == Shape.parse("f32[<=10]")  # the bound stays
    init = np.float32(0 if reducer == "add" else 1)
    b.reduce(padded, init, lambda x, y: getattr(b, reducer)(x, y), [0])
    assert xm.compile(b.build())() == expected


# -- numerics over a dynamic dimension ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_elementwise_then_reduce(dtype: type, size: int) -> None:
    """Padding holds large values: a reduction that saw them would be off."""
    x = data((BOUND, 3), dtype)
    x[size:] = 100 if np.issubdtype(dtype, np.integer) else np.inf

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)
        y = b.add(b.mul(d, d), d)
        return b.reduce(y, np.zeros((), dtype), lambda s, t: b.add(s, t), [0])

    exe = compile_dynamic(build, Shape.array(xm.type_of(np.dtype(dtype)), (BOUND, 3)), S32)
    v = x[:size].astype(np.float64)
    assert close(exe(x, np.int32(size)), (v * v + v).sum(0), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("size", SIZES)
def test_max_reduce_keeps_dynamic_dimension(dtype: type, size: int) -> None:
    x = data((3, BOUND), dtype, 1)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 1)
        init = np.array(np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf, dtype)
        return b.reduce(b.transpose(d, [1, 0]), init, lambda s, t: b.max(s, t), [1])

    exe = compile_dynamic(build, Shape.array(xm.type_of(np.dtype(dtype)), (3, BOUND)), S32)
    assert exe.program_shape()[1].dynamic_dimensions == (True,)
    assert close(exe(x, np.int32(size)), x[:, :size].astype(np.float64).max(0), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("size", SIZES)
def test_dot_over_dynamic_contracting_dimension(dtype: type, size: int) -> None:
    """Both sides are zero beyond the size: inf in the static side's padding stays out."""
    lhs, rhs = data((4, BOUND), dtype, 2), data((BOUND, 2), dtype, 3)
    if not np.issubdtype(dtype, np.integer):
        rhs[size:] = np.inf

    def build(b, x, w, n):
        return b.dot(b.set_dimension_size(x, n, 1), w)

    t = xm.type_of(np.dtype(dtype))
    exe = compile_dynamic(build, Shape.array(t, (4, BOUND)), Shape.array(t, (BOUND, 2)), S32)
    want = lhs[:, :size].astype(np.float64) @ rhs[:size].astype(np.float64)
    assert close(exe(lhs, rhs, np.int32(size)), want, dtype)


@pytest.mark.parametrize("size", SIZES)
def test_dot_keeps_free_and_batch_dimensions_dynamic(size: int) -> None:
    lhs, rhs = data((BOUND, 3), np.float32), data((3, 2), np.float32, 1)

    def build(b, x, w, n):
        return b.dot(b.set_dimension_size(x, n, 0), w)

    exe = compile_dynamic(build, Shape.array(xm.F32, (BOUND, 3)), Shape.array(xm.F32, (3, 2)), S32)
    assert str(exe.program_shape()[1]) == "f32[<=10,2]"
    np.testing.assert_allclose(exe(lhs, rhs, np.int32(size)), lhs[:size] @ rhs, rtol=1e-6)


# -- results, get/remove --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [*SIZES, -3, BOUND + 5])
def test_result_is_sliced_to_the_runtime_size(size: int) -> None:
    x = data((BOUND, 3), np.float32)

    def build(b, p, n):
        return b.neg(b.set_dimension_size(p, n, 0))

    exe = compile_dynamic(build, Shape.array(xm.F32, (BOUND, 3)), S32)
    got = exe(x, np.int32(size))
    clamped = min(max(size, 0), BOUND)  # XLA leaves such a size undefined; it is clamped
    np.testing.assert_array_equal(got, -x[:clamped])
    assert got.flags.c_contiguous


def test_program_shape_shows_the_bound() -> None:
    b = xm.XlaBuilder("dyn")
    p, n = b.parameter(0, Shape.array(xm.F32, (BOUND, 3))), b.parameter(1, S32)
    comp = b.build(b.set_dimension_size(p, n, 1 - 1))
    assert str(comp.program_shape()[1]) == "f32[<=10,3]"
    exe = xm.compile(comp)
    assert str(exe.program_shape()[1]) == "f32[<=10,3]"
    assert "xhlo.set_dimension_size" in comp.as_mlir_text()
    assert 'xhlo.dynamic_result = "f32[<=10,3]"' in comp.as_mlir_text()


def test_two_dynamic_dimensions() -> None:
    x = data((4, 5), np.int32)

    def build(b, p, n, m):
        return b.set_dimension_size(b.set_dimension_size(p, n, 0), m, 1)

    exe = compile_dynamic(build, Shape.array(xm.S32, (4, 5)), S32, S32)
    assert str(exe.program_shape()[1]) == "s32[<=4,<=5]"
    np.testing.assert_array_equal(exe(x, np.int32(3), np.int32(2)), x[:3, :2])


@pytest.mark.parametrize("half", [0, 2, 5])
def test_get_dimension_size_returns_the_runtime_size(half: int) -> None:
    def build(b, p, n):
        d = b.set_dimension_size(p, b.add(n, n), 0)
        return b.tuple([b.get_dimension_size(d, 0), b.get_dimension_size(d, 1)])

    exe = compile_dynamic(build, Shape.array(xm.F32, (BOUND, 3)), S32)
    assert exe(data((BOUND, 3), np.float32), np.int32(half)) == (2 * half, 3)


def test_remove_dynamic_dimension_size_keeps_the_padding() -> None:
    x = data((BOUND, 3), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(b.set_dimension_size(p, n, 0), n, 1)
        once = b.remove_dynamic_dimension_size(d, 0)
        assert str(once.shape) == "f32[10,<=3]"
        return b.remove_dynamic_dimension_size(b.neg(once), 1)

    exe = compile_dynamic(build, Shape.array(xm.F32, (BOUND, 3)), S32)
    assert str(exe.program_shape()[1]) == "f32[10,3]"
    np.testing.assert_array_equal(exe(x, np.int32(2)), -x)


def test_remove_then_reduce_sees_the_padding() -> None:
    def build(b, p, n):
        d = b.remove_dynamic_dimension_size(b.set_dimension_size(p, n, 0), 0)
        return b.reduce(d, np.float32(0), lambda s, t: b.add(s, t), [0])

    exe = compile_dynamic(build, Shape.array(xm.F32, (4,)), S32)
    assert exe(np.float32([1, 2, 3, 4]), np.int32(1)) == 10


# -- shape-changing ops ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 2, 3])
def test_broadcast_transpose_slice_propagate(size: int) -> None:
    x = data((3, 4), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)  # f32[<=3,4]
        t = b.transpose(b.broadcast_in_dim(d, [2, 3, 4], [1, 2]), [2, 0, 1])  # f32[4,2,<=3]
        s = b.slice(t, [1, 0, 0], [3, 2, 3])  # a static dimension sliced
        assert str(s.shape) == "f32[2,2,<=3]"
        return b.convert_element_type(s, xm.F64)

    exe = compile_dynamic(build, Shape.array(xm.F32, (3, 4)), S32)
    want = np.broadcast_to(x[:size], (2, size, 4)).transpose(2, 0, 1)[1:3]
    np.testing.assert_array_equal(exe(x, np.int32(size)), want.astype(np.float64))


@pytest.mark.parametrize("size", [0, 1, 3, 6])
def test_dynamic_reshape(size: int) -> None:
    x = data((6, 4), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)
        r = b.dynamic_reshape(d, [b.mul(n, b.constant(np.int32(2))), b.constant(np.int32(2))],
                              [12, 2], [True, False])
        assert str(r.shape) == "f32[<=12,2]"
        return r

    exe = compile_dynamic(build, Shape.array(xm.F32, (6, 4)), S32)
    np.testing.assert_array_equal(exe(x, np.int32(size)), x[:size].reshape(2 * size, 2))


@pytest.mark.parametrize("dtype", [np.int8, ml_dtypes.bfloat16, np.bool_, np.complex64])
def test_dynamic_reshape_of_a_static_operand(dtype: type) -> None:
    """The padding of the result is zero, here kept by remove_dynamic_dimension_size."""
    x = (np.arange(6) % 3).astype(dtype)

    def build(b, p, n):
        r = b.dynamic_reshape(p, [n, b.constant(np.int32(3))], [4, 3], [True, False])
        return b.remove_dynamic_dimension_size(r, 0)

    exe = compile_dynamic(build, Shape.array(xm.type_of(np.dtype(dtype)), (6,)), S32)
    want = np.zeros((4, 3), dtype)
    want[:2] = x.reshape(2, 3)
    np.testing.assert_array_equal(exe(x, np.int32(2)), want)


# -- errors --------------------------------------------------------------------------------------


def _builder() -> tuple[xm.XlaBuilder, xm.XlaOp, xm.XlaOp]:
    b = xm.XlaBuilder("err")
    return b, b.parameter(0, Shape.array(xm.F32, (BOUND, 3))), b.parameter(1, S32)


@pytest.mark.parametrize("make, match", [
    (lambda b, x, n: b.set_dimension_size(x, b.constant(np.int64(1)), 0), "s32 scalar"),
    (lambda b, x, n: b.set_dimension_size(x, b.constant(np.int32([1])), 0), "s32 scalar"),
    (lambda b, x, n: b.set_dimension_size(x, b.constant(1.0), 0), "s32 scalar"),
    (lambda b, x, n: b.set_dimension_size(x, n, 2), "out of range"),
    (lambda b, x, n: b.set_dimension_size(x, n, -1), "out of range"),
    (lambda b, x, n: b.set_dimension_size(x, b.constant(np.int32(11)), 0), r"outside \[0, 10\]"),
    (lambda b, x, n: b.set_dimension_size(x, b.constant(np.int32(-1)), 0), r"outside \[0, 10\]"),
    (lambda b, x, n: b.set_dimension_size(b.constant(1.0), n, 0), "out of range"),
    (lambda b, x, n: b.remove_dynamic_dimension_size(x, 3), "out of range"),
    (lambda b, x, n: b.dynamic_reshape(x, [n], [30, 1], [True, False]), "one entry per"),
    (lambda b, x, n: b.dynamic_reshape(x, [n, b.constant(np.int32(2))], [10, 3], [True, False]),
     "dim_sizes.1. is 2, but dimension 1 is 3"),
    (lambda b, x, n: b.dynamic_reshape(x, [b.constant(np.int64(3))], [30], [True]), "s32 scalar"),
    (lambda b, x, n: b.parameter(2, Shape.parse("f32[<=3]")), "not supported yet"),
])  # fmt: skip
def test_build_errors(make, match: str) -> None:
    b, x, n = _builder()
    with pytest.raises(ShapeError, match=match):
        make(b, x, n)


@pytest.mark.parametrize("make, op", [
    (lambda b, d: b.rev(d, [0]), "reversing a dynamic dimension"),
    (lambda b, d: b.reshape(d, [3, 10]), "use dynamic_reshape"),
    (lambda b, d: b.reshape(b.transpose(d, [1, 0]), [30]), "use dynamic_reshape"),
    (lambda b, d: b.slice(d, [1, 0], [10, 3]), "slicing dynamic dimension 0"),
    (lambda b, d: b.concat_in_dim([d, d], 0), "concatenating along dynamic dimension 0"),
    (lambda b, d: b.bitcast_convert_type(d, xm.U8), "bitcast_convert"),
    (lambda b, d: b.sort(d, dimension=0), "sorting along dynamic dimension 0"),
    (lambda b, d: b.pad(d, b.constant(np.float32(0)), [(0, 1, 0), (0, 0, 0)]),
     "padding dynamic dimension 0"),
    (lambda b, d: b.conv(b.transpose(b.reshape(d, [10, 3, 1]), [2, 1, 0]),
                         b.constant(np.ones((1, 3, 1), np.float32)), [1], "VALID"),
     "only as the input's batch dimension"),
    (lambda b, d: b.reduce_window(d, np.float32(0), lambda s, t: b.add(s, t), [1, 1]),
     "reduce_window does not accept a dynamic dimension yet"),
    (lambda b, d: b.while_(lambda t: b.lt(b.constant(1), b.constant(0)), lambda t: t, d),
     "a parameter with a dynamic dimension is not supported"),
    (lambda b, d: b.broadcast_in_dim(b.set_dimension_size(b.constant(np.float32([1])), b.constant(
        np.int32(1)), 0), [4], [0]), "cannot be expanded"),
])  # fmt: skip
def test_ops_without_dynamic_support_say_so(make, op: str) -> None:
    b, x, n = _builder()
    d = b.set_dimension_size(x, n, 0)
    with pytest.raises(ShapeError, match=op):
        make(b, d)


def test_constant_sizes_that_differ() -> None:
    b, x, _ = _builder()
    d3 = b.set_dimension_size(x, b.constant(np.int32(3)), 0)
    d4 = b.set_dimension_size(x, b.constant(np.int32(4)), 0)
    with pytest.raises(ShapeError, match=r"differ \(3 and 4\)"):
        b.add(d3, d4)


def test_a_sub_computation_cannot_return_a_dynamic_dimension() -> None:
    sub = xm.XlaBuilder("sub")
    p = sub.parameter(0, Shape.array(xm.F32, (4,)))
    inner = sub.build(sub.set_dimension_size(p, sub.constant(np.int32(2)), 0))
    b = xm.XlaBuilder("outer")
    with pytest.raises(ShapeError, match="sub-computation"):
        b.build(b.call(inner, [b.parameter(0, Shape.array(xm.F32, (4,)))]))


# -- disk cache, StableHLO -------------------------------------------------------------------------


def test_a_dynamic_result_from_the_disk_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The slicing is read from the executable's hlo stage, which the disk cache keeps."""
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    x = data((BOUND,), np.float32)
    for status in ("miss", "hit"):
        clear_cache()  # the in-memory cache would answer before the disk
        b = xm.XlaBuilder("cached_dynamic")
        p, n = b.parameter(0, Shape.array(xm.F32, (BOUND,))), b.parameter(1, S32)
        exe = xm.compile(b.build(b.abs(b.set_dimension_size(p, n, 0))))
        if exe.compile_stats.get("disk_cache") != status:
            pytest.skip(f"the disk cache said {exe.compile_stats.get('disk_cache')}, not {status}")
        np.testing.assert_array_equal(exe(x, np.int32(4)), np.abs(x[:4]))
        assert str(exe.program_shape()[1]) == "f32[<=10]"


_BOUNDED = "tensor<?xf32, #stablehlo.bounds<10>>"
_STABLEHLO = f"""
func.func @main(%x: tensor<10xf32>, %n: tensor<i32>) -> RESULT {{
  %d = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<10xf32>, tensor<i32>) -> {_BOUNDED}
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%d init: %z) applies stablehlo.add across dimensions = [0]
      : ({_BOUNDED}, tensor<f32>) -> tensor<f32>
  return RETURN
}}
"""


@pytest.mark.parametrize("result, ret, want", [
    ("tensor<f32>", "%r : tensor<f32>", np.float32(6)),
    (_BOUNDED, f"%d : {_BOUNDED}", np.float32([0, 1, 2, 3])),
])  # fmt: skip
def test_stablehlo_set_dimension_size(result: str, ret: str, want: np.ndarray) -> None:
    pytest.importorskip("jax")
    comp = xm.import_stablehlo(_STABLEHLO.replace("RESULT", result).replace("RETURN", ret))
    got = xm.compile(comp)(np.arange(10, dtype=np.float32), np.int32(4))
    np.testing.assert_array_equal(got, want)


def test_stablehlo_dynamic_results_in_a_tuple() -> None:
    pytest.importorskip("jax")
    text = _STABLEHLO.replace("RESULT", f"(tensor<f32>, {_BOUNDED})").replace(
        "RETURN", f"%r, %d : tensor<f32>, {_BOUNDED}")
    total, d = xm.compile(xm.import_stablehlo(text))(np.arange(10, dtype=np.float32), np.int32(4))
    assert total == 6
    np.testing.assert_array_equal(d, np.float32([0, 1, 2, 3]))


# -- more ops that accept dynamic dimensions ----------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 4, BOUND])
def test_reshape_of_a_dynamic_major_dimension(size: int) -> None:
    x = data((BOUND, 6), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)  # f32[<=10,6]
        flat, split = b.reshape(d, [60]), b.reshape(d, [20, 3])
        same = b.reshape(d, [BOUND, 2, 3])
        assert [str(r.shape) for r in (flat, split, same)] == [
            "f32[<=60]", "f32[<=20,3]", "f32[<=10,2,3]"]
        total = b.reduce(flat, np.float32(0), lambda s, t: b.add(s, t), [0])
        return b.tuple([split, same, total])

    exe = compile_dynamic(build, Shape.array(xm.F32, (BOUND, 6)), S32)
    split, same, total = exe(x, np.int32(size))
    np.testing.assert_array_equal(split, x[:size].reshape(2 * size, 3))
    np.testing.assert_array_equal(same, x[:size].reshape(size, 2, 3))
    np.testing.assert_allclose(total, x[:size].sum(), rtol=1e-5)


@pytest.mark.parametrize("size", [0, 2, 5])
def test_tuple_results_are_sliced_leaf_by_leaf(size: int) -> None:
    x = data((5, 2), np.int32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)
        t = b.tuple([d, b.tuple([b.neg(d), p]), b.create_token()])
        again = b.get_tuple_element(t, 0)
        nested = b.get_tuple_element(b.get_tuple_element(t, 1), 0)
        assert str(again.shape) == str(nested.shape) == "s32[<=5,2]"
        return [t, b.reduce(b.sub(again, nested), np.int32(0), lambda s, u: b.add(s, u), [0])]

    exe = compile_dynamic(build, Shape.array(xm.S32, (5, 2)), S32)
    assert str(exe.program_shape()[1]) == "((s32[<=5,2], (s32[<=5,2], s32[5,2]), token[]), s32[2])"
    (a, (neg, whole), token), total = exe(x, np.int32(size))
    np.testing.assert_array_equal(a, x[:size])
    np.testing.assert_array_equal(neg, -x[:size])
    np.testing.assert_array_equal(whole, x)
    assert token is None
    np.testing.assert_array_equal(total, 2 * x[:size].sum(0))


def test_variadic_reduce_keeping_a_dynamic_dimension() -> None:
    x = data((3, BOUND), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 1)
        i = b.set_dimension_size(b.iota(Shape.array(xm.S32, (3, BOUND)), 0), n, 1)

        def argmax(acc, idx, v, j):
            better = b.gt(v, acc)
            return [b.select(better, v, acc), b.select(better, j, idx)]

        return b.reduce([d, i], [np.float32(-np.inf), np.int32(0)], argmax, [0])

    exe = compile_dynamic(build, Shape.array(xm.F32, (3, BOUND)), S32)
    values, index = exe(x, np.int32(4))
    np.testing.assert_array_equal(values, x[:, :4].max(0))
    np.testing.assert_array_equal(index, x[:, :4].argmax(0))


@pytest.mark.parametrize("size", [0, 3])
def test_concatenate_rev_map_along_static_dimensions(size: int) -> None:
    x = data((4, 2), np.float32)

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)
        c = b.concat_in_dim([d, b.rev(d, [1])], 1)  # f32[<=4,4]
        return b.map([c, c], lambda u, v: b.mul(u, v), [0, 1])

    exe = compile_dynamic(build, Shape.array(xm.F32, (4, 2)), S32)
    c = np.concatenate([x[:size], x[:size, ::-1]], 1)
    np.testing.assert_array_equal(exe(x, np.int32(size)), c * c)


# -- the numpy oracle -----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 2, 6])
def test_the_reference_interpreter_agrees(size: int) -> None:
    """The recorded graph is static (views never become operands), so tests/reference.py
    interprets it as it is; its (padded, sizes) result sliced is what the executable returns."""
    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)
        r = b.dynamic_reshape(b.exp(d), [b.mul(n, b.constant(np.int32(4))), b.constant(np.int32(1))],
                              [24, 1], [True, False])
        total = b.reduce(d, np.float32(0), lambda s, t: b.add(s, t), [0])
        return [r, b.dot(b.transpose(d, [1, 0]), d), total]

    b = xm.XlaBuilder("oracle")
    comp = b.build(build(b, b.parameter(0, Shape.array(xm.F32, (6, 4))), b.parameter(1, S32)))
    x = data((6, 4), np.float32)
    got = xm.compile(comp)(x, np.int32(size))
    padded = evaluate(comp, [x, np.int32(size)])
    leaves = [padded[0][0], padded[0][1], padded[0][2], *padded[1:]]
    want = slice_to_sizes(comp.program_shape()[1], leaves)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5)
    np.testing.assert_allclose(got[0][:, 0], np.exp(x[:size]).reshape(-1), rtol=1e-6)


@pytest.mark.parametrize("size", [0, 1, 3])
def test_sort_pad_convolution_along_static_dimensions(size: int) -> None:
    x = data((3, 5), np.float32, 4)
    kernel = data((2, 1, 3), np.float32, 5)  # O, I, W

    def build(b, p, n):
        d = b.set_dimension_size(p, n, 0)  # f32[<=3,5]
        both = b.sort([d, b.iota(Shape.array(xm.S32, (3, 5)), 1)], dimension=1)
        values, index = b.get_tuple_element(both, 0), b.get_tuple_element(both, 1)
        padded = b.pad(values, b.constant(np.float32(-1)), [(0, 0, 0), (1, 2, 1)])
        conv = b.conv(b.reshape(d, [3, 1, 5]), b.constant(kernel), [1], "VALID")  # N, C, W
        assert [str(v.shape) for v in (values, padded, conv)] == [
            "f32[<=3,5]", "f32[<=3,12]", "f32[<=3,2,3]"]
        return [index, padded, conv]

    exe = compile_dynamic(build, Shape.array(xm.F32, (3, 5)), S32)
    index, padded, conv = exe(x, np.int32(size))
    np.testing.assert_array_equal(index, np.argsort(x[:size], 1, kind="stable"))
    want = np.full((size, 12), -1, np.float32)
    want[:, 1:10:2] = np.sort(x[:size], 1)
    np.testing.assert_array_equal(padded, want)
    windows = np.stack([x[:size, i:i + 3] for i in range(3)], -1)  # N, W, Kw
    np.testing.assert_allclose(conv, np.einsum("nkw,ok->now", windows, kernel[:, 0]), rtol=1e-5)


def test_stablehlo_dynamic_reshape_to_a_bounded_type() -> None:
    pytest.importorskip("jax")
    bounded = "tensor<?x2xf32, #stablehlo.bounds<12, ?>>"
    text = f"""
    func.func @main(%x: tensor<6x4xf32>, %n: tensor<i32>) -> {bounded} {{
      %two = stablehlo.constant dense<2> : tensor<1xi32>
      %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
      %shape = stablehlo.concatenate %n1, %two, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
      %r = stablehlo.dynamic_reshape %x, %shape : (tensor<6x4xf32>, tensor<2xi32>) -> {bounded}
      return %r : {bounded}
    }}
    """
    comp = xm.import_stablehlo(text)
    assert str(comp.program_shape()[1]) == "f32[<=12,2]"
    x = data((6, 4), np.float32)
    np.testing.assert_array_equal(xm.compile(comp)(x, np.int32(12)), x.reshape(12, 2))
    with pytest.raises(xm.CompileError, match="needs a bound"):
        xm.import_stablehlo(text.replace("bounds<12, ?>", "bounds<?, ?>"))


def test_stablehlo_set_dimension_size_to_a_static_type_removes_the_dimension() -> None:
    """A static result type is XLA's RemoveDynamicDimension: the padded data as is."""
    pytest.importorskip("jax")
    text = """func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
      %0 = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<4xf32>, tensor<i32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    comp = xm.import_stablehlo(text)
    assert str(comp.program_shape()[1]) == "f32[4]"
    x = np.float32([1, 2, 3, 4])
    np.testing.assert_array_equal(xm.compile(comp)(x, np.int32(2)), x)


def test_dynamic_reshape_clamps_sizes_and_uses_static_bounds() -> None:
    """A dynamic size beyond its bound acts as the bound (get_dimension_size says so too); a
    static dimension is its bound whatever size is given at run time."""
    x = np.arange(12, dtype=np.int32)

    def build(b, p, n):
        r = b.dynamic_reshape(p, [n, b.add(n, b.constant(np.int32(-1)))], [4, 3], [True, False])
        return [r, b.get_dimension_size(r, 0)]

    exe = compile_dynamic(build, Shape.array(xm.S32, (12,)), S32)
    r, size = exe(x, np.int32(9))
    np.testing.assert_array_equal(r, x.reshape(4, 3))
    assert size == 4


# -- the IR ---------------------------------------------------------------------------------------


def test_ir_of_masking_and_dynamic_reshape() -> None:
    b = xm.XlaBuilder("ir")
    p, n = b.parameter(0, Shape.array(xm.F32, (6, 4))), b.parameter(1, S32)
    d = b.set_dimension_size(p, n, 0)
    total = b.reduce(d, np.float32(0), lambda s, t: b.add(s, t), [0])
    r = b.dynamic_reshape(d, [b.constant(np.int32(3)), b.constant(np.int32(8))], [3, 8], [True, False])
    comp = b.build([total, r])
    check_ir(comp.as_mlir_text(), """
        CHECK: func.func @main({{.*}}) -> tuple<tuple<tensor<4xf32>, tensor<3x8xf32>>, tensor<i32>>
        CHECK-SAME: attributes {xhlo.dynamic_result = "(f32[4], f32[<=3,8])"}
        CHECK-DAG: %[[PADDED:.*]] = "xhlo.set_dimension_size"(%arg0, %arg1) {dimension = 0 : i64}
        CHECK-DAG: %[[SIZE:.*]] = "xhlo.clamp"(%{{.*}}, %arg1, %{{.*}})
        CHECK-DAG: %[[BOUND:.*]] = "xhlo.broadcast_in_dim"(%[[SIZE]])
        CHECK-DAG: %[[MASK:.*]] = "xhlo.compare"(%{{.*}}, %[[BOUND]]) {{{.*}}comparison_direction = "LT"}
        CHECK: %[[MASKED:.*]] = "xhlo.select"(%[[MASK]], %[[PADDED]],
        CHECK: "xhlo.reduce"(%[[MASKED]],
        CHECK: "xhlo.dynamic_reshape"(%[[PADDED]], %[[SIZE]],
        CHECK-SAME: new_size_bounds = array<i64: 3, 8>
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK-NOT: "xhlo.
        CHECK: linalg.generic
        CHECK: linalg.index 0
        CHECK: arith.cmpi ult
        CHECK: tensor.extract %{{.*}} : tensor<6x4xf32>
        CHECK: arith.select
    """)


@pytest.mark.parametrize("attribute", ['"f32[<=9]"', '"f32[<=10,<=3]"', '"f32[<10]"'])
def test_a_dynamic_result_attribute_must_match_the_entry(attribute: str) -> None:
    b = xm.XlaBuilder("attr")
    p, n = b.parameter(0, Shape.array(xm.F32, (BOUND,))), b.parameter(1, S32)
    text = b.build(b.set_dimension_size(p, n, 0)).as_mlir_text()
    assert '"f32[<=10]"' in text
    with pytest.raises(xm.CompileError, match="xhlo.dynamic_result"):
        xm.compile_mlir(text.replace('"f32[<=10]"', attribute))
