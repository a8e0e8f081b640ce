"""The C call path of an Executable (`fastcall_source.py`), built with the system's C compiler.

A call through ctypes spends ~2 us in Python (checking arguments, filling descriptors,
ctypes' own call); the C module does the common case in ~0.2 us and hands back
NotImplemented for anything else, which the ctypes path then takes (runtime/executable.py).

The extension is compiled on first need with `$CC` (default `cc`) against this Python's
and numpy's headers (runtime/c_build.py: into the persistent compile cache's `fastcall/`
folder, named by a hash of the source, the Python ABI, numpy's version and the compiler
command, so a later process only imports it; with the cache off into a temporary
directory, compiled once per process). Without a compiler or headers, or with
`XLAMLIR_FASTCALL=off`, every call takes the ctypes path. Imports `runtime.fastcall_source`
and `runtime.c_build`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import c_build
from .fastcall_source import SOURCE

ENV = "XLAMLIR_FASTCALL"
#: An executable switches to the C path on its call number WARM_CALLS: a script calling
#: a program once never waits for the C compiler (~0.5 s, once per cache directory).
WARM_CALLS = 2

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "module": the loaded module or None (unavailable), "why": reason


def enabled() -> bool:
    """Whether $XLAMLIR_FASTCALL allows the C path (default: yes)."""
    return c_build.allowed(ENV)


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
    return c_build.compiler()


def _target(compiler: list[str], directory: Path) -> Path:
    """The built module's file in `directory`."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    name = c_build.key(SOURCE, compiler, sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "",
                       np.__version__, np.get_include())
    return directory / f"_fastcall-{name}{suffix}"


def _load() -> ModuleType:
    compiler = _compiler()
    c_build.require_compiler(compiler)
    return c_build.load_or_build(lambda directory: _target(compiler, directory),
                                 lambda directory, path: _build(compiler, directory, path),
                                 _import, (ImportError,))


def _build(compiler: list[str], directory: Path, path: Path) -> None:
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").is_file():
        raise OSError(f"no Python.h in {include} (the Python development headers)")
    # numpy 2's API has PyArray_Pack (a user dtype's scalar, bfloat16's, to bytes).
    target = ["-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION"] if np.lib.NumpyVersion(
        np.__version__) >= "2.0.0" else []
    c_build.compile_shared(compiler, directory, path, SOURCE,
                           [*target, f"-I{include}", f"-I{np.get_include()}"], ["-lm"])


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader("_fastcall", str(path))
    spec = importlib.util.spec_from_file_location("_fastcall", str(path), loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    loader.exec_module(loaded)
    return loaded
