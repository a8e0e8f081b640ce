"""Tests of dot and dot_general: numerics against numpy, shape rules, the lowering's IR.

Reference: `reference_dot_general` moves the batch dimensions to the front and
the contracting ones to the back (lhs) / front (rhs), then calls np.matmul in
float64 / complex128 / int64 and casts once to the result type (ints wrap as
XLA's do; pred is `sum of products != 0`, i.e. or-of-ands). Most inputs are
small integers, so float results are exact and compared exactly; the 64^3
random f32 check uses a tolerance.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, data, param_shape, stage_text

import xlamlir as xm
from xlamlir.dialect.ops_dot import DotDimensionNumbers

DN = DotDimensionNumbers
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": BF16, "s8": np.int8,
          "s32": np.int32, "u8": np.uint8, "c64": np.complex64, "c128": np.complex128, "pred": np.bool_}


def _dims(dn: DN | tuple) -> tuple[tuple[int, ...], ...]:
    d = DN.of(dn)
    return (d.lhs_contracting_dimensions, d.rhs_contracting_dimensions, d.lhs_batch_dimensions,
            d.rhs_batch_dimensions)


def reference_dot_general(lhs: np.ndarray, rhs: np.ndarray, dn: DN | tuple, out_dtype) -> np.ndarray:
    lc, rc, lb, rb = _dims(dn)
    lf = [i for i in range(lhs.ndim) if i not in lc + lb]
    rf = [i for i in range(rhs.ndim) if i not in rc + rb]
    kind = np.dtype(out_dtype).kind
    wide = np.complex128 if kind == "c" else np.float64 if kind == "f" or out_dtype == BF16 else np.int64
    batch = [lhs.shape[i] for i in lb]
    k = math.prod(lhs.shape[i] for i in lc)
    a = lhs.astype(wide).transpose(list(lb) + lf + list(lc)).reshape(
        batch + [math.prod(lhs.shape[i] for i in lf), k])
    b = rhs.astype(wide).transpose(list(rb) + list(rc) + rf).reshape(
        batch + [k, math.prod(rhs.shape[i] for i in rf)])
    out = np.matmul(a, b).reshape(batch + [lhs.shape[i] for i in lf] + [rhs.shape[i] for i in rf])
    if out_dtype == np.bool_:
        return out != 0
    return out.astype(out_dtype)


def build_dot_general(lhs: np.ndarray, rhs: np.ndarray, dn, **kwargs) -> xm.XlaComputation:
    b = xm.XlaBuilder("dot_general")
    b.dot_general(b.parameter(0, param_shape(lhs)), b.parameter(1, param_shape(rhs)), dn, **kwargs)
    return b.build()


def run_dot_general(lhs: np.ndarray, rhs: np.ndarray, dn, **kwargs) -> np.ndarray:
    return xm.compile(build_dot_general(lhs, rhs, dn, **kwargs))(lhs, rhs)


def run_dot(lhs: np.ndarray, rhs: np.ndarray, **kwargs) -> np.ndarray:
    b = xm.XlaBuilder("dot")
    b.dot(b.parameter(0, param_shape(lhs)), b.parameter(1, param_shape(rhs)), **kwargs)
    return xm.compile(b.build())(lhs, rhs)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


# ---- numerics per element type -------------------------------------------------------------

NUMERIC = ("f32", "f64", "f16", "bf16", "s8", "s32", "u8", "c64", "c128")
# (lhs shape, rhs shape, dimension numbers): each named linalg op, then generic layouts.
LAYOUTS = [
    ((3, 4), (4, 5), DN((1,), (0,))),  # linalg.matmul
    ((2, 3, 4), (2, 4, 5), DN((2,), (1,), (0,), (0,))),  # linalg.batch_matmul
    ((3, 4), (4,), DN((1,), (0,))),  # linalg.matvec
    ((4,), (4, 5), DN((0,), (0,))),  # linalg.vecmat
    ((4,), (4,), DN((0,), (0,))),  # linalg.dot
    ((3, 2, 4), (5, 4, 2), DN((2,), (1,), (1,), (2,))),  # non-leading batch dims: generic
]


@pytest.mark.parametrize("name", NUMERIC)
def test_dtypes_every_layout(name: str) -> None:
    dtype = DTYPES[name]
    for i, (ls, rs, dn) in enumerate(LAYOUTS):
        lhs, rhs = data(ls, dtype, seed=i), data(rs, dtype, seed=i + 10)
        assert_same(run_dot_general(lhs, rhs, dn), reference_dot_general(lhs, rhs, dn, dtype))


def test_pred_is_or_of_ands() -> None:
    lhs = np.array([[True, False, True], [False, False, False]])
    rhs = np.array([[False, True], [True, True], [False, False]])
    dn = DN((1,), (0,))
    assert_same(run_dot_general(lhs, rhs, dn), np.array([[False, True], [False, False]]))
    for u, w, expected in (([True, False], [False, True], False), ([True, True], [False, True], True)):
        assert_same(run_dot(np.array(u), np.array(w)), np.array(expected))
    many = np.ones((2, 256), bool)  # 256 true products: a sum in a byte would wrap to 0
    assert_same(run_dot_general(many, many.T.copy(), dn), np.ones((2, 2), bool))
    # With an integer preferred type pred counts (XLA upcasts the operands to s32).
    assert_same(run_dot_general(many, many.T.copy(), dn, preferred_element_type=xm.S32),
                np.full((2, 2), 256, np.int32))


def test_pred_lowers_to_or_of_ands() -> None:
    comp = build_dot_general(np.zeros((2, 3), bool), np.zeros((3,), bool), DN((1,), (0,)))
    check_ir(stage_text(comp, "linalg"), """
        CHECK: linalg.fill ins(%{{.*}} : i8)
        CHECK: linalg.generic
        CHECK-SAME: iterator_types = ["parallel", "reduction"]
        CHECK: arith.andi {{.*}} : i8
        CHECK-NEXT: arith.ori {{.*}} : i8
        CHECK-NOT: linalg.matvec
    """)


def test_integer_dot_wraps() -> None:
    big = np.array([[2**30, 2**30, 2**30]], np.int32)
    ones = np.ones((3, 1), np.int32)
    assert_same(run_dot(big, ones), np.array([[-(2**30)]], np.int32))  # 3 * 2^30 mod 2^32
    s8 = np.full((1, 4), 100, np.int8)
    assert_same(run_dot(s8, np.ones((4, 1), np.int8)), np.array([[-112]], np.int8))  # 400 - 512
    u8 = np.full((1, 3), 200, np.uint8)
    assert_same(run_dot(u8, np.full((3, 1), 2, np.uint8)), np.array([[176]], np.uint8))  # 1200 % 256


INT_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64]


@pytest.mark.parametrize("dtype", INT_TYPES + [np.float32], ids=lambda d: np.dtype(d).name)
def test_no_contracting_dims_under_a_broadcast(dtype) -> None:
    # A dot_general without contracting dimensions (an outer product; with batch dimensions
    # an elementwise product) read by a broadcast to a new leading dimension. Its loop nest
    # used to accumulate into one buffer once per broadcast copy: copy c held (c + 1) * x * y
    # (issue #14, found while classifying the fuzzer's seed 700840). Expected values are
    # Python ints wrapped by hand.
    if np.dtype(dtype).kind == "f":
        x, y = [1.5, -2.0, 0.25], [4.0, -0.5, 3.0]
        outer = [[a * b for b in y] for a in x]
    else:
        info = np.iinfo(dtype)
        lo, hi, span = int(info.min), int(info.max), 1 << info.bits
        x, y = [lo, hi, 3], [hi, 2, lo + 1]
        outer = [[(a * b - lo) % span + lo for b in y] for a in x]
    t = xm.type_of(np.dtype(dtype))
    n, m = len(x), len(y)

    def compiled(dn: tuple, lhs_dims: tuple, rhs_dims: tuple, out_dims: list[int]) -> xm.Executable:
        b = xm.XlaBuilder("outer")
        d = b.dot_general(b.parameter(0, xm.Shape.array(t, lhs_dims)),
                          b.parameter(1, xm.Shape.array(t, rhs_dims)), dn)
        b.broadcast_in_dim(d, [3] + out_dims, list(range(1, len(out_dims) + 1)))
        return xm.compile(b.build())

    got = compiled((([], []), ([], [])), (n,), (m,), [n, m])(np.array(x, dtype), np.array(y, dtype))
    assert got.tolist() == [outer] * 3
    diagonal = [outer[i][i] for i in range(n)]
    got = compiled((([], []), ([0], [0])), (n,), (n,), [n])(np.array(x, dtype), np.array(y, dtype))
    assert got.tolist() == [diagonal] * 3


def test_complex_dot_does_not_conjugate() -> None:
    for dtype in (np.complex64, np.complex128):
        v = np.array([1j, 2 + 1j], dtype)
        assert_same(run_dot(v, v), np.array((1j) ** 2 + (2 + 1j) ** 2, dtype))  # not |v|^2


def test_f32_64x64x64_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    lhs = rng.standard_normal((64, 64), dtype=np.float32)
    rhs = rng.standard_normal((64, 64), dtype=np.float32)
    expected = lhs.astype(np.float64) @ rhs.astype(np.float64)
    np.testing.assert_allclose(run_dot(lhs, rhs), expected, rtol=1e-4, atol=1e-4)


def test_f16_bf16_accumulate_in_f32() -> None:
    # 2048 + 1 + ... + 1 (16 ones): f16 has an ulp of 2 at 2048, so a sum kept in f16 would stay
    # 2048; XLA:CPU (and we) accumulate in f32 and round once: 2064, exact in f16 and bf16.
    for dtype in (np.float16, BF16):
        lhs = np.array([[2048.0] + [1.0] * 16], dtype)
        rhs = np.ones((17, 1), dtype)
        assert_same(run_dot(lhs, rhs), np.array([[2064.0]], dtype))


# ---- preferred_element_type ------------------------------------------------------------------

PREFERRED = [
    ("s8", xm.S32, np.int32, 127),  # s8 x s8 -> s32: products up to 127^2 do not wrap
    ("u8", xm.U32, np.uint32, 255),
    ("u8", xm.S32, np.int32, 255),
    ("s8", xm.F32, np.float32, 127),
    ("bf16", xm.F32, np.float32, 200),
    ("f16", xm.F32, np.float32, 200),
    ("f32", xm.F64, np.float64, 1000),
    ("f64", xm.F32, np.float32, 1000),  # narrower float: accumulated in f64, rounded once
    ("f32", xm.BF16, BF16, 3),
    ("f32", xm.C64, np.complex64, 3),
    ("c64", xm.C128, np.complex128, 3),
    ("s32", np.int64, np.int64, 1000),  # a numpy dtype works as well
]


@pytest.mark.parametrize("name,preferred,out_dtype,hi", PREFERRED,
                         ids=[f"{p[0]}-{np.dtype(p[2]).name}" for p in PREFERRED])
def test_preferred_element_type(name: str, preferred, out_dtype, hi: int) -> None:
    lhs, rhs = data((3, 8), DTYPES[name], 1, -hi, hi), data((8, 2), DTYPES[name], 2, -hi, hi)
    out = run_dot(lhs, rhs, preferred_element_type=preferred)
    assert_same(out, reference_dot_general(lhs, rhs, DN((1,), (0,)), out_dtype))


def test_mixed_operand_types_with_preferred() -> None:
    lhs, rhs = data((2, 3), np.int8), data((3, 2), np.float32, 1)
    expected = reference_dot_general(lhs.astype(np.float32), rhs, DN((1,), (0,)), np.float32)
    assert_same(run_dot(lhs, rhs, preferred_element_type=xm.F32), expected)


def test_bf16_lowering_converts_then_rounds_once() -> None:
    comp = build_dot_general(np.zeros((2, 3), BF16), np.zeros((3, 4), BF16), DN((1,), (0,)))
    check_ir(stage_text(comp, "linalg"), """
        CHECK-COUNT-2: arith.extf {{.*}} : bf16 to f32
        CHECK: linalg.matmul ins({{.*}} : tensor<2x3xf32>, tensor<3x4xf32>) outs({{.*}} : tensor<2x4xf32>)
        CHECK: arith.truncf {{.*}} : f32 to bf16
    """)


# ---- shapes ----------------------------------------------------------------------------------

SHAPES = [
    ((1, 1), (1, 1), DN((1,), (0,))),  # size-1 everything
    ((2, 0), (0, 3), DN((1,), (0,))),  # zero-size contraction: zeros
    ((0, 4), (4, 3), DN((1,), (0,))),  # zero-size free dimension: empty result
    ((2, 3, 0), (2, 0, 4), DN((2,), (1,), (0,), (0,))),  # batch matmul, empty contraction
    ((3, 2), (2, 3), DN((0,), (1,))),  # transposed operands (contract lhs 0 with rhs 1)
    ((2, 3, 4), (4, 3, 5), DN((1, 2), (1, 0))),  # two contracting dims, in swapped order
    ((4, 2, 3), (3, 5, 4), DN((2, 0), (0, 2))),  # two contracting dims, not adjacent
    ((2, 3), (4, 5), DN((), ())),  # no contraction: outer product, rank 4
    ((), (), DN((), ())),  # scalars
    ((3, 4), (3, 4), DN((), (), (0, 1), (0, 1))),  # batch only: elementwise product
    ((5, 2, 3, 4), (3, 4, 2, 6), DN((3,), (1,), (2, 1), (0, 2))),  # batch dims permuted
    ((2, 1, 3, 2), (3, 2, 2, 1), DN((2, 3), (0, 1), (0,), (2,))),  # batch + 2 contracting + size 1
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn", SHAPES, ids=[f"{s[0]}x{s[1]}" for s in SHAPES])
def test_shapes(lhs_shape, rhs_shape, dn: DN) -> None:
    lhs, rhs = data(lhs_shape, np.float32, 3), data(rhs_shape, np.float32, 4)
    expected = reference_dot_general(lhs, rhs, dn, np.float32)
    assert_same(run_dot_general(lhs, rhs, dn), expected)


def test_output_dimension_order() -> None:
    # batch dims (in lhs_batch order), then lhs free, then rhs free.
    b = xm.XlaBuilder("order")
    lhs = b.parameter(0, xm.Shape.array(xm.F32, (7, 2, 3, 5)))
    rhs = b.parameter(1, xm.Shape.array(xm.F32, (5, 3, 11, 2)))
    out = b.dot_general(lhs, rhs, DN((3,), (0,), (2, 1), (1, 3)))
    assert out.shape == xm.Shape.array(xm.F32, (3, 2, 7, 11))


def test_tuple_form_equals_dataclass() -> None:
    lhs, rhs = data((2, 3, 4), np.float32), data((2, 4, 5), np.float32, 1)
    a = build_dot_general(lhs, rhs, (((2,), (1,)), ((0,), (0,))))
    b = build_dot_general(lhs, rhs, DN([2], [1], [0], [0]))
    assert a.as_mlir_text() == b.as_mlir_text()


def test_dimension_numbers_record() -> None:
    d = DN([np.int64(1)], (0,))
    assert d == DN((1,), (0,)) and hash(d) == hash(DN((1,), (0,)))
    assert d.lhs_batch_dimensions == () and d.lhs_contracting_dimensions == (1,)
    assert isinstance(d.lhs_contracting_dimensions[0], int)
    with pytest.raises(AttributeError):
        d.lhs_batch_dimensions = (0,)  # type: ignore[misc]
    assert DN.of({"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}) == d


# ---- seed examples ---------------------------------------------------------------------------

def test_seed_dot_general_contracting_example() -> None:
    lhs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    rhs = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], np.float32)
    out = run_dot_general(lhs, rhs, DN((1,), (1,)))
    assert_same(out, np.array([[6.0, 12.0], [15.0, 30.0]], np.float32))


def test_seed_dot_general_batch_example() -> None:
    lhs = np.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]], np.float32)
    rhs = np.array([np.eye(2), np.eye(2)], np.float32)
    assert_same(run_dot_general(lhs, rhs, DN((2,), (1,), (0,), (0,))), lhs)


def test_seed_batch_matmul_table() -> None:
    # [b0, m, k] dot [b0, k, n] -> [b0, m, n]; [b0, b1, m, k] dot [b0, b1, k, n] -> [b0, b1, m, n]
    b = xm.XlaBuilder("table")
    x3 = b.parameter(0, xm.Shape.array(xm.F32, (2, 3, 4)))
    y3 = b.parameter(1, xm.Shape.array(xm.F32, (2, 4, 5)))
    x4 = b.parameter(2, xm.Shape.array(xm.F32, (2, 6, 3, 4)))
    y4 = b.parameter(3, xm.Shape.array(xm.F32, (2, 6, 4, 5)))
    assert b.dot_general(x3, y3, DN((2,), (1,), (0,), (0,))).shape.dimensions == (2, 3, 5)
    assert b.dot_general(x4, y4, DN((3,), (2,), (0, 1), (0, 1))).shape.dimensions == (2, 6, 3, 5)


# ---- dot -------------------------------------------------------------------------------------

DOT_CASES = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((), ()), ((2, 0), (0, 3))]


def test_dot_ranks() -> None:
    for ls, rs in DOT_CASES:
        lhs, rhs = data(ls, np.float32, 5), data(rs, np.float32, 6)
        assert_same(run_dot(lhs, rhs), np.asarray(np.dot(lhs, rhs), np.float32))


def test_matmul_operator_and_precision() -> None:
    b = xm.XlaBuilder("matmul")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (3, 2)))
    z = x @ y
    assert z.shape == xm.Shape.array(xm.F32, (2, 2))
    outs = [z, b.dot(z, b.dot(x, y), precision_config="HIGHEST"),
            b.dot_general(x, y, DN((1,), (0,)), precision_config=("high", "DEFAULT"))]
    text = b.build(outs).as_mlir_text()
    assert text.count('precision_config = "DEFAULT,DEFAULT"') == 2
    assert 'precision_config = "HIGHEST,HIGHEST"' in text
    assert 'precision_config = "HIGH,DEFAULT"' in text
    lhs, rhs = data((2, 3), np.float32), data((3, 2), np.float32, 1)
    b2 = xm.XlaBuilder("op")
    b2.parameter(0, param_shape(lhs)) @ b2.parameter(1, param_shape(rhs))
    assert_same(xm.compile(b2.build())(lhs, rhs), lhs @ rhs)


# ---- IR --------------------------------------------------------------------------------------

def test_matmul_lowers_to_linalg_matmul() -> None:
    exe = xm.compile(build_dot_general(np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32),
                                       DN((1,), (0,))))
    check_ir(exe.stages["hlo"], """
        CHECK: "xhlo.dot_general"(%arg0, %arg1)
        CHECK-SAME: lhs_batch_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>
        CHECK-SAME: precision_config = "DEFAULT,DEFAULT", preferred_element_type = f32
        CHECK-SAME: rhs_contracting_dimensions = array<i64: 0>
        CHECK-SAME: (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    """)
    check_ir(exe.stages["linalg"], """
        CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
        CHECK: %[[INIT:.*]] = tensor.empty() : tensor<2x4xf32>
        CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[INIT]] : tensor<2x4xf32>)
        CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3x4xf32>) outs(%[[FILL]] :
        CHECK-NOT: linalg.generic
    """)


def test_batch_lowers_to_linalg_batch_matmul() -> None:
    exe = xm.compile(build_dot_general(np.zeros((5, 2, 3), np.int32), np.zeros((5, 3, 4), np.int32),
                                       DN((2,), (1,), (0,), (0,))))
    check_ir(exe.stages["linalg"], """
        CHECK: linalg.fill
        CHECK: linalg.batch_matmul ins({{.*}} : tensor<5x2x3xi32>, tensor<5x3x4xi32>)
        CHECK-SAME: outs({{.*}} : tensor<5x2x4xi32>)
    """)


def test_other_layouts_lower_to_one_generic() -> None:
    comp = build_dot_general(np.zeros((3, 2, 4), np.float32), np.zeros((5, 4, 2), np.float32),
                             DN((2,), (1,), (1,), (2,)))
    # loops: (batch, lhs free, rhs free, contracting); operands are read in place.
    check_ir(stage_text(comp, "linalg"), """
        CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
        CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3, d0)>
        CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
        CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]],
        CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        CHECK: arith.mulf
        CHECK-NEXT: arith.addf
        CHECK-NOT: linalg.transpose
    """)


def test_hlo_text_round_trip() -> None:
    lhs, rhs = data((2, 3), np.int8), data((3, 2), np.int8, 1)
    comp = build_dot_general(lhs, rhs, DN((1,), (0,)), preferred_element_type=xm.S32)
    text = comp.as_mlir_text()
    assert_same(xm.compile_mlir(text)(lhs, rhs), reference_dot_general(lhs, rhs, DN((1,), (0,)), np.int32))
    with pytest.raises(xm.CompileError, match="dot_general"):
        xm.compile_mlir(text.replace("2x2xi32", "2x3xi32"))
    with pytest.raises(xm.CompileError, match="precision"):
        xm.compile_mlir(text.replace('"DEFAULT,DEFAULT"', '"FAST,DEFAULT"'))


# ---- shape errors ----------------------------------------------------------------------------

F23, F34, F43 = (2, 3), (3, 4), (4, 3)
ERRORS = [
    # (lhs shape, rhs shape, dimension numbers, kwargs, message regex)
    (F23, F43, DN((1,), (0,)), {}, "contracting dimension sizes differ"),
    ((2, 3, 4), (5, 4, 6), DN((2,), (1,), (0,), (0,)), {}, "batch dimension sizes differ"),
    (F23, F34, DN((1,), (0, 1)), {}, "same number of contracting"),
    ((2, 3, 4), (2, 4), DN((2,), (1,), (0,), ()), {}, "same number of batch"),
    (F23, F34, DN((2,), (0,)), {}, "lhs contracting dimension 2 is out of range"),
    (F23, F34, DN((1,), (-1,)), {}, "rhs contracting dimension -1 is out of range"),
    ((2, 3, 4), (2, 4, 5), DN((2,), (1,), (3,), (0,)), {}, "lhs batch dimension 3 is out of range"),
    ((3, 3), (3, 3), DN((1, 1), (0, 1)), {}, "repeat a dimension"),
    ((2, 2, 3), (2, 2, 3), DN((2,), (2,), (0, 0), (0, 1)), {}, "repeat a dimension"),
    ((2, 3, 4), (2, 3, 4), DN((1,), (1,), (1,), (0,)), {}, "both a batch and a contracting"),
    (F23, F34, DN((1,), (0,)), {"precision_config": "LOW"}, "unknown precision"),
    (F23, F34, DN((1,), (0,)), {"precision_config": ("HIGH",) * 3}, "one level per operand"),
    (F23, F34, DN((1,), (0,)), {"preferred_element_type": "int32"}, "not a floating-point type"),
    (F23, F34, DN((1,), (0,)), {"preferred_element_type": xm.PRED}, "not a floating-point type"),
    (F23, F34, DN((1,), (0,)), {"preferred_element_type": "not a type"}, "is not an element type"),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn,kwargs,message", ERRORS,
                         ids=[f"{i}-{e[4][:20]}" for i, e in enumerate(ERRORS)])
def test_dot_general_shape_errors(lhs_shape, rhs_shape, dn, kwargs, message) -> None:
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, xm.Shape.array(xm.F32, lhs_shape))
    y = b.parameter(1, xm.Shape.array(xm.F32, rhs_shape))
    with pytest.raises(xm.ShapeError, match=message) as info:
        b.dot_general(x, y, dn, **kwargs)
    assert info.value.op == "dot_general"


TYPE_ERRORS = [
    # (lhs type, rhs type, preferred, message regex)
    (xm.S8, xm.S32, None, "same element type"),
    (xm.F32, xm.F16, None, "same element type"),
    (xm.S32, xm.S32, xm.S8, "narrower than the operand type s32"),
    (xm.S32, xm.S32, xm.F16, "narrower than the operand type s32"),
    (xm.S8, xm.S8, xm.PRED, "narrower"),
    (xm.F32, xm.F32, xm.S32, "not a floating-point type"),
    (xm.C64, xm.C64, xm.F32, "imaginary part"),
    (xm.S8, xm.F32, xm.S32, "not a floating-point type"),  # mixed: each operand must fit
]


@pytest.mark.parametrize("lt,rt,preferred,message", TYPE_ERRORS)
def test_dot_general_type_errors(lt, rt, preferred, message) -> None:
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, xm.Shape.array(lt, (2, 3)))
    y = b.parameter(1, xm.Shape.array(rt, (3, 2)))
    with pytest.raises(xm.ShapeError, match=message):
        b.dot_general(x, y, DN((1,), (0,)), preferred_element_type=preferred)


def test_bad_operands_and_dimension_number_forms() -> None:
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    t = b.tuple([x])
    with pytest.raises(xm.ShapeError, match="must be arrays"):
        b.dot_general(t, x, DN((), ()))
    with pytest.raises(xm.ShapeError, match="must be arrays"):
        b.dot(x, t)
    for bad in ("(1,0)", ((1,), (0,)), 3, (((1.5,), (0,)), ((), ()))):
        with pytest.raises(xm.ShapeError):
            b.dot_general(x, x, bad)
    with pytest.raises(xm.ShapeError, match="must be ints"):
        DN((True,), (0,))
    with pytest.raises(xm.ShapeError, match="missing"):
        DN.of({"lhs_contracting_dimensions": (1,)})
    with pytest.raises(xm.ShapeError, match="expected an XlaOp"):
        b.dot(x, np.ones((3, 2), np.float32))
    other = xm.XlaBuilder("other").parameter(0, xm.Shape.array(xm.F32, (3,)))
    with pytest.raises(xm.ShapeError, match="belongs to builder"):
        b.dot(x, other)


def test_dot_shape_errors() -> None:
    b = xm.XlaBuilder("bad")
    m = b.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    v = b.parameter(1, xm.Shape.array(xm.F32, (4,)))
    s = b.parameter(2, xm.Shape.array(xm.F32, ()))
    t3 = b.parameter(3, xm.Shape.array(xm.F32, (5, 2, 3)))
    u3 = b.parameter(4, xm.Shape.array(xm.F32, (5, 3, 4)))
    with pytest.raises(xm.ShapeError, match=r"contracted dimensions differ: lhs dimension 1 has size 3"):
        b.dot(m, v)
    with pytest.raises(xm.ShapeError, match=r"lhs dimension 0 has size 4, rhs dimension 0 has size 2"):
        b.dot(v, m)
    with pytest.raises(xm.ShapeError, match="use mul"):
        b.dot(s, v)
    # D8: rank > 2 is rejected with a fix-it naming the dot_general call.
    fix_it = r"rank <= 2.*dot_general\(lhs, rhs, DotDimensionNumbers\(\(2,\), \(1,\), \(0,\), \(0,\)\)\)"
    with pytest.raises(xm.ShapeError, match=fix_it):
        b.dot(t3, u3)
    with pytest.raises(xm.ShapeError, match=r"rank <= 2.*dot_general"):
        t3 @ m
    with pytest.raises(xm.ShapeError) as info:
        b.dot(m, m)
    assert info.value.op == "dot"
