"""Conversion between Python attribute values and builtin MLIR attributes.

One pair of functions per `AttrKind` of the registry, plus the reading of an
op's operand groups. Imports `dialect.registry`, `dialect.shape`,
`dialect.irdl`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir

from .element_types import PrimitiveType, dtype_of, type_from_mlir_name, type_of
from .irdl import MAX_RUNS, OPERAND_SEGMENTS
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


def operand_groups(opdef: OpDef, operation: ir.Operation) -> dict[str, list[ir.Value]]:
    """The op's operands by registry operand name (a variadic name maps to a list)."""
    values = list(operation.operands)
    if not any(o.variadic for o in opdef.operands):
        return {o.name: values[i] for i, o in enumerate(opdef.operands)}
    sizes = list(ir.DenseI32ArrayAttr(operation.attributes[OPERAND_SEGMENTS]))
    groups: dict[str, Any] = {}
    pos = 0
    seg = 0
    for operand in opdef.operands:
        count = sum(sizes[seg : seg + MAX_RUNS]) if operand.variadic else 1
        seg += MAX_RUNS if operand.variadic else 1
        chunk = values[pos : pos + count]
        groups[operand.name] = chunk if operand.variadic else chunk[0]
        pos += count
    return groups


def attribute_values(opdef: OpDef, operation: ir.Operation) -> dict[str, Any]:
    """The op's registry attributes as Python values (ELEMENTS needs the result shape)."""
    result: dict[str, Any] = {}
    for name, kind in opdef.attrs.items():
        result[name] = from_mlir(kind, operation.attributes[name])
    for name in opdef.computations:
        attr = operation.attributes[name]
        if isinstance(attr, ir.ArrayAttr):
            result[name] = [ir.FlatSymbolRefAttr(a).value for a in attr]
        else:
            result[name] = ir.FlatSymbolRefAttr(attr).value
    return result

