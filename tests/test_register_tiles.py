"""lowering/passes/register_tiles.py: a register tile re-assembled from whole rows is one
insert_strided_slice per row (which canonicalization keeps), never a from_elements of every
scalar; anything else is left alone."""

from __future__ import annotations

import numpy as np
from conftest import check_ir
from mlir import ir
from mlir.passmanager import PassManager

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.passes.register_tiles import rows_as_slices


def _rewritten(body: str, args: str, result: str) -> str:
    """`body` in a function, through rows_as_slices and a canonicalization."""
    text = f"func.func @f({args}) -> {result} {{\n{body}\n}}"
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        rows_as_slices(module.operation)
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        return str(module)


def _elements(name: str, count: int) -> list[str]:
    return [f"{name}#{i}" for i in range(count)]


def test_a_tile_of_whole_rows_becomes_row_inserts() -> None:
    scalars = ", ".join(_elements("%0", 4) + _elements("%1", 4) + _elements("%2", 4))
    body = ("%0:4 = vector.to_elements %a : vector<4xf32>\n"
            "%1:4 = vector.to_elements %b : vector<4xf32>\n"
            "%2:4 = vector.to_elements %c : vector<4xf32>\n"
            f"%t = vector.from_elements {scalars} : vector<3x1x4xf32>\nreturn %t : vector<3x1x4xf32>")
    text = _rewritten(body, "%a: vector<4xf32>, %b: vector<4xf32>, %c: vector<4xf32>",
                      "vector<3x1x4xf32>")
    check_ir(text, """
        CHECK:      [[P:%.+]] = ub.poison : vector<3x1x4xf32>
        CHECK-NEXT: [[T:%.+]] = vector.insert_strided_slice %arg0, [[P]] {offsets = [0, 0, 0], strides = [1]}
        CHECK-NEXT: [[U:%.+]] = vector.insert_strided_slice %arg1, [[T]] {offsets = [1, 0, 0], strides = [1]}
        CHECK-NEXT: [[V:%.+]] = vector.insert_strided_slice %arg2, [[U]] {offsets = [2, 0, 0], strides = [1]}
        CHECK-NEXT: return [[V]]
        CHECK-NOT:  from_elements
    """)


def test_a_row_insert_becomes_a_strided_slice_and_a_scalar_insert_stays() -> None:
    body = ("%0 = vector.insert %a, %t [1, 0] : vector<4xf32> into vector<2x1x4xf32>\n"
            "%1 = vector.insert %s, %0 [0, 0, 3] : f32 into vector<2x1x4xf32>\n"
            "return %1 : vector<2x1x4xf32>")
    text = _rewritten(body, "%a: vector<4xf32>, %t: vector<2x1x4xf32>, %s: f32", "vector<2x1x4xf32>")
    check_ir(text, """
        CHECK:      [[U:%.+]] = vector.insert_strided_slice %arg0, %arg1 {offsets = [1, 0, 0], strides = [1]}
        CHECK-NEXT: vector.insert %arg2, [[U]] [0, 0, 3] : f32 into vector<2x1x4xf32>
    """)


def test_elements_out_of_row_order_are_left_alone() -> None:
    order = _elements("%0", 4)
    order[0], order[1] = order[1], order[0]
    body = ("%0:4 = vector.to_elements %a : vector<4xf32>\n"
            "%1:4 = vector.to_elements %b : vector<4xf32>\n"
            f"%t = vector.from_elements {', '.join(order + _elements('%1', 4))} : vector<2x4xf32>\n"
            "return %t : vector<2x4xf32>")
    text = _rewritten(body, "%a: vector<4xf32>, %b: vector<4xf32>", "vector<2x4xf32>")
    assert "vector.from_elements" in text and "insert_strided_slice" not in text


def test_scheduled_matmul_with_6x16_tiles_has_no_from_elements_and_is_exact() -> None:
    """The AVX2 register tile (6 x 16) as well as this machine's; against numpy in float64."""
    from xlamlir.lowering.passes.schedules import Params, scheduler

    b = xm.XlaBuilder("mm")
    b.dot(b.parameter(0, xm.Shape.array(xm.F32, (96, 128))),
          b.parameter(1, xm.Shape.array(xm.F32, (128, 80))))
    pipeline = xm.Pipeline.default().replace("tiled", [scheduler(Params(threads=1, mr=6, nr=16)),
                                                       "canonicalize"])
    exe = xm.compile(b.build(), pipeline)
    assert "vector.fma" in exe.stages["tiled"]
    for stage in list(exe.stages)[1:-1]:
        assert "from_elements" not in exe.stages[stage], stage
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((96, 128), np.float32), rng.standard_normal((128, 80), np.float32)
    np.testing.assert_allclose(exe(x, w), x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
