"""The Python-defined pass that lowers the xhlo dialect: entry boundary, then patterns.

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import func
from mlir.rewrite import GreedyRewriteConfig, apply_patterns_and_fold_greedily

from ..dialect.registry import DIALECT, ENTRY
from . import ops  # noqa: F401  (importing the package registers every op's lowering)
from .patterns.boundary import DYNAMIC_STRIDES_ATTR, rewrite_entry
from .patterns.computations import ComputationLibrary, set_current_library
from .patterns.framework import pattern_set


def _entry(module_op: ir.Operation) -> Any:
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY:
            return op
    raise ValueError(f"the module has no function @{ENTRY}")


def _remaining_ops(module_op: ir.Operation) -> list[str]:
    found: list[str] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name.startswith(DIALECT + "."):
            found.append(f"{op.name} at {op.location}")
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found


def lower_xhlo(op: Any, pass_: Any) -> None:
    """Rewrite `main` to the destination-passing boundary and lower every xhlo op."""
    entry = _entry(op)
    dynamic = DYNAMIC_STRIDES_ATTR in op.attributes
    if dynamic:
        del op.attributes[DYNAMIC_STRIDES_ATTR]
    rewrite_entry(func.FuncOp(entry.operation) if not isinstance(entry, func.FuncOp) else entry,
                  dynamic)
    config = GreedyRewriteConfig()
    config.max_iterations = 64
    # Sub-computations are emitted from the library where they are used (as scalar
    # code, or copied back for tensor-level uses), so the originals go. The library copies
    # them as text: moved to a module of their own first, `main` (with its constants,
    # possibly megabytes) is not printed and parsed again for nothing.
    with op.context, ir.Location.unknown():
        computations = ir.Module.create()
    for f in list(op.regions[0].blocks[0].operations):
        if f.operation.name == "func.func" and f.operation != entry.operation:
            computations.body.append(f.operation)
    set_current_library(ComputationLibrary(computations.operation))
    del computations  # the library holds its own copy
    try:
        apply_patterns_and_fold_greedily(op, pattern_set(op.context), config)
    finally:
        set_current_library(None)
    left = _remaining_ops(op)
    if left:
        raise RuntimeError("ops left unlowered: " + "; ".join(left[:5]))
