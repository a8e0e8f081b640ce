"""Hand-written XlaBuilder methods of the indexing family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).

`gather` and `scatter` take their dimension numbers as the records of
`dialect.ops_indexing` (exported as `xm.GatherDimensionNumbers` /
`xm.ScatterDimensionNumbers`) or as a mapping of their fields; each field
becomes an attribute of its own. scatter is variadic like reduce: a single
XlaOp gives a single result, a list a tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_indexing import (
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
    check_scatter_operands,
)
from ..dialect.shape import Shape
from .builder import XlaBuilder
from .methods_reduce import _as_list, _ints, _results, _traced
from .xla_op import XlaOp

METHODS: dict[str, Callable[..., Any]] = {}


def _flag(op: str, value: Any, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(op, [], f"{what} must be a bool, got {value!r}")
    return bool(value)


def gather(self: XlaBuilder, operand: XlaOp, start_indices: XlaOp,
           dimension_numbers: GatherDimensionNumbers | dict[str, Any],
           slice_sizes: Sequence[int], indices_are_sorted: bool = False) -> XlaOp:
    """Slices of `operand` of `slice_sizes` at the start indices in `start_indices`, each
    start clamped so that its slice fits (spec#gather)."""
    operand = self._check_operand("gather", operand)
    start_indices = self._check_operand("gather", start_indices)
    dnums = GatherDimensionNumbers.of(dimension_numbers)
    return self._emit("gather", [operand, start_indices], {
        **dnums.as_attrs(), "slice_sizes": _ints("gather", slice_sizes, "slice_sizes"),
        "indices_are_sorted": _flag("gather", indices_are_sorted, "indices_are_sorted")})


def scatter(self: XlaBuilder, operands: XlaOp | Sequence[XlaOp], scatter_indices: XlaOp,
            updates: XlaOp | Sequence[XlaOp], update_computation: Any,
            dimension_numbers: ScatterDimensionNumbers | dict[str, Any],
            indices_are_sorted: bool = False, unique_indices: bool = False) -> XlaOp:
    """`operands` with the windows of `updates` combined in at `scatter_indices` through
    `update_computation(current..., update...)`; a window that does not fit entirely is
    skipped (spec#scatter, XLA's rule)."""
    name = "scatter"
    ops, as_tuple = _as_list(operands)
    ups, _ = _as_list(updates)
    ops = [self._check_operand(name, o) for o in ops]
    ups = [self._check_operand(name, u) for u in ups]
    indices = self._check_operand(name, scatter_indices)
    # Checked before the computation is traced with the operands' element types.
    check_scatter_operands([o.shape for o in ops], indices.shape, [u.shape for u in ups])
    dnums = ScatterDimensionNumbers.of(dimension_numbers)
    scalars = [Shape.array(o.shape.element_type, ()) for o in ops]
    comp = _traced(self, name, update_computation, scalars + scalars, role="update_computation")
    op = self._emit(name, [ops, indices, ups], {
        **dnums.as_attrs(),
        "indices_are_sorted": _flag(name, indices_are_sorted, "indices_are_sorted"),
        "unique_indices": _flag(name, unique_indices, "unique_indices"),
        "update_computation": comp})
    return _results(self, op, as_tuple)


METHODS["gather"] = gather
METHODS["scatter"] = scatter
