"""The ops under a root that a pass rewrites, collected before it changes any (rewriting
while MLIR walks invalidates the walk). Imports nothing of ours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir


def ops_where(root: Any, keep: Callable[[Any], bool]) -> list[Any]:
    """Every op under `root` (itself included) for which `keep(op)` holds, in walk order."""
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if keep(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def ops_named(root: Any, *names: str) -> list[Any]:
    """Every op under `root` whose name is one of `names`, in walk order."""
    return ops_where(root, lambda op: op.name in names)
