"""The shared functions of parallel loops (lowering/passes/parallel_tasks.py) compiled
once per process instead of in every program (issue #17).

A program's copy costs ~3.5 ms of JIT CPU time (axpy f32[4M]) to ~6 ms (softmax
f32[1024,1024]); the process's copy costs ~12 ms once (an ExecutionEngine of its own).
So a process first compiles `OWN_COPIES` programs with parallel loops as they are, and
only then compiles the process's copy: a short script pays nothing more, a long-running
process (a benchmark, a model compiling many computations) saves from then on.

After the pipeline (the stages still show each program complete), `use_process_functions`
removes the shared functions from the module and makes its dispatcher calls call
`_mlir_ciface_xlamlir_parallel_for`, a runtime symbol bound with `register_runtime`.
Never for a program stored in the disk cache: an entry stays self-contained, so a fresh
process loading it does not pay the process's copy (nor need it). Exported libraries are
untouched: export lowers the program again, sequentially.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialect.context import reused_context
from ..lowering.passes.parallel_tasks import (
    call_shared_functions_at,
    defines_shared_functions,
    shared_functions_text,
)

SYMBOL = "xlamlir_parallel_for"
#: Programs with parallel loops compiled with their own copy before the process's.
OWN_COPIES = 3
_ADDRESS_FUNCTION = "xlamlir_parallel_for_address"
# (context, ExecutionEngine, ctypes function of the dispatcher), kept for the process's
# life: the machine code of programs with parallel loops calls into it.
_compiled: list[Any] = []
_own_copies = [0]
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
            function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_void_p)(address.value)
            # Engines keep the function they bind (register_runtime): it keeps the code.
            function.code = (context, engine)
            _compiled.extend([context, engine, function])
        return _compiled[2]


def use_process_functions(module: ir.Module, stored: bool) -> bool:
    """Make `module` (LLVM dialect) call the process's shared functions instead of its own,
    if it has any, it is not `stored` in the disk cache and this process compiled
    `OWN_COPIES` such programs already: whether it does now."""
    if stored or not defines_shared_functions(module):
        return False
    with _lock:
        if not _compiled and _own_copies[0] < OWN_COPIES:
            _own_copies[0] += 1
            return False
    return call_shared_functions_at(module, f"_mlir_ciface_{SYMBOL}")
