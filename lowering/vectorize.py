"""Vectorization of the affine loop nests, guarded against what the vectorizer cannot do.

`affine-super-vectorize` reports "NYI: non-trivial layout map" as an error yet
succeeds on memrefs with strided layouts (our non-default-layout parameters
and the strided-input variant); the Python bindings abort the process on such
an unconsumed error. So the pass runs only on functions whose affine memory
accesses all use identity layouts. Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

VECTOR_SIZE = 16  # f32 lanes of an AVX-512 register
_AFFINE_ACCESS = ("affine.load", "affine.store", "affine.vector_load", "affine.vector_store")


def _unsafe_access(op: Any) -> bool:
    """A layout the vectorizer rejects, or an access map whose innermost index is not
    a plain loop index: the vectorizer reads `x[2 * i]` and `x[19 - i]` as if they were
    `x[i]`, contiguous and forward."""
    if op.name not in _AFFINE_ACCESS:
        return False
    for value in op.operands:
        text = str(value.type)
        if text.startswith("memref<") and ("strided<" in text or "affine_map" in text):
            return True
        # An index computed by an op (an affine.apply of `2 * i + k`) hides its stride from
        # the map; only loop indices and constants are safe.
        if str(value.type) == "index" and not isinstance(value.owner, ir.Block) \
                and value.owner.operation.name != "arith.constant":
            return True
    if "map" not in op.attributes:
        return False
    results = str(op.attributes["map"]).split("->", 1)[1]
    innermost = results.strip(" ()>").split(",")[-1]
    # Strides, reversals (-d + c) and divisions are all read forward and contiguous.
    return any(token in innermost for token in ("*", "-", "floordiv", "mod", "ceildiv"))


def _has_strided_access(op: Any) -> bool:
    found = [False]

    def visit(inner: Any) -> ir.WalkResult:
        if _unsafe_access(inner):
            found[0] = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found[0]


def super_vectorize(op: Any, pass_: Any) -> None:
    """affine-super-vectorize on every function that it can handle."""
    # Single-iteration loops left by fusion make the vectorizer emit invalid writes.
    pipeline = (f"func.func(affine-loop-normalize{{promote-single-iter=true}},"
                f"affine-super-vectorize{{virtual-vector-size={VECTOR_SIZE}}})")
    for func_op in op.regions[0].blocks[0].operations:
        if func_op.operation.name != "func.func" or _has_strided_access(func_op.operation):
            continue
        PassManager.parse(pipeline, context=op.context).run(func_op.operation)
