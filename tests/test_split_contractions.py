"""Matmuls next to a reshape (an MLP's flatten, a product reshaped for the next layer):
the "fused" stage folds the reshape into the contraction by splitting its loops, and
lowering/passes/split_contractions.py puts them back together so that the "tiled" stage
schedules the product (register tiles of vector.fma) instead of leaving a loop nest.
Inputs are small integers: exact sums, compared exactly with numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir, data
from mlir import ir

import xlamlir as xm
from xlamlir.lowering import schedules
from xlamlir.lowering.passes.split_contractions import collapse_split_contractions

DOT_KM = xm.DotDimensionNumbers((0,), (0,), (), ())  # A stored [K, M]
DOT_NK = xm.DotDimensionNumbers((1,), (1,), (), ())  # B stored [N, K]
BATCHED = xm.DotDimensionNumbers((2,), (1,), (0,), (0,))


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule that fails raises here (it falls back to the generic path otherwise)."""
    monkeypatch.setattr(schedules, "STRICT", True)


def _param(b: xm.XlaBuilder, i: int, shape: tuple[int, ...]) -> xm.XlaOp:
    return b.parameter(i, xm.Shape.array(xm.F32, shape))


def _flatten_dot(b: xm.XlaBuilder) -> None:
    b.dot(b.reshape(_param(b, 0, (64, 8, 16)), (64, 128)), _param(b, 1, (128, 100)))


def _dot_reshaped(b: xm.XlaBuilder) -> None:
    b.reshape(b.dot(_param(b, 0, (64, 128)), _param(b, 1, (128, 96))), (4, 16, 8, 12))


def _mlp_layer(b: xm.XlaBuilder) -> None:
    """flatten -> dense -> bias -> relu: the bias and relu stay the product's epilogue."""
    y = b.dot(b.reshape(_param(b, 0, (64, 4, 32)), (64, 128)), _param(b, 1, (128, 96)))
    biased = b.add(y, b.broadcast_in_dim(_param(b, 2, (96,)), (64, 96), (1,)))
    b.max(biased, b.broadcast(b.constant(np.float32(0)), (64, 96)))


def _dense_reshaped(b: xm.XlaBuilder) -> None:
    """dense -> bias -> relu -> reshape: the reshape is propagated through the bias and relu
    into the product; both are collapsed back, and the bias and relu fused as the epilogue."""
    y = b.dot(_param(b, 0, (64, 128)), _param(b, 1, (128, 96)))
    biased = b.add(y, b.broadcast_in_dim(_param(b, 2, (96,)), (64, 96), (1,)))
    b.reshape(b.max(biased, b.broadcast(b.constant(np.float32(0)), (64, 96))), (64, 8, 12))


def _bias_on_a_split_dim(b: xm.XlaBuilder) -> None:
    """A bias along one of the two dimensions N was split into: the epilogue cannot be
    collapsed (it stays a loop of its own), the product still can."""
    y = b.reshape(b.dot(_param(b, 0, (64, 128)), _param(b, 1, (128, 96))), (64, 8, 12))
    b.add(y, b.broadcast_in_dim(_param(b, 2, (12,)), (64, 8, 12), (2,)))


def _transposed_a(b: xm.XlaBuilder) -> None:
    b.dot_general(b.reshape(_param(b, 0, (8, 16, 64)), (128, 64)), _param(b, 1, (128, 80)), DOT_KM)


def _transposed_b(b: xm.XlaBuilder) -> None:
    x = b.reshape(_param(b, 0, (64, 4, 32)), (64, 128))
    b.reshape(b.dot_general(x, _param(b, 1, (96, 128)), DOT_NK), (64, 8, 12))


def _batched(b: xm.XlaBuilder) -> None:
    y = b.dot_general(_param(b, 0, (4, 64, 128)), _param(b, 1, (4, 128, 96)), BATCHED)
    b.reshape(y, (2, 2, 64, 96))


def _numpy(name: str, args: list[np.ndarray]) -> np.ndarray:
    a = [x.astype(np.float64) for x in args]
    if name == "_flatten_dot":
        return a[0].reshape(64, 128) @ a[1]
    if name == "_dot_reshaped":
        return (a[0] @ a[1]).reshape(4, 16, 8, 12)
    if name == "_mlp_layer":
        return np.maximum(a[0].reshape(64, 128) @ a[1] + a[2], 0)
    if name == "_dense_reshaped":
        return np.maximum(a[0] @ a[1] + a[2], 0).reshape(64, 8, 12)
    if name == "_bias_on_a_split_dim":
        return (a[0] @ a[1]).reshape(64, 8, 12) + a[2]
    if name == "_transposed_a":
        return a[0].reshape(128, 64).T @ a[1]
    if name == "_transposed_b":
        return (a[0].reshape(64, 128) @ a[1].T).reshape(64, 8, 12)
    return (a[0] @ a[1]).reshape(2, 2, 64, 96)


PROGRAMS = [_flatten_dot, _dot_reshaped, _mlp_layer, _dense_reshaped, _bias_on_a_split_dim,
            _transposed_a, _transposed_b, _batched]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_scheduled_and_exact(program) -> None:
    b = xm.XlaBuilder(program.__name__.strip("_"))
    program(b)
    comp = b.build()
    exe = xm.compile(comp)
    # The split generic is fused (the bug this guards against), then scheduled.
    assert "vector.fma" in exe.stages["tiled"]
    args = [data(s.dimensions, seed=i) for i, s in enumerate(comp.program_shape()[0])]
    got = exe(*args)
    if program in (_mlp_layer, _dense_reshaped):  # the epilogue fused: no loop nest of its own
        assert "linalg.generic" not in exe.stages["tiled"]
    np.testing.assert_array_equal(got, _numpy(program.__name__, args).astype(np.float32))


def test_ir_flatten_dot_is_a_matmul_again() -> None:
    b = xm.XlaBuilder("flatten")
    _flatten_dot(b)
    exe = xm.compile(b.build())
    check_ir(exe.stages["fused"], """
        CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]
    """)
    # A read as [64, 128] (a view of the parameter), B as it is: packed into column panels.
    check_ir(exe.stages["tiled"], """
        CHECK: tensor.collapse_shape %{{.*}} {{\\[}}[0], [1, 2]] : tensor<64x8x16xf32> into tensor<64x128xf32>
        CHECK: scf.forall
        CHECK: vector.fma
    """)


MODULE = """
#a = affine_map<(d0, d1, d2, d3) -> (d0, {a})>
#b = affine_map<(d0, d1, d2, d3) -> ({b}, d1)>
#c = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
func.func @f(%x: tensor<64x8x16xf32>, %w: tensor<{w}x100xf32>) -> tensor<64x100xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x100xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<64x100xf32>) -> tensor<64x100xf32>
  %r = linalg.generic {{indexing_maps = [#a, #b, #c],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}}
      ins(%x, %w : tensor<64x8x16xf32>, tensor<{w}x100xf32>) outs(%c : tensor<64x100xf32>) {{
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %m = arith.mulf %p, %q : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
  }} -> tensor<64x100xf32>
  return %r : tensor<64x100xf32>
}}
"""


@pytest.mark.parametrize("a, b, w, rebuilt", [
    ("d2, d3", "d2, d3", "8x16", 1),  # K split alike in A and B
    ("d2, d3", "d3, d2", "16x8", 0),  # K loops in another order in B: no single K index
])
def test_only_runs_in_one_order_are_collapsed(a: str, b: str, w: str, rebuilt: int) -> None:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(MODULE.format(a=a, b=b, w=w))
        assert collapse_split_contractions(module.operation) == rebuilt
        module.operation.verify()
        if rebuilt:
            text = str(module)
            assert "iterator_types = [\"parallel\", \"parallel\", \"reduction\"]" in text
            assert "tensor.collapse_shape" in text and "tensor.expand_shape" not in text
