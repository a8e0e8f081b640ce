"""LinearAlgebraMethods: the XlaBuilder methods of the linear algebra family. Imports
`dialect` and `builder.recorder`.
"""

from __future__ import annotations

from typing import Any

from ..dialect.errors import ShapeError
from ..dialect.ops_linear_algebra import TRANSPOSE_KINDS
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _transpose_kind(value: Any) -> str:
    """"NO_TRANSPOSE"/"TRANSPOSE"/"ADJOINT" in any case, or an enum member with that `.name`
    (XLA's TriangularSolveOptions.Transpose)."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in TRANSPOSE_KINDS:
        return name.upper()
    raise ShapeError("triangular_solve", [], f"transpose_a must be one of {TRANSPOSE_KINDS}, "
                     f"got {value!r}")


class LinearAlgebraMethods(Recorder):
    """cholesky and triangular_solve."""

    def cholesky(self, a: XlaOp, lower: bool = True) -> XlaOp:
        """Cholesky factor of each matrix of `a` (spec#cholesky): lower `l` with a = l l^H, or
        upper `u` with a = u^H u. Only that triangle of `a` is read; the other triangle of the
        result is zero; a matrix that is not positive definite gives all NaN (XLA's expander)."""
        a = self.check_operand("cholesky", a)
        return self.emit("cholesky", [a], {"lower": args.flag("cholesky", lower, "lower")})

    def triangular_solve(self, a: XlaOp, b: XlaOp, left_side: bool, lower: bool,
                         unit_diagonal: bool, transpose_a: Any) -> XlaOp:
        """Solve op(a) x = b (left_side) or x op(a) = b for x, a triangular (spec#triangular_solve).

        `transpose_a`: "NO_TRANSPOSE", "TRANSPOSE" or "ADJOINT" (op(a) = a, a^T, a^H).
        """
        a = self.check_operand("triangular_solve", a)
        b = self.check_operand("triangular_solve", b)
        name = "triangular_solve"
        return self.emit(name, [a, b], {
            "left_side": args.flag(name, left_side, "left_side"),
            "lower": args.flag(name, lower, "lower"),
            "unit_diagonal": args.flag(name, unit_diagonal, "unit_diagonal"),
            "transpose_a": _transpose_kind(transpose_a),
        })
