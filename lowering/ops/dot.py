"""Lowering of dot_general to named linalg contractions, or a linalg.generic otherwise.

Steps: convert the operands to the accumulation type, fill an init tensor
with zero, contract, and round to the result type if that differs.

Accumulation type (what XLA:CPU does, where it is documented by behaviour):
the result type, except that a float result narrower than f32 (f16/bf16)
accumulates in f32 and a float/complex result narrower than a float/complex
operand accumulates in the operand's width; either way the sum is rounded
once at the end. pred x pred -> pred is a logical or of ands, computed on
pred's one-byte storage (0/1 bytes; bitwise and/or keep them 0/1).

Named ops where the layout is the standard one (`linalg.matmul`,
`linalg.batch_matmul` with one leading batch dimension, `linalg.matvec`,
`linalg.vecmat`, `linalg.dot`); a matrix-vector product along A's minor dimension
sums in vector lanes (`dot_lanes`); anything else is a linalg.generic whose
indexing maps place every operand dimension directly, so no transpose is
materialised. Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, linalg, tensor
from mlir.dialects import complex as cx

from ...dialect.element_types import PrimitiveType
from ...dialect.ops_dot import DOT_FIELDS, DotDimensionNumbers, free_dimensions
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers, signless_type
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from . import dot_lanes, few_rows
from .elementwise import generic

P = PrimitiveType


def accumulation_type(lhs: PrimitiveType, rhs: PrimitiveType, result: PrimitiveType) -> PrimitiveType:
    """The type the products are summed in (see the module docstring)."""
    if result.is_complex:
        wide = any(t in (P.F64, P.C128) for t in (lhs, rhs))
        return P.C128 if wide or result == P.C128 else P.C64
    if result.is_floating:
        wide = any(t in (P.F64, P.C128) for t in (lhs, rhs))
        return P.F64 if wide or result == P.F64 else P.F32
    if result.is_sub_byte_int:
        # Summed in a byte (their storage), then truncated: the same sum modulo 2^width.
        return P.S8 if result.is_signed_int else P.U8
    return result  # integers wrap in the result type; pred is or-of-ands


def _tensor_type(shape: Shape, t: PrimitiveType) -> ir.Type:
    """The tensor type holding `shape` with elements `t`, in storage form (i8 for pred)."""
    return signless_type(ir.RankedTensorType.get(list(shape.dimensions), Elem(t).type))


def _convert(value: ir.Value, shape: Shape, src: PrimitiveType, dst: PrimitiveType) -> ir.Value:
    if src == dst:
        return value
    s, d = Elem(src), Elem(dst)
    return generic([value], [shape], shape.with_element_type(dst), _tensor_type(shape, dst),
                   lambda x: conversion.convert(s, d, x))


def _zero(t: PrimitiveType) -> ir.Value:
    """The scalar zero of `t` in storage form (i8 for pred)."""
    if t == P.PRED:
        return arith.constant(ir.IntegerType.get_signless(8), 0)
    # arith.constant needs a Python float for float types (an int aborts in MLIR's cast).
    return Elem(t).const(0 if t.is_integral else 0.0)


def _zero_filled(shape: Shape, t: PrimitiveType) -> ir.Value:
    tensor_type = ir.RankedTensorType(_tensor_type(shape, t))
    init = tensor.EmptyOp(list(shape.dimensions), tensor_type.element_type).result
    return linalg.fill(_zero(t), outs=[init])


def multiply_add(t: PrimitiveType) -> Callable[[ir.Value, ir.Value, ir.Value], ir.Value]:
    """acc + a * b in type t; or(acc, and(a, b)) for pred (on its storage bytes)."""
    if t == P.PRED:
        return lambda a, b, acc: arith.ori(acc, arith.andi(a, b))
    if t.is_complex:
        return lambda a, b, acc: cx.add(acc, cx.mul(a, b))
    if t.is_floating:
        return lambda a, b, acc: arith.addf(acc, arith.mulf(a, b))
    return lambda a, b, acc: arith.addi(acc, arith.muli(a, b))


def _named_contraction(d: DotDimensionNumbers, lhs_rank: int, rhs_rank: int) -> Callable | None:
    """The named linalg op computing this dot_general in its standard layout, if any."""
    contract = (d.lhs_contracting_dimensions, d.rhs_contracting_dimensions)
    batch = (d.lhs_batch_dimensions, d.rhs_batch_dimensions)
    if batch == ((), ()):
        return {
            (2, 2, (1,), (0,)): linalg.matmul,
            (2, 1, (1,), (0,)): linalg.matvec,
            (1, 2, (0,), (0,)): linalg.vecmat,
            (1, 1, (0,), (0,)): linalg.dot,
        }.get((lhs_rank, rhs_rank, *contract))
    if batch == ((0,), (0,)) and (lhs_rank, rhs_rank) == (3, 3) and contract == ((2,), (1,)):
        return linalg.batch_matmul
    return None


def _generic_contraction(d: DotDimensionNumbers, lhs: ir.Value, rhs: ir.Value, lhs_shape: Shape,
                         rhs_shape: Shape, init: ir.Value, t: PrimitiveType) -> ir.Value:
    """A linalg.generic over (output dims..., contracting dims...) reading operands in place."""
    lhs_free = free_dimensions(lhs_shape.rank, d, "lhs")
    rhs_free = free_dimensions(rhs_shape.rank, d, "rhs")
    n_batch, n_contract = len(d.lhs_batch_dimensions), len(d.lhs_contracting_dimensions)
    n_out = n_batch + len(lhs_free) + len(rhs_free)
    n_loops = n_out + n_contract

    def operand_map(rank: int, batch: tuple[int, ...], free: list[int], contracting: tuple[int, ...],
                    free_offset: int) -> ir.AffineMap:
        loop_of = {dim: k for k, dim in enumerate(batch)}
        loop_of.update({dim: free_offset + k for k, dim in enumerate(free)})
        loop_of.update({dim: n_out + k for k, dim in enumerate(contracting)})
        return ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(loop_of[i]) for i in range(rank)])

    maps = [
        operand_map(lhs_shape.rank, d.lhs_batch_dimensions, lhs_free, d.lhs_contracting_dimensions,
                    n_batch),
        operand_map(rhs_shape.rank, d.rhs_batch_dimensions, rhs_free, d.rhs_contracting_dimensions,
                    n_batch + len(lhs_free)),
        ir.AffineMap.get(n_loops, 0, [ir.AffineDimExpr.get(k) for k in range(n_out)]),
    ]
    op = linalg.GenericOp_([lhs, rhs], [init], maps, ["parallel"] * n_out + ["reduction"] * n_contract)
    block = op.regions[0].blocks[0]
    # Without contracting dimensions every loop is parallel and the body reads the zero
    # fill: lowering/passes/parallel_outputs.py replaces that read before fusion.
    with ir.InsertionPoint(block):
        linalg.YieldOp([multiply_add(t)(*block.arguments)])
    return op.results[0]


@lowers("dot_general")
def lower_dot_general(v: OpView) -> ir.Value:
    d = DotDimensionNumbers(*(v.attrs[name] for name in DOT_FIELDS))
    lhs_shape, rhs_shape, out = v.shapes["lhs"], v.shapes["rhs"], v.result_shape
    acc = accumulation_type(lhs_shape.element_type, rhs_shape.element_type, out.element_type)
    lhs = _convert(v.args["lhs"], lhs_shape, lhs_shape.element_type, acc)
    rhs = _convert(v.args["rhs"], rhs_shape, rhs_shape.element_type, acc)
    init = _zero_filled(out, acc)
    # Named ops multiply-add; a pred dot is or-of-ands, so it always takes the generic.
    named = None if acc == P.PRED else _named_contraction(d, lhs_shape.rank, rhs_shape.rank)
    vector = dot_lanes.vector_operand(d, lhs_shape, rhs_shape, acc)
    if vector is not None:
        add = arith.addf if acc.is_floating else arith.addi
        matrix_value, vector_value = (lhs, rhs) if vector == "rhs" else (rhs, lhs)
        result = dot_lanes.lane_dot(matrix_value, vector_value, len(d.lhs_batch_dimensions), _zero(acc),
                                    multiply_add(acc), add, vector_first=vector == "lhs")
    elif named in (linalg.matmul, linalg.vecmat) and few_rows.applies(lhs, rhs):
        result = few_rows.few_rows(lhs, rhs)
    elif named is not None:
        result = named(lhs, rhs, outs=[init])
    else:
        result = _generic_contraction(d, lhs, rhs, lhs_shape, rhs_shape, init, acc)
    if isinstance(result, (ir.Operation, ir.OpView)):
        result = result.result
    return _convert(result, out.with_element_type(acc), acc, out.element_type)
