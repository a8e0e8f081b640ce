"""Normalisers of the builder methods' arguments: the only place user input becomes Python
ints, int tuples, bools and explicit padding pairs.

The normalisers of one argument take `(op, value, what)`: the method's and the
argument's names are only used in the ShapeError for a value of the wrong kind, e.g.
`ints("transpose", [1, "a"], "permutation")`. numpy integers are accepted wherever an
int is; bools never are (an int slot given True is most likely an argument mix-up).
`padding` turns "SAME"/"VALID" into (low, high) pairs as XLA's MakePadding does,
so the dialect only ever sees explicit pairs. Imports `dialect`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_reduce import dilated
from ..dialect.shape import Shape
from .xla_op import XlaOp


def integer(op: str, value: Any, what: str) -> int:
    """A Python int from an int or a numpy integer."""
    if isinstance(value, (bool, np.bool_)):
        raise ShapeError(op, [], f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError(op, [], f"{what} must be an int, got {value!r}") from None


def ints(op: str, values: Any, what: str) -> tuple[int, ...]:
    """A tuple of Python ints from a list, tuple, range or 1-D array of ints."""
    if isinstance(values, (str, bytes, dict, Shape, XlaOp)) or not isinstance(values, Iterable):
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
    try:
        items = list(values)
    except TypeError:  # a 0-d numpy array
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}") from None
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)):
            raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}") from None
    return tuple(out)


def ints_or_default(op: str, values: Any, what: str, rank: int, default: int) -> tuple[int, ...]:
    """`ints`, or `rank` copies of `default` for None (window strides, dilations)."""
    return (default,) * rank if values is None else ints(op, values, what)


def flag(op: str, value: Any, what: str) -> bool:
    """A Python or numpy bool; an int or None in a flag slot is a likely argument mix-up."""
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(op, [], f"{what} must be a bool, got {value!r}")
    return bool(value)


def as_list(values: Any) -> tuple[list[Any], bool]:
    """(the values as a list, whether they were given as a list/tuple): the variadic ops'
    rule, a single XlaOp gives a single result and a list a tuple."""
    if isinstance(values, (list, tuple)):
        return list(values), True
    return [values], False


def padding(op: str, value: Any, what: str, base: Sequence[int], window: Sequence[int],
            strides: Sequence[int], base_dilations: Sequence[int],
            window_dilations: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs from pairs, "VALID" (no padding, also for None) or "SAME"
    (`make_padding`). Bad sizes, strides or dilations give no padding here: the op's
    shape rule reports them with the operand shapes."""
    if value is None:
        value = "VALID"
    if isinstance(value, str):
        kind = value.upper()
        if kind not in ("SAME", "VALID"):
            raise ShapeError(op, [], f"{what} must be 'SAME', 'VALID' or (low, high) pairs, "
                             f"got {value!r}")
        n = len(window)
        if kind == "VALID" or any(len(x) != n for x in (base, strides, base_dilations,
                                                         window_dilations)):
            return ((0, 0),) * n
        return make_padding(base, window, strides, base_dilations, window_dilations)
    if isinstance(value, (Sequence, np.ndarray)):
        pairs = []
        for entry in value:
            pair = ints(op, entry, f"each {what} entry")
            if len(pair) != 2:
                raise ShapeError(op, [], f"{what} must be a list of (low, high) pairs, got {value!r}")
            pairs.append((pair[0], pair[1]))
        return tuple(pairs)
    raise ShapeError(op, [], f"{what} must be 'SAME', 'VALID' or (low, high) pairs, got {value!r}")


def make_padding(base: Sequence[int], window: Sequence[int], strides: Sequence[int],
                 base_dilations: Sequence[int], window_dilations: Sequence[int],
                 ) -> tuple[tuple[int, int], ...]:
    """XLA's MakePadding for "SAME": the output has ceil(dilated base / stride) elements,
    the padding that needs is split with the odd element on the high side (as
    jax.lax.padtype_to_pads does)."""
    pairs = []
    for size, w, s, bd, wd in zip(base, window, strides, base_dilations, window_dilations):
        if s < 1 or bd < 1 or wd < 1:
            pairs.append((0, 0))
            continue
        extent = dilated(size, bd)
        out = -(-extent // s)
        needed = max(0, (out - 1) * s + dilated(w, wd) - extent)
        pairs.append((needed // 2, needed - needed // 2))
    return tuple(pairs)


def static_shape(op: str, shape: Shape, what: str = "shape",
                 hint: str = "build it with the bounds as sizes, then set_dimension_size") -> Shape:
    """`shape` when no dimension of it (or of a tuple leaf) is dynamic. A dynamic value
    exists only as a padded array with a runtime size beside it (builder/methods_dynamic.py),
    so an op making values of a given shape would otherwise drop the flags silently."""
    if shape.is_dynamic():
        raise ShapeError(op, [], f"{op} does not accept a dynamic shape ({what} {shape}); {hint}")
    return shape
