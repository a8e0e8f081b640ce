"""Large temporaries kept for the next call (lowering/passes/block_cache.py): the
allocator's decisions, driven directly; programs that use it (the same results call after
call, from several threads at once, without faulting their temporaries in again); and
its blocks given back when the executable goes."""

from __future__ import annotations

import ctypes
import gc
import re
import resource

import numpy as np
import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from test_threads import run_threads

import xlamlir as xm
from xlamlir.lowering.passes import block_cache
from xlamlir.lowering.passes.block_cache import (
    ALLOC,
    CORE_ALLOC,
    FREE,
    HEADER,
    MIN_BYTES,
    PARKED_LIMIT,
    RELEASE,
    SLOTS,
)

BIG = MIN_BYTES * 4


class Allocator:
    """The module's functions, JIT-compiled alone with external wrappers to call them."""

    def __init__(self) -> None:
        self.context = ir.Context()
        wrappers = f"""
llvm.func @t_alloc(%n: i64) -> i64 {{
  %p = llvm.call @{ALLOC}(%n) : (i64) -> !llvm.ptr
  %i = llvm.ptrtoint %p : !llvm.ptr to i64
  llvm.return %i : i64
}}
llvm.func @t_free(%i: i64) {{
  %p = llvm.inttoptr %i : i64 to !llvm.ptr
  llvm.call @{FREE}(%p) : (!llvm.ptr) -> ()
  llvm.return
}}
llvm.func @t_parked() -> i64 {{
  %base = llvm.mlir.addressof @xlamlir_blocks : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %slots = llvm.mlir.constant({SLOTS} : i64) : i64
  llvm.br ^scan(%zero, %zero : i64, i64)
^scan(%i: i64, %count: i64):
  %done = llvm.icmp "eq" %i, %slots : i64
  llvm.cond_br %done, ^out, ^look
^look:
  %slot = llvm.getelementptr %base[0, %i] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.array<{SLOTS} x i64>
  %v = llvm.load %slot : !llvm.ptr -> i64
  %full = llvm.icmp "ne" %v, %zero : i64
  %add = llvm.zext %full : i1 to i64
  %more = llvm.add %count, %add : i64
  %next = llvm.add %i, %one : i64
  llvm.br ^scan(%next, %more : i64, i64)
^out:
  llvm.return %count : i64
}}
llvm.func @t_parked_bytes() -> i64 {{
  %p = llvm.mlir.addressof @xlamlir_parked_bytes : !llvm.ptr
  %v = llvm.load %p : !llvm.ptr -> i64
  llvm.return %v : i64
}}
llvm.func @t_release() {{
  llvm.call @{RELEASE}() : () -> ()
  llvm.return
}}"""
        with self.context, ir.Location.unknown():
            self.module = ir.Module.parse(block_cache._FUNCTIONS + wrappers)
            self.engine = ExecutionEngine(self.module, opt_level=2)

    def _call(self, name: str, *args: int) -> int:
        result = ctypes.c_int64()
        values = [ctypes.c_int64(a) for a in args]
        pointers = [ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values]
        pointers.append(ctypes.cast(ctypes.pointer(result), ctypes.c_void_p))
        packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.engine.raw_lookup(name))
        packed((ctypes.c_void_p * len(pointers))(*pointers))
        return result.value

    def alloc(self, n: int) -> int:
        return self._call("t_alloc", n)

    def free(self, p: int) -> None:
        self._call("t_free", p)

    def parked(self) -> int:
        """How many slots hold a block."""
        return self._call("t_parked")

    def parked_bytes(self) -> int:
        return self._call("t_parked_bytes")

    def release(self) -> None:
        self._call("t_release")

    def capacity(self, p: int) -> int:
        return ctypes.c_int64.from_address(p - HEADER).value


@pytest.fixture
def allocator() -> Allocator:
    a = Allocator()
    yield a
    a.release()


def test_a_freed_large_block_is_reused_for_the_same_size(allocator: Allocator) -> None:
    p = allocator.alloc(BIG)
    assert p % 16 == 0 and allocator.capacity(p) == BIG + HEADER
    ctypes.memset(p, 7, BIG)  # the whole block is the caller's
    allocator.free(p)
    assert allocator.alloc(BIG) == p


def test_a_parked_block_serves_requests_from_half_its_size_to_its_size(allocator: Allocator) -> None:
    p = allocator.alloc(BIG)
    allocator.free(p)
    assert allocator.alloc(BIG * 2) != p  # too small: a new block, p stays parked
    assert allocator.alloc(BIG // 4) != p  # more than twice the request: not wasted on it
    assert allocator.parked() == 1
    assert allocator.alloc(BIG // 2) == p  # within [request, 2 x request]
    assert allocator.parked() == 0


def test_small_blocks_are_not_parked(allocator: Allocator) -> None:
    allocator.free(allocator.alloc(MIN_BYTES - HEADER - 1))
    assert allocator.parked() == 0
    allocator.free(allocator.alloc(MIN_BYTES - HEADER))
    assert allocator.parked() == 1


def test_slots_hold_at_most_slots_blocks(allocator: Allocator) -> None:
    blocks = [allocator.alloc(BIG) for _ in range(SLOTS + 2)]
    assert len(set(blocks)) == SLOTS + 2
    for p in blocks:
        allocator.free(p)  # the last two go back to libc
    assert allocator.parked() == SLOTS
    again = [allocator.alloc(BIG) for _ in range(SLOTS)]
    assert set(again) == set(blocks[:SLOTS]) and allocator.parked() == 0


def test_parked_bytes_stay_within_the_limit(allocator: Allocator) -> None:
    """Blocks (untouched: malloc maps them lazily) whose sum would pass PARKED_LIMIT are
    freed, not parked; the count follows every park, take and release."""
    big = PARKED_LIMIT // 2 + MIN_BYTES
    first, second = allocator.alloc(big), allocator.alloc(big)
    allocator.free(first)
    assert allocator.parked() == 1 and allocator.parked_bytes() == big + HEADER
    allocator.free(second)  # would pass the limit: freed
    assert allocator.parked() == 1 and allocator.parked_bytes() == big + HEADER
    assert allocator.alloc(big) == first
    assert allocator.parked() == 0 and allocator.parked_bytes() == 0
    allocator.free(first)
    small = allocator.alloc(BIG)
    allocator.free(small)
    assert allocator.parked_bytes() == big + BIG + 2 * HEADER
    allocator.release()
    assert allocator.parked() == 0 and allocator.parked_bytes() == 0


def test_zero_bytes_and_null(allocator: Allocator) -> None:
    p = allocator.alloc(0)
    assert p != 0
    allocator.free(p)
    allocator.free(0)  # a no-op, as free(NULL)


def test_release_empties_the_slots(allocator: Allocator) -> None:
    p = allocator.alloc(BIG)
    allocator.free(p)
    assert allocator.parked() == 1
    allocator.release()
    assert allocator.parked() == 0


def _sort_sum(n: int) -> xm.XlaComputation:
    """A sorted row's weighted sum: the sort's temporaries are large, the result a scalar."""
    b = xm.XlaBuilder("sort_sum")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
    s = b.sort(x)
    w = b.iota(xm.Shape.array(xm.F32, (n,)), 0)
    b.reduce(s * w, b.constant(np.float32(0)), lambda a, v: a + v, [0])
    return b.build()


def test_program_ir_defines_the_cache() -> None:
    exe = xm.compile(_sort_sum(1 << 18))
    llvm = exe.stages["llvm"]
    assert f"llvm.func internal @{ALLOC}" in llvm and f"llvm.func internal @{FREE}" in llvm
    assert "llvm.mlir.global_dtors" in llvm and f"@{RELEASE}" in llvm
    # Only the allocator calls malloc: the program's allocations all go through it.
    pieces = llvm.split("\n  llvm.func ")[1:]
    callers = [re.match(r"(?:internal )?@(\w+)", f).group(1) for f in pieces if "llvm.call @malloc" in f]
    assert len(pieces) > 3 and callers == [CORE_ALLOC]


def test_program_without_allocations_has_no_cache() -> None:
    b = xm.XlaBuilder("axpy")
    x = b.parameter(0, xm.Shape.array(xm.F32, (1 << 16,)))
    assert "xlamlir_blocks" not in xm.compile(b.build(x * 2.0 + 1.0)).stages["llvm"]


def _expected(x: np.ndarray) -> float:
    return float(np.sum(np.sort(x).astype(np.float64) * np.arange(x.size)))


def test_calls_reuse_their_temporaries_without_page_faults() -> None:
    """After the first call, the temporaries (2 x 32 MB and more) are the parked blocks:
    ~0 minor page faults per call where each call used to fault in every page (glibc maps
    blocks of 32 MB and more anew whatever its state; from 128 KB, depending on it)."""
    n = 1 << 23
    exe = xm.compile(_sort_sum(n))
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    expected = _expected(x)
    exe(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        got = float(exe(x))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert got == pytest.approx(expected, rel=1e-5)
    pages_per_call = 2 * n * 4 // 4096
    assert faults < 5 * pages_per_call // 16, faults


def test_concurrent_calls_get_their_own_blocks() -> None:
    n = 1 << 18
    exe = xm.compile(_sort_sum(n))
    inputs = [np.random.default_rng(k).standard_normal(n, dtype=np.float32) for k in range(4)]
    expected = [_expected(x) for x in inputs]

    def work(k: int) -> None:
        for _ in range(15):
            got = float(exe(inputs[k]))
            assert got == pytest.approx(expected[k], rel=1e-5), f"{got} != {expected[k]}"

    assert not run_threads(work, 4)


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20


def test_dropped_executables_give_their_blocks_back() -> None:
    """Each program parks ~48 MB of touched temporaries; 12 of them compiled, called and
    dropped in turn keep the process's memory near one program's, not twelve."""
    n = 1 << 22
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    from xlamlir.runtime.compiler import clear_cache

    def once(k: int) -> None:
        b = xm.XlaBuilder(f"sorted_{k}")
        p = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
        b.reduce(b.sort(p) * float(k + 1), b.constant(np.float32(0)), lambda a, v: a + v, [0])
        xm.compile(b.build())(x)

    once(0)
    clear_cache()
    gc.collect()
    start = _rss_mb()
    for k in range(1, 13):
        once(k)
        clear_cache()
        gc.collect()
    assert _rss_mb() - start < 200, (start, _rss_mb())


def test_exported_library_parks_blocks_and_says_so(tmp_path) -> None:
    """The exported library (one C call per process here) gives the JIT's results and its
    header states the blocks it keeps; a program without temporaries says it keeps none."""
    from test_export import _check_against_jit, needs_cc

    if needs_cc.args[0]:
        pytest.skip("no C compiler")
    n = 1 << 18
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    header = _check_against_jit(_sort_sum(n), [x], tmp_path).with_suffix(".h").read_text()
    assert f"up to {SLOTS} freed" in header and "unloading the library frees" in header
    b = xm.XlaBuilder("scaled")
    p = b.parameter(0, xm.Shape.array(xm.F32, (64,)))
    (tmp_path / "plain").mkdir()
    plain = _check_against_jit(b.build(p * 2.0), [x[:64]], tmp_path / "plain")
    assert "keeps no state: concurrent calls" in plain.with_suffix(".h").read_text()
