"""The JIT's view of a program's linkage: every function but the C interfaces internal.

A program is called only through `_mlir_ciface_main` (by the Executable, the disk
cache's library and export alike); what else is looked up by name is data (the random
ops' state, a global). Yet after the "llvm" stage `main` and the bodies of parallel loops
have external linkage: the ExecutionEngine gives each a packed wrapper `_mlir_<name>`,
and LLVM must keep every argument of their memref descriptors. Internal, the wrappers
are not generated and LLVM's interprocedural passes drop the unused arguments: 5-9% less
JIT time (axpy, softmax, conv2d, matmul 512^2). Done on the module the JIT takes, after
the stages were kept (as the target CPU is): `exe.stages` shows the pipeline's output.
Imports nothing of ours.
"""

from __future__ import annotations

from mlir import ir

_C_INTERFACE_PREFIX = "_mlir_ciface_"


def internalize(module: ir.Module) -> None:
    """Give every defined `llvm.func` of external linkage but `_mlir_ciface_*` internal
    linkage (declarations keep theirs: the JIT resolves them)."""
    internal = ir.Attribute.parse("#llvm.linkage<internal>", context=module.context)
    external = ir.Attribute.parse("#llvm.linkage<external>", context=module.context)
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "llvm.func" or len(operation.regions[0].blocks) == 0:
            continue
        if ir.StringAttr(operation.attributes["sym_name"]).value.startswith(_C_INTERFACE_PREFIX):
            continue
        if "linkage" not in operation.attributes or operation.attributes["linkage"] == external:
            operation.attributes["linkage"] = internal
