"""ReduceMethods: the XlaBuilder methods of the reduce family. Imports `dialect` and
`builder.recorder`.

reduce and reduce_window are variadic: a single XlaOp gives a single result,
a list (of any length) gives a tuple result (API.md). The dialect ops always
have one MLIR result per operand; the builder hands out those results as
XlaOps with `source`/`index`, grouped in an xhlo.tuple for the list form.
Padding strings ("SAME"/"VALID") become explicit (low, high) pairs
(`builder.args.padding`, XLA's MakePadding), so the dialect only ever sees pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_reduce import check_select_and_scatter_operands, check_variadic
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _init_op(b: Recorder, op: str, value: Any, like: Any) -> XlaOp:
    """An init value as an XlaOp: a Python scalar takes the element type of its operand
    (like a scalar operand of `+`); a numpy scalar keeps its own dtype."""
    if isinstance(value, XlaOp):
        return b.check_operand(op, value)
    if (isinstance(value, (bool, int, float, complex)) and isinstance(like, XlaOp)
            and like.shape.is_array()):
        return b.constant(np.asarray(value).astype(like.shape.dtype))
    if isinstance(value, (np.generic, np.ndarray, bool, int, float, complex)):
        return b.constant(value)
    raise ShapeError(op, [], f"an init value must be an XlaOp or a scalar, got {type(value).__name__}")


def _variadic_args(b: Recorder, op: str, operands: Any, init_values: Any,
                   ) -> tuple[list[XlaOp], list[XlaOp], bool]:
    """Operands and init values as lists of XlaOps, checked (counts, scalar inits of the
    operands' element types) before the computation is traced with their types."""
    ops, as_tuple = args.as_list(operands)
    ops = [b.check_operand(op, o) for o in ops]
    inits, _ = args.as_list(init_values)
    inits = [_init_op(b, op, v, ops[i] if i < len(ops) else None) for i, v in enumerate(inits)]
    check_variadic(op, [o.shape for o in ops], [i.shape for i in inits])
    return ops, inits, as_tuple


def _reducer_params(ops: list[XlaOp], inits: list[XlaOp]) -> list[Shape]:
    """Parameter shapes of a reducer: the accumulators (init types), then the elements."""
    return ([Shape.array(i.shape.element_type, ()) for i in inits]
            + [Shape.array(o.shape.element_type, ()) for o in ops])


class ReduceMethods(Recorder):
    """reduce, reduce_window and select_and_scatter."""

    def reduce(self, operands: XlaOp | Sequence[XlaOp], init_values: Any,
               computation: Any, dimensions_to_reduce: Sequence[int]) -> XlaOp:
        """Reduce N same-shaped arrays over `dimensions_to_reduce` with `computation`
        `(acc_0..acc_{N-1}, x_0..x_{N-1}) -> (acc_0..acc_{N-1})` (spec#reduce)."""
        ops, inits, as_tuple = _variadic_args(self, "reduce", operands, init_values)
        dims = args.ints("reduce", dimensions_to_reduce, "dimensions_to_reduce")
        comp = self.trace("reduce", computation, _reducer_params(ops, inits), operands=ops + inits)
        op = self.emit("reduce", [ops, inits], {"dimensions": dims, "computation": comp})
        return self.results(op, as_tuple)

    def reduce_window(self, operands: XlaOp | Sequence[XlaOp], init_values: Any,
                      computation: Any, window_dimensions: Sequence[int],
                      window_strides: Sequence[int] | None = None,
                      base_dilations: Sequence[int] | None = None,
                      window_dilations: Sequence[int] | None = None,
                      padding: str | Sequence[tuple[int, int]] | None = None) -> XlaOp:
        """Reduce every window of N same-shaped arrays (spec#reduce_window); `padding` is
        (low, high) per dimension, "SAME" or "VALID" (the default); padded cells hold the
        init value and base-dilation holes are skipped."""
        name = "reduce_window"
        ops, inits, as_tuple = _variadic_args(self, name, operands, init_values)
        window = args.ints(name, window_dimensions, "window_dimensions")
        rank = len(window)
        strides = args.ints_or_default(name, window_strides, "window_strides", rank, 1)
        base = args.ints_or_default(name, base_dilations, "base_dilations", rank, 1)
        wdil = args.ints_or_default(name, window_dilations, "window_dilations", rank, 1)
        pads = args.padding(name, padding, "padding", ops[0].shape.dimensions, window, strides, base, wdil)
        comp = self.trace(name, computation, _reducer_params(ops, inits), operands=ops + inits)
        op = self.emit(name, [ops, inits], {
            "window_dimensions": window, "window_strides": strides, "base_dilations": base,
            "window_dilations": wdil, "padding": pads, "computation": comp})
        return self.results(op, as_tuple)

    def select_and_scatter(self, operand: XlaOp, select: Any,
                           window_dimensions: Sequence[int], window_strides: Sequence[int] | None,
                           padding: str | Sequence[tuple[int, int]] | None, source: XlaOp,
                           init_value: Any, scatter: Any) -> XlaOp:
        """For every window, the element `select` picks (called with the earlier index first)
        receives its source value through `scatter`; the rest stays `init_value`
        (spec#select_and_scatter)."""
        name = "select_and_scatter"
        operand = self.check_operand(name, operand)
        source = self.check_operand(name, source)
        init = _init_op(self, name, init_value, operand)
        # Checked before the computations are traced with these types.
        check_select_and_scatter_operands(operand.shape, source.shape, init.shape)
        window = args.ints(name, window_dimensions, "window_dimensions")
        rank = len(window)
        strides = args.ints_or_default(name, window_strides, "window_strides", rank, 1)
        ones = (1,) * rank
        pads = args.padding(name, padding, "padding", operand.shape.dimensions, window, strides, ones, ones)
        t = operand.shape.element_type
        select_comp = self.trace(name, select, [Shape.array(t, ())] * 2, role="select")
        scatter_comp = self.trace(name, scatter, [Shape.array(init.shape.element_type, ()),
                                                  Shape.array(source.shape.element_type, ())],
                                  role="scatter")
        return self.emit(name, [operand, source, init], {
            "window_dimensions": window, "window_strides": strides, "padding": pads,
            "select": select_comp, "scatter": scatter_comp})
