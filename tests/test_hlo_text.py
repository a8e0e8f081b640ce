"""dialect.hlo_text: modules printed as XLA's HLO text (golden texts), and every op kind prints."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.dialect import REGISTRY
from xlamlir.dialect.hlo_text import hlo_text

F32 = xm.F32


def arr(t: xm.PrimitiveType, *dims: int) -> xm.Shape:
    return xm.Shape.array(t, dims)


def text_of(comp: xm.XlaComputation, names: list[str] | None = None) -> str:
    return hlo_text(comp.as_mlir_text(), comp.name, names)


def test_axpy() -> None:
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, arr(F32), name="alpha")
    x = b.parameter(1, arr(F32, 4), name="x")
    y = b.parameter(2, arr(F32, 4), name="y")
    b.add(b.mul(alpha, x), y)
    assert text_of(b.build(), ["alpha", "x", "y"]) == """\
HloModule axpy, entry_computation_layout={(f32[], f32[4]{0}, f32[4]{0})->f32[4]{0}}

ENTRY %axpy (alpha.1: f32[], x.2: f32[4], y.3: f32[4]) -> f32[4] {
  %alpha.1 = f32[] parameter(0)
  %x.2 = f32[4]{0} parameter(1)
  %y.3 = f32[4]{0} parameter(2)
  %broadcast.4 = f32[4]{0} broadcast(f32[] %alpha.1), dimensions={}
  %multiply.5 = f32[4]{0} multiply(f32[4]{0} %broadcast.4, f32[4]{0} %x.2)
  ROOT %add.6 = f32[4]{0} add(f32[4]{0} %multiply.5, f32[4]{0} %y.3)
}
"""


def test_reduce_with_a_computation_and_layouts() -> None:
    b = xm.XlaBuilder("rowsum")
    x = b.parameter(0, xm.Shape.array(F32, (2, 3), (0, 1)))
    b.reduce(x, b.constant(np.float32(0)), lambda p, q: p + q, [1])
    assert text_of(b.build()) == """\
HloModule rowsum, entry_computation_layout={(f32[2,3]{0,1})->f32[2]{0}}

%rowsum_reduce_computation.1 (parameter.2: f32[], parameter.3: f32[]) -> f32[] {
  %parameter.2 = f32[] parameter(0)
  %parameter.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(f32[] %parameter.2, f32[] %parameter.3)
}

ENTRY %rowsum (parameter.5: f32[2,3]) -> f32[2] {
  %parameter.5 = f32[2,3]{0,1} parameter(0)
  %constant.6 = f32[] constant(0)
  ROOT %reduce.7 = f32[2]{0} reduce(f32[2,3]{0,1} %parameter.5, f32[] %constant.6), dimensions={1}, \
to_apply=%rowsum_reduce_computation.1
}
"""


def test_variadic_reduce_is_a_tuple_with_get_tuple_elements() -> None:
    b = xm.XlaBuilder("argmax")
    x = b.parameter(0, arr(F32, 4))
    i = b.iota(arr(xm.S32, 4), 0)

    def pick(a, ai, c, ci):  # noqa: ANN001, ANN202
        bb = a.builder
        take = bb.gt(c, a)
        return bb.select(take, c, a), bb.select(take, ci, ai)

    r = b.reduce([x, i], [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))], pick, [0])
    b.get_tuple_element(r, 1)
    text = text_of(b.build())
    assert re.search(r"%reduce\.\d+ = \(f32\[\], s32\[\]\) reduce\(f32\[4\]\{0\} %parameter\.\d+, "
                     r"s32\[4\]\{0\} %iota\.\d+, f32\[\] %constant\.\d+, s32\[\] %constant\.\d+\), "
                     r"dimensions=\{0\}, to_apply=%argmax_reduce_computation\.\d+", text)
    assert re.search(r"%get-tuple-element\.\d+ = s32\[\] get-tuple-element\(\(f32\[\], s32\[\]\) "
                     r"%reduce\.\d+\), index=1", text)
    assert "constant(-inf)" in text


def test_while_loop() -> None:
    b = xm.XlaBuilder("loop")
    n = b.parameter(0, arr(xm.S32))

    def cond(t):  # noqa: ANN001, ANN202
        bb = t.builder
        return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(10)))

    def body(t):  # noqa: ANN001, ANN202
        bb = t.builder
        return bb.tuple([bb.get_tuple_element(t, 0) + 1])

    b.while_(cond, body, b.tuple([n]))
    assert text_of(b.build()) == """\
HloModule loop, entry_computation_layout={(s32[])->(s32[])}

%loop_while_condition.1 (parameter.2: (s32[])) -> pred[] {
  %parameter.2 = (s32[]) parameter(0)
  %get-tuple-element.3 = s32[] get-tuple-element((s32[]) %parameter.2), index=0
  %constant.4 = s32[] constant(10)
  ROOT %compare.5 = pred[] compare(s32[] %get-tuple-element.3, s32[] %constant.4), direction=LT
}

%loop_while_body.6 (parameter.7: (s32[])) -> (s32[]) {
  %parameter.7 = (s32[]) parameter(0)
  %get-tuple-element.8 = s32[] get-tuple-element((s32[]) %parameter.7), index=0
  %constant.9 = s32[] constant(1)
  %add.10 = s32[] add(s32[] %get-tuple-element.8, s32[] %constant.9)
  ROOT %tuple.11 = (s32[]) tuple(s32[] %add.10)
}

ENTRY %loop (parameter.12: s32[]) -> (s32[]) {
  %parameter.12 = s32[] parameter(0)
  %tuple.13 = (s32[]) tuple(s32[] %parameter.12)
  ROOT %while.14 = (s32[]) while((s32[]) %tuple.13), condition=%loop_while_condition.1, \
body=%loop_while_body.6
}
"""


def test_conditionals() -> None:
    b = xm.XlaBuilder("cond")
    x = b.parameter(0, arr(F32, 2))
    b.conditional(b.parameter(1, arr(xm.PRED)), [lambda a: -a, lambda a: a], [x, x])
    text = text_of(b.build())
    assert re.search(r"ROOT %conditional\.\d+ = f32\[2\]\{0\} conditional\(pred\[\] %parameter\.\d+, "
                     r"f32\[2\]\{0\} %parameter\.\d+, f32\[2\]\{0\} %parameter\.\d+\), "
                     r"true_computation=%cond_conditional_branch_0\.\d+, "
                     r"false_computation=%cond_conditional_branch_1\.\d+\n", text)
    b = xm.XlaBuilder("switch")
    x = b.parameter(0, arr(F32, 2))
    b.conditional(b.parameter(1, arr(xm.S32)), [lambda a: -a, lambda a: a, lambda a: a * 2],
                  [x, x, x])
    assert re.search(r"branch_computations=\{%switch_conditional_branch_0\.\d+, "
                     r"%switch_conditional_branch_1\.\d+, %switch_conditional_branch_2\.\d+\}",
                     text_of(b.build()))


def test_dot_general() -> None:
    b = xm.XlaBuilder("bmm")
    lhs, rhs = b.parameter(0, arr(F32, 2, 3, 4)), b.parameter(1, arr(F32, 2, 4, 5))
    b.dot_general(lhs, rhs, xm.DotDimensionNumbers((2,), (1,), (0,), (0,)), precision_config="HIGHEST")
    assert text_of(b.build()).splitlines()[-2] == (
        "  ROOT %dot.3 = f32[2,3,5]{2,1,0} dot(f32[2,3,4]{2,1,0} %parameter.1, f32[2,4,5]{2,1,0} "
        "%parameter.2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}, operand_precision={highest,highest}")


def test_convolution() -> None:
    b = xm.XlaBuilder("conv")
    lhs, rhs = b.parameter(0, arr(F32, 1, 8, 8, 3)), b.parameter(1, arr(F32, 3, 3, 3, 16))
    b.conv_general_dilated(lhs, rhs, (2, 1), [(1, 1), (1, 1)], rhs_dilation=(1, 2),
                           dimension_numbers=xm.ConvDimensionNumbers.from_layouts("NHWC", "HWIO", "NHWC"))
    assert text_of(b.build()).splitlines()[-2] == (
        "  ROOT %convolution.3 = f32[1,4,6,16]{3,2,1,0} convolution(f32[1,8,8,3]{3,2,1,0} "
        "%parameter.1, f32[3,3,3,16]{3,2,1,0} %parameter.2), window={size=3x3 stride=2x1 "
        "pad=1_1x1_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f")


def test_gather_and_scatter() -> None:
    b = xm.XlaBuilder("gs")
    x = b.parameter(0, arr(F32, 5, 3))
    idx = b.parameter(1, arr(xm.S32, 2, 1))
    g = b.gather(x, idx, xm.GatherDimensionNumbers((1,), (0,), (0,), 1), (1, 3), indices_are_sorted=True)
    b.scatter(x, idx, g, lambda p, q: p + q, xm.ScatterDimensionNumbers((1,), (0,), (0,), 1))
    lines = text_of(b.build()).splitlines()
    assert ("%gather.7 = f32[2,3]{1,0} gather(f32[5,3]{1,0} %parameter.5, s32[2,1]{1,0} %parameter.6), "
            "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
            "slice_sizes={1,3}, indices_are_sorted=true") in lines[-3]
    assert lines[-2] == (
        "  ROOT %scatter.8 = f32[5,3]{1,0} scatter(f32[5,3]{1,0} %parameter.5, s32[2,1]{1,0} "
        "%parameter.6, f32[2,3]{1,0} %gather.7), update_window_dims={1}, inserted_window_dims={0}, "
        "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%gs_scatter_update_computation.1")


def test_tuple_result_and_constants_of_several_types() -> None:
    b = xm.XlaBuilder("consts")
    b.tuple([b.constant(np.float32(1.5)), b.constant(np.array([1, 2, 3], np.int32)),
             b.constant(np.array([[1, 2], [3, 4]], np.uint8)),
             b.constant(np.array([0.5, -2], xm.dtype_of(xm.BF16))),
             b.constant(np.array([True, False])), b.constant(np.complex64(1 - 2j)),
             b.constant(np.array([np.nan, np.inf, -0.0], np.float64)),
             b.constant(np.arange(12, dtype=np.float32).reshape(3, 4)),
             b.constant(np.full((2, 2), 7, np.int64))])
    body = text_of(b.build()).split("{\n", 1)[1]
    assert body == """\
  %constant.1 = f32[] constant(1.5)
  %constant.2 = s32[3]{0} constant({1, 2, 3})
  %constant.3 = u8[2,2]{1,0} constant({ {1, 2}, {3, 4} })
  %constant.4 = bf16[2]{0} constant({0.5, -2})
  %constant.5 = pred[2]{0} constant({true, false})
  %constant.6 = c64[] constant((1, -2))
  %constant.7 = f64[3]{0} constant({nan, inf, -0})
  %constant.8 = f32[3,4]{1,0} constant({...})
  %constant.9 = s64[2,2]{1,0} constant({ {7, 7}, {7, 7} })
  ROOT %tuple.10 = (f32[], s32[3]{0}, u8[2,2]{1,0}, bf16[2]{0}, pred[2]{0}, c64[], f64[3]{0}, \
f32[3,4]{1,0}, s64[2,2]{1,0}) tuple(f32[] %constant.1, s32[3]{0} %constant.2, u8[2,2]{1,0} \
%constant.3, bf16[2]{0} %constant.4, pred[2]{0} %constant.5, c64[] %constant.6, f64[3]{0} \
%constant.7, f32[3,4]{1,0} %constant.8, s64[2,2]{1,0} %constant.9)
}
"""


def test_shape_ops_syntax() -> None:
    b = xm.XlaBuilder("shapes")
    x = b.parameter(0, arr(F32, 4, 6))
    s = b.slice(x, (0, 1), (4, 6), (2, 1))
    p = b.pad(s, b.constant(np.float32(0)), [(0, 0, 0), (1, 2, 0)])
    b.pad(b.transpose(p, (1, 0)), b.constant(np.float32(0)), [(0, 0, 1), (0, 0, 0)])
    text = text_of(b.build())
    assert "slice(f32[4,6]{1,0} %parameter.1), slice={[0:4:2], [1:6]}" in text
    assert "padding=0_0x1_2\n" in text
    assert "transpose(f32[2,8]{1,0} %pad.4), dimensions={1,0}" in text
    assert "padding=0_0_1x0_0_0\n" in text


def test_compare_type_only_when_not_the_default() -> None:
    b = xm.XlaBuilder("cmp")
    x = b.parameter(0, arr(F32, 2))
    b.tuple([b.lt(x, x), b.compare(x, x, "EQ", "TOTALORDER")])
    text = text_of(b.build())
    assert "direction=LT\n" in text
    assert "direction=EQ, type=TOTALORDER\n" in text


def test_text_that_does_not_parse_is_a_compile_error() -> None:
    with pytest.raises(xm.CompileError, match="does not parse"):
        hlo_text("module { nonsense }")


# ---- every op kind of the registry prints ------------------------------------------------------

def _unary(name: str) -> Callable[[xm.XlaBuilder], None]:
    def build(b: xm.XlaBuilder) -> None:
        etype = {"not": xm.S32, "count_leading_zeros": xm.S32, "popcnt": xm.S32,
                 "real": xm.C64, "imag": xm.C64}.get(name, F32)
        getattr(b, REGISTRY[name].builders and next(iter(REGISTRY[name].builders)) or name)(
            b.parameter(0, arr(etype, 3)))
    return build


def _binary(name: str) -> Callable[[xm.XlaBuilder], None]:
    def build(b: xm.XlaBuilder) -> None:
        etype = xm.S32 if name in ("and", "or", "xor") or name.startswith("shift") else F32
        method = next(iter(REGISTRY[name].builders))
        getattr(b, method)(b.parameter(0, arr(etype, 3)), b.parameter(1, arr(etype, 3)))
    return build


def _sum(p: xm.XlaOp, q: xm.XlaOp) -> xm.XlaOp:
    return p + q


def _other_programs() -> dict[str, Callable[[xm.XlaBuilder], object]]:
    v = arr(F32, 4)
    m = arr(F32, 3, 3)
    P = xm.XlaBuilder.parameter  # noqa: N806
    return {
        "after_all": lambda b: b.after_all([b.create_token(), b.create_token()]),
        "all_gather": lambda b: b.all_gather(P(b, 0, v), 0, 1),
        "all_reduce": lambda b: b.all_reduce([P(b, 0, v), P(b, 1, arr(xm.S32, 4))], lambda a, c, d, e:
                                             (a + d, c + e)),
        "all_to_all": lambda b: b.all_to_all(P(b, 0, v), 0, 0, 1),
        "bitcast_convert": lambda b: b.bitcast_convert_type(P(b, 0, v), xm.S32),
        "broadcast_in_dim": lambda b: b.broadcast_in_dim(P(b, 0, v), (2, 4), (1,)),
        "call": lambda b: b.call(lambda x: x * 2, [P(b, 0, v)]),
        "case": lambda b: b.conditional(P(b, 0, arr(xm.S32)), [lambda x: x], [P(b, 1, v)]),
        "cholesky": lambda b: b.cholesky(P(b, 0, m)),
        "clamp": lambda b: b.clamp(P(b, 0, arr(F32)), P(b, 1, v), P(b, 2, arr(F32))),
        "collective_broadcast": lambda b: b.collective_broadcast(P(b, 0, v)),
        "collective_permute": lambda b: b.collective_permute(P(b, 0, v), [(0, 0)]),
        "compare": lambda b: b.compare(P(b, 0, v), P(b, 1, v), "GE", "TOTALORDER"),
        "concatenate": lambda b: b.concat_in_dim([P(b, 0, v), P(b, 1, v)], 0),
        "constant": lambda b: b.constant(np.float32(2)),
        "convert": lambda b: b.convert_element_type(P(b, 0, v), xm.F16),
        "convolution": lambda b: b.conv_general_dilated(P(b, 0, arr(F32, 1, 2, 5, 5)),
                                                        P(b, 1, arr(F32, 4, 1, 3, 3)), (1, 1),
                                                        [(1, 1), (1, 1)], feature_group_count=2),
        "create_token": lambda b: b.create_token(),
        "custom_call": lambda b: b.custom_call("my_target", [P(b, 0, v)], v, opaque="cfg"),
        "dot_general": lambda b: b.dot(P(b, 0, m), P(b, 1, m)),
        "composite_call": lambda b: b.composite_call(lambda x: x * 2, [P(b, 0, v)], "my.double",
                                                     "{k = 1 : i32}", 1),
        "scan": lambda b: b.scan([P(b, 0, v)], [P(b, 1, arr(F32))],
                                 lambda x, c: (x + c, x + c), 0),
        "ragged_all_to_all": lambda b: b.ragged_all_to_all(
            P(b, 0, v), P(b, 1, arr(xm.S32, 1)), P(b, 2, arr(xm.S32, 1)), P(b, 3, v),
            P(b, 4, arr(xm.S32, 1)), P(b, 5, arr(xm.S32, 1))),
        "ragged_dot": lambda b: b.ragged_dot(
            P(b, 0, m), P(b, 1, arr(F32, 2, 3, 4)), P(b, 2, arr(xm.S32, 2)),
            xm.RaggedDotDimensionNumbers(xm.DotDimensionNumbers((1,), (1,)), (0,), (0,))),
        "scaled_dot": lambda b: b.scaled_dot(P(b, 0, m), P(b, 1, arr(F32, 3, 1)), P(b, 2, m),
                                             P(b, 3, arr(F32, 1, 3)), xm.DotDimensionNumbers((1,), (0,))),
        "dynamic_slice": lambda b: b.dynamic_slice(P(b, 0, v), [P(b, 1, arr(xm.S32))], (2,)),
        "dynamic_reshape": lambda b: b.dynamic_reshape(P(b, 0, v), [P(b, 1, arr(xm.S32))], (4,), (True,)),
        "dynamic_update_slice": lambda b: b.dynamic_update_slice(P(b, 0, v), P(b, 1, arr(F32, 2)),
                                                                 [P(b, 2, arr(xm.S32))]),
        "fft": lambda b: b.fft(P(b, 0, arr(xm.C64, 8)), "FFT", (8,)),
        "gather": lambda b: b.gather(P(b, 0, v), P(b, 1, arr(xm.S32, 2, 1)),
                                     xm.GatherDimensionNumbers((), (0,), (0,), 1), (1,)),
        "get_dimension_size": lambda b: b.get_dimension_size(P(b, 0, v), 0),
        "get_tuple_element": lambda b: b.get_tuple_element(P(b, 0, xm.Shape.tuple([v, m])), 1),
        "infeed": lambda b: b.infeed(v),
        "iota": lambda b: b.iota(arr(xm.S32, 2, 3), 1),
        "map": lambda b: b.map([P(b, 0, v), P(b, 1, v)], _sum, [0]),
        "optimization_barrier": lambda b: b.optimization_barrier(P(b, 0, v)),
        "outfeed": lambda b: b.outfeed(P(b, 0, v), v, "cfg"),
        "pad": lambda b: b.pad(P(b, 0, v), b.constant(np.float32(0)), [(1, -1, 2)]),
        "partition_id": lambda b: b.partition_id(),
        "recv": lambda b: b.recv(v, "chan"),
        "reduce": lambda b: b.reduce(P(b, 0, m), b.constant(np.float32(0)), _sum, [0, 1]),
        "reduce_precision": lambda b: b.reduce_precision(P(b, 0, v), 5, 10),
        "reduce_scatter": lambda b: b.reduce_scatter(P(b, 0, v), _sum, 0, 1),
        "reduce_window": lambda b: b.reduce_window(P(b, 0, m), b.constant(np.float32(0)), _sum, (2, 2),
                                                   (1, 2), padding=[(0, 1), (1, 0)],
                                                   base_dilations=(2, 1)),
        "replica_id": lambda b: b.replica_id(),
        "reshape": lambda b: b.reshape(P(b, 0, m), (9,)),
        "reverse": lambda b: b.rev(P(b, 0, m), (0,)),
        "rng": lambda b: b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)), v),
        "rng_get_and_update_state": lambda b: b.rng_normal(b.constant(np.float32(0)),
                                                           b.constant(np.float32(1)), v),
        "rng_bit_generator": lambda b: b.rng_bit_generator("THREE_FRY", P(b, 0, arr(xm.U64, 2)),
                                                           arr(xm.U32, 4)),
        "scatter": lambda b: b.scatter([P(b, 0, v), P(b, 1, arr(xm.S32, 4))], P(b, 2, arr(xm.S32, 1, 1)),
                                       [P(b, 3, arr(F32, 1)), P(b, 4, arr(xm.S32, 1))],
                                       lambda a, c, d, e: (a + d, c + e),
                                       xm.ScatterDimensionNumbers((), (0,), (0,), 1),
                                       unique_indices=True),
        "select": lambda b: b.select(P(b, 0, arr(xm.PRED, 4)), P(b, 1, v), P(b, 2, v)),
        "select_and_scatter": lambda b: b.select_and_scatter(
            P(b, 0, m), lambda p, q: p.builder.ge(p, q), (2, 2), (1, 1), [(0, 0), (0, 0)],
            P(b, 1, arr(F32, 2, 2)), b.constant(np.float32(0)), _sum),
        "send": lambda b: b.send(P(b, 0, v), 3),
        "set_dimension_size": lambda b: b.set_dimension_size(P(b, 0, v), P(b, 1, arr(xm.S32)), 0),
        "slice": lambda b: b.slice(P(b, 0, v), (1,), (4,), (2,)),
        "sort": lambda b: b.sort([P(b, 0, v), P(b, 1, arr(xm.S32, 4))], is_stable=True),
        "transpose": lambda b: b.transpose(P(b, 0, arr(F32, 2, 3)), (1, 0)),
        "triangular_solve": lambda b: b.triangular_solve(P(b, 0, m), P(b, 1, m), True, True, False,
                                                         "TRANSPOSE"),
        "tuple": lambda b: b.tuple([P(b, 0, v), P(b, 1, arr(xm.S32))]),
        "while": lambda b: b.while_(lambda t: t.builder.lt(t, t.builder.constant(np.int32(3))),
                                    lambda t: t + 1, P(b, 0, arr(xm.S32))),
    }


def _program_for(kind: str) -> Callable[[xm.XlaBuilder], object]:
    family = REGISTRY[kind].family
    if family == "unary":
        return _unary(kind)
    if family == "binary":
        return _binary(kind)
    return _other_programs()[kind]


def _ops_in(text: str) -> set[str]:
    return set(re.findall(r'"xhlo\.([a-z_0-9]+)"', text))


@pytest.mark.parametrize("kind", sorted(REGISTRY))
def test_every_op_kind_prints(kind: str) -> None:
    b = xm.XlaBuilder(f"op_{kind}")
    _program_for(kind)(b)
    comp = b.build()
    module = comp.as_mlir_text()
    assert kind in _ops_in(module)
    text = hlo_text(module, comp.name)
    assert text.startswith(f"HloModule op_{kind}, entry_computation_layout={{(")
    assert "ROOT %" in text
    assert not re.search(r"xhlo|tensor<|%arg\d", text), text


def test_every_registry_op_has_a_program() -> None:
    covered = {k for k, o in REGISTRY.items() if o.family in ("unary", "binary")} | set(_other_programs())
    assert covered >= set(REGISTRY), sorted(set(REGISTRY) - covered)


def test_ragged_dot_prints_its_dimension_numbers_as_xla() -> None:
    """XLA's form (xla/hlo/translate/mhlo_to_hlo/tests/ragged_dot.mlir)."""
    b = xm.XlaBuilder("r")
    dn = xm.RaggedDotDimensionNumbers(xm.DotDimensionNumbers((2,), (1,)), (1,), (0,))
    b.ragged_dot(b.parameter(0, arr(F32, 19, 11, 5)), b.parameter(1, arr(F32, 3, 5, 7)),
                 b.parameter(2, arr(xm.S64, 19, 3)), dn, precision_config="HIGHEST")
    want = ("f32[19,11,7]{2,1,0} ragged-dot(f32[19,11,5]{2,1,0} %parameter.1, f32[3,5,7]{2,1,0} "
            "%parameter.2, s64[19,3]{1,0} %parameter.3), lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
            "lhs_ragged_dims={1}, rhs_group_dims={0}, operand_precision={highest,highest}")
    assert want in text_of(b.build())


def test_ops_without_an_hlo_opcode_print_as_xla_would_hold_them() -> None:
    b = xm.XlaBuilder("odd")
    x = b.parameter(0, arr(F32, 2))
    b.tuple([b.cosh(x), b.atan(x), b.create_token(), b.all_to_all(x, 0, 0, 1)])
    text = text_of(b.build())
    assert 'custom-call(f32[2]{0} %parameter.1), custom_call_target="cosh"' in text
    assert 'custom_call_target="atan"' in text
    assert "token[] after-all()" in text
    assert 'dimensions={0}, frontend_attributes={concat_dimension="0",split_count="1"}' in text


def test_linear_algebra_and_collective_options() -> None:
    b = xm.XlaBuilder("la")
    a = b.parameter(0, arr(F32, 3, 3))
    b.tuple([b.triangular_solve(a, a, True, False, True, "NO_TRANSPOSE"), b.cholesky(a, lower=False),
             b.all_reduce(a, _sum, replica_groups=[[0]], channel_id=2)])
    text = text_of(b.build())
    assert "%parameter.5), left_side=true, unit_diagonal=true, transpose_a=NO_TRANSPOSE\n" in text
    assert re.search(r"cholesky\(f32\[3,3\]\{1,0\} %parameter\.\d+\)\n", text)
    assert "channel_id=2, replica_groups={{0}}, to_apply=%la_all_reduce_computation.1\n" in text


def test_an_executable_hlo_stage_and_an_imported_program_print() -> None:
    exe = xm.compile(_built("stage", lambda b: b.sort(b.parameter(0, arr(F32, 5)))))
    assert "sort(f32[5]{0} %parameter." in hlo_text(exe.stages["hlo"])
    jnp = pytest.importorskip("jax.numpy")
    comp = xm.jit(lambda x: jnp.cumsum(jnp.tanh(x) @ x.T, axis=0)).lower(np.ones((3, 4), np.float32))
    text = hlo_text(comp.as_mlir_text(), comp.name)
    assert text.startswith(f"HloModule {comp.name}, entry_computation_layout={{(f32[3,4]{{1,0}})")
    assert " dot(" in text and " tanh(" in text


def _built(name: str, build: Callable[[xm.XlaBuilder], object]) -> xm.XlaComputation:
    b = xm.XlaBuilder(name)
    build(b)
    return b.build()


def test_a_constant_held_in_a_resource_blob_prints_elided() -> None:
    text = hlo_text('''module {
  func.func @main() -> tensor<2xf32> {
    %0 = "xhlo.constant"() {value = dense_resource<blob1> : tensor<2xf32>} : () -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
{-#
  dialect_resources: { builtin: { blob1: "0x040000000000803F00000040" } }
#-}
''')
    assert "ROOT %constant.1 = f32[2]{0} constant({...})\n" in text


def test_splat_constants_of_every_kind() -> None:
    b = xm.XlaBuilder("splats")
    b.tuple([b.constant(np.ones(9, bool)), b.constant(np.full(3, np.nan, np.float32)),
             b.constant(np.full(2, 2**64 - 1, np.uint64)), b.constant(np.full(2, 1 + 1j, np.complex64)),
             b.constant(np.full(2, -3, np.int8))])
    text = text_of(b.build())
    assert "pred[9]{0} constant({true, true, true, true, true, true, true, true, true})" in text
    assert "f32[3]{0} constant({nan, nan, nan})" in text
    assert "u64[2]{0} constant({18446744073709551615, 18446744073709551615})" in text
    assert "c64[2]{0} constant({(1, 1), (1, 1)})" in text
    assert "s8[2]{0} constant({-3, -3})" in text


def test_computation_and_executable_print_hlo_text() -> None:
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, xm.Shape.array(xm.F32, ()), "alpha")
    x = b.parameter(1, xm.Shape.array(xm.F32, (4,)))
    b.add(b.mul(alpha, x), x)
    comp = b.build()
    text = comp.as_hlo_text()
    assert text.startswith("HloModule axpy, entry_computation_layout={(f32[], f32[4]{0})->f32[4]{0}}")
    assert "%alpha.1 = f32[] parameter(0)" in text  # the parameter's own name
    assert "ROOT %add." in text and "multiply(f32[4]{0} %broadcast." in text
    exe_text = xm.compile(comp).as_hlo_text()
    assert exe_text.replace("alpha.1", "parameter.1") == text.replace("alpha.1", "parameter.1")
