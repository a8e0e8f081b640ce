"""Whether the JIT needs MLIR's runner utils to resolve a module's external symbols.

`libmlir_c_runner_utils` (memrefCopy, for strided copies; through its dependency
libmlir_float16_utils the bf16 truncations LLVM may call) links libMLIR and libLLVM:
loading it took ~25 ms, a third of a small program's first compile in a process. The JIT
resolves an external symbol in the process (libc, libm, libgcc's helpers, the async
runtime, loaded with global symbols) or among the engine's registered custom-call
trampolines; the runner utils are passed to it only for a module declaring a symbol
found in neither, or holding 16-bit floats (LLVM's own calls for their conversions are
not declared in the IR). Imports nothing of ours.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable

from mlir import ir

_process = ctypes.CDLL(None)  # the process's global symbol scope, as the JIT searches it
_in_process: dict[str, bool] = {}


def external_symbols(module: ir.Module) -> list[str]:
    """The symbols a module in the LLVM dialect declares without defining them."""
    names = []
    for op in module.body.operations:
        operation = op.operation
        if operation.name == "llvm.func":
            external = len(operation.regions[0].blocks) == 0
        elif operation.name == "llvm.mlir.global":
            external = "value" not in operation.attributes and len(operation.regions[0].blocks) == 0
        else:
            continue
        if external:
            names.append(ir.StringAttr(operation.attributes["sym_name"]).value)
    return names


def in_process(symbol: str) -> bool:
    """Whether `symbol` resolves in the process's global scope (a symbol found is
    remembered: libraries are only ever added to the scope)."""
    found = _in_process.get(symbol)
    if not found:
        try:
            _process[symbol]
            found = True
        except AttributeError:
            found = False
        _in_process[symbol] = found
    return found


def needs_runtime_libraries(module: ir.Module, has_f16: bool, runtime_symbols: Iterable[str]) -> bool:
    """Whether the JIT of `module` (in the LLVM dialect) needs MLIR's runner utils;
    `has_f16`: whether it may hold f16 or bf16 values (conversions LLVM may lower to
    library calls); `runtime_symbols` are the custom-call names the engine binds."""
    if has_f16:
        return True
    bound = {"_mlir_ciface_" + s for s in runtime_symbols}
    return any(s not in bound and not in_process(s) for s in external_symbols(module))
