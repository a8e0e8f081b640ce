"""The entry function's code compiled once, not once per wrapper.

The ExecutionEngine gives every function a packed wrapper `_mlir_<name>(void**)`, and
`llvm.emit_c_interface` adds `_mlir_ciface_main` around `main`: LLVM inlined `main` into
both whenever it was small enough, so a program without parallel loops had its code
optimized and generated three times (matmul 48^3: 55 -> 36 ms of compile CPU without
the copies). `entry_not_inlined` marks each function that has a C interface
`no_inline`; the wrappers then call it. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_C_INTERFACE = "llvm.emit_c_interface"
_WRAPPER_PREFIX = "_mlir_ciface_"


def entry_not_inlined(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name != "llvm.func" or _C_INTERFACE not in op.attributes:
            continue
        if len(op.regions[0].blocks) and \
                not ir.StringAttr(op.attributes["sym_name"]).value.startswith(_WRAPPER_PREFIX):
            op.attributes["no_inline"] = ir.UnitAttr.get()
