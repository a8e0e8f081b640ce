"""Loop hints for LLVM: no unrolling of loops that contain loops.

Our schedules already unroll what pays (register tiles, vector widths). LLVM -O3 then
fully unrolls small outer loops with constant trip counts (packing loops, the loops
around a micro-kernel), which copies every loop inside them: the matmul 512 body doubled
in size and its JIT time with it (loop strength reduction and instruction selection over
the copies). `no_outer_unrolling` marks every scf.for containing another loop with
`llvm.loop.unroll.disable` (convert-scf-to-cf moves the attribute to the loop's latch
branch); innermost loops stay LLVM's to unroll (measured: disabling those too cost
softmax ~5% of its run time). A hint only: it never changes what a program computes.
Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_LOOPS = ("scf.for", "scf.while", "scf.parallel", "affine.for")
_NO_UNROLL = "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>"


def _contains_loop(loop: Any) -> bool:
    found = []

    def visit(op: Any) -> ir.WalkResult:
        if op != loop and op.name in _LOOPS:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


def no_outer_unrolling(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    hint = ir.Attribute.parse(_NO_UNROLL)
    outer: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "scf.for" and _contains_loop(op):
            outer.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for loop in outer:
        loop.attributes["loop_annotation"] = hint
