"""Ops of the linear_algebra family: `cholesky` and `triangular_solve`.

Semantics (seeds 001/004 Cholesky and TriangularSolve, SEMANTICS.md 5.F):

- Both take batches of matrices: every dimension but the two minor ones is a
  batch dimension (rank >= 2; the seeds' "rank > 2" is a mistranslation of
  XLA's check, which accepts a single matrix). The element type is a float or
  complex type.
- cholesky(a, lower): `a = l . l^H` (lower) or `a = u^H . u` (upper); only the
  chosen triangle of `a` is read. As XLA's CholeskyExpander does, the other
  triangle of the result is zero, and a matrix that is not positive definite
  (a diagonal pivot whose square root is NaN) comes back all NaN.
- triangular_solve(a, b, left_side, lower, unit_diagonal, transpose_a) solves
  `op(a) . x = b` (left_side) or `x . op(a) = b` for x, with op(a) = a, a^T or
  a^H ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"); only the `lower`/upper
  triangle of `a` is read, and not its diagonal when `unit_diagonal`. a is
  [..., M, M]; b is [..., M, K] (left) or [..., K, M] (right), with the same
  batch dimensions and element type. The result has b's shape.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import BOOL, STR, OpDef, Operand, define
from .shape import Shape

P = PrimitiveType
TRANSPOSE_KINDS = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")
# Float and complex types; f16/bf16 are computed in f32 and rounded once.
ELEMENT_TYPES = (P.F16, P.BF16, P.F32, P.F64, P.C64, P.C128)


def _check_matrices(op: str, shapes: list[Shape], x: Shape, what: str) -> None:
    if not x.is_array():
        raise ShapeError(op, shapes, f"{what} must be an array, got {x}")
    if x.element_type not in ELEMENT_TYPES:
        raise ShapeError(op, shapes, f"{what} must have a floating-point or complex element type, "
                         f"got {x.element_type}")
    if x.rank < 2:
        raise ShapeError(op, shapes, f"{what} must have rank >= 2 (a batch of matrices), "
                         f"got rank {x.rank}")


def infer_cholesky(a: Shape, *, lower: bool) -> Shape:
    op = "cholesky"
    _check_matrices(op, [a], a, "a")
    if a.dimensions[-1] != a.dimensions[-2]:
        raise ShapeError(op, [a], f"a must be a batch of square matrices, got minor dimensions "
                         f"{a.dimensions[-2]}x{a.dimensions[-1]}")
    if not isinstance(lower, bool):
        raise ShapeError(op, [a], f"lower must be a bool, got {lower!r}")
    return a.with_default_layout()


def infer_triangular_solve(a: Shape, b: Shape, *, left_side: bool, lower: bool, unit_diagonal: bool,
                           transpose_a: str) -> Shape:
    op = "triangular_solve"
    shapes = [a, b]
    _check_matrices(op, shapes, a, "a")
    _check_matrices(op, shapes, b, "b")
    for name, value in (("left_side", left_side), ("lower", lower), ("unit_diagonal", unit_diagonal)):
        if not isinstance(value, bool):
            raise ShapeError(op, shapes, f"{name} must be a bool, got {value!r}")
    if transpose_a not in TRANSPOSE_KINDS:
        raise ShapeError(op, shapes, f"transpose_a must be one of {TRANSPOSE_KINDS}, got {transpose_a!r}")
    if a.element_type != b.element_type:
        raise ShapeError(op, shapes, f"a and b must have the same element type, got {a.element_type} "
                         f"and {b.element_type}")
    if a.rank != b.rank:
        raise ShapeError(op, shapes, f"a and b must have the same rank, got {a.rank} and {b.rank}")
    m = a.dimensions[-1]
    if a.dimensions[-2] != m:
        raise ShapeError(op, shapes, f"a must be a batch of square matrices, got minor dimensions "
                         f"{a.dimensions[-2]}x{m}")
    if a.dimensions[:-2] != b.dimensions[:-2]:
        raise ShapeError(op, shapes, f"a and b must have the same batch dimensions, got "
                         f"{list(a.dimensions[:-2])} and {list(b.dimensions[:-2])}")
    solved = -2 if left_side else -1
    if b.dimensions[solved] != m:
        side = "left" if left_side else "right"
        which = "second-minor" if left_side else "minor"
        raise ShapeError(op, shapes, f"with a on the {side} side, b's {which} dimension must be a's "
                         f"size {m}, got {b.dimensions[solved]}")
    return b.with_default_layout()


define(OpDef("cholesky", (Operand("a"),), {"lower": BOOL}, infer_cholesky,
             doc="Cholesky factor of a batch of Hermitian positive-definite matrices (spec#cholesky)."))
define(OpDef("triangular_solve", (Operand("a"), Operand("b")),
             {"left_side": BOOL, "lower": BOOL, "unit_diagonal": BOOL, "transpose_a": STR},
             infer_triangular_solve,
             doc="Solve op(a) x = b or x op(a) = b for triangular a (spec#triangular_solve)."))
