"""The shared functions of parallel loops (lowering/passes/parallel_tasks.py) compiled
once per process instead of in every program (~3.5 ms of JIT CPU time for axpy f32[4M],
~6 ms for softmax f32[1024,1024], issue #17).

After the pipeline (the stages still show each program complete), `use_process_functions`
removes the shared functions from the module and makes its dispatcher calls call
`_mlir_ciface_xlamlir_parallel_for`, a runtime symbol: bound with `register_runtime` to the
process's copy, in the JIT as in a library loaded from the disk cache (whose stub for it
jumps through a slot: runtime/cached_library.py). The entry's record of that symbol
(`RECORD`, stored with the custom calls' records) tells a fresh process to bind it.
Exported libraries are untouched: export lowers the program again, sequentially.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialect.context import reused_context
from ..lowering.passes.parallel_tasks import call_shared_functions_at, shared_functions_text

SYMBOL = "xlamlir_parallel_for"
#: The runtime record of a program calling the process's dispatcher (as a custom call's).
RECORD = {"symbol": SYMBOL, "target": "xlamlir.parallel_for"}
_ADDRESS_FUNCTION = "xlamlir_parallel_for_address"
# (ExecutionEngine, ctypes function of the dispatcher), kept for the process's life: the
# machine code of every program with parallel loops calls into it.
_compiled: list[Any] = []
_lock = threading.Lock()


def process_dispatcher(opt_level: int) -> Any:
    """The shared dispatcher compiled for this process (once; the async runtime must be
    loaded), as a ctypes function for `register_runtime`."""
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
            function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(address.value)
            _compiled.extend([context, engine, function])
        return _compiled[2]


def use_process_functions(module: ir.Module) -> bool:
    """Make `module` (LLVM dialect) call the process's shared functions instead of its own,
    if it has any: whether it does now."""
    return call_shared_functions_at(module, f"_mlir_ciface_{SYMBOL}")


def without_record(records: list[dict[str, str]]) -> tuple[list[dict[str, str]], bool]:
    """(`records` without RECORD, whether it was there)."""
    kept = [r for r in records if r.get("symbol") != SYMBOL]
    return kept, len(kept) != len(records)
