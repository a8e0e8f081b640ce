"""Sequences of ints given by users (dimensions, permutations, sizes) as tuples of Python ints."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import ShapeError


def int_list(values: Any, what: str, op: str) -> tuple[int, ...]:
    """Converts an iterable of ints (Python or numpy, not bool) to a tuple of Python ints."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
    try:
        items = list(values)
    except TypeError:  # e.g. a 0-d numpy array
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}") from None
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)):
            raise ShapeError(op, [], f"{what} must be ints, got a bool in {values!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise ShapeError(op, [], f"{what} must be ints, got {v!r}") from None
    return tuple(out)
