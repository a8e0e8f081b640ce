"""Bounded dynamic dimensions of xm.Shape: ``f32[<=10,3]`` (issue #16)."""

from __future__ import annotations

import pickle

import pytest

import xlamlir as xm
from xlamlir import Shape, ShapeError


@pytest.mark.parametrize("text", [
    "f32[<=10]", "f32[<=10,3]", "s32[3,<=0]", "bf16[<=2,<=3,4]", "f32[<=10,3]{0,1}",
    "(f32[<=4], s32[])", "((u8[<=1]), token[])",
])  # fmt: skip
def test_text_round_trip(text: str) -> None:
    shape = Shape.parse(text)
    assert str(shape) == text
    assert Shape.parse(str(shape)) == shape
    assert pickle.loads(pickle.dumps(shape)) == shape
    assert Shape(text) == shape


def test_parse_allows_space_after_le() -> None:
    assert Shape.parse("f32[ <= 10 , 3 ]") == Shape.parse("f32[<=10,3]")


def test_dimensions_are_the_bounds() -> None:
    shape = Shape.array(xm.F32, (10, 3), dynamic_dimensions=(True, False))
    assert shape.dimensions == (10, 3)
    assert shape.dynamic_dimensions == (True, False)
    assert shape.is_dynamic_dimension(0) and not shape.is_dynamic_dimension(1)
    assert shape.is_dynamic()
    assert shape.numel == 30  # XLA sizes a dynamic array by its bound


def test_equality_includes_dynamism() -> None:
    dynamic = Shape.parse("f32[<=10]")
    static = Shape.parse("f32[10]")
    assert dynamic != static and hash(dynamic) != hash(static)
    assert Shape.array(xm.F32, (10,), dynamic_dimensions=(False,)) == static
    assert Shape.array(xm.F32, (10,), None, [True]) == dynamic
    assert Shape.tuple([dynamic]) != Shape.tuple([static])


def test_static_shapes_report_no_dynamism() -> None:
    shape = Shape.parse("f32[2,3]")
    assert shape.dynamic_dimensions == (False, False)
    assert not shape.is_dynamic()
    assert Shape.tuple([]).dynamic_dimensions == ()
    assert not Shape.token().is_dynamic()


def test_derived_shapes_keep_or_drop_dynamism() -> None:
    shape = Shape.parse("f32[<=10,3]{0,1}")
    assert str(shape.with_element_type(xm.S32)) == "s32[<=10,3]"
    assert str(shape.with_default_layout()) == "f32[<=10,3]"
    assert str(shape.with_layout([1, 0])) == "f32[<=10,3]"
    assert str(shape.with_dims([4])) == "f32[4]"
    assert str(shape.with_dynamic_dimensions(None)) == "f32[10,3]{0,1}"
    assert str(shape.with_dynamic_dimensions([False, True])) == "f32[10,<=3]{0,1}"


@pytest.mark.parametrize("flags", [[True], [True, False, True], "ab", 3, [1, 0]])
def test_bad_dynamic_flags(flags: object) -> None:
    with pytest.raises(ShapeError, match="dynamic_dimensions"):
        Shape.array(xm.F32, (10, 3), dynamic_dimensions=flags)


@pytest.mark.parametrize("dimension", [-1, 2, 1.0, True])
def test_is_dynamic_dimension_range(dimension: object) -> None:
    with pytest.raises(ShapeError, match="out of range"):
        Shape.parse("f32[<=10,3]").is_dynamic_dimension(dimension)


def test_is_dynamic_dimension_of_a_tuple() -> None:
    with pytest.raises(ShapeError, match="array"):
        Shape.parse("(f32[<=2])").is_dynamic_dimension(0)


@pytest.mark.parametrize("text", ["f32[?]", "f32[<=?]", "f32[<10]", "f32[<=]", "f32[=<3]",
                                  "token[<=2]"])
def test_malformed_dynamic_text(text: str) -> None:
    with pytest.raises(ShapeError, match="malformed"):
        Shape.parse(text)


def test_unbounded_dimension_message() -> None:
    with pytest.raises(ShapeError, match="bound"):
        Shape.parse("f32[?,3]")
