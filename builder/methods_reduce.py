"""Hand-written XlaBuilder methods of the reduce family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).

reduce and reduce_window are variadic: a single XlaOp gives a single result,
a list (of any length) gives a tuple result (API.md). The dialect ops always
have one MLIR result per operand; the builder hands out those results as
XlaOps with `source`/`index`, grouped in an xhlo.tuple for the list form.
Padding strings ("SAME"/"VALID") become explicit (low, high) pairs here, as
XLA's MakePadding does, so the dialect only ever sees pairs.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_reduce import check_select_and_scatter_operands, check_variadic, dilated
from ..dialect.shape import Shape
from .builder import XlaBuilder
from .xla_op import XlaOp

METHODS: dict[str, Callable[..., Any]] = {}


# -- argument normalisation ----------------------------------------------------------------------

def _ints(op: str, values: Any, what: str) -> tuple[int, ...]:
    """A list/tuple/array of ints as a tuple of Python ints; anything else is a ShapeError."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
    result = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
        result.append(int(v))
    return tuple(result)


def _optional_ints(op: str, values: Any, what: str, rank: int, default: int) -> tuple[int, ...]:
    return (default,) * rank if values is None else _ints(op, values, what)


def _as_list(values: Any) -> tuple[list[Any], bool]:
    """(the values as a list, whether they were given as a list/tuple)."""
    if isinstance(values, (list, tuple)):
        return list(values), True
    return [values], False


def _init_op(b: XlaBuilder, op: str, value: Any, like: Any) -> XlaOp:
    """An init value as an XlaOp: a Python scalar takes the element type of its operand
    (like a scalar operand of `+`); a numpy scalar keeps its own dtype."""
    if isinstance(value, XlaOp):
        return b._check_operand(op, value)
    if (isinstance(value, (bool, int, float, complex)) and isinstance(like, XlaOp)
            and like.shape.is_array()):
        return b.constant(np.asarray(value).astype(like.shape.dtype))
    if isinstance(value, (np.generic, np.ndarray, bool, int, float, complex)):
        return b.constant(value)
    raise ShapeError(op, [], f"an init value must be an XlaOp or a scalar, got {type(value).__name__}")


def _variadic_args(b: XlaBuilder, op: str, operands: Any, init_values: Any,
                   ) -> tuple[list[XlaOp], list[XlaOp], bool]:
    """Operands and init values as lists of XlaOps, checked (counts, scalar inits of the
    operands' element types) before the computation is traced with their types."""
    ops, as_tuple = _as_list(operands)
    ops = [b._check_operand(op, o) for o in ops]
    inits, _ = _as_list(init_values)
    inits = [_init_op(b, op, v, ops[i] if i < len(ops) else None) for i, v in enumerate(inits)]
    check_variadic(op, [o.shape for o in ops], [i.shape for i in inits])
    return ops, inits, as_tuple


def _traced(b: XlaBuilder, op: str, computation: Any, params: list[Shape],
            role: str = "computation") -> Any:
    """The sub-computation for `params`; a callable that cannot take that many
    parameters is a ShapeError (naming the arity), not a TypeError from the call."""
    if callable(computation) and not hasattr(computation, "program_shape"):
        try:
            inspect.signature(computation).bind(*params)
        except TypeError:
            raise ShapeError(op, params, f"the {role} must take {len(params)} parameters "
                             f"({', '.join(map(str, params))})") from None
        except ValueError:
            pass  # no introspectable signature (a builtin): let the call decide
    return b._subcomputation(op, computation, params, role=role)


def _reducer_params(ops: list[XlaOp], inits: list[XlaOp]) -> list[Shape]:
    """Parameter shapes of a reducer: the accumulators (init types), then the elements."""
    return ([Shape.array(i.shape.element_type, ()) for i in inits]
            + [Shape.array(o.shape.element_type, ()) for o in ops])


def _results(b: XlaBuilder, op: XlaOp, as_tuple: bool) -> XlaOp:
    """The multi-result op's results as XlaOps: one, or a tuple of all of them."""
    outs = [XlaOp(b, s, source=op, index=i, location=op.location)
            for i, s in enumerate(op.shape.tuple_shapes)]
    # Recorded so that build() with no root returns the last result, not the op itself.
    b.ops.extend(outs)
    return b.tuple(outs) if as_tuple else outs[0]


def _padding(op: str, padding: Any, dims: tuple[int, ...], window: tuple[int, ...],
             strides: tuple[int, ...], base_dilations: tuple[int, ...],
             window_dilations: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs; "VALID" is no padding and "SAME" is XLA's MakePadding
    (output size ceil(input / stride), the odd element on the high side) applied to the
    dilated input and window extents, as jax.lax.padtype_to_pads does."""
    if padding is None:
        padding = "VALID"
    if isinstance(padding, str):
        kind = padding.upper()
        if kind not in ("SAME", "VALID"):
            raise ShapeError(op, [], f"padding must be 'SAME', 'VALID' or (low, high) pairs, "
                             f"got {padding!r}")
        rank = len(dims)
        if kind == "VALID" or any(len(x) != rank for x in (window, strides, base_dilations,
                                                            window_dilations)):
            return ((0, 0),) * len(window)  # a rank mismatch is reported by the shape rule
        pairs = []
        for n, w, s, bd, wd in zip(dims, window, strides, base_dilations, window_dilations):
            if s <= 0 or bd < 1 or wd < 1:
                pairs.append((0, 0))  # the shape rule reports the bad value
                continue
            extent = dilated(n, bd)
            needed = max(0, (math.ceil(extent / s) - 1) * s + dilated(w, wd) - extent)
            pairs.append((needed // 2, needed - needed // 2))
        return tuple(pairs)
    if isinstance(padding, (Sequence, np.ndarray)):
        pairs = []
        for pair in padding:
            p = _ints(op, pair, "each padding entry")
            if len(p) != 2:
                raise ShapeError(op, [], f"padding must be a list of (low, high) pairs, got {padding!r}")
            pairs.append((p[0], p[1]))
        return tuple(pairs)
    raise ShapeError(op, [], f"padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")


# -- the methods ---------------------------------------------------------------------------------

def reduce(self: XlaBuilder, operands: XlaOp | Sequence[XlaOp], init_values: Any,
           computation: Any, dimensions_to_reduce: Sequence[int]) -> XlaOp:
    """Reduce N same-shaped arrays over `dimensions_to_reduce` with `computation`
    `(acc_0..acc_{N-1}, x_0..x_{N-1}) -> (acc_0..acc_{N-1})` (spec#reduce)."""
    ops, inits, as_tuple = _variadic_args(self, "reduce", operands, init_values)
    dims = _ints("reduce", dimensions_to_reduce, "dimensions_to_reduce")
    comp = _traced(self, "reduce", computation, _reducer_params(ops, inits))
    op = self._emit("reduce", [ops, inits], {"dimensions": dims, "computation": comp})
    return _results(self, op, as_tuple)


def reduce_window(self: XlaBuilder, operands: XlaOp | Sequence[XlaOp], init_values: Any,
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
    window = _ints(name, window_dimensions, "window_dimensions")
    rank = len(window)
    strides = _optional_ints(name, window_strides, "window_strides", rank, 1)
    base = _optional_ints(name, base_dilations, "base_dilations", rank, 1)
    wdil = _optional_ints(name, window_dilations, "window_dilations", rank, 1)
    pads = _padding(name, padding, ops[0].shape.dimensions, window, strides, base, wdil)
    comp = _traced(self, name, computation, _reducer_params(ops, inits))
    op = self._emit(name, [ops, inits], {
        "window_dimensions": window, "window_strides": strides, "base_dilations": base,
        "window_dilations": wdil, "padding": pads, "computation": comp})
    return _results(self, op, as_tuple)


def select_and_scatter(self: XlaBuilder, operand: XlaOp, select: Any,
                       window_dimensions: Sequence[int], window_strides: Sequence[int] | None,
                       padding: str | Sequence[tuple[int, int]] | None, source: XlaOp,
                       init_value: Any, scatter: Any) -> XlaOp:
    """For every window, the element `select` picks (called with the earlier index first)
    receives its source value through `scatter`; the rest stays `init_value`
    (spec#select_and_scatter)."""
    name = "select_and_scatter"
    operand = self._check_operand(name, operand)
    source = self._check_operand(name, source)
    init = _init_op(self, name, init_value, operand)
    # Checked before the computations are traced with these types.
    check_select_and_scatter_operands(operand.shape, source.shape, init.shape)
    window = _ints(name, window_dimensions, "window_dimensions")
    rank = len(window)
    strides = _optional_ints(name, window_strides, "window_strides", rank, 1)
    ones = (1,) * rank
    pads = _padding(name, padding, operand.shape.dimensions, window, strides, ones, ones)
    t = operand.shape.element_type
    select_comp = _traced(self, name, select, [Shape.array(t, ())] * 2, role="select")
    scatter_comp = _traced(self, name, scatter, [Shape.array(init.shape.element_type, ()),
                                                 Shape.array(source.shape.element_type, ())],
                           role="scatter")
    return self._emit(name, [operand, source, init], {
        "window_dimensions": window, "window_strides": strides, "padding": pads,
        "select": select_comp, "scatter": scatter_comp})


METHODS["reduce"] = reduce
METHODS["reduce_window"] = reduce_window
METHODS["select_and_scatter"] = select_and_scatter
