"""FileCheck tests of the lowering: the "linalg" stage of the elementwise families
(guarded integer division, unsigned ops), and the acceptance test: a chain of
elementwise ops on f32[1M] runs as one fused, vectorized loop.

Our ops print in generic form, so checks match pieces of lines.
"""

# ruff: noqa: E501  (CHECK lines mirror whole lines of IR)

from __future__ import annotations

import numpy as np
from conftest import check_ir, check_ir_here

import xlamlir as xm

S = xm.Shape.parse


def params(b: xm.XlaBuilder, *shapes: str) -> list[xm.XlaOp]:
    return [b.parameter(i, S(s), f"p{i}") for i, s in enumerate(shapes)]


# ---- "linalg": the lowering -----------------------------------------------------------------


def _linalg(shapes: list[str], body) -> str:
    b = xm.XlaBuilder("lin")
    ops = params(b, *shapes)
    return xm.compile(b.build(body(b, *ops))).stages["linalg"]


def test_float_elementwise_linalg() -> None:
    text = _linalg(["f32[4]", "f32[4]"], lambda b, x, y: b.exp(x) * y)
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK-SAME:  iterator_types = ["parallel"]
    # CHECK:       ^bb0(%[[IN:[a-z_0-9]+]]: f32, %{{[a-z_0-9]+}}: f32):
    # CHECK-NEXT:  math.exp %[[IN]] : f32
    # CHECK:       linalg.generic
    # CHECK:       arith.mulf
    # CHECK-NOT:   xhlo.
    check_ir_here(text)


def test_broadcast_linalg() -> None:
    text = _linalg(["f32[2,3]", "f32[3]"], lambda b, m, v: b.add(m, v, (1,)))
    # CHECK-DAG:   [[V:#map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
    # CHECK-DAG:   [[ID:#map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic {indexing_maps = {{\[}}[[V]], [[ID]]]
    # CHECK-SAME:  iterator_types = ["parallel", "parallel"]
    # CHECK-SAME:  ins(%{{[0-9]+}} : tensor<3xf32>)
    # CHECK:       linalg.generic
    # CHECK:       arith.addf
    check_ir_here(text)


def test_signed_divide_is_guarded_linalg() -> None:
    text = _linalg(["s32[4]", "s32[4]"], lambda b, x, y: b.div(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       ^bb0(%[[X:[a-z_0-9]+]]: i32, %[[Y:[a-z_0-9]+]]: i32, %{{[a-z_0-9]+}}: i32):
    # CHECK:       [[ZERO:%[0-9]+]] = arith.cmpi eq, %[[Y]], %{{[a-z_0-9-]+}} : i32
    # CHECK:       [[SAFE:%[0-9]+]] = arith.select %{{[0-9]+}}, %{{[a-z_0-9-]+}}, %[[Y]] : i32
    # CHECK-NEXT:  [[Q:%[0-9]+]] = arith.divsi %[[X]], [[SAFE]] : i32
    # CHECK-NEXT:  [[R:%[0-9]+]] = arith.select [[ZERO]], %{{[a-z_0-9-]+}}, [[Q]] : i32
    # CHECK-NEXT:  linalg.yield [[R]] : i32
    check_ir_here(text)


def test_signed_remainder_is_guarded_linalg() -> None:
    text = _linalg(["s32[4]", "s32[4]"], lambda b, x, y: b.rem(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       arith.cmpi eq
    # CHECK:       [[SAFE:%[0-9]+]] = arith.select
    # CHECK-NEXT:  arith.remsi %{{[a-z_0-9]+}}, [[SAFE]] : i32
    # CHECK-NEXT:  arith.select
    # CHECK-NEXT:  linalg.yield
    check_ir_here(text)


def test_shift_is_guarded_linalg() -> None:
    text = _linalg(["s32[4]", "s32[4]"], lambda b, x, y: b.shift_left(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       [[BIG:%[0-9]+]] = arith.cmpi uge, %{{[a-z_0-9]+}}, %c32_i32 : i32
    # CHECK:       arith.shli
    # CHECK:       arith.select [[BIG]]
    check_ir_here(text)


def test_signed_compare_linalg() -> None:
    text = _linalg(["s32[4]", "s32[4]"], lambda b, x, y: b.lt(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       arith.cmpi slt, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}} : i32
    # CHECK:       linalg.yield %{{[0-9]+}} : {{i1|i8}}
    check_ir_here(text)


def test_float_compare_linalg() -> None:
    text = _linalg(["f32[4]", "f32[4]"], lambda b, x, y: b.ge(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       arith.cmpf oge, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}} : f32
    check_ir_here(text)


def test_unsigned_divide_linalg() -> None:
    text = _linalg(["u32[4]", "u32[4]"], lambda b, x, y: b.div(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       arith.divui %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}} : i32
    # CHECK-NOT:   arith.divsi
    check_ir_here(text)


def test_unsigned_compare_linalg() -> None:
    text = _linalg(["u32[4]", "u32[4]"], lambda b, x, y: b.lt(x, y))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       arith.cmpi ult, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}} : i32
    check_ir_here(text)


def test_unsigned_ops_linalg() -> None:
    text = _linalg(["u16[4]", "u16[4]"], lambda b, x, y: b.convert_element_type(
        b.max(x, y) + b.rem(x, y) + b.shift_right_logical(x, y), xm.F32))
    # CHECK-LABEL: func.func @main
    # CHECK-DAG:   arith.maxui
    # CHECK-DAG:   arith.remui
    # CHECK-DAG:   arith.shrui
    # CHECK-DAG:   arith.uitofp
    # CHECK-NOT:   arith.{{(maxsi|remsi|shrsi|sitofp)}}
    check_ir_here(text)


def test_select_clamp_and_bitcasts_linalg() -> None:
    def body(b, p, x, y):
        lo, hi = b.constant(np.float32(0)), b.constant(np.float32(1))
        clamped = b.clamp(lo, b.select(p, x, y), hi)
        return b.bitcast_convert_type(b.reduce_precision(clamped, 5, 10), xm.S32)

    text = _linalg(["pred[4]", "f32[4]", "f32[4]"], body)
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK:       ^bb0(%{{[a-z_0-9]+}}: {{i1|i8}}, %[[X:[a-z_0-9]+]]: f32, %[[Y:[a-z_0-9]+]]: f32, %{{[a-z_0-9]+}}: f32):
    # CHECK:       arith.select %{{[a-z_0-9]+}}, %[[X]], %[[Y]] : f32
    # CHECK:       linalg.generic
    # clamp is max then min, spelled out (NaN first, -0 < +0; lowering/scalar.py):
    # CHECK-DAG:   arith.cmpf ogt
    # CHECK-DAG:   arith.cmpf olt
    # CHECK-DAG:   arith.cmpf uno
    # CHECK:       linalg.generic
    # CHECK:       arith.bitcast %{{[a-z_0-9]+}} : f32 to i32
    # CHECK:       arith.bitcast %{{[0-9]+}} : i32 to f32
    # CHECK:       linalg.generic
    # CHECK:       arith.bitcast %{{[a-z_0-9]+}} : f32 to i32
    # CHECK-NEXT:  linalg.yield %{{[0-9]+}} : i32
    check_ir_here(text)


def test_convert_float_to_int_saturates_linalg() -> None:
    text = _linalg(["f32[4]"], lambda b, x: b.convert_element_type(x, xm.S32))
    # CHECK-LABEL: func.func @main
    # CHECK:       linalg.generic
    # CHECK-DAG:   arith.cmpf uno
    # CHECK-DAG:   arith.fptosi
    # CHECK:       arith.select
    # CHECK:       linalg.yield %{{[0-9]+}} : i32
    check_ir_here(text)


# ---- acceptance: one fused, vectorized loop over f32[1M] -------------------------------------

N_BIG = 1 << 20


def test_elementwise_chain_on_1m_is_one_fused_vectorized_loop() -> None:
    b = xm.XlaBuilder("chain")
    shape = xm.Shape.array(xm.F32, (N_BIG,))
    x, y, z = (b.parameter(i, shape, n) for i, n in enumerate("xyz"))
    b.tanh(x * y + z) * 0.5 + b.exp(-x)
    exe = xm.compile(b.build())

    assert exe.stages["linalg"].count("linalg.generic") > 1  # fusion has work to do
    check_ir(exe.stages["fused"], """
        CHECK-LABEL:   func.func @main
        CHECK-COUNT-1: linalg.generic
        CHECK-NOT:     linalg.generic
    """)
    check_ir(exe.stages["fused"], """
        CHECK:         linalg.generic
        CHECK-SAME:    ins(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<1048576xf32>, tensor<1048576xf32>, tensor<1048576xf32>)
        CHECK-DAG:     math.exp
        CHECK-DAG:     math.tanh
        CHECK-DAG:     arith.negf
        CHECK:         linalg.yield
    """)
    check_ir(exe.stages["bufferized"], """
        CHECK-LABEL:   func.func @main
        CHECK-NOT:     memref.alloc
        CHECK:         linalg.generic
        CHECK-NOT:     linalg.generic
        CHECK-NOT:     memref.alloc
    """)
    check_ir(exe.stages["vectorized"], """
        CHECK-LABEL:   func.func @main
        CHECK:         scf.forall ({{.*}}) in (2)
        CHECK-COUNT-1: scf.for %{{.*}} = {{.*}} to %c524288 step %c16
        CHECK-DAG:     vector.transfer_read {{.*}} vector<16xf32>
        CHECK-DAG:     vector.transfer_read {{.*}} vector<16xf32>
        CHECK-DAG:     vector.transfer_read {{.*}} vector<16xf32>
        CHECK-DAG:     math.exp %{{[0-9]+}} : vector<16xf32>
        CHECK-DAG:     math.tanh %{{[0-9]+}} : vector<16xf32>
        CHECK:         vector.transfer_write %{{[0-9]+}}, %{{.*}} : vector<16xf32>
        CHECK-NOT:     {{(affine|scf)}}.for
        CHECK-NOT:     linalg.generic
    """)

    rng = np.random.default_rng(0)
    xs, ys, zs = (rng.standard_normal(N_BIG).astype(np.float32) for _ in range(3))
    result = exe(xs, ys, zs)
    x64, y64, z64 = (a.astype(np.float64) for a in (xs, ys, zs))
    expected = np.tanh(x64 * y64 + z64) * 0.5 + np.exp(-x64)
    assert result.shape == (N_BIG,) and result.dtype == np.float32
    np.testing.assert_allclose(result, expected, rtol=2e-6, atol=1e-6)
