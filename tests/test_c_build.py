"""The library's builds in the cache's `fastcall/` folder (runtime/c_build.py): the call
path's module (runtime/fastcall.py) and the thread pool (runtime/task_pool.py), in C, and
the runtime library (runtime/shared_runtime.py), JIT-compiled and linked;
each built once per cache directory, built again when damaged, in a temporary directory
when the cache cannot hold it."""

from __future__ import annotations

import os
import shutil
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from xlamlir.runtime import c_build, disk_cache, fastcall, shared_runtime, task_pool
from xlamlir.runtime.cached_library import linker
from xlamlir.runtime.compiler import load_async_runtime


@dataclass(frozen=True)
class Build:
    owner: Any  # the module whose `_state` holds the loaded build
    load: Callable[[], Any]  # the build, loaded (None: unavailable)
    reason: Callable[[], str | None]
    target: Callable[[Path], Path]  # its file in a folder
    path_of: Callable[[Any], str]  # the file a loaded build came from
    needs: bool  # what it needs to build is here
    builder: tuple[Any, str] = (c_build, "compile_shared")  # what builds it (module, name)


_HEADERS = os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
_CC = shutil.which(c_build.compiler()[0]) is not None
BUILDS = {
    "fastcall": Build(fastcall, fastcall.module, fastcall.unavailable_reason,
                      lambda d: fastcall._target(c_build.compiler(), d), lambda m: str(m.__file__),
                      _CC and _HEADERS),
    "task_pool": Build(task_pool, task_pool.library, task_pool.unavailable_reason,
                       lambda d: task_pool._target(c_build.compiler(), d), lambda lib: str(lib._name),
                       _CC and task_pool.enabled()),
    "runtime_library": Build(shared_runtime,
                        lambda: shared_runtime.runtime_library(3),
                        shared_runtime.unavailable_reason,
                        lambda d: d / shared_runtime.library_name(3, disk_cache.code_identity() or ""),
                        lambda lib: str(lib._name), linker() is not None,
                        (shared_runtime, "_build_library")),
}
builds = pytest.mark.parametrize("name", list(BUILDS))


def _fresh(monkeypatch: pytest.MonkeyPatch, name: str) -> Build:
    build = BUILDS[name]
    if not build.needs:
        pytest.skip("no C compiler (or Python headers, or the pool is off)")
    if build.owner is not fastcall:
        # The process's own pool first: its symbols are the ones every program binds to;
        # the copies these tests load (global too) come after it and stay unused. The
        # runtime library binds to the pool; the process's own (if any) stays the one
        # programs bind to, as the pool's. Built elsewhere than the test's cache folder.
        with monkeypatch.context() as elsewhere:
            elsewhere.setenv("XLAMLIR_CACHE_DIR", "off")
            load_async_runtime()
    monkeypatch.setattr(build.owner, "_state", {})
    return build


@builds
def test_built_once_into_the_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            name: str) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    build = _fresh(monkeypatch, name)
    assert build.load() is not None, build.reason()
    target = build.target(tmp_path / disk_cache.FASTCALL_FOLDER)
    assert target.is_file() and not list(target.parent.glob(".tmp-*"))

    def no_build(*_: Any) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(build.owner, "_state", {})
    monkeypatch.setattr(*build.builder, no_build)
    assert build.load() is not None  # loaded, not built
    disk_cache.clear(str(tmp_path))  # clear() removes the builds and their folder
    assert not target.parent.exists()


@builds
def test_a_damaged_build_in_the_cache_is_built_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      name: str) -> None:
    # Damaged before any process loaded it (a loaded file is only ever replaced, by rename).
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    build = _fresh(monkeypatch, name)
    target = build.target(tmp_path / disk_cache.FASTCALL_FOLDER)
    target.parent.mkdir()
    target.write_bytes(b"not an ELF file")
    assert build.load() is not None and build.reason() is None
    assert target.read_bytes()[:4] == b"\x7fELF"


@builds
def test_an_unusable_cache_directory_builds_in_a_temporary_one(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path, name: str) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(blocker))  # fastcall/ cannot be made in it
    build = _fresh(monkeypatch, name)
    loaded = build.load()
    assert loaded is not None and build.reason() is None
    assert not build.path_of(loaded).startswith(str(tmp_path))
