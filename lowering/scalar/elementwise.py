"""The one dispatch table of the elementwise ops: op name -> scalar emitter.

Read by the tensor lowering (`lowering.ops.elementwise`: the body of one
`linalg.generic`) and by sub-computations emitted as scalar code
(`lowering.patterns.computations`: `add` as one `arith.addf` in a reduction
body), so an op's scalar semantics are defined once. Imports `dialect`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir.dialects import arith

from ...dialect.element_types import PrimitiveType
from . import arithmetic, conversion
from .arithmetic import Elem


@dataclass(frozen=True)
class ScalarOp:
    """What an emitter needs of one op: its operands' and result's element types and its
    attributes (as `dialect.attributes.attribute_values` gives them)."""

    operand_types: Sequence[PrimitiveType]
    result_type: PrimitiveType
    attrs: Mapping[str, Any] = field(default_factory=dict)


#: `emitter(op, scalars)`: the result scalar, from the operands' scalars in compute types.
ScalarEmitter = Callable[[ScalarOp, Sequence[ir.Value]], ir.Value]


def _unary(fn: Callable[..., ir.Value]) -> ScalarEmitter:
    return lambda op, xs: fn(Elem(op.operand_types[0]), xs[0])


def _binary(fn: Callable[..., ir.Value]) -> ScalarEmitter:
    return lambda op, xs: fn(Elem(op.operand_types[0]), xs[0], xs[1])


def _compare(op: ScalarOp, xs: Sequence[ir.Value]) -> ir.Value:
    return arithmetic.compare(Elem(op.operand_types[0]), xs[0], xs[1],
                              op.attrs["comparison_direction"], op.attrs["compare_type"])


def _reduce_precision(op: ScalarOp, xs: Sequence[ir.Value]) -> ir.Value:
    return conversion.reduce_precision(Elem(op.operand_types[0]), xs[0], op.attrs["exponent_bits"],
                                       op.attrs["mantissa_bits"])


ELEMENTWISE: dict[str, ScalarEmitter] = {
    **{name: _unary(fn) for name, fn in arithmetic.UNARY.items()},
    **{name: _binary(fn) for name, fn in arithmetic.BINARY.items()},
    "complex": lambda op, xs: arithmetic.complex_create(Elem(op.result_type), xs[0], xs[1]),
    "compare": _compare,
    "select": lambda op, xs: arith.select(xs[0], xs[1], xs[2]),
    # clamp(min, operand, max): the kind is the operand's (min/max may be scalars of it).
    "clamp": lambda op, xs: arithmetic.clamp(Elem(op.operand_types[1]), xs[0], xs[1], xs[2]),
    "convert": lambda op, xs: conversion.convert(Elem(op.operand_types[0]), Elem(op.result_type), xs[0]),
    "reduce_precision": _reduce_precision,
}
