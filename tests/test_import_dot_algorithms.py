"""Importing dot_general's `algorithm` attribute (each preset becomes the builder's
`algorithm=`, tests/test_dot_algorithms.py checks their numerics) and chlo.ragged_dot
(kept from StableHLO's legalization, which would unroll it per group, and imported as
ragged_dot) from a hand-written fixture, tests/fixtures/stablehlo/dot_algorithms.mlir."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import run

import xlamlir as xm

pytest.importorskip("jax")

FIXTURE = Path(__file__).parent / "fixtures" / "stablehlo" / "dot_algorithms.mlir"
BF16 = np.dtype(ml_dtypes.bfloat16)


def test_fixture():
    computation = xm.import_stablehlo(FIXTURE.read_text(), filename=str(FIXTURE))
    assert computation.as_mlir_text().count("xhlo.ragged_dot") == 1
    # 1 + 2**-10 is not a bf16 (it rounds to 1) nor a tf32 (truncated to 1 + 2**-10: tf32 has
    # 10 fraction bits, so it is one); 1 + 2**-12 is neither.
    x = np.array([[1 + 2**-10, 1 + 2**-12, 0], [2, 0, 1]], np.float32)
    y = np.array([[1, 0], [1, 1], [0, 3]], np.float32)
    h = np.array([[1, 2, 3], [4, 5, 6]], np.float16)
    g = np.array([1, 0], np.int32)
    w = np.stack([y, 2 * y])
    bf16, x3, x6, tf32, f32, f16, ragged = run(computation, x, y, h, g, w)
    exact = x.astype(np.float64) @ y
    np.testing.assert_array_equal(bf16, x.astype(BF16).astype(np.float32) @ y)
    assert bf16[0, 0] == 2.0 and f32[0, 0] == np.float32(exact[0, 0])
    np.testing.assert_array_equal(x6, f32)
    np.testing.assert_array_equal(x3, f32)  # the dropped lo * lo terms are 0 (y is exact in bf16)
    assert tf32[0, 0] == np.float32(1 + 2**-10 + 1)  # 2**-12 truncated away
    np.testing.assert_array_equal(f16, (h.astype(np.float32) @ h.T.astype(np.float32)))
    np.testing.assert_array_equal(ragged, np.stack([x[0] @ y, np.zeros(2)]).astype(np.float32))


def test_ragged_dot_precision_and_s64_group_sizes():
    text = """func.func @main(%x: tensor<2x3xf32>, %w: tensor<2x3x2xf32>, %g: tensor<2xi64>)
        -> tensor<2x2xf32> {
      %0 = "chlo.ragged_dot"(%x, %w, %g) {
          ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [],
              rhs_batching_dimensions = [], lhs_contracting_dimensions = [1],
              rhs_contracting_dimensions = [1],
              lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>,
          precision_config = [#chlo<precision HIGHEST>, #chlo<precision DEFAULT>]}
          : (tensor<2x3xf32>, tensor<2x3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    computation = xm.import_stablehlo(text)
    assert 'precision_config = "HIGHEST,DEFAULT"' in computation.as_mlir_text()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.ones((2, 3, 2), np.float32)
    np.testing.assert_array_equal(run(computation, x, w, np.array([0, 2], np.int64)), [[3, 3], [12, 12]])


def test_storage_types_the_algorithm_rejects():
    text = """func.func @main(%a: tensor<2x2xbf16>) -> tensor<2x2xf32> {
      %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0],
          algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32,
                       lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 3,
                       allow_imprecise_accumulation = false>
          : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    with pytest.raises(xm.XlaError, match="BF16_BF16_F32_X3 takes f32 operands"):
        xm.import_stablehlo(text)


def test_an_algorithm_no_preset_has():
    """StableHLO's verifier refuses unknown combinations itself; ANY_F8_ANY_F8_F32 is known."""
    text = """func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0],
          algorithm = <lhs_precision_type = f8E4M3FN, rhs_precision_type = f8E4M3FN, accumulation_type = f32,
                       lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1,
                       allow_imprecise_accumulation = false>
          : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    with pytest.raises(xm.CompileError, match=r"dot_general at <input>:2:\d+: .*precision f8e4m3fn"):
        xm.import_stablehlo(text)
