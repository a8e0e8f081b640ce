"""A child forked after its parent ran parallel loops (runtime/fork_safety.py): the
parent's thread pool has no threads there, so the child's executables run their loops on
the calling thread, with the parent's bits. Each child is killed by an alarm if it hangs
(the bug: the first parallel loop waited forever)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime import fork_safety

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")

N = (1 << 20) + 3  # large enough to be split across the cores


def _program(name: str, n: int = N) -> xm.XlaComputation:
    b = xm.XlaBuilder(name)
    x = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
    b.add(b.exp(b.neg(x)), b.constant(np.float32(0.25)))
    return b.build()


def _in_child(work: callable) -> bytes:
    """Run `work()` (returning bytes) in a forked child; its bytes, or fail."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        import signal

        signal.alarm(30)
        code = 3
        try:
            os.write(write, work())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"child ended with {os.waitstatus_to_exitcode(status)}"
    return got


def test_parent_executable_and_new_compile_in_a_forked_child() -> None:
    exe = xm.compile(_program("before_fork"))
    assert exe.dispatches_parallel_loops and fork_safety.DISPATCHER in exe.stages["llvm"]
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    want = exe(x)
    exe(x)  # the second call switches the parent's executable to the C call path

    def work() -> bytes:
        old = exe(x)  # the parent's program, run without its thread pool
        fresh = xm.compile(_program("after_fork"))
        assert not fresh.dispatches_parallel_loops
        assert fork_safety.DISPATCHER not in fresh.stages["llvm"]
        return old.tobytes() + fresh(x).tobytes()

    got = _in_child(work)
    assert got == want.tobytes() * 2
    # The parent is untouched: its loops still run on the pool.
    np.testing.assert_array_equal(exe(x), want)
    assert fork_safety.pool_usable()


def test_a_tuple_program_with_a_reduction_in_a_forked_child() -> None:
    b = xm.XlaBuilder("tuple_fork")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2048, 1024)))
    e = b.exp(x)
    b.tuple([e, b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])])
    exe = xm.compile(b.build())
    a = np.random.default_rng(1).standard_normal((2048, 1024)).astype(np.float32)
    want = exe(a)
    got = _in_child(lambda: b"".join(r.tobytes() for r in exe(a)))
    assert got == b"".join(r.tobytes() for r in want)


def test_a_child_of_a_parent_that_never_loaded_the_pool_keeps_parallel_loops() -> None:
    script = textwrap.dedent("""
        import os, signal, numpy as np
        import xlamlir as xm
        from xlamlir.runtime import fork_safety
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            b = xm.XlaBuilder("child_only")
            x = b.parameter(0, xm.Shape.array(xm.F32, (1 << 20,)))
            b.exp(x)
            exe = xm.compile(b.build())
            ok = (exe.dispatches_parallel_loops
                  and exe(np.zeros(1 << 20, np.float32)).min() == 1.0)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    env = {**os.environ, "XLAMLIR_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.stdout.strip() == "child 0", done.stderr[-2000:]
