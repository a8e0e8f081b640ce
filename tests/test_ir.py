"""FileCheck tests of the "hlo" IR: the text of every elementwise family as built, and
round trips of that text through the parser and compile_mlir. The lowering ("linalg",
and the fused, vectorized acceptance loop) is in test_ir_lowering.py.

Our ops print in generic form, so checks match pieces of lines.
"""

# ruff: noqa: E501  (CHECK lines mirror whole lines of IR)

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir_here

import xlamlir as xm

S = xm.Shape.parse


def params(b: xm.XlaBuilder, *shapes: str) -> list[xm.XlaOp]:
    return [b.parameter(i, S(s), f"p{i}") for i, s in enumerate(shapes)]


# ---- "hlo": the module as built --------------------------------------------------------------


def test_unary_hlo(b) -> None:
    x, c = params(b, "f32[2,3]", "c64[2]")
    text = b.build([b.is_finite(b.exp(x)), b.abs(c), b.real(c), b.imag(c), b.neg(x)]).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2xcomplex<f32>>)
    # CHECK:       [[E:%[0-9]+]] = "xhlo.exponential"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    # CHECK-NEXT:  "xhlo.is_finite"([[E]]) : (tensor<2x3xf32>) -> tensor<2x3xi1>
    # CHECK-NEXT:  "xhlo.abs"(%arg1) : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
    # CHECK-NEXT:  "xhlo.real"(%arg1) : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
    # CHECK-NEXT:  "xhlo.imag"(%arg1) : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
    # CHECK-NEXT:  "xhlo.negate"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    # CHECK:       "xhlo.tuple"
    # CHECK:       return
    check_ir_here(text)


def test_integer_unary_hlo(b) -> None:
    i, u, p = params(b, "s8[4]", "u64[4]", "pred[4]")
    text = b.build([b.clz(i), b.population_count(u), b.not_(p), b.sign(u)]).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<4xi8>, %arg1: tensor<4xui64>, %arg2: tensor<4xi1>)
    # CHECK:       "xhlo.count_leading_zeros"(%arg0) : (tensor<4xi8>) -> tensor<4xi8>
    # CHECK:       "xhlo.popcnt"(%arg1) : (tensor<4xui64>) -> tensor<4xui64>
    # CHECK:       "xhlo.not"(%arg2) : (tensor<4xi1>) -> tensor<4xi1>
    # CHECK:       "xhlo.sign"(%arg1) : (tensor<4xui64>) -> tensor<4xui64>
    check_ir_here(text)


def test_binary_with_implicit_broadcast_hlo(b) -> None:
    m, v, s = params(b, "f32[2,3]", "f32[3]", "f32[]")
    b.mul(s, b.add(m, v, (1,)))
    text = b.build().as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<f32>) -> tensor<2x3xf32>
    # CHECK-DAG:   [[V:%[0-9]+]] = "xhlo.broadcast_in_dim"(%arg1) {broadcast_dimensions = array<i64: 1>, out_dim_size = array<i64: 2, 3>} : (tensor<3xf32>) -> tensor<2x3xf32>
    # CHECK-DAG:   [[S:%[0-9]+]] = "xhlo.broadcast_in_dim"(%arg2) {broadcast_dimensions = array<i64>, out_dim_size = array<i64: 2, 3>} : (tensor<f32>) -> tensor<2x3xf32>
    # CHECK:       [[A:%[0-9]+]] = "xhlo.add"(%arg0, [[V]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    # CHECK:       [[R:%[0-9]+]] = "xhlo.multiply"([[S]], [[A]])
    # CHECK:       return [[R]] : tensor<2x3xf32>
    check_ir_here(text)


def test_degenerate_dims_and_equal_shapes_hlo(b) -> None:
    x, y, z = params(b, "s32[2,1]", "s32[1,3]", "s32[2,3]")
    text = b.build(b.sub(b.max(x, y), z)).as_mlir_text()
    # CHECK-LABEL: func.func @main
    # CHECK:       [[X:%[0-9]+]] = "xhlo.broadcast_in_dim"(%arg0) {broadcast_dimensions = array<i64: 0, 1>, out_dim_size = array<i64: 2, 3>}
    # CHECK:       [[Y:%[0-9]+]] = "xhlo.broadcast_in_dim"(%arg1) {broadcast_dimensions = array<i64: 0, 1>, out_dim_size = array<i64: 2, 3>}
    # CHECK:       [[M:%[0-9]+]] = "xhlo.maximum"([[X]], [[Y]]) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
    # CHECK-NOT:   broadcast_in_dim
    # CHECK:       "xhlo.subtract"([[M]], %arg2)
    check_ir_here(text)


def test_compare_hlo(b) -> None:
    x, i, u = params(b, "f32[4]", "s32[4]", "u32[4]")
    text = b.build([b.lt(x, x), b.eq(i, i), b.ge(u, u), b.compare(x, x, "NE", "TOTALORDER")]).as_mlir_text()
    # CHECK-LABEL: func.func @main
    # CHECK:       "xhlo.compare"(%arg0, %arg0)
    # CHECK-SAME:  compare_type = "FLOAT"
    # CHECK-SAME:  comparison_direction = "LT"
    # CHECK-SAME:  (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    # CHECK:       "xhlo.compare"(%arg1, %arg1)
    # CHECK-SAME:  compare_type = "SIGNED"
    # CHECK-SAME:  comparison_direction = "EQ"
    # CHECK:       "xhlo.compare"(%arg2, %arg2)
    # CHECK-SAME:  compare_type = "UNSIGNED"
    # CHECK-SAME:  comparison_direction = "GE"
    # CHECK-SAME:  (tensor<4xui32>, tensor<4xui32>) -> tensor<4xi1>
    # CHECK:       "xhlo.compare"(%arg0, %arg0)
    # CHECK-SAME:  compare_type = "TOTALORDER"
    # CHECK-SAME:  comparison_direction = "NE"
    check_ir_here(text)


def test_select_and_clamp_hlo(b) -> None:
    p, x, y, lo = params(b, "pred[]", "f32[4]", "f32[4]", "f32[]")
    text = b.build(b.clamp(lo, b.select(p, x, y), b.constant(np.float32(1)))).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<i1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<f32>)
    # CHECK:       [[S:%[0-9]+]] = "xhlo.select"(%arg0, %arg1, %arg2) : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    # CHECK:       [[HI:%[0-9]+]] = "xhlo.constant"() {value = dense<1.000000e+00> : tensor<f32>}
    # CHECK:       "xhlo.clamp"(%arg3, [[S]], [[HI]]) : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    check_ir_here(text)


def test_type_conversions_hlo(b) -> None:
    x, h = params(b, "f32[4]", "bf16[2,2]")
    text = b.build([b.convert_element_type(x, xm.S16), b.convert_element_type(x, np.uint8),
                    b.bitcast_convert_type(x, xm.U8), b.bitcast_convert_type(h, xm.S16),
                    b.bitcast_convert_type(h, xm.F32), b.reduce_precision(x, 5, 10)]).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<2x2xbf16>)
    # CHECK:       "xhlo.convert"(%arg0) {new_element_type = i16} : (tensor<4xf32>) -> tensor<4xi16>
    # CHECK:       "xhlo.convert"(%arg0) {new_element_type = ui8} : (tensor<4xf32>) -> tensor<4xui8>
    # CHECK:       "xhlo.bitcast_convert"(%arg0) {new_element_type = ui8} : (tensor<4xf32>) -> tensor<4x4xui8>
    # CHECK:       "xhlo.bitcast_convert"(%arg1) {new_element_type = i16} : (tensor<2x2xbf16>) -> tensor<2x2xi16>
    # CHECK:       "xhlo.bitcast_convert"(%arg1) {new_element_type = f32} : (tensor<2x2xbf16>) -> tensor<2xf32>
    # CHECK:       "xhlo.reduce_precision"(%arg0)
    # CHECK-SAME:  exponent_bits = 5 : i64
    # CHECK-SAME:  mantissa_bits = 10 : i64
    # CHECK-SAME:  (tensor<4xf32>) -> tensor<4xf32>
    check_ir_here(text)


def test_constants_hlo(b) -> None:
    text = b.build([
        b.constant(1.5), b.constant(7), b.constant(True),
        b.constant(np.array([1, -2], np.int64)), b.constant(np.uint8(255)),
        b.constant(np.array([[1, 2], [3, 4]], np.float32)),
        b.constant(np.array([0.5, -0.0], np.float16)),
        b.constant(np.array([1, 2, 3], xm.dtype_of(xm.BF16))),
        b.constant(np.zeros((0, 3), np.float64)),
    ]).as_mlir_text()
    # CHECK-LABEL: func.func @main() -> tuple<
    # CHECK: "xhlo.constant"() {value = dense<1.500000e+00> : tensor<f32>} : () -> tensor<f32>
    # CHECK: "xhlo.constant"() {value = dense<7> : tensor<i32>} : () -> tensor<i32>
    # CHECK: "xhlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    # CHECK: "xhlo.constant"() {value = dense<[1, -2]> : tensor<2xi64>} : () -> tensor<2xi64>
    # CHECK: "xhlo.constant"() {value = dense<255> : tensor<ui8>} : () -> tensor<ui8>
    # CHECK: "xhlo.constant"() {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}
    # CHECK: "xhlo.constant"() {value = dense<[5.000000e-01, -0.000000e+00]> : tensor<2xf16>}
    # CHECK: "xhlo.constant"() {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xbf16>}
    # CHECK: "xhlo.constant"() {value = dense<> : tensor<0x3xf64>} : () -> tensor<0x3xf64>
    check_ir_here(text)


def test_complex_constant_hlo(b) -> None:
    # A complex constant is held as its (re, im) real view: LLVM 22's Python bindings
    # cannot read a complex dense attribute back (dialect/attributes.py).
    text = b.build(b.constant(np.array([1 + 2j, -0.5j], np.complex64))).as_mlir_text()
    # CHECK-LABEL: func.func @main() -> tensor<2xcomplex<f32>>
    # CHECK:       "xhlo.constant"()
    # CHECK-SAME:  dense<{{\[}}[1.000000e+00, 2.000000e+00], [{{-?}}0.000000e+00, -5.000000e-01]]> : tensor<2x2xf32>
    # CHECK-SAME:  -> tensor<2xcomplex<f32>>
    check_ir_here(text)


def test_tuple_and_get_tuple_element_hlo(b) -> None:
    t, lay = params(b, "(f32[2], s32[])", "f32[2,3]{0,1}")
    text = b.build([b.get_tuple_element(t, 1), b.get_tuple_element(t, 0), lay]).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tuple<tensor<2xf32>, tensor<i32>>, %arg1: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>})
    # CHECK-SAME:  -> tuple<tensor<i32>, tensor<2xf32>, tensor<2x3xf32>>
    # CHECK:       [[I:%[0-9]+]] = "xhlo.get_tuple_element"(%arg0) {index = 1 : i64} : (tuple<tensor<2xf32>, tensor<i32>>) -> tensor<i32>
    # CHECK:       [[F:%[0-9]+]] = "xhlo.get_tuple_element"(%arg0) {index = 0 : i64} : (tuple<tensor<2xf32>, tensor<i32>>) -> tensor<2xf32>
    # CHECK:       [[T:%[0-9]+]] = "xhlo.tuple"([[I]], [[F]], %arg1)
    # CHECK-SAME:  -> tuple<tensor<i32>, tensor<2xf32>, tensor<2x3xf32>>
    # CHECK:       return [[T]]
    check_ir_here(text)


def test_result_layout_hlo(b) -> None:
    (x,) = params(b, "f32[2,3]{0,1}")
    text = b.build(x).as_mlir_text()
    # CHECK-LABEL: func.func @main(%arg0: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>})
    # CHECK-SAME:  -> (tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>})
    # CHECK-NEXT:  return %arg0
    check_ir_here(text)


def test_hlo_stage_is_the_built_module(b) -> None:
    x, y = params(b, "f32[2,3]", "f32[3]")
    comp = b.build(b.tanh(b.sub(x, y, (1,))))
    exe = xm.compile(comp)
    assert exe.stages["hlo"] == comp.as_mlir_text()
    # CHECK-LABEL: func.func @main
    # CHECK:       "xhlo.broadcast_in_dim"(%arg1)
    # CHECK:       "xhlo.subtract"
    # CHECK:       "xhlo.tanh"
    check_ir_here(exe.stages["hlo"])


# ---- round trips of the "hlo" text -----------------------------------------------------------


class _Stop(Exception):
    pass


def reparse(text: str) -> str:
    """`text` parsed by compile_mlir in a fresh context and printed again, before lowering."""
    seen: list[str] = []

    def record(op, pass_) -> None:
        seen.append(str(op))
        raise _Stop

    with pytest.raises(xm.CompileError) as e:
        xm.compile_mlir(text, xm.Pipeline.default().replace("hlo", record))
    assert isinstance(e.value.__cause__, _Stop), e.value
    return seen[0]


def _elementwise(b):
    m, v, s, i = params(b, "f32[2,3]", "f32[3]", "f32[]", "s32[2,3]")
    return b.select(b.lt(b.add(m, v, (1,)), s * 2.0), b.exp(m),
                    b.convert_element_type(b.clamp(b.constant(0), i, b.constant(9)), xm.F32))


def _types(b):
    x, u, h = params(b, "f32[4]", "u32[4]", "bf16[4]")
    return [b.bitcast_convert_type(x, xm.U8), b.reduce_precision(x, 5, 10), u >> 3, ~u,
            b.convert_element_type(h, xm.F64), b.is_finite(h), b.constant(np.array([1, 2], np.uint64)),
            b.constant(np.float16(-0.0)), b.constant(np.array([np.nan, np.inf], np.float32))]


def _tuples_and_layouts(b):
    t, lay = params(b, "(f32[2], (s32[], pred[3]))", "f32[2,3]{0,1}")
    inner = b.get_tuple_element(t, 1)
    return [b.get_tuple_element(inner, 1), lay, b.tuple([b.get_tuple_element(t, 0)])]


ROUND_TRIP = {"elementwise": _elementwise, "types": _types, "tuples-layouts": _tuples_and_layouts}


@pytest.mark.parametrize("make", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_hlo_text_round_trips_through_the_parser(b, make) -> None:
    text = b.build(make(b)).as_mlir_text()
    assert reparse(text) == text


@pytest.mark.parametrize("make", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_hlo_text_round_trips_through_compile_mlir(b, make) -> None:
    text = b.build(make(b)).as_mlir_text()
    exe = xm.compile_mlir(text)
    assert exe.stages["hlo"] == text


def test_round_trip_runs_the_same(b) -> None:
    comp = b.build(_elementwise(b))
    exe = xm.compile_mlir(comp.as_mlir_text())
    m = np.array([[0, 1, -1], [2, -3, 0.5]], np.float32)
    v = np.array([1, -1, 0], np.float32)
    s = np.float32(0.75)
    i = np.array([[-3, 4, 20], [9, 0, 5]], np.int32)
    expected = np.where(m + v < 2 * s, np.exp(m), np.clip(i, 0, 9).astype(np.float32))
    np.testing.assert_allclose(exe(m, v, s, i), expected, rtol=1e-6)
    np.testing.assert_array_equal(exe(m, v, s, i), xm.compile(comp)(m, v, s, i))
