"""The thread pool parallel loops run on: ours (`task_pool_source.py`, workers that spin a
little before they sleep), or MLIR's async runtime where ours cannot be built.

Built with the system's C compiler once per cache directory (runtime/c_build.py, ~0.15 s)
and loaded into the process with its symbols global, in place of the wheels' async runtime
(runtime/compiler.py `load_async_runtime`): both define the same functions, so only one of
them is ever loaded in a process, and every program, JIT-compiled or loaded from the disk
cache, binds to it. Without a compiler, or with `XLAMLIR_TASK_POOL=off`, MLIR's runtime.

Measured on the 2-core KVM guest, each program timed in alternating processes with one
pool and the other (make bench's workloads): softmax f32[1024,1024] 0.54-0.68 -> 0.35-0.45 ms,
row sum f32[2048,2048] 0.43-0.49 -> 0.35-0.37, axpy f32[4M] 1.06-1.13 -> 0.92, max-pool
2x2 0.70-0.82 -> 0.59-0.61, matrix x vector [1024,1024] 84-157 -> 46-116 us; the rest
equal within the host's noise. Results never depend on the pool: how a loop's blocks are
spread over threads does not change a result. Imports `runtime.c_build`.
"""

from __future__ import annotations

import ctypes
import subprocess
import threading
from pathlib import Path

from . import c_build
from .task_pool_source import SOURCE, SPIN_NS

ENV = "XLAMLIR_TASK_POOL"
_FLAGS = [f"-DSPIN_NS={SPIN_NS}", "-pthread"]

_lock = threading.Lock()
_state: dict[str, object] = {}  # "library": the loaded CDLL or None, "why": the reason for None


def enabled() -> bool:
    """Whether $XLAMLIR_TASK_POOL allows our pool (default: yes)."""
    return c_build.allowed(ENV)


def library() -> ctypes.CDLL | None:
    """Our pool, built and loaded (symbols global) on first call; None when it is turned
    off or cannot be built (`unavailable_reason()` says why). Decided once per process."""
    if "library" not in _state:
        with _lock:
            if "library" not in _state:
                _state["library"] = None
                if not enabled():
                    _state["why"] = f"{ENV} is off"
                    return None
                try:
                    _state["library"] = _load()
                except (OSError, subprocess.SubprocessError) as e:
                    _state["why"] = f"{type(e).__name__}: {e}"
    return _state["library"]  # type: ignore[return-value]


def unavailable_reason() -> str | None:
    """Why our pool is not the process's (None if it is, or was not tried yet)."""
    return _state.get("why")  # type: ignore[return-value]


def tasks_run() -> tuple[int, int]:
    """(tasks our pool ran, of them those a spinning worker found) in this process; (0, 0)
    when the pool is MLIR's."""
    lib = _state.get("library")
    if not isinstance(lib, ctypes.CDLL):
        return 0, 0
    return int(lib.xlamlir_task_pool_tasks_run()), int(lib.xlamlir_task_pool_tasks_spun())


def _target(compiler: list[str], directory: Path) -> Path:
    return directory / f"_taskpool-{c_build.key(SOURCE, compiler, *_FLAGS)}.so"


def _load() -> ctypes.CDLL:
    compiler = c_build.compiler()
    c_build.require_compiler(compiler)
    lib = c_build.load_or_build(
        lambda directory: _target(compiler, directory),
        lambda directory, path: c_build.compile_shared(compiler, directory, path, SOURCE, _FLAGS, []),
        lambda path: ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL), (OSError,))
    for name in ("xlamlir_task_pool_tasks_run", "xlamlir_task_pool_tasks_spun"):
        getattr(lib, name).restype = ctypes.c_int64
    return lib
