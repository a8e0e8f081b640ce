"""IndexingMethods: the XlaBuilder methods of the indexing family. Imports `dialect` and
`builder.recorder`.

`gather` and `scatter` take their dimension numbers as the records of
`dialect.ops_indexing` (exported as `xm.GatherDimensionNumbers` /
`xm.ScatterDimensionNumbers`) or as a mapping of their fields; each field
becomes an attribute of its own. scatter is variadic like reduce: a single
XlaOp gives a single result, a list a tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dialect.ops_indexing import (
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
    check_scatter_operands,
)
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


class IndexingMethods(Recorder):
    """gather and scatter."""

    def gather(self, operand: XlaOp, start_indices: XlaOp,
               dimension_numbers: GatherDimensionNumbers | dict[str, Any],
               slice_sizes: Sequence[int], indices_are_sorted: bool = False) -> XlaOp:
        """Slices of `operand` of `slice_sizes` at the start indices in `start_indices`, each
        start clamped so that its slice fits (spec#gather)."""
        operand = self.check_operand("gather", operand)
        start_indices = self.check_operand("gather", start_indices)
        dnums = GatherDimensionNumbers.of(dimension_numbers)
        return self.emit("gather", [operand, start_indices], {
            **dnums.as_attrs(), "slice_sizes": args.ints("gather", slice_sizes, "slice_sizes"),
            "indices_are_sorted": args.flag("gather", indices_are_sorted, "indices_are_sorted")})

    def scatter(self, operands: XlaOp | Sequence[XlaOp], scatter_indices: XlaOp,
                updates: XlaOp | Sequence[XlaOp], update_computation: Any,
                dimension_numbers: ScatterDimensionNumbers | dict[str, Any],
                indices_are_sorted: bool = False, unique_indices: bool = False) -> XlaOp:
        """`operands` with the windows of `updates` combined in at `scatter_indices` through
        `update_computation(current..., update...)`; a window that does not fit entirely is
        skipped (spec#scatter, XLA's rule)."""
        name = "scatter"
        ops, as_tuple = args.as_list(operands)
        ups, _ = args.as_list(updates)
        ops = [self.check_operand(name, o) for o in ops]
        ups = [self.check_operand(name, u) for u in ups]
        indices = self.check_operand(name, scatter_indices)
        # Checked before the computation is traced with the operands' element types.
        check_scatter_operands([o.shape for o in ops], indices.shape, [u.shape for u in ups])
        dnums = ScatterDimensionNumbers.of(dimension_numbers)
        scalars = [Shape.array(o.shape.element_type, ()) for o in ops]
        comp = self.trace(name, update_computation, scalars + scalars, role="update_computation",
                          operands=ops + [indices] + ups)
        op = self.emit(name, [ops, indices, ups], {
            **dnums.as_attrs(),
            "indices_are_sorted": args.flag(name, indices_are_sorted, "indices_are_sorted"),
            "unique_indices": args.flag(name, unique_indices, "unique_indices"),
            "update_computation": comp})
        return self.results(op, as_tuple)
