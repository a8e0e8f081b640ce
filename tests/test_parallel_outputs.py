"""lowering/passes/parallel_outputs.py: no all-parallel generic reads its output before
elementwise fusion (fusion into a broadcasting consumer kept such an output as an
accumulator updated once per consumer element: x*y, 2x*y, 3x*y)."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.passmanager import PassManager

import xlamlir as xm
from xlamlir.lowering.passes.generic_attrs import all_parallel
from xlamlir.lowering.passes.parallel_outputs import _read_outputs, outputs_as_inputs

_DATA_INIT = """
#id = affine_map<(d0) -> (d0)>
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%b : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<3x4xf32>
  %1 = linalg.generic {indexing_maps = [#row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4xf32>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<3x4xf32>
  return %1 : tensor<3x4xf32>
}
"""


def _generics_reading_outputs(module: ir.Module) -> list[str]:
    found: list[str] = []

    def visit(op):
        if op.name == "linalg.generic" and all_parallel(op) and _read_outputs(op):
            found.append(str(op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def test_a_read_output_with_data_becomes_an_input() -> None:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_DATA_INIT)
        assert len(_generics_reading_outputs(module)) == 1
        outputs_as_inputs(module.operation, None)
        module.operation.verify()
        assert _generics_reading_outputs(module) == []
        text = str(module)
        assert "ins(%arg0, %arg1 : tensor<4xf32>, tensor<4xf32>)" in text  # b is now read as input
        PassManager.parse("builtin.module(func.func(linalg-fuse-elementwise-ops))").run(module.operation)
        fused = str(module)
        # One loop nest computing a[j] + b[j] per element, b read as an input, never accumulated.
        assert fused.count("linalg.generic") == 1 and "arith.addf" in fused
        assert _generics_reading_outputs(module) == []


def test_an_outer_product_under_a_broadcast_is_computed_once_per_element() -> None:
    b = xm.XlaBuilder("outer_broadcast")
    x = b.parameter(0, xm.Shape.array(xm.S64, (2,)))
    y = b.parameter(1, xm.Shape.array(xm.S64, (2,)))
    outer = b.dot_general(x, y, xm.DotDimensionNumbers((), (), (), ()))
    b.broadcast(outer, (3,))
    exe = xm.compile(b.build())
    xv, yv = np.array([2**62, -3], np.int64), np.array([4, 7], np.int64)
    with np.errstate(over="ignore"):
        expected = np.broadcast_to(np.multiply.outer(xv, yv), (3, 2, 2))
    np.testing.assert_array_equal(exe(xv, yv), expected)
