"""HLO text of bounded dynamic shapes (dialect/hlo_text.py, dialect/hlo_dynamic.py): the
set-dimension-size result, the values computed from it, the entry's result and signature
print XLA's `f32[<=10]` form, recovered from the static module (docs/hlo_text.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlamlir as xm
from xlamlir import Shape

S32 = Shape.scalar(xm.S32)


def _line(text: str, opcode: str) -> str:
    """The one instruction line of `opcode` (its result shape, operands and attributes),
    instruction numbers as N."""
    lines = [line.strip() for line in text.splitlines()
             if re.search(rf"^\s*(ROOT )?%[\w.-]+ = (\(.*?\)|\S+) {re.escape(opcode)}\(", line)]
    assert len(lines) == 1, (opcode, text)
    return _numbered(lines[0])


def _numbered(text: str) -> str:
    return re.sub(r"(%[\w-]+)\.\d+", r"\1.N", text)


def test_set_dimension_size_as_xla_prints_it() -> None:
    """The golden line of XLA's mhlo_to_hlo test: `f32[4,<=2] set-dimension-size(f32[4,2]
    %arg, s32[] %size), dimensions={1}` (with layouts, as HloModule::ToString adds)."""
    b = xm.XlaBuilder("sds")
    p, n = b.parameter(0, Shape.array(xm.F32, (4, 2))), b.parameter(1, S32)
    b.get_dimension_size(b.set_dimension_size(p, n, 1), 0)
    text = b.build().as_hlo_text()
    assert _line(text, "set-dimension-size") == (
        "%set-dimension-size.N = f32[4,<=2]{1,0} set-dimension-size(f32[4,2]{1,0} %parameter.N, "
        "s32[] %parameter.N), dimensions={1}")


def test_entry_result_signature_and_layout_are_dynamic() -> None:
    """The entry returns (padded, size) in the module; XLA's text returns the dynamic array:
    no packing tuple, the ROOT, the ENTRY signature and the layout show `<=`."""
    b = xm.XlaBuilder("dyn")
    p, n = b.parameter(0, Shape.array(xm.F32, (10,))), b.parameter(1, S32)
    text = b.build(b.set_dimension_size(p, n, 0) * 2).as_hlo_text()
    assert text.startswith("HloModule dyn, entry_computation_layout={(f32[10]{0}, s32[])->f32[<=10]{0}}")
    assert "ENTRY %dyn (parameter.1: f32[10], parameter.2: s32[]) -> f32[<=10] {" in text
    assert _line(text, "multiply") == ("ROOT %multiply.N = f32[<=10]{0} multiply(f32[<=10]{0} "
                                       "%set-dimension-size.N, f32[10]{0} %broadcast.N)")
    assert "tuple(" not in text  # the (padded, size) packing is the module's, not XLA's


def test_a_tuple_result_and_the_masked_reduce() -> None:
    b = xm.XlaBuilder("pair")
    p, n = b.parameter(0, Shape.array(xm.F32, (10,))), b.parameter(1, S32)
    y = b.set_dimension_size(p, n, 0) * b.set_dimension_size(p, n, 0)
    total = b.reduce(y, np.float32(0), lambda a, v: a + v, [0])
    text = b.build(b.tuple([y, total])).as_hlo_text()
    assert "->(f32[<=10]{0}, f32[])}" in text.splitlines()[0]
    assert "-> (f32[<=10], f32[]) {" in text
    assert _line(text, "reduce").startswith("%reduce.N = f32[] reduce(f32[<=10]{0} %select.")
    assert _line(text, "tuple").startswith(
        "ROOT %tuple.N = (f32[<=10]{0}, f32[]) tuple(f32[<=10]{0} %multiply.N")


def test_dynamism_follows_the_ops_as_xla_shape_inference() -> None:
    b = xm.XlaBuilder("ops")
    p, n = b.parameter(0, Shape.array(xm.F32, (6, 4))), b.parameter(1, S32)
    d = b.set_dimension_size(p, n, 0)  # f32[<=6,4]
    t = b.transpose(d, [1, 0])
    wide = b.broadcast_in_dim(d, (3, 6, 4), [1, 2])
    dot = b.dot_general(d, b.parameter(2, Shape.array(xm.F32, (4, 5))), (([1], [0]), ([], [])))
    flat = b.reshape(d, (24,))
    kept = b.reduce(d, np.float32(0), lambda a, v: a + v, [1])
    conv = b.convert_element_type(d, xm.F64)
    text = b.build(b.tuple([t, wide, dot, flat, kept, conv])).as_hlo_text()
    assert _line(text, "transpose").startswith("%transpose.N = f32[4,<=6]{1,0} transpose(f32[<=6,4]{1,0}")
    assert _line(text, "broadcast").startswith("%broadcast.N = f32[3,<=6,4]{2,1,0} broadcast(")
    assert _line(text, "dot").startswith("%dot.N = f32[<=6,5]{1,0} dot(")
    assert _line(text, "reshape").startswith("%reshape.N = f32[<=24]{0} reshape(")
    assert _line(text, "reduce").startswith(
        "%reduce.N = f32[<=6]{0} reduce(f32[<=6,4]{1,0} %set-dimension-size")
    assert _line(text, "convert").startswith("%convert.N = f64[<=6,4]{1,0} convert(")


def test_dynamic_reshape_prints_xla_operands_and_bounds() -> None:
    """XLA's dynamic-reshape takes the array and the output sizes; the bounds and dynamic
    flags are its shape."""
    b = xm.XlaBuilder("dr")
    p, n = b.parameter(0, Shape.array(xm.F32, (4, 6))), b.parameter(1, S32)
    b.dynamic_reshape(p, [n, b.constant(np.int32(2))], [24, 2], [True, False])
    text = b.build().as_hlo_text()
    line = _line(text, "dynamic-reshape")
    assert line == ("ROOT %dynamic-reshape.N = f32[<=24,2]{1,0} dynamic-reshape(f32[4,6]{1,0} "
                    "%parameter.N, s32[] %clamp.N, s32[] %constant.N)")
    assert "new_size_bounds" not in text


def test_a_static_root_stays_static() -> None:
    """remove_dynamic_dimension_size emits no op: what the entry returns is as its type says."""
    b = xm.XlaBuilder("removed")
    p = b.parameter(0, Shape.array(xm.F32, (10,)))
    d = b.set_dimension_size(p, b.constant(np.int32(3)), 0)
    text = b.build(b.remove_dynamic_dimension_size(d * 2, 0)).as_hlo_text()
    assert "->f32[10]{0}}" in text.splitlines()[0] and ") -> f32[10] {" in text
    assert _line(text, "multiply").startswith("ROOT %multiply.N = f32[10]{0} multiply(f32[<=10]{0} "
                                              "%set-dimension-size.N")


@pytest.mark.parametrize("size", [3, None])
def test_the_executable_prints_the_same(size: int | None) -> None:
    b = xm.XlaBuilder("exe")
    p, n = b.parameter(0, Shape.array(xm.F32, (10,))), b.parameter(1, S32)
    b.set_dimension_size(p, n if size is None else b.constant(np.int32(size)), 0)
    comp = b.build()
    assert "ROOT %set-dimension-size." in comp.as_hlo_text()
    assert xm.compile(comp).as_hlo_text() == comp.as_hlo_text()


def test_multi_result_ops_and_ops_along_static_dimensions() -> None:
    """A variadic reduce (one tuple-shaped instruction, a get-tuple-element per result),
    sort, concatenate, slice and pad along the static dimension keep the dynamic one."""
    b = xm.XlaBuilder("multi")
    p, n = b.parameter(0, Shape.array(xm.F32, (6, 4))), b.parameter(1, S32)
    d = b.set_dimension_size(p, n, 0)
    i = b.convert_element_type(d, xm.S32)
    pair = b.reduce([d, i], [np.float32(0), np.int32(0)],
                    lambda a, c, x, y: [a.builder.add(a, x), a.builder.add(c, y)], [1])
    low = b.get_tuple_element(pair, 0)
    parts = [b.sort(d, dimension=1), b.concat_in_dim([d, d], 1), b.slice(d, [0, 1], [6, 3], [1, 1]),
             b.pad(d, np.float32(0), [(0, 0, 0), (1, 2, 0)])]
    text = _numbered(b.build(b.tuple([low, *parts])).as_hlo_text())
    assert "%reduce.N = (f32[<=6]{0}, s32[<=6]{0}) reduce(f32[<=6,4]{1,0}" in text
    assert ("%get-tuple-element.N = f32[<=6]{0} get-tuple-element((f32[<=6]{0}, s32[<=6]{0}) "
            "%reduce.N), index=0") in text
    assert "= f32[<=6,4]{1,0} sort(" in text
    assert "= f32[<=6,8]{1,0} concatenate(" in text
    assert "= f32[<=6,2]{1,0} slice(" in text
    assert "= f32[<=6,7]{1,0} pad(" in text
    assert text.splitlines()[0].endswith("->(f32[<=6]{0}, f32[<=6,4]{1,0}, f32[<=6,8]{1,0}, f32[<=6,2]{1,0}, "
                                         "f32[<=6,7]{1,0})}")
