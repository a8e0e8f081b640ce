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
slower). One exception: a long innermost vector loop with a small body (a row's vector
sum: 64 loads and adds) is unrolled PARTIAL_UNROLL times, never fully. -O3 unrolled
it whole (its threshold is twice -O2's), and LoopLoadElimination then spent 32 ms
on the loop around the 64 copies: layer norm's JIT 94 -> 55 ms with the hint, its run
time unchanged (the adds form one dependent chain: unrolled or not, the same speed).
A hint only: it never changes what a program computes. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

_LOOPS = ("scf.for", "scf.while", "scf.parallel", "affine.for")
_NO_UNROLL = "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>"
# Innermost vector loops of LONG_TRIPS to MAX_TRIPS iterations are unrolled PARTIAL_UNROLL
# times, never fully (see no_outer_unrolling). Longer loops are never unrolled whole by
# -O3 (its threshold is 300 instructions): they stay LLVM's (axpy's is not unrolled).
LONG_TRIPS = 32
MAX_TRIPS = 512
SMALL_BODY = 16
PARTIAL_UNROLL = 4


def _constant_index(value: Any) -> int | None:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


def _trip_count(loop: Any) -> int | None:
    """The constant trip count of an scf.for, None when a bound or the step is not constant."""
    lower, upper, step = (_constant_index(v) for v in list(loop.operands)[:3])
    if lower is None or upper is None or not step:
        return None
    return max(0, -(-(upper - lower) // step))


def _body_ops(loop: Any) -> int:
    """The number of ops in an innermost loop's body, its terminator not counted."""
    return len(list(loop.regions[0].blocks[0].operations)) - 1


def _vector_loop_kind(loop: Any) -> str | None:
    """"outer" when `loop` contains another loop and vector ops, "inner" when it contains
    vector ops and no loop, None without vector ops."""
    found = {"loop": False, "vector": False}

    def visit(op: Any) -> ir.WalkResult:
        if op != loop and op.name in _LOOPS:
            found["loop"] = True
        elif op.name.startswith("vector."):
            found["vector"] = True
        return ir.WalkResult.INTERRUPT if all(found.values()) else ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not found["vector"]:
        return None
    return "outer" if found["loop"] else "inner"


def no_outer_unrolling(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    hint = ir.Attribute.parse(_NO_UNROLL)
    partial = ir.Attribute.parse(
        f"#llvm.loop_annotation<unroll = #llvm.loop_unroll<count = {PARTIAL_UNROLL} : i32>>")
    marks: list[tuple[Any, Any]] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "scf.for":
            kind = _vector_loop_kind(op)
            if kind == "outer":
                marks.append((op, hint))
            elif (kind == "inner" and PARTIAL_UNROLL
                  and LONG_TRIPS <= (_trip_count(op) or 0) <= MAX_TRIPS
                  and _body_ops(op) <= SMALL_BODY):
                marks.append((op, partial))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for loop, mark in marks:
        loop.attributes["loop_annotation"] = mark
