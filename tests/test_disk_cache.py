"""The persistent compile cache (runtime/disk_cache.py, runtime/cached_library.py).

Every test gets its own cache directory (conftest turns the cache off for the rest of
the suite). Timings are reported, never asserted: the machine is shared.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime import disk_cache
from xlamlir.runtime.cached_library import linker
from xlamlir.runtime.compiler import clear_cache

S = xm.Shape.array
ROOT = Path(__file__).resolve().parents[1]
# Without a linker the cache is off (tested below); everything else needs one.
needs_linker = pytest.mark.skipif(linker() is None, reason="no linker (ld or ld.lld) on PATH")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if linker() is None:
        pytest.skip("no linker (ld or ld.lld) on PATH")
    directory = tmp_path / "cache"
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(directory))
    for name in ("XLAMLIR_CACHE_MAX_MB", "XLAMLIR_DUMP_PASSES", "XLAMLIR_PASS_TIMING",
                 "XLAMLIR_STAGE_LOCATIONS", "XLAMLIR_KEEP_OBJECT", "XLAMLIR_TARGET_CPU"):
        monkeypatch.delenv(name, raising=False)
    clear_cache()
    yield directory
    disk_cache.flush()  # no entry of this test is written after its directory is gone
    clear_cache()


def program(scale: float = 0.5) -> xm.XlaComputation:
    b = xm.XlaBuilder("scaled_tanh")
    x = b.parameter(0, S(xm.F32, (4, 33)))
    rows = b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.add(b.tanh(b.mul(x, b.constant(np.float32(scale)))), b.broadcast_in_dim(rows, (4, 33), [0]))
    return b.build()


X = np.linspace(-3, 3, 4 * 33, dtype=np.float32).reshape(4, 33)


def expected(scale: float = 0.5) -> np.ndarray:
    return np.tanh(X * np.float32(scale)) + X.sum(axis=1, keepdims=True)


def fresh(computation: xm.XlaComputation, **kw: object) -> xm.Executable:
    """A compile that the in-process cache cannot answer, its entry written (entries are
    written in the background)."""
    clear_cache()
    exe = xm.compile(computation, **kw)
    disk_cache.flush()
    return exe


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*" + disk_cache.SUFFIX))


# ---- hits and misses ------------------------------------------------------------------------


def test_a_second_compile_loads_the_entry(cache: Path) -> None:
    first = fresh(program())
    assert first.compile_stats["disk_cache"] == "miss"
    assert "disk_cache_store_s" in first.compile_stats
    assert len(entries(cache)) == 1
    second = fresh(program())
    stats = second.compile_stats
    assert stats["disk_cache"] == "hit" and stats["disk_cache_load_s"] > 0
    assert stats["total_s"] == stats["disk_cache_load_s"] and stats["compiled_s"] > 0
    assert second is not first
    np.testing.assert_array_equal(second(X), first(X))
    np.testing.assert_allclose(second(X), expected(), rtol=1e-6, atol=1e-5)
    assert second.stages == first.stages and list(second.stages) == list(first.stages)
    assert second.program_shape() == first.program_shape()
    assert second.target_cpu == "host" and second.pipeline is not None
    assert not list(cache.glob(".load-*")) and not list(cache.glob(".tmp-*"))


def layouts_program() -> xm.XlaComputation:
    """A parameter with a column-major layout returned in a tuple: the copy into the
    result calls MLIR's runtime function memrefCopy."""
    b = xm.XlaBuilder("layouts")
    x = b.parameter(0, S(xm.F32, (3, 5), (0, 1)))
    y = b.parameter(1, S(xm.F32, (5,)))
    b.tuple([x, b.add(y, y)])
    return b.build()


CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_disk_cache import X, program, layouts_program
import xlamlir as xm
from xlamlir.runtime import disk_cache
exe = xm.compile({build})
result = exe(X) if exe.name == "scaled_tanh" else exe(np.ones((3, 5), np.float32, order="F"),
                                                       np.ones(5, np.float32))[0]
with open("/proc/self/maps") as maps:
    runner_utils = "libmlir_c_runner_utils" in maps.read()
print(json.dumps({{"stats": {{k: v for k, v in exe.compile_stats.items() if k.startswith("disk")}},
                  "result": result.tolist(), "sources": disk_cache._SOURCES,
                  "runner_utils": runner_utils}}))
"""


def run_child(scale: float = 0.5, build: str = "") -> subprocess.Popen:
    source = CHILD.format(tests=str(ROOT / "tests"), build=build or f"program({scale})")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(source)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def child_output(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def same_sources(*outputs: dict) -> bool:
    """Whether the processes ran the same library: in a working tree someone edits, a file
    saved between two of them changes the key (as it must)."""
    return len({out["sources"] for out in outputs}) == 1


def two_processes(build: str = "") -> tuple[dict, dict]:
    """The outputs of two processes compiling one after the other."""
    for _ in range(3):
        first = child_output(run_child(build=build))
        second = child_output(run_child(build=build))
        if same_sources(first, second):
            return first, second
    pytest.skip("the library's source files kept changing during the test")


def test_a_second_process_loads_the_entry(cache: Path) -> None:
    first, second = two_processes()
    assert second["stats"]["disk_cache"] == "hit", second["stats"]
    assert second["stats"]["disk_cache_load_s"] > 0
    assert second["result"] == first["result"]
    np.testing.assert_allclose(np.float32(second["result"]), expected(), rtol=1e-6, atol=1e-5)


def test_what_the_key_holds_decides_hits(cache: Path) -> None:
    assert fresh(program()).compile_stats["disk_cache"] == "miss"
    variants = [
        (lambda: fresh(program(0.25)), "another module text"),
        (lambda: fresh(program(), target_cpu="x86-64-v2"), "another target CPU"),
        (lambda: xm.compile_mlir(program().as_mlir_text(), name="other"), "another name"),
        (lambda: fresh(program(), pipeline=xm.Pipeline.default().insert_after("linalg", "cse")),
         "another pipeline"),
    ]
    for compile_variant, what in variants:
        clear_cache()
        assert compile_variant().compile_stats["disk_cache"] == "miss", what
        clear_cache()
        assert compile_variant().compile_stats["disk_cache"] == "hit", what
    assert len(entries(cache)) == 1 + len(variants)


def test_source_locations_are_not_in_the_key(cache: Path) -> None:
    fresh(program())
    b = xm.XlaBuilder("scaled_tanh")  # the same program built on other lines
    x = b.parameter(0, S(xm.F32, (4, 33)))
    rows = b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.add(b.tanh(b.mul(x, b.constant(np.float32(0.5)))), b.broadcast_in_dim(rows, (4, 33), [0]))
    here = b.build()
    assert here.as_mlir_text(locations=True) != program().as_mlir_text(locations=True)
    assert fresh(here).compile_stats["disk_cache"] == "hit"


def test_keys_cover_the_machine_and_the_library(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, pipeline = program().as_mlir_text(), xm.Pipeline.default()

    def key(**settings: object) -> str | None:
        return disk_cache.plan(text, pipeline, "host", **{"num_replicas": 1, **settings}).key

    base = key()
    assert base is not None and key() == base
    assert key(num_replicas=2) != base and key(dynamic_strides=True) != base
    host = disk_cache._identities["host"]
    monkeypatch.setitem(disk_cache._identities, "host", "another CPU")
    assert key() != base
    monkeypatch.setitem(disk_cache._identities, "host", host)
    assert key() == base
    monkeypatch.setattr(disk_cache, "_SOURCES", "edited sources")
    assert key() != base


def test_editing_a_source_file_changes_the_digest(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "notes").mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "passes.py").write_text("def f():\n    return 1\n")
    (package / "notes" / "scratch.py").write_text("")  # not a package: not the library
    before = disk_cache.source_digest(package)
    (package / "notes" / "scratch.py").write_text("x = 1\n")
    assert disk_cache.source_digest(package) == before
    (package / "sub" / "passes.py").write_text("def f():\n    return 2\n")
    assert disk_cache.source_digest(package) != before


# ---- what is not cached ---------------------------------------------------------------------


def test_a_pipeline_with_a_user_python_pass_is_not_cached(cache: Path) -> None:
    seen = []
    pipeline = xm.Pipeline.default().insert_after("fused", lambda op, pass_: seen.append(1))
    exe = fresh(program(), pipeline=pipeline)
    assert exe.compile_stats["disk_cache"] == "off" and seen
    assert "Python pass" in exe.compile_stats["disk_cache_reason"]
    assert not entries(cache)
    np.testing.assert_allclose(exe(X), expected(), rtol=1e-6, atol=1e-5)


def test_the_library_own_passes_are_keyed_by_name(cache: Path) -> None:
    from xlamlir.lowering.passes.fusion import duplicate_cheap_producers

    pipeline = xm.Pipeline.default().insert_after("fused", duplicate_cheap_producers)
    assert fresh(program(), pipeline=pipeline).compile_stats["disk_cache"] == "miss"
    again = xm.Pipeline.default().insert_after("fused", duplicate_cheap_producers)
    assert fresh(program(), pipeline=again).compile_stats["disk_cache"] == "hit"


@pytest.mark.parametrize("value", ["", "0", "off", "OFF"])
def test_turned_off_by_the_environment(value: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", value)
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "off"
    assert "XLAMLIR_CACHE_DIR" in exe.compile_stats["disk_cache_reason"]
    assert not list(tmp_path.iterdir())


@needs_linker
def test_the_default_directory_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("XLAMLIR_CACHE_DIR")
    assert fresh(program()).compile_stats["disk_cache"] == "miss"
    assert len(entries(tmp_path / ".cache" / "xlamlir")) == 1
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fresh(program()).compile_stats["disk_cache"] == "miss"
    assert len(entries(tmp_path / "xdg" / "xlamlir")) == 1
    clear_cache()


def test_debugging_compiles_bypass_the_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(program())
    monkeypatch.setenv("XLAMLIR_PASS_TIMING", "1")
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "off"
    assert "XLAMLIR_PASS_TIMING" in exe.compile_stats["disk_cache_reason"]


def test_without_a_linker_the_cache_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "off"
    assert "linker" in exe.compile_stats["disk_cache_reason"]


@needs_linker
def test_an_unwritable_directory_only_costs_the_entry(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(blocker / "cache"))
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "miss"
    assert "not stored" in " ".join(exe.compile_stats["disk_cache_notes"])
    np.testing.assert_allclose(exe(X), expected(), rtol=1e-6, atol=1e-5)
    clear_cache()


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf"])
def test_a_bad_size_bound_is_an_argument_error(value: str, cache: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_MAX_MB", value)
    with pytest.raises(xm.ArgumentError, match="XLAMLIR_CACHE_MAX_MB"):
        fresh(program())


# ---- bad entries ----------------------------------------------------------------------------


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_a_byte(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x55]) + data[middle + 1:]


def _not_a_library(data: bytes) -> bytes:
    """A well-formed entry (checksum right) whose library is garbage."""
    header = disk_cache._HEADER
    _, _, length, _ = header.unpack_from(data)
    rest = data[header.size:]
    meta = json.loads(rest[:length])
    end = length + meta["library_size"]
    rest = rest[:length] + b"\x7fELF" + b"\0" * (meta["library_size"] - 4) + rest[end:]
    return header.pack(disk_cache._MAGIC, disk_cache.FORMAT, length,
                       hashlib.sha256(rest).digest()) + rest


@pytest.mark.parametrize("damage", [_truncate, _flip_a_byte, lambda data: b"", _not_a_library],
                         ids=["truncated", "flipped", "empty", "garbage_library"])
def test_a_bad_entry_is_ignored_and_rebuilt(damage, cache: Path) -> None:
    fresh(program())
    (entry,) = entries(cache)
    entry.write_bytes(damage(entry.read_bytes()))
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "miss"
    assert "not used" in " ".join(exe.compile_stats["disk_cache_notes"])
    np.testing.assert_allclose(exe(X), expected(), rtol=1e-6, atol=1e-5)
    again = fresh(program())
    assert again.compile_stats["disk_cache"] == "hit"
    np.testing.assert_array_equal(again(X), exe(X))


def test_concurrent_writers(cache: Path) -> None:
    for _ in range(3):
        disk_cache.clear(str(cache))
        first, second = run_child(), run_child()  # both compile and write at about once
        outputs = [child_output(first), child_output(second)]
        for out in outputs:
            assert out["stats"]["disk_cache"] in ("miss", "hit")
            np.testing.assert_allclose(np.float32(out["result"]), expected(), rtol=1e-6, atol=1e-5)
        assert not list(cache.glob(".tmp-*")) and not list(cache.glob(".load-*"))
        last = child_output(run_child())
        if same_sources(*outputs, last):
            break
    else:
        pytest.skip("the library's source files kept changing during the test")
    assert len(entries(cache)) == 1
    assert last["stats"]["disk_cache"] == "hit"


def test_the_size_bound_evicts_the_least_recently_used(cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(program(1.0))
    (entry,) = entries(cache)
    # Room for two entries of this size (the others differ in one constant only).
    monkeypatch.setenv("XLAMLIR_CACHE_MAX_MB", str(2.5 * entry.stat().st_size / 2**20))
    fresh(program(2.0))
    assert fresh(program(1.0)).compile_stats["disk_cache"] == "hit"  # now the most recent
    fresh(program(3.0))
    assert len(entries(cache)) == 2
    assert fresh(program(1.0)).compile_stats["disk_cache"] == "hit"
    assert fresh(program(3.0)).compile_stats["disk_cache"] == "hit"
    assert fresh(program(2.0)).compile_stats["disk_cache"] == "miss"


# ---- what the runtime binds at load ---------------------------------------------------------


def test_custom_calls_and_random_state_are_bound_per_load(cache: Path) -> None:
    calls = []

    def twice(a: np.ndarray) -> np.ndarray:
        calls.append(1)
        return 2 * a

    xm.register_custom_call("disk_cache.twice", twice)
    b = xm.XlaBuilder("custom_rng")
    x = b.parameter(0, S(xm.F32, (64,)))
    doubled = b.custom_call("disk_cache.twice", [x], S(xm.F32, (64,)))
    b.add(doubled, b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)),
                                 S(xm.F32, (64,))))
    computation = b.build()
    ones = np.ones(64, np.float32)
    jitted = fresh(computation)
    draws = [jitted(ones), jitted(ones)]
    loaded, other = fresh(computation), fresh(computation)
    assert loaded.compile_stats["disk_cache"] == other.compile_stats["disk_cache"] == "hit"
    # Each load starts the random stream at seed 0 and keeps its own state.
    np.testing.assert_array_equal(loaded(ones), draws[0])
    np.testing.assert_array_equal(loaded(ones), draws[1])
    np.testing.assert_array_equal(other(ones), draws[0])
    loaded.seed(7)
    jitted.seed(7)
    np.testing.assert_array_equal(loaded(ones), jitted(ones))
    assert len(calls) == 7 and np.all(draws[0] >= 2) and np.all(draws[0] < 3)


def test_feeds_are_bound_at_load(cache: Path) -> None:
    b = xm.XlaBuilder("feeds")
    token = b.create_token()
    value = b.infeed(S(xm.F32, (3,)), token)
    b.tuple([value + 1.0, b.outfeed(value * 2.0, S(xm.F32, (3,)), "", token)])
    fresh(b.build())
    exe = fresh(b.build())
    assert exe.compile_stats["disk_cache"] == "hit"
    exe.infeed.put(np.arange(3, dtype=np.float32))
    result, _ = exe()
    np.testing.assert_array_equal(result, [1, 2, 3])
    np.testing.assert_array_equal(exe.outfeed.get(timeout=5), [0, 2, 4])


def test_collectives_run_from_a_loaded_entry(cache: Path) -> None:
    b = xm.XlaBuilder("all_reduce")
    x = b.parameter(0, S(xm.F32, (2,)))
    computation = b.build(b.all_reduce(x, lambda a, c: a + c))
    fresh(computation, num_replicas=2)
    exe = fresh(computation, num_replicas=2)
    assert exe.compile_stats["disk_cache"] == "hit"
    out = exe.execute_replicated([[np.float32([1, 2.5])], [np.float32([3, 5.25])]])
    for o in out:
        np.testing.assert_array_equal(o, [4, 7.75])


def test_layouts_tuples_and_strided_inputs_survive(cache: Path) -> None:
    fresh(layouts_program())
    exe = fresh(layouts_program())
    assert exe.compile_stats["disk_cache"] == "hit"
    assert exe.result_shape == xm.Shape.tuple([S(xm.F32, (3, 5), (0, 1)), S(xm.F32, (5,))])
    xv = np.asfortranarray(np.arange(15, dtype=np.float32).reshape(3, 5))
    yv = np.arange(10, dtype=np.float32)[::2]  # a strided view: the variant compiles
    got_x, got_y = exe(xv, yv)
    np.testing.assert_array_equal(got_x, xv)
    np.testing.assert_array_equal(got_y, 2 * yv)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_library_calling_memref_copy_does_not_load_libmlir(cache: Path) -> None:
    """memrefCopy is compiled into the library: from MLIR's runner utils it would load
    libMLIR (~100 ms) into the process loading the entry."""
    first, second = two_processes("layouts_program()")
    assert second["stats"]["disk_cache"] == "hit", second["stats"]
    assert second["result"] == first["result"] == np.ones((3, 5)).tolist()
    assert not second["runner_utils"]


def test_write_object_of_a_loaded_entry(cache: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(program())
    with pytest.raises(xm.CompileError, match="XLAMLIR_KEEP_OBJECT"):
        fresh(program()).write_object(str(tmp_path / "none.o"))
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    exe = fresh(program())
    assert exe.compile_stats["disk_cache"] == "hit"
    exe.write_object(str(tmp_path / "code.so"))
    assert (tmp_path / "code.so").read_bytes()[:4] == b"\x7fELF"


def test_clear_removes_every_entry(cache: Path) -> None:
    fresh(program())
    assert disk_cache.clear() == 1 and not entries(cache)
    assert os.path.isdir(cache)
