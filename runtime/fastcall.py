"""The C call path of an Executable (`fastcall_source.py`), built with the system's C compiler.

A call through ctypes spends ~2 us in Python (checking arguments, filling descriptors,
ctypes' own call); the C module does the common case in ~0.2 us and hands back
NotImplemented for anything else, which the ctypes path then takes (runtime/executable.py).

The extension is compiled on first need with `$CC` (default `cc`) against this Python's
and numpy's headers into `<cache dir>/fastcall/` (the persistent compile cache's directory,
runtime/disk_cache.py), named by a hash of the source, the Python ABI, numpy's version and
the compiler command, so a later process only imports it; with the cache off it goes into a
temporary directory, compiled once per process. Without a compiler or headers, or with
`XLAMLIR_FASTCALL=off`, every call takes the ctypes path. Imports `runtime.fastcall_source`
and `runtime.disk_cache`.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .disk_cache import FASTCALL_FOLDER, cache_dir
from .fastcall_source import SOURCE

ENV = "XLAMLIR_FASTCALL"
_OFF = frozenset({"0", "off", "false", "no", "none"})
_TIMEOUT_S = 120
#: An executable switches to the C path on its call number WARM_CALLS: a script calling
#: a program once never waits for the C compiler (~0.5 s, once per cache directory).
WARM_CALLS = 2

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "module": the loaded module or None (unavailable), "why": reason


def enabled() -> bool:
    """Whether $XLAMLIR_FASTCALL allows the C path (default: yes)."""
    return os.environ.get(ENV, "").strip().lower() not in _OFF


def module() -> ModuleType | None:
    """The compiled `_fastcall` module, built and loaded on first use; None when it cannot
    be (`unavailable_reason()` says why) or the environment turns it off."""
    if not enabled():
        return None
    if "module" not in _state:
        with _lock:
            if "module" not in _state:
                try:
                    _state["module"] = _load()
                except (OSError, ImportError, subprocess.SubprocessError) as e:
                    _state["module"], _state["why"] = None, f"{type(e).__name__}: {e}"
    return _state["module"]


def unavailable_reason() -> str | None:
    """Why the C path could not be built in this process (None if it was, or was not tried)."""
    return _state.get("why")


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC", "")) or ["cc"]


def _build_key(source: bytes, compiler: list[str]) -> str:
    digest = hashlib.sha256(source)
    for part in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", np.__version__,
                 np.get_include(), " ".join(compiler)):
        digest.update(b"\0" + str(part).encode())
    return digest.hexdigest()[:24]


def _cache_directory(compiler: list[str]) -> Path | None:
    """The cache's `fastcall/` folder, if the cache is on and the module is there or can be
    built there (a read-only cache still serves a module built before)."""
    base = cache_dir()
    if base is None:
        return None
    directory = Path(base, FASTCALL_FOLDER)
    if _target(compiler, directory).is_file():
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def _temporary_directory() -> Path:
    temporary = tempfile.mkdtemp(prefix="xlamlir-fastcall-")
    atexit.register(shutil.rmtree, temporary, True)
    return Path(temporary)


def _target(compiler: list[str], directory: Path) -> Path:
    """The built module's file in `directory`."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return directory / f"_fastcall-{_build_key(SOURCE.encode(), compiler)}{suffix}"


def _load() -> ModuleType:
    compiler = _compiler()
    if shutil.which(compiler[0]) is None:
        raise OSError(f"no C compiler {compiler[0]!r} on PATH")
    directory = _cache_directory(compiler)
    if directory is None:  # the cache is off or not writable: built for this process only
        directory = _temporary_directory()
        path = _target(compiler, directory)
        _build(compiler, directory, path)
        return _import(path)
    path = _target(compiler, directory)
    if not path.is_file():
        _build(compiler, directory, path)
    try:
        return _import(path)
    except ImportError:
        # A damaged file in the cache: built again, once.
        path.unlink(missing_ok=True)
        _build(compiler, directory, path)
        return _import(path)


def _build(compiler: list[str], directory: Path, path: Path) -> None:
    """Compile under a temporary name, then rename into place: concurrent processes each
    build and the last rename wins, a reader never sees half a file."""
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").is_file():
        raise OSError(f"no Python.h in {include} (the Python development headers)")
    fd, partial = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=directory)
    os.close(fd)
    source = partial[:-3] + ".c"
    try:
        Path(source).write_text(SOURCE)
        # numpy 2's API has PyArray_Pack (a user dtype's scalar, bfloat16's, to bytes).
        target = ["-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION"] if np.lib.NumpyVersion(
            np.__version__) >= "2.0.0" else []
        command = [*compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-Wall", *target,
                   f"-I{include}", f"-I{np.get_include()}", source, "-o", partial, "-lm"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S)
        if proc.returncode != 0:
            raise OSError(f"{' '.join(command)} failed: {(proc.stderr or proc.stdout).strip()}")
        os.replace(partial, path)
    finally:
        for leftover in (partial, source):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader("_fastcall", str(path))
    spec = importlib.util.spec_from_file_location("_fastcall", str(path), loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    loader.exec_module(loaded)
    return loaded
