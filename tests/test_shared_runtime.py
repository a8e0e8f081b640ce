"""Code every program shares, compiled once (runtime/shared_runtime.py): with the disk
cache on, every program calls the runtime library's dispatcher and block allocator,
built once per cache directory, in the JIT and when loaded from the disk cache by a
fresh process; with it off, its own allocator and the process's JIT copy of the
dispatcher after its first programs. Their stages still show them whole."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.lowering.passes.block_cache import CORE_FUNCTIONS
from xlamlir.runtime import shared_runtime
from xlamlir.runtime.compiler import clear_cache

ROOT = Path(__file__).resolve().parents[1]


def softmax(n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n, n)))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, (n, n), [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    return b.build(b.div(e, b.broadcast_in_dim(s, (n, n), [0])))


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sort_sum(n: int) -> xm.XlaComputation:
    """A sorted row's weighted sum: its temporaries go through the block allocator."""
    b = xm.XlaBuilder("sort_sum")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n,)))
    w = b.iota(xm.Shape.array(xm.F32, (n,)), 0)
    b.reduce(b.sort(x) * w, b.constant(np.float32(0)), lambda a, v: a + v, [0])
    return b.build()


def sort_sum_reference(x: np.ndarray) -> float:
    return float(np.sum(np.sort(x).astype(np.float64) * np.arange(x.size)))


def calls_library_allocator(exe: xm.Executable, path: Path) -> bool:
    """Whether the machine code of `exe` calls the runtime library's block allocator
    (its core functions undefined there) rather than its own."""
    if shutil.which("nm") is None:
        pytest.skip("no nm")
    exe.write_object(path)
    listing = subprocess.run(["nm", str(path)], capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in listing.splitlines() if line.split()[-2:-1] == ["U"]}
    return set(CORE_FUNCTIONS) <= undefined


def own_copy(exe: xm.Executable, path: Path) -> bool:
    """Whether the machine code of `exe` has its own copy of the shared functions."""
    exe.write_object(path)
    code = path.read_bytes()
    assert (b"xlamlir_parallel_task" in code) != (b"_mlir_ciface_xlamlir_parallel_for" in code)
    return b"xlamlir_parallel_task" in code


def test_after_its_first_programs_a_process_compiles_one_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", "off")
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    # As in a fresh process: no copy yet; two programs with their own, then the process's.
    monkeypatch.setattr(shared_runtime, "_state", {})  # no runtime library loaded
    monkeypatch.setattr(shared_runtime, "_compiled", [])
    monkeypatch.setattr(shared_runtime, "_own_copies", [0])
    monkeypatch.setattr(shared_runtime, "OWN_COPIES", 2)
    x = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    owns = []
    for k, n in enumerate((777, 778, 779, 780)):
        clear_cache()
        exe = xm.compile(softmax(n))
        # The stage is the program complete, whichever copy its machine code calls.
        assert exe.stages["llvm"].count("llvm.func internal @xlamlir_parallel_task(") == 1
        owns.append(own_copy(exe, tmp_path / f"{k}.o"))
        a = np.ascontiguousarray(x[:n, :n])  # a view would compile the strided variant too
        np.testing.assert_allclose(exe(a), reference(a), rtol=1e-5)
    assert owns == [True, True, False, False]


def test_with_the_cache_on_every_program_calls_the_runtime_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(cache))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setattr(shared_runtime, "_state", {})  # built into this cache
    x = np.random.default_rng(0).standard_normal((790, 790), dtype=np.float32)
    # The first program of the process and one the disk cache stores call it too.
    for k, n in enumerate((782, 783)):
        clear_cache()
        exe = xm.compile(softmax(n))
        assert exe.compile_stats["disk_cache"] == "miss" and exe.runtime_library
        assert not own_copy(exe, tmp_path / f"{k}.o")
        a = np.ascontiguousarray(x[:n, :n])
        np.testing.assert_allclose(exe(a), reference(a), rtol=1e-5)
        assert exe.stages["llvm"].count("llvm.func internal @xlamlir_parallel_task(") == 1
    library = shared_runtime.runtime_library(3)
    assert library is not None, shared_runtime.unavailable_reason()
    assert [p.name for p in (cache / "fastcall").glob("_runtime-*.so")] == [
        Path(library._name).name] or Path(library._name).parent != cache / "fastcall"


def test_a_program_with_temporaries_parks_them_through_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The allocator's code is the library's, its slots the program's own: the blocks are
    # reused call after call (no page faults), from several threads at once.
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    n = 1 << 21
    clear_cache()
    exe = xm.compile(sort_sum(n))
    assert exe.runtime_library and calls_library_allocator(exe, tmp_path / "sort.o")
    assert "llvm.func internal @xlamlir_blocks_alloc(" in exe.stages["llvm"]  # stages whole
    inputs = [np.random.default_rng(k).standard_normal(n, dtype=np.float32) for k in range(3)]
    expected = [sort_sum_reference(x) for x in inputs]
    exe(inputs[0])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    got = [float(exe(x)) for x in inputs]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert got == pytest.approx(expected, rel=1e-5)
    assert faults < 3 * (2 * n * 4 // 4096) // 16, faults
    errors = []

    def work(k: int) -> None:
        for _ in range(5):
            got = float(exe(inputs[k]))
            if got != pytest.approx(expected[k], rel=1e-5):
                errors.append((k, got))

    threads = [__import__("threading").Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_without_the_library_a_stored_program_keeps_its_own_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setenv(shared_runtime.ENV, "off")
    monkeypatch.setattr(shared_runtime, "_state", {})
    monkeypatch.setattr(shared_runtime, "OWN_COPIES", 0)
    clear_cache()
    exe = xm.compile(softmax(781))
    assert exe.compile_stats["disk_cache"] == "miss" and not exe.runtime_library
    assert own_copy(exe, tmp_path / "cached.o")
    assert shared_runtime.unavailable_reason() == f"{shared_runtime.ENV} is off"
    exe = xm.compile(sort_sum(1 << 18))
    assert not exe.runtime_library and not calls_library_allocator(exe, tmp_path / "sort.o")


def test_the_switch_is_part_of_the_cache_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An entry calling the library is never loaded where the library is switched off
    # (its load would fail, the entry be compiled again and overwritten, back and forth).
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    computation = sort_sum(1 << 12)
    x = np.random.default_rng(5).standard_normal(1 << 12, dtype=np.float32)
    seen = []
    for switch in ("on", "off", "on", "off"):
        monkeypatch.setenv(shared_runtime.ENV, switch)
        clear_cache()
        exe = xm.compile(computation)
        seen.append((exe.compile_stats["disk_cache"], exe.runtime_library))
        assert float(exe(x)) == pytest.approx(sort_sum_reference(x), rel=1e-5)
        from xlamlir.runtime import cache_writer
        cache_writer.flush()
    assert seen == [("miss", True), ("miss", False), ("hit", True), ("hit", False)]


def test_a_failed_library_build_falls_back_to_the_jit_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setattr(shared_runtime, "_state", {})
    monkeypatch.setattr(shared_runtime, "OWN_COPIES", 0)
    calls = []

    def broken(*args: object) -> None:
        calls.append(args)
        raise OSError("ld: cannot link")

    monkeypatch.setattr(shared_runtime, "_build_library", broken)
    x = np.random.default_rng(1).standard_normal((785, 785), dtype=np.float32)
    for n in (784, 785):
        clear_cache()
        exe = xm.compile(softmax(n))  # stored: keeps its own copy
        assert own_copy(exe, tmp_path / f"{n}.o")
        np.testing.assert_allclose(exe(x[:n, :n].copy()), reference(x[:n, :n]), rtol=1e-5)
    assert len(calls) == 1  # tried once for this cache, not at every compile
    assert "cannot link" in (shared_runtime.unavailable_reason() or "")


def test_sequential_programs_keep_no_reference_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", "off")
    clear_cache()
    exe = xm.compile(softmax(777), xm.Pipeline.default().sequential())
    assert "xlamlir_parallel_for" not in exe.stages["llvm"]


_CHILD = """
import json, os, sys
import numpy as np
sys.path.insert(0, {tests!r})
import test_shared_runtime as t
exe = t.xm.compile(t.softmax(777))
x = np.random.default_rng(0).standard_normal((777, 777), dtype=np.float32)
error = float(np.abs(exe(x) - t.reference(x)).max())
# Temporaries and no parallel loop: the library's allocator alone.
sorted_sum = t.xm.compile(t.sort_sum(1 << 12))
y = x.ravel()[:1 << 12]
error = max(error, abs(float(sorted_sum(y)) / t.sort_sum_reference(y) - 1))
from xlamlir.runtime import cache_writer, shared_runtime
cache_writer.flush()
library = shared_runtime._state.get("library")
print(json.dumps({{"cache": [e.compile_stats.get("disk_cache") for e in (exe, sorted_sum)],
                  "error": error, "library": getattr(library, "_name", None)}}))
"""


def test_a_cached_program_binds_it_in_a_fresh_process(tmp_path: Path) -> None:
    env = {**__import__("os").environ, "XLAMLIR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("XLAMLIR_KEEP_OBJECT", None)
    source = textwrap.dedent(_CHILD.format(tests=str(Path(__file__).parent)))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", source], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["cache"] for r in runs] == [["miss", "miss"], ["hit", "hit"]]
    assert all(r["error"] < 1e-6 for r in runs)
    # The first process built the library, the second loaded it before the entry.
    assert runs[0]["library"] == runs[1]["library"]
    assert Path(runs[0]["library"]).parent == tmp_path / "cache" / "fastcall"
