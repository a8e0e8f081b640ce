"""While-loop state updated in place (lowering/passes/loop_state.py): the bufferized loop
carries no buffer, allocates and copies no state per iteration, also when the body reads
the old counter after computing the new one (an RNN step's dynamic_slice index)."""

from __future__ import annotations

import re

import numpy as np

import xlamlir as xm


def _rnn(steps: int, n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("rnn")
    w, xs, h0 = (b.parameter(i, xm.Shape.array(xm.F32, s)) for i, s in enumerate([(n, n), (steps, n), (n,)]))

    def cond(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(steps)))

    def body(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        i, w, xs, h = (bb.get_tuple_element(t, j) for j in range(4))
        x_t = bb.reshape(bb.dynamic_slice(xs, [i, bb.constant(np.int32(0))], [1, n]), (n,))
        return bb.tuple([i + np.int32(1), w, xs, bb.tanh(bb.dot(w, h) + x_t)])

    loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), w, xs, h0]))
    return b.build(b.get_tuple_element(loop, 3))


def _while_regions(text: str) -> str:
    start = text.index("scf.while")
    return text[start:text.index("\n    }\n", text.index("} do {", start))]


def test_loop_state_is_updated_in_place_without_copies() -> None:
    exe = xm.compile(_rnn(5, 64))
    loop = _while_regions(exe.stages["bufferized"])
    # No loop-carried buffer: the counter and h live in one buffer each for the whole loop.
    assert loop.startswith("scf.while : () -> ()"), loop[:200]
    assert "memref.copy" not in loop
    # The counter (i32) and h (64 floats) are never allocated inside the loop; the only
    # temporaries are the product's (W h, before the add).
    allocs = re.findall(r"memref\.alloc\(\).*: (memref<[^>]*>)", loop)
    assert "memref<i32>" not in allocs
    # The counter's update is the last write of the body: every read of the old value
    # (the dynamic_slice index) comes before it.
    body = loop[loop.index("} do {"):]
    assert body.rindex("memref.subview") < body.rindex("arith.addi")


def test_loop_reading_the_old_counter_matches_numpy() -> None:
    steps, n = 7, 64
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((n, n)) / 8).astype(np.float32)
    xs = rng.standard_normal((steps, n)).astype(np.float32)
    h = rng.standard_normal(n).astype(np.float32)
    expected = h.astype(np.float64)
    for x_t in xs:
        expected = np.tanh(w @ expected + x_t)
    np.testing.assert_allclose(xm.compile(_rnn(steps, n))(w, xs, h), expected, rtol=1e-5, atol=1e-5)
