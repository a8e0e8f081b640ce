"""Scalars between tensors and scalar code: pred is stored as i8, bf16 as i16, the sub-byte
integers and the narrow floats as i8 (the low bits, the rest zero, as ml_dtypes stores
them) in tensors (see `patterns.framework.signless_type`), but computed as i1, bf16,
i4/i2 and f8E5M2/f4E2M1FN... Imports `dialect`."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ...dialect.element_types import PrimitiveType


def from_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A scalar read from a tensor, in the type scalar code computes with
    (i1 for pred, bf16 for bf16, i4 for s4/u4, f8E5M2 for f8e5m2; see
    `framework.signless_type`)."""
    if t == PrimitiveType.PRED and value.type != _int(1):
        return arith.trunci(_int(1), value)
    if t == PrimitiveType.BF16 and value.type != ir.BF16Type.get():
        return arith.bitcast(ir.BF16Type.get(), value)
    if (t.is_sub_byte_int or t.is_narrow_float) and value.type == _int(8):
        bits = value if t.bit_width == 8 else arith.trunci(_int(t.bit_width), value)
        return bits if t.is_sub_byte_int else arith.bitcast(ir.Type.parse(t.mlir_name), bits)
    return value


def to_storage(value: ir.Value, t: PrimitiveType) -> ir.Value:
    """A computed scalar in the type tensors store (i8 for pred, i16 for bf16, i8 with
    zero high bits for the sub-byte integers and the narrow floats)."""
    if t == PrimitiveType.PRED and value.type == _int(1):
        return arith.extui(_int(8), value)
    if t == PrimitiveType.BF16 and value.type == ir.BF16Type.get():
        return arith.bitcast(_int(16), value)
    if (t.is_sub_byte_int or t.is_narrow_float) and value.type != _int(8):
        bits = value if t.is_sub_byte_int else arith.bitcast(_int(t.bit_width), value)
        return bits if t.bit_width == 8 else arith.extui(_int(8), bits)
    return value


def _int(bits: int) -> ir.Type:
    return ir.IntegerType.get_signless(bits)
