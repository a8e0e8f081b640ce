"""What a linalg.generic's attributes say, read the same way by every pass that matches
generics. Imports nothing of ours."""

from __future__ import annotations

from typing import Any

from mlir import ir


def iterator_kinds(op: Any) -> list[str]:
    """"parallel" or "reduction" per loop of the generic `op`."""
    return ["reduction" if "reduction" in str(a) else "parallel"
            for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def all_parallel(op: Any) -> bool:
    """Whether every loop of the generic `op` is parallel."""
    return all(k == "parallel" for k in iterator_kinds(op))


def indexing_maps(op: Any) -> list[ir.AffineMap]:
    """The generic `op`'s indexing maps, inputs first, then outputs."""
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
