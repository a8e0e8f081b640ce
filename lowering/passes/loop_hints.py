"""Loop hints for LLVM: no unrolling of loops around our vectorized loop nests.

Our schedules already unroll what pays in the code they vectorize (register tiles,
vector widths). LLVM -O3 then fully unrolled small outer loops with constant trip counts
around those kernels (the packing loops, the loops around the matmul micro-kernel),
copying every loop inside them: the matmul 512 body doubled in size and its JIT time
with it (loop strength reduction and instruction selection over the copies).
`no_outer_unrolling` marks every scf.for that contains another loop and vector ops with
`llvm.loop.unroll.disable` (convert-scf-to-cf moves the attribute to the loop's latch
branch). Innermost loops stay LLVM's to unroll (measured: disabling those too cost
softmax ~5% of its run time), and so do scalar loop nests (the affine path's: LLVM
vectorizes and unrolls those itself; marking a 2x2 max-pool's window loops made it
slower). A hint only: it never changes what a program computes. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_LOOPS = ("scf.for", "scf.while", "scf.parallel", "affine.for")
_NO_UNROLL = "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>"


def _around_vector_loops(loop: Any) -> bool:
    """Whether `loop` contains another loop and vector ops."""
    found = {"loop": False, "vector": False}

    def visit(op: Any) -> ir.WalkResult:
        if op != loop and op.name in _LOOPS:
            found["loop"] = True
        elif op.name.startswith("vector."):
            found["vector"] = True
        return ir.WalkResult.INTERRUPT if all(found.values()) else ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return all(found.values())


def no_outer_unrolling(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    hint = ir.Attribute.parse(_NO_UNROLL)
    outer: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "scf.for" and _around_vector_loops(op):
            outer.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for loop in outer:
        loop.attributes["loop_annotation"] = hint
