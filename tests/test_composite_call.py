"""composite_call (seed: CompositeCall): a call of the decomposition whose name, attributes and
version survive into the `hlo` stage, the HLO text, a reparse, and StableHLO import."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run

import xlamlir as xm

F32 = xm.Shape.array(xm.F32, ())
SEED_ATTRIBUTES = "{n = 1 : i32, tensor = dense<1> : tensor<i32>}"


def _adder() -> xm.XlaComputation:
    b = xm.XlaBuilder("add")
    b.add(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def test_seed_example_means_its_decomposition_and_keeps_its_name():
    # The seed's CompositeCall: foo.bar, the attributes dictionary, version 1.
    b = xm.XlaBuilder("composite")
    x, y = b.parameter(0, F32), b.parameter(1, F32)
    b.composite_call(_adder(), [x, y], "foo.bar", SEED_ATTRIBUTES, 1)
    comp = b.build()
    assert run(comp, np.float32(2.5), np.float32(-4)) == np.float32(-1.5)
    mlir = comp.as_mlir_text()
    assert "xhlo.composite_call" in mlir and '"foo.bar"' in mlir and "dense<1>" in mlir
    hlo = comp.as_hlo_text()
    assert "is_composite=true" in hlo, hlo
    assert 'composite.name="foo.bar"' in hlo
    assert f"composite.attributes={SEED_ATTRIBUTES}" in hlo
    assert 'composite.version="1"' in hlo


def test_defaults_tuple_results_and_no_operands():
    b = xm.XlaBuilder("t")
    x = b.parameter(0, xm.Shape.array(xm.S32, (3,)))
    pair = b.composite_call(lambda v: v.builder.tuple([v * 2, v.builder.reduce(
        v, np.int32(0), lambda a, c: a + c, [0])]), [x], "my.pair")
    three = xm.XlaBuilder("three")
    three.constant(np.float32(3))
    zero_args = b.composite_call(three.build(), [], "my.const")
    b.tuple([b.get_tuple_element(pair, 0), b.get_tuple_element(pair, 1), zero_args])
    doubled, total, const = run(b.build(), np.int32([1, -2, 7]))
    np.testing.assert_array_equal(doubled, [2, -4, 14])
    assert total == 6 and const == np.float32(3)
    hlo = b.build().as_hlo_text()
    assert 'composite.version="0"' in hlo and "composite.attributes={}" in hlo


def test_composite_survives_the_mlir_text_round_trip():
    b = xm.XlaBuilder("t")
    x, y = b.parameter(0, F32), b.parameter(1, F32)
    b.composite_call(_adder(), [x, y], "foo.bar", SEED_ATTRIBUTES, 7)
    exe = xm.compile_mlir(b.build().as_mlir_text())
    assert exe(np.float32(1), np.float32(2)) == np.float32(3)
    assert '"foo.bar"' in exe.stages["hlo"] and "version = 7" in exe.stages["hlo"]


@pytest.mark.parametrize("build, message", [
    (lambda b, x: b.composite_call(_adder(), [x], "foo.bar"), r"takes \(f32\[\], f32\[\]\)"),
    (lambda b, x: b.composite_call(_adder(), [x, x], ""), "needs a name"),
    (lambda b, x: b.composite_call(_adder(), [x, x], "a.b", version=-1), "version must be >= 0"),
    (lambda b, x: b.composite_call(_adder(), [x, x], 3), "name must be a string"),
    (lambda b, x: b.composite_call(_adder(), [x, x], "a.b", {"n": 1}), "attributes must be"),
])
def test_shape_errors(build, message):
    b = xm.XlaBuilder("t")
    x = b.parameter(0, F32)
    with pytest.raises(xm.ShapeError, match=message):
        build(b, x)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("version = 7 : i64", "version = -1 : i64"), "version must be >= 0"),
    (lambda t: t.replace('name = "foo.bar"', 'name = ""'), "needs a name"),
    (lambda t: t.replace("xhlo.composite_call\"(%arg0, %arg1)", "xhlo.composite_call\"(%arg0)")
     .replace("array<i32: 2,", "array<i32: 1,").replace("(tensor<f32>, tensor<f32>) -> tensor<f32>\n",
                                                       "(tensor<f32>) -> tensor<f32>\n", 1),
     "decomposition takes"),
])
def test_shape_rules_hold_for_parsed_text(edit, message):
    b = xm.XlaBuilder("t")
    x, y = b.parameter(0, F32), b.parameter(1, F32)
    b.composite_call(_adder(), [x, y], "foo.bar", "{n = 1 : i32}", 7)
    text = b.build().as_mlir_text()
    bad = edit(text)
    assert bad != text
    with pytest.raises(xm.CompileError, match=message):
        xm.compile_mlir(bad)


def test_a_composite_inside_a_reduction_body_is_scalar_code():
    # A reducer whose body is a composite: lowered as scalar code like a call.
    def reducer(a, c):
        return a.builder.composite_call(lambda p, q: p.builder.max(p, q), [a, c], "my.max")

    b = xm.XlaBuilder("t")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    b.reduce(x, np.float32(-np.inf), reducer, [1])
    data = np.float32([[1, 5, -2], [-7, -3, -9]])
    np.testing.assert_array_equal(run(b.build(), data), [5, -3])
