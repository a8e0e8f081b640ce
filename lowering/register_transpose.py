"""The t x t transpose of t vectors of t elements in registers, by log2(t) rounds of
two-vector shuffles (t log2 t shuffles; LLVM lowers each to one or two instructions).
Shared by transposes (ops/transpose_tiles.py), matrix-vector rows (ops/lane_rows.py)
and lane folds (passes/lane_folds.py). Imports nothing of ours."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import vector


def transposed(rows: list[ir.Value], pairs_first: bool) -> list[ir.Value]:
    """Round b swaps, in every pair of rows (i, i + b), the off-diagonal b x b blocks.
    The rounds commute: `pairs_first` runs b = 1, 2, 4, ... (LLVM compiles the lane
    folds of an RNN step's two products 10-30 ms faster so), else b = t/2, ..., 1."""
    t = len(rows)
    steps = []
    b = 1
    while b < t:
        steps.append(b)
        b *= 2
    for b in (steps if pairs_first else reversed(steps)):
        low = [g * 2 * b + k + half for g in range(t // (2 * b)) for half in (0, t) for k in range(b)]
        high = [m + b for m in low]
        new = list(rows)
        for i in range(t):
            if (i // b) % 2 == 0:
                new[i] = vector.shuffle(rows[i], rows[i + b], low)
                new[i + b] = vector.shuffle(rows[i], rows[i + b], high)
        rows = new
    return rows
