"""Tests of compiling and running: argument checking, Python scalars, rank-0
and tuple values, layouts and strided views, result ownership, the compile
cache, compile_mlir on (edited) text, and concurrent calls.
"""

from __future__ import annotations

import functools
import gc
import re
import threading
import weakref

import ml_dtypes
import numpy as np
import pytest
from conftest import isolated

import xlamlir as xm

S = xm.Shape.parse


def build(name: str, shapes: list[str], body) -> xm.XlaComputation:
    b = xm.XlaBuilder(name)
    ops = [b.parameter(i, S(s), f"p{i}") for i, s in enumerate(shapes)]
    root = body(b, *ops)
    return b.build(root)


@functools.cache
def add_exe() -> xm.Executable:
    """f32[2,3] + convert(s32[]) -> f32[2,3]."""
    return xm.compile(build("add", ["f32[2,3]", "s32[]"],
                            lambda b, x, s: b.add(x, b.convert_element_type(s, xm.F32))))


@functools.cache
def axpy_exe(dims: tuple[int, ...] = (3, 4)) -> xm.Executable:
    """2*x - y on f32 arrays of `dims`."""
    shape = str(xm.Shape.array(xm.F32, dims))
    return xm.compile(build("axpy", [shape, shape], lambda b, x, y: x * 2.0 - y))


A23 = np.arange(6, dtype=np.float32).reshape(2, 3)


# ---- argument checking -----------------------------------------------------------------------


@pytest.mark.parametrize("args", [(), (A23,), (A23, 1, 2), (A23, 1, A23, A23)], ids=len)
def test_wrong_argument_count(args) -> None:
    with pytest.raises(xm.ArgumentError) as e:
        add_exe()(*args)
    assert isinstance(e.value, TypeError)
    assert "2" in str(e.value)


@pytest.mark.parametrize(
    ("index", "value"),
    [
        (0, A23.astype(np.float64)),
        (0, A23.astype(np.float16)),
        (0, A23.astype(np.int32)),
        (0, A23.astype(ml_dtypes.bfloat16)),
        (1, np.int64(1)),
        (1, np.float32(1)),
        (1, np.uint32(1)),
        (1, np.array(1, np.int64)),
        (1, np.array(True)),
    ],
    ids=lambda v: getattr(getattr(v, "dtype", None), "name", str(v)),
)
def test_wrong_dtype(index, value) -> None:
    args = [A23, np.int32(1)]
    args[index] = value
    with pytest.raises(xm.ArgumentError, match=f"argument {index}"):
        add_exe()(*args)


@pytest.mark.parametrize("value", [np.float64(1.0), np.array(1.0), np.float16(1.0)], ids=repr)
def test_numpy_scalar_of_another_dtype_for_f32_parameter(value) -> None:
    exe = xm.compile(build("neg", ["f32[]"], lambda b, x: b.neg(x)))
    with pytest.raises(xm.ArgumentError):
        exe(value)
    assert exe(np.float32(1.5)) == -1.5


@pytest.mark.parametrize(
    "value",
    [A23.T.copy(), A23.reshape(6), A23.reshape(1, 2, 3), np.float32(1), np.zeros((2, 4), np.float32),
     np.zeros((0, 3), np.float32)],
    ids=lambda v: str(np.shape(v)),
)
def test_wrong_shape(value) -> None:
    with pytest.raises(xm.ArgumentError, match="argument 0"):
        add_exe()(value, 1)


def test_wrong_shape_for_scalar_parameter() -> None:
    with pytest.raises(xm.ArgumentError, match="argument 1"):
        add_exe()(A23, np.array([1], np.int32))


@pytest.mark.parametrize("value", [A23.tolist(), "abc", None, {"a": 1}, b"\x00" * 24, object()],
                         ids=lambda v: type(v).__name__)
def test_non_array_argument(value) -> None:
    with pytest.raises(xm.ArgumentError, match="argument 0"):
        add_exe()(value, 1)


def test_python_scalar_for_array_parameter() -> None:
    with pytest.raises(xm.ArgumentError):
        add_exe()(1.0, 1)


def test_complex_python_value_for_real_parameters() -> None:
    with pytest.raises(xm.ArgumentError, match="argument 1"):
        add_exe()(A23, 1j)
    exe = xm.compile(build("negf", ["f32[]"], lambda b, x: b.neg(x)))
    with pytest.raises(xm.ArgumentError):
        exe(1 + 0j)


@pytest.mark.parametrize("value", [1.5, -0.25, float("nan"), float("inf")], ids=repr)
def test_non_integral_python_float_for_int_parameter(value) -> None:
    with pytest.raises(xm.ArgumentError, match="argument 1"):
        add_exe()(A23, value)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**64], ids=repr)
def test_python_int_out_of_range_for_int_parameter(value) -> None:
    with pytest.raises(xm.ArgumentError, match="argument 1"):
        add_exe()(A23, value)


def test_argument_error_for_tuple_parameter() -> None:
    exe = xm.compile(build("tp", ["(f32[2], s32[])"], lambda b, t: b.get_tuple_element(t, 0)))
    ok = (np.ones(2, np.float32), np.int32(3))
    np.testing.assert_array_equal(exe(ok), [1, 1])
    for bad in [np.ones(2, np.float32), (np.ones(2, np.float32),),
                (np.ones(2, np.float32), np.int32(3), np.int32(3)),
                (np.ones(2, np.float64), np.int32(3)), (np.ones(3, np.float32), np.int32(3)),
                (np.ones(2, np.float32), 1.5)]:
        with pytest.raises(xm.ArgumentError):
            exe(bad)


# ---- Python scalars and rank-0 values --------------------------------------------------------


@functools.cache
def scalars_exe() -> xm.Executable:
    """Every scalar parameter type converted to f64 and summed at distinct magnitudes."""
    shapes = ["f32[]", "s32[]", "u8[]", "f64[]", "c64[]", "bf16[]", "s64[]", "f16[]"]

    def body(b, f32, s32, u8, f64, c64, bf16, s64, f16):
        def f(x):
            return b.convert_element_type(x, xm.F64)

        return (f(f32) + f(s32) * 10.0 + f(u8) * 1e3 + f64 + f(b.real(c64)) * 1e7
                + f(b.imag(c64)) * 1e8 + f(bf16) * 1e9 + f(s64) + f(f16) * 1e-3)

    return xm.compile(build("scalars", shapes, body))


def _scalars_expected(f32, s32, u8, f64, c64, bf16, s64, f16):
    return (f32 + s32 * 10 + u8 * 1e3 + f64 + c64.real * 1e7 + c64.imag * 1e8
            + bf16 * 1e9 + s64 + f16 * 1e-3)


@pytest.mark.parametrize(
    "args",
    [
        (0.5, 3, 200, 0.25, 2 + 3j, 4.0, 2**40, 2.0),
        (1, True, 7, 3, 1 + 0j, 1, -5, -1),  # ints for floats, bool for ints
        (False, -2, 0.0, -1.0, -1j, True, 3.0, 0.5),  # bool/int/float everywhere allowed
    ],
    ids=["natural", "ints-for-floats", "mixed"],
)
def test_python_scalars_are_converted(args) -> None:
    result = scalars_exe()(*args)
    expected = _scalars_expected(*[complex(a) if i == 4 else float(a) for i, a in enumerate(args)])
    assert result.dtype == np.float64 and result.shape == ()
    assert result == pytest.approx(expected, rel=1e-12)


def test_numpy_scalars_of_the_right_dtype_are_accepted() -> None:
    args = (np.float32(0.5), np.int32(3), np.uint8(200), np.float64(0.25),
            np.complex64(2 + 3j), ml_dtypes.bfloat16(4.0), np.int64(2**40), np.float16(2.0))
    expected = _scalars_expected(0.5, 3, 200, 0.25, 2 + 3j, 4, 2**40, 2)
    assert scalars_exe()(*args) == pytest.approx(expected)
    assert scalars_exe()(*[np.asarray(a) for a in args]) == pytest.approx(expected)  # 0-d arrays


@isolated
def test_pred_scalar_parameter() -> None:
    """A pred[] parameter takes Python bools/ints and numpy bools (select with a scalar pred)."""
    exe = xm.compile(build("ps", ["pred[]", "f32[2]"],
                           lambda b, p, x: b.select(p, x, b.neg(x))))
    x = np.array([1, -2], np.float32)
    for value, expected in [(True, x), (False, -x), (1, x), (0, -x), (np.bool_(True), x),
                            (np.array(False), -x)]:
        np.testing.assert_array_equal(exe(value, x), expected)
    with pytest.raises(xm.ArgumentError):
        exe(np.int8(1), x)
    with pytest.raises(xm.ArgumentError):
        exe(2, x)  # not a valid pred value


def test_rank0_result_is_a_0d_array() -> None:
    exe = xm.compile(build("r0", ["f32[]", "s32[]"],
                           lambda b, x, i: x * b.convert_element_type(i, xm.F32)))
    result = exe(1.5, 2)
    assert type(result) is np.ndarray
    assert result.shape == () and result.dtype == np.float32
    assert result == 3.0


@isolated
def test_rank0_pred_result() -> None:
    exe = xm.compile(build("r0p", ["f32[]", "f32[]"], lambda b, x, y: b.lt(x, y)))
    result = exe(1.5, 2.0)
    assert type(result) is np.ndarray
    assert result.shape == () and result.dtype == np.bool_
    assert bool(result) is True
    assert bool(exe(np.float32(3), np.float32(2))) is False


# ---- tuples ----------------------------------------------------------------------------------


def test_tuple_parameter_and_nested_tuple_result() -> None:
    def body(b, t):
        e0 = b.get_tuple_element(t, 0)
        inner = b.get_tuple_element(t, 1)
        i = b.get_tuple_element(inner, 0)
        f = b.get_tuple_element(inner, 1)
        return [e0 + f, b.tuple([i * 2, b.tuple([e0])]), i]

    exe = xm.compile(build("tup", ["(f32[2], (s32[], f32[2]))"], body))
    x = np.array([1, 2], np.float32)
    y = np.array([10, 20], np.float32)
    result = exe((x, (np.int32(3), y)))
    assert type(result) is tuple and len(result) == 3
    np.testing.assert_array_equal(result[0], x + y)
    assert type(result[1]) is tuple and len(result[1]) == 2
    assert result[1][0].shape == () and result[1][0] == 6 and result[1][0].dtype == np.int32
    assert type(result[1][1]) is tuple
    np.testing.assert_array_equal(result[1][1][0], x)
    assert result[2] == 3
    # a Python scalar inside a tuple argument
    again = exe((x, (4, y)))
    assert again[2] == 4


def test_tuple_parameter_returned_directly() -> None:
    exe = xm.compile(build("tp", ["(f32[2], s32[])"], lambda b, t: t))
    x = np.array([1, 2], np.float32)
    result = exe((x, np.int32(7)))
    assert type(result) is tuple
    np.testing.assert_array_equal(result[0], x)
    assert result[1] == 7 and result[1].dtype == np.int32
    assert not np.shares_memory(result[0], x)


def test_empty_tuple_result() -> None:
    exe = xm.compile(build("et", ["f32[2]"], lambda b, x: b.tuple([])))
    assert exe(np.zeros(2, np.float32)) == ()


# ---- layouts, strides, memory ---------------------------------------------------------------


def test_fortran_parameter_returned_keeps_its_layout() -> None:
    exe = xm.compile(build("lay", ["f32[2,3]{0,1}"], lambda b, x: x))
    assert exe.program_shape()[1] == S("f32[2,3]{0,1}")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for arg in (np.asfortranarray(a), a, a[:, ::-1][:, ::-1]):
        result = exe(arg)
        np.testing.assert_array_equal(result, a)
        assert result.flags.f_contiguous and not result.flags.c_contiguous


def test_general_layout_parameter_returned() -> None:
    exe = xm.compile(build("lay3", ["s32[2,3,4]{1,0,2}"], lambda b, x: x))
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    result = exe(a)
    np.testing.assert_array_equal(result, a)
    # minor_to_major (1, 0, 2): dim 1 is fastest, then dim 0, then dim 2
    assert result.strides == (3 * 4, 4, 2 * 3 * 4)


def _assert_layout(array: np.ndarray, shape: xm.Shape) -> None:
    """`array` is laid out as `shape` says (byte strides of its minor_to_major)."""
    step, strides = array.itemsize, [0] * array.ndim
    for d in shape.layout.minor_to_major:
        strides[d] = step
        step *= array.shape[d]
    assert array.strides == tuple(strides), (shape, array.strides)


def test_tuple_parameter_leaf_layouts_reach_the_executable() -> None:
    # comp.program_shape() and exe.program_shape() agree on a tuple parameter's leaf layouts;
    # returned whole or taken out by get_tuple_element (the parameter's own data, as in XLA),
    # the leaves keep them.
    b = xm.XlaBuilder("tuple_param_layouts")
    p = b.parameter(0, S("(f32[2,3]{0,1}, (s32[2,3,4]{1,0,2}, f32[3]))"))
    comp = b.build(b.tuple([p, b.get_tuple_element(p, 0)]))
    exe = xm.compile(comp)
    assert exe.program_shape() == comp.program_shape()
    assert str(exe.program_shape()[0][0]) == "(f32[2,3]{0,1}, (s32[2,3,4]{1,0,2}, f32[3]))"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    v = np.float32([1, 2, 3])
    for args in ((a, (g, v)), (np.asfortranarray(a), (np.asfortranarray(g), v))):
        (a_out, (g_out, v_out)), a_gte = exe(args)
        np.testing.assert_array_equal(a_out, a)
        np.testing.assert_array_equal(g_out, g)
        np.testing.assert_array_equal(v_out, v)
        np.testing.assert_array_equal(a_gte, a)
        _assert_layout(a_out, S("f32[2,3]{0,1}"))
        _assert_layout(g_out, S("s32[2,3,4]{1,0,2}"))
        _assert_layout(a_gte, S("f32[2,3]{0,1}"))
    nested = exe.program_shape()[1]
    assert str(nested) == "((f32[2,3]{0,1}, (s32[2,3,4]{1,0,2}, f32[3])), f32[2,3]{0,1})"


def test_parameters_returned_in_tuples_keep_their_layouts() -> None:
    def body(b, x, g, y):
        pair = b.tuple([g, y])
        return b.tuple([x, x * 2.0, pair, b.get_tuple_element(b.tuple([x, y]), 0),
                        b.tuple([b.tuple([g]), b.create_token()])])

    comp = build("tuple_layouts", ["f32[2,3]{0,1}", "s32[2,3,4]{1,0,2}", "f32[2,3]"], body)
    exe = xm.compile(comp)
    stated = exe.program_shape()[1]
    assert stated == comp.program_shape()[1]
    assert stated == S("(f32[2,3]{0,1}, f32[2,3], (s32[2,3,4]{1,0,2}, f32[2,3]), f32[2,3]{0,1}, "
                       "((s32[2,3,4]{1,0,2}), token[]))")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    y = a[::-1] + 10
    # C-ordered, F-ordered and strided views (the latter run the strided-input variant).
    for args in ((a, g, y), (np.asfortranarray(a), np.asfortranarray(g), np.asfortranarray(y)),
                 (np.repeat(a, 2, axis=1)[:, ::2], g[:, ::-1][:, ::-1], y)):
        got = exe(*args)
        x_out, doubled, (g_out, y_out), x_again, ((g_deep,), token) = got
        for array, want, shape in ((x_out, a, stated.tuple_shapes[0]),
                                   (doubled, a * 2, stated.tuple_shapes[1]),
                                   (g_out, g, stated.tuple_shapes[2].tuple_shapes[0]),
                                   (y_out, y, stated.tuple_shapes[2].tuple_shapes[1]),
                                   (x_again, a, stated.tuple_shapes[3]),
                                   (g_deep, g, stated.tuple_shapes[4].tuple_shapes[0].tuple_shapes[0])):
            np.testing.assert_array_equal(array, want)
            _assert_layout(array, shape)
        assert token is None
        assert x_out.flags.f_contiguous and not x_out.flags.c_contiguous
        assert x_again.flags.f_contiguous and not x_again.flags.c_contiguous
        assert doubled.flags.c_contiguous and y_out.flags.c_contiguous
        assert not g_out.flags.c_contiguous and not g_out.flags.f_contiguous
        assert g_out.strides == g_deep.strides == (3 * 4, 4, 2 * 3 * 4)


def test_parameter_returned_from_text_keeps_its_layout() -> None:
    """Without a declared result layout, a returned parameter keeps its own (API.md)."""
    text = """
    func.func @main(%a: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>}, %b: tensor<2x3xf32>)
        -> tensor<2x3xf32> {
      return %a : tensor<2x3xf32>
    }
    """
    exe = xm.compile_mlir(text)
    assert exe.program_shape()[1] == S("f32[2,3]{0,1}")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = exe(a, a)
    np.testing.assert_array_equal(result, a)
    assert result.flags.f_contiguous and not result.flags.c_contiguous


@isolated
def test_ops_on_fortran_parameter() -> None:
    """An op on a {0,1} parameter reads it correctly and produces the default layout."""
    exe = xm.compile(build("layop", ["f32[2,3]{0,1}", "f32[3]"],
                           lambda b, x, v: b.add(x * 2.0, v, (1,))))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.array([10, 20, 30], np.float32)
    for arg in (np.asfortranarray(a), a):
        result = exe(arg, v)
        np.testing.assert_array_equal(result, a * 2 + v)
        assert result.flags.c_contiguous


@isolated
def test_ops_on_general_layout_parameters() -> None:
    exe = xm.compile(build("layop3", ["f32[2,3,4]{0,2,1}", "f32[2,3,4]{2,0,1}"],
                           lambda b, x, y: x - y))
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    c = a[::-1] * 3
    np.testing.assert_array_equal(exe(a, c), a - c)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: (a[::2], a[1::2]),
        lambda a: (a[::-2], a[-2::-2]),
        lambda a: (np.asfortranarray(a[:3]), a[3:].T.copy().T),
        lambda a: (a[:3, ::-1], a[3:, ::2].repeat(2, axis=1)),
        lambda a: (np.broadcast_to(a[0], (3, 4)), a[2:5]),
        lambda a: (a.reshape(4, 6)[:3, 1:5], a.T.reshape(4, 6).T[:3, :4].copy(order="F")),
    ],
    ids=["step2", "negative", "fortran", "reversed-cols", "zero-stride", "offset-view"],
)
def test_strided_and_fortran_arguments_for_default_layout(make) -> None:
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    x, y = make(a)
    assert x.shape == y.shape == (3, 4)
    result = axpy_exe()(x, y)
    np.testing.assert_array_equal(result, 2 * x - y)
    assert result.flags.c_contiguous


def test_transposed_argument() -> None:
    exe = xm.compile(build("t", ["s32[3,2]"], lambda b, x: x * 10))
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(exe(a.T), a.T * 10)


def test_read_only_arguments() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.ones((3, 4), np.float32)
    x.flags.writeable = False
    y.flags.writeable = False
    result = axpy_exe()(x, y)
    np.testing.assert_array_equal(result, 2 * x - y)
    assert result.flags.writeable
    np.testing.assert_array_equal(axpy_exe()(x[::-1], y), 2 * x[::-1] - y)


@pytest.mark.parametrize("dims", [(0,), (3, 0), (0, 2, 5)], ids=str)
def test_zero_size_arrays(dims) -> None:
    x = np.zeros(dims, np.float32)
    result = axpy_exe(dims)(x, x)
    assert result.shape == dims and result.dtype == np.float32


def test_zero_size_with_broadcast() -> None:
    exe = xm.compile(build("z", ["f32[0,3]", "f32[3]"], lambda b, x, v: b.add(x, v, (1,))))
    result = exe(np.zeros((0, 3), np.float32), np.ones(3, np.float32))
    assert result.shape == (0, 3)


def _owns_its_memory(a: np.ndarray) -> bool:
    while a.base is not None:
        if not isinstance(a.base, np.ndarray):
            return False
        a = a.base
    return a.flags.owndata


def test_results_are_owned_writable_and_independent() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), np.float32)
    r1 = axpy_exe()(x, y)
    r2 = axpy_exe()(x, y)
    assert r1 is not r2
    assert not np.shares_memory(r1, r2)
    assert not np.shares_memory(r1, x) and not np.shares_memory(r1, y)
    assert r1.flags.writeable and r2.flags.writeable
    assert _owns_its_memory(r1) and _owns_its_memory(r2)
    r1[...] = -1
    np.testing.assert_array_equal(r2, 2 * x)
    np.testing.assert_array_equal(axpy_exe()(x, y), 2 * x)


def test_parameter_returned_directly_is_a_copy() -> None:
    exe = xm.compile(build("id", ["f32[2]", "s32[3]"], lambda b, x, i: i))
    i = np.arange(3, dtype=np.int32)
    result = exe(np.ones(2, np.float32), i)
    np.testing.assert_array_equal(result, i)
    assert result.dtype == np.int32
    assert not np.shares_memory(result, i)
    result[0] = 99
    assert i[0] == 0
    assert _owns_its_memory(result)


def test_unused_parameter() -> None:
    exe = xm.compile(build("unused", ["f32[2]", "s32[3]", "pred[]"], lambda b, x, i, p: b.neg(x)))
    assert len(exe.program_shape()[0]) == 3
    result = exe(np.array([1, -2], np.float32), np.zeros(3, np.int32), True)
    np.testing.assert_array_equal(result, [-1, 2])
    with pytest.raises(xm.ArgumentError):  # unused parameters are still checked
        exe(np.array([1, -2], np.float32), np.zeros(3, np.float32), True)


def test_program_shape_of_executable() -> None:
    assert add_exe().program_shape() == ([S("f32[2,3]"), S("s32[]")], S("f32[2,3]"))


# ---- compile cache ---------------------------------------------------------------------------


def _fresh_axpy(dims=(5,)) -> xm.XlaComputation:
    shape = str(xm.Shape.array(xm.F32, dims))
    return build("axpy", [shape, shape], lambda b, x, y: x * 2.0 - y)


def test_compile_cache_returns_the_same_executable() -> None:
    first = xm.compile(_fresh_axpy())
    second = xm.compile(_fresh_axpy())  # rebuilt with a new builder
    assert first is second
    assert xm.compile(_fresh_axpy(), xm.Pipeline.default()) is first
    assert xm.compile(_fresh_axpy((6,))) is not first


def test_compile_cache_is_keyed_by_pipeline() -> None:
    default = xm.compile(_fresh_axpy((7,)))
    custom = xm.compile(_fresh_axpy((7,)), xm.Pipeline.default().insert_after("linalg", "cse"))
    assert custom is not default
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(custom(x, x), default(x, x))


def test_compile_cache_key_holds_its_python_passes() -> None:
    """A Python pass is keyed by the object itself, and the key keeps it alive: a key of
    bare id()s let a freed pipeline's pass and a new pass at the same address share a
    cache entry (the executable compiled with the other pass)."""

    def tag(op, pass_) -> None:
        pass

    alive = weakref.ref(tag)
    key = xm.Pipeline.default().insert_after("linalg", tag).fingerprint()
    del tag
    gc.collect()
    assert alive() is not None
    same = xm.Pipeline.default().insert_after("linalg", alive()).fingerprint()
    assert same == key and hash(same) == hash(key)

    def other(op, pass_) -> None:
        pass

    assert xm.Pipeline.default().insert_after("linalg", other).fingerprint() != key


# ---- compile_mlir ----------------------------------------------------------------------------


def _compare_comp() -> xm.XlaComputation:
    return build("cmp", ["f32[2,3]", "f32[3]"],
                 lambda b, x, v: b.select(b.lt(b.add(x, v, (1,)), x), x, b.exp(x)))


def test_compile_mlir_on_the_computation_text() -> None:
    comp = _compare_comp()
    exe = xm.compile_mlir(comp.as_mlir_text())
    x = np.array([[1, -2, 3], [0.5, 0, -1]], np.float32)
    v = np.array([-1, 2, 0.5], np.float32)
    expected = np.where(x + v < x, x, np.exp(x))
    np.testing.assert_allclose(exe(x, v), expected, rtol=1e-6)
    np.testing.assert_array_equal(exe(x, v), xm.compile(comp)(x, v))
    assert exe.program_shape() == comp.program_shape()


def test_compile_mlir_keeps_layouts_from_text() -> None:
    comp = build("lay", ["f32[2,3]{0,1}"], lambda b, x: x)
    exe = xm.compile_mlir(comp.as_mlir_text())
    assert exe.program_shape() == ([S("f32[2,3]{0,1}")], S("f32[2,3]{0,1}"))
    assert exe(np.zeros((2, 3), np.float32)).flags.f_contiguous


def _edited(old: str, new: str) -> str:
    text = _compare_comp().as_mlir_text()
    assert old in text, text
    return text.replace(old, new)


def _exp_text(result_type: str) -> str:
    """exp on f32[4], with the op's (and so the function's) result type replaced."""
    text = build("e", ["f32[4]"], lambda b, x: b.exp(x)).as_mlir_text()
    assert text.count("-> tensor<4xf32>") == 2 and "return %0 : tensor<4xf32>" in text, text
    return text.replace("-> tensor<4xf32>", f"-> {result_type}").replace(
        "return %0 : tensor<4xf32>", f"return %0 : {result_type}")


BAD_TEXTS = [
    # wrong result types in an op, consistent with the rest of the module so that it parses
    ("exp-result-f64", lambda: _exp_text("tensor<4xf64>"), r"(?s)exponential.*f64"),
    ("exp-result-dims", lambda: _exp_text("tensor<2x2xf32>"), r"(?s)exponential.*2"),
    ("exp-result-complex", lambda: _exp_text("tensor<4xcomplex<f32>>"), r"exponential"),
    ("compare-result-type", lambda: _edited("-> tensor<2x3xi1>", "-> tensor<3x2xi1>"), r"2x3|3x2"),
    ("direction", lambda: _edited('"LT"', '"XX"'), "XX|direction"),
    ("compare-type", lambda: _edited('"FLOAT"', '"SIGNED"'), "SIGNED"),
    ("bcast-dims-range", lambda: _edited("array<i64: 1>", "array<i64: 5>"), "broadcast"),
    ("bcast-dims-kind", lambda: _edited("array<i64: 1>", "1 : i64"), "broadcast_dimensions|i64"),
    ("missing-attr", lambda: _edited("broadcast_dimensions = array<i64: 1>, ", ""),
     "broadcast_dimensions"),
    ("syntax", lambda: _edited('"xhlo.add"', '"xhlo.add"('), r"\d+:\d+"),
    ("unknown-op", lambda: _edited('"xhlo.add"', '"xhlo.addd"'), "addd"),
    ("no-main", lambda: _edited("@main", "@entry"), "main"),
    ("garbage", lambda: "this is not MLIR", r"\S"),
    ("empty", lambda: "", "main"),
]


@isolated
def test_compile_mlir_rejects_bad_text() -> None:
    """Every edited text gives a CompileError (or ShapeError) with a clear message; run in a
    child interpreter, so a crash is a failure, and all cases are reported together."""
    problems = []
    for name, make, pattern in BAD_TEXTS:
        text = make()
        try:
            xm.compile_mlir(text)
        except (xm.CompileError, xm.ShapeError) as e:
            if not re.search(pattern, str(e)):
                problems.append(f"{name}: message does not match {pattern!r}: {e}")
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} instead of CompileError: {e}")
        else:
            problems.append(f"{name}: compiled without an error")
    assert not problems, "\n".join(problems)


# ---- threads ---------------------------------------------------------------------------------


def test_concurrent_calls_from_8_threads() -> None:
    n = 4096
    exe = xm.compile(build("thr", [f"f32[{n}]", "s32[]"],
                           lambda b, x, k: b.tanh(x) * b.convert_element_type(k, xm.F32) + x))
    errors: list[str] = []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        start.wait()
        for j in range(25):
            x = rng.standard_normal(n).astype(np.float32)
            k = t * 100 + j
            result = exe(x, k)
            expected = np.tanh(x.astype(np.float64)) * k + x
            if not np.allclose(result, expected, rtol=1e-5, atol=1e-4):
                errors.append(f"thread {t} call {j}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
