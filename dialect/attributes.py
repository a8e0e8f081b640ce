"""Conversion between Python attribute values and builtin MLIR attributes.

One pair of functions per `AttrKind` of the registry, plus the encoding and
reading of an op's operand groups. Imports `dialect.registry`, `dialect.shape`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir

from .element_types import PrimitiveType, dtype_of, type_from_mlir_name, type_of
from .mlir_types import to_mlir_type_text
from .registry import (
    BOOL,
    DICT,
    ELEMENT_TYPE,
    ELEMENTS,
    FLOAT,
    I64_ARRAY,
    INT,
    PAIRS,
    STR,
    SYMBOL,
    AttrKind,
    OpDef,
)
from .shape import Shape

#: Operand count of each declared operand, on ops with several variadic operand groups.
OPERAND_SEGMENTS = "operandSegmentSizes"


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def elements_attr(array: np.ndarray, shape: Shape) -> ir.Attribute:
    """Dense elements holding `array` exactly, bit for bit (NaN payloads, -0.0).

    A complex constant is held as its real view (a trailing dimension of 2): the
    Python bindings of LLVM 22 cannot read back a complex dense attribute.
    """
    if shape.element_type.is_complex:
        component = shape.element_type.complex_component
        real_view = np.ascontiguousarray(array, dtype=shape.dtype).view(dtype_of(component))
        return elements_attr(real_view.reshape(shape.dimensions + (2,)),
                             Shape.array(component, shape.dimensions + (2,)))
    tensor_type = to_mlir_type_text(shape)
    data = np.ascontiguousarray(array, dtype=shape.dtype).reshape(-1)
    if data.size == 0:
        return ir.Attribute.parse(f"dense<> : {tensor_type}")
    if shape.element_type == PrimitiveType.PRED:
        data = np.packbits(data, bitorder="little")  # MLIR stores i1 hex data bit-packed
        return ir.Attribute.parse(f'dense<"0x{data.tobytes().hex().upper()}"> : {tensor_type}')
    # Raw bytes with an explicit type: exact for every type (bf16, complex, NaN payloads).
    return ir.DenseElementsAttr.get(data.view(np.uint8), type=ir.Type.parse(tensor_type))


def to_mlir(kind: AttrKind, value: Any, shape: Shape | None = None) -> ir.Attribute:
    if kind is I64_ARRAY:
        return ir.DenseI64ArrayAttr.get([int(v) for v in value])
    if kind is INT:
        return _i64(value)
    if kind is FLOAT:
        return ir.FloatAttr.get_f64(float(value))
    if kind is BOOL:
        return ir.BoolAttr.get(bool(value))
    if kind is STR:
        return ir.StringAttr.get(str(value))
    if kind is ELEMENT_TYPE:
        return ir.TypeAttr.get(ir.Type.parse(type_of(value).mlir_name))
    if kind is ELEMENTS:
        assert shape is not None
        return elements_attr(np.asarray(value), shape)
    if kind is PAIRS:
        flat = [int(x) for pair in value for x in pair]
        return ir.DenseI64ArrayAttr.get(flat)
    if kind is SYMBOL:
        return ir.FlatSymbolRefAttr.get(str(value))
    if kind is DICT:
        return ir.DictAttr.get({k: _dict_entry(v) for k, v in value.items()})
    raise TypeError(f"unknown attribute kind {kind.name}")


def _dict_entry(value: Any) -> ir.Attribute:
    if isinstance(value, (int, np.integer)):
        return _i64(value)
    return ir.DenseI64ArrayAttr.get([int(v) for v in value])


def from_mlir(kind: AttrKind, attr: ir.Attribute) -> Any:
    if kind is I64_ARRAY:
        return tuple(ir.DenseI64ArrayAttr(attr))
    if kind is INT:
        return ir.IntegerAttr(attr).value
    if kind is FLOAT:
        return ir.FloatAttr(attr).value
    if kind is BOOL:
        return ir.BoolAttr(attr).value
    if kind is STR:
        return ir.StringAttr(attr).value
    if kind is ELEMENT_TYPE:
        return type_from_mlir_name(str(ir.TypeAttr(attr).value))
    if kind is ELEMENTS:
        return attr  # consumers (lowering) re-type it; no Python copy of the data is needed
    if kind is PAIRS:
        flat = tuple(ir.DenseI64ArrayAttr(attr))
        return tuple(zip(flat[0::2], flat[1::2]))
    if kind is SYMBOL:
        return ir.FlatSymbolRefAttr(attr).value
    if kind is DICT:
        return {na.name: _dict_value(na.attr) for na in ir.DictAttr(attr)}
    raise TypeError(f"unknown attribute kind {kind.name}")


def _dict_value(attr: ir.Attribute) -> Any:
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    return tuple(ir.DenseI64ArrayAttr(attr))


def needs_segment_sizes(opdef: OpDef) -> bool:
    """Only an op with two or more variadic groups needs its group sizes spelled out:
    with one, the variadic group takes whatever the fixed operands leave."""
    return sum(o.variadic for o in opdef.operands) > 1


def segment_sizes_attr(opdef: OpDef, sizes: list[int]) -> dict[str, ir.Attribute]:
    """The attribute (if any) recording the operand count of each declared operand."""
    if not needs_segment_sizes(opdef):
        return {}
    return {OPERAND_SEGMENTS: ir.DenseI32ArrayAttr.get(sizes)}


def operand_groups(opdef: OpDef, operation: ir.Operation) -> dict[str, Any]:
    """The op's operands by registry operand name (a variadic name maps to a list).

    Raises ValueError when the operands do not fit the registry's groups: `dialect.verify`
    reports it with the op's location."""
    values = list(operation.operands)
    fixed = sum(not o.variadic for o in opdef.operands)
    if needs_segment_sizes(opdef):
        sizes = _segment_sizes(opdef, operation, len(values))
    elif any(o.variadic for o in opdef.operands):
        if len(values) < fixed:
            raise ValueError(f"takes at least {fixed} operand{'s' * (fixed != 1)} "
                             f"({_signature(opdef)}), got {len(values)}")
        sizes = [len(values) - fixed if o.variadic else 1 for o in opdef.operands]
    else:
        if len(values) != fixed:
            raise ValueError(f"takes {fixed} operand{'s' * (fixed != 1)} ({_signature(opdef)}), "
                             f"got {len(values)}")
        return {o.name: values[i] for i, o in enumerate(opdef.operands)}
    groups: dict[str, Any] = {}
    pos = 0
    for operand, count in zip(opdef.operands, sizes):
        chunk = values[pos : pos + count]
        groups[operand.name] = chunk if operand.variadic else chunk[0]
        pos += count
    return groups


def _signature(opdef: OpDef) -> str:
    return ", ".join(o.name + ("..." if o.variadic else "") for o in opdef.operands) or "none"


def _segment_sizes(opdef: OpDef, operation: ir.Operation, count: int) -> list[int]:
    where = f"{OPERAND_SEGMENTS} (one operand count per group: {_signature(opdef)})"
    if OPERAND_SEGMENTS not in operation.attributes:
        raise ValueError(f"needs the attribute {where}")
    try:
        sizes = list(ir.DenseI32ArrayAttr(operation.attributes[OPERAND_SEGMENTS]))
    except ValueError:
        raise ValueError(f"{where} must be an array<i32: ...>, got "
                         f"{operation.attributes[OPERAND_SEGMENTS]}") from None
    if len(sizes) != len(opdef.operands) or any(s < 0 for s in sizes) or any(
            s != 1 for s, o in zip(sizes, opdef.operands) if not o.variadic):
        raise ValueError(f"{where} is {sizes}")
    if sum(sizes) != count:
        raise ValueError(f"{where} is {sizes}, which sums to {sum(sizes)}, but the op has "
                         f"{count} operands")
    return sizes


_KIND_TEXT = {
    I64_ARRAY: "array<i64: ...>", INT: "an integer (1 : i64)", FLOAT: "a float (1.0 : f64)",
    BOOL: "true or false", STR: 'a string ("...")', ELEMENT_TYPE: "a type (f32)",
    ELEMENTS: "dense<...> elements", PAIRS: "array<i64: ...> of pairs", SYMBOL: "a symbol (@name)",
    DICT: "a dictionary {...}",
}


def attribute_values(opdef: OpDef, operation: ir.Operation) -> dict[str, Any]:
    """The op's registry attributes as Python values (ELEMENTS needs the result shape).

    Raises ValueError naming the attribute when one is missing or of the wrong kind."""
    result: dict[str, Any] = {}
    for name, kind in opdef.attrs.items():
        attr = _attribute(operation, name, _KIND_TEXT[kind])
        try:
            result[name] = from_mlir(kind, attr)
        except ValueError:
            raise ValueError(f"attribute {name!r} must be {_KIND_TEXT[kind]}, got {attr}") from None
    for name in opdef.computations:
        attr = _attribute(operation, name, "a symbol (@name)")
        try:
            if isinstance(attr, ir.ArrayAttr):
                result[name] = [ir.FlatSymbolRefAttr(a).value for a in attr]
            else:
                result[name] = ir.FlatSymbolRefAttr(attr).value
        except ValueError:
            raise ValueError(f"attribute {name!r} must be a symbol (@name) or an array of "
                             f"them, got {attr}") from None
    return result


def _attribute(operation: ir.Operation, name: str, kind: str) -> ir.Attribute:
    if name not in operation.attributes:
        raise ValueError(f"missing attribute {name!r} ({kind}); every attribute is always present")
    return operation.attributes[name]
