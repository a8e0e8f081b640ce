"""Scalars between tensors and scalar code: pred is stored as i8 and bf16 as i16 in tensors
(see `patterns.framework.signless_type`), but computed as i1 and bf16. Imports `dialect`."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ...dialect.element_types import PrimitiveType


def from_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A scalar read from a tensor, in the type scalar code computes with
    (i1 for pred, bf16 for bf16; see `framework.signless_type`)."""
    if t == PrimitiveType.PRED and value.type != _I1():
        return arith.trunci(_I1(), value)
    if t == PrimitiveType.BF16 and value.type != ir.BF16Type.get():
        return arith.bitcast(ir.BF16Type.get(), value)
    return value


def to_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A computed scalar in the type tensors store (i8 for pred, i16 for bf16)."""
    if t == PrimitiveType.PRED and value.type == _I1():
        return arith.extui(ir.IntegerType.get_signless(8), value)
    if t == PrimitiveType.BF16 and value.type == ir.BF16Type.get():
        return arith.bitcast(ir.IntegerType.get_signless(16), value)
    return value


def _I1() -> ir.Type:  # noqa: N802 - a type, named as MLIR spells it
    return ir.IntegerType.get_signless(1)
