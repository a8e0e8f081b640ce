"""Parallel loops as plain tasks on the async runtime's thread pool
(lowering/passes/parallel_tasks.py): no async dialect and no LLVM coroutines in the
lowered program, the loops still split across cores, and results that do not depend on
how many worker threads run them."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.passes import parallel_tasks
from xlamlir.lowering.passes.parallel_tasks import SITE_PREFIX, shared_functions_text
from xlamlir.lowering.pipeline import PARALLEL_LOOPS, SEQUENTIAL_LOOPS, Pipeline, run_pass
from xlamlir.runtime import shared_runtime
from xlamlir.runtime.compiler import clear_cache, load_async_runtime

F32 = xm.F32


def softmax(n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, xm.Shape.array(F32, (n, n)))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (n, n), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    return b.build(b.div(e, b.broadcast_in_dim(s, (n, n), [0])))


def matmul(n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("matmul")
    b.dot(b.parameter(0, xm.Shape.array(F32, (n, n))), b.parameter(1, xm.Shape.array(F32, (n, n))))
    return b.build()


def exp_and_row_sums(n: int) -> xm.XlaComputation:
    """Two large ops, each split across cores (softmax is one loop over rows since
    lowering/passes/row_softmax.py)."""
    b = xm.XlaBuilder("exp_and_row_sums")
    x = b.parameter(0, xm.Shape.array(F32, (n, n)))
    sums = b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    return b.build(b.tuple([b.exp(x), sums]))


def test_large_ops_run_as_tasks_without_coroutines() -> None:
    exe = xm.compile(exp_and_row_sums(512))
    loops, llvm = exe.stages["loops"], exe.stages["llvm"]
    # Each split loop became a call to its dispatcher, its body a function of its own.
    assert "scf.parallel" not in loops and "async." not in loops
    assert len(re.findall(r"call @main_parallel_\d+\(", loops)) >= 2
    assert "func.func private @main_parallel_0_body(" in loops
    # No async dialect, no coroutine: one shared dispatcher submitting a plain trampoline
    # to the thread pool; each body reads its values from a context.
    assert "async." not in llvm and "coro" not in llvm
    assert llvm.count("llvm.func internal @xlamlir_parallel_for(") == 1
    assert llvm.count("llvm.func internal @xlamlir_parallel_task(") == 1
    assert llvm.count("llvm.call @mlirAsyncRuntimeExecute(") == 1
    # A worker leaves the program's code by a tail call emplacing its block's token.
    assert "llvm.call musttail @mlirAsyncRuntimeEmplaceToken(" in llvm
    assert "llvm.func @main_parallel_0_body(%arg0: !llvm.ptr, %arg1: i64, %arg2: i64)" in llvm
    dispatches = len(re.findall(r"call @main_parallel_\d+\(", loops))
    assert llvm.count("llvm.call @xlamlir_parallel_for(") == dispatches


def test_shared_functions_parsed_once_are_cloned_into_every_program() -> None:
    # The second and third compiles clone the shared functions parsed by the first (one
    # reused context): each program gets its own complete copy, and runs.
    clear_cache()
    x = np.random.default_rng(1).standard_normal((1024, 1024), dtype=np.float32)
    for n in (1024, 1024, 777):
        clear_cache()
        exe = xm.compile(softmax(n))
        llvm = exe.stages["llvm"]
        assert llvm.count("llvm.func internal @xlamlir_parallel_for(") == 1
        assert llvm.count("llvm.func @mlirAsyncRuntimeExecute(") == 1
        a = x[:n, :n]
        e = np.exp(a - a.max(axis=1, keepdims=True))
        np.testing.assert_allclose(exe(a), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_small_ops_have_no_parallel_loop() -> None:
    b = xm.XlaBuilder("small")
    b.exp(b.parameter(0, xm.Shape.array(F32, (64,))))
    llvm = xm.compile(b.build()).stages["llvm"]
    assert "_parallel_" not in llvm and "mlirAsyncRuntime" not in llvm


# Two loops the library's schedules never make: a 2-D one with more iterations than
# worker threads (blocks of several iterations, the last one shorter) and a 1-D one with
# a lower bound and a step; both read a value computed at run time.
_LOOPS = """
func.func @main(%out: memref<7x5xi64>, %strided: memref<20xi64>, %k: i64)
    attributes {llvm.emit_c_interface} {
  %c100 = arith.constant 100 : i64
  %scale = arith.muli %k, %c100 : i64
  scf.forall (%i, %j) in (7, 5) {
    %ii = arith.index_cast %i : index to i64
    %jj = arith.index_cast %j : index to i64
    %a = arith.muli %ii, %scale : i64
    %v = arith.addi %a, %jj : i64
    memref.store %v, %out[%i, %j] : memref<7x5xi64>
  }
  scf.forall (%i) = (2) to (20) step (3) {
    %ii = arith.index_cast %i : index to i64
    %v = arith.addi %ii, %k : i64
    memref.store %v, %strided[%i] : memref<20xi64>
  }
  return
}
"""


def test_loops_of_private_functions_stay_sequential() -> None:
    """A task calling a function that dispatched tasks itself could block every worker."""
    helper = _LOOPS.replace("func.func @main(", "func.func private @helper(").replace(
        "attributes {llvm.emit_c_interface}", "")
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(_LOOPS + helper)
        run_pass(module, "loops", SEQUENTIAL_LOOPS)
        run_pass(module, "loops", PARALLEL_LOOPS)
        text = str(module)
    assert "@main_parallel_0(" in text and "@main_parallel_1(" in text
    assert "helper_parallel" not in text and text.count("scf.parallel") == 2


def _lowered(text: str, pipeline: Pipeline) -> ir.Module:
    module = ir.Module.parse(text)
    Pipeline([(s, pipeline.passes(s)) for s in ("loops", "llvm")]).run(module)
    return module


def test_hand_written_loops_give_every_iteration_once() -> None:
    load_async_runtime()
    for pipeline in (Pipeline.default(), Pipeline.default().sequential()):
        with new_context(), ir.Location.unknown():
            module = _lowered(_LOOPS, pipeline)
            llvm = str(module)
            assert ("mlirAsyncRuntimeExecute" in llvm) == (pipeline.passes("llvm")
                                                           == Pipeline.default().passes("llvm"))
            engine = ExecutionEngine(module, opt_level=2)
            out = np.full((7, 5), -1, dtype=np.int64)
            strided = np.full(20, -1, dtype=np.int64)
            descriptors = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))
                           for a in (out, strided)]
            engine.invoke("main", *descriptors, ctypes.pointer(ctypes.c_int64(3)))
        i, j = np.indices((7, 5))
        np.testing.assert_array_equal(out, i * 300 + j)
        expected = np.full(20, -1, dtype=np.int64)
        expected[2:20:3] = np.arange(2, 20, 3) + 3
        np.testing.assert_array_equal(strided, expected)


_ONE_WORKER = textwrap.dedent("""
    import ctypes, json, os, sys
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import numpy as np
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import test_parallel_tasks as t
    from xlamlir.runtime.compiler import _async_runtime, load_async_runtime
    import xlamlir as xm
    load_async_runtime()
    workers = _async_runtime[0].mlirAsyncRuntimGetNumWorkerThreads()
    x, w = t.inputs()
    np.save(sys.argv[2], xm.compile(t.softmax(256))(x))
    np.save(sys.argv[3], xm.compile(t.matmul(192))(w, w))
    print(json.dumps({"workers": workers}))
""")


def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((256, 256), dtype=np.float32),
            rng.standard_normal((192, 192), dtype=np.float32))


def test_results_do_not_depend_on_the_number_of_worker_threads(tmp_path: Path) -> None:
    """The same programs in a process confined to one core (one worker thread: every
    loop runs on the calling thread) give bit-identical results."""
    x, w = inputs()
    many = xm.compile(softmax(256))(x), xm.compile(matmul(192))(w, w)
    paths = [tmp_path / "softmax.npy", tmp_path / "matmul.npy"]
    env = {**os.environ, "XLAMLIR_CACHE_DIR": "off"}
    run = subprocess.run([sys.executable, "-c", _ONE_WORKER, __file__, *map(str, paths)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["workers"] == 1
    for ours, path in zip(many, paths):
        np.testing.assert_array_equal(np.load(path), ours)


def test_a_captured_vector_is_read_unaligned_from_the_context() -> None:
    # rng_uniform f16 over 4000 elements captures a vector<16xf32> constant into its parallel
    # loop. The context sits 16-byte aligned on the stack; read with the vector's ABI
    # alignment (64) LLVM emitted an aligned zmm move and the call crashed (SIGSEGV).
    b = xm.XlaBuilder("captured_vector")
    b.rng_uniform(b.constant(np.float16(-1)), b.constant(np.float16(1)), xm.Shape.array(xm.F16, (4000,)))
    exe = xm.compile(b.build())
    llvm_text = exe.stages["llvm"]
    accesses = re.findall(r"llvm\.(?:load|store) [^\n]*vector<16xf32>", llvm_text)
    alignments = [re.search(r"alignment = (\d+)", line) for line in accesses]
    assert accesses and all(a is not None and int(a.group(1)) <= 16 for a in alignments), accesses
    values = exe()
    assert values.shape == (4000,) and values.min() >= -1 and values.max() < 1


def _leave_cpu() -> Callable[[int], None]:
    """The shared functions' `_LEAVE` (a worker stacked on its caller's CPU moves off it),
    compiled with a public wrapper; kept alive by the returned function."""
    load_async_runtime()
    context = new_context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(shared_functions_text("unused") + """
llvm.func @leave(%cpu: i32) {
  llvm.call @xlamlir_parallel_leave_cpu(%cpu) : (i32) -> ()
  llvm.return
}""")
        engine = ExecutionEngine(module, opt_level=2)
    packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup("leave"))

    def leave(cpu: int) -> None:
        value = ctypes.c_int32(cpu)
        packed((ctypes.c_void_p * 1)(ctypes.addressof(value)))

    leave.keep = (context, engine, packed)  # type: ignore[attr-defined]
    return leave


@pytest.mark.skipif(sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
                    reason="a worker moves with Linux's affinity masks, between two CPUs at least")
def test_a_worker_on_its_callers_cpu_moves_off_it_and_keeps_its_mask() -> None:
    leave, libc = _leave_cpu(), ctypes.CDLL(None)
    seen: dict[str, Any] = {}

    def run() -> None:  # a thread of its own: affinity masks are per thread
        allowed = os.sched_getaffinity(0)
        here = libc.sched_getcpu()
        leave(here)  # stacked on the caller's CPU: moves
        seen["moved"] = (here, libc.sched_getcpu(), os.sched_getaffinity(0) == allowed)
        elsewhere = libc.sched_getcpu()
        leave(-1)  # the caller's CPU unknown (not Linux): stays, as for any other CPU
        leave(max(allowed) + 1)
        seen["stayed"] = os.sched_getaffinity(0) == allowed
        os.sched_setaffinity(0, {elsewhere})
        leave(elsewhere)  # no other CPU allowed: stays, its mask unchanged
        seen["alone"] = (libc.sched_getcpu(), os.sched_getaffinity(0))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    here, now, same_mask = seen["moved"]
    assert now != here and same_mask
    assert seen["stayed"]
    cpu, mask = seen["alone"]
    assert mask == {cpu}


def test_every_dispatch_records_its_cpu_for_the_workers() -> None:
    llvm_text = xm.compile(exp_and_row_sums(512)).stages["llvm"]
    assert llvm_text.count("llvm.func internal @xlamlir_parallel_leave_cpu(") == 1
    if sys.platform == "linux":
        assert "llvm.call @sched_getcpu()" in llvm_text


def test_the_caller_yields_before_its_own_block_and_while_it_waits() -> None:
    # A worker woken onto the caller's CPU runs at once (and moves off it) instead of
    # waiting for the caller's time slice to end: one sched_yield after the tasks are
    # submitted, before the caller's block; then, waiting for a worker's block, the
    # caller reads its flag and yields (staying awake) before it sleeps on the token.
    llvm_text = xm.compile(exp_and_row_sums(512)).stages["llvm"]
    dispatcher = llvm_text[llvm_text.index("llvm.func internal @xlamlir_parallel_for("):]
    dispatcher = dispatcher[:dispatcher.index("\n  }")]
    if sys.platform != "linux":
        assert "sched_yield" not in dispatcher and "clock_gettime" not in dispatcher
        return
    assert dispatcher.count("llvm.call @sched_yield()") == 2
    first = dispatcher.index("llvm.call @sched_yield()")
    second = dispatcher.rindex("llvm.call @sched_yield()")
    assert dispatcher.index("llvm.call @mlirAsyncRuntimeExecute") < first
    assert first < dispatcher.index("atomic acquire") < second
    assert second < dispatcher.rindex("llvm.call @mlirAsyncRuntimeAwaitToken")
    task = llvm_text[llvm_text.index("llvm.func internal @xlamlir_parallel_task("):]
    task = task[:task.index("\n  }")]
    # The block's flag set after its body, its token read before: the caller may return
    # (its stack gone) as soon as it sees the flag.
    assert task.index("llvm.call %") < task.index("atomic release") < task.index("musttail")


def test_every_call_site_has_its_own_state() -> None:
    llvm_text = xm.compile(exp_and_row_sums(512)).stages["llvm"]
    calls = llvm_text.count("llvm.call @xlamlir_parallel_for(")
    assert calls >= 2
    for k in range(calls):
        assert llvm_text.count(f"llvm.mlir.global internal @{SITE_PREFIX}{k}()") == 1
        assert llvm_text.count(f"llvm.mlir.addressof @{SITE_PREFIX}{k} ") == 1
    assert f"@{SITE_PREFIX}{calls}()" not in llvm_text


@pytest.mark.skipif(sys.platform != "linux", reason="the timed choice needs clock_gettime")
def test_each_site_times_both_ways_then_takes_the_faster() -> None:
    # The process's dispatcher called directly with a Python body recording where each
    # block ran, and a site state this test reads and sets.
    load_async_runtime()
    dispatch = shared_runtime.process_dispatcher(3)
    runs: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def body(_ctx: int, first: int, last: int) -> None:
        with lock:
            runs.append((threading.get_ident(), first, last))

    site = (ctypes.c_int64 * 4)()
    total = 1000

    def call() -> tuple[bool, list[tuple[int, int, int]]]:
        runs.clear()
        dispatch(ctypes.cast(body, ctypes.c_void_p), None, total, ctypes.addressof(site))
        blocks = sorted(runs, key=lambda r: r[1])
        assert [r[1] for r in blocks][0] == 0 and blocks[-1][2] == total  # every iteration once
        assert all(a[2] == b[1] for a, b in zip(blocks, blocks[1:]))
        return len(blocks) == 1, blocks

    me = threading.get_ident()
    two_ways = len(os.sched_getaffinity(0)) >= 2  # one CPU: one worker, every loop one block

    def way(calls: int, seq: int, par: int, last: int = 0) -> bool:
        """Whether a call with this state runs sequentially (checked: every iteration once)."""
        site[:] = [seq, par, calls, last]
        sequential, blocks = call()
        assert me in {r[0] for r in blocks} and site[2] == calls + 1
        assert sequential or len({r[0] for r in blocks}) == 2
        return sequential

    if not two_ways:
        way(0, 0, 0)
        return
    # Calls 0-2 in parallel (the caller runs one block), 3-5 on the calling thread alone;
    # each measures its way, a run keeping its fastest time.
    run = parallel_tasks.PROBE_CALLS
    big = parallel_tasks.SEQUENTIAL_MAX_NS
    slow = big - 1  # a sequential time any real one beats, short of the bound
    assert not way(0, 0, 0) and site[1] > 0 and site[0] == 0
    for k in range(1, run):
        assert not way(k, 0, 10**9) and 0 < site[1] < 10**9
    assert way(run, 0, 1000) and site[0] > 0
    for k in range(run + 1, 2 * run):
        assert way(k, slow, 1000) and 0 < site[0] < slow
    # Then sequential only if under half the parallel time, and never for a loop whose
    # sequential run took SEQUENTIAL_MAX_NS or more (then not even in a probing run).
    after = 2 * run + 1
    assert way(after, 49, 100) and site[0] != 49  # the way taken updates its time
    assert not way(after, 50, 100) and site[1] != 100
    assert way(after, slow, 10**9) and not way(after, big, 10**9) and not way(run + 1, big, 10**9)
    # A sequential time never measured is not a faster one; the next run the other way
    # measures it.
    assert not way(after, 0, 1000) and way(2 * parallel_tasks.REPROBE, 0, 1000)
    # Every REPROBE calls a run the other way: its later calls go its first one's way
    # (field 3), whatever the times say now, keeping the fastest of the run's times.
    r = parallel_tasks.REPROBE
    assert way(3 * r, slow, 1000)
    for k in range(1, run):
        assert way(3 * r + k, slow, 1000, last=1)
    assert 0 < site[0] < slow and not way(3 * r + run, slow, 1000)
    assert way(r + 1, 2, 1, last=1) and site[0] == 2
    assert not way(r + run - 1, 1, 10**9, last=0) and 1 < site[1] < 10**9
    assert not way(r, 1, 1000) and way(r + run, 1, 1000)


def test_the_caller_runs_the_block_of_its_cpu() -> None:
    """Block k runs on CPU k where it can: the calling thread takes the block of the CPU it
    runs on (the workers the others), so a loop called again and again finds its part of
    the data in that core's cache (a matrix x vector [1024,1024]: 4 MB, 2 MB a core)."""
    load_async_runtime()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: one block")
    dispatch = shared_runtime.process_dispatcher(3)
    runs: list[tuple[int, int]] = []
    lock = threading.Lock()

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def body(_ctx: int, first: int, _last: int) -> None:
        with lock:
            runs.append((threading.get_ident(), first))

    total, blocks = 1000, len(cpus)
    size = -(-total // blocks)
    try:
        for cpu in cpus[:2]:
            os.sched_setaffinity(0, {cpu})  # this thread only
            site = (ctypes.c_int64 * 4)()  # a fresh site: its first calls run in parallel
            runs.clear()
            dispatch(ctypes.cast(body, ctypes.c_void_p), None, total, ctypes.addressof(site))
            mine = [first for thread, first in runs if thread == threading.get_ident()]
            assert mine == [(cpu % blocks) * size], (cpu, runs)
            assert sorted(first for _, first in runs) == [k * size for k in range(blocks)]
    finally:
        os.sched_setaffinity(0, cpus)
