"""Loop hints (lowering/passes/loop_hints.py): loops around vectorized loop nests are
marked not to be unrolled by LLVM; innermost loops and scalar loop nests are left
alone; the marks reach the LLVM dialect (the latch branches) through the pipeline."""

from __future__ import annotations

import numpy as np
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.passes.loop_hints import no_outer_unrolling
from xlamlir.lowering.pipeline import run_pass

_NESTED = """
func.func @f(%m: memref<8x64xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zeros = arith.constant dense<0.0> : vector<16xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c64 step %c16 {
      vector.store %zeros, %m[%i, %j] : memref<8x64xf32>, vector<16xf32>
    }
  }
  scf.for %j = %c0 to %c64 step %c16 {
    vector.store %zeros, %m[%c0, %j] : memref<8x64xf32>, vector<16xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      memref.store %v, %m[%i, %j] : memref<8x64xf32>
    }
  }
  return
}
"""


def test_only_loops_around_vector_loops_are_marked() -> None:
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(_NESTED)
        run_pass(module, "loops", no_outer_unrolling)
        loops = []
        module.operation.walk(lambda op: (loops.append(op) if op.name == "scf.for" else None,
                                          ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
        marked = ["loop_annotation" in loop.attributes for loop in loops]
    # The outer loop of the vector nest; its inner loop, the lone vector loop and both
    # loops of the scalar nest (LLVM vectorizes and unrolls those itself) are not.
    assert marked == [True, False, False, False, False]


def test_hints_reach_the_llvm_stage_of_a_matmul() -> None:
    b = xm.XlaBuilder("matmul")
    x = b.parameter(0, xm.Shape.array(xm.F32, (96, 64)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (64, 80)))
    b.dot(x, w)
    exe = xm.compile(b.build())
    llvm = exe.stages["llvm"]
    assert "#llvm.loop_unroll<disable = true>" in llvm
    assert "{loop_annotation = #loop_annotation}" in llvm
    rng = np.random.default_rng(0)
    a, c = rng.standard_normal((96, 64), dtype=np.float32), rng.standard_normal((64, 80), dtype=np.float32)
    np.testing.assert_allclose(exe(a, c), a.astype(np.float64) @ c, rtol=1e-4, atol=1e-4)


_INNER = """
func.func @f(%m: memref<8x1024xf32>, %big: memref<4096xf32>) -> vector<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %zeros = arith.constant dense<0.0> : vector<16xf32>
  %sum = scf.for %j = %c0 to %c1024 step %c16 iter_args(%acc = %zeros) -> vector<16xf32> {
    %v = vector.load %m[%c0, %j] : memref<8x1024xf32>, vector<16xf32>
    %s = arith.addf %acc, %v : vector<16xf32>
    scf.yield %s : vector<16xf32>
  }
  %short = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %zeros) -> vector<16xf32> {
    %v = vector.load %m[%c1, %j] : memref<8x1024xf32>, vector<16xf32>
    %s = arith.addf %acc, %v : vector<16xf32>
    scf.yield %s : vector<16xf32>
  }
  %long = scf.for %j = %c0 to %c1024 step %c16 iter_args(%acc = %zeros) -> vector<16xf32> {
    %v = vector.load %m[%c0, %j] : memref<8x1024xf32>, vector<16xf32>
    %a = arith.mulf %v, %v : vector<16xf32>
    %b = arith.mulf %a, %v : vector<16xf32>
    %c = arith.mulf %b, %v : vector<16xf32>
    %d = arith.mulf %c, %v : vector<16xf32>
    %e = arith.mulf %d, %v : vector<16xf32>
    %f = arith.mulf %e, %v : vector<16xf32>
    %g = arith.mulf %f, %v : vector<16xf32>
    %h = arith.mulf %g, %v : vector<16xf32>
    %i = arith.mulf %h, %v : vector<16xf32>
    %k = arith.mulf %i, %v : vector<16xf32>
    %l = arith.mulf %k, %v : vector<16xf32>
    %n = arith.mulf %l, %v : vector<16xf32>
    %o = arith.mulf %n, %v : vector<16xf32>
    %p = arith.mulf %o, %v : vector<16xf32>
    %q = arith.mulf %p, %v : vector<16xf32>
    %s = arith.addf %acc, %q : vector<16xf32>
    scf.yield %s : vector<16xf32>
  }
  %c65536 = arith.constant 65536 : index
  %stream = scf.for %j = %c0 to %c65536 step %c16 iter_args(%acc = %zeros) -> vector<16xf32> {
    %v = vector.load %big[%c0] : memref<4096xf32>, vector<16xf32>
    %s = arith.addf %acc, %v : vector<16xf32>
    scf.yield %s : vector<16xf32>
  }
  %all = arith.addf %sum, %short : vector<16xf32>
  %more = arith.addf %all, %stream : vector<16xf32>
  %r = arith.addf %more, %long : vector<16xf32>
  return %r : vector<16xf32>
}
"""


def test_long_small_inner_vector_loops_are_unrolled_partially() -> None:
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(_INNER)
        run_pass(module, "loops", no_outer_unrolling)
        loops = []
        module.operation.walk(lambda op: (loops.append(op) if op.name == "scf.for" else None,
                                          ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
        marks = [str(loop.attributes["loop_annotation"]) if "loop_annotation" in loop.attributes
                 else None for loop in loops]
    # 64 trips of a 2-op body: unrolled 4 times, not 64; 4 trips (LLVM may unroll them
    # all), a 17-op body and 4096 trips (both too big for a full unroll) are left to LLVM.
    assert marks[0] is not None and "count = 4" in marks[0] and "disable" not in marks[0]
    assert marks[1:] == [None, None, None]


def test_partial_unroll_reaches_the_llvm_stage_of_a_row_sum() -> None:
    b = xm.XlaBuilder("row_sum")
    x = b.parameter(0, xm.Shape.array(xm.F32, (64, 1024)))
    b.reduce(x, b.constant(np.float32(0)), lambda acc, v: acc + v, [1])
    exe = xm.compile(b.build())
    assert "#llvm.loop_unroll<count = 4 : i32>" in exe.stages["llvm"]
    a = np.random.default_rng(1).standard_normal((64, 1024), dtype=np.float32)
    np.testing.assert_allclose(exe(a), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
