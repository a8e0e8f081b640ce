"""Replicas run in parallel: the compiled code runs without the GIL.

Proved without timing (a Python thread advances during the native call, whatever
the machine's load); `bench/replica_concurrency.py` measures the ratio of two
replicas' time to one's (about 1.0 on an idle 2-core machine; a timed assertion in
the suite failed whenever other work shared the cores).
"""

from __future__ import annotations

import time

import numpy as np

import xlamlir as xm


def spin(iterations: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("spin")
    x = b.parameter(0, xm.Shape.array(xm.F32, (16,)))

    def cond(s: xm.XlaOp) -> xm.XlaOp:
        sb = s.builder
        return sb.lt(sb.get_tuple_element(s, 0), sb.constant(np.int32(iterations)))

    def body(s: xm.XlaOp) -> xm.XlaOp:
        sb = s.builder
        i, v = sb.get_tuple_element(s, 0), sb.get_tuple_element(s, 1)
        v = sb.add(sb.mul(v, sb.constant(np.float32(0.999))), sb.constant(np.float32(0.001)))
        return sb.tuple([sb.add(i, sb.constant(np.int32(1))), v])

    state = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
    return b.build(b.cross_replica_sum(b.get_tuple_element(state, 1)))


def test_two_replicas_compute_what_one_does_twice():
    comp = spin(1_000)
    one, two = xm.compile(comp, num_replicas=1), xm.compile(comp, num_replicas=2)
    x = np.ones(16, np.float32)
    expected = one.execute_replicated([[x]])[0]
    for result in two.execute_replicated([[x], [x]]):
        np.testing.assert_allclose(result, 2 * expected, rtol=1e-6)


def test_the_native_call_does_not_hold_the_gil():
    """A Python thread keeps running while a replica computes (whatever the machine's load)."""
    import sys
    import threading

    exe = xm.compile(spin(20_000_000))
    x = np.ones(16, np.float32)
    exe(x)
    progress, stop = [0], [False]

    def count() -> None:
        while not stop[0]:
            progress[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    counter = threading.Thread(target=count)
    counter.start()
    try:
        time.sleep(0.02)
        before = progress[0]
        exe(x)
        during = progress[0] - before
    finally:
        stop[0] = True
        counter.join()
        sys.setswitchinterval(interval)
    # Holding the GIL for the whole call would let the counter run only between switches.
    assert during > 10_000, f"the counter advanced {during} times during the call"
