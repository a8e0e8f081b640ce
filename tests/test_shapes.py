"""Tests of xlamlir.dialect.shapes: element types, layouts, shapes and their text forms."""

from __future__ import annotations

import copy
import pickle
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlamlir.dialect.element_types import PrimitiveType, dtype_of, type_of
from xlamlir.dialect.errors import ShapeError
from xlamlir.dialect.layout import Layout
from xlamlir.dialect.mlir_types import shape_from_mlir_type_text, to_mlir_type_text
from xlamlir.dialect.shape import Shape

P = PrimitiveType
ARRAY_TYPES = [t for t in PrimitiveType if t.is_array_type]


# ---- PrimitiveType ---------------------------------------------------------------------------


def test_xla_numbering() -> None:
    expected = {
        "PRED": 1, "S8": 2, "S16": 3, "S32": 4, "S64": 5, "U8": 6, "U16": 7, "U32": 8,
        "U64": 9, "F16": 10, "F32": 11, "F64": 12, "TUPLE": 13, "C64": 15, "BF16": 16,
        "TOKEN": 17, "C128": 18, "F8E5M2": 19, "F8E4M3FN": 20, "S4": 21, "U4": 22,
        "F8E4M3B11FNUZ": 23, "F8E5M2FNUZ": 24, "F8E4M3FNUZ": 25, "S2": 26, "U2": 27,
        "F8E4M3": 28, "F8E3M4": 29, "F4E2M1FN": 32, "F8E8M0FNU": 33,
    }  # fmt: skip
    assert {t.name: int(t) for t in PrimitiveType} == expected


def test_predicates() -> None:
    assert P.PRED.is_pred and not P.PRED.is_integral
    signed = {P.S2, P.S4, P.S8, P.S16, P.S32, P.S64}
    unsigned = {P.U2, P.U4, P.U8, P.U16, P.U32, P.U64}
    narrow = {P.F8E5M2, P.F8E4M3FN, P.F8E4M3B11FNUZ, P.F8E5M2FNUZ, P.F8E4M3FNUZ, P.F8E4M3,
              P.F8E3M4, P.F4E2M1FN, P.F8E8M0FNU}
    assert {t for t in PrimitiveType if t.is_signed_int} == signed
    assert {t for t in PrimitiveType if t.is_unsigned_int} == unsigned
    assert {t for t in PrimitiveType if t.is_integral} == signed | unsigned
    assert {t for t in PrimitiveType if t.is_sub_byte_int} == {P.S2, P.S4, P.U2, P.U4}
    assert {t for t in PrimitiveType if t.is_narrow_float} == narrow
    assert {t for t in PrimitiveType if t.is_floating} == {P.F16, P.BF16, P.F32, P.F64} | narrow
    assert {t for t in PrimitiveType if t.is_complex} == {P.C64, P.C128}
    assert {t for t in PrimitiveType if not t.is_array_type} == {P.TUPLE, P.TOKEN}


def test_widths_and_names() -> None:
    assert P.PRED.bit_width == 1 and P.PRED.byte_width == 1
    assert P.BF16.bit_width == 16 and P.BF16.byte_width == 2
    assert P.C128.bit_width == 128 and P.C64.byte_width == 8
    for t in ARRAY_TYPES:
        assert t.byte_width == dtype_of(t).itemsize
    assert [t.text_name for t in (P.PRED, P.S8, P.U64, P.BF16, P.C128, P.TOKEN, P.TUPLE)] == [
        "pred", "s8", "u64", "bf16", "c128", "token", "tuple",
    ]  # fmt: skip
    mlir = {
        P.PRED: "i1", P.S8: "i8", P.S16: "i16", P.S32: "i32", P.S64: "i64", P.U8: "ui8",
        P.U16: "ui16", P.U32: "ui32", P.U64: "ui64", P.F16: "f16", P.BF16: "bf16",
        P.F32: "f32", P.F64: "f64", P.C64: "complex<f32>", P.C128: "complex<f64>",
        P.S2: "i2", P.S4: "i4", P.U2: "ui2", P.U4: "ui4", P.F8E5M2: "f8E5M2",
        P.F8E4M3FN: "f8E4M3FN", P.F8E4M3B11FNUZ: "f8E4M3B11FNUZ", P.F8E5M2FNUZ: "f8E5M2FNUZ",
        P.F8E4M3FNUZ: "f8E4M3FNUZ", P.F8E4M3: "f8E4M3", P.F8E3M4: "f8E3M4",
        P.F4E2M1FN: "f4E2M1FN", P.F8E8M0FNU: "f8E8M0FNU",
    }  # fmt: skip
    assert {t: t.mlir_name for t in ARRAY_TYPES} == mlir
    assert P.C64.complex_component is P.F32
    assert P.C128.complex_component is P.F64
    assert P.F16.complex_component is P.F16
    assert str(P.F32) == "f32" and f"{P.BF16}" == "bf16"
    assert P.S4.bit_width == 4 and P.U2.bit_width == 2 and P.F4E2M1FN.bit_width == 4
    assert P.F8E5M2.bit_width == 8 and P.S4.byte_width == 1
    assert [t.text_name for t in (P.S4, P.F8E5M2, P.F8E4M3FN, P.F8E4M3B11FNUZ, P.F8E8M0FNU)] == [
        "s4", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e8m0fnu"]
    assert str(Shape.array(P.S4, (2, 3))) == "s4[2,3]" and str(Shape.array(P.F8E4M3FN, ())) == "f8e4m3fn[]"


def test_float_formats_match_ml_dtypes() -> None:
    for t in ARRAY_TYPES:
        if not t.is_floating:
            continue
        f, info = t.float_format, ml_dtypes.finfo(dtype_of(t))
        assert f.bits == info.bits, t
        assert f.mantissa_bits == info.nmant, t
        assert f.exponent_bits == info.nexp, t
        # E8M0FNU has no subnormals: its exponent field 0 is the normal 2^-127.
        lowest_exponent = -f.bias if f.mantissa_bits == 0 else 1 - f.bias
        assert 2.0 ** lowest_exponent == float(info.smallest_normal), t
    with pytest.raises(ShapeError):
        _ = P.S4.float_format


@pytest.mark.parametrize("t", ARRAY_TYPES, ids=str)
def test_dtype_round_trip(t: PrimitiveType) -> None:
    dt = dtype_of(t)
    assert isinstance(dt, np.dtype)
    assert type_of(dt) is t
    assert type_of(dt.type) is t
    assert type_of(t.text_name) is t
    assert type_of(t.name) is t
    assert type_of(t) is t
    assert dtype_of(t.text_name) == dt
    assert type_of(np.zeros(2, dt)) is t


def test_specific_dtypes() -> None:
    assert dtype_of(P.PRED) == np.dtype(bool)
    assert dtype_of(P.BF16) == np.dtype(ml_dtypes.bfloat16)
    assert dtype_of(P.C64) == np.dtype(np.complex64)
    assert dtype_of(P.F16) == np.dtype(np.float16)
    assert dtype_of(P.U32) == np.dtype(np.uint32)


@pytest.mark.parametrize(
    ("x", "t"),
    [
        (np.float32, P.F32), ("float32", P.F32), ("f32", P.F32), ("pred", P.PRED),
        ("bf16", P.BF16), (ml_dtypes.bfloat16, P.BF16), (np.dtype("int8"), P.S8),
        ("u8", P.U8), ("f16", P.F16), ("s64", P.S64), ("c64", P.C64), (np.float16, P.F16),
        (bool, P.PRED), (np.bool_, P.PRED), ("complex128", P.C128), (np.uint16, P.U16),
        (np.dtype(">f4"), P.F32), (np.float64(1.0), P.F64), ("token", P.TOKEN),
        (ml_dtypes.int4, P.S4), (ml_dtypes.uint2, P.U2), ("s4", P.S4), ("F8E4M3FN", P.F8E4M3FN),
        (ml_dtypes.float8_e4m3fn, P.F8E4M3FN), (ml_dtypes.float8_e8m0fnu, P.F8E8M0FNU),
        (ml_dtypes.float4_e2m1fn, P.F4E2M1FN), ("f8e4m3b11fnuz", P.F8E4M3B11FNUZ),
    ],
)  # fmt: skip
def test_type_of(x: object, t: PrimitiveType) -> None:
    assert type_of(x) is t


@pytest.mark.parametrize(
    "x", [np.float128, object, str, "U3", None, 3, 1.5, "nope", ml_dtypes.float6_e2m3fn, ml_dtypes.int1, [1]]
)
def test_type_of_rejects(x: object) -> None:
    with pytest.raises(ShapeError):
        type_of(x)


@pytest.mark.parametrize("t", [P.TOKEN, P.TUPLE])
def test_dtype_of_rejects_non_arrays(t: PrimitiveType) -> None:
    with pytest.raises(ShapeError, match=t.text_name):
        dtype_of(t)


# ---- Layout ----------------------------------------------------------------------------------


def test_layout() -> None:
    assert Layout.default(3).minor_to_major == (2, 1, 0)
    assert Layout.default(0).minor_to_major == ()
    lay = Layout([0, 1])
    assert lay.minor_to_major == (0, 1) and isinstance(lay.minor_to_major, tuple)
    assert lay == Layout((0, 1)) and lay != Layout((1, 0))
    assert hash(lay) == hash(Layout(np.array([0, 1])))
    assert not lay.is_default() and Layout.default(2).is_default()
    assert "0, 1" in repr(lay)
    with pytest.raises(AttributeError):
        lay.minor_to_major = (1, 0)  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(lay)) == lay


@pytest.mark.parametrize("bad", [[0, 0], [1, 2], [-1, 0], [True, False], [0.0], "01"])
def test_layout_rejects(bad: object) -> None:
    with pytest.raises(ShapeError):
        Layout(bad)  # type: ignore[arg-type]


# ---- Shape construction and attributes -------------------------------------------------------


def test_array_attributes() -> None:
    s = Shape.array(P.F32, [2, 3])
    assert s.element_type is P.F32
    assert s.dimensions == (2, 3) and s.rank == 2
    assert s.layout == Layout((1, 0))
    assert s.tuple_shapes == ()
    assert s.is_array() and not s.is_tuple() and not s.is_token() and not s.is_scalar()
    assert s.has_default_layout()
    assert s.numel == 6 and s.dtype == np.dtype(np.float32)
    assert Shape.array(np.int16, np.array([4, 0])).dimensions == (4, 0)
    assert Shape.array("bf16", (np.int64(2),)).dtype == np.dtype(ml_dtypes.bfloat16)
    assert type(Shape.array(P.S8, (np.int64(2),)).dimensions[0]) is int
    assert Shape.array(P.S8, [0, 5]).numel == 0


def test_scalar_token_tuple() -> None:
    sc = Shape.scalar(np.bool_)
    assert sc == Shape.array(P.PRED, []) and sc.is_scalar() and sc.rank == 0
    assert sc.numel == 1 and sc.layout == Layout(())
    tok = Shape.token()
    assert tok.is_token() and tok.element_type is P.TOKEN and tok.layout is None
    assert tok.dimensions == () and not tok.is_array()
    t = Shape.tuple([Shape.array(P.F32, [2]), Shape.tuple([]), tok])
    assert t.is_tuple() and t.element_type is P.TUPLE and t.layout is None
    assert t.dimensions == () and len(t.tuple_shapes) == 3
    assert Shape.tuple(()).tuple_shapes == ()
    assert Shape.tuple(s for s in [sc]) == Shape.tuple([sc])
    for s in (tok, t):
        with pytest.raises(ShapeError):
            _ = s.numel
        with pytest.raises(ShapeError):
            _ = s.dtype


def test_layout_on_array() -> None:
    s = Shape.array(P.F32, [2, 3], [0, 1])
    assert s.layout == Layout((0, 1)) and not s.has_default_layout()
    assert Shape.array(P.F32, [2, 3], Layout([0, 1])) == s
    assert Shape.array(P.F32, [2, 3], (1, 0)) == Shape.array(P.F32, [2, 3])
    assert s.byte_strides() == np.zeros((2, 3), np.float32, order="F").strides
    assert Shape.array(P.S16, [2, 3, 4]).byte_strides() == np.zeros((2, 3, 4), np.int16).strides
    assert s.with_layout(None) == Shape.array(P.F32, [2, 3])


@pytest.mark.parametrize(
    ("dims", "mtm"),
    [([-1], None), ([True, 2], None), ([2.0], None), (["2"], None), (3, None), ("23", None),
     ([2, 3], [0]), ([2, 3], [0, 0]), ([2, 3], [1, 2]), ([2], [0, 1]), ([2, 3], [True, 0]),
     ([], [0])],
)  # fmt: skip
def test_array_rejects(dims: object, mtm: object) -> None:
    with pytest.raises(ShapeError):
        Shape.array(P.F32, dims, mtm)  # type: ignore[arg-type]


@pytest.mark.parametrize("et", [P.TUPLE, P.TOKEN, "token", np.float128, object])
def test_array_rejects_element_types(et: object) -> None:
    with pytest.raises(ShapeError):
        Shape.array(et, [2])


def test_tuple_rejects() -> None:
    with pytest.raises(ShapeError):
        Shape.tuple([Shape.token(), "f32[2]"])  # type: ignore[list-item]
    with pytest.raises(ShapeError):
        Shape.tuple(Shape.token())  # type: ignore[arg-type]


def test_with_dims_and_element_type() -> None:
    s = Shape.array(P.F32, [2, 3], [0, 1])
    assert s.with_dims([4]) == Shape.array(P.F32, [4])
    assert s.with_element_type(np.int32) == Shape.array(P.S32, [2, 3])
    assert s.with_element_type("c64").has_default_layout()
    with pytest.raises(ShapeError):
        Shape.token().with_dims([2])
    with pytest.raises(ShapeError):
        s.with_dims([-2])


def test_flatten() -> None:
    a, b, c = Shape.array(P.F32, [2]), Shape.scalar(P.S32), Shape.token()
    t = Shape.tuple([a, Shape.tuple([b, Shape.tuple([])]), c, Shape.tuple([Shape.tuple([a])])])
    assert t.flatten() == [a, b, c, a]
    assert a.flatten() == [a]
    assert Shape.tuple([]).flatten() == []


def test_immutable() -> None:
    s = Shape.array(P.F32, [2])
    with pytest.raises(AttributeError):
        s.dimensions = (3,)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s._dimensions = (3,)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del s._layout


def test_equality_and_hash() -> None:
    a = Shape.array(P.F32, [2, 3])
    assert a == Shape.parse("f32[2,3]") == Shape.array(np.float32, (2, 3), (1, 0))
    assert a != Shape.array(P.F32, [2, 3], [0, 1])
    assert a != Shape.array(P.F32, [3, 2])
    assert a != Shape.array(P.F64, [2, 3])
    assert a != "f32[2,3]"
    assert Shape.scalar(P.F32) != Shape.array(P.F32, [1])
    assert Shape.tuple([]) != Shape.tuple([Shape.tuple([])])
    assert Shape.tuple([a]) != a
    assert Shape.token() == Shape.parse("token[]")
    items = {
        a: 1,
        Shape.array(P.F32, [2, 3], [0, 1]): 2,
        Shape.tuple([a, Shape.token()]): 3,
        Shape.token(): 4,
        Shape.scalar(P.PRED): 5,
    }
    assert items[Shape.parse("f32[2,3]{1,0}")] == 1
    assert items[Shape.parse("f32[2,3]{0,1}")] == 2
    assert items[Shape.parse("(f32[2,3], token[])")] == 3
    assert items[Shape.parse("pred[]")] == 5
    assert len({a, Shape.parse("f32[2,3]"), Shape.array("float32", [2, 3])}) == 1


def test_pickle_copy_repr() -> None:
    s = Shape.parse("(f32[2,3]{0,1}, (pred[], token[]), ())")
    assert pickle.loads(pickle.dumps(s)) == s
    assert copy.deepcopy(s) == s and copy.copy(s) == s
    assert repr(Shape.parse("f32[2,3]")) == "Shape('f32[2,3]')"
    assert Shape("f32[2,3]{0,1}") == Shape.parse("f32[2,3]{0,1}")


# ---- XLA text form ---------------------------------------------------------------------------


def test_contract_strings() -> None:
    assert str(Shape.array(P.F32, [2, 3])) == "f32[2,3]"
    assert str(Shape.array(P.F32, [2, 3], [0, 1])) == "f32[2,3]{0,1}"
    assert str(Shape.scalar(P.PRED)) == "pred[]"
    assert str(Shape.tuple([Shape.array(P.F32, [2]), Shape.scalar(P.S32)])) == "(f32[2], s32[])"
    assert str(Shape.token()) == "token[]"
    assert str(Shape.tuple([])) == "()"
    for text in ["f32[2,3]", "f32[2,3]{0,1}", "pred[]", "(f32[2], s32[])", "token[]"]:
        assert str(Shape.parse(text)) == text


ROUND_TRIP = [
    "f32[2,3]", "f32[2,3]{0,1}", "pred[]", "(f32[2], s32[])", "token[]", "()", "(())",
    "((), ((), ()))", "bf16[0]", "s8[0,3]", "u64[1,0,7]{0,2,1}", "c128[4]", "c64[]",
    "f16[2,2,2,2]{3,0,2,1}", "(token[], (pred[3]{0}, u8[2,0]{0,1}), f64[])",
    "s16[12345678901]", "(((((f32[1])))))", "u16[5,1]", "u32[3]", "s64[1,1,1]{2,1,0}",
]  # fmt: skip


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_str_parse_round_trip(text: str) -> None:
    s = Shape.parse(text)
    assert Shape.parse(str(s)) == s
    assert str(Shape.parse(str(s))) == str(s)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("f32[2,3]{1,0}", "f32[2,3]"),
        ("f32[]{}", "f32[]"),
        (" f32 [ 2 , 3 ] { 0 , 1 } ", "f32[2,3]{0,1}"),
        ("(f32[2],s32[])", "(f32[2], s32[])"),
        ("\n( f32[2] ,\t(  ) )\n", "(f32[2], ())"),
        ("token[]{}", "token[]"),
        ("(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])",
         "(f32[], f32[], f32[], f32[], f32[], f32[])"),
        ("u8[007]", "u8[7]"),
    ],
)  # fmt: skip
def test_parse_lenient_forms(text: str, canonical: str) -> None:
    s = Shape.parse(text)
    assert str(s) == canonical
    assert s == Shape.parse(canonical)


def test_parse_explicit_default_layout_equals_none() -> None:
    assert Shape.parse("f32[2,3]{1,0}") == Shape.parse("f32[2,3]")
    assert Shape.parse("s32[4,5,6]{2,1,0}") == Shape.array(P.S32, [4, 5, 6])
    assert Shape.parse("pred[]{}") == Shape.scalar(P.PRED)
    assert hash(Shape.parse("f32[2,3]{1,0}")) == hash(Shape.parse("f32[2,3]"))


MALFORMED = [
    "", " ", "f32", "f32[", "f32[2", "f32[2,]", "f32[,2]", "f32[2,3", "f32[-1]", "f32[2.5]",
    "f32[a]", "f33[2]", "F32[2]", "float32[2]", "tuple[]", "f32[2]x", "f32[2] f32[3]",
    "f32[2]{1}", "f32[2,3]{0}", "f32[2,3]{0,0}", "f32[2,3]{1,2}", "f32[2]{0", "f32[2]{}",
    "f32[2,3]{1,0:T(8,128)}", "f32[<3]", "f32[<=]", "f32[?]", "(", "(f32[2]", "(f32[2],)", "(,)",
    "f32[2])", "(f32[2] s32[])", "token[2]", "token[]{0}", "token", "[2]", "/* */",
    "f32[2]/*", "()()",
]  # fmt: skip


@pytest.mark.parametrize("text", MALFORMED)
def test_parse_malformed(text: str) -> None:
    with pytest.raises(ShapeError, match=re.escape(repr(text))):
        Shape.parse(text)


@pytest.mark.parametrize("x", [None, 3, b"f32[2]", ["f32[2]"]])
def test_parse_non_str(x: object) -> None:
    with pytest.raises(ShapeError):
        Shape.parse(x)  # type: ignore[arg-type]


# ---- MLIR type text --------------------------------------------------------------------------


MLIR_CASES = [
    ("f32[2,3]", "tensor<2x3xf32>"),
    ("f32[]", "tensor<f32>"),
    ("s32[0,3]", "tensor<0x3xi32>"),
    ("c64[2]", "tensor<2xcomplex<f32>>"),
    ("c128[4]", "tensor<4xcomplex<f64>>"),
    ("u32[4]", "tensor<4xui32>"),
    ("pred[]", "tensor<i1>"),
    ("bf16[1,1]", "tensor<1x1xbf16>"),
    ("(f32[2], s32[])", "tuple<tensor<2xf32>, tensor<i32>>"),
    ("(f32[2], ())", "tuple<tensor<2xf32>, tuple<>>"),
    ("()", "tuple<>"),
    ("token[]", "!xhlo.token"),
    ("((token[], u8[3]), s64[])", "tuple<tuple<!xhlo.token, tensor<3xui8>>, tensor<i64>>"),
    ("s4[2,3]", "tensor<2x3xi4>"),
    ("u2[5]", "tensor<5xui2>"),
    ("f8e5m2[4]", "tensor<4xf8E5M2>"),
    ("f8e4m3fn[]", "tensor<f8E4M3FN>"),
    ("(f8e4m3b11fnuz[1], f4e2m1fn[2,2])", "tuple<tensor<1xf8E4M3B11FNUZ>, tensor<2x2xf4E2M1FN>>"),
    ("f8e8m0fnu[3]", "tensor<3xf8E8M0FNU>"),
]


@pytest.mark.parametrize(("xla", "mlir"), MLIR_CASES)
def test_mlir_type_text(xla: str, mlir: str) -> None:
    s = Shape.parse(xla)
    assert to_mlir_type_text(s) == mlir
    assert shape_from_mlir_type_text(mlir) == s


def test_mlir_drops_layout() -> None:
    s = Shape.parse("(f32[2,3]{0,1}, s8[4])")
    assert to_mlir_type_text(s) == "tuple<tensor<2x3xf32>, tensor<4xi8>>"
    assert shape_from_mlir_type_text(to_mlir_type_text(s)) == s.with_default_layout()


@pytest.mark.parametrize(
    ("text", "xla"),
    [
        ("tensor<4xsi32>", "s32[4]"),
        ("tensor<si8>", "s8[]"),
        ("  tensor<2x3xf32>  ", "f32[2,3]"),
        ("tuple<tensor<2xf32>,tensor<i32>>", "(f32[2], s32[])"),
        ("tensor<4xcomplex< f64 >>", "c128[4]"),
    ],
)
def test_mlir_type_text_lenient(text: str, xla: str) -> None:
    assert shape_from_mlir_type_text(text) == Shape.parse(xla)


@pytest.mark.parametrize(
    "text",
    [
        "tensor<?x3xf32>", "tensor<*xf32>", "memref<2xf32>", "vector<4xf32>", "tensor<2xf6E2M3FN>",
        "tensor<2xi3>", "tensor<2xindex>", "tensor<2x3xf32, #enc>", "tensor<2x>", "tensor<2xf32",
        "tensor<2xf32>>", "tuple<tensor<f32>", "tuple<tensor<f32>,>", "f32", "i32", "",
        "!stablehlo.token", "tensor<-1xf32>", "tensor<ui1>", "tensor<si1>", "tensor<complex<i32>>",
        "tensor<2xf32> tensor<f32>", "tensor<2xui128>", "tensor<2xf128>",
    ],
)  # fmt: skip
def test_mlir_type_text_rejects(text: str) -> None:
    with pytest.raises(ShapeError):
        shape_from_mlir_type_text(text)


def test_to_mlir_type_text_rejects_non_shape() -> None:
    with pytest.raises(ShapeError):
        to_mlir_type_text("f32[2]")  # type: ignore[arg-type]


# ---- property test ---------------------------------------------------------------------------


@st.composite
def array_shapes(draw: st.DrawFn) -> Shape:
    et = draw(st.sampled_from(ARRAY_TYPES))
    dims = draw(st.lists(st.integers(0, 5), max_size=4))
    if draw(st.booleans()):
        return Shape.array(et, dims)
    mtm = draw(st.permutations(list(range(len(dims)))))
    return Shape.array(et, dims, mtm)


shapes = st.recursive(
    st.one_of(array_shapes(), st.just(Shape.token())),
    lambda children: st.lists(children, max_size=4).map(Shape.tuple),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(shapes)
def test_property_round_trips(s: Shape) -> None:
    text = str(s)
    assert Shape.parse(text) == s
    assert hash(Shape.parse(text)) == hash(s)
    assert Shape.parse(f" {text.replace(',', ' , ')} ") == s
    assert pickle.loads(pickle.dumps(s)) == s
    mlir = to_mlir_type_text(s)
    back = shape_from_mlir_type_text(mlir)
    assert back == s.with_default_layout()
    assert back.has_default_layout()
    assert to_mlir_type_text(back) == mlir
    assert len(s.flatten()) == text.count("[")
