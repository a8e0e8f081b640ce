"""The MLIR context every xhlo module lives in.

xhlo ops are unregistered (generic) ops: the context allows unregistered
dialects, and `!xhlo.token` is an opaque type. MLIR's verifier therefore knows
nothing of them; `dialect.verify` checks every xhlo op against the registry
(operand groups, attributes, result types by the shape rule). An IRDL
definition was tried first: IRDL binds a constraint to one type per op
instance, so a variadic list of differently typed values needed one variadic
segment per run of equal types (a fixed maximum of runs, a long
`operandSegmentSizes` on every op) and loading it cost every new context.
Imports nothing of ours.
"""

from __future__ import annotations

from mlir import ir


def new_context() -> ir.Context:
    """A fresh MLIR context with every upstream dialect, where xhlo ops parse and build."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx
