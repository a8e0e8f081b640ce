"""Lowerings of cholesky and triangular_solve: scalar scf.for loops over tensors.

Both work on a [batch, rows, cols] view of their operands (the batch
dimensions collapsed into one) and build their result with `tensor.insert`
inside `scf.for` loops whose iteration arguments carry the result tensor;
one-shot bufferization turns that into in-place stores. Loops read exactly
the entries the algorithm needs, so only the chosen triangle of `a` is ever
read (and not its diagonal with `unit_diagonal`). f16/bf16 are computed in
f32 and rounded once at the end.

- cholesky: the Cholesky-Crout order, column by column: the pivot
  `sqrt(re(a[j,j]) - sum_k |l[j,k]|^2)`, then the column below it. The upper
  factor is the transpose of the lower factor of `a`'s transpose, as in XLA's
  CholeskyExpander (so `a = u^H u` for complex `a`). The result starts as
  zeros, so the other triangle is zero; a NaN pivot (the matrix is not
  positive definite) turns that matrix's whole result into NaN, as XLA does.
- triangular_solve: forward or back substitution, one right-hand side (a
  column of b for left_side, a row for the right side) at a time, in place in
  a copy of b. op(a) = a / a^T / a^H is applied in the index mapping.

Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor
from mlir.dialects import complex as cx
from mlir.dialects import math as mmath

from ...dialect.element_types import PrimitiveType
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers, signless_type
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from .elementwise import generic

P = PrimitiveType
Index = int | ir.Value


# -- helpers shared with the fft and rng lowerings ---------------------------------------------

def index(value: Index) -> ir.Value:
    """An `index` value: a Python int becomes a constant."""
    if isinstance(value, ir.Value):
        return value
    return arith.constant(ir.IndexType.get(), value)


def for_loop(lo: Index, hi: Index, inits: Sequence[ir.Value],
             body: Callable[..., Sequence[ir.Value]]) -> list[ir.Value]:
    """`scf.for iv in [lo, hi)` carrying `inits`; `body(iv, *carried)` returns the next values."""
    loop = scf.ForOp(index(lo), index(hi), index(1), list(inits))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(list(body(loop.induction_variable, *loop.inner_iter_args)))
    return list(loop.results)


def tensor_type(dims: Sequence[int], element_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(dims), element_type)


def element_type(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def reshape(value: ir.Value, dims: Sequence[int], groups: Sequence[Sequence[int]]) -> ir.Value:
    """A collapse (fewer dims) or expand (more dims) of `value` to `dims`, grouped as given
    (each group lists the dims of the higher-rank side that make one dim of the other)."""
    src = ir.RankedTensorType(value.type).shape
    result = tensor_type(dims, element_type(value))
    if list(src) == list(dims):
        return value
    if len(dims) < len(src):
        return tensor.CollapseShapeOp(result, value, reassociation(groups)).result
    return tensor.ExpandShapeOp(result, value, reassociation(groups), [], list(dims)).result


def as_batch(value: ir.Value, dims: Sequence[int], kept: int) -> ir.Value:
    """`value` of `dims` viewed as [prod(leading dims), *last `kept` dims]."""
    lead = len(dims) - kept
    target = [math.prod(dims[:lead])] + list(dims[lead:])
    if lead == 1:
        return value
    if lead == 0:  # a unit batch dimension in front
        return reshape(value, target, [[0, 1]] + [[i + 1] for i in range(1, kept)])
    return reshape(value, target, [list(range(lead))] + [[lead + i] for i in range(kept)])


def from_batch(value: ir.Value, dims: Sequence[int], kept: int) -> ir.Value:
    """The inverse of `as_batch`."""
    lead = len(dims) - kept
    if lead == 1:
        return value
    if lead == 0:
        return reshape(value, list(dims), [[0, 1]] + [[i + 1] for i in range(1, kept)])
    return reshape(value, list(dims), [list(range(lead))] + [[lead + i] for i in range(kept)])


def compute_type(t: PrimitiveType) -> PrimitiveType:
    """f16/bf16 are computed in f32 (XLA does the same) and rounded once."""
    return P.F32 if t in (P.F16, P.BF16) else t


def converted(value: ir.Value, shape: Shape, dst: PrimitiveType) -> ir.Value:
    """`value` (storage form) with its elements converted from `shape`'s type to `dst`."""
    src = shape.element_type
    if src == dst:
        return value
    out = shape.with_element_type(dst)
    out_type = signless_type(tensor_type(shape.dimensions, Elem(dst).type))
    return generic([value], [shape], out, out_type, lambda x: conversion.convert(Elem(src), Elem(dst), x))


class Field:
    """Scalar arithmetic of a float or complex type, with the real part type beside it."""

    def __init__(self, t: PrimitiveType) -> None:
        self.t = t
        self.elem = Elem(t)
        self.real = Elem(t.complex_component)
        self.is_complex = t.is_complex

    def const(self, value: float) -> ir.Value:
        if self.is_complex:
            return cx.create_(self.elem.type, self.real.const(value), self.real.const(0.0))
        return self.real.const(value)

    def nan(self) -> ir.Value:
        nan = self.real.const(float("nan"))
        return cx.create_(self.elem.type, nan, nan) if self.is_complex else nan

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return cx.mul(x, y) if self.is_complex else arith.mulf(x, y)

    def sub(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return cx.sub(x, y) if self.is_complex else arith.subf(x, y)

    def div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return cx.div(x, y) if self.is_complex else arith.divf(x, y)

    def conj(self, x: ir.Value) -> ir.Value:
        return cx.conj(x) if self.is_complex else x

    def re(self, x: ir.Value) -> ir.Value:
        return cx.re(x) if self.is_complex else x

    def abs2(self, x: ir.Value) -> ir.Value:
        """|x|^2 as a real value."""
        if not self.is_complex:
            return arith.mulf(x, x)
        re, im = cx.re(x), cx.im(x)
        return arith.addf(arith.mulf(re, re), arith.mulf(im, im))

    def div_real(self, x: ir.Value, d: ir.Value) -> ir.Value:
        """x / d for a real d: each part divided, no complex division."""
        if not self.is_complex:
            return arith.divf(x, d)
        return cx.create_(self.elem.type, arith.divf(cx.re(x), d), arith.divf(cx.im(x), d))

    def from_real(self, r: ir.Value) -> ir.Value:
        return cx.create_(self.elem.type, r, self.real.const(0.0)) if self.is_complex else r


def _filled(dims: Sequence[int], value: ir.Value) -> ir.Value:
    return linalg.fill(value, outs=[tensor.EmptyOp(list(dims), value.type).result])


# -- cholesky -----------------------------------------------------------------------------------

@lowers("cholesky")
def lower_cholesky(v: OpView) -> ir.Value:
    shape = v.shapes["a"]
    dims = shape.dimensions
    ct = compute_type(shape.element_type)
    f = Field(ct)
    a = as_batch(converted(v.args["a"], shape, ct), dims, 2)
    batch, n = math.prod(dims[:-2]), dims[-1]
    lower = v.attrs["lower"]
    i1 = ir.IntegerType.get_signless(1)

    def read_a(b: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        """a'[i, j] for i >= j, where a' is a (lower) or its transpose (upper)."""
        return tensor.extract(a, [b, i, j] if lower else [b, j, i])

    def one_matrix(b: ir.Value, result: ir.Value) -> list[ir.Value]:
        def column(j: ir.Value, out: ir.Value, failed: ir.Value) -> list[ir.Value]:
            (sum_sq,) = for_loop(0, j, [f.real.const(0.0)], lambda k, acc: [
                arith.addf(acc, f.abs2(tensor.extract(out, [b, j, k])))])
            pivot = mmath.sqrt(arith.subf(f.re(read_a(b, j, j)), sum_sq))
            failed = arith.ori(failed, arith.cmpf(arith.CmpFPredicate.UNO, pivot, pivot))
            out = tensor.insert(f.from_real(pivot), out, [b, j, j])

            def row(i: ir.Value, out: ir.Value) -> list[ir.Value]:
                (acc,) = for_loop(0, j, [read_a(b, i, j)], lambda k, acc: [f.sub(acc, f.mul(
                    tensor.extract(out, [b, i, k]), f.conj(tensor.extract(out, [b, j, k]))))])
                return [tensor.insert(f.div_real(acc, pivot), out, [b, i, j])]

            return [*for_loop(arith.addi(j, index(1)), n, [out], row), failed]

        out, failed = for_loop(0, n, [result, arith.constant(i1, 0)], column)
        # A NaN pivot: the whole matrix is NaN (XLA's CholeskyExpander selects a NaN matrix).
        if_op = scf.IfOp(failed, [out.type], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            nan = f.nan()
            (filled,) = for_loop(0, n, [out], lambda i, o: for_loop(
                0, n, [o], lambda k, o2: [tensor.insert(nan, o2, [b, i, k])]))
            scf.YieldOp([filled])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([out])
        return [if_op.results[0]]

    (result,) = for_loop(0, batch, [_filled([batch, n, n], f.const(0.0))], one_matrix)
    if not lower:
        init = tensor.EmptyOp([batch, n, n], f.elem.type).result
        result = linalg.transpose(result, outs=[init], permutation=[0, 2, 1])
        if not isinstance(result, ir.Value):  # the op (its `result` is a result list)
            result = result.results[0]
    result = from_batch(result, dims, 2)
    return converted(result, shape.with_element_type(ct), shape.element_type)


# -- triangular_solve --------------------------------------------------------------------------

@lowers("triangular_solve")
def lower_triangular_solve(v: OpView) -> ir.Value:
    a_shape, b_shape = v.shapes["a"], v.shapes["b"]
    ct = compute_type(a_shape.element_type)
    f = Field(ct)
    a = as_batch(converted(v.args["a"], a_shape, ct), a_shape.dimensions, 2)
    x0 = as_batch(converted(v.args["b"], b_shape, ct), b_shape.dimensions, 2)
    left, lower = v.attrs["left_side"], v.attrs["lower"]
    unit, kind = v.attrs["unit_diagonal"], v.attrs["transpose_a"]
    dims = b_shape.dimensions
    batch, m = math.prod(dims[:-2]), a_shape.dimensions[-1]
    rhs_count = dims[-1] if left else dims[-2]
    # op(a) is lower triangular when a is lower and not transposed, or upper and transposed.
    op_lower = lower == (kind == "NO_TRANSPOSE")
    # op(a) x = b eliminates from the first row when op(a) is lower; x op(a) = b is
    # op(a)^T x^T = b^T, which does when op(a) is upper.
    forward = op_lower if left else not op_lower

    def op_a(b: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        """op(a)[i, j], reading a only inside its `lower`/upper triangle (the callers ask for
        nothing else)."""
        if kind == "NO_TRANSPOSE":
            return tensor.extract(a, [b, i, j])
        value = tensor.extract(a, [b, j, i])
        return f.conj(value) if kind == "ADJOINT" else value

    def coefficient(b: ir.Value, p: ir.Value, q: ir.Value) -> ir.Value:
        """The coefficient of unknown q in equation p."""
        return op_a(b, p, q) if left else op_a(b, q, p)

    def at(b: ir.Value, s: ir.Value, p: ir.Value) -> list[ir.Value]:
        """Where unknown p of right-hand side s lives in x (and b)."""
        return [b, p, s] if left else [b, s, p]

    def one_rhs(b: ir.Value, s: ir.Value, x: ir.Value) -> list[ir.Value]:
        def step(t: ir.Value, x: ir.Value) -> list[ir.Value]:
            p = t if forward else arith.subi(index(m - 1), t)
            lo, hi = (index(0), p) if forward else (arith.addi(p, index(1)), index(m))
            (acc,) = for_loop(lo, hi, [tensor.extract(x, at(b, s, p))], lambda q, acc: [
                f.sub(acc, f.mul(coefficient(b, p, q), tensor.extract(x, at(b, s, q))))])
            if not unit:
                acc = f.div(acc, coefficient(b, p, p))
            return [tensor.insert(acc, x, at(b, s, p))]

        return for_loop(0, m, [x], step)

    (x,) = for_loop(0, batch, [x0], lambda b, x: for_loop(
        0, rhs_count, [x], lambda s, x2: one_rhs(b, s, x2)))
    x = from_batch(x, dims, 2)
    return converted(x, b_shape.with_element_type(ct), b_shape.element_type)
