"""The shared functions of parallel loops compiled once (runtime/parallel_runtime.py):
with the disk cache on, every program calls the dispatcher library built once per cache
directory, in the JIT and when loaded from the disk cache by a fresh process; with it
off, the process's JIT copy after its first programs. Their stages still show them
whole."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime import parallel_runtime
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
    monkeypatch.setattr(parallel_runtime, "_state", {})  # no dispatcher library loaded
    monkeypatch.setattr(parallel_runtime, "_compiled", [])
    monkeypatch.setattr(parallel_runtime, "_own_copies", [0])
    monkeypatch.setattr(parallel_runtime, "OWN_COPIES", 2)
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


def test_with_the_cache_on_every_program_calls_the_dispatcher_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(cache))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setattr(parallel_runtime, "_state", {})  # built into this cache
    x = np.random.default_rng(0).standard_normal((790, 790), dtype=np.float32)
    # The first program of the process and one the disk cache stores call it too.
    for k, n in enumerate((782, 783)):
        clear_cache()
        exe = xm.compile(softmax(n))
        assert exe.compile_stats["disk_cache"] == "miss"
        assert not own_copy(exe, tmp_path / f"{k}.o")
        a = np.ascontiguousarray(x[:n, :n])
        np.testing.assert_allclose(exe(a), reference(a), rtol=1e-5)
        assert exe.stages["llvm"].count("llvm.func internal @xlamlir_parallel_task(") == 1
    library = parallel_runtime.dispatcher_library(3)
    assert library is not None, parallel_runtime.unavailable_reason()
    assert [p.name for p in (cache / "fastcall").glob("_dispatch-*.so")] == [
        Path(library._name).name] or Path(library._name).parent != cache / "fastcall"


def test_without_the_library_a_stored_program_keeps_its_own_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setenv(parallel_runtime.ENV, "off")
    monkeypatch.setattr(parallel_runtime, "_state", {})
    monkeypatch.setattr(parallel_runtime, "OWN_COPIES", 0)
    clear_cache()
    exe = xm.compile(softmax(781))
    assert exe.compile_stats["disk_cache"] == "miss"
    assert own_copy(exe, tmp_path / "cached.o")
    assert parallel_runtime.unavailable_reason() == f"{parallel_runtime.ENV} is off"


def test_a_failed_library_build_falls_back_to_the_jit_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    monkeypatch.setattr(parallel_runtime, "_state", {})
    monkeypatch.setattr(parallel_runtime, "OWN_COPIES", 0)
    calls = []

    def broken(*args: object) -> None:
        calls.append(args)
        raise OSError("ld: cannot link")

    monkeypatch.setattr(parallel_runtime, "_build_library", broken)
    x = np.random.default_rng(1).standard_normal((785, 785), dtype=np.float32)
    for n in (784, 785):
        clear_cache()
        exe = xm.compile(softmax(n))  # stored: keeps its own copy
        assert own_copy(exe, tmp_path / f"{n}.o")
        np.testing.assert_allclose(exe(x[:n, :n].copy()), reference(x[:n, :n]), rtol=1e-5)
    assert len(calls) == 1  # tried once for this cache, not at every compile
    assert "cannot link" in (parallel_runtime.unavailable_reason() or "")


def test_sequential_programs_keep_no_reference_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", "off")
    clear_cache()
    exe = xm.compile(softmax(777), xm.Pipeline.default().sequential())
    assert "xlamlir_parallel_for" not in exe.stages["llvm"]


_CHILD = """
import json, os, sys
import numpy as np
sys.path.insert(0, {tests!r})
import test_parallel_runtime as t
exe = t.xm.compile(t.softmax(777))
x = np.random.default_rng(0).standard_normal((777, 777), dtype=np.float32)
error = float(np.abs(exe(x) - t.reference(x)).max())
from xlamlir.runtime import cache_writer, parallel_runtime
cache_writer.flush()
library = parallel_runtime._state.get("library")
print(json.dumps({{"cache": exe.compile_stats.get("disk_cache"), "error": error,
                  "library": getattr(library, "_name", None)}}))
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
    assert [r["cache"] for r in runs] == ["miss", "hit"]
    assert all(r["error"] < 1e-6 for r in runs)
    # The first process built the library, the second loaded it before the entry.
    assert runs[0]["library"] == runs[1]["library"]
    assert Path(runs[0]["library"]).parent == tmp_path / "cache" / "fastcall"
