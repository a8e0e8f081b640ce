"""XlaOp: a node of the computation graph a builder records, with operator overloads.

An XlaOp is pure Python (its shape was inferred when it was built); MLIR is
created only when the computation is built. Imports `dialect`.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dialect.registry import OpDef
from ..dialect.shape import Shape

if TYPE_CHECKING:
    from .builder import XlaBuilder

# What a builder method taking `XlaOp | Scalar` also accepts: it becomes a constant (of the
# other operand's element type where there is one, as for the operators).
Scalar = bool | int | float | complex | np.generic

# Unique across builders: emission and graph output key ops by it.
_UIDS = itertools.count()


class XlaOp:
    """One value of a computation: a parameter, or the (only or `index`-th) result of an op."""

    __slots__ = ("builder", "shape", "opdef", "operands", "attrs", "parameter_number",
                 "parameter_name", "location", "source", "index", "uid")

    def __init__(self, builder: XlaBuilder, shape: Shape, *, opdef: OpDef | None = None,
                 operands: tuple = (), attrs: dict[str, Any] | None = None,
                 parameter_number: int | None = None, parameter_name: str = "",
                 location: tuple[str, int] | None = None, source: XlaOp | None = None,
                 index: int | None = None) -> None:
        self.builder = builder
        self.shape = shape
        self.opdef = opdef
        self.operands = operands
        self.attrs = attrs or {}
        self.parameter_number = parameter_number
        self.parameter_name = parameter_name
        self.location = location
        self.source = source  # for a result of a multi-result op: the op
        self.index = index
        self.uid = next(_UIDS)

    def __repr__(self) -> str:
        what = self.opdef.name if self.opdef else f"parameter {self.parameter_number}"
        return f"XlaOp({what}: {self.shape})"

    # Python has no way to make `==` build an op and stay hashable; XLA users call eq().
    __hash__ = object.__hash__
    # numpy scalars and arrays on the left defer to our reflected operators.
    __array_ufunc__ = None

    def _bin(self, method: str, other: Any, reverse: bool = False) -> XlaOp:
        other = self.builder.as_op(other, like=self)
        lhs, rhs = (other, self) if reverse else (self, other)
        return getattr(self.builder, method)(lhs, rhs)

    def __add__(self, o: Any) -> XlaOp:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> XlaOp:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> XlaOp:
        return self._bin("sub", o)

    def __rsub__(self, o: Any) -> XlaOp:
        return self._bin("sub", o, True)

    def __mul__(self, o: Any) -> XlaOp:
        return self._bin("mul", o)

    def __rmul__(self, o: Any) -> XlaOp:
        return self._bin("mul", o, True)

    def __truediv__(self, o: Any) -> XlaOp:
        return self._bin("div", o)

    def __rtruediv__(self, o: Any) -> XlaOp:
        return self._bin("div", o, True)

    def __mod__(self, o: Any) -> XlaOp:
        return self._bin("rem", o)

    def __rmod__(self, o: Any) -> XlaOp:
        return self._bin("rem", o, True)

    def __pow__(self, o: Any) -> XlaOp:
        return self._bin("pow", o)

    def __rpow__(self, o: Any) -> XlaOp:
        return self._bin("pow", o, True)

    def __matmul__(self, o: Any) -> XlaOp:
        return self._bin("dot", o)

    def __rmatmul__(self, o: Any) -> XlaOp:
        return self._bin("dot", o, True)

    def __and__(self, o: Any) -> XlaOp:
        return self._bin("and_", o)

    def __rand__(self, o: Any) -> XlaOp:
        return self._bin("and_", o, True)

    def __or__(self, o: Any) -> XlaOp:
        return self._bin("or_", o)

    def __ror__(self, o: Any) -> XlaOp:
        return self._bin("or_", o, True)

    def __xor__(self, o: Any) -> XlaOp:
        return self._bin("xor", o)

    def __rxor__(self, o: Any) -> XlaOp:
        return self._bin("xor", o, True)

    def __lshift__(self, o: Any) -> XlaOp:
        return self._bin("shift_left", o)

    def __rlshift__(self, o: Any) -> XlaOp:
        return self._bin("shift_left", o, True)

    def _right_shift(self) -> str:
        signed = self.shape.is_array() and self.shape.element_type.is_signed_int
        return "shift_right_arithmetic" if signed else "shift_right_logical"

    def __rshift__(self, o: Any) -> XlaOp:
        return self._bin(self._right_shift(), o)

    def __rrshift__(self, o: Any) -> XlaOp:
        return self._bin(self._right_shift(), o, True)

    def __neg__(self) -> XlaOp:
        return self.builder.neg(self)

    def __invert__(self) -> XlaOp:
        return self.builder.not_(self)

    def __abs__(self) -> XlaOp:
        return self.builder.abs(self)

    def __getitem__(self, index: Any) -> XlaOp:
        return self.builder.index(self, index)

    def __bool__(self) -> bool:
        raise TypeError("an XlaOp has no truth value; use the builder's select/compare ops")

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("an XlaOp is a symbolic value; compile and run the computation")
