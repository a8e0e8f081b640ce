"""The soft-float passes skip modules without small floats (lowering/passes/soft_float.py,
`_has_small_float`): the skip must never miss a value the rewrite would touch."""

from __future__ import annotations

import pytest
from mlir import ir

from xlamlir.dialect.context import new_context
from xlamlir.lowering.passes.soft_float import (
    _NARROW,
    _SMALL_FLOAT_TEXT,
    _has_small_float,
    expand_narrow_floats,
    expand_small_floats,
)


def _run(text: str, expand) -> str:
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        expand(module.operation, None)
        module.operation.verify()
        return str(module)


def _check(text: str) -> bool:
    with new_context(), ir.Location.unknown():
        return _has_small_float(ir.Module.parse(text).operation)


def test_every_small_float_type_prints_with_a_marker():
    with new_context():
        names = [str(ir.F16Type.get()), str(ir.BF16Type.get()), *_NARROW]
        assert all(any(mark in name for mark in _SMALL_FLOAT_TEXT) for name in names)
        assert not any(mark in str(t) for mark in _SMALL_FLOAT_TEXT
                       for t in (ir.F32Type.get(), ir.F64Type.get(), ir.IntegerType.get_signless(16)))


F32_ONLY = """
func.func @main(%a: f32, %v: vector<8xf32>) -> (f64, vector<8xf64>, i32) {
  %0 = arith.extf %a : f32 to f64
  %1 = arith.extf %v : vector<8xf32> to vector<8xf64>
  %2 = arith.fptosi %a : f32 to i32
  return %0, %1, %2 : f64, vector<8xf64>, i32
}
"""


@pytest.mark.parametrize("expand", [expand_narrow_floats, expand_small_floats])
def test_module_without_small_floats_is_unchanged(expand):
    assert not _check(F32_ONLY)
    with new_context():
        assert _run(F32_ONLY, expand) == str(ir.Module.parse(F32_ONLY))


# Each holds a small float in only one place: a function argument (no op result has the
# type), a loop-carried value, a vector element, a memref element read by a load.
ONLY_AS = {
    "function argument": """
func.func private @f(%x: f16) -> f32 {
  %0 = arith.extf %x : f16 to f32
  return %0 : f32
}
""",
    "loop-carried value": """
func.func @f(%x: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (f32) {
    %h = arith.truncf %acc : f32 to bf16
    %w = arith.extf %h : bf16 to f32
    scf.yield %w : f32
  }
  return %r : f32
}
""",
    "vector element": """
func.func @f(%m: memref<8xi8>) -> vector<8xf32> {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0 : i8
  %v = vector.transfer_read %m[%c0], %pad : memref<8xi8>, vector<8xi8>
  %n = arith.bitcast %v : vector<8xi8> to vector<8xf8E4M3FN>
  %w = arith.extf %n : vector<8xf8E4M3FN> to vector<8xf32>
  return %w : vector<8xf32>
}
""",
    "memref element": """
func.func @f(%m: memref<4xf16>) -> f32 {
  %c0 = arith.constant 0 : index
  %h = memref.load %m[%c0] : memref<4xf16>
  %w = arith.extf %h : f16 to f32
  return %w : f32
}
""",
}


@pytest.mark.parametrize("where", list(ONLY_AS))
def test_small_float_in_one_place_is_found_and_rewritten(where):
    text = ONLY_AS[where]
    assert _check(text)
    out = _run(text, expand_small_floats)
    # Every conversion from a small float became integer code.
    assert "arith.extf" not in out and "arith.truncf" not in out
