"""The JIT's machine code as a shared library, for the disk cache (runtime/disk_cache.py).

`link_library` turns the ExecutionEngine's object file into a shared library; `open_library`
loads one and gives the Executable what it uses of an ExecutionEngine (`raw_lookup`,
`register_runtime`, `dump_to_object_file`), so a program loaded from the cache runs the
very machine code the JIT generated.

The JIT generates x86-64 code for the large code model, without PIC: every address is a
64-bit absolute relocation, which the dynamic loader applies as text relocations
(`-z notext`). `-Bsymbolic` binds the object's references to its own functions and data
at link time: its `main` must not resolve to the Python interpreter's. Everything else
(malloc, libm, the async runtime, MLIR's runner utils) stays undefined and resolves at
load time in the process, as the JIT resolves it.

The custom-call symbols the runtime binds at JIT time (`register_runtime`) become stubs
that jump through a pointer slot, set after loading to the executable's trampoline. Each
load is a private copy of the library (written under a name never used before in this
process, then unlinked): two executables loaded from one entry keep separate random
states and bindings. Imports `dialect`.
"""

from __future__ import annotations

import _ctypes
import ctypes
import importlib
import itertools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..dialect.errors import CompileError
from .export import MEMREF_COPY

#: Prefix of the data symbol holding the address a runtime-bound stub jumps to.
SLOT_PREFIX = "__xlamlir_slot_"
_RUNTIME_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOOL_TIMEOUT = 120  # seconds
# A freed executable's library is unmapped this long after: a worker thread of the async
# runtime may still be returning through a task's last instructions when the call that
# awaited the task has returned.
_CLOSE_DELAY_S = 2.0
_load_counter = itertools.count()
_retired: list[tuple[float, int]] = []
_retired_lock = threading.Lock()


def linker() -> str | None:
    """The linker that makes the shared library (the system's ld, else LLVM's lld), if any."""
    return shutil.which("ld") or shutil.which("ld.lld")


def _llvm_mc() -> str:
    try:
        for root in getattr(importlib.import_module("llvm"), "__path__", []):
            candidate = Path(root) / "bin" / "llvm-mc"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    except ImportError:
        pass
    found = shutil.which("llvm-mc")
    if found is None:
        raise CompileError("disk cache: cannot find llvm-mc (the llvm wheel's) to assemble the "
                           "custom-call stubs", "disk_cache")
    return found


def _stub_source(symbols: Sequence[str]) -> str:
    """x86-64 assembly: per runtime-bound symbol, `_mlir_ciface_<symbol>` jumping through
    the pointer at `SLOT_PREFIX<symbol>` (the name `register_runtime` binds)."""
    lines = []
    for symbol in symbols:
        function, slot = f"_mlir_ciface_{symbol}", f"{SLOT_PREFIX}{symbol}"
        lines += ["\t.text", f"\t.globl\t{function}", f"\t.type\t{function},@function",
                  "\t.p2align\t4", f"{function}:", f"\tjmpq\t*{slot}(%rip)",
                  "\t.data", f"\t.globl\t{slot}", f"\t.type\t{slot},@object", "\t.p2align\t3",
                  f"{slot}:", "\t.quad\t0", f"\t.size\t{slot}, 8"]
    lines.append('\t.section\t.note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n"


def _run(command: list[str], cwd: str, what: str) -> None:
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_TOOL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CompileError(f"disk cache: {what} did not run: {e}", "disk_cache") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise CompileError(f"disk cache: {what} failed (exit {proc.returncode}): {detail}",
                           "disk_cache", detail)


def _compile_memref_copy(work: str) -> bool:
    """MLIR's `memrefCopy` (strided copies) compiled into the library, as export does: from
    MLIR's runner utils it would load libMLIR (~100 ms) into every process loading the
    library. False (the symbol then resolves at load time) without a working C compiler."""

    source = "#include <stdint.h>\n#include <string.h>\n" + MEMREF_COPY
    Path(work, "memref_copy.c").write_text(source)
    compiler = shlex.split(os.environ.get("CC", "")) or ["cc"]
    if shutil.which(compiler[0]) is None:
        return False
    try:
        _run([*compiler, "-c", "-O2", "-fPIC", "-fvisibility=hidden", "memref_copy.c", "-o",
              "memref_copy.o"], work, "cc")
    except CompileError:
        return False  # a C compiler that does not work is none
    return True


def link_library(object_paths: Sequence[str], runtime_symbols: Sequence[str], work: str) -> bytes:
    """The shared library of the JIT's object files (one per engine: runtime/split_jit.py),
    with a stub per name in `runtime_symbols` (the custom-call symbols bound at JIT
    time). `work` is a scratch directory. Raises CompileError if a tool is missing or
    fails."""
    ld = linker()
    if ld is None:
        raise CompileError("disk cache: no linker (ld or ld.lld) on PATH", "disk_cache")
    inputs = list(object_paths)
    if (any(b"\0memrefCopy\0" in Path(p).read_bytes() for p in object_paths)
            and _compile_memref_copy(work)):
        inputs.append("memref_copy.o")
    if runtime_symbols:
        bad = [s for s in runtime_symbols if not _RUNTIME_SYMBOL.match(s)]
        if bad:
            raise CompileError(f"disk cache: runtime symbol {bad[0]!r} is not an identifier",
                               "disk_cache")
        Path(work, "stubs.s").write_text(_stub_source(runtime_symbols))
        _run([_llvm_mc(), "-triple=x86_64-unknown-linux-gnu", "-filetype=obj", "stubs.s",
              "-o", "stubs.o"], work, "llvm-mc")
        inputs.append("stubs.o")
    _run([ld, "-shared", "-Bsymbolic", "-z", "notext", "-z", "noexecstack", "-o", "cached.so",
          *inputs], work, os.path.basename(ld))
    return Path(work, "cached.so").read_bytes()


def _retire(handle: int) -> None:
    with _retired_lock:
        _retired.append((time.monotonic(), handle))


def _close_retired() -> None:
    now = time.monotonic()
    with _retired_lock:
        due = [h for at, h in _retired if now - at >= _CLOSE_DELAY_S]
        _retired[:] = [(at, h) for at, h in _retired if now - at < _CLOSE_DELAY_S]
    for handle in due:
        _ctypes.dlclose(handle)


class LoadedLibrary:
    """A cached program's library, standing in for its ExecutionEngine."""

    def __init__(self, library: ctypes.CDLL, image: bytes | None) -> None:
        self._library = library
        self._image = image  # for write_object (XLAMLIR_KEEP_OBJECT)
        finalizer = weakref.finalize(self, _retire, library._handle)
        finalizer.atexit = False  # the process unmaps everything at exit anyway

    def address(self, symbol: str) -> int:
        """The address of the symbol `symbol` (its full name), 0 if none."""
        try:
            return ctypes.cast(self._library[symbol], ctypes.c_void_p).value or 0
        except AttributeError:
            return 0

    def raw_lookup(self, name: str) -> int:
        """The address of `_mlir_<name>` (as ExecutionEngine.raw_lookup), 0 if none."""
        return self.address("_mlir_" + name)

    def register_runtime(self, name: str, callback: Any) -> None:
        """Make the stub of `name` jump to `callback` (a ctypes function kept alive by the
        caller, as for ExecutionEngine.register_runtime)."""
        slot = self.address(SLOT_PREFIX + name)
        if not slot:
            raise CompileError(f"disk cache: the cached library has no stub for {name!r}",
                               "disk_cache")
        ctypes.c_void_p.from_address(slot).value = ctypes.cast(callback, ctypes.c_void_p).value

    def dump_to_object_file(self, path: str) -> None:
        """Write the library (an ELF file with the JIT's machine code), if it was kept."""
        if self._image is not None:
            Path(path).write_bytes(self._image)


def open_library(image: bytes, directories: Sequence[str | None], prepare: Callable[[], None],
                 keep_image: bool) -> LoadedLibrary:
    """Load a private copy of the library `image`, written to the first of `directories`
    that takes it (None: the system's temporary directory, found only if needed) and
    unlinked once loaded. If a symbol is missing, `prepare()` loads the libraries the JIT
    would have (MLIR's runner utils, libm) and the load is tried once more. Raises
    OSError if it cannot be loaded (e.g. every directory is mounted noexec)."""
    _close_retired()
    error: OSError | None = None
    for directory in directories:
        try:
            fd, path = tempfile.mkstemp(prefix=f".load-{os.getpid()}-{next(_load_counter)}-",
                                        suffix=".so", dir=directory or tempfile.gettempdir())
        except OSError as e:
            error = error or e
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(image)
            try:
                library = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            except OSError as e:
                if "undefined symbol" not in str(e):
                    raise
                prepare()
                library = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            return LoadedLibrary(library, image if keep_image else None)
        except OSError as e:
            error = e
        finally:
            os.unlink(path)
    raise error or OSError("no directory to load the library from")
