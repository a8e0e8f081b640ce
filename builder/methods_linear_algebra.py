"""Hand-written XlaBuilder methods of the linear_algebra family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_linear_algebra import TRANSPOSE_KINDS
from .builder import XlaBuilder
from .xla_op import XlaOp


def _flag(op: str, name: str, value: Any) -> bool:
    """A Python or numpy bool; anything else (an int, None) is a likely argument mix-up."""
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(op, [], f"{name} must be a bool, got {value!r}")
    return bool(value)


def _transpose_kind(value: Any) -> str:
    """"NO_TRANSPOSE"/"TRANSPOSE"/"ADJOINT" in any case, or an enum member with that `.name`
    (XLA's TriangularSolveOptions.Transpose)."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in TRANSPOSE_KINDS:
        return name.upper()
    raise ShapeError("triangular_solve", [], f"transpose_a must be one of {TRANSPOSE_KINDS}, "
                     f"got {value!r}")


def cholesky(self: XlaBuilder, a: XlaOp, lower: bool = True) -> XlaOp:
    """Cholesky factor of each matrix of `a` (spec#cholesky): lower `l` with a = l l^H, or
    upper `u` with a = u^H u. Only that triangle of `a` is read; the other triangle of the
    result is zero; a matrix that is not positive definite gives all NaN (XLA's expander)."""
    a = self._check_operand("cholesky", a)
    return self._emit("cholesky", [a], {"lower": _flag("cholesky", "lower", lower)})


def triangular_solve(self: XlaBuilder, a: XlaOp, b: XlaOp, left_side: bool, lower: bool,
                     unit_diagonal: bool, transpose_a: Any) -> XlaOp:
    """Solve op(a) x = b (left_side) or x op(a) = b for x, a triangular (spec#triangular_solve).

    `transpose_a`: "NO_TRANSPOSE", "TRANSPOSE" or "ADJOINT" (op(a) = a, a^T, a^H).
    """
    a = self._check_operand("triangular_solve", a)
    b = self._check_operand("triangular_solve", b)
    name = "triangular_solve"
    return self._emit(name, [a, b], {
        "left_side": _flag(name, "left_side", left_side),
        "lower": _flag(name, "lower", lower),
        "unit_diagonal": _flag(name, "unit_diagonal", unit_diagonal),
        "transpose_a": _transpose_kind(transpose_a),
    })


METHODS: dict[str, Callable[..., Any]] = {"cholesky": cholesky, "triangular_solve": triangular_solve}
