"""Large loop nests of a large entry function outlined for the split JIT
(lowering/passes/outline_nests.py): what is outlined, what is not, that the split moves
them, and that a program computes the same bits with and without the pass."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from mlir import ir
from test_aligned_loop_inputs import rnn
from test_split_jit import arguments

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.passes.outline_nests import outline_loop_nests
from xlamlir.runtime import split_jit
from xlamlir.runtime.compiler import clear_cache

S, F32 = xm.Shape.array, xm.F32


def _without_the_pass() -> xm.Pipeline:
    p = xm.Pipeline.default()
    return xm.Pipeline([(n, [q for q in p.passes(n) if q is not outline_loop_nests]) for n in p.stage_names])


def _rnn() -> xm.XlaComputation:
    """The matrix-vector products' loop nests inside a while loop that is all of main."""
    return rnn(20, 256)


def _fft() -> xm.XlaComputation:
    b = xm.XlaBuilder("fft")
    b.fft(b.parameter(0, S(xm.C64, (1 << 16,))), "FFT", (1 << 16,))
    return b.build()


@pytest.mark.parametrize("make", [_rnn, _fft], ids=["rnn", "fft"])
def test_the_nests_move_to_the_second_engine_and_compute_the_same_bits(make) -> None:
    clear_cache()
    exe = xm.compile(make())
    assert "func.func private @main_nest_0(" in exe.stages["loops"]
    assert isinstance(exe._engine, split_jit.LinkedEngines)
    assert any("main_nest_" in slot for slot, _, _ in exe._engine.links)
    whole = xm.compile(make(), pipeline=_without_the_pass())
    assert "_nest_" not in whole.stages["loops"]
    args = arguments(make(), scale=1 / 16)  # the RNN's tanh not saturated: its products show
    got, want = np.asarray(exe(*args)), np.asarray(whole(*args))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_small_programs_and_parallel_bodies_keep_their_loops() -> None:
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, S(F32, (512, 512)))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(x - b.broadcast_in_dim(m, (512, 512), [0]))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.div(e, b.broadcast_in_dim(s, (512, 512), [0]))
    # The softmax is one parallel body: a nest called per block of rows could cost
    # run time; bodies are never outlined.
    assert "_nest_" not in xm.compile(b.build()).stages["loops"]
    b = xm.XlaBuilder("small")
    b.exp(b.parameter(0, S(F32, (64,))))
    assert "_nest_" not in xm.compile(b.build()).stages["loops"]


def _module(stack: bool) -> str:
    """An entry function of ~250 operations: a 3-deep nest (optionally with a stack
    allocation) reading a captured memref and an index, yielding a float, then filler."""
    filler = "\n".join(f"    %f{i} = arith.addf %f{i - 1}, %one : f32" for i in range(1, 180))
    alloca = "%tmp = memref.alloca() : memref<4xf32>" if stack else ""
    adds = "\n".join(f"          %a{i} = arith.addf %a{i - 1}, %v : f32" for i in range(1, 60))
    return textwrap.dedent(f"""
    module {{
      func.func @main(%buf: memref<16x16xf32>, %n: index) -> f32 {{
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c16 = arith.constant 16 : index
        %one = arith.constant 1.0 : f32
        %f0 = arith.constant 0.0 : f32
        %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %f0) -> (f32) {{
          {alloca}
          %row = scf.for %j = %c0 to %c16 step %c1 iter_args(%a0 = %acc) -> (f32) {{
            %v = memref.load %buf[%i, %j] : memref<16x16xf32>
{adds}
            scf.yield %a59 : f32
          }}
          scf.yield %row : f32
        }}
{filler}
        %r = arith.addf %sum, %f179 : f32
        return %r : f32
      }}
    }}""")


@pytest.mark.parametrize("stack", [False, True])
def test_a_nest_becomes_a_call_with_its_captured_values(stack: bool) -> None:
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(_module(stack))
        outline_loop_nests(module.operation, None)
        module.operation.verify()
        text = str(module)
    main, _, rest = text.partition("func.func private @main_nest_0")
    if stack:
        # Stack memory would not outlive a call: the loop holding the alloca stays, the
        # nest inside it (which has none) is outlined, called once per iteration.
        assert "memref.alloca" in main and "memref.alloca" not in rest
        assert "(%arg0: f32, %arg1: memref<16x16xf32>, %arg2: index) -> f32" in rest
        return
    assert rest.startswith("(%arg0: index, %arg1: memref<16x16xf32>) -> f32")
    assert "call @main_nest_0(%arg1, %arg0) : (index, memref<16x16xf32>) -> f32" in main
    assert "scf.for" not in main
