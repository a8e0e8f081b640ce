"""SortMethods: the XlaBuilder methods of the sort family. Imports `dialect` and
`builder.recorder`.

- `sort` is variadic like reduce (a single XlaOp gives a single result, a list
  a tuple). Without a comparator it sorts ascending by the first operand in
  XLA's total order (`compare LT, TOTALORDER`: -inf < ... < -0.0 < +0.0 < ...
  < +inf), except that every NaN, whatever its sign bit, counts as the
  largest value, so NaNs go last as the API promises (XLA's total order puts
  a negative NaN first). The default comparator is an ordinary traced
  computation, visible in the IR.
- `top_k` is sugar: a stable sort of (operand, iota) along the last
  dimension, then a slice of the first k. The comparator only looks at the
  values, so stability puts equal values in index order (ties toward the
  lower index). `largest=False` gives the k smallest. Both orders use the
  default comparator's NaN rule: NaNs are the largest values. A `comparator`
  (seed 004's form, SEMANTICS D14: `comparator(a, b)` true when a goes first,
  strict `>` for the usual top k) replaces `largest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType
from ..dialect.errors import ShapeError
from ..dialect.ops_sort import check_sort_operands
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp

# -- the default order ---------------------------------------------------------------------------

def _nan_last(x: XlaOp) -> XlaOp:
    """`x` with every NaN replaced by +NaN, the largest value of the total order."""
    b = x.builder
    nan = b.constant(np.array(np.nan, dtype=x.shape.dtype))
    return b.select(b.ne(x, x), nan, x)


def total_less(x: XlaOp, y: XlaOp) -> XlaOp:
    """x < y in the default sort order of x's element type (see the module doc):
    floats in total order with NaNs last, complex numbers by (real, imag) in that
    order, integers and pred by value."""
    b = x.builder
    t = x.shape.element_type
    if t.is_floating:
        return b.compare(_nan_last(x), _nan_last(y), "LT", "TOTALORDER")
    if t.is_complex:
        xr, yr = _nan_last(b.real(x)), _nan_last(b.real(y))
        xi, yi = _nan_last(b.imag(x)), _nan_last(b.imag(y))
        return b.or_(b.compare(xr, yr, "LT", "TOTALORDER"),
                     b.and_(b.compare(xr, yr, "EQ", "TOTALORDER"),
                            b.compare(xi, yi, "LT", "TOTALORDER")))
    return b.lt(x, y)


def _ascending_by_first(*params: XlaOp) -> XlaOp:
    return total_less(params[0], params[1])


class SortMethods(Recorder):
    """sort and top_k."""

    def sort(self, operands: XlaOp | Sequence[XlaOp], comparator: Any = None,
             dimension: int = -1, is_stable: bool = False) -> XlaOp:
        """Sort N same-shaped arrays together along `dimension` (negative counts from the end).
        `comparator(x0_i, x0_j, x1_i, x1_j, ...)` says whether position i goes before j; none
        means ascending by the first operand, NaNs last (spec#sort)."""
        name = "sort"
        ops, as_tuple = args.as_list(operands)
        ops = [self.check_operand(name, o) for o in ops]
        dim = args.integer(name, dimension, "dimension")
        rank = ops[0].shape.rank if ops and ops[0].shape.is_array() else 0
        if -rank <= dim < 0:
            dim += rank
        # Checked before the comparator is traced with the operands' element types.
        check_sort_operands([o.shape for o in ops], dim)
        params = [Shape.array(o.shape.element_type, ()) for o in ops for _ in (0, 1)]
        comp = self.trace(name, _ascending_by_first if comparator is None else comparator, params,
                          role="comparator", operands=ops)
        op = self.emit(name, [ops], {"dimension": dim,
                                     "is_stable": args.flag(name, is_stable, "is_stable"),
                                     "comparator": comp})
        return self.results(op, as_tuple)

    def top_k(self, operand: XlaOp, k: int, largest: bool = True,
              comparator: Any = None) -> XlaOp:
        """(values, s32 indices) of the k largest (or smallest) entries along the last
        dimension, in order, equal values by ascending index (seeds 001/004 TopK)."""
        name = "top_k"
        operand = self.check_operand(name, operand)
        s = operand.shape
        k = args.integer(name, k, "k")
        largest = args.flag(name, largest, "largest")
        if not s.is_array() or s.rank == 0:
            raise ShapeError(name, [s], "the operand must be an array of rank >= 1")
        n = s.dimensions[-1]
        if not 0 <= k <= n:
            raise ShapeError(name, [s], f"k = {k} is out of range [0, {n}] (the last dimension)")
        scalar = Shape.array(s.element_type, ())
        if comparator is None:
            def first(a: XlaOp, b: XlaOp) -> XlaOp:
                return total_less(b, a) if largest else total_less(a, b)
        else:
            user = self.trace(name, comparator, [scalar, scalar], role="comparator")
            if user.program_shape()[1] != Shape.array(PrimitiveType.PRED, ()):
                raise ShapeError(name, [s], f"the comparator must return pred[], not "
                                 f"{user.program_shape()[1]}")

            def first(a: XlaOp, b: XlaOp) -> XlaOp:
                return a.builder.call(user, [a, b])

        def values_only(a: XlaOp, b: XlaOp, _i: XlaOp, _j: XlaOp) -> XlaOp:
            return first(a, b)

        rank = s.rank
        iota = self.iota(Shape.array(PrimitiveType.S32, s.dimensions), rank - 1)
        ordered = self.sort([operand, iota], values_only, dimension=rank - 1, is_stable=True)
        limits = list(s.dimensions[:-1]) + [k]
        values = self.slice(self.get_tuple_element(ordered, 0), [0] * rank, limits)
        indices = self.slice(self.get_tuple_element(ordered, 1), [0] * rank, limits)
        return self.tuple([values, indices])
