"""Tests of XlaBuilder: parameters, constants, build(), shape inference of the
elementwise families, XLA's implicit broadcasting (seed 000 / SEMANTICS 5.X)
and the XlaOp operator overloads.

Most checks are shape-only (nothing is compiled); a few broadcasting and
constant cases run end to end against numpy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, run
from hypothesis import given, settings
from hypothesis import strategies as st

import xlamlir as xm

S = xm.Shape.parse


def params(b: xm.XlaBuilder, *shapes: str) -> list[xm.XlaOp]:
    return [b.parameter(i, S(s), f"p{i}") for i, s in enumerate(shapes)]


def assert_shape_error(excinfo, op_pattern: str, *operand_shapes: str) -> None:
    """The message names the op and every operand shape (API.md: 'naming the op, the operand
    shapes and the broken rule')."""
    msg = str(excinfo.value)
    assert re.search(op_pattern, msg), f"op {op_pattern!r} not named in: {msg}"
    for s in operand_shapes:
        assert s in msg, f"operand shape {s} not named in: {msg}"


# ---- errors ----------------------------------------------------------------------------------


def test_error_hierarchy() -> None:
    assert issubclass(xm.ShapeError, xm.XlaError) and issubclass(xm.ShapeError, ValueError)
    assert issubclass(xm.ArgumentError, xm.XlaError) and issubclass(xm.ArgumentError, TypeError)
    assert issubclass(xm.CompileError, xm.XlaError) and issubclass(xm.CompileError, RuntimeError)


# ---- parameters ------------------------------------------------------------------------------


def test_parameter_shape_builder_and_name(b) -> None:
    x = b.parameter(0, S("f32[2,3]"), "x")
    assert x.shape == S("f32[2,3]")
    assert x.builder is b
    y = b.parameter(1, xm.Shape.array(np.int16, [4]))
    assert y.shape == S("s16[4]")


def test_parameters_declared_out_of_order(b) -> None:
    b.parameter(1, S("s32[]"))
    b.parameter(0, S("f32[2]"))
    comp = b.build()
    param_shapes, _ = comp.program_shape()
    assert param_shapes == [S("f32[2]"), S("s32[]")]


def test_parameter_numbering_gap_raises_at_build(b) -> None:
    x = b.parameter(0, S("f32[2]"))
    b.parameter(2, S("f32[2]"))
    b.neg(x)  # building ops is fine; the gap is only detected by build()
    with pytest.raises(xm.ShapeError, match="parameter") as e:
        b.build()
    assert "2" in str(e.value)
    b.parameter(1, S("f32[2]"))  # filling the gap makes it buildable
    assert b.build().program_shape()[0] == [S("f32[2]")] * 3


def test_parameter_numbering_must_start_at_zero(b) -> None:
    b.parameter(1, S("f32[2]"))
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.build()


def test_duplicate_parameter_number(b) -> None:
    b.parameter(0, S("f32[2]"))
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.parameter(0, S("f32[2]"))
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.parameter(0, S("s32[]"))


@pytest.mark.parametrize("shape", [(2, 3), None, np.float32, [2], 3], ids=repr)
def test_parameter_bad_shape_type(b, shape) -> None:
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.parameter(0, shape)


@pytest.mark.parametrize("number", [-1, "0", None], ids=repr)
def test_parameter_bad_number(b, number) -> None:
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.parameter(number, S("f32[]"))


# ---- constants -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, "pred[]"), (False, "pred[]"), (3, "s32[]"), (-(2**31), "s32[]"), (2**31 - 1, "s32[]"),
     (3.0, "f32[]"), (-0.0, "f32[]"), (1 + 2j, "c64[]")],
    ids=repr,
)
def test_constant_python_scalar_types(b, value, expected) -> None:
    assert b.constant(value).shape == S(expected)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40, -(2**63)], ids=repr)
def test_constant_python_int_out_of_s32_range(b, value) -> None:
    with pytest.raises(xm.ShapeError, match="constant"):
        b.constant(value)


NUMPY_CONSTANTS = [
    np.float16(1.5),
    np.float64(-0.0),
    np.int8(-128),
    np.uint64(2**64 - 1),
    np.complex128(1 - 2j),
    np.bool_(True),
    np.array(7, np.int16),
    np.array([1.0, -0.0, np.inf, np.nan], ml_dtypes.bfloat16),
    np.array([[1, 2, 3], [4, 5, 6]], np.uint16),
    np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 12,
    np.array([[1 + 1j, -2.5j]], np.complex64),
    np.array([True, False, True]),
    np.array([np.inf, -np.inf, 65504.0, 6e-8], np.float16),
    np.zeros((0,), np.float32),
    np.zeros((2, 0, 3), np.int32),
    np.array([1e300, -5e-324, np.nan], np.float64),
]


def _id(v) -> str:
    a = np.asarray(v)
    return f"{a.dtype}{list(a.shape)}".replace(" ", "")


@pytest.mark.parametrize("value", NUMPY_CONSTANTS, ids=_id)
def test_constant_numpy_value_keeps_dtype_and_shape(b, value) -> None:
    op = b.constant(value)
    array = np.asarray(value)
    assert op.shape.element_type == xm.type_of(array.dtype)
    assert op.shape.dimensions == array.shape
    assert op.shape.rank == array.ndim


@pytest.mark.parametrize("value", NUMPY_CONSTANTS, ids=_id)
def test_constant_numpy_value_runs_bit_exact(b, value) -> None:
    b.constant(value)
    result = run(b.build())
    expected = np.asarray(value)
    assert isinstance(result, np.ndarray)
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert result.tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize("value", [True, 7, -2.5, 1.5 - 0.5j], ids=repr)
def test_constant_python_scalar_runs(b, value) -> None:
    b.constant(value)
    result = run(b.build())
    assert result.shape == ()
    assert result.dtype == xm.dtype_of(b.constant(value).shape.element_type)
    assert result == value


def test_constant_is_a_snapshot_of_the_array(b) -> None:
    a = np.array([1, 2, 3], np.int32)
    b.constant(a)
    a[0] = 100
    np.testing.assert_array_equal(run(b.build()), [1, 2, 3])


def test_tuple_constant_shape(b) -> None:
    op = b.constant((1, np.float16(2), (True, np.zeros((2, 3), np.uint8))))
    assert op.shape.is_tuple()
    assert op.shape == S("(s32[], f16[], (pred[], u8[2,3]))")


def test_tuple_constant_runs(b) -> None:
    b.constant((1, np.float16(2.5), (True, np.arange(3, dtype=np.uint8))))
    result = run(b.build())
    assert isinstance(result, tuple) and len(result) == 3
    assert result[0].dtype == np.int32 and result[0] == 1
    assert result[1].dtype == np.float16 and result[1] == 2.5
    assert isinstance(result[2], tuple)
    assert result[2][0].dtype == np.bool_ and bool(result[2][0])
    np.testing.assert_array_equal(result[2][1], np.arange(3, dtype=np.uint8))


# Ids without the object's address: pytest-xdist's workers must collect the same names.
@pytest.mark.parametrize("value", ["abc", object(), None, [1, "a"]],
                         ids=lambda v: "object()" if type(v) is object else repr(v))
def test_constant_without_an_element_type(b, value) -> None:
    with pytest.raises(xm.ShapeError, match="constant"):
        b.constant(value)


@pytest.mark.parametrize("value", [1 + 2j, np.complex64(3 - 1j), np.array([1j, 2], np.complex128)],
                         ids=repr)
def test_complex_constant_builds_to_text(b, value) -> None:
    b.constant(value)
    text = b.build().as_mlir_text()
    assert "complex<f" in text


# ---- build() and XlaComputation --------------------------------------------------------------


def test_computation_attributes(b) -> None:
    x, y = params(b, "f32[2,3]{0,1}", "s32[]")
    b.add(x, b.convert_element_type(y, xm.F32))
    comp = b.build()
    assert isinstance(comp, xm.XlaComputation)
    assert comp.name == "test"
    param_shapes, result_shape = comp.program_shape()
    assert param_shapes == [S("f32[2,3]{0,1}"), S("s32[]")]
    assert param_shapes[0].layout.minor_to_major == (0, 1)
    assert result_shape == S("f32[2,3]")
    text = comp.as_mlir_text()
    assert isinstance(text, str) and "func.func @main" in text
    assert str(comp) == text


def test_build_root_defaults_to_last_op(b) -> None:
    (x,) = params(b, "f32[3]")
    b.exp(x)
    last = b.is_finite(x)
    comp = b.build()
    assert comp.program_shape()[1] == last.shape == S("pred[3]")
    assert '"xhlo.is_finite"' in comp.as_mlir_text()


def test_build_explicit_root_not_last(b) -> None:
    (x,) = params(b, "f32[3]")
    first = b.exp(x)
    b.is_finite(x)
    comp = b.build(first)
    assert comp.program_shape()[1] == S("f32[3]")


@pytest.mark.parametrize("container", [list, tuple])
def test_build_list_or_tuple_root_is_a_tuple(b, container) -> None:
    x, y = params(b, "f32[3]", "s32[]")
    comp = b.build(container([b.neg(x), y, x]))
    assert comp.program_shape()[1] == S("(f32[3], s32[], f32[3])")


def test_build_parameter_as_root(b) -> None:
    x, _ = params(b, "f32[3]", "s32[2]")
    comp = b.build(x)
    assert comp.program_shape() == ([S("f32[3]"), S("s32[2]")], S("f32[3]"))


def test_build_empty_builder_raises(b) -> None:
    with pytest.raises(xm.ShapeError, match="build"):
        b.build()


def test_build_root_of_another_builder_raises(b) -> None:
    other = xm.XlaBuilder("other")
    (y,) = params(other, "f32[2]")
    params(b, "f32[2]")
    with pytest.raises(xm.ShapeError):
        b.build(other.neg(y))


# ---- tuples ----------------------------------------------------------------------------------


def test_tuple_and_get_tuple_element_shapes(b) -> None:
    x, y = params(b, "f32[2]", "s32[]")
    t = b.tuple([x, y, b.tuple([y])])
    assert t.shape == S("(f32[2], s32[], (s32[]))")
    assert b.get_tuple_element(t, 0).shape == S("f32[2]")
    assert b.get_tuple_element(t, 2).shape == S("(s32[])")
    (tp,) = params(xm.XlaBuilder("t2"), "(f32[2], (pred[], u8[3]))")
    inner = tp.builder.get_tuple_element(tp, 1)
    assert inner.shape == S("(pred[], u8[3])")
    assert tp.builder.get_tuple_element(inner, 1).shape == S("u8[3]")


@pytest.mark.parametrize("index", [2, 5, -1])
def test_get_tuple_element_out_of_range(b, index) -> None:
    x, y = params(b, "f32[2]", "s32[]")
    with pytest.raises(xm.ShapeError, match="get_tuple_element") as e:
        b.get_tuple_element(b.tuple([x, y]), index)
    assert_shape_error(e, "get_tuple_element", "f32[2]", "s32[]")


@pytest.mark.parametrize("index", [2, -1])
def test_get_tuple_element_out_of_range_on_tuple_parameter(b, index) -> None:
    (t,) = params(b, "(f32[2], s32[])")
    with pytest.raises(xm.ShapeError, match="get_tuple_element"):
        b.get_tuple_element(t, index)


def test_get_tuple_element_of_an_array(b) -> None:
    (x,) = params(b, "f32[2]")
    with pytest.raises(xm.ShapeError, match="get_tuple_element") as e:
        b.get_tuple_element(x, 0)
    assert_shape_error(e, "get_tuple_element", "f32[2]")


# ---- closed computations: ops of another builder ---------------------------------------------


def test_op_of_another_builder_raises_naming_the_op(b) -> None:
    other = xm.XlaBuilder("other")
    (p,) = params(other, "f32[2]")
    foreign = other.exp(p)
    (x,) = params(b, "f32[2]")
    with pytest.raises(xm.ShapeError, match=r"(?s)add.*exp") as e:
        b.add(x, foreign)
    assert "other" in str(e.value)
    with pytest.raises(xm.ShapeError, match=r"(?s)neg.*exp"):
        b.neg(foreign)
    with pytest.raises(xm.ShapeError, match="exp"):
        b.tuple([x, foreign])
    with pytest.raises(xm.ShapeError, match="exp"):
        b.select(b.lt(x, x), x, foreign)
    with pytest.raises(xm.ShapeError):
        x + foreign  # noqa: B018
    with pytest.raises(xm.ShapeError):
        foreign * x  # noqa: B018


def test_parameter_of_another_builder_raises(b) -> None:
    other = xm.XlaBuilder("other")
    (p,) = params(other, "f32[2]")
    (x,) = params(b, "f32[2]")
    with pytest.raises(xm.ShapeError, match="parameter"):
        b.mul(x, p)


# ---- broadcasting (seed 000 "Broadcasting semantics", SEMANTICS 5.X) -------------------------

BROADCAST_OK = [
    ("f32[]", "f32[2,3]", (), (2, 3)),
    ("f32[2,3]", "f32[]", (), (2, 3)),
    ("f32[]", "f32[]", (), ()),
    ("f32[2,1]", "f32[1,3]", (), (2, 3)),
    ("f32[2,1]", "f32[2,3]", (), (2, 3)),
    ("f32[1,2,5]", "f32[7,2,5]", (), (7, 2, 5)),
    ("f32[7,2,5]", "f32[7,1,5]", (), (7, 2, 5)),
    ("f32[0,3]", "f32[1,3]", (), (0, 3)),
    ("f32[2,3]", "f32[3]", (1,), (2, 3)),
    ("f32[3]", "f32[2,3]", (1,), (2, 3)),
    ("f32[3,3]", "f32[3]", (0,), (3, 3)),
    ("f32[3,3]", "f32[3]", (1,), (3, 3)),
    ("f32[4]", "f32[1,2]", (0,), (4, 2)),
    ("f32[1,2]", "f32[4,3,1]", (1, 2), (4, 3, 2)),
    ("f32[4,3,1]", "f32[1,2]", (1, 2), (4, 3, 2)),
    ("f32[2,3,4]", "f32[3,4]", (1, 2), (2, 3, 4)),
    ("f32[2,3,4]", "f32[2,4]", (0, 2), (2, 3, 4)),
    ("f32[2,1,4]", "f32[3]", (1,), (2, 3, 4)),
    ("f32[5,4,3,2]", "f32[4]", (1,), (5, 4, 3, 2)),
]


@pytest.mark.parametrize(("lhs", "rhs", "bdims", "expected"), BROADCAST_OK,
                         ids=[f"{a}+{b}@{d}" for a, b, d, _ in BROADCAST_OK])
def test_broadcast_shapes(b, lhs, rhs, bdims, expected) -> None:
    x, y = params(b, lhs, rhs)
    assert b.add(x, y, bdims).shape == xm.Shape.array(xm.F32, expected)
    assert b.sub(x, y, broadcast_dimensions=list(bdims)).shape.dimensions == expected
    assert b.lt(x, y, bdims).shape == xm.Shape.array(xm.PRED, expected)
    assert b.compare(x, y, "EQ", None, bdims).shape == xm.Shape.array(xm.PRED, expected)


BROADCAST_BAD = [
    ("f32[2,3]", "f32[3]", (0,)),  # seed 000: (2,3)+(3) with dims (0) is invalid
    ("f32[2,3]", "f32[3]", ()),  # different ranks need broadcast_dimensions
    ("f32[2,3]", "f32[2]", ()),
    ("f32[3]", "f32[2,3]", ()),
    ("f32[4,3,1]", "f32[1,2]", (2, 1)),  # not strictly increasing
    ("f32[4,3,1]", "f32[1,2]", (1, 1)),
    ("f32[2,3]", "f32[3]", (2,)),  # out of range
    ("f32[2,3]", "f32[3]", (-1,)),
    ("f32[2,3]", "f32[3]", (0, 1)),  # one entry per lower-rank dimension
    ("f32[2,3,4]", "f32[3,4]", (1,)),
    ("f32[7,2,5]", "f32[7,2,6]", ()),  # seed 000 example 4: incompatible
    ("f32[2,3]", "f32[3,2]", ()),
    ("f32[0,3]", "f32[2,3]", ()),
    ("f32[2,3]", "s32[2,3]", ()),  # element types differ
    ("f32[2,3]", "f32[1,3,1]", ()),
]


@pytest.mark.parametrize(("lhs", "rhs", "bdims"), BROADCAST_BAD,
                         ids=[f"{a}+{b}@{d}" for a, b, d in BROADCAST_BAD])
def test_broadcast_rejected(b, lhs, rhs, bdims) -> None:
    x, y = params(b, lhs, rhs)
    with pytest.raises(xm.ShapeError) as e:
        b.add(x, y, bdims)
    assert_shape_error(e, r"\badd\b", lhs, rhs)
    with pytest.raises(xm.ShapeError) as e:
        b.compare(x, y, "LT", None, bdims)
    assert_shape_error(e, r"\bcompare\b", lhs, rhs)


@pytest.mark.parametrize("method", ["add", "sub", "mul", "div", "max", "min", "pow", "atan2",
                                    "complex", "rem", "eq", "ge"])
def test_outer_broadcast_for_every_binary_float_op(b, method) -> None:
    x, y = params(b, "f32[2,1]", "f32[1,3]")
    op = getattr(b, method)(x, y)
    assert op.shape.dimensions == (2, 3)


@pytest.mark.parametrize("method", ["and_", "or_", "xor", "shift_left", "shift_right_logical",
                                    "shift_right_arithmetic", "rem", "max"])
def test_vector_broadcast_for_integer_ops(b, method) -> None:
    x, y = params(b, "u16[2,3]", "u16[3]")
    assert getattr(b, method)(x, y, (1,)).shape == S("u16[2,3]")


# Broadcasting end to end, against numpy.

def test_seed000_composition_vector_plus_1x2(b) -> None:
    """|1 2 3 4| + [5 6] with broadcast_dimensions (0) -> 4x2 (seed 000)."""
    v, m = params(b, "s32[4]", "s32[1,2]")
    b.add(v, m, (0,))
    result = run(b.build(), np.array([1, 2, 3, 4], np.int32), np.array([[5, 6]], np.int32))
    np.testing.assert_array_equal(result, [[6, 7], [7, 8], [8, 9], [9, 10]])


def test_seed000_matrix_plus_vector_dims_1(b) -> None:
    m, v = params(b, "f32[2,3]", "f32[3]")
    b.add(m, v, (1,))
    mv = np.arange(6, dtype=np.float32).reshape(2, 3)
    vv = np.array([10, 20, 30], np.float32)
    np.testing.assert_array_equal(run(b.build(), mv, vv), mv + vv[None, :])


def test_seed000_square_matrix_plus_vector_dims_0(b) -> None:
    m, v = params(b, "f32[3,3]", "f32[3]")
    b.sub(v, m, (0,))  # also checks that the operand order survives broadcasting
    mv = np.arange(9, dtype=np.float32).reshape(3, 3)
    vv = np.array([10, 20, 30], np.float32)
    np.testing.assert_array_equal(run(b.build(), mv, vv), vv[:, None] - mv)


def test_seed000_outer_operation(b) -> None:
    x, y = params(b, "f32[2,1]", "f32[1,3]")
    b.sub(x, y)
    xv = np.array([[1], [2]], np.float32)
    yv = np.array([[10, 20, 30]], np.float32)
    np.testing.assert_array_equal(run(b.build(), xv, yv), xv - yv)


def test_seed000_1x2_plus_4x3x1(b) -> None:
    m, c = params(b, "f32[1,2]", "f32[4,3,1]")
    b.add(m, c, (1, 2))
    mv = np.array([[100, 200]], np.float32)
    cv = np.arange(12, dtype=np.float32).reshape(4, 3, 1)
    result = run(b.build(), mv, cv)
    assert result.shape == (4, 3, 2)
    np.testing.assert_array_equal(result, mv.reshape(1, 1, 2) + cv)


def test_scalar_broadcast_keeps_operand_order(b) -> None:
    s, v = params(b, "s32[]", "s32[2,2]")
    b.sub(s, v)
    vv = np.array([[1, 2], [3, 4]], np.int32)
    np.testing.assert_array_equal(run(b.build(), np.int32(10), vv), 10 - vv)


def test_compare_with_broadcast_dimensions(b) -> None:
    v, m = params(b, "f32[3]", "f32[2,3]")
    b.lt(v, m, (1,))
    vv = np.array([1, 5, 3], np.float32)
    mv = np.array([[0, 6, 3], [2, 2, 4]], np.float32)
    result = run(b.build(), vv, mv)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, vv[None, :] < mv)


# Property: for equal ranks the builder agrees with numpy's broadcasting.

@st.composite
def equal_rank_pairs(draw):
    rank = draw(st.integers(0, 4))
    dims = draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank))
    lhs = [d if draw(st.booleans()) else 1 for d in dims]
    rhs = [d if draw(st.booleans()) else 1 for d in dims]
    return tuple(lhs), tuple(rhs)


@settings(max_examples=150, deadline=None)
@given(equal_rank_pairs())
def test_equal_rank_broadcast_matches_numpy(pair) -> None:
    lhs, rhs = pair
    b = xm.XlaBuilder("prop")
    x = b.parameter(0, xm.Shape.array(xm.F32, lhs))
    y = b.parameter(1, xm.Shape.array(xm.F32, rhs))
    expected = np.broadcast_shapes(lhs, rhs)
    assert b.add(x, y).shape == xm.Shape.array(xm.F32, expected)
    assert b.ge(y, x).shape == xm.Shape.array(xm.PRED, expected)


@st.composite
def incompatible_pairs(draw):
    rank = draw(st.integers(1, 4))
    lhs = draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank))
    rhs = list(lhs)
    i = draw(st.integers(0, rank - 1))
    lhs[i], rhs[i] = draw(st.permutations([0, 2, 3, 5]))[:2]  # differ, neither is 1
    return tuple(lhs), tuple(rhs)


@settings(max_examples=100, deadline=None)
@given(incompatible_pairs())
def test_incompatible_equal_rank_shapes_rejected_like_numpy(pair) -> None:
    lhs, rhs = pair
    with pytest.raises(ValueError):
        np.broadcast_shapes(lhs, rhs)
    b = xm.XlaBuilder("prop")
    x = b.parameter(0, xm.Shape.array(xm.F32, lhs))
    y = b.parameter(1, xm.Shape.array(xm.F32, rhs))
    with pytest.raises(xm.ShapeError, match="add"):
        b.add(x, y)


@st.composite
def in_dim_pairs(draw):
    """A higher-rank shape, a strictly increasing dimension mapping and a compatible
    lower-rank shape; with numpy's view of it: the low shape with 1s in unmapped dims."""
    hi_rank = draw(st.integers(1, 4))
    hi = [draw(st.integers(0, 4)) for _ in range(hi_rank)]
    mapped = sorted(draw(st.sets(st.integers(0, hi_rank - 1), min_size=1, max_size=hi_rank)))
    lo = []
    for d in mapped:
        if hi[d] == 1:
            lo.append(draw(st.integers(0, 4)))
        else:
            lo.append(hi[d] if draw(st.booleans()) else 1)
    if len(lo) == hi_rank:  # keep the ranks different
        mapped, lo = mapped[1:], lo[1:]
    expanded = [1] * hi_rank
    for d, size in zip(mapped, lo):
        expanded[d] = size
    return tuple(hi), tuple(lo), tuple(mapped), tuple(expanded)


@settings(max_examples=150, deadline=None)
@given(in_dim_pairs(), st.booleans())
def test_in_dim_broadcast_matches_numpy(case, low_on_left) -> None:
    hi, lo, mapped, expanded = case
    b = xm.XlaBuilder("prop")
    h = b.parameter(0, xm.Shape.array(xm.S32, hi))
    lo_op = b.parameter(1, xm.Shape.array(xm.S32, lo))
    expected = np.broadcast_shapes(hi, expanded)
    lhs, rhs = (lo_op, h) if low_on_left else (h, lo_op)
    assert b.mul(lhs, rhs, mapped).shape == xm.Shape.array(xm.S32, expected)


# ---- shape inference of the elementwise families ---------------------------------------------

def _u(name):
    return lambda b, *xs: getattr(b, name)(*xs)


INFER_OK = [
    # unary
    ("is_finite", ["f32[2,3]"], _u("is_finite"), "pred[2,3]"),
    ("is_finite-bf16", ["bf16[]"], _u("is_finite"), "pred[]"),
    ("abs-c64", ["c64[2]"], _u("abs"), "f32[2]"),
    ("abs-c128", ["c128[]"], _u("abs"), "f64[]"),
    ("abs-s32", ["s32[3]"], _u("abs"), "s32[3]"),
    ("real-c64", ["c64[2,2]"], _u("real"), "f32[2,2]"),
    ("imag-c128", ["c128[3]"], _u("imag"), "f64[3]"),
    ("real-f32", ["f32[3]"], _u("real"), "f32[3]"),
    ("imag-f16", ["f16[3]"], _u("imag"), "f16[3]"),
    ("neg-s8", ["s8[4]"], _u("neg"), "s8[4]"),
    ("sign-u32", ["u32[4]"], _u("sign"), "u32[4]"),
    ("floor-f16", ["f16[1]"], _u("floor"), "f16[1]"),
    ("ceil-bf16", ["bf16[1]"], _u("ceil"), "bf16[1]"),
    ("round", ["f32[2]"], _u("round"), "f32[2]"),
    ("round_nearest_afz", ["f64[2]"], _u("round_nearest_afz"), "f64[2]"),
    ("round_nearest_even", ["f32[2]"], _u("round_nearest_even"), "f32[2]"),
    ("exp-c64", ["c64[2]"], _u("exp"), "c64[2]"),
    ("expm1", ["f32[2]"], _u("expm1"), "f32[2]"),
    ("log1p", ["f64[2]"], _u("log1p"), "f64[2]"),
    ("logistic", ["f16[2]"], _u("logistic"), "f16[2]"),
    ("rsqrt", ["f32[2]"], _u("rsqrt"), "f32[2]"),
    ("cbrt", ["f32[2]"], _u("cbrt"), "f32[2]"),
    ("tanh", ["f32[0]"], _u("tanh"), "f32[0]"),
    ("erf", ["f32[2]"], _u("erf"), "f32[2]"),
    ("not-pred", ["pred[2]"], _u("not_"), "pred[2]"),
    ("not-u64", ["u64[2]"], _u("not_"), "u64[2]"),
    ("clz-u16", ["u16[2]"], _u("clz"), "u16[2]"),
    ("popcnt-s64", ["s64[2]"], _u("population_count"), "s64[2]"),
    # binary
    ("add-pred", ["pred[2]", "pred[2]"], _u("add"), "pred[2]"),
    ("mul-pred", ["pred[2]", "pred[2]"], _u("mul"), "pred[2]"),
    ("max-pred", ["pred[2]", "pred[2]"], _u("max"), "pred[2]"),
    ("and-pred", ["pred[2]", "pred[2]"], _u("and_"), "pred[2]"),
    ("shl-u8", ["u8[2]", "u8[2]"], _u("shift_left"), "u8[2]"),
    ("atan2-f64", ["f64[2]", "f64[2]"], _u("atan2"), "f64[2]"),
    ("rem-s32", ["s32[2]", "s32[2]"], _u("rem"), "s32[2]"),
    ("pow-c64", ["c64[2]", "c64[2]"], _u("pow"), "c64[2]"),
    ("div-u32", ["u32[2]", "u32[2]"], _u("div"), "u32[2]"),
    ("complex-f32", ["f32[2]", "f32[2]"], _u("complex"), "c64[2]"),
    ("complex-f64", ["f64[]", "f64[]"], _u("complex"), "c128[]"),
    ("complex-bcast", ["f32[]", "f32[3]"], _u("complex"), "c64[3]"),
    # compare
    ("lt-f32", ["f32[2,3]", "f32[2,3]"], _u("lt"), "pred[2,3]"),
    ("eq-u32", ["u32[2]", "u32[2]"], _u("eq"), "pred[2]"),
    ("ne-c64", ["c64[2]", "c64[2]"], _u("ne"), "pred[2]"),
    ("ge-pred", ["pred[2]", "pred[2]"], _u("ge"), "pred[2]"),
    ("compare-totalorder", ["f32[2]", "f32[2]"],
     lambda b, x, y: b.compare(x, y, "LT", "TOTALORDER"), "pred[2]"),
    ("compare-unsigned", ["u8[2]", "u8[2]"],
     lambda b, x, y: b.compare(x, y, "GE", "UNSIGNED"), "pred[2]"),
    ("compare-signed", ["s16[2]", "s16[2]"],
     lambda b, x, y: b.compare(x, y, "NE", "SIGNED"), "pred[2]"),
    # select / clamp
    ("select-scalar-pred", ["pred[]", "f32[2,3]", "f32[2,3]"], _u("select"), "f32[2,3]"),
    ("select", ["pred[2,3]", "s32[2,3]", "s32[2,3]"], _u("select"), "s32[2,3]"),
    ("select-scalars", ["pred[]", "c64[]", "c64[]"], _u("select"), "c64[]"),
    ("clamp-scalar-bounds", ["f32[]", "f32[2,3]", "f32[]"], _u("clamp"), "f32[2,3]"),
    ("clamp-array-bounds", ["s32[4]", "s32[4]", "s32[4]"], _u("clamp"), "s32[4]"),
    ("clamp-mixed-bounds", ["u8[]", "u8[4]", "u8[4]"], _u("clamp"), "u8[4]"),
    # types
    ("convert-f32-s8", ["f32[2,3]"], lambda b, x: b.convert_element_type(x, xm.S8), "s8[2,3]"),
    ("convert-np-dtype", ["f32[2]"], lambda b, x: b.convert_element_type(x, np.uint16), "u16[2]"),
    ("convert-bf16", ["s32[2]"],
     lambda b, x: b.convert_element_type(x, ml_dtypes.bfloat16), "bf16[2]"),
    ("convert-pred", ["pred[2]"], lambda b, x: b.convert_element_type(x, xm.F32), "f32[2]"),
    ("convert-c64", ["f32[2]"], lambda b, x: b.convert_element_type(x, xm.C64), "c64[2]"),
    ("bitcast-f32-u8", ["f32[4]"], lambda b, x: b.bitcast_convert_type(x, xm.U8), "u8[4,4]"),
    ("bitcast-u8-f32", ["u8[4,4]"], lambda b, x: b.bitcast_convert_type(x, xm.F32), "f32[4]"),
    ("bitcast-f32-f16-scalar", ["f32[]"], lambda b, x: b.bitcast_convert_type(x, xm.F16), "f16[2]"),
    ("bitcast-f16-f32", ["f16[3,2]"], lambda b, x: b.bitcast_convert_type(x, np.float32), "f32[3]"),
    ("bitcast-same-width", ["f32[2,3]"], lambda b, x: b.bitcast_convert_type(x, xm.S32), "s32[2,3]"),
    ("bitcast-s64-u16", ["s64[2]"], lambda b, x: b.bitcast_convert_type(x, xm.U16), "u16[2,4]"),
    ("reduce_precision", ["f32[2]"], lambda b, x: b.reduce_precision(x, 5, 10), "f32[2]"),
    ("reduce_precision-bf16", ["bf16[2]"], lambda b, x: b.reduce_precision(x, 8, 7), "bf16[2]"),
    ("reduce_precision-0mant", ["f64[]"], lambda b, x: b.reduce_precision(x, 1, 0), "f64[]"),
]


@pytest.mark.parametrize(("operands", "fn", "expected"), [r[1:] for r in INFER_OK],
                         ids=[r[0] for r in INFER_OK])
def test_shape_inference(b, operands, fn, expected) -> None:
    ops = params(b, *operands)
    assert fn(b, *ops).shape == S(expected)


INFER_BAD = [
    ("is_finite-s32", ["s32[2]"], _u("is_finite"), "is_finite"),
    ("is_finite-c64", ["c64[2]"], _u("is_finite"), "is_finite"),
    ("floor-s32", ["s32[2]"], _u("floor"), "floor"),
    ("exp-s32", ["s32[2]"], _u("exp"), "exp"),
    ("not-f32", ["f32[2]"], _u("not_"), "not"),
    ("clz-f32", ["f32[2]"], _u("clz"), "clz|count_leading_zeros"),
    ("popcnt-pred", ["pred[2]"], _u("population_count"), "popcnt|population_count"),
    ("real-s32", ["s32[2]"], _u("real"), "real"),
    ("imag-u8", ["u8[2]"], _u("imag"), "imag"),
    ("sub-pred", ["pred[2]", "pred[2]"], _u("sub"), "sub"),
    ("div-pred", ["pred[2]", "pred[2]"], _u("div"), "div"),
    ("rem-pred", ["pred[2]", "pred[2]"], _u("rem"), "rem"),
    ("pow-pred", ["pred[2]", "pred[2]"], _u("pow"), "pow"),
    ("shl-pred", ["pred[2]", "pred[2]"], _u("shift_left"), "shift_left"),
    ("shrl-pred", ["pred[2]", "pred[2]"], _u("shift_right_logical"), "shift_right_logical"),
    ("shra-pred", ["pred[2]", "pred[2]"], _u("shift_right_arithmetic"), "shift_right_arithmetic"),
    ("shl-f32", ["f32[2]", "f32[2]"], _u("shift_left"), "shift_left"),
    ("atan2-s32", ["s32[2]", "s32[2]"], _u("atan2"), "atan2"),
    ("and-f32", ["f32[2]", "f32[2]"], _u("and_"), "and"),
    ("xor-c64", ["c64[2]", "c64[2]"], _u("xor"), "xor"),
    ("add-mixed-types", ["f32[2]", "f64[2]"], _u("add"), "add"),
    ("complex-f16", ["f16[2]", "f16[2]"], _u("complex"), "complex"),
    ("complex-c64", ["c64[2]", "c64[2]"], _u("complex"), "complex"),
    ("lt-c64", ["c64[2]", "c64[2]"], _u("lt"), "compare"),
    ("eq-mixed", ["s32[2]", "u32[2]"], _u("eq"), "compare"),
    ("compare-bad-direction", ["f32[2]", "f32[2]"], lambda b, x, y: b.compare(x, y, "XX"), "compare"),
    ("compare-signed-f32", ["f32[2]", "f32[2]"],
     lambda b, x, y: b.compare(x, y, "LT", "SIGNED"), "compare"),
    ("compare-float-s32", ["s32[2]", "s32[2]"],
     lambda b, x, y: b.compare(x, y, "LT", "FLOAT"), "compare"),
    ("compare-bad-type", ["f32[2]", "f32[2]"],
     lambda b, x, y: b.compare(x, y, "LT", "BOGUS"), "compare"),
    ("select-s32-pred", ["s32[2,3]", "f32[2,3]", "f32[2,3]"], _u("select"), "select"),
    ("select-pred-dims", ["pred[3,2]", "f32[2,3]", "f32[2,3]"], _u("select"), "select"),
    ("select-pred-rank1-scalar-ops", ["pred[2]", "f32[]", "f32[]"], _u("select"), "select"),
    ("select-branch-types", ["pred[]", "f32[2]", "s32[2]"], _u("select"), "select"),
    ("select-branch-dims", ["pred[]", "f32[2]", "f32[3]"], _u("select"), "select"),
    ("clamp-bound-dims", ["f32[4]", "f32[2,3]", "f32[]"], _u("clamp"), "clamp"),
    ("clamp-bound-type", ["s32[]", "f32[2,3]", "f32[]"], _u("clamp"), "clamp"),
    ("clamp-pred", ["pred[]", "pred[2]", "pred[]"], _u("clamp"), "clamp"),
    ("bitcast-u8x3-f32", ["u8[4,3]"], lambda b, x: b.bitcast_convert_type(x, xm.F32), "bitcast"),
    ("bitcast-scalar-wider", ["u8[]"], lambda b, x: b.bitcast_convert_type(x, xm.F32), "bitcast"),
    ("bitcast-pred", ["pred[4]"], lambda b, x: b.bitcast_convert_type(x, xm.S8), "bitcast"),
    ("bitcast-f32-c64", ["f32[2]"], lambda b, x: b.bitcast_convert_type(x, xm.C64), "bitcast"),
    ("reduce_precision-exp0", ["f32[2]"], lambda b, x: b.reduce_precision(x, 0, 3),
     "reduce_precision"),
    ("reduce_precision-mant-neg", ["f32[2]"], lambda b, x: b.reduce_precision(x, 5, -1),
     "reduce_precision"),
    ("reduce_precision-s32", ["s32[2]"], lambda b, x: b.reduce_precision(x, 5, 2),
     "reduce_precision"),
    ("convert-tuple", ["(f32[2])"], lambda b, x: b.convert_element_type(x, xm.S8), "convert"),
    ("exp-tuple", ["(f32[2])"], _u("exp"), "exp"),
]


@pytest.mark.parametrize(("operands", "fn", "op_pattern"), [r[1:] for r in INFER_BAD],
                         ids=[r[0] for r in INFER_BAD])
def test_shape_inference_rejects(b, operands, fn, op_pattern) -> None:
    ops = params(b, *operands)
    with pytest.raises(xm.ShapeError) as e:
        fn(b, *ops)
    assert_shape_error(e, op_pattern, *operands)


@pytest.mark.parametrize("bad", ["not a type", xm.TUPLE, xm.TOKEN, np.dtype("U3")], ids=repr)
def test_convert_to_a_non_array_type_rejected(b, bad) -> None:
    (x,) = params(b, "f32[2]")
    with pytest.raises(xm.ShapeError, match="convert"):
        b.convert_element_type(x, bad)
    with pytest.raises(xm.ShapeError, match="bitcast"):
        b.bitcast_convert_type(x, bad)


# ---- operator overloads ----------------------------------------------------------------------

OVERLOADS = [
    ("x+1.0", lambda x, i, u: x + 1.0, '"xhlo.add"'),
    ("1.0+x", lambda x, i, u: 1.0 + x, '"xhlo.add"'),
    ("2*x", lambda x, i, u: 2 * x, '"xhlo.multiply"'),
    ("x-1", lambda x, i, u: x - 1, '"xhlo.subtract"'),
    ("x/2", lambda x, i, u: x / 2, '"xhlo.divide"'),
    ("x%3", lambda x, i, u: x % 3.0, '"xhlo.remainder"'),
    ("x**2", lambda x, i, u: x**2, '"xhlo.power"'),
    ("-x", lambda x, i, u: -x, '"xhlo.negate"'),
    ("x*x", lambda x, i, u: x * x, '"xhlo.multiply"'),
    ("~i", lambda x, i, u: ~i, '"xhlo.not"'),
    ("i&3", lambda x, i, u: i & 3, '"xhlo.and"'),
    ("3|i", lambda x, i, u: 3 | i, '"xhlo.or"'),
    ("i^i", lambda x, i, u: i ^ i, '"xhlo.xor"'),
    ("i<<2", lambda x, i, u: i << 2, '"xhlo.shift_left"'),
    ("i>>1", lambda x, i, u: i >> 1, '"xhlo.shift_right_arithmetic"'),
    ("u>>1", lambda x, i, u: u >> 1, '"xhlo.shift_right_logical"'),
    ("i-np.int32", lambda x, i, u: i - np.int32(4), '"xhlo.subtract"'),
]


@pytest.mark.parametrize(("expr", "op_name"), [r[1:] for r in OVERLOADS], ids=[r[0] for r in OVERLOADS])
def test_operator_overloads_build_the_right_op(b, expr, op_name) -> None:
    x, i, u = params(b, "f32[3]", "s32[3]", "u32[3]")
    result = expr(x, i, u)
    assert isinstance(result, xm.XlaOp)
    assert result.builder is b
    text = b.build(result).as_mlir_text()
    assert op_name in text
    assert result.shape.dimensions == (3,)


def test_right_shift_flavour_follows_signedness(b) -> None:
    x, i, u = params(b, "f32[3]", "s32[3]", "u32[3]")
    text = b.build([i >> 1, u >> 1]).as_mlir_text()
    assert text.count('"xhlo.shift_right_arithmetic"') == 1
    assert text.count('"xhlo.shift_right_logical"') == 1
    check_ir(text, """
        CHECK: "xhlo.shift_right_arithmetic"(%arg1, {{%[0-9]+}}) {{.*}} -> tensor<3xi32>
        CHECK: "xhlo.shift_right_logical"(%arg2, {{%[0-9]+}}) {{.*}} -> tensor<3xui32>
    """)


def test_scalar_operand_becomes_constant_of_the_other_sides_type(b) -> None:
    x, i, u = params(b, "f32[3]", "s32[3]", "u32[3]")
    text = b.build([x + 1, 2 * i, u & 1, x - np.float64(0.5), 1.0 - x]).as_mlir_text()
    check_ir(text, """
        CHECK-LABEL: func.func @main
        CHECK:      [[C0:%[0-9]+]] = "xhlo.constant"() {value = dense<1.000000e+00> : tensor<f32>}
        CHECK:      [[B0:%[0-9]+]] = "xhlo.broadcast_in_dim"([[C0]])
        CHECK:      "xhlo.add"(%arg0, [[B0]])
        CHECK:      [[C1:%[0-9]+]] = "xhlo.constant"() {value = dense<2> : tensor<i32>}
        CHECK:      [[B1:%[0-9]+]] = "xhlo.broadcast_in_dim"([[C1]])
        CHECK:      "xhlo.multiply"([[B1]], %arg1)
        CHECK:      "xhlo.constant"() {value = dense<1> : tensor<ui32>}
        CHECK:      "xhlo.and"(%arg2,
        CHECK:      "xhlo.constant"() {value = dense<5.000000e-01> : tensor<f32>}
        CHECK:      "xhlo.subtract"(%arg0,
        CHECK:      [[C4:%[0-9]+]] = "xhlo.constant"() {value = dense<1.000000e+00> : tensor<f32>}
        CHECK:      [[B4:%[0-9]+]] = "xhlo.broadcast_in_dim"([[C4]])
        CHECK:      "xhlo.subtract"([[B4]], %arg0)
    """)


def test_operator_overloads_run(b) -> None:
    x, i = params(b, "f32[4]", "s32[4]")
    comp = b.build(((2.0 - x) * 3.0 / x + x**2.0) - b.convert_element_type((i >> 1) ^ 5, xm.F32))
    xv = np.array([1, 2, 4, 0.5], np.float32)
    iv = np.array([-8, 7, 0, 100], np.int32)
    expected = ((2 - xv) * 3 / xv + xv**2) - ((iv >> 1) ^ 5).astype(np.float32)
    np.testing.assert_allclose(run(comp, xv, iv), expected, rtol=1e-6)


def test_xlaop_has_no_truth_value(b) -> None:
    (x,) = params(b, "f32[2]")
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(TypeError):
        np.asarray(x)


# ---- select of tuples (XLA's Select with a scalar predicate; issue #14) ------------------------


def test_select_of_tuples_under_a_scalar_predicate_runs(b) -> None:
    p, x, y, i = params(b, "pred[]", "f32[2]", "f32[2]", "s32[]")
    chosen = b.select(p, b.tuple([x, b.tuple([i, y])]), b.tuple([y, b.tuple([i + 1, x])]))
    assert chosen.shape == S("(f32[2], (s32[], f32[2]))")
    exe = xm.compile(b.build(chosen))
    xv, yv = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    first, (n, second) = exe(True, xv, yv, 7)
    assert first.tolist() == [1, 2] and int(n) == 7 and second.tolist() == [3, 4]
    first, (n, second) = exe(False, xv, yv, 7)
    assert first.tolist() == [3, 4] and int(n) == 8 and second.tolist() == [1, 2]


def test_select_of_tuple_parameters(b) -> None:
    p, t, u = params(b, "pred[]", "(s32[], f32[3])", "(s32[], f32[3])")
    exe = xm.compile(b.build(b.select(p, t, u)))
    n, v = exe(False, (np.int32(1), np.zeros(3, np.float32)), (np.int32(2), np.ones(3, np.float32)))
    assert int(n) == 2 and v.tolist() == [1, 1, 1]


@pytest.mark.parametrize("pred, on_true, on_false, rule", [
    ("pred[]", "(f32[2], s32[])", "(f32[2], f32[])", "same shape"),
    ("pred[]", "(f32[2], s32[])", "(f32[2])", "same shape"),
    ("pred[]", "(f32[2])", "f32[2]", "same shape"),
    ("pred[2]", "(f32[2])", "(f32[2])", "scalar pred"),
    ("s32[]", "(f32[2])", "(f32[2])", "scalar pred"),
])
def test_select_of_mismatched_tuples_is_a_shape_error(b, pred, on_true, on_false, rule) -> None:
    p, t, f = params(b, pred, on_true, on_false)
    with pytest.raises(xm.ShapeError, match=rule) as e:
        b.select(p, t, f)
    assert_shape_error(e, "select", on_true, on_false)


# ---- Python scalars as operands of builder methods (issue #18) -------------------------------


def test_builder_methods_take_python_scalars_like_the_operators(b) -> None:
    (x,) = params(b, "f32[3]")
    (i,) = params(xm.XlaBuilder("ints"), "s32[3]")
    relu = b.max(x, 0.0)
    assert relu.shape == S("f32[3]") and relu.operands[1].opdef.name == "broadcast_in_dim"
    assert b.sub(1, x).shape == S("f32[3]")
    assert b.lt(x, 0.5).shape == S("pred[3]")
    assert b.clamp(0.0, x, 6.0).shape == S("f32[3]")
    assert i.builder.max(i, 2).shape == S("s32[3]")
    got = run(b.build(b.tuple([relu, b.clamp(0.0, x, 6.0)])), np.array([-1, 2, 9], np.float32))
    assert got[0].tolist() == [0, 2, 9] and got[1].tolist() == [0, 2, 6]
    with pytest.raises(xm.ShapeError, match="without changing its value"):
        i.builder.add(i, 1.5)
    with pytest.raises(xm.ShapeError):
        b.add(x, "1")


# ---- the outer builder inside a traced sub-computation (issue #18) ---------------------------


def test_outer_builder_methods_act_on_the_traced_computation(b) -> None:
    (x,) = params(b, "f32[2,3]")
    total = b.reduce(x, 0.0, lambda acc, v: b.add(acc, b.max(v, b.constant(np.float32(0)))), [1])
    nested = b.call(lambda v: b.reduce(b.mul(v, 2.0), 0.0, lambda a, c: b.add(a, c), [1]), [x])
    exe = xm.compile(b.build(b.tuple([total, nested])))
    xv = np.array([[1, -2, 3], [-4, 5, 6]], np.float32)
    got_total, got_nested = exe(xv)
    assert got_total.tolist() == [4, 11]
    assert got_nested.tolist() == (2 * xv).sum(axis=1).tolist()
    assert b.tracing is None


def test_outer_ops_stay_foreign_inside_a_traced_computation(b) -> None:
    (x,) = params(b, "f32[2]")
    outer = b.constant(np.float32(1))
    with pytest.raises(xm.ShapeError, match="closed"):
        b.map([x], lambda v: b.add(v, outer))
    assert b.tracing is None  # a failed trace leaves the builder usable
    assert b.add(x, outer).shape == S("f32[2]")


def test_parameter_and_build_stay_on_their_own_builder(b) -> None:
    (x,) = params(b, "f32[2]")
    seen = []

    def body(v):
        seen.append(b.parameter(1, S("f32[]")))  # the outer builder's parameter, as written
        return v

    b.map([x], body)
    assert seen[0].builder is b and b.parameters[1] is seen[0]


# ---- argument kinds: every public method of a family mixin is checked -------------------------


def test_a_python_error_from_an_argument_of_the_wrong_kind_is_a_shape_error() -> None:
    from xlamlir import XlaOp
    from xlamlir.builder.recorder import Recorder

    class Probe(Recorder):  # a new family: wrapped when the class is created
        def probe(self, operand: XlaOp, sizes: Sequence[int]) -> int:
            return operand.shape.rank + len(sizes)

    b = Probe("probe")
    x = b.parameter(0, S("f32[2]"))
    assert b.probe(x, [1, 2]) == 3
    with pytest.raises(xm.ShapeError, match=r"probe.*sizes must be a sequence of ints, got int 3"):
        b.probe(x, 3)
    with pytest.raises(xm.ShapeError, match=r"probe.*operand must be an XlaOp, got NoneType"):
        b.probe(None, [1])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32,
                                   np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(), (1,), (9,), (8, 8), (3, 0), (17, 5)])
def test_splat_and_mixed_constants_of_every_type(dtype, shape) -> None:
    """A splat constant (every element equal) is stored as one value: a PRED splat of more
    than 8 elements came back as garbage (numpy misread the i1 attribute)."""
    rng = np.random.default_rng(len(shape))
    for value in (np.ones(shape, dtype), np.zeros(shape, dtype),
                  (rng.random(shape) < 0.5).astype(dtype)):
        b = xm.XlaBuilder("splat")
        b.constant(value)
        np.testing.assert_array_equal(xm.compile(b.build())(), value)


def test_python_lists_become_constants_as_their_scalars_would(b) -> None:
    """`b.constant([1.0, 2.0])` is f32 like `b.constant(1.0)` (not numpy's f64); ints are
    s32, bools pred, complex c64; a mix takes the widest; numpy values keep their dtype."""
    cases = [([1.0, 2.0], xm.F32), ([1, 2], xm.S32), ([True, False], xm.PRED), ([[1, 2.5]], xm.F32),
             ([1j, 2], xm.C64), ([], xm.F32), ([np.float64(1.0)], xm.F64), (np.array([1, 2]), xm.S64)]
    for value, element_type in cases:
        assert b.constant(value).shape.element_type == element_type, value
    with pytest.raises(xm.ShapeError, match="does not fit in s32"):
        b.constant([1, 2**40])
    comp = xm.XlaBuilder("lists")
    comp.add(comp.constant([1.5, 2.5]), comp.constant(1.0))
    np.testing.assert_array_equal(xm.compile(comp.build())(), np.array([2.5, 3.5], np.float32))
