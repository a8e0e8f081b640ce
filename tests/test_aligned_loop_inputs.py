"""Parameters a while loop reads whole each iteration, read from a 64-byte aligned copy
when misaligned (lowering/passes/aligned_loop_inputs.py).

The IR tests show which parameters get the run-time check and copy (large, read whole
inside the loop) and which do not (small, read through a slice); the numeric tests run
the same program on inputs at every 16-byte offset from a cache line and compare the
bits.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.lowering.passes.aligned_loop_inputs import MIN_BYTES


def rnn(steps: int, n: int, dtype: np.dtype = np.float32) -> xm.XlaComputation:
    """h <- tanh(W h + U x_t), as bench/nn_ops.py's RNN row (also test_lane_folds.py's)."""
    b = xm.XlaBuilder("rnn")
    w, u, xs, h0 = (b.parameter(i, xm.Shape.array(dtype, d))
                    for i, d in enumerate([(n, n), (n, n), (steps, n), (n,)]))

    def cond(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(steps)))

    def body(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        i, w, u, xs, h = (bb.get_tuple_element(t, j) for j in range(5))
        x_t = bb.reshape(bb.dynamic_slice(xs, [i, bb.constant(np.int32(0))], [1, n]), (n,))
        return bb.tuple([i + np.int32(1), w, u, xs, bb.tanh(bb.dot(w, h) + bb.dot(u, x_t))])

    loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), w, u, xs, h0]))
    return b.build(b.get_tuple_element(loop, 4))


def _at_offset(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `a` whose data starts `offset` bytes after a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == offset
    return out


def test_streamed_matrices_get_an_aligned_copy_the_sliced_input_does_not() -> None:
    bufferized = xm.compile(rnn(5, 256)).stages["bufferized"]
    loop = bufferized.index("scf.while")
    before = bufferized[:loop]
    # W (%arg0) and U (%arg1): checked and copied before the loop; xs (%arg2) is read
    # one row per step through a slice; h0 is small (and the loop state).
    for param in ("%arg0", "%arg1"):
        assert f"memref.extract_aligned_pointer_as_index {param} " in before
        assert f"memref.copy {param}, " in before
    assert before.count("scf.if") == 2
    assert "extract_aligned_pointer_as_index %arg2 " not in bufferized
    assert "extract_aligned_pointer_as_index %arg3 " not in bufferized
    body = bufferized[loop:bufferized.index("return", loop)]
    assert re.search(r"%arg[01]\b", body) is None  # (%arg10 may be a loop's value)


def test_small_parameters_are_read_in_place() -> None:
    n = 32  # 4 KB matrices
    assert n * n * 4 < MIN_BYTES
    assert "extract_aligned_pointer_as_index" not in xm.compile(rnn(3, n)).stages["bufferized"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_alignment_gives_the_same_bits(dtype: np.dtype) -> None:
    steps, n = 4, 128
    rng = np.random.default_rng(7)
    w, u = (rng.standard_normal((n, n)).astype(dtype) / dtype(12) for _ in range(2))
    xs, h = rng.standard_normal((steps, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    exe = xm.compile(rnn(steps, n, dtype))
    assert "extract_aligned_pointer_as_index" in exe.stages["bufferized"]
    results = [np.asarray(exe(*(_at_offset(a, offset) for a in (w, u, xs, h)))) for offset in (0, 16, 32, 48)]
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(f"u{r.dtype.itemsize}"), results[0].view(f"u{r.dtype.itemsize}"))
    expected = h.astype(np.float64)
    for x_t in xs.astype(np.float64):
        expected = np.tanh(w.astype(np.float64) @ expected + u.astype(np.float64) @ x_t)
    np.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-5)
    # The inputs are left as they were (the copy is ours).
    np.testing.assert_array_equal(w, w.copy())



# A while loop reading %src whole every iteration and writing %w (a generic's init), and
# a transpose (which lists no input/init operand segments: taken as a write) of %t.
WRITTEN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%w: memref<64x64xf32>, %src: memref<64x64xf32>, %n: memref<i32>,
                %t: memref<64x64xf32>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.while (%i = %c0) : (i32) -> i32 {
    %limit = memref.load %n[] : memref<i32>
    %go = arith.cmpi slt, %i, %limit : i32
    scf.condition(%go) %i : i32
  } do {
  ^bb0(%j: i32):
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%src : memref<64x64xf32>) outs(%w : memref<64x64xf32>) {
    ^bb1(%a: f32, %b: f32):
      linalg.yield %a : f32
    }
    linalg.transpose ins(%t : memref<64x64xf32>) outs(%out : memref<64x64xf32>) permutation = [1, 0]
    %next = arith.addi %j, %c1 : i32
    scf.yield %next : i32
  }
  return
}
"""


def test_a_parameter_the_function_writes_is_not_copied() -> None:
    from mlir import ir

    from xlamlir.lowering.passes.aligned_loop_inputs import aligned_loop_inputs

    with ir.Context():
        module = ir.Module.parse(WRITTEN)
        aligned_loop_inputs(module.operation, None)
        module.operation.verify()
        text = str(module)
    assert "extract_aligned_pointer_as_index %arg1" in text  # %src
    for written in ("%arg0", "%arg3", "%arg4"):  # %w, %t (the transpose), %out
        assert f"extract_aligned_pointer_as_index {written}" not in text
