"""Threads: one executable called from 8 threads at once gives every thread its own right
results (tuple results, strided inputs that compile the dynamic-stride variant on first use,
custom-call callbacks, argument errors), and compiling from several threads at once is safe,
the same computation included (test_runtime.py has the basic 8-thread elementwise case).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

import xlamlir as xm

S = xm.Shape.parse
THREADS = 8


def run_threads(work: Callable[[int], None], n: int = THREADS) -> list[str]:
    """Run work(t) on n threads started together; the exceptions they raised, as text."""
    errors: list[str] = []
    barrier = threading.Barrier(n)

    def body(t: int) -> None:
        try:
            barrier.wait()
            work(t)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    return errors


def test_one_executable_from_8_threads_tuple_results_and_strided_inputs() -> None:
    b = xm.XlaBuilder("thr_tuple")
    x = b.parameter(0, S("f64[64,32]"))
    k = b.parameter(1, S("s64[]"))
    kf = b.convert_element_type(k, xm.F64)
    b.tuple([b.mul(x, kf), b.reduce(x, b.constant(np.float64(0)),
                                    lambda p, q: p + q, [1]), k])
    exe = xm.compile(b.build())

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        for j in range(30):
            base = rng.integers(-50, 50, (128, 64)).astype(np.float64)
            x = base[::2, ::2] if (t + j) % 3 == 0 else base[::-2, 1::2] if (t + j) % 3 == 1 \
                else np.ascontiguousarray(base[:64, :32])
            kk = t * 1000 + j
            scaled, sums, back = exe(x, kk)
            assert np.array_equal(scaled, x * kk), (t, j)
            assert np.array_equal(sums, x.sum(1)), (t, j)
            assert back == kk

    assert run_threads(work) == []


def test_custom_call_callbacks_from_8_threads() -> None:
    seen: dict[int, int] = {}
    lock = threading.Lock()

    def target(x):
        with lock:
            seen[threading.get_ident()] = seen.get(threading.get_ident(), 0) + 1
        return x * 2

    xm.register_custom_call("threads_double", target)
    b = xm.XlaBuilder("thr_cc")
    x = b.parameter(0, S("f32[16]"))
    b.add(b.custom_call("threads_double", [x], S("f32[16]")), x)
    exe = xm.compile(b.build())

    def work(t: int) -> None:
        for j in range(40):
            v = np.full(16, t * 100 + j, np.float32)
            assert np.array_equal(exe(v), v * 3), (t, j)

    assert run_threads(work) == []
    assert len(seen) == THREADS and sum(seen.values()) == THREADS * 40


def test_argument_errors_in_one_thread_leave_the_others_alone() -> None:
    b = xm.XlaBuilder("thr_err")
    x = b.parameter(0, S("s32[8]"))
    b.mul(x, x)
    exe = xm.compile(b.build())

    def work(t: int) -> None:
        for j in range(200):
            if t % 2:
                try:
                    exe(np.zeros(8, np.int64))
                except xm.ArgumentError:
                    continue
                raise AssertionError("no ArgumentError")
            v = np.arange(8, dtype=np.int32) + j
            assert np.array_equal(exe(v), v * v)

    assert run_threads(work) == []


def test_compiling_from_several_threads_at_once() -> None:
    def comp(k: int) -> xm.XlaComputation:
        b = xm.XlaBuilder(f"thr_compile_{k}")
        x = b.parameter(0, S("f32[4,8]"))
        b.reduce(b.add(x, b.constant(np.float32(k))), b.constant(np.float32(0)),
                 lambda p, q: b_max(p, q), [1])
        return b.build()

    def b_max(p, q):
        return p.builder.max(p, q)

    shared = comp(-1)  # every thread also compiles this same one: a cache race
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    results: dict[int, object] = {}

    def work(t: int) -> None:
        for j in range(3):
            k = t * 10 + j
            exe = xm.compile(comp(k))
            assert np.array_equal(exe(x), x.max(1) + k), (t, j)
        exe = xm.compile(shared)
        assert np.array_equal(exe(x), x.max(1) - 1)
        results[t] = exe

    assert run_threads(work, 4) == []
    assert len(results) == 4
