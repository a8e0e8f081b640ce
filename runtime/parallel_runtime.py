"""The shared functions of parallel loops (lowering/passes/parallel_tasks.py) compiled
once instead of in every program (issue #17).

A program's own copy costs its JIT ~10-15 ms of wall time (make bench's programs with
parallel loops: 2.76 s of compile in all with the shared copy, 3.00 s with their own).
Two ways to share one:

- With the disk cache on (the default), the copy is a shared library built once per
  cache directory (`dispatcher_library`: the JIT's object file linked by
  runtime/cached_library.py, ~30 ms once, then ~1 ms to load) and loaded with its
  symbols global, as the thread pool is (runtime/task_pool.py). Every program then calls
  `_mlir_ciface_xlamlir_parallel_for`, which the JIT and the dynamic loader resolve
  there: JIT-compiled programs and the disk cache's entries alike (an entry with
  parallel loops has the library loaded before its own: `load_for_entry`).
- Otherwise (cache off, no linker), a process first compiles `OWN_COPIES` programs with
  their own copy, then JIT-compiles the process's (~12 ms once) and binds each later
  program's calls to it with `register_runtime` (`process_dispatcher`); a program the
  disk cache stores keeps its own.

After the pipeline (the stages still show each program complete),
`use_process_functions` removes the shared functions from the module and makes its
dispatcher calls call the shared copy. Exported libraries are untouched: export lowers
the program again, sequentially.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import threading
from enum import Enum
from pathlib import Path
from typing import Any

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialect.context import reused_context
from ..dialect.errors import CompileError
from ..lowering.passes.parallel_tasks import (
    PARALLEL_FOR,
    call_shared_functions_at,
    defines_shared_functions,
    shared_functions_text,
)
from . import c_build
from .cached_library import link_library
from .disk_cache import code_identity

SYMBOL = "xlamlir_parallel_for"
#: What programs call when they share a copy: bound by `register_runtime` (the JIT's
#: copy), or defined by the dispatcher library.
SHARED_SYMBOL = f"_mlir_ciface_{SYMBOL}"
#: Programs with parallel loops compiled with their own copy before the process's (when
#: there is no dispatcher library).
OWN_COPIES = 3
#: $XLAMLIR_DISPATCHER_LIBRARY=off: no dispatcher library (the JIT's copy, as with the
#: cache off).
ENV = "XLAMLIR_DISPATCHER_LIBRARY"
_ADDRESS_FUNCTION = "xlamlir_parallel_for_address"
# (context, ExecutionEngine, ctypes function of the dispatcher), kept for the process's
# life: the machine code of programs with parallel loops calls into it.
_compiled: list[Any] = []
_own_copies = [0]
_lock = threading.Lock()
# "library": the loaded dispatcher library (None: tried and not available), "why".
_state: dict[str, Any] = {}


class Sharing(Enum):
    """How a program's parallel loops reach the shared functions."""

    OWN = "own"  # its own copy (or it has no parallel loops)
    LIBRARY = "library"  # the dispatcher library's global symbol
    REGISTERED = "registered"  # the process's JIT copy, bound with register_runtime


def _library_text() -> str:
    """The dispatcher library's module: the shared functions and the exported entry."""
    return shared_functions_text(_ADDRESS_FUNCTION) + f"""
llvm.func @{SHARED_SYMBOL}(%fn: !llvm.ptr, %ctx: !llvm.ptr, %total: i64, %site: !llvm.ptr) {{
  llvm.call @{PARALLEL_FOR}(%fn, %ctx, %total, %site) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.return
}}"""


def _build_library(opt_level: int, directory: Path, path: Path) -> None:
    """JIT-compile the library's module (its object file kept) and link it into `path`,
    under a temporary name in `directory` renamed into place."""
    context = reused_context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(_library_text())
        engine = ExecutionEngine(module, opt_level=opt_level, enable_object_dump=True)
    if not engine.raw_lookup(SHARED_SYMBOL):  # generates the machine code
        raise OSError(f"the JIT did not compile {SHARED_SYMBOL}")
    with tempfile.TemporaryDirectory(prefix=".tmp-dispatch-", dir=directory) as work:
        engine.dump_to_object_file(os.path.join(work, "dispatch.o"))
        try:
            image = link_library([os.path.join(work, "dispatch.o")], [], work)
        except CompileError as e:
            raise OSError(str(e)) from None
        partial = Path(work, "dispatch.so")
        partial.write_bytes(image)
        os.replace(partial, path)


def _open_library(path: Path) -> ctypes.CDLL:
    library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL | os.RTLD_NOW)
    getattr(library, SHARED_SYMBOL)  # AttributeError: not the library (damaged): built again
    return library


def library_name(opt_level: int, identity: str) -> str:
    """The dispatcher library's file name in the cache's `fastcall/` folder: a hash of its
    module, the JIT's -O level and `identity` (disk_cache.code_identity)."""
    return f"_dispatch-{c_build.key(_library_text(), ['jit', f'-O{opt_level}'], identity)}.so"


def dispatcher_library(opt_level: int) -> ctypes.CDLL | None:
    """The dispatcher library, loaded with its symbols global (built in the cache's
    `fastcall/` folder first if missing: once per cache directory), or None when there
    is none for this process: the disk cache is off or cannot hold machine code here,
    $XLAMLIR_DISPATCHER_LIBRARY is off, or the build failed (`unavailable_reason()`).
    Once loaded, kept for the process's life (a later change of the cache directory
    does not unload it). The async runtime must be loaded first."""
    if _state.get("library") is not None:
        return _state["library"]
    identity = code_identity()
    with _lock:
        if _state.get("library") is not None:
            return _state["library"]
        if not c_build.allowed(ENV):
            _state["why"] = f"{ENV} is off"
            return None
        if identity is None:
            _state["why"] = "the disk cache is off or cannot hold machine code here"
            return None
        if _state.get("failed") == identity:
            return None  # failed for this cache before: the JIT's copy, no second try
        name = library_name(opt_level, identity)
        try:
            library = c_build.load_or_build(
                lambda directory: directory / name,
                lambda directory, path: _build_library(opt_level, directory, path),
                _open_library, (OSError, AttributeError))
        except (OSError, AttributeError, subprocess.SubprocessError) as e:
            _state.update(failed=identity, why=f"{type(e).__name__}: {e}")
            return None
        _state.update(library=library, why=None)
        return library


def unavailable_reason() -> str | None:
    """Why the last `dispatcher_library()` gave None (None if it gave the library)."""
    return _state.get("why")


def load_for_entry(opt_level: int) -> None:
    """Before a disk-cache entry with parallel loops is loaded: the library its calls
    resolve in, if this process can have it (else the entry's own copy, or a failed load
    that compiles the program again)."""
    dispatcher_library(opt_level)


def process_dispatcher(opt_level: int) -> Any:
    """The shared dispatcher JIT-compiled for this process (once; the async runtime must
    be loaded), as a ctypes function for `register_runtime`."""
    with _lock:
        if not _compiled:
            # This thread's reused context: a context of its own would cost several ms and
            # start a thread pool living as long as the process.
            context = reused_context()
            with context, ir.Location.unknown():
                module = ir.Module.parse(shared_functions_text(_ADDRESS_FUNCTION))
                engine = ExecutionEngine(module, opt_level=opt_level)
            packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup(_ADDRESS_FUNCTION))
            address = ctypes.c_void_p()
            packed((ctypes.c_void_p * 1)(ctypes.addressof(address)))
            function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_void_p)(address.value)
            # Engines keep the function they bind (register_runtime): it keeps the code.
            function.code = (context, engine)
            _compiled.extend([context, engine, function])
        return _compiled[2]


def use_process_functions(module: ir.Module, stored: bool, opt_level: int) -> Sharing:
    """Make `module` (LLVM dialect) call a shared copy of the shared functions instead of
    its own, if it has any: the dispatcher library's when there is one, else the
    process's JIT copy if it is not `stored` in the disk cache and this process compiled
    `OWN_COPIES` such programs already. How it calls them now."""
    if not defines_shared_functions(module):
        return Sharing.OWN
    if dispatcher_library(opt_level) is not None:
        call_shared_functions_at(module, SHARED_SYMBOL)
        return Sharing.LIBRARY
    if stored:
        return Sharing.OWN
    with _lock:
        if not _compiled and _own_copies[0] < OWN_COPIES:
            _own_copies[0] += 1
            return Sharing.OWN
    call_shared_functions_at(module, SHARED_SYMBOL)
    return Sharing.REGISTERED
