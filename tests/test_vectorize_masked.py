"""The vector schedule of generics whose bodies use their iteration indices (issue #17):
`linalg.index` and `affine.apply` of it, as a mask `iota < size` fused into a reduction
over a dynamic dimension makes them (lowering/passes/vectorize.py). Values against numpy
at empty, tiny, partial and full sizes and odd shapes; the same bits as the static
program and on every x86-64 level; the masked loop is vector code."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from conftest import check_ir_here, stage_text
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor
from targets_support import runs_here

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.runtime.compiler import load_async_runtime, runtime_libraries

N = 1_000_000
ODD = 99_991  # prime: no lane split of 16, a peeled remainder


def _sum_of_squares(n: int, dynamic: bool, reducer: str = "add") -> xm.XlaComputation:
    b = xm.XlaBuilder("sum_of_squares")
    x = b.parameter(0, xm.Shape.array(np.float32, (n,)))
    size = b.parameter(1, xm.Shape.scalar(xm.S32))
    if dynamic:
        x = b.set_dimension_size(x, size, 0)
    init = np.float32(0 if reducer == "add" else -np.inf)
    b.reduce(x * x, init, lambda acc, v: getattr(acc.builder, reducer)(acc, v), [0])
    return b.build()


def _values(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("n", [N, ODD])
@pytest.mark.parametrize("reducer", ["add", "max"])
def test_masked_reduce_against_numpy(n: int, reducer: str) -> None:
    exe = xm.compile(_sum_of_squares(n, True, reducer))
    x = _values(n)
    for size in (0, 1, 5, 17, n - 1000, n - 1, n):
        got = exe(x, np.int32(size))
        squares = x[:size].astype(np.float64) ** 2
        if reducer == "add":
            np.testing.assert_allclose(got, squares.sum(), rtol=1e-4, atol=1e-6, err_msg=f"size {size}")
        else:
            assert got == (np.float32(squares.max()) if size else -np.inf), f"size {size}"


@pytest.mark.parametrize("n", [N, ODD])
def test_masked_reduce_at_full_size_is_the_static_reduce(n: int) -> None:
    """The mask only drops lanes: at the bound the order of the additions is the static one."""
    x = _values(n, 1)
    dynamic = xm.compile(_sum_of_squares(n, True))(x, np.int32(n))
    static = xm.compile(_sum_of_squares(n, False))(x, np.int32(n))
    assert dynamic.view(np.uint32) == static.view(np.uint32)


@pytest.mark.parametrize("shape", [(37, 41), (5, 1003), (64, 16), (1, 33)])
@pytest.mark.parametrize("dimension", [0, 1])
def test_masked_reduce_of_either_dimension(shape: tuple[int, int], dimension: int) -> None:
    """The mask's index is a reduction dimension (dimension 0, the outer loop) or the
    innermost one, kept either as a reduction or as a parallel dimension of the result."""
    b = xm.XlaBuilder("masked")
    x = b.parameter(0, xm.Shape.array(np.float32, shape))
    size = b.parameter(1, xm.Shape.scalar(xm.S32))
    d = b.set_dimension_size(x, size, dimension)
    b.tuple([b.reduce(d, np.float32(0), lambda a, v: a + v, [dimension]),
             b.reduce(d, np.float32(0), lambda a, v: a + v, [1 - dimension])])
    exe = xm.compile(b.build())
    values = _values(shape[0] * shape[1], 2).reshape(shape)
    bound = shape[dimension]
    for size in sorted({0, 1, 5 % (bound + 1), bound - 1, bound}):
        valid = values[:size] if dimension == 0 else values[:, :size]
        kept, other = exe(values, np.int32(size))
        np.testing.assert_allclose(kept, valid.astype(np.float64).sum(dimension), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(other, valid.astype(np.float64).sum(1 - dimension), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(37, 41), (3, 16), (17, 5)])
def test_iota_of_parallel_dimensions(shape: tuple[int, int]) -> None:
    """linalg.index of the innermost dimension (a vector.step), of an outer one (a
    broadcast), and d0 * C + d1 (an iota over the flat array reshaped)."""
    rows, cols = shape
    b = xm.XlaBuilder("iota")
    x = b.parameter(0, xm.Shape.array(np.int32, shape))
    across = b.iota(xm.Shape.array(np.int32, shape), 1) * b.constant(np.int32(1000))
    flat = b.reshape(b.iota(xm.Shape.array(np.int32, (rows * cols,)), 0), shape)
    b.add(b.add(x, b.iota(xm.Shape.array(np.int32, shape), 0)), across + flat * b.constant(np.int32(7)))
    exe = xm.compile(b.build())
    values = np.arange(rows * cols, dtype=np.int32).reshape(shape) * 3
    i, j = np.indices(shape)
    np.testing.assert_array_equal(exe(values), values + i + 1000 * j + 7 * (i * cols + j))


# -- the schedule on generics written by hand: maps of several dimensions and symbols,
# floordiv and mod, an index of the reduction dimension --------------------------------------

_GENERICS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#scalar = affine_map<(d0, d1) -> ()>
#mix = affine_map<(d0, d1) -> ((d0 * 7 + d1) floordiv 3 + (d0 + d1 * 2) mod 5)>
#sym = affine_map<(d0)[s0] -> (d0 + s0 * 16)>
module {{
  func.func @main(%x: memref<{R}x{C}xf32>, %n: memref<i32>, %o1: memref<{R}x{C}xf32>,
                  %o2: memref<{C}xf32>) attributes {{llvm.emit_c_interface}} {{
    linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
        ins(%x : memref<{R}x{C}xf32>) outs(%o1 : memref<{R}x{C}xf32>) {{
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %k = affine.apply #mix(%i, %j)
      %ki = arith.index_cast %k : index to i32
      %kf = arith.sitofp %ki : i32 to f32
      %r = arith.mulf %kf, %in : f32
      linalg.yield %r : f32
    }}
    linalg.generic {{indexing_maps = [#id, #scalar, #row], iterator_types = ["reduction", "parallel"]}}
        ins(%x, %n : memref<{R}x{C}xf32>, memref<i32>) outs(%o2 : memref<{C}xf32>) {{
    ^bb0(%in: f32, %s: i32, %out: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %k = affine.apply #sym(%i)[%j]
      %ki = arith.index_cast %k : index to i32
      %m = arith.cmpi slt, %ki, %s : i32
      %z = arith.constant 0.0 : f32
      %v = arith.select %m, %in, %z : f32
      %r = arith.addf %out, %v : f32
      linalg.yield %r : f32
    }}
    return
  }}
}}
"""


def _run_from_vectorized(text: str) -> tuple[str, ExecutionEngine]:
    """`text` (buffers, as the 'bufferized' stage leaves them) through the stages from
    'vectorized' on, JIT-compiled."""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        pipeline = xm.Pipeline.default()
        names = pipeline.stage_names
        for stage in names[:names.index("vectorized")]:
            pipeline.replace(stage, [])
        stages = pipeline.run(module)
        load_async_runtime()
        return stages["vectorized"], ExecutionEngine(module, opt_level=2, shared_libs=runtime_libraries())


@pytest.mark.parametrize("shape", [(13, 45), (16, 16), (24, 7), (1, 33), (40, 64)])
def test_index_maps_by_hand(shape: tuple[int, int]) -> None:
    rows, cols = shape
    vectorized, engine = _run_from_vectorized(_GENERICS.format(R=rows, C=cols))
    assert "linalg.generic" not in vectorized and vectorized.count("vector.step") >= 2, vectorized
    x = _values(rows * cols, 3).reshape(shape)
    i, j = np.indices(shape)
    flat = i + 16 * j
    for size in sorted({0, 5, rows * cols // 2, rows * cols - 1, rows * cols, 10 * rows * cols}):
        o1, o2 = np.zeros(shape, np.float32), np.zeros((cols,), np.float32)
        args = [x, np.array(size, np.int32), o1, o2]
        engine.invoke("main", *[ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))
                                for a in args])
        np.testing.assert_array_equal(o1, (((i * 7 + j) // 3) + (i + 2 * j) % 5).astype(np.float32) * x)
        want = np.where(flat < size, x, 0).astype(np.float64).sum(0)
        np.testing.assert_allclose(o2, want, rtol=1e-6, atol=1e-6)


def test_other_ops_in_a_body_still_keep_it_scalar() -> None:
    """Only the index ops were added: a load from memory in the body still refuses the schedule."""
    text = _GENERICS.format(R=8, C=32).replace(
        "%m = arith.cmpi slt, %ki, %s : i32",
        "%s2 = memref.load %n[] : memref<i32>\n      %m = arith.cmpi slt, %ki, %s2 : i32")
    vectorized, _ = _run_from_vectorized(text)
    assert "vector.step" in vectorized  # the first generic
    assert re.search(r"affine.store %\w+, %arg3\[%\w+\] : memref<32xf32>", vectorized), vectorized


# -- targets and IR --------------------------------------------------------------------------


TARGETS = ["x86-64-v2", "x86-64-v3", pytest.param("x86-64-v4", marks=pytest.mark.skipif(
    not runs_here("x86-64-v4"), reason="this CPU has no AVX-512: cannot run x86-64-v4 code"))]


@pytest.mark.parametrize("target", TARGETS)
def test_masked_reduce_same_bits_on_every_target(target: str) -> None:
    comp = _sum_of_squares(ODD, True)
    x = _values(ODD, 4)
    host = xm.compile(comp)
    other = xm.compile(comp, target_cpu=target)
    for size in (0, 5, ODD - 1000, ODD):
        assert host(x, np.int32(size)).view(np.uint32) == other(x, np.int32(size)).view(np.uint32), size


def test_ir_masked_reduce_loop_is_vector_code() -> None:
    """The mask's iota is a vector.step, compared and selected sixteen lanes at a time in the
    loop over the chunks (was: scalar affine loops, one element per iteration)."""
    text = stage_text(_sum_of_squares(N, True), "vectorized")
    # CHECK: vector.step : vector<16xindex>
    # CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>)
    # CHECK: vector.transfer_read {{.*}} vector<16xf32>
    # CHECK: arith.cmpi slt, {{.*}} : vector<16xi32>
    # CHECK-NEXT: arith.select {{.*}} : vector<16xi1>, vector<16xf32>
    # CHECK-NEXT: arith.addf {{.*}} : vector<16xf32>
    # CHECK: scf.yield
    check_ir_here(text)
