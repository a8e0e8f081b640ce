"""`vector.fma` as `math.fma`: one rounding on every CPU.

`convert-vector-to-llvm` lowers `vector.fma` (the matmul and conv kernels' outer
products) to `llvm.intr.fmuladd`, which LLVM may fuse or not: fused where the
target has FMA instructions (x86-64-v3 and up), a multiply then an add where it
has not (x86-64-v2), so the same program gave different bits on different
CPUs. `math.fma` becomes `llvm.intr.fma`: always fused (a libm `fma` call per
element where there is no instruction: slow, but the same result). Imports
`passes.walk`.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import math

from .walk import ops_named


def exact_fma(module_op: Any, pass_: Any) -> None:
    """Replace every vector.fma under `module_op` with math.fma."""
    for op in ops_named(module_op, "vector.fma"):
        with ir.InsertionPoint(op), op.location:
            fused = math.fma(*op.operands)
        op.results[0].replace_all_uses_with(fused)
        op.erase()
