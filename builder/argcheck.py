"""Argument kinds of the public XlaBuilder methods, the builder's last line of defence.

A method's annotations say what kind of value each argument is (`XlaOp`,
`Sequence[int]`, `int`, `Shape`...). `checked(name, fn)` wraps a method so that
when its body fails with a Python error (AttributeError on `.shape`, TypeError
from `int()`...) because an argument was of the wrong kind (None, a string, a
float where ints are asked for, an op of another builder), the caller gets a
`ShapeError` naming the method and the argument instead. A failure with every
argument of the right kind is a bug and propagates as it is.
Every public method of XlaBuilder has it applied when its class is created
(`builder.recorder.api_method`). Imports `dialect`.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError, XlaError
from ..dialect.shape import Shape
from .xla_op import XlaOp


def _is_int(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _is_int_list(v: Any) -> bool:
    if isinstance(v, (str, bytes, dict)) or not isinstance(v, Iterable):
        return False
    if isinstance(v, np.ndarray) and v.ndim != 1:
        return False
    return all(_is_int(x) for x in v)


def _is_op(builder: Any, method: str, v: Any) -> bool:
    if not isinstance(v, XlaOp):
        return False
    builder.check_operand(method, v)  # an op of another builder: ShapeError naming it
    return True


def _is_op_list(builder: Any, method: str, v: Any) -> bool:
    if _is_op(builder, method, v):
        return True
    return isinstance(v, (list, tuple)) and all(_is_op(builder, method, x) for x in v)


def _is_padding(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, (list, tuple)) and all(_is_int_list(p) for p in v))


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (numbers.Number, np.generic)) or (isinstance(v, np.ndarray) and v.ndim == 0)


# annotation text -> (what it means, in words; predicate(builder, method, value))
_KINDS: dict[str, tuple[str, Callable[[Any, str, Any], bool]]] = {
    "XlaOp": ("an XlaOp", _is_op),
    "XlaOp | Scalar": ("an XlaOp or a scalar", lambda b, m, v: _is_scalar(v) or _is_op(b, m, v)),
    "XlaOp | None": ("an XlaOp or None", lambda b, m, v: v is None or _is_op(b, m, v)),
    "Sequence[XlaOp]": ("a list of XlaOps", _is_op_list),
    "XlaOp | Sequence[XlaOp]": ("an XlaOp or a list of XlaOps", _is_op_list),
    "Sequence[int]": ("a sequence of ints", lambda b, m, v: _is_int_list(v)),
    "Sequence[int] | None": ("a sequence of ints or None",
                             lambda b, m, v: v is None or _is_int_list(v)),
    "Sequence[int] | Shape": ("a sequence of ints or a Shape",
                              lambda b, m, v: isinstance(v, Shape) or _is_int_list(v)),
    "Sequence[Sequence[int]]": ("a sequence of int sequences",
                                lambda b, m, v: isinstance(v, (list, tuple))
                                and all(_is_int_list(p) for p in v)),
    "int": ("an int", lambda b, m, v: _is_int(v)),
    "int | None": ("an int or None", lambda b, m, v: v is None or _is_int(v)),
    "float": ("a float", lambda b, m, v: isinstance(v, (numbers.Real, np.floating, np.integer))
              and not isinstance(v, (bool, np.bool_))),
    "bool": ("a bool", lambda b, m, v: isinstance(v, (bool, np.bool_))
             or (isinstance(v, (int, np.integer)) and v in (0, 1))),
    "str": ("a string", lambda b, m, v: isinstance(v, str)),
    "str | None": ("a string or None", lambda b, m, v: v is None or isinstance(v, str)),
    "int | str": ("an int or a string", lambda b, m, v: isinstance(v, str) or _is_int(v)),
    "Shape": ("an xm.Shape", lambda b, m, v: isinstance(v, Shape)),
    "Sequence[Any]": ("a list", lambda b, m, v: isinstance(v, (list, tuple))),
    "str | Sequence[tuple[int, int]]": ("a padding string or a list of (low, high) pairs",
                                        lambda b, m, v: _is_padding(v)),
    "str | Sequence[tuple[int, int]] | None": (
        "a padding string, a list of (low, high) pairs or None",
        lambda b, m, v: v is None or _is_padding(v)),
    "Sequence[bool] | None": ("a sequence of bools or None",
                              lambda b, m, v: v is None or (isinstance(v, (list, tuple)) and all(
                                  isinstance(x, (bool, np.bool_, int)) for x in v))),
}


def checked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a method of XlaBuilder) with its arguments' kinds checked first."""
    if getattr(fn, "_xm_checked", False):
        return fn
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    checks = []
    for p in list(signature.parameters.values())[1:]:
        kind = _KINDS.get(str(p.annotation))
        if kind is None:
            continue
        description, ok = kind
        checks.append((p.name, p.default, description, ok))
    if not checks:
        return fn

    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Checked only once the method failed with something other than an XlaError: the
        # methods' own messages stay as they are, and the happy path costs nothing.
        try:
            return fn(self, *args, **kwargs)
        except XlaError:
            raise
        except Exception as e:
            problem = _wrong_kind(self, args, kwargs)
            if problem is None:
                raise
            raise ShapeError(name, [], problem) from e

    def _wrong_kind(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        try:
            values = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            return None  # a wrong call: Python's own error stands
        for pname, default, description, ok in checks:
            if pname not in values:
                continue
            value = values[pname]
            if value is default and default is not inspect.Parameter.empty:
                continue
            try:
                fine = ok(self, name, value)
            except ShapeError as e:  # an op of another builder
                return e.rule
            if not fine:
                return f"{pname} must be {description}, got {_describe(value)}"
        return None

    method._xm_checked = True  # type: ignore[attr-defined]
    return method


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"
