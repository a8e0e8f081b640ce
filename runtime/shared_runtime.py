"""Code every program would otherwise compile a copy of, compiled once (issue #17): the
parallel loops' dispatcher (lowering/passes/parallel_tasks.py) and the block cache's
allocator (lowering/passes/block_cache.py).

A program's own copies cost its JIT ~10 ms of wall time each (make bench's programs:
with the cache on, 2.92 s of cold compiles in all with their own dispatchers, 2.70 s
without; their allocators another ~10 ms a program that has temporaries, 21 of 33).

- With the disk cache on (the default), both are a shared library built once per cache
  directory (`runtime_library`: the JIT's object file linked by
  runtime/cached_library.py, ~30 ms once, then ~1 ms to load) and loaded with its
  symbols global, as the thread pool is (runtime/task_pool.py). Programs then call
  `_mlir_ciface_xlamlir_parallel_for` and `xlamlir_blocks_alloc/free/release` (with
  their own state: the allocator's slots stay the program's) there, which the JIT and
  the dynamic loader resolve: JIT-compiled programs and the disk cache's entries alike
  (an entry that calls it has the library loaded before its own).
- Otherwise (cache off, no linker, $XLAMLIR_RUNTIME_LIBRARY off, a failed build), the
  allocator stays in each program, and a process first compiles `OWN_COPIES` programs
  with their own dispatcher, then JIT-compiles the process's (~12 ms once) and binds
  each later program's calls to it with `register_runtime` (`process_dispatcher`); a
  program the disk cache stores keeps its own.

After the pipeline (the stages still show each program complete), `share` removes the
shared functions from the module and makes its calls call the shared copies. Exported
libraries are untouched: export lowers the program again, sequentially.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialect.context import reused_context
from ..dialect.errors import CompileError
from ..lowering.passes import block_cache
from ..lowering.passes.parallel_tasks import (
    PARALLEL_FOR,
    call_shared_functions_at,
    declaration,
    defines_shared_functions,
    shared_functions_text,
)
from . import c_build
from .cached_library import link_library
from .disk_cache import code_identity

SYMBOL = "xlamlir_parallel_for"
#: The dispatcher programs call when they share one: bound by `register_runtime` (the
#: JIT's copy), or defined by the runtime library.
SHARED_SYMBOL = f"_mlir_ciface_{SYMBOL}"
#: Programs with parallel loops compiled with their own copy before the process's (when
#: there is no runtime library).
OWN_COPIES = 3
#: $XLAMLIR_RUNTIME_LIBRARY=off: no runtime library (as with the cache off).
ENV = "XLAMLIR_RUNTIME_LIBRARY"
_ADDRESS_FUNCTION = "xlamlir_parallel_for_address"
# (context, ExecutionEngine, ctypes function of the dispatcher), kept for the process's
# life: the machine code of programs with parallel loops calls into it.
_compiled: list[Any] = []
_own_copies = [0]
_lock = threading.Lock()
# "library": the loaded runtime library; "why": why there is none; "failed": the
# code identity (disk_cache.code_identity) its build failed for.
_state: dict[str, Any] = {}


class Sharing(Enum):
    """How a program's parallel loops reach the dispatcher."""

    OWN = "own"  # its own copy (or it has no parallel loops)
    LIBRARY = "library"  # the runtime library's global symbol
    REGISTERED = "registered"  # the process's JIT copy, bound with register_runtime


def _library_text() -> str:
    """The runtime library's module: the dispatcher's functions with an exported entry,
    the block allocator's core exported."""
    core = block_cache.CORE
    for name in block_cache.CORE_FUNCTIONS:
        core = core.replace(f"llvm.func internal @{name}(", f"llvm.func @{name}(")
    return shared_functions_text(_ADDRESS_FUNCTION) + block_cache.LIBC + core + f"""
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
    with tempfile.TemporaryDirectory(prefix=".tmp-runtime-", dir=directory) as work:
        engine.dump_to_object_file(os.path.join(work, "runtime.o"))
        try:
            image = link_library([os.path.join(work, "runtime.o")], [], work)
        except CompileError as e:
            raise OSError(str(e)) from None
        partial = Path(work, "runtime.so")
        partial.write_bytes(image)
        os.replace(partial, path)


def _open_library(path: Path) -> ctypes.CDLL:
    library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL | os.RTLD_NOW)
    getattr(library, SHARED_SYMBOL)  # AttributeError: not the library (damaged): built again
    return library


def allowed() -> bool:
    """Whether $XLAMLIR_RUNTIME_LIBRARY lets programs call the runtime library (default:
    yes; whether it is available is `runtime_library`'s to say)."""
    return c_build.allowed(ENV)


def library_name(opt_level: int, identity: str) -> str:
    """The runtime library's file name in the cache's `fastcall/` folder: a hash of its
    module, the JIT's -O level and `identity` (disk_cache.code_identity)."""
    return f"_runtime-{c_build.key(_library_text(), ['jit', f'-O{opt_level}'], identity)}.so"


def runtime_library(opt_level: int) -> ctypes.CDLL | None:
    """The runtime library, loaded with its symbols global (built in the cache's
    `fastcall/` folder first if missing: once per cache directory), or None when there
    is none for this process: the disk cache is off or cannot hold machine code here,
    $XLAMLIR_RUNTIME_LIBRARY is off, or the build failed (`unavailable_reason()`).
    Once loaded, kept for the process's life (a later change of the cache directory
    does not unload it; turning the switch off stops its use). The async runtime must
    be loaded first."""
    if not allowed():
        _state["why"] = f"{ENV} is off"
        return None
    if _state.get("library") is not None:
        _state["why"] = None
        return _state["library"]
    identity = code_identity()
    with _lock:
        if _state.get("library") is not None:
            return _state["library"]
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
    """Why the last `runtime_library()` gave None (None if it gave the library)."""
    return _state.get("why")


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


@dataclass(frozen=True)
class Shared:
    """What `share` made a module call: how it reaches the dispatcher, and whether it
    now needs the runtime library."""

    dispatcher: Sharing
    library: bool


def _call_core_in_library(module: ir.Module) -> None:
    """The block allocator's core functions of `module`, if it has them, made declarations
    (resolved in the runtime library)."""
    with module.context, ir.Location.unknown():
        for op in list(module.body.operations):
            if op.operation.name != "llvm.func" or "sym_name" not in op.attributes:
                continue
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name in block_cache.CORE_FUNCTIONS and len(op.regions[0].blocks):
                op.operation.erase()
                module.body.append(ir.Operation.parse(
                    declaration(name, block_cache.CORE_FUNCTIONS[name])))


def share(module: ir.Module, stored: bool, opt_level: int) -> Shared:
    """Make `module` (LLVM dialect) call shared copies of the code every program has
    instead of its own: with the runtime library, its dispatcher and block allocator;
    else the process's JIT copy of the dispatcher, if `module` is not `stored` in the disk
    cache and this process compiled `OWN_COPIES` such programs already."""
    parallel = defines_shared_functions(module)
    allocates = bool(_defined_names(module) & set(block_cache.CORE_FUNCTIONS))
    if (parallel or allocates) and runtime_library(opt_level) is not None:
        if parallel:
            call_shared_functions_at(module, SHARED_SYMBOL)
        _call_core_in_library(module)
        return Shared(Sharing.LIBRARY if parallel else Sharing.OWN, True)
    if not parallel or stored:
        return Shared(Sharing.OWN, False)
    with _lock:
        if not _compiled and _own_copies[0] < OWN_COPIES:
            _own_copies[0] += 1
            return Shared(Sharing.OWN, False)
    call_shared_functions_at(module, SHARED_SYMBOL)
    return Shared(Sharing.REGISTERED, False)


def _defined_names(module: ir.Module) -> set[str]:
    """The name of every function `module` defines (with a body)."""
    return {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
            if op.operation.name == "llvm.func" and "sym_name" in op.attributes
            and len(op.regions[0].blocks)}
